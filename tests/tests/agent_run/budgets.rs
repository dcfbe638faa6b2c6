//! The budgets the host holds a run to: each stops the run with its
//! reason code, and what the run did is reported.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn the_turn_budget_stops_the_run_and_keeps_the_work() {
    let mut steps = vec![edit_step()];
    steps.extend((0..5).map(|_| Step::call("list_files", json!({}))));
    let (project, report) = stops_with("budget:turns", steps, "[agent]\nmax_turns = 3\n").await;
    assert_eq!(report["turns"], 3);
    let branch = report["branch"]
        .as_str()
        .expect("the work so far is on a branch");
    assert!(project
        .file_on_branch(branch, "calc.sh")
        .contains("$1 + $2"));
    assert!(report["message"]
        .as_str()
        .unwrap()
        .contains("agent.max_turns"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tool_call_budget_stops_the_run() {
    let two_calls = Step::Reply {
        text: None,
        calls: vec![
            ("list_files".into(), "{}".into()),
            ("list_files".into(), "{}".into()),
        ],
        usage: None,
    };
    let (_project, report) = stops_with(
        "budget:tool_calls",
        vec![edit_step(), two_calls],
        "[agent]\nmax_tool_calls = 2\n",
    )
    .await;
    assert_eq!(report["tool_calls"], 2);
    let events = transcript(&report);
    let last = tool_events(&events).pop().unwrap().clone();
    assert!(
        last["result"]
            .as_str()
            .unwrap()
            .contains("budget is used up"),
        "{last}"
    );
}

/// The model's second answer would come ten minutes later, after the
/// run's own 180 s limit (`Project::run`): only the 2 s budget can end the
/// run with a report, and the report says it did. How long the run took
/// is not asserted: a loaded machine may take longer over the rest.
#[tokio::test(flavor = "multi_thread")]
async fn the_time_budget_stops_a_slow_model() {
    let slow = Step::Slow {
        delay: Duration::from_secs(600),
        then: Box::new(Step::finish("late", "late")),
    };
    let project = Project::new();
    let server = ModelServer::start(vec![edit_step(), slow]).await.unwrap();
    let (code, report) = tokio::task::block_in_place(|| {
        project.run(&server, "openai", "[agent]\nmax_seconds = 2\n")
    });
    assert_eq!(report["status"], "failed", "{report:#}");
    assert_eq!(report["reason"], "budget:time", "{report:#}");
    assert_eq!(code, 1);
    assert_eq!(report["turns"], 1);
    assert_eq!(server.left(), 0, "the slow answer was asked for");
    assert_eq!(
        server.requests().len(),
        1,
        "the run ended while the slow answer was still to come"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_input_token_budget_stops_the_run() {
    let (_, report) = stops_with(
        "budget:input_tokens",
        vec![edit_step().with_usage(600, 10), Step::finish("x", "x")],
        "[agent]\nmax_input_tokens = 500\n",
    )
    .await;
    assert_eq!(report["turns"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_output_token_budget_stops_the_run() {
    let (_, report) = stops_with(
        "budget:output_tokens",
        vec![edit_step().with_usage(10, 700), Step::finish("x", "x")],
        "[agent]\nmax_output_tokens = 500\n",
    )
    .await;
    assert_eq!(report["turns"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dollar_budget_stops_the_run_and_the_cost_is_reported() {
    let config = "[agent]\nmax_dollars = 0.5\n\n[model.prices.scripted-model]\ninput_per_mtok = 100.0\noutput_per_mtok = 400.0\n";
    let (_, report) = stops_with(
        "budget:dollars",
        vec![edit_step().with_usage(4000, 500), Step::finish("x", "x")],
        config,
    )
    .await;
    // 4000 × $100/M + 500 × $400/M = $0.40 + $0.20
    let cost = report["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.6).abs() < 1e-9, "{cost}");
}
