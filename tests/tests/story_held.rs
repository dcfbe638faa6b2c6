//! A change the gate holds, released by a maintainer, as stories against
//! the real `forgehand serve` fed by the fake forges: the held commit is
//! kept on the host, nothing is pushed, the status comment names the
//! commit and the command; the command pushes that very commit and opens
//! the pull request, and the model is not called again (issue 25).

use forgehand_tests::fake_forge::Kind;
use forgehand_tests::model_server::Step;
use forgehand_tests::story::{only, steps, Story, MAINTAINER, OUTSIDER};
use insta::{allow_duplicates, assert_snapshot};
use serde_json::{json, Value};

/// The fix, and a CI workflow nobody asked for: held as sensitive.
fn fix_with_a_workflow() -> Vec<Step> {
    vec![
        Step::call(
            "edit_file",
            json!({"path": "calc.sh", "old_string": "$(($1 - $2))", "new_string": "$(($1 + $2))"}),
        ),
        Step::call(
            "write_file",
            json!({"path": ".github/workflows/ci.yml", "content": "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: sh test.sh\n"}),
        ),
        Step::finish(
            "`add` now adds; CI runs the tests.",
            "Fix add, run the tests in CI",
        ),
    ]
}

/// Every file removed and a Makefile written: held as destructive and
/// as sensitive.
fn make_instead() -> Vec<Step> {
    vec![
        Step::call("bash", json!({"command": "rm calc.sh test.sh"})),
        Step::call(
            "write_file",
            json!({"path": "Makefile", "content": "test:\n\tsh test.sh\n"}),
        ),
        Step::finish("Replaced the scripts with a Makefile.", "Use make"),
    ]
}

/// The held job's kept commit, from its record.
fn held_commit(job: &Value) -> String {
    job["result"]["held"]["commit"]
        .as_str()
        .unwrap_or_else(|| panic!("the job keeps its held commit: {job:#}"))
        .to_owned()
}

async fn allow_sensitive_pushes_the_held_commit(kind: Kind) {
    let story = Story::start(kind, fix_with_a_workflow()).await;
    story.label(1).await;
    let jobs = story.settled().await;
    let held = only(&jobs, "labeled");
    assert_eq!(held["state"], "failed", "{held:#}");
    assert_eq!(held["result"]["reason"], "sensitive", "{held:#}");
    let commit = held_commit(held);
    let short = &commit[..10];
    let status = story.status(1);
    assert!(
        status.contains(&format!("The change is kept as commit `{short}`")),
        "{status}"
    );
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
    ✋ Held for a maintainer: `sensitive`. The changes touch files that are not ordinary source, tests or documentation, so I did not push the change.

    - held: `.github/workflows/ci.yml` added (a dot-file or in a dot-directory: configuration tools find by name; GitHub Actions workflows: runs in CI with the repository's secrets)

    The change is kept as commit `[sha]`, on no branch the forge sees. Saying `/forgehand allow-sensitive` pushes exactly that commit and opens the pull request; the agent does not run again. `/forgehand retry` runs the job anew instead.

    <!-- forgehand:job:1 -->
    "));
    assert_eq!(story.branches().await, ["main"], "nothing is pushed");
    assert!(story.pulls().is_empty());
    let asked = story.model.requests().len();

    story
        .comment(1, MAINTAINER, "/forgehand allow-sensitive")
        .await;
    let jobs = story.settled().await;
    let release = only(&jobs, "command.allow_sensitive");
    assert_eq!(release["state"], "succeeded", "{release:#}");
    assert_eq!(
        story.model.requests().len(),
        asked,
        "the release calls no model"
    );
    let pulls = story.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:#?}");
    let (branch, base) = pulls[0].pull.clone().unwrap();
    assert_eq!(base, "main");
    assert_eq!(story.tip(&branch), commit, "the very commit that was held");
    let mut changed = story.changes_on(&branch).await;
    changed.sort();
    assert_eq!(changed, ["A .github/workflows/ci.yml", "M calc.sh"]);
    // The pull request lists what was allowed.
    allow_duplicates!(assert_snapshot!(story.pull_request(2), @r##"
        #2 by forgehand, forgehand/1-fix-add → main
        # Fix add, run the tests in CI

        `add` now adds; CI runs the tests.

        Closes #1

        **Files changed**

        - `.github/workflows/ci.yml`
        - `calc.sh`

        **Needs a careful look** (sensitive files, pushed because allowed)

        - held: `.github/workflows/ci.yml` added (a dot-file or in a dot-directory: configuration tools find by name; GitHub Actions workflows: runs in CI with the repository's secrets)

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
        <sub>Forgehand · namespace sandbox, shared kernel · [duration]</sub>
        "##));
    let said = story.status_comments(1);
    assert_eq!(said.len(), 2, "{said:#?}");
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
        ✋ Held for a maintainer: `sensitive`. The changes touch files that are not ordinary source, tests or documentation, so I did not push the change.

        - held: `.github/workflows/ci.yml` added (a dot-file or in a dot-directory: configuration tools find by name; GitHub Actions workflows: runs in CI with the repository's secrets)

        The change is kept as commit `[sha]`, on no branch the forge sees. Saying `/forgehand allow-sensitive` pushes exactly that commit and opens the pull request; the agent does not run again. `/forgehand retry` runs the job anew instead.

        <!-- forgehand:job:1 -->
        ━━ comment 2 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] gate, commit and push ← now
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] gate, commit and push
        - [ ] pull request ← now

        <!-- forgehand:job:2 -->
        ── edited ──
        ✅ Opened #2: https://github.invalid/acme/demo/pull/2

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
        ✋ Held for a maintainer: `sensitive`. The changes touch files that are not ordinary source, tests or documentation, so I did not push the change.

        - held: `.github/workflows/ci.yml` added (a dot-file or in a dot-directory: configuration tools find by name; GitHub Actions workflows: runs in CI with the repository's secrets)

        The change is kept as commit `[sha]`, on no branch the forge sees. Saying `/forgehand allow-sensitive` pushes exactly that commit and opens the pull request; the agent does not run again. `/forgehand retry` runs the job anew instead.

        <!-- forgehand:job:1 -->
        ━━ comment 2 ━━
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] gate, commit and push ← now
        - [ ] pull request

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] gate, commit and push
        - [ ] pull request ← now

        <!-- forgehand:job:2 -->
        ── edited ──
        ✅ Opened #2: http://gitea.invalid/acme/demo/pulls/2

        - Tests: nothing was run that tests the change

        <!-- forgehand:job:2 -->
        "),
    }
    let steps = steps(&release["result"]);
    assert!(steps.contains(&"held change released"), "{steps:?}");
    assert!(!steps.contains(&"agent"), "{steps:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_sensitive_pushes_the_held_commit_on_github() {
    allow_sensitive_pushes_the_held_commit(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_sensitive_pushes_the_held_commit_on_gitea() {
    allow_sensitive_pushes_the_held_commit(Kind::Gitea).await;
}

/// A change held both as destructive and as sensitive needs both
/// allowances: the first is noted and says what else is needed; the
/// second releases it.
#[tokio::test(flavor = "multi_thread")]
async fn a_change_held_twice_needs_both_allowances() {
    let story = Story::start(Kind::Gitea, make_instead()).await;
    story.label(1).await;
    let jobs = story.settled().await;
    let held = only(&jobs, "labeled");
    assert_eq!(held["result"]["reason"], "destructive", "{held:#}");
    assert_eq!(
        held["result"]["held"]["held_for"],
        json!(["destructive", "sensitive"])
    );
    let commit = held_commit(held);
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
    ✋ Held for a maintainer: `destructive`. The change removes most of the repository, so I did not push the change.

    - held: `Makefile` added (a file a tool runs or reads; makefiles, anywhere: a build entry point: runs on every build)
    - destructive: the change deletes 2, empties 0 and rewrites 0 of the 2 tracked files (100%) and removes 107 of their 107 bytes (100%)

    The change is kept as commit `[sha]`, on no branch the forge sees. Saying `/forgehand allow-destructive` and `/forgehand allow-sensitive` (each of them, in any order) pushes exactly that commit and opens the pull request; the agent does not run again. `/forgehand retry` runs the job anew instead.

    <!-- forgehand:job:1 -->
    ");
    let asked = story.model.requests().len();

    story
        .comment(1, MAINTAINER, "/forgehand allow-sensitive")
        .await;
    let jobs = story.settled().await;
    let noted = only(&jobs, "command.allow_sensitive");
    assert_eq!(
        noted["result"]["outcome"], "awaiting_allowance",
        "{noted:#}"
    );
    let said = story.bot_comments(1);
    assert_eq!(
        said.last().unwrap(),
        &format!(
            "@maintainer noted. The change job {} kept (commit `{}`) also needs \
             `/forgehand allow-destructive` before I push it.",
            held["id"],
            &commit[..10]
        )
    );
    assert_eq!(story.branches().await, ["main"]);

    story
        .comment(1, MAINTAINER, "/forgehand allow-destructive")
        .await;
    let jobs = story.settled().await;
    let release = only(&jobs, "command.allow_destructive");
    assert_eq!(release["state"], "succeeded", "{release:#}");
    assert_eq!(story.model.requests().len(), asked);
    let (branch, _) = story.pulls()[0].pull.clone().unwrap();
    assert_eq!(story.tip(&branch), commit);
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
    ✋ Held for a maintainer: `destructive`. The change removes most of the repository, so I did not push the change.

    - held: `Makefile` added (a file a tool runs or reads; makefiles, anywhere: a build entry point: runs on every build)
    - destructive: the change deletes 2, empties 0 and rewrites 0 of the 2 tracked files (100%) and removes 107 of their 107 bytes (100%)

    The change is kept as commit `[sha]`, on no branch the forge sees. Saying `/forgehand allow-destructive` and `/forgehand allow-sensitive` (each of them, in any order) pushes exactly that commit and opens the pull request; the agent does not run again. `/forgehand retry` runs the job anew instead.

    <!-- forgehand:job:1 -->
    ━━ comment 2 ━━
    @maintainer noted. The change job 1 kept (commit `[sha]`) also needs `/forgehand allow-destructive` before I push it.
    ━━ comment 3 ━━
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [ ] gate, commit and push ← now
    - [ ] pull request

    <!-- forgehand:job:3 -->
    ── edited ──
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] gate, commit and push
    - [ ] pull request ← now

    <!-- forgehand:job:3 -->
    ── edited ──
    ✅ Opened #2: http://gitea.invalid/acme/demo/pulls/2

    - Tests: nothing was run that tests the change

    <!-- forgehand:job:3 -->
    ");
    assert_snapshot!(story.pull_request(2), @r##"
        #2 by forgehand, forgehand/1-fix-add → main
        # Use make

        Replaced the scripts with a Makefile.

        Closes #1

        **Files changed**

        - `Makefile`
        - `calc.sh`
        - `test.sh`

        **Needs a careful look** (sensitive files, pushed because allowed)

        - held: `Makefile` added (a file a tool runs or reads; makefiles, anywhere: a build entry point: runs on every build)
        - destructive: the change deletes 2, empties 0 and rewrites 0 of the 2 tracked files (100%) and removes 107 of their 107 bytes (100%)

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
        <sub>Forgehand · namespace sandbox, shared kernel · [duration]</sub>
        "##);
}

/// An allowance from someone who may not command the bot allows nothing:
/// the maintainer's later one still needs what it needed.
#[tokio::test(flavor = "multi_thread")]
async fn an_outsiders_allowance_counts_for_nothing() {
    let story = Story::start(Kind::GitHub, make_instead()).await;
    story.label(1).await;
    story.settled().await;
    story
        .comment(1, OUTSIDER, "/forgehand allow-destructive")
        .await;
    let jobs = story.settled().await;
    let denied = only(&jobs, "command.allow_destructive");
    assert_eq!(denied["result"]["reason"], "denied", "{denied:#}");
    story
        .comment(1, MAINTAINER, "/forgehand allow-sensitive")
        .await;
    let jobs = story.settled().await;
    let noted = only(&jobs, "command.allow_sensitive");
    assert_eq!(
        noted["result"]["outcome"], "awaiting_allowance",
        "{noted:#}"
    );
    assert!(story
        .bot_comments(1)
        .last()
        .unwrap()
        .ends_with("also needs `/forgehand allow-destructive` before I push it."));
    assert_eq!(story.branches().await, ["main"]);
    assert!(story.pulls().is_empty());
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
    ✋ Held for a maintainer: `destructive`. The change removes most of the repository, so I did not push the change.

    - held: `Makefile` added (a file a tool runs or reads; makefiles, anywhere: a build entry point: runs on every build)
    - destructive: the change deletes 2, empties 0 and rewrites 0 of the 2 tracked files (100%) and removes 107 of their 107 bytes (100%)

    The change is kept as commit `[sha]`, on no branch the forge sees. Saying `/forgehand allow-destructive` and `/forgehand allow-sensitive` (each of them, in any order) pushes exactly that commit and opens the pull request; the agent does not run again. `/forgehand retry` runs the job anew instead.

    <!-- forgehand:job:1 -->
    ━━ comment 2 ━━
    @drive-by thanks for asking! I only take requests from people with write access to this repository, so I will leave this one to a maintainer.
    ━━ comment 3 ━━
    @maintainer noted. The change job 1 kept (commit `[sha]`) also needs `/forgehand allow-destructive` before I push it.
    ");
}
