//! Checking the record: the answers, and the rows and jobs the operator
//! API shows.

use std::collections::BTreeMap;

use forgehand_tests::harness::{Answer, TestServer};
use serde_json::{json, Value};

use super::expect::Expect;

/// Every difference found, so that one run shows them all.
#[derive(Default)]
pub(crate) struct Report {
    failures: Vec<String>,
}

impl Report {
    fn eq(&mut self, ctx: &str, field: &str, got: &Value, want: &Value) {
        if got != want {
            self.failures
                .push(format!("{ctx}: {field} is {got}, expected {want}"));
        }
    }

    fn check(&mut self, ctx: &str, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(format!("{ctx}: {}", what()));
        }
    }

    /// `got` holds everything in `want`: objects key by key, the rest by
    /// equality.
    fn has(&mut self, ctx: &str, at: &str, got: &Value, want: &Value) {
        match want.as_object() {
            Some(want) => {
                for (key, want) in want {
                    self.has(ctx, &format!("{at}.{key}"), &got[key.as_str()], want);
                }
            }
            None => self.eq(ctx, at, got, want),
        }
    }

    pub(crate) fn finish(self, what: &str) {
        assert!(
            self.failures.is_empty(),
            "{what}: {} difference(s):\n  {}",
            self.failures.len(),
            self.failures.join("\n  ")
        );
    }
}

/// A delivery as it was sent and answered, with what it must become.
pub(crate) struct Sent {
    pub(crate) ctx: String,
    pub(crate) delivery_id: String,
    pub(crate) expect: Expect,
    pub(crate) answer: Answer,
}

/// Checks the answer to one delivery right away.
pub(crate) fn check_answer(report: &mut Report, sent: &Sent) {
    let (ctx, a, e) = (&sent.ctx, &sent.answer, &sent.expect);
    if e.replay_of.is_some() {
        return check_replay_answer(report, sent);
    }
    let accepted = e.job.is_some() || e.records;
    let outcome = if accepted { "accepted" } else { "ignored" };
    if a.status != 202 {
        report.failures.push(format!(
            "{ctx}: HTTP status is {}, expected 202: {}",
            a.status, a.body
        ));
        return;
    }
    report.eq(ctx, "answer.outcome", &a.body["outcome"], &json!(outcome));
    report.eq(
        ctx,
        "answer.delivery_id",
        &a.body["delivery_id"],
        &json!(sent.delivery_id),
    );
    let jobs = a.body["jobs"].as_array().map(Vec::len);
    report.eq(
        ctx,
        "answer.jobs count",
        &json!(jobs),
        &json!(usize::from(e.job.is_some())),
    );
    if !accepted {
        let reason = a.body["reason"].as_str().unwrap_or_default();
        report.check(ctx, !reason.is_empty(), || {
            format!("an ignored delivery gives no reason: {}", a.body)
        });
    }
}

/// A replay is answered like a redelivery: 200, a duplicate, the first
/// delivery's jobs.
fn check_replay_answer(report: &mut Report, sent: &Sent) {
    let (ctx, a, e) = (&sent.ctx, &sent.answer, &sent.expect);
    if a.status != 200 {
        report.failures.push(format!(
            "{ctx}: HTTP status is {}, expected 200 (a replay of {:?}): {}",
            a.status, e.replay_of, a.body
        ));
        return;
    }
    report.eq(
        ctx,
        "answer.outcome",
        &a.body["outcome"],
        &json!("duplicate"),
    );
    let jobs = a.body["jobs"].as_array().map(Vec::len);
    report.eq(
        ctx,
        "answer.jobs count",
        &json!(jobs),
        &json!(usize::from(e.job.is_some())),
    );
}

/// Checks the delivery's row in `GET /api/deliveries` and its job in
/// `GET /api/jobs`.
pub(crate) fn check_record(
    report: &mut Report,
    sent: &Sent,
    rows: &BTreeMap<String, Value>,
    jobs: &BTreeMap<i64, Value>,
) {
    let (ctx, e) = (&sent.ctx, &sent.expect);
    let Some(row) = rows.get(&sent.delivery_id) else {
        report.failures.push(format!(
            "{ctx}: no delivery {} in /api/deliveries",
            sent.delivery_id
        ));
        return;
    };
    let accepted = e.job.is_some() || e.records;
    report.eq(ctx, "forge", &row["forge"], &json!(e.forge));
    report.eq(ctx, "event", &row["event"], &json!(e.event));
    if e.replay_of.is_some() {
        report.eq(ctx, "outcome", &row["outcome"], &json!("duplicate"));
        report.eq(ctx, "status_code", &row["status_code"], &json!(200));
        let reason = row["reason"].as_str().unwrap_or_default();
        report.check(ctx, reason.contains("payload already recorded"), || {
            format!("a replay's reason is {reason:?}")
        });
        report.eq(ctx, "jobs", &row["jobs"], &sent.answer.body["jobs"]);
        return;
    }
    report.eq(ctx, "event_name", &row["event_name"], &json!(e.event_name));
    report.eq(
        ctx,
        "outcome",
        &row["outcome"],
        &json!(if accepted { "accepted" } else { "ignored" }),
    );
    report.eq(ctx, "status_code", &row["status_code"], &json!(202));
    report.eq(ctx, "repo", &row["repo"], &json!(e.repo));
    report.eq(ctx, "target", &row["target"], &json!(e.target));
    report.eq(ctx, "sender", &row["sender"], &json!(e.sender));
    if let Some(detail) = &e.detail {
        report.eq(ctx, "detail", &row["detail"], &json!(detail));
    }
    match (accepted, e.reason.as_deref()) {
        (true, _) => report.eq(ctx, "reason", &row["reason"], &Value::Null),
        (false, Some(piece)) => {
            let reason = row["reason"].as_str().unwrap_or_default();
            report.check(ctx, reason.contains(piece), || {
                format!("reason {reason:?} does not say {piece:?}")
            });
        }
        (false, None) => {}
    }
    report.eq(ctx, "jobs", &row["jobs"], &sent.answer.body["jobs"]);

    let ids: Vec<i64> = row["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_i64)
        .collect();
    let Some((want, kind)) = &e.job else {
        report.check(ctx, ids.is_empty(), || {
            format!("an ignored delivery has jobs {ids:?}")
        });
        return;
    };
    let [id] = ids[..] else {
        report.failures.push(format!(
            "{ctx}: expected one job, the delivery lists {ids:?}"
        ));
        return;
    };
    let Some(job) = jobs.get(&id) else {
        report
            .failures
            .push(format!("{ctx}: job {id} is not in /api/jobs"));
        return;
    };
    let ctx = &format!("{ctx} job {id}");
    report.eq(ctx, "delivery", &job["delivery"], &row["id"]);
    report.eq(ctx, "state", &job["state"], &json!("queued"));
    report.eq(ctx, "kind", &job["kind"], &json!(kind));
    report.has(ctx, "payload", &job["payload"], want);
    let key = format!(
        "{}:{}/{}#{}",
        want["forge"].as_str().unwrap_or_default(),
        want["repo"]["owner"].as_str().unwrap_or_default(),
        want["repo"]["name"].as_str().unwrap_or_default(),
        want["target"]
    );
    report.eq(ctx, "target_key", &job["target_key"], &json!(key));
}

/// Checks that the delivery's `detail` names the label, assignee or review
/// state its event is about.
pub(crate) fn check_names(report: &mut Report, sent: &Sent, rows: &BTreeMap<String, Value>) {
    let Some(names) = &sent.expect.names else {
        return;
    };
    match rows.get(&sent.delivery_id) {
        Some(row) => report.eq(&sent.ctx, "detail", &row["detail"], &json!(names)),
        None => report.failures.push(format!(
            "{}: no delivery {} in /api/deliveries",
            sent.ctx, sent.delivery_id
        )),
    }
}

/// Everything recorded, as the operator API shows it.
pub(crate) struct Recorded {
    pub(crate) rows: BTreeMap<String, Value>,
    pub(crate) jobs: BTreeMap<i64, Value>,
}

pub(crate) async fn recorded(server: &TestServer, sent: &[&Sent], report: &mut Report) -> Recorded {
    let rows = server.deliveries().await;
    let jobs = server.jobs().await;
    let accepted = sent
        .iter()
        .filter(|s| s.expect.job.is_some() && s.expect.replay_of.is_none())
        .count();
    let (n_rows, n_jobs) = (rows.len(), jobs.len());
    report.check("the operator API", n_rows == sent.len(), || {
        format!("{n_rows} delivery rows for {} POSTs", sent.len())
    });
    report.check("the operator API", n_jobs == accepted, || {
        format!("{n_jobs} jobs for {accepted} deliveries that must start one")
    });
    let rows: BTreeMap<String, Value> = rows
        .into_iter()
        .filter_map(|r| Some((r["delivery_id"].as_str()?.to_owned(), r)))
        .collect();
    let jobs = jobs
        .into_iter()
        .filter_map(|r| Some((r["id"].as_i64()?, r)))
        .collect();
    Recorded { rows, jobs }
}
