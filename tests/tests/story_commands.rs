//! The commands a maintainer gives in comments, as stories against the
//! real `forgehand serve` fed by the fake forges: plan then go, retry,
//! commands with nothing to act on, a request on the bot's pull request,
//! and a newer request superseding one still waiting.

use std::time::{Duration, Instant};

use forgehand_tests::fake_forge::Kind;
use forgehand_tests::model_server::Step;
use forgehand_tests::project::good_script;
use forgehand_tests::story::{
    end_held_command, held_command, held_command_pids, only, Story, MAINTAINER, STATUS_MARKER,
};
use serde_json::{json, Value};

/// The model's answer to a follow-up request: one edit, one commit.
fn document_add() -> [Step; 2] {
    [
        Step::call(
            "edit_file",
            json!({"path": "calc.sh", "old_string": "add() {", "new_string": "# add prints the sum of its arguments.\nadd() {"}),
        ),
        Step::finish("Documented add.", "Document add"),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_then_go_proposes_first_and_carries_the_plan_out() {
    let mut script = vec![
        Step::call("read_file", json!({"path": "calc.sh"})),
        Step::finish(
            "1. In `calc.sh`, make `add` use `+`.\n2. Run `sh test.sh`.",
            "Fix add",
        ),
    ];
    script.extend(good_script());
    let story = Story::start(Kind::GitHub, script).await;
    story.comment(1, MAINTAINER, "/forgehand plan").await;
    let jobs = story.settled().await;
    let plan = only(&jobs, "command.plan");
    assert_eq!(plan["state"], "succeeded", "{plan:#}");
    assert_eq!(plan["result"]["outcome"], "planned");
    let status = story.status(1);
    assert!(
        status.starts_with("📋 **Here is my plan.** Nothing is changed yet.\n\n1. In `calc.sh`, make `add` use `+`.\n2. Run `sh test.sh`.\n\nSay `/forgehand go`"),
        "{status}"
    );
    assert!(story.pulls().is_empty(), "a plan changes nothing");
    assert_eq!(story.branches().await, ["main"]);

    story.comment(1, MAINTAINER, "/forgehand go").await;
    let jobs = story.settled().await;
    let go = only(&jobs, "command.go");
    assert_eq!(go["state"], "succeeded", "{go:#}");
    assert_eq!(story.pulls().len(), 1);
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
async fn go_without_a_plan_and_stop_without_a_job_say_so() {
    let story = Story::start(Kind::Gitea, vec![]).await;
    // One at a time: a stop would stop a `go` still at work.
    for command in ["go", "stop", "help"] {
        story
            .comment(1, MAINTAINER, &format!("/forgehand {command}"))
            .await;
        story.settled().await;
    }
    let said = story.bot_comments(1);
    assert_eq!(said.len(), 3, "{said:#?}");
    assert_eq!(
        said[0],
        "@maintainer there is no plan to go ahead with on #1: ask `/forgehand plan` first."
    );
    assert_eq!(
        said[1],
        "@maintainer there is nothing to stop: no job of mine is running or waiting on #1."
    );
    assert!(said[2].contains("/forgehand plan"), "{}", said[2]);
    assert!(story.model.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn retry_runs_the_failed_job_again() {
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
    let story = Story::start(Kind::Gitea, script).await;
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
    let statuses: Vec<String> = story
        .bot_comments(1)
        .into_iter()
        .filter(|c| c.contains(STATUS_MARKER))
        .collect();
    assert_eq!(statuses.len(), 2, "one per job: {statuses:#?}");
    assert!(statuses[0].starts_with("❌ Stopped: `model_error`."));
    assert!(statuses[1].starts_with("✅ Opened #2: "));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_on_the_bots_pull_request_is_a_follow_up_commit() {
    let mut script = good_script();
    script.extend(document_add());
    let story = Story::start(Kind::GitHub, script).await;
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
}

#[tokio::test(flavor = "multi_thread")]
async fn the_newest_waiting_request_supersedes_the_older_one() {
    // The first job's command lasts until the test ends it, once both
    // requests are in: they come while it runs however slow the machine.
    let mut script = vec![Step::call(
        "bash",
        json!({"command": held_command("515151")}),
    )];
    script.extend(good_script());
    script.extend(document_add());
    let story = Story::start(Kind::GitHub, script).await;
    story.label(1).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while held_command_pids("515151").is_empty() {
        assert!(Instant::now() < deadline, "the first job never started");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // Two requests while the first job runs: only the newer one is done.
    story
        .comment(1, MAINTAINER, "@forgehand also make it print a newline")
        .await;
    story
        .comment(1, MAINTAINER, "@forgehand actually, just document add")
        .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while end_held_command("515151") == 0 {
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
}
