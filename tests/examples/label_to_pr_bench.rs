//! Label to pull request, excluding the model: the real `forgehand serve`
//! (release build) fed a signed `labeled` webhook by the fake GitHub, the
//! scripted model (which answers at once, so the time is Forgehand's), ten
//! tool calls in the namespace sandbox, then the gate, the push over smart
//! HTTP and the pull request. Run by `bench/label_to_pr.sh`.
//!
//!   label_to_pr_bench [RUNS]     # 20 by default; prints JSON

use std::time::{Duration, Instant};

use forgehand_tests::fake_forge::Kind;
use forgehand_tests::model_server::Step;
use forgehand_tests::story::{Story, MAINTAINER, REPO};
use serde_json::{json, Value};

/// Ten tool calls (reads, searches, commands, an edit), then finish.
fn ten_tool_calls() -> Vec<Step> {
    vec![
        Step::call("list_files", json!({"path": "."})),
        Step::call("glob", json!({"pattern": "*.sh"})),
        Step::call("grep", json!({"pattern": "add"})),
        Step::call("read_file", json!({"path": "calc.sh"})),
        Step::call("read_file", json!({"path": "test.sh"})),
        Step::call("bash", json!({"command": "sh test.sh || true"})),
        Step::call(
            "edit_file",
            json!({"path": "calc.sh", "old_string": "$(($1 - $2))", "new_string": "$(($1 + $2))"}),
        ),
        Step::call("bash", json!({"command": "sh test.sh"})),
        Step::call("read_file", json!({"path": "calc.sh"})),
        Step::call("bash", json!({"command": "cat calc.sh test.sh | wc -l"})),
        Step::finish("`add` adds now; `sh test.sh` passes.", "Fix add"),
    ]
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("RUNS must be a number"))
        .unwrap_or(20);
    let script: Vec<Step> = (0..runs).flat_map(|_| ten_tool_calls()).collect();
    let story = Story::start(Kind::GitHub, script).await;
    let mut totals = Vec::new();
    let mut steps: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for run in 0..runs {
        let issue = story.forge.with(|s| {
            s.add_issue(
                REPO,
                MAINTAINER,
                &format!("Fix add ({run})"),
                "add() subtracts.",
            )
        });
        let pulls_before = story.pulls().len();
        let started = Instant::now();
        story
            .forge
            .label_issue(REPO, issue, "forgehand", MAINTAINER);
        let deadline = started + Duration::from_secs(120);
        while story.pulls().len() == pulls_before {
            assert!(
                Instant::now() < deadline,
                "no pull request for issue {issue}:\n{}",
                story.log()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        totals.push(started.elapsed().as_secs_f64() * 1000.0);
        let jobs = story.settled().await;
        let job = jobs.last().unwrap();
        assert_eq!(job["state"], "succeeded", "{job:#}");
        for step in job["result"]["steps"].as_array().unwrap() {
            steps
                .entry(step["step"].as_str().unwrap().to_owned())
                .or_default()
                .push(step["ms"].as_f64().unwrap());
        }
    }
    let model_requests = story.model.requests().len();
    assert_eq!(model_requests, runs * 11, "11 model turns per run");
    let mut sorted = totals.clone();
    sorted.sort_by(f64::total_cmp);
    let step_p50: Value = steps
        .into_iter()
        .map(|(name, mut ms)| {
            ms.sort_by(f64::total_cmp);
            (name, json!(percentile(&ms, 50.0)))
        })
        .collect::<serde_json::Map<_, _>>()
        .into();
    println!(
        "{:#}",
        json!({
            "runs": runs,
            "tool_calls_per_run": 10,
            "label_to_pull_request_ms": {
                "p50": percentile(&sorted, 50.0),
                "p90": percentile(&sorted, 90.0),
                "min": sorted[0],
                "max": sorted[sorted.len() - 1],
                "all": totals,
            },
            "step_p50_ms": step_p50,
        })
    );
}
