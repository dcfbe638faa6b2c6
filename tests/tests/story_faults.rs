//! Forgehand under faults, as a maintainer would meet them: the real
//! `forgehand serve` against fake forges that fail calls (5xx, rate
//! limits, answers lost after the change was made) and a git server that
//! fails requests, either holding a request at a stage boundary while the
//! service is killed, or failing a share of every call; each job still
//! ends with one pull request and one final status comment.

use forgehand_tests::fake_forge::state::FakeIssue;
use forgehand_tests::fake_forge::{CallFault, ForgeState, Kind};
use forgehand_tests::model_server::Step;
use forgehand_tests::project::good_script;
use forgehand_tests::story::{only, Story, MAINTAINER, REPO, STATUS_MARKER};
use insta::{allow_duplicates, assert_snapshot};
use serde_json::Value;

/// SIGKILL at each stage boundary.
#[path = "story_faults/kills.rs"]
mod kills;

async fn forge_faults_while_the_pull_request_is_made(kind: Kind, create: &str, update: &str) {
    let story = Story::start(kind, good_script()).await;
    story.forge.with(|s| {
        // The pull request is made, but the answer is lost in a 500.
        s.call_faults.push(CallFault {
            call: create.into(),
            status: 500,
            retry_after: None,
            after_serving: true,
        });
        // The retry finds it and updates it: rate limited once.
        s.call_faults.push(CallFault {
            call: update.into(),
            status: 429,
            retry_after: Some(1),
            after_serving: false,
        });
    });
    story.label(1).await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(job["attempts"], 1, "retried within the attempt");
    assert_eq!(story.pulls().len(), 1, "exactly one pull request");
    let calls = story.forge.with(|s| s.calls.clone());
    let count = |call: &str| calls.iter().filter(|c| *c == call).count();
    assert_eq!(
        (count(create), count(update)),
        (1, 2),
        "made once, then updated after the 429: {calls:#?}"
    );
    // The pull request was made once, its text as without the faults.
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
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn github_forge_faults_while_the_pull_request_is_made_are_retried_once_made() {
    forge_faults_while_the_pull_request_is_made(
        Kind::GitHub,
        "POST /repos/{owner}/{repo}/pulls",
        "PATCH /repos/{owner}/{repo}/pulls/{pull_number}",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_forge_faults_while_the_pull_request_is_made_are_retried_once_made() {
    forge_faults_while_the_pull_request_is_made(
        Kind::Gitea,
        "POST /repos/{owner}/{repo}/pulls",
        "PATCH /repos/{owner}/{repo}/pulls/{index}",
    )
    .await;
}

/// Reads fail as writes do: the issue, its comments (the status
/// comment's lookup and the conversation) and the requester's permission
/// each meet a 5xx or a rate limit once, and the job goes through in its
/// first attempt.
async fn read_faults_are_waited_out_within_the_attempt(kind: Kind, issue: &str, permission: &str) {
    let story = Story::start(kind, good_script()).await;
    let comments = format!("{issue}/comments");
    story.forge.with(|s| {
        for (call, status, retry_after) in [
            (issue, 502, None),
            (comments.as_str(), 429, Some(1)),
            (comments.as_str(), 500, None),
            // GitHub's secondary rate limit: a 403 with Retry-After.
            (permission, 403, Some(1)),
        ] {
            s.call_faults.push(CallFault {
                call: call.into(),
                status,
                retry_after,
                after_serving: false,
            });
        }
    });
    story.label(1).await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(job["attempts"], 1, "retried within the attempt: {job:#}");
    assert_eq!(story.pulls().len(), 1, "exactly one pull request");
    let left = story.forge.with(|s| s.call_faults.len());
    assert_eq!(left, 0, "every fault was met");
    assert!(story.status(1).starts_with("✅ Opened #2: "));
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn github_read_faults_are_waited_out_within_the_attempt() {
    read_faults_are_waited_out_within_the_attempt(
        Kind::GitHub,
        "GET /repos/{owner}/{repo}/issues/{issue_number}",
        "GET /repos/{owner}/{repo}/collaborators/{username}/permission",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_read_faults_are_waited_out_within_the_attempt() {
    read_faults_are_waited_out_within_the_attempt(
        Kind::Gitea,
        "GET /repos/{owner}/{repo}/issues/{index}",
        "GET /repos/{owner}/{repo}/collaborators/{collaborator}/permission",
    )
    .await;
}

/// An attempt that fails for a reason worth another try says so, not
/// "Stopped": the issue cannot be read through five server errors, the
/// status comment shows the attempt that failed and then the next one
/// with what ended the first, and ends on the pull request.
async fn a_failed_attempt_shows_as_a_retry(kind: Kind, issue: &str) {
    let story = Story::start(kind, good_script()).await;
    story.forge.with(|s| {
        for _ in 0..5 {
            s.call_faults.push(CallFault {
                call: issue.into(),
                status: 502,
                retry_after: None,
                after_serving: false,
            });
        }
    });
    story.label(1).await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(job["attempts"], 2, "{job:#}");
    assert!(story.status(1).starts_with("✅ Opened #2: "));
    // What the status comment said on the way, as the forge's webhooks
    // for its edits carried it.
    let said: Vec<String> = story
        .forge
        .deliveries()
        .iter()
        .map(|d| d.json())
        .filter(|p| {
            p["action"] == "edited"
                && p["comment"]["body"]
                    .as_str()
                    .is_some_and(|b| b.contains(STATUS_MARKER))
        })
        .map(|p| {
            p["comment"]["body"]
                .as_str()
                .unwrap()
                .split(STATUS_MARKER)
                .next()
                .unwrap()
                .trim_end()
                .to_owned()
        })
        .collect();
    let failed = said
        .iter()
        .position(|t| t.starts_with("🔁 **Attempt 1 of 5 failed**: `forge_error`."))
        .unwrap_or_else(|| panic!("no retry shown: {said:#?}"));
    assert!(
        said[failed].contains("HTTP 502")
            && said[failed].ends_with("I will try again shortly (attempt 2 of 5)."),
        "{}",
        said[failed]
    );
    assert!(
        said[failed + 1].starts_with("🛠️ **Forgehand is working on this.**")
            && said[failed + 1].contains("_Attempt 2 of 5, after: forge_error: "),
        "{said:#?}"
    );
    assert!(
        !said.iter().any(|t| t.contains("Stopped")),
        "a retried attempt is not a stop: {said:#?}"
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
        🔁 **Attempt 1 of 5 failed**: `forge_error`. HTTP 502: GET /repos/acme/demo/issues/1: injected fault

        I will try again shortly (attempt 2 of 5).

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        _Attempt 2 of 5, after: forge_error: HTTP 502: GET /repos/acme/demo/issues/1: injected fault_

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

        _Attempt 2 of 5, after: forge_error: HTTP 502: GET /repos/acme/demo/issues/1: injected fault_

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

        _Attempt 2 of 5, after: forge_error: HTTP 502: GET /repos/acme/demo/issues/1: injected fault_

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

        _Attempt 2 of 5, after: forge_error: HTTP 502: GET /repos/acme/demo/issues/1: injected fault_

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
        🔁 **Attempt 1 of 5 failed**: `forge_error`. HTTP 502: GET /repos/acme/demo/issues/1: injected fault

        I will try again shortly (attempt 2 of 5).

        <!-- forgehand:job:1 -->
        ── edited ──
        🛠️ **Forgehand is working on this.**

        - [x] authorized
        - [ ] working copy ← now
        - [ ] environment
        - [ ] agent
        - [ ] tests
        - [ ] gate, commit and push
        - [ ] pull request

        _Attempt 2 of 5, after: forge_error: HTTP 502: GET /repos/acme/demo/issues/1: injected fault_

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

        _Attempt 2 of 5, after: forge_error: HTTP 502: GET /repos/acme/demo/issues/1: injected fault_

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

        _Attempt 2 of 5, after: forge_error: HTTP 502: GET /repos/acme/demo/issues/1: injected fault_

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

        _Attempt 2 of 5, after: forge_error: HTTP 502: GET /repos/acme/demo/issues/1: injected fault_

        <!-- forgehand:job:1 -->
        ── edited ──
        ✅ Opened #2: http://gitea.invalid/acme/demo/pulls/2

        - Tests: none run by Forgehand; the agent's `sh test.sh` exited 0 in its own sandbox

        <!-- forgehand:job:1 -->
        "),
    }
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn github_a_failed_attempt_shows_as_a_retry() {
    a_failed_attempt_shows_as_a_retry(
        Kind::GitHub,
        "GET /repos/{owner}/{repo}/issues/{issue_number}",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_a_failed_attempt_shows_as_a_retry() {
    a_failed_attempt_shows_as_a_retry(Kind::Gitea, "GET /repos/{owner}/{repo}/issues/{index}")
        .await;
}

/// Issues #2 to #20 beside #1, each "Fix add N".
fn add_issues_up_to_20(s: &mut ForgeState) {
    for n in 2..=20 {
        s.add_issue(
            REPO,
            MAINTAINER,
            &format!("Fix add {n}"),
            "add() subtracts.",
        );
    }
}

/// The maintainer labels issues #1 to #20, one after the other.
async fn label_issues_1_to_20(story: &Story) {
    for n in 1..=20 {
        story.forge.label_issue(REPO, n, "forgehand", MAINTAINER);
    }
    story.forge.settle().await;
}

/// Each of issues #1 to #20 has exactly one pull request closing it and
/// a status comment in its final form; there are no others.
fn one_pull_request_and_final_status_each(story: &Story, pulls: &[FakeIssue]) {
    for n in 1..=20 {
        let closing = pulls
            .iter()
            .filter(|p| p.body.contains(&format!("Closes #{n}\n")))
            .count();
        assert_eq!(closing, 1, "issue {n}: {closing} pull requests");
        assert!(
            story.status(n).starts_with("✅ Opened #"),
            "issue {n}: {}",
            story.status(n)
        );
    }
    assert_eq!(pulls.len(), 20);
}

/// Twenty labelled issues while every fourth API call fails (500, 429
/// with Retry-After, a secondary rate limit's 403 with Retry-After, 502,
/// in turn) and every fifth git request too: every issue ends with
/// exactly one pull request and one status comment in its final form.
async fn twenty_issues_through_a_faulty_forge(kind: Kind) {
    let script: Vec<Step> = (0..20).flat_map(|_| good_script()).collect();
    let story = Story::start_with(kind, script, &[("FORGEHAND_QUEUE__WORKERS", "1")]).await;
    story.forge.with(|s| {
        add_issues_up_to_20(s);
        s.fault_every = Some(4);
    });
    // And every fifth authenticated git request: 500, 502, 503, 429 with
    // Retry-After in turn, some pushes landing with their answer lost.
    story.project.git.faults(|f| f.every = Some(5));
    label_issues_1_to_20(&story).await;
    let jobs = story.settled().await;

    let labeled: Vec<&Value> = jobs.iter().filter(|j| j["kind"] == "labeled").collect();
    assert_eq!(labeled.len(), 20, "{jobs:#?}");
    for job in &labeled {
        assert_eq!(job["state"], "succeeded", "{job:#}");
        // Every fault, the forge's and git's, waited out within the
        // attempt: none cost the job an attempt.
        assert_eq!(job["attempts"], 1, "{job:#}");
    }
    let served = story.forge.with(|s| s.faults_served);
    assert!(served >= 60, "only {served} faults served");
    let git_served = story.project.git.faults(|f| f.served);
    assert!(git_served >= 15, "only {git_served} git faults served");
    let pulls = story.pulls();
    one_pull_request_and_final_status_each(&story, &pulls);
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

/// Twenty labelled issues while a third of all forge calls fail at random
/// (5xx, rate limits, secondary rate limits), half of the failing writes
/// made with their answer lost: every issue ends with exactly one pull
/// request and one status comment in its final form, and no call gave up
/// before its last try (issue 24, finding 9: five of five failed attempts
/// ended on a call not retried within the attempt).
async fn twenty_issues_with_a_third_of_calls_failing(kind: Kind, seed: u64) {
    let story = Story::start_with(kind, Vec::new(), &[("FORGEHAND_QUEUE__WORKERS", "2")]).await;
    // Two workers at once: each conversation its own script (in one
    // shared order a job could take another's finish before its edit,
    // and did on a loaded machine: no_changes).
    story.model.per_conversation(good_script());
    story.forge.with(|s| {
        add_issues_up_to_20(s);
        s.fault_share = Some(forgehand_tests::fake_forge::FaultShare::new(333, seed));
    });
    label_issues_1_to_20(&story).await;
    let jobs = story.settled().await;
    let labeled: Vec<&Value> = jobs.iter().filter(|j| j["kind"] == "labeled").collect();
    assert_eq!(labeled.len(), 20, "{jobs:#?}");
    for job in &labeled {
        assert_eq!(job["state"], "succeeded", "{job:#}\n{}", story.log());
    }
    let served = story.forge.with(|s| s.faults_served);
    assert!(served >= 100, "only {served} faults served");
    let pulls = story.pulls();
    if std::env::var_os("FORGEHAND_DEBUG_STORY").is_some() {
        std::fs::write(format!("/tmp/story-{kind:?}.log"), story.log()).unwrap();
        let calls = story.forge.with(|s| {
            let mut out = s.calls.join("\n");
            for c in &s.comments {
                out.push_str(&format!(
                    "\ncomment {} on {} by {}: {:?}",
                    c.id,
                    c.issue,
                    c.user,
                    c.body.lines().last()
                ));
            }
            out
        });
        std::fs::write(format!("/tmp/story-{kind:?}.calls"), calls).unwrap();
    }
    one_pull_request_and_final_status_each(&story, &pulls);
    // A call that gave up did so at its last try, never at its first.
    let log = story.log();
    for line in log
        .lines()
        .filter(|l| l.contains("forge call failed; giving up"))
    {
        assert!(line.contains("attempt=5"), "{line}");
    }
    assert_eq!(story.forge.violations(), Vec::<String>::new());
    assert_eq!(story.forge.refused(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn github_twenty_issues_with_a_third_of_calls_failing() {
    twenty_issues_with_a_third_of_calls_failing(Kind::GitHub, 24).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_twenty_issues_with_a_third_of_calls_failing() {
    twenty_issues_with_a_third_of_calls_failing(Kind::Gitea, 2024).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn github_twenty_issues_through_a_faulty_forge() {
    twenty_issues_through_a_faulty_forge(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_twenty_issues_through_a_faulty_forge() {
    twenty_issues_through_a_faulty_forge(Kind::Gitea).await;
}
