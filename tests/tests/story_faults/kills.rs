//! SIGKILL at each stage boundary of a job, driven from outside: the
//! fake forge or the git server holds the request that follows the
//! boundary (before serving it, or after: the change made, its answer
//! never sent), the real `forgehand serve` is killed there and started
//! again, and the next attempt completes the job: one pull request, one
//! status comment saying so, one 👀.

use std::time::{Duration, Instant};

use forgehand_tests::fake_forge::{Hold, Kind};
use forgehand_tests::git_http::GitRequest;
use forgehand_tests::model_server::Step;
use forgehand_tests::project::{good_script, review_script};
use forgehand_tests::story::{end_held_command, held_command, only, steps, Story};
use insta::assert_snapshot;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_in_the_middle_of_a_job_and_the_restarted_service_finishes_it() {
    // The command runs until the test ends it: the kill comes while it
    // runs, however slow the machine.
    let mut script = vec![Step::call(
        "bash",
        json!({"command": held_command("646464")}),
    )];
    script.extend(good_script());
    let mut story = Story::start_with(
        Kind::GitHub,
        script,
        &[("FORGEHAND_QUEUE__LEASE_SECS", "3")],
    )
    .await;
    story.label(1).await;
    story.wait_for_held_command("646464").await;
    assert_eq!(story.bot_comments(1).len(), 1, "the status comment is up");
    story.kill_forgehand();
    // What the killed service's sandbox ran goes with it.
    end_held_command("646464");
    story.start_forgehand().await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(job["attempts"], 2, "the lease ran out and it ran again");
    assert_eq!(story.pulls().len(), 1, "exactly one pull request");
    assert_eq!(story.bot_comments(1).len(), 1, "exactly one status comment");
    // The second attempt says which it is and what ended the first.
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
    - [ ] working copy ← now
    - [ ] environment
    - [ ] agent
    - [ ] tests
    - [ ] gate, commit and push
    - [ ] pull request

    _Attempt 2 of 5, after: lease expired: the worker stopped heartbeating (crashed or hung)_

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

    _Attempt 2 of 5, after: lease expired: the worker stopped heartbeating (crashed or hung)_

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

    _Attempt 2 of 5, after: lease expired: the worker stopped heartbeating (crashed or hung)_

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

    _Attempt 2 of 5, after: lease expired: the worker stopped heartbeating (crashed or hung)_

    <!-- forgehand:job:1 -->
    ── edited ──
    ✅ Opened #2: https://github.invalid/acme/demo/pull/2

    - Tests: none run by Forgehand; the agent's `sh test.sh` exited 0 in its own sandbox

    <!-- forgehand:job:1 -->
    ");
}

/// SIGKILL on the job's last attempt: no attempt is left to finish it,
/// so the queue, when it dead-letters the job, gives the status comment
/// its final word instead of leaving it on "working".
#[tokio::test(flavor = "multi_thread")]
async fn sigkill_on_the_last_attempt_leaves_a_final_status_not_working() {
    let mut script = vec![Step::call(
        "bash",
        json!({"command": held_command("737373")}),
    )];
    script.extend(good_script());
    let mut story = Story::start_with(
        Kind::GitHub,
        script,
        &[
            ("FORGEHAND_QUEUE__LEASE_SECS", "3"),
            ("FORGEHAND_QUEUE__MAX_ATTEMPTS", "1"),
        ],
    )
    .await;
    story.label(1).await;
    story.wait_for_held_command("737373").await;
    assert!(story
        .status(1)
        .starts_with("🛠️ **Forgehand is working on this.**"));
    story.kill_forgehand();
    end_held_command("737373");
    story.start_forgehand().await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "dead", "{job:#}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while story.status(1).starts_with("🛠️") {
        assert!(
            Instant::now() < deadline,
            "still working: {}",
            story.status(1)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
        ❌ Stopped: `infra`. the worker stopped heartbeating (crashed or hung) on the last attempt (1 of 1)

        <!-- forgehand:job:1 -->
        ");
    assert_eq!(story.bot_comments(1).len(), 1, "exactly one status comment");
    assert!(story.pulls().is_empty());
}

/// Where a story kills Forgehand: the request that follows a stage
/// boundary, held by the fake forge or by the git server (before it is
/// served, or after: the change made, its answer never sent).
enum Held {
    Forge(Hold),
    Git(GitRequest, bool),
}

/// SIGKILL at a stage boundary, driven from outside: the request that
/// follows it is held, the service is killed there and started again,
/// and the next attempt completes the job from where the last one left
/// it: one pull request, one status comment saying so, one 👀. The
/// agent's script holds `agent_runs` runs and must be spent: the agent
/// runs again only when its work had not reached the server; `resumed`
/// when the pushed commit is taken up instead.
async fn sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(
    kind: Kind,
    held: Held,
    agent_runs: usize,
    resumed: bool,
) {
    let script: Vec<Step> = (0..agent_runs).flat_map(|_| good_script()).collect();
    let mut story = Story::start_with(kind, script, &[("FORGEHAND_QUEUE__LEASE_SECS", "3")]).await;
    let git = &story.project.git;
    match &held {
        Held::Forge(hold) => story.forge.with(|s| s.holds.push(hold.clone())),
        Held::Git(request, after_serving) => {
            git.faults(|f| f.holds.push((*request, *after_serving)))
        }
    }
    story.label(1).await;
    let deadline = Instant::now() + Duration::from_secs(90);
    while story.forge.with(|s| s.held.is_empty()) && git.faults(|f| f.held.is_empty()) {
        assert!(
            Instant::now() < deadline,
            "never reached the held request:\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    story.kill_forgehand();
    story.start_forgehand().await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}\n{}", story.log());
    assert_eq!(job["attempts"], 2, "{job:#}");
    assert_eq!(story.pulls().len(), 1, "exactly one pull request");
    assert_eq!(story.bot_comments(1).len(), 1, "exactly one status comment");
    assert!(
        story.status(1).starts_with("✅ Opened #2: "),
        "{}",
        story.status(1)
    );
    let eyes = story.forge.with(|s| {
        s.reactions
            .iter()
            .filter(|r| r.1 == "issue:1" && r.2 == story.bot_login && r.3 == "eyes")
            .count()
    });
    assert_eq!(eyes, 1, "one 👀");
    assert_eq!(story.model.left(), 0, "the agent ran {agent_runs} time(s)");
    let detail = story.api(&format!("/api/jobs/{}", job["id"])).await;
    let steps = steps(&detail["result"]);
    assert_eq!(
        steps.contains(&"resumed after the push"),
        resumed,
        "{steps:?}"
    );
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

/// The forge's name for a call on each forge: GitHub's, then Gitea's.
fn call(kind: Kind, github: &str, gitea: &str) -> String {
    match kind {
        Kind::GitHub => github.into(),
        Kind::Gitea => gitea.into(),
    }
}

fn status_comment_post(kind: Kind) -> String {
    call(
        kind,
        "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
        "POST /repos/{owner}/{repo}/issues/{index}/comments",
    )
}

/// 👀 is on the issue, the status comment is not made yet.
async fn after_the_reaction_before_the_status_comment(kind: Kind) {
    let held = Held::Forge(Hold::before(&status_comment_post(kind)));
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(kind, held, 1, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn github_sigkill_after_the_reaction_before_the_status_comment() {
    after_the_reaction_before_the_status_comment(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_sigkill_after_the_reaction_before_the_status_comment() {
    after_the_reaction_before_the_status_comment(Kind::Gitea).await;
}

/// The status comment is made, the answer saying so never comes: the
/// next attempt finds it by its marker instead of making a second.
async fn the_status_comment_made_its_answer_lost(kind: Kind) {
    let held = Held::Forge(Hold::after_serving(&status_comment_post(kind)));
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(kind, held, 1, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn github_sigkill_when_the_status_comment_is_made_and_its_answer_lost() {
    the_status_comment_made_its_answer_lost(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_sigkill_when_the_status_comment_is_made_and_its_answer_lost() {
    the_status_comment_made_its_answer_lost(Kind::Gitea).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn github_sigkill_after_the_status_comment_before_the_working_copy() {
    let held = Held::Git(GitRequest::FetchRefs, false);
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(Kind::GitHub, held, 1, false)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_sigkill_after_the_status_comment_before_the_working_copy() {
    let held = Held::Git(GitRequest::FetchRefs, false);
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(Kind::Gitea, held, 1, false).await;
}

/// The agent finished, its push is held before it lands: the work is
/// lost with the process, and the next attempt runs the agent again.
#[tokio::test(flavor = "multi_thread")]
async fn github_sigkill_after_the_agent_before_the_push() {
    let held = Held::Git(GitRequest::PushPack, false);
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(Kind::GitHub, held, 2, false)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_sigkill_after_the_agent_before_the_push() {
    let held = Held::Git(GitRequest::PushPack, false);
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(Kind::Gitea, held, 2, false).await;
}

/// The push landed, the git server's answer never came: the next attempt
/// finds the job's commit on the branch and goes on from it.
#[tokio::test(flavor = "multi_thread")]
async fn github_sigkill_when_the_push_landed_and_its_answer_lost() {
    let held = Held::Git(GitRequest::PushPack, true);
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(Kind::GitHub, held, 1, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_sigkill_when_the_push_landed_and_its_answer_lost() {
    let held = Held::Git(GitRequest::PushPack, true);
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(Kind::Gitea, held, 1, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn github_sigkill_after_the_push_before_the_pull_request() {
    let held = Held::Forge(Hold::before("POST /repos/{owner}/{repo}/pulls"));
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(Kind::GitHub, held, 1, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_sigkill_after_the_push_before_the_pull_request() {
    let held = Held::Forge(Hold::before("POST /repos/{owner}/{repo}/pulls"));
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(Kind::Gitea, held, 1, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn github_sigkill_after_the_pull_request_before_the_final_comment() {
    let held = Held::Forge(Hold::before(
        "POST /repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers",
    ));
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(Kind::GitHub, held, 1, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_sigkill_after_the_pull_request_before_the_final_comment() {
    let held = Held::Forge(Hold::before(
        "POST /repos/{owner}/{repo}/pulls/{index}/requested_reviewers",
    ));
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(Kind::Gitea, held, 1, true).await;
}

/// The final status comment is written, the job not yet recorded as
/// done: the next attempt finds the pull request and says so again.
async fn after_the_final_comment_before_the_job_ends(kind: Kind) {
    let edit = call(
        kind,
        "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}",
        "PATCH /repos/{owner}/{repo}/issues/comments/{id}",
    );
    let held = Held::Forge(Hold::after_serving(&edit).with_body("✅ Opened #2"));
    sigkill_at_a_boundary_and_the_next_attempt_completes_the_job(kind, held, 1, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn github_sigkill_after_the_final_comment_before_the_job_ends() {
    after_the_final_comment_before_the_job_ends(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_sigkill_after_the_final_comment_before_the_job_ends() {
    after_the_final_comment_before_the_job_ends(Kind::Gitea).await;
}

/// A review's follow-up killed at a boundary of its own, driven from
/// outside as above: the next attempt adds one commit to the pull
/// request and answers each review thread once.
async fn sigkill_in_a_follow_up_and_the_next_attempt_answers_each_thread_once(
    kind: Kind,
    held: Hold,
) {
    let mut script = good_script();
    script.extend(review_script());
    let mut story = Story::start_with(kind, script, &[("FORGEHAND_QUEUE__LEASE_SECS", "3")]).await;
    story.label(1).await;
    story.settled().await;
    story.forge.with(|s| s.holds.push(held));
    story.review_two_threads().await;
    let deadline = Instant::now() + Duration::from_secs(90);
    while story.forge.with(|s| s.held.is_empty()) {
        assert!(
            Instant::now() < deadline,
            "never reached the held request:\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    story.kill_forgehand();
    story.start_forgehand().await;
    let jobs = story.settled().await;

    let job = only(&jobs, "review");
    assert_eq!(job["state"], "succeeded", "{job:#}\n{}", story.log());
    assert_eq!(job["attempts"], 2, "{job:#}");
    assert_eq!(
        story.log_of("forgehand/1-fix-add").await,
        ["Address the review", "Fix add in calc.sh", "start"],
        "one commit for the review"
    );
    let replies: Vec<(String, String)> = story.forge.with(|s| {
        s.review_comments
            .iter()
            .filter(|c| c.user == story.bot_login)
            .map(|c| (c.path.clone(), c.body.clone()))
            .collect()
    });
    let on = |path: &str| replies.iter().filter(|(p, _)| p == path).count();
    assert_eq!((on("calc.sh"), on("test.sh")), (1, 1), "{replies:#?}");
    assert_eq!(story.pulls().len(), 1, "exactly one pull request");
    assert_eq!(story.bot_comments(2).len(), 1, "exactly one status comment");
    assert!(
        story.status(2).starts_with("✅ Updated #2: "),
        "{}",
        story.status(2)
    );
    assert_eq!(story.model.left(), 0, "the agent answered the review once");
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

fn review_reply_post(kind: Kind) -> Hold {
    Hold::before(match kind {
        Kind::GitHub => "POST /repos/{owner}/{repo}/pulls/{pull_number}/comments",
        Kind::Gitea => "POST /repos/{owner}/{repo}/pulls/{index}/reviews",
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn github_sigkill_after_a_follow_ups_push_before_its_replies() {
    let held = review_reply_post(Kind::GitHub);
    sigkill_in_a_follow_up_and_the_next_attempt_answers_each_thread_once(Kind::GitHub, held).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_sigkill_after_a_follow_ups_push_before_its_replies() {
    let held = review_reply_post(Kind::Gitea);
    sigkill_in_a_follow_up_and_the_next_attempt_answers_each_thread_once(Kind::Gitea, held).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn github_sigkill_after_a_follow_ups_replies_before_its_final_comment() {
    let held = Hold::after_serving("PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}")
        .with_body("✅ Updated #2");
    sigkill_in_a_follow_up_and_the_next_attempt_answers_each_thread_once(Kind::GitHub, held).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_sigkill_after_a_follow_ups_replies_before_its_final_comment() {
    let held = Hold::after_serving("PATCH /repos/{owner}/{repo}/issues/comments/{id}")
        .with_body("✅ Updated #2");
    sigkill_in_a_follow_up_and_the_next_attempt_answers_each_thread_once(Kind::Gitea, held).await;
}
