//! Forgehand as a maintainer meets it, on GitHub and on Gitea: the real
//! `forgehand serve` binary, fed signed webhooks by a fake forge whose
//! state the test changes, working on a repository served over smart
//! HTTP, with the scripted model and the namespace sandbox.

use forgehand_tests::fake_forge::Kind;
use forgehand_tests::model_server::Step;
use forgehand_tests::project::{document_add_script, good_script, review_script};
use forgehand_tests::story::{
    end_held_command, held_command, host_processes_with, only, steps, wait_until, Story,
    MAINTAINER, OUTSIDER, REPO,
};
use insta::{allow_duplicates, assert_snapshot};
use serde_json::{json, Value};

fn pr_link(kind: Kind) -> &'static str {
    match kind {
        Kind::GitHub => "https://github.invalid/acme/demo/pull/2",
        Kind::Gitea => "/acme/demo/pulls/2",
    }
}

async fn a_labeled_issue_becomes_one_pull_request(kind: Kind) -> Story {
    let story = Story::start(kind, good_script()).await;
    story.label(1).await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    let detail = story.api(&format!("/api/jobs/{}", job["id"])).await;
    let result = &detail["result"];
    assert_eq!(result["pull_request"], 2, "{detail:#}");
    assert!(result["url"].as_str().unwrap().ends_with(pr_link(kind)));
    let steps = steps(result);
    assert_eq!(
        steps,
        [
            "authorized",
            "working copy",
            "environment",
            "sandbox",
            "agent",
            "gate, commit and push",
            "pull request"
        ]
    );
    let pulls = story.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:#?}");
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
    assert_eq!(
        story.file_on("forgehand/1-fix-add", "calc.sh").await,
        "add() {\n  echo $(($1 + $2))\n}\n"
    );
    assert_eq!(
        story.log_of("forgehand/1-fix-add").await,
        ["Fix add in calc.sh", "start"]
    );
    // Whoever asked is credited with their forge's no-reply address (the
    // fake forges stand for a server on 127.0.0.1).
    let noreply = match kind {
        Kind::GitHub => "users.noreply.127.0.0.1",
        Kind::Gitea => "noreply.127.0.0.1",
    };
    let message = story.tip_message("forgehand/1-fix-add").await;
    assert!(
        message.contains(&format!(
            "\nCo-authored-by: {MAINTAINER} <{MAINTAINER}@{noreply}>\n"
        )),
        "{message}"
    );
    // The status comment from the first step to the pull request, with
    // what was tested as the host saw it: the agent ran the tests.
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
        "),
    }
    allow_duplicates!(
        assert_snapshot!(story.commit_statuses(), @"success forgehand: integrity and secret checks passed")
    );
    // The commit status is on the commit that was pushed, and on no
    // other (the fake refuses a status for a commit the repository does
    // not hold).
    let tip = story.tip("forgehand/1-fix-add");
    let statuses = story.statuses();
    assert!(!statuses.is_empty(), "a status was set");
    assert!(
        statuses.iter().all(|(sha, _)| *sha == tip),
        "{statuses:?} vs the pushed {tip}"
    );
    assert_eq!(story.forge.refused(), Vec::<String>::new());
    let reviewers = story.forge.with(|s| s.review_requests.clone());
    assert_eq!(
        reviewers,
        [("acme/demo".to_owned(), 2, MAINTAINER.to_owned())],
        "whoever asked is asked to review"
    );

    // The bot's own comments came back as webhooks and made no job.
    let own: Vec<Value> = story
        .forge
        .deliveries()
        .iter()
        .filter(|d| d.json()["sender"]["login"] == "forgehand")
        .map(|d| serde_json::from_str(d.answer.as_deref().unwrap()).unwrap())
        .collect();
    assert!(!own.is_empty(), "the forge sent the bot's own actions back");
    for answer in &own {
        assert_eq!(answer["outcome"], "ignored", "{answer}");
        assert_eq!(answer["reason"], "sent by the bot itself", "{answer}");
    }
    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    assert_eq!(story.forge.violations(), Vec::<String>::new());
    // A clean job logs no warning: each mount, layer and directory is
    // released once, by its owner (a layer unmounted after its job
    // directory was removed warned on every job).
    let log = story.log();
    // What start-up says (the machine's lacks: cgroup v2, a VM backend;
    // the configuration's: a model with no price) is about the host, not
    // about a job: only what comes once the node serves counts.
    assert!(log.contains("forgehand is serving"), "{log}");
    let warned: Vec<&str> = log
        .lines()
        .skip_while(|line| !line.contains("forgehand is serving"))
        .filter(|line| line.contains(" WARN ") || line.contains(" ERROR "))
        .collect();
    assert_eq!(warned, Vec::<&str>::new(), "{log}");
    story
}

#[tokio::test(flavor = "multi_thread")]
async fn github_a_labeled_issue_becomes_one_pull_request() {
    a_labeled_issue_becomes_one_pull_request(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_a_labeled_issue_becomes_one_pull_request() {
    a_labeled_issue_becomes_one_pull_request(Kind::Gitea).await;
}

/// The model's side of answering a review with two threads.
async fn a_review_with_two_comments_gets_one_commit_and_two_replies(kind: Kind) {
    let mut script = good_script();
    script.extend(review_script());
    let story = Story::start(kind, script).await;
    story.label(1).await;
    story.settled().await;
    story.review_two_threads().await;
    let jobs = story.settled().await;

    let job = only(&jobs, "review");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    let branch = "forgehand/1-fix-add";
    let log = story.log_of(branch).await;
    assert_eq!(
        log,
        ["Address the review", "Fix add in calc.sh", "start"],
        "one commit on top of the first"
    );
    assert!(story
        .file_on(branch, "test.sh")
        .await
        .contains("$(add 0 0)"));
    // GitHub answers in the thread; Gitea has no replies, so the answer
    // is a review comment of the bot's on the same line.
    let (mut threads, mut replies) = story.forge.with(|s| {
        let by = |user: &str| -> Vec<(String, u64, String)> {
            s.review_comments
                .iter()
                .filter(|c| c.user == user)
                .map(|c| (c.path.clone(), c.position, c.body.clone()))
                .collect()
        };
        (by(MAINTAINER), by("forgehand"))
    });
    threads.sort();
    replies.sort();
    assert_eq!(threads.len(), 2);
    assert_eq!(replies.len(), 2, "{replies:#?}");
    for ((path, line, _), (reply_path, reply_line, _)) in threads.iter().zip(&replies) {
        assert_eq!((path, line), (reply_path, reply_line), "{replies:#?}");
    }
    // The agent's note for the thread on calc.sh; none for test.sh.
    allow_duplicates!(assert_snapshot!(story.review_replies(), @"
        calc.sh:1: Done in [sha]: Added a comment above add.
        test.sh:2: Done in [sha].
        "));
    if kind == Kind::GitHub {
        story.forge.with(|s| {
            let in_thread = s
                .review_comments
                .iter()
                .filter(|c| c.user == "forgehand" && c.in_reply_to.is_some())
                .count();
            assert_eq!(in_thread, 2, "GitHub's replies sit in their threads");
        });
    }
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
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn github_a_review_with_two_comments_gets_one_commit_and_two_replies() {
    a_review_with_two_comments_gets_one_commit_and_two_replies(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_a_review_with_two_comments_gets_one_commit_and_two_replies() {
    a_review_with_two_comments_gets_one_commit_and_two_replies(Kind::Gitea).await;
}

async fn stop_during_a_long_job(kind: Kind) {
    // Its own number per forge: the two stories run side by side.
    let needle = match kind {
        Kind::GitHub => "737373",
        Kind::Gitea => "737374",
    };
    let story = Story::start(
        kind,
        vec![Step::call(
            "bash",
            json!({"command": format!("sleep {needle}; echo never")}),
        )],
    )
    .await;
    story.label(1).await;
    wait_until("the agent's command to start", || {
        !host_processes_with(needle).is_empty()
    })
    .await;
    // The agent's command would run for days: the job settles only
    // because the stop ended it (`settled` fails the test after 120 s).
    story.comment(1, MAINTAINER, "/forgehand stop").await;
    let jobs = story.settled().await;

    let labeled = only(&jobs, "labeled");
    assert_eq!(labeled["state"], "cancelled", "{labeled:#}");
    assert_eq!(labeled["last_error"], "stopped by @maintainer");
    let stop = only(&jobs, "command.stop");
    assert_eq!(stop["state"], "succeeded", "{stop:#}");
    assert_eq!(stop["result"]["jobs"], json!([labeled["id"]]));
    allow_duplicates!(assert_snapshot!(story.said(1), @"
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
        ⏹️ Stopped by @maintainer (`stopped`).

        <!-- forgehand:job:1 -->
        "));
    // The sandbox's process goes: waited for, with a hang detector (it
    // would otherwise run for days), not timed.
    wait_until("the sandbox's process to end after the stop", || {
        host_processes_with(needle).is_empty()
    })
    .await;
    assert!(story.pulls().is_empty());
    assert_eq!(story.branches().await, ["main"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn github_stop_during_a_long_job_kills_the_sandbox() {
    stop_during_a_long_job(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_stop_during_a_long_job_kills_the_sandbox() {
    stop_during_a_long_job(Kind::Gitea).await;
}

async fn a_request_without_write_access_gets_one_polite_refusal(kind: Kind) {
    let story = Story::start(kind, good_script()).await;
    story
        .comment(1, OUTSIDER, "@forgehand please fix this")
        .await;
    let jobs = story.settled().await;

    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    assert_eq!(jobs[0]["result"]["reason"], "denied", "{:#}", jobs[0]);
    allow_duplicates!(assert_snapshot!(story.said(1), @"
        ━━ comment 1 ━━
        @drive-by thanks for asking! I only take requests from people with write access to this repository, so I will leave this one to a maintainer.
        "));
    let (reactions, requests) = story
        .forge
        .with(|s| (s.reactions.len(), story.model.requests().len()));
    assert_eq!((reactions, requests), (0, 0), "no 👀, no model, no work");
    assert!(story.pulls().is_empty());
    // The refusal came back as a webhook; it made no job.
    let last = story.forge.deliveries().last().unwrap().clone();
    assert_eq!(last.json()["sender"]["login"], "forgehand");
    let answer: Value = serde_json::from_str(last.answer.as_deref().unwrap()).unwrap();
    assert_eq!(answer["outcome"], "ignored");
}

#[tokio::test(flavor = "multi_thread")]
async fn github_a_request_without_write_access_gets_one_polite_refusal() {
    a_request_without_write_access_gets_one_polite_refusal(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_a_request_without_write_access_gets_one_polite_refusal() {
    a_request_without_write_access_gets_one_polite_refusal(Kind::Gitea).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tampering_agent_pushes_nothing_and_the_status_says_tamper() {
    let story = Story::start(
        Kind::Gitea,
        vec![
            Step::call(
                "bash",
                json!({"command": "mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch /tmp/forgehand-pwned\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout"}),
            ),
            Step::call(
                "edit_file",
                json!({"path": "calc.sh", "old_string": "$(($1 - $2))", "new_string": "$(($1 + $2))"}),
            ),
            Step::finish("Fixed add.", "Fix add"),
        ],
    )
    .await;
    story.label(1).await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "failed", "{job:#}");
    assert!(
        job["last_error"].as_str().unwrap().starts_with("tamper: "),
        "{job:#}"
    );
    // The operator API shows the reason code and the steps it got through.
    let detail = story.api(&format!("/api/jobs/{}", job["id"])).await;
    let result = &detail["result"];
    assert_eq!(result["reason"], "tamper", "{detail:#}");
    let steps = steps(result);
    assert_eq!(
        steps,
        [
            "authorized",
            "working copy",
            "environment",
            "sandbox",
            "agent"
        ],
        "{detail:#}"
    );
    assert!(result["steps"][3]["ms"].is_u64());
    // The finding is named.
    assert_snapshot!(story.said(1), @"
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
    ❌ Stopped: `tamper`. not pushed: the agent changed git's own files (hooks, config, info or alternates)

    - tamper: `.git/hooks/post-checkout` added (git's own files planted in the working tree)

    <!-- forgehand:job:1 -->
    ");
    assert_eq!(story.branches().await, ["main"], "nothing pushed");
    assert!(story.pulls().is_empty());
    assert!(!std::path::Path::new("/tmp/forgehand-pwned").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn as_a_github_app_a_labeled_issue_becomes_a_pull_request_with_a_check_run() {
    let story = Story::start_as_app(good_script()).await;
    story.label(1).await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    let pulls = story.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:#?}");
    assert_eq!(pulls[0].user, "forgehand[bot]", "the App opened it");
    assert_snapshot!(story.said(1), @"
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
    ");
    assert_snapshot!(story.commit_statuses(), @"success forgehand: integrity and secret checks passed");
    story.forge.with(|s| {
        assert_eq!(
            s.issued_tokens,
            [77],
            "one installation token for the whole job"
        );
        assert!(
            s.calls
                .iter()
                .any(|c| c == "POST /repos/{owner}/{repo}/check-runs"),
            "{:#?}",
            s.calls
        );
        let checks: Vec<(&str, &str)> = s
            .statuses
            .iter()
            .map(|st| (st.2.as_str(), st.3.as_str()))
            .collect();
        assert_eq!(checks, [("success", "forgehand")]);
    });
    // The App's own comments came back as webhooks from `forgehand[bot]`
    // and made no job.
    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

/// An issue with 150 comments: the maintainer's request in comment 140
/// reaches the agent, and when the job runs again (the service killed
/// mid-job) its status comment, the 151st, is found and edited, not made
/// twice. GitHub serves issue comments 100 a page at most; Gitea serves
/// them whole.
async fn an_issue_with_150_comments_is_read_to_the_end(kind: Kind) {
    let needle = match kind {
        Kind::GitHub => "828281",
        Kind::Gitea => "828282",
    };
    // The command runs until the test ends it: the kill comes while it
    // runs, however slow the machine.
    let mut script = vec![Step::call("bash", json!({"command": held_command(needle)}))];
    script.extend(good_script());
    let mut story = Story::start_with(kind, script, &[("FORGEHAND_QUEUE__LEASE_SECS", "3")]).await;
    story.forge.with(|s| {
        for n in 1..=150 {
            if n == 140 {
                s.add_comment(
                    REPO,
                    1,
                    MAINTAINER,
                    "Keep sub() as it is. (request-in-comment-140)",
                );
            } else if n == 150 {
                s.add_comment(REPO, 1, MAINTAINER, "Thanks! (last-comment-150)");
            } else {
                s.add_comment(REPO, 1, OUTSIDER, &format!("me too ({n})"));
            }
        }
    });
    story.label(1).await;
    story.wait_for_held_command(needle).await;
    assert_eq!(story.bot_comments(1).len(), 1, "the status comment is up");
    story.kill_forgehand();
    end_held_command(needle);
    story.start_forgehand().await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(job["attempts"], 2, "the lease ran out and it ran again");
    let requests = story.model.requests();
    assert!(requests.len() >= 2, "{}", requests.len());
    for request in &requests {
        let sent = request.body.to_string();
        assert!(
            sent.contains("(request-in-comment-140)") && sent.contains("(last-comment-150)"),
            "the maintainer's comments reach the agent"
        );
        assert!(!sent.contains("me too"), "a reader's do not");
    }
    assert_eq!(
        story.bot_comments(1).len(),
        1,
        "the status comment was found on the second page and edited"
    );
    assert!(story.status(1).starts_with("✅ Opened #2: "));
    assert_eq!(story.pulls().len(), 1);
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn github_an_issue_with_150_comments_is_read_to_the_end() {
    an_issue_with_150_comments_is_read_to_the_end(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_an_issue_with_150_comments_is_read_to_the_end() {
    an_issue_with_150_comments_is_read_to_the_end(Kind::Gitea).await;
}

/// A Gitea repository with 60 open pull requests newer than the bot's,
/// so the bot's is on the second page of the open ones (Gitea lists the
/// newest first, 50 at most a page): a follow-up request on the issue
/// finds it and updates it, and no second one is attempted.
#[tokio::test(flavor = "multi_thread")]
async fn gitea_a_follow_up_in_a_busy_repository_updates_the_bots_pull_request() {
    let mut script = good_script();
    script.extend(document_add_script());
    let story = Story::start(Kind::Gitea, script).await;
    story.label(1).await;
    story.settled().await;
    story.forge.with(|s| {
        for n in 1..=60 {
            s.add_pull(
                REPO,
                OUTSIDER,
                &format!("Change {n}"),
                &format!("change-{n}"),
                "main",
            );
        }
    });
    story
        .comment(1, MAINTAINER, "@forgehand please document add too")
        .await;
    let jobs = story.settled().await;

    let job = only(&jobs, "request");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(
        story.log_of("forgehand/1-fix-add").await,
        ["Document add", "Fix add in calc.sh", "start"]
    );
    let bots: Vec<_> = story
        .pulls()
        .into_iter()
        .filter(|p| p.user == "forgehand")
        .collect();
    assert_eq!(bots.len(), 1, "{bots:#?}");
    assert_eq!(bots[0].number, 2);
    assert_snapshot!(story.pull_request(2), @r##"
        #2 by forgehand, forgehand/1-fix-add → main
        # Document add

        Documented add.

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

        ---
        <sub>Forgehand · namespace sandbox, shared kernel · 3 turns · [tokens] · unpriced · [duration]</sub>
        "##);
    assert_snapshot!(story.said(1), @"
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

    - Tests: nothing was run that tests the change

    <!-- forgehand:job:2 -->
    ");
    let calls = story.forge.with(|s| s.calls.clone());
    let count = |call: &str| calls.iter().filter(|c| *c == call).count();
    assert_eq!(
        (
            count("POST /repos/{owner}/{repo}/pulls"),
            count("PATCH /repos/{owner}/{repo}/pulls/{index}")
        ),
        (1, 1),
        "opened once, then updated: {calls:#?}"
    );
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}
