//! The commands a maintainer gives in comments, as stories against the
//! real `forgehand serve` fed by the fake forges: plan then go, retry,
//! commands with nothing to act on, a request on the bot's pull request,
//! and a newer request superseding one still waiting.

use std::time::{Duration, Instant};

use forgehand_tests::fake_forge::Kind;
use forgehand_tests::model_server::Step;
use forgehand_tests::project::{document_add_script, good_script};
use forgehand_tests::story::{end_held_command, held_command, only, Story, MAINTAINER};
use insta::{allow_duplicates, assert_snapshot};
use serde_json::{json, Value};

async fn plan_then_go_proposes_first_and_carries_the_plan_out(kind: Kind) {
    let mut script = vec![
        Step::call("read_file", json!({"path": "calc.sh"})),
        Step::finish(
            "1. In `calc.sh`, make `add` use `+`.\n2. Run `sh test.sh`.",
            "Fix add",
        ),
    ];
    script.extend(good_script());
    let story = Story::start(kind, script).await;
    story.comment(1, MAINTAINER, "/forgehand plan").await;
    let jobs = story.settled().await;
    let plan = only(&jobs, "command.plan");
    assert_eq!(plan["state"], "succeeded", "{plan:#}");
    assert_eq!(plan["result"]["outcome"], "planned");
    allow_duplicates!(assert_snapshot!(story.said(1), @"
    ━━ comment 1 ━━
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [ ] working copy ← now
    - [ ] environment
    - [ ] agent

    <!-- forgehand:job:1 -->
    ── edited ──
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] working copy
    - [x] environment
    - [ ] agent ← now

    <!-- forgehand:job:1 -->
    ── edited ──
    📋 **Here is my plan.** Nothing is changed yet.

    1. In `calc.sh`, make `add` use `+`.
    2. Run `sh test.sh`.

    Say `/forgehand go` (or `@forgehand go`) to carry it out, or comment to change it and ask `/forgehand plan` again.

    <!-- forgehand:job:1 -->
    "));
    assert!(story.pulls().is_empty(), "a plan changes nothing");
    assert_eq!(story.branches().await, ["main"]);

    story.comment(1, MAINTAINER, "/forgehand go").await;
    let jobs = story.settled().await;
    let go = only(&jobs, "command.go");
    assert_eq!(go["state"], "succeeded", "{go:#}");
    assert_eq!(story.pulls().len(), 1);
    let said = story.said(1);
    match kind {
        Kind::GitHub => assert_snapshot!(said, @"
        ━━ comment 1 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now

        <!-- forgehand:job:1 -->
        ── edited ──
        📋 **Here is my plan.** Nothing is changed yet.

        1. In `calc.sh`, make `add` use `+`.
        2. Run `sh test.sh`.

        Say `/forgehand go` (or `@forgehand go`) to carry it out, or comment to change it and ask `/forgehand plan` again.

        <!-- forgehand:job:1 -->
        ━━ comment 2 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [ ] gate, commit and push ← now
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [x] gate, commit and push
        - [ ] pull request ← now

        <!-- forgehand:job:2 -->
        ── edited ──
        ✅ Opened #2: https://github.invalid/acme/demo/pull/2

        - Tests: none run by Forgehand; the agent's `sh test.sh` exited 0 in its own sandbox

        <!-- forgehand:job:2 -->
        "),
        Kind::Gitea => assert_snapshot!(said, @"
        ━━ comment 1 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now

        <!-- forgehand:job:1 -->
        ── edited ──
        📋 **Here is my plan.** Nothing is changed yet.

        1. In `calc.sh`, make `add` use `+`.
        2. Run `sh test.sh`.

        Say `/forgehand go` (or `@forgehand go`) to carry it out, or comment to change it and ask `/forgehand plan` again.

        <!-- forgehand:job:1 -->
        ━━ comment 2 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [ ] gate, commit and push ← now
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [x] gate, commit and push
        - [ ] pull request ← now

        <!-- forgehand:job:2 -->
        ── edited ──
        ✅ Opened #2: http://gitea.invalid/acme/demo/pulls/2

        - Tests: none run by Forgehand; the agent's `sh test.sh` exited 0 in its own sandbox

        <!-- forgehand:job:2 -->
        "),
    }
    allow_duplicates!(assert_snapshot!(story.pull_request(2), @r##"
        #2 by forgehand, forgehand/1-fix-add → main
        # Fix add in calc.sh

        `add` subtracted; now it adds, and `sh test.sh` passes.

        Closes #1

        **Files changed**

        - `calc.sh`

        **Testing** (what Forgehand saw run, not what the agent says)

        No environment: the tests were not run — declare one in `.forgehand.toml`, for example:

        ```text
        [environment]
        packages = []
        setup = "# the command that installs the dependencies"
        test = "# the command that runs the tests"
        # the files the setup reads besides the manifests it finds
        inputs = []
        ```

        Forgehand ran no test of its own (the repository declares no test command, and none was detected): this change is untested. The agent's runs, in its own sandbox, as its shell reported them:

        | Command | Run by | Exit status |
        | --- | --- | --- |
        | `sh test.sh` | agent | 0 |

        ---
        <sub>Forgehand · namespace sandbox, shared kernel · 5 turns · [tokens] · unpriced · [duration]</sub>
        "##));
    // The run that carried it out was given the approved plan.
    let requests = story.model.requests();
    let first_of_go = &requests[2].body;
    assert!(
        first_of_go.to_string().contains("a maintainer approved it")
            && first_of_go.to_string().contains("make `add` use `+`"),
        "{first_of_go:#}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn github_plan_then_go_proposes_first_and_carries_the_plan_out() {
    plan_then_go_proposes_first_and_carries_the_plan_out(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_plan_then_go_proposes_first_and_carries_the_plan_out() {
    plan_then_go_proposes_first_and_carries_the_plan_out(Kind::Gitea).await;
}

async fn go_without_a_plan_and_stop_without_a_job_say_so(kind: Kind) {
    let story = Story::start(kind, vec![]).await;
    // One at a time: a stop would stop a `go` still at work.
    for command in ["go", "stop", "help"] {
        story
            .comment(1, MAINTAINER, &format!("/forgehand {command}"))
            .await;
        story.settled().await;
    }
    assert_eq!(story.bot_comments(1).len(), 3);
    allow_duplicates!(assert_snapshot!(story.said(1), @"
        ━━ comment 1 ━━
        @maintainer there is no plan to go ahead with on #1: ask `/forgehand plan` first.
        ━━ comment 2 ━━
        @maintainer there is nothing to stop: no job of mine is running or waiting on #1.
        ━━ comment 3 ━━
        **What I understand**

        Write a command at the start of a line in a comment:

        | Command | What it does |
        | --- | --- |
        | `/forgehand fix [instructions]` | Work on this issue and open a pull request. Anything after `fix` is passed on as instructions. |
        | `/forgehand plan [instructions]` | Write a plan first and wait for `go` before changing any code. |
        | `/forgehand go` | Go ahead with the plan. |
        | `/forgehand stop` | Stop what I am doing. |
        | `/forgehand retry` | Try the last run again. |
        | `/forgehand allow-sensitive` | Let my changes to CI definitions, agent instructions, CODEOWNERS and build entry points be pushed (they are always listed in the pull request). |
        | `/forgehand allow-destructive` | Let my change be pushed though it deletes or empties most of the repository's files. |
        | `/forgehand help` | Show this message. |

        You can also mention me: `@forgehand fix the flaky login test`, or ask in plain words, like `@forgehand why does the build fail on Windows?`

        Instructions may go on over the next lines, up to a blank line. Commands inside code blocks, `inline code`, `>` quotes and HTML comments are ignored, and case does not matter.
        "));
    assert!(story.model.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn github_go_without_a_plan_and_stop_without_a_job_say_so() {
    go_without_a_plan_and_stop_without_a_job_say_so(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_go_without_a_plan_and_stop_without_a_job_say_so() {
    go_without_a_plan_and_stop_without_a_job_say_so(Kind::Gitea).await;
}

async fn retry_runs_the_failed_job_again(kind: Kind) {
    let mut script = vec![
        Step::Fail {
            status: 500,
            retry_after: None,
        },
        Step::Fail {
            status: 500,
            retry_after: None,
        },
    ];
    script.extend(good_script());
    let story = Story::start(kind, script).await;
    story.label(1).await;
    let jobs = story.settled().await;
    let first = only(&jobs, "labeled");
    assert_eq!(first["state"], "failed", "{first:#}");
    assert!(first["last_error"]
        .as_str()
        .unwrap()
        .starts_with("model_error: "));

    story.comment(1, MAINTAINER, "/forgehand retry").await;
    let jobs = story.settled().await;
    let retry = only(&jobs, "command.retry");
    assert_eq!(retry["state"], "succeeded", "{retry:#}");
    assert_eq!(story.pulls().len(), 1);
    let statuses = story.status_comments(1);
    assert_eq!(statuses.len(), 2, "one per job: {statuses:#?}");
    let said = story.said(1);
    match kind {
        Kind::GitHub => assert_snapshot!(said, @"
        ━━ comment 1 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:1 -->
        ── edited ──
        ❌ Stopped: `model_error`. the model's API failed or answered what cannot be used; the job's record (`GET /api/jobs/<id>`) and the log have its answer

        <!-- forgehand:job:1 -->
        ━━ comment 2 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [ ] gate, commit and push ← now
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [x] gate, commit and push
        - [ ] pull request ← now

        <!-- forgehand:job:2 -->
        ── edited ──
        ✅ Opened #2: https://github.invalid/acme/demo/pull/2

        - Tests: none run by Forgehand; the agent's `sh test.sh` exited 0 in its own sandbox

        <!-- forgehand:job:2 -->
        "),
        Kind::Gitea => assert_snapshot!(said, @"
        ━━ comment 1 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:1 -->
        ── edited ──
        ❌ Stopped: `model_error`. the model's API failed or answered what cannot be used; the job's record (`GET /api/jobs/<id>`) and the log have its answer

        <!-- forgehand:job:1 -->
        ━━ comment 2 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [ ] gate, commit and push ← now
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [x] gate, commit and push
        - [ ] pull request ← now

        <!-- forgehand:job:2 -->
        ── edited ──
        ✅ Opened #2: http://gitea.invalid/acme/demo/pulls/2

        - Tests: none run by Forgehand; the agent's `sh test.sh` exited 0 in its own sandbox

        <!-- forgehand:job:2 -->
        "),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn github_retry_runs_the_failed_job_again() {
    retry_runs_the_failed_job_again(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_retry_runs_the_failed_job_again() {
    retry_runs_the_failed_job_again(Kind::Gitea).await;
}

async fn a_request_on_the_bots_pull_request_is_a_follow_up_commit(kind: Kind) {
    let mut script = good_script();
    script.extend(document_add_script());
    let story = Story::start(kind, script).await;
    story.label(1).await;
    story.settled().await;
    story
        .comment(2, MAINTAINER, "@forgehand please document add too")
        .await;
    let jobs = story.settled().await;
    let job = only(&jobs, "request");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(
        story.log_of("forgehand/1-fix-add").await,
        ["Document add", "Fix add in calc.sh", "start"]
    );
    assert_eq!(story.pulls().len(), 1);
    let said = story.said(2);
    match kind {
        Kind::GitHub => assert_snapshot!(said, @"
        ━━ comment 1 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [ ] gate, commit and push ← now

        <!-- forgehand:job:2 -->
        ── edited ──
        ✅ Updated #2: https://github.invalid/acme/demo/pull/2

        - Tests: nothing was run that tests the change

        <!-- forgehand:job:2 -->
        "),
        Kind::Gitea => assert_snapshot!(said, @"
        ━━ comment 1 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [ ] gate, commit and push ← now

        <!-- forgehand:job:2 -->
        ── edited ──
        ✅ Updated #2: http://gitea.invalid/acme/demo/pulls/2

        - Tests: nothing was run that tests the change

        <!-- forgehand:job:2 -->
        "),
    }
    allow_duplicates!(assert_snapshot!(story.pull_request(2), @r##"
        #2 by forgehand, forgehand/1-fix-add → main
        # Fix add in calc.sh

        `add` subtracted; now it adds, and `sh test.sh` passes.

        Closes #1

        **Files changed**

        - `calc.sh`

        **Testing** (what Forgehand saw run, not what the agent says)

        No environment: the tests were not run — declare one in `.forgehand.toml`, for example:

        ```text
        [environment]
        packages = []
        setup = "# the command that installs the dependencies"
        test = "# the command that runs the tests"
        # the files the setup reads besides the manifests it finds
        inputs = []
        ```

        Forgehand ran no test of its own (the repository declares no test command, and none was detected): this change is untested. The agent's runs, in its own sandbox, as its shell reported them:

        | Command | Run by | Exit status |
        | --- | --- | --- |
        | `sh test.sh` | agent | 0 |

        ---
        <sub>Forgehand · namespace sandbox, shared kernel · 5 turns · [tokens] · unpriced · [duration]</sub>
        "##));
}

#[tokio::test(flavor = "multi_thread")]
async fn github_a_request_on_the_bots_pull_request_is_a_follow_up_commit() {
    a_request_on_the_bots_pull_request_is_a_follow_up_commit(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_a_request_on_the_bots_pull_request_is_a_follow_up_commit() {
    a_request_on_the_bots_pull_request_is_a_follow_up_commit(Kind::Gitea).await;
}

async fn the_newest_waiting_request_supersedes_the_older_one(kind: Kind) {
    // Its own number per forge: the two stories run side by side.
    let needle = match kind {
        Kind::GitHub => "515151",
        Kind::Gitea => "515152",
    };
    // The first job's command lasts until the test ends it, once both
    // requests are in: they come while it runs however slow the machine.
    let mut script = vec![Step::call("bash", json!({"command": held_command(needle)}))];
    script.extend(good_script());
    script.extend(document_add_script());
    let story = Story::start(kind, script).await;
    story.label(1).await;
    story.wait_for_held_command(needle).await;
    // Two requests while the first job runs: only the newer one is done.
    story
        .comment(1, MAINTAINER, "@forgehand also make it print a newline")
        .await;
    story
        .comment(1, MAINTAINER, "@forgehand actually, just document add")
        .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while end_held_command(needle) == 0 {
        assert!(
            Instant::now() < deadline,
            "hung: the first job's command never showed"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let jobs = story.settled().await;
    let requests: Vec<&Value> = jobs.iter().filter(|j| j["kind"] == "request").collect();
    assert_eq!(requests.len(), 2, "{jobs:#?}");
    let (older, newer) = (requests[0], requests[1]);
    assert_eq!(older["state"], "cancelled", "{older:#}");
    assert_eq!(
        older["last_error"],
        format!("superseded by job {}, a newer request", newer["id"])
    );
    assert_eq!(newer["state"], "succeeded", "{newer:#}");
    assert_eq!(
        story.model.left(),
        0,
        "the older request never reached the model"
    );
    assert_eq!(
        story.log_of("forgehand/1-fix-add").await,
        ["Document add", "Fix add in calc.sh", "start"]
    );
    let said = story.said(1);
    match kind {
        Kind::GitHub => assert_snapshot!(said, @"
        ━━ comment 1 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [ ] gate, commit and push ← now
        - [ ] pull request

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [x] gate, commit and push
        - [ ] pull request ← now

        <!-- forgehand:job:1 -->
        ── edited ──
        ✅ Opened #2: https://github.invalid/acme/demo/pull/2

        - Tests: none run by Forgehand; the agent's `sh test.sh` exited 0 in its own sandbox

        <!-- forgehand:job:1 -->
        ━━ comment 2 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:3 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:3 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [ ] gate, commit and push ← now
        - [ ] pull request

        <!-- forgehand:job:3 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [x] gate, commit and push
        - [ ] pull request ← now

        <!-- forgehand:job:3 -->
        ── edited ──
        ✅ Opened #2: https://github.invalid/acme/demo/pull/2

        - Tests: nothing was run that tests the change

        <!-- forgehand:job:3 -->
        "),
        Kind::Gitea => assert_snapshot!(said, @"
        ━━ comment 1 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [ ] gate, commit and push ← now
        - [ ] pull request

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [x] gate, commit and push
        - [ ] pull request ← now

        <!-- forgehand:job:1 -->
        ── edited ──
        ✅ Opened #2: http://gitea.invalid/acme/demo/pulls/2

        - Tests: none run by Forgehand; the agent's `sh test.sh` exited 0 in its own sandbox

        <!-- forgehand:job:1 -->
        ━━ comment 2 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:3 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [ ] agent ← now
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        <!-- forgehand:job:3 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [ ] gate, commit and push ← now
        - [ ] pull request

        <!-- forgehand:job:3 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [ ] tests: none run
        - [x] gate, commit and push
        - [ ] pull request ← now

        <!-- forgehand:job:3 -->
        ── edited ──
        ✅ Opened #2: http://gitea.invalid/acme/demo/pulls/2

        - Tests: nothing was run that tests the change

        <!-- forgehand:job:3 -->
        "),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn github_the_newest_waiting_request_supersedes_the_older_one() {
    the_newest_waiting_request_supersedes_the_older_one(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_the_newest_waiting_request_supersedes_the_older_one() {
    the_newest_waiting_request_supersedes_the_older_one(Kind::Gitea).await;
}
