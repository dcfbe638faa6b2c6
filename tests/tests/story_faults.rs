//! Forgehand under faults, as a maintainer would meet them: the real
//! `forgehand serve` against fake forges that fail calls (5xx, rate
//! limits, answers lost after the change was made) and a git server that
//! fails requests, either holding a request at a stage boundary while the
//! service is killed, or failing a share of every call; each job still
//! ends with one pull request and one final status comment.

use std::time::{Duration, Instant};

use forgehand_tests::fake_forge::{CallFault, Hold, Kind};
use forgehand_tests::git_http::GitRequest;
use forgehand_tests::model_server::Step;
use forgehand_tests::project::good_script;
use forgehand_tests::story::{host_processes_with, only, Story, MAINTAINER, REPO, STATUS_MARKER};
use serde_json::{json, Value};

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
    assert!(story.status(1).starts_with("✅ Opened #2: "));
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

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_in_the_middle_of_a_job_and_the_restarted_service_finishes_it() {
    let mut script = vec![Step::call(
        "bash",
        json!({"command": "sleep 4 && echo 646464"}),
    )];
    script.extend(good_script());
    let mut story = Story::start_with(
        Kind::GitHub,
        script,
        &[("FORGEHAND_QUEUE__LEASE_SECS", "3")],
    )
    .await;
    story.label(1).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while host_processes_with("646464").is_empty() {
        assert!(Instant::now() < deadline, "the agent never started");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(story.bot_comments(1).len(), 1, "the status comment is up");
    story.kill_forgehand();
    story.start_forgehand().await;
    let jobs = story.settled().await;

    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}");
    assert_eq!(job["attempts"], 2, "the lease ran out and it ran again");
    assert_eq!(story.pulls().len(), 1, "exactly one pull request");
    assert_eq!(story.bot_comments(1).len(), 1, "exactly one status comment");
    assert!(story.status(1).starts_with("✅ Opened #2: "));
}

/// SIGKILL on the job's last attempt: no attempt is left to finish it,
/// so the queue, when it dead-letters the job, gives the status comment
/// its final word instead of leaving it on "working".
#[tokio::test(flavor = "multi_thread")]
async fn sigkill_on_the_last_attempt_leaves_a_final_status_not_working() {
    let mut script = vec![Step::call(
        "bash",
        json!({"command": "sleep 4 && echo 737373"}),
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
    let deadline = Instant::now() + Duration::from_secs(60);
    while host_processes_with("737373").is_empty() {
        assert!(Instant::now() < deadline, "the agent never started");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(story
        .status(1)
        .starts_with("🛠️ **Forgehand is working on this.**"));
    story.kill_forgehand();
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
    assert_eq!(
        story.status(1),
        "❌ Stopped: `infra`. the worker stopped heartbeating (crashed or hung) on the last attempt (1 of 1)"
    );
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
    let steps: Vec<&str> = detail["result"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
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

/// Twenty labelled issues while every fourth API call fails (500, 429
/// with Retry-After, a secondary rate limit's 403 with Retry-After, 502,
/// in turn) and every fifth git request too: every issue ends with
/// exactly one pull request and one status comment in its final form.
async fn twenty_issues_through_a_faulty_forge(kind: Kind) {
    let script: Vec<Step> = (0..20).flat_map(|_| good_script()).collect();
    let story = Story::start_with(kind, script, &[("FORGEHAND_QUEUE__WORKERS", "1")]).await;
    story.forge.with(|s| {
        for n in 2..=20 {
            s.add_issue(
                REPO,
                MAINTAINER,
                &format!("Fix add {n}"),
                "add() subtracts.",
            );
        }
        s.fault_every = Some(4);
    });
    // And every fifth authenticated git request: 500, 502, 503, 429 with
    // Retry-After in turn, some pushes landing with their answer lost.
    story.project.git.faults(|f| f.every = Some(5));
    for n in 1..=20 {
        story.forge.label_issue(REPO, n, "forgehand", MAINTAINER);
    }
    story.forge.settle().await;
    let jobs = story.settled().await;

    let labeled: Vec<&Value> = jobs.iter().filter(|j| j["kind"] == "labeled").collect();
    assert_eq!(labeled.len(), 20, "{jobs:#?}");
    for job in &labeled {
        assert_eq!(job["state"], "succeeded", "{job:#}");
    }
    let served = story.forge.with(|s| s.faults_served);
    assert!(served >= 60, "only {served} faults served");
    let git_served = story.project.git.faults(|f| f.served);
    assert!(git_served >= 15, "only {git_served} git faults served");
    let pulls = story.pulls();
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
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn github_twenty_issues_through_a_faulty_forge() {
    twenty_issues_through_a_faulty_forge(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_twenty_issues_through_a_faulty_forge() {
    twenty_issues_through_a_faulty_forge(Kind::Gitea).await;
}
