//! Environments in jobs, on both forges: the base branch's `.forgehand.toml`
//! sets up the environment once (no network needed here: the setup is a
//! shell line) and names the test command, which the host runs after the
//! agent. The pull request shows what was tested; the status comment
//! says how it went. A `.forgehand.toml` changed on the bot's branch
//! changes nothing: a follow-up uses the base's environment, kept.

use forgehand_tests::fake_forge::Kind;
use forgehand_tests::project::{good_script, review_script};
use forgehand_tests::story::{only, Story};
use insta::{allow_duplicates, assert_snapshot};

const BASE_DECLARATION: &str =
    "[environment]\nsetup = \"echo base > $HOME/which\"\ntest = \"sh test.sh && grep -q base $HOME/which\"\n";

async fn the_base_branchs_environment_and_tests_are_used(kind: Kind) {
    let mut script = good_script();
    script.extend(review_script());
    let story = Story::start(kind, script).await;
    story.commit_on(
        "main",
        &[(".forgehand.toml", BASE_DECLARATION)],
        "Declare the environment",
    );
    story.label(1).await;
    let jobs = story.settled().await;
    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    let result = &job["result"];
    let environment = &result["environment"];
    assert_eq!(environment["source"], ".forgehand.toml", "{result:#}");
    assert_eq!(environment["reused"], false, "{result:#}");
    assert_eq!(environment["setup"], "echo base > $HOME/which");
    assert_eq!(result["testing"]["result"], "passed", "{result:#}");
    let host: Vec<_> = result["testing"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["by"] == "host")
        .collect();
    assert_eq!(host.len(), 1, "{result:#}");
    assert_eq!(host[0]["exit_code"], 0);
    allow_duplicates!(assert_snapshot!(story.pull_request(2), @"
        #2 by forgehand, forgehand/1-fix-add → main
        # Fix add in calc.sh

        `add` subtracted; now it adds, and `sh test.sh` passes.

        Closes #1

        **Files changed**

        - `calc.sh`

        **Testing** (what Forgehand saw run, not what the agent says)

        Environment: .forgehand.toml (set up for this job in [duration]).

        The last test run passed.

        | Command | Run by | Exit status |
        | --- | --- | --- |
        | `sh test.sh` | agent | 0 |
        | `sh test.sh && grep -q base $HOME/which` | Forgehand | 0 |

        ---
        <sub>Forgehand · namespace sandbox, shared kernel · 5 turns · [tokens] · unpriced · [duration]</sub>
        "));
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
            - [ ] environment ← now
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
            - [ ] tests ← now
            - [ ] gate, commit and push
            - [ ] pull request

            <!-- forgehand:job:1 -->
            ── edited ──
            🛠️ **Forgehand is working on this.**

            - [x] authorized
            - [x] working copy
            - [x] environment
            - [x] agent
            - [x] tests
            - [ ] gate, commit and push ← now
            - [ ] pull request

            <!-- forgehand:job:1 -->
            ── edited ──
            🛠️ **Forgehand is working on this.**

            - [x] authorized
            - [x] working copy
            - [x] environment
            - [x] agent
            - [x] tests
            - [x] gate, commit and push
            - [ ] pull request ← now

            <!-- forgehand:job:1 -->
            ── edited ──
            ✅ Opened #2: https://github.invalid/acme/demo/pull/2

            - Environment: .forgehand.toml (set up for this job in [duration])
            - Tests: `sh test.sh && grep -q base $HOME/which` passed

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
            - [ ] environment ← now
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
            - [ ] tests ← now
            - [ ] gate, commit and push
            - [ ] pull request

            <!-- forgehand:job:1 -->
            ── edited ──
            🛠️ **Forgehand is working on this.**

            - [x] authorized
            - [x] working copy
            - [x] environment
            - [x] agent
            - [x] tests
            - [ ] gate, commit and push ← now
            - [ ] pull request

            <!-- forgehand:job:1 -->
            ── edited ──
            🛠️ **Forgehand is working on this.**

            - [x] authorized
            - [x] working copy
            - [x] environment
            - [x] agent
            - [x] tests
            - [x] gate, commit and push
            - [ ] pull request ← now

            <!-- forgehand:job:1 -->
            ── edited ──
            ✅ Opened #2: http://gitea.invalid/acme/demo/pulls/2

            - Environment: .forgehand.toml (set up for this job in [duration])
            - Tests: `sh test.sh && grep -q base $HOME/which` passed

            <!-- forgehand:job:1 -->
            "),
    }

    // Someone changes the declaration on the bot's branch: a follow-up
    // still runs in the base's environment, as kept.
    story.commit_on(
        "forgehand/1-fix-add",
        &[(
            ".forgehand.toml",
            "[environment]\nsetup = \"echo branch > $HOME/which\"\ntest = \"false\"\n",
        )],
        "Change the environment on the branch",
    );
    story.review_two_threads().await;
    let jobs = story.settled().await;
    let review = only(&jobs, "review");
    assert_eq!(review["state"], "succeeded", "{review:#}");
    let environment = &review["result"]["environment"];
    assert_eq!(
        environment["setup"], "echo base > $HOME/which",
        "{review:#}"
    );
    assert_eq!(environment["reused"], true, "{review:#}");
    assert_eq!(
        environment["key"], result["environment"]["key"],
        "the same environment, kept"
    );
    assert_eq!(
        review["result"]["testing"]["result"], "passed",
        "{review:#}"
    );
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
        - [ ] environment ← now
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
        - [ ] tests ← now
        - [ ] gate, commit and push

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [x] tests
        - [ ] gate, commit and push ← now

        <!-- forgehand:job:2 -->
        ── edited ──
        ✅ Updated #2: https://github.invalid/acme/demo/pull/2

        - Environment: .forgehand.toml (reused, no setup run)
        - Tests: `sh test.sh && grep -q base $HOME/which` passed

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
        - [ ] environment ← now
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
        - [ ] tests ← now
        - [ ] gate, commit and push

        <!-- forgehand:job:2 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [x] working copy
        - [x] environment
        - [x] agent
        - [x] tests
        - [ ] gate, commit and push ← now

        <!-- forgehand:job:2 -->
        ── edited ──
        ✅ Updated #2: http://gitea.invalid/acme/demo/pulls/2

        - Environment: .forgehand.toml (reused, no setup run)
        - Tests: `sh test.sh && grep -q base $HOME/which` passed

        <!-- forgehand:job:2 -->
        "),
    }
    allow_duplicates!(assert_snapshot!(story.review_replies(), @"
        calc.sh:1: Done in [sha]: Added a comment above add.
        test.sh:2: Done in [sha].
        "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_the_base_branchs_environment_and_tests_are_used() {
    the_base_branchs_environment_and_tests_are_used(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitea_the_base_branchs_environment_and_tests_are_used() {
    the_base_branchs_environment_and_tests_are_used(Kind::Gitea).await;
}
