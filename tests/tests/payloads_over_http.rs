//! Every real webhook payload in `../shared/testdata`, delivered to the
//! running service over HTTP with the headers and signature its forge
//! sends, and read back through the operator API field by field.
//!
//! What each delivery must become is worked out here from the raw JSON
//! with `serde_json` pointers, following the forges' documented meaning
//! (GitHub's `action`s, Gitea's event headers), never with Forgehand's own
//! parser: a payload that Forgehand misreads shows up as a difference.

use std::collections::BTreeMap;

use forgehand_tests::harness::{
    forgejo_headers, gitea_headers, github_headers, Answer, TestServer,
};
use forgehand_tests::testdata;
use serde_json::{json, Value};

/// The bot's username: the author of the pull request that the real
/// Gitea review examples review, so that those reviews are for the bot.
const BOT: &str = "jony";
/// The bot's label: the label that GitHub's `issues/labeled` examples add.
const LABEL: &str = "bug";

/// GitHub's example count (README of the shared test data).
const GITHUB_FILES: usize = 97;
/// Gitea's and Forgejo's example count.
const GITEA_FILES: usize = 62;

async fn server() -> TestServer {
    TestServer::start_with(|config| {
        config.bot.username = BOT.into();
        config.bot.label = LABEL.into();
    })
    .await
}

// ---- what a delivery must become ------------------------------------------

/// One delivery's expected record, computed from the raw payload.
#[derive(Debug, Clone)]
struct Expect {
    forge: &'static str,
    /// The event header sent.
    event: String,
    event_name: String,
    repo: Option<String>,
    target: Option<u64>,
    sender: Option<String>,
    /// The delivery's `detail` when it starts a job: what made it act
    /// (`label:…`, `review:…`, `command:…`, `mention`). Not checked when
    /// `None`.
    detail: Option<String>,
    /// The label, assignee or review state the event is about, as
    /// `detail` names it (`label:bug`, `assignee:octocat`,
    /// `review:approved`), whether or not it starts a job.
    names: Option<String>,
    /// The job's typed payload (a subset of it) and its `kind`, when the
    /// delivery must start one; `None` means "ignored".
    job: Option<(Value, String)>,
    /// A piece of the reason an ignored delivery must give.
    reason: Option<&'static str>,
}

fn text(v: &Value, ptr: &str) -> Option<String> {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn number(v: &Value, ptr: &str) -> Option<u64> {
    v.pointer(ptr).and_then(Value::as_u64)
}

/// The issue or pull request the payload is about.
fn target_of(v: &Value) -> Option<u64> {
    number(v, "/issue/number")
        .or_else(|| number(v, "/pull_request/number"))
        .or_else(|| number(v, "/number"))
}

/// A user's handle: GitHub's `login`; Gitea's `login` or `username`.
fn login(v: &Value, ptr: &str) -> Option<String> {
    text(v, &format!("{ptr}/login")).or_else(|| text(v, &format!("{ptr}/username")))
}

/// `owner/name`: `repository.full_name`, else the owner's handle and name.
fn repo_of(v: &Value) -> Option<String> {
    text(v, "/repository/full_name").or_else(|| {
        let owner = login(v, "/repository/owner")?;
        let name = text(v, "/repository/name")?;
        Some(format!("{owner}/{name}"))
    })
}

fn is_bot(handle: &str) -> bool {
    let handle = handle.strip_suffix("[bot]").unwrap_or(handle);
    handle.eq_ignore_ascii_case(BOT)
}

/// The job subset every job of `forge` about `v`'s repository carries.
fn job_base(forge: &str, v: &Value, target: u64, on_pr: bool, requested_by: &str) -> Value {
    let repo = repo_of(v).expect("a job needs a repository");
    let (owner, name) = repo.split_once('/').expect("owner/name");
    json!({
        "forge": forge,
        "repo": { "owner": owner, "name": name },
        "target": target,
        "on_pull_request": on_pr,
        "requested_by": requested_by,
    })
}

fn with_task(mut job: Value, task: Value) -> Value {
    job["task"] = task;
    job
}

impl Expect {
    /// A delivery Forgehand reads into a typed event.
    fn typed(
        forge: &'static str,
        event: &str,
        name: String,
        v: &Value,
        sender: Option<String>,
    ) -> Self {
        Expect {
            forge,
            event: event.to_owned(),
            event_name: name,
            repo: repo_of(v),
            target: target_of(v),
            sender,
            detail: None,
            names: None,
            job: None,
            reason: None,
        }
    }

    /// An event or action Forgehand does not act on: kept by name only.
    fn other(forge: &'static str, event: &str, action: Option<&str>) -> Self {
        Expect {
            forge,
            event: event.to_owned(),
            event_name: match action {
                Some(a) => format!("{event}.{a}"),
                None => event.to_owned(),
            },
            repo: None,
            target: None,
            sender: None,
            detail: None,
            names: None,
            job: None,
            reason: Some("does not act on"),
        }
    }

    fn no_target(mut self) -> Self {
        self.target = None;
        self
    }

    fn no_repo(mut self) -> Self {
        self.repo = None;
        self
    }
}

/// A created comment in these examples must not address the bot: if one
/// does, its command belongs in the expectation.
fn assert_silent(ctx: &str, body: &str) {
    let lower = body.to_lowercase();
    assert!(
        !lower.contains("/forgehand") && !lower.contains(&format!("@{}", BOT.to_lowercase())),
        "{ctx}: the comment addresses the bot; say which command it gives"
    );
}

/// What a GitHub delivery of `event` with body `v` must become.
fn github_expect(event: &str, v: &Value) -> Expect {
    const FORGE: &str = "github";
    let action = v["action"].as_str();
    let sender = text(v, "/sender/login");
    let typed = |name: String| Expect::typed(FORGE, event, name, v, sender.clone());
    let from_bot = sender.as_deref().is_some_and(is_bot);
    match (event, action) {
        ("ping", _) => typed("ping".into()).no_target(),
        (
            "issues",
            Some(
                a @ ("opened" | "edited" | "closed" | "reopened" | "labeled" | "unlabeled"
                | "assigned" | "unassigned"),
            ),
        ) => {
            let mut e = typed(format!("issues.{a}"));
            let is_pr = v["issue"]["pull_request"].is_object();
            let number = e.target.expect("issues carry a number");
            let by = sender.clone().unwrap_or_default();
            match a {
                "labeled" | "unlabeled" => {
                    let label = text(v, "/label/name").expect("GitHub says which label");
                    e.names = Some(format!("label:{label}"));
                    if a == "labeled" && label.eq_ignore_ascii_case(LABEL) && !is_pr && !from_bot {
                        e.detail = Some(format!("label:{LABEL}"));
                        let job = job_base(FORGE, v, number, false, &by);
                        let task = json!({ "type": "labeled", "label": LABEL });
                        e.job = Some((with_task(job, task), "labeled".into()));
                    }
                }
                "assigned" | "unassigned" => {
                    let who = text(v, "/assignee/login").expect("GitHub says who");
                    e.names = Some(format!("assignee:{who}"));
                    if a == "assigned" && is_bot(&who) && !is_pr && !from_bot {
                        let job = job_base(FORGE, v, number, false, &by);
                        let task = json!({ "type": "assigned" });
                        e.job = Some((with_task(job, task), "assigned".into()));
                    }
                }
                _ => {}
            }
            e
        }
        ("issue_comment", Some(a @ ("created" | "edited" | "deleted"))) => {
            if a == "created" {
                assert_silent(event, v["comment"]["body"].as_str().unwrap_or_default());
            }
            typed(format!("issue_comment.{a}"))
        }
        ("pull_request", Some("closed")) => {
            let merged = v["pull_request"]["merged"].as_bool() == Some(true);
            typed(format!(
                "pull_request.{}",
                if merged { "merged" } else { "closed" }
            ))
        }
        (
            "pull_request",
            Some(
                a @ ("opened" | "synchronize" | "reopened" | "edited" | "labeled" | "unlabeled"
                | "assigned" | "unassigned" | "review_requested"),
            ),
        ) => typed(format!("pull_request.{a}")),
        ("pull_request_review", Some("submitted")) => {
            let state = v["review"]["state"]
                .as_str()
                .unwrap_or_default()
                .to_lowercase();
            if !matches!(
                state.as_str(),
                "approved" | "changes_requested" | "commented"
            ) {
                return Expect::other(FORGE, event, action);
            }
            let mut e = typed(format!("review.{state}"));
            e.names = Some(format!("review:{state}"));
            let author = text(v, "/pull_request/user/login").unwrap_or_default();
            if is_bot(&author) && !from_bot {
                e.detail = e.names.clone();
                let number = e.target.expect("a pull request number");
                let job = job_base(
                    FORGE,
                    v,
                    number,
                    true,
                    sender.as_deref().unwrap_or_default(),
                );
                let task = json!({
                    "type": "review", "state": state, "review_id": v["review"]["id"],
                    "body": v["review"]["body"].as_str().unwrap_or_default(),
                });
                e.job = Some((with_task(job, task), "review".into()));
            }
            e
        }
        ("pull_request_review_comment", Some(a @ ("created" | "edited" | "deleted"))) => {
            if a == "created" {
                assert_silent(event, v["comment"]["body"].as_str().unwrap_or_default());
            }
            typed(format!("review_comment.{a}"))
        }
        ("installation", Some(a)) => {
            let name = match a {
                "created" | "deleted" | "new_permissions_accepted" => a,
                "suspend" => "suspended",
                "unsuspend" => "unsuspended",
                _ => return Expect::other(FORGE, event, action),
            };
            typed(format!("installation.{name}")).no_repo().no_target()
        }
        ("installation_repositories", Some(a @ ("added" | "removed"))) => {
            typed(format!("installation_repositories.{a}"))
                .no_repo()
                .no_target()
        }
        _ => Expect::other(FORGE, event, action),
    }
}

/// The `X-Gitea-Event` header each example goes with. The woodpecker
/// `hooks.go.txt` files only name the payloads; the header follows from
/// the name (reviews are `pull_request_approved`/`_rejected`/`_comment`,
/// tags are `create`), and comments on pull requests are `issue_comment`.
fn gitea_event(rel: &str) -> &'static str {
    let (dir, file) = rel.split_once('/').expect("<source>/<file>.json");
    let stem = file.trim_end_matches(".json");
    if dir == "drone-go-scm" {
        return match stem {
            "push" => "push",
            s if s.ends_with("_create") => "create",
            s if s.ends_with("_delete") => "delete",
            s if s.starts_with("issue_comment_") || s.starts_with("pull_request_comment_") => {
                "issue_comment"
            }
            s if s.starts_with("issues_") => "issues",
            s if s.starts_with("pull_request_") => "pull_request",
            _ => panic!("no event header known for {rel}"),
        };
    }
    match stem {
        "HookPullRequestReviewAck" => "pull_request_approved",
        "HookPullRequestReviewDeny" => "pull_request_rejected",
        "HookPullRequestReviewComment" => "pull_request_comment",
        "HookTag" => "create",
        "HookRelease" => "release",
        s if s.starts_with("HookPush") => "push",
        s if s.starts_with("HookPullRequest") => "pull_request",
        _ => panic!("no event header known for {rel}"),
    }
}

/// Forgejo's examples come from Forgejo; the rest from Gitea.
fn gitea_forge(rel: &str) -> &'static str {
    if rel.starts_with("woodpecker-forgejo/") {
        "forgejo"
    } else {
        "gitea"
    }
}

/// What a Gitea or Forgejo delivery with header `event` and body `v` must
/// become.
fn gitea_expect(forge: &'static str, event: &str, v: &Value) -> Expect {
    let action = v["action"].as_str();
    let sender = login(v, "/sender");
    let typed = |name: String| Expect::typed(forge, event, name, v, sender.clone());
    let from_bot = sender.as_deref().is_some_and(is_bot);
    match (event, action) {
        ("issues", Some(a)) => {
            let name = match a {
                "opened" | "edited" | "closed" | "reopened" | "assigned" | "unassigned" => a,
                "label_updated" | "labeled" => "labeled",
                "label_cleared" | "unlabeled" => "unlabeled",
                _ => return Expect::other(forge, event, action),
            };
            let mut e = typed(format!("issues.{name}"));
            let is_pr = v["issue"]["pull_request"].is_object();
            let number = e.target.expect("issues carry a number");
            let by = sender.clone().unwrap_or_default();
            let names = |list: &str| -> Vec<String> {
                v["issue"][list]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| text(x, "/name").or_else(|| login(x, "")))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            // Gitea names neither the label nor the assignee: the issue
            // carries the new sets.
            let has_label = names("labels")
                .iter()
                .any(|l| l.eq_ignore_ascii_case(LABEL));
            if name == "labeled" && has_label && !is_pr && !from_bot {
                e.detail = Some(format!("label:{LABEL}"));
                let job = job_base(forge, v, number, false, &by);
                let task = json!({ "type": "labeled", "label": LABEL });
                e.job = Some((with_task(job, task), "labeled".into()));
            }
            if name == "assigned"
                && !is_pr
                && !from_bot
                && names("assignees").iter().any(|a| is_bot(a))
            {
                let job = job_base(forge, v, number, false, &by);
                e.job = Some((
                    with_task(job, json!({ "type": "assigned" })),
                    "assigned".into(),
                ));
            }
            e
        }
        ("issue_comment", Some(a @ ("created" | "edited" | "deleted"))) => {
            if a == "created" {
                assert_silent(event, v["comment"]["body"].as_str().unwrap_or_default());
            }
            typed(format!("issue_comment.{a}"))
        }
        ("pull_request", Some("closed")) => {
            let merged = v["pull_request"]["merged"].as_bool() == Some(true);
            typed(format!(
                "pull_request.{}",
                if merged { "merged" } else { "closed" }
            ))
        }
        ("pull_request", Some(a)) => {
            let name = match a {
                "opened" | "reopened" | "edited" | "assigned" | "unassigned"
                | "review_requested" => a,
                "synchronized" | "synchronize" => "synchronize",
                "label_updated" | "labeled" => "labeled",
                "label_cleared" | "unlabeled" => "unlabeled",
                _ => return Expect::other(forge, event, action),
            };
            typed(format!("pull_request.{name}"))
        }
        (
            "pull_request_approved" | "pull_request_rejected" | "pull_request_comment",
            None | Some("reviewed" | "submitted"),
        ) if v.get("comment").is_none() => {
            let state = match event {
                "pull_request_approved" => "approved",
                "pull_request_rejected" => "changes_requested",
                _ => "commented",
            };
            let mut e = typed(format!("review.{state}"));
            e.names = Some(format!("review:{state}"));
            let author = login(v, "/pull_request/user").unwrap_or_default();
            if is_bot(&author) && !from_bot {
                e.detail = e.names.clone();
                let number = e.target.expect("a pull request number");
                let job = job_base(
                    forge,
                    v,
                    number,
                    true,
                    sender.as_deref().unwrap_or_default(),
                );
                let task = json!({
                    "type": "review", "state": state, "review_id": null,
                    "body": v["review"]["content"].as_str().unwrap_or_default(),
                });
                e.job = Some((with_task(job, task), "review".into()));
            }
            e
        }
        _ => Expect::other(forge, event, action),
    }
}

// ---- checking the record ------------------------------------------------------

/// Every difference found, so that one run shows them all.
#[derive(Default)]
struct Report {
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

    fn finish(self, what: &str) {
        assert!(
            self.failures.is_empty(),
            "{what}: {} difference(s):\n  {}",
            self.failures.len(),
            self.failures.join("\n  ")
        );
    }
}

/// A delivery as it was sent and answered, with what it must become.
struct Sent {
    ctx: String,
    delivery_id: String,
    expect: Expect,
    answer: Answer,
}

/// Checks the answer to one delivery right away.
fn check_answer(report: &mut Report, sent: &Sent) {
    let (ctx, a, e) = (&sent.ctx, &sent.answer, &sent.expect);
    let outcome = if e.job.is_some() {
        "accepted"
    } else {
        "ignored"
    };
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
    if e.job.is_none() {
        let reason = a.body["reason"].as_str().unwrap_or_default();
        report.check(ctx, !reason.is_empty(), || {
            format!("an ignored delivery gives no reason: {}", a.body)
        });
    }
}

/// Checks the delivery's row in `GET /api/deliveries` and its job in
/// `GET /api/jobs`.
fn check_record(
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
    let accepted = e.job.is_some();
    report.eq(ctx, "forge", &row["forge"], &json!(e.forge));
    report.eq(ctx, "event", &row["event"], &json!(e.event));
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
    match (accepted, e.reason) {
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
fn check_names(report: &mut Report, sent: &Sent, rows: &BTreeMap<String, Value>) {
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

/// A fresh delivery id that says which case it is (ASCII, as header
/// values must be).
fn unique_id(ctx: &str) -> String {
    let readable: String = ctx
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{readable}-{}", uuid::Uuid::new_v4().simple())
}

#[derive(Clone, Copy)]
enum Via {
    Github,
    Gitea,
    Forgejo,
}

/// A delivery to make: how, what, and what it must become.
struct Planned {
    ctx: String,
    via: Via,
    body: Vec<u8>,
    expect: Expect,
}

/// Sends every planned delivery in turn, each with its own delivery id,
/// and checks each answer.
async fn send_all(server: &TestServer, planned: Vec<Planned>, report: &mut Report) -> Vec<Sent> {
    let mut sent = Vec::with_capacity(planned.len());
    for p in planned {
        let delivery_id = unique_id(&p.ctx);
        let event = p.expect.event.clone();
        let answer = match p.via {
            Via::Github => server.post_github(&event, &delivery_id, p.body).await,
            Via::Gitea => server.post_gitea(&event, &delivery_id, p.body).await,
            Via::Forgejo => server.post_forgejo(&event, &delivery_id, p.body).await,
        };
        let s = Sent {
            ctx: p.ctx,
            delivery_id,
            expect: p.expect,
            answer,
        };
        check_answer(report, &s);
        sent.push(s);
    }
    sent
}

/// Everything recorded, as the operator API shows it.
struct Recorded {
    rows: BTreeMap<String, Value>,
    jobs: BTreeMap<i64, Value>,
}

async fn recorded(server: &TestServer, sent: &[&Sent], report: &mut Report) -> Recorded {
    let rows = server.deliveries().await;
    let jobs = server.jobs().await;
    let accepted = sent.iter().filter(|s| s.expect.job.is_some()).count();
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

// ---- the real examples -----------------------------------------------------------

fn github_examples() -> Vec<Planned> {
    let files = testdata::github_examples();
    assert_eq!(
        files.len(),
        GITHUB_FILES,
        "GitHub examples found: {files:?}"
    );
    files
        .iter()
        .map(|rel| {
            let (event, _) = rel.split_once('/').expect("<event>/<action>.<n>.json");
            let body = testdata::github_example(rel);
            let v: Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{rel}: {e}"));
            Planned {
                ctx: format!("github {rel}"),
                via: Via::Github,
                expect: github_expect(event, &v),
                body,
            }
        })
        .collect()
}

fn gitea_examples() -> Vec<Planned> {
    let files = testdata::gitea_examples();
    assert_eq!(
        files.len(),
        GITEA_FILES,
        "Gitea/Forgejo examples found: {files:?}"
    );
    files
        .iter()
        .map(|rel| {
            let event = gitea_event(rel);
            let forge = gitea_forge(rel);
            let body = testdata::gitea_example(rel);
            let v: Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{rel}: {e}"));
            Planned {
                ctx: format!("{forge} {rel} ({event})"),
                via: if forge == "forgejo" {
                    Via::Forgejo
                } else {
                    Via::Gitea
                },
                expect: gitea_expect(forge, event, &v),
                body,
            }
        })
        .collect()
}

// ---- cases the examples lack ------------------------------------------------------

fn github_example_json(rel: &str) -> Value {
    testdata::json(&format!("{}/{rel}", testdata::GITHUB_EXAMPLES))
}

fn gitea_example_json(rel: &str) -> Value {
    testdata::json(&format!("{}/{rel}", testdata::GITEA_EXAMPLES))
}

fn github_comment(body: &str, on_pull_request: bool) -> Value {
    let mut v = github_example_json("issue_comment/created.1.json");
    assert!(
        v["issue"].get("pull_request").is_none(),
        "the example is an issue comment"
    );
    if on_pull_request {
        v["issue"]["pull_request"] = json!({
            "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1",
            "html_url": "https://github.com/Codertocat/Hello-World/pull/1",
            "diff_url": "https://github.com/Codertocat/Hello-World/pull/1.diff",
            "patch_url": "https://github.com/Codertocat/Hello-World/pull/1.patch",
        });
    }
    v["comment"]["body"] = json!(body);
    v
}

fn gitea_comment(file: &str, body: &str) -> Value {
    let mut v = gitea_example_json(&format!("drone-go-scm/{file}"));
    v["comment"]["body"] = json!(body);
    v
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("serialisable")
}

/// The expectation for a created comment, from the raw payload as above,
/// before saying what it asks the bot.
fn comment_expect(forge: &'static str, v: &Value) -> Expect {
    let sender = if forge == "github" {
        text(v, "/sender/login")
    } else {
        login(v, "/sender")
    };
    Expect::typed(
        forge,
        "issue_comment",
        "issue_comment.created".into(),
        v,
        sender,
    )
}

/// A comment that gives the bot `task`, whose job is `kind` and whose
/// delivery's detail is `detail`.
fn commanded(
    forge: &'static str,
    v: &Value,
    on_pr: bool,
    task: Value,
    kind: &str,
    detail: &str,
) -> Expect {
    let mut e = comment_expect(forge, v);
    let number = e.target.expect("a comment is on an issue");
    let by = e.sender.clone().expect("a sender");
    let mut task = task;
    task["comment_id"] = v["comment"]["id"].clone();
    e.job = Some((
        with_task(job_base(forge, v, number, on_pr, &by), task),
        kind.to_owned(),
    ));
    e.detail = Some(detail.to_owned());
    e
}

/// A comment that must be ignored, with a reason saying `why`.
fn ignored_comment(forge: &'static str, v: &Value, why: &'static str) -> Expect {
    let mut e = comment_expect(forge, v);
    e.reason = Some(why);
    e
}

fn plan(ctx: &str, via: Via, v: &Value, expect: Expect) -> Planned {
    Planned {
        ctx: ctx.to_owned(),
        via,
        body: bytes(v),
        expect,
    }
}

fn built_cases() -> Vec<Planned> {
    let mut cases = Vec::new();

    // A comment on a pull request: GitHub sends it as `issue_comment`
    // with `issue.pull_request` set.
    let v = github_comment("/forgehand retry", true);
    let task = json!({ "type": "command", "command": { "name": "retry" } });
    let e = commanded("github", &v, true, task, "command.retry", "command:retry");
    cases.push(plan(
        "github PR comment `/forgehand retry`",
        Via::Github,
        &v,
        e,
    ));

    // A request in plain words, on an issue.
    let v = github_comment(&format!("@{BOT} please add tests"), false);
    let task = json!({ "type": "request", "text": "please add tests" });
    let e = commanded("github", &v, false, task, "request", "mention");
    cases.push(plan(
        "github issue comment `@bot please add tests`",
        Via::Github,
        &v,
        e,
    ));

    // A command inside a longer comment, its instructions on the next line.
    let v = github_comment(
        "Thanks!\n\n/forgehand fix\nkeep the public API\n\nCheers",
        false,
    );
    let task = json!({ "type": "command", "command": { "name": "fix", "instructions": "keep the public API" } });
    let e = commanded("github", &v, false, task, "command.fix", "command:fix");
    cases.push(plan(
        "github issue comment `/forgehand fix` + instructions",
        Via::Github,
        &v,
        e,
    ));

    // An issue assigned to the bot.
    let mut v = github_example_json("issues/assigned.1.json");
    v["assignee"]["login"] = json!(BOT);
    v["issue"]["assignee"]["login"] = json!(BOT);
    v["issue"]["assignees"] = json!([v["assignee"].clone()]);
    let e = github_expect("issues", &v);
    assert!(e.job.is_some(), "assigned to the bot");
    cases.push(plan("github issue assigned to the bot", Via::Github, &v, e));

    // Gitea: `/forgehand fix` on an issue, and on a pull request.
    let v = gitea_comment("issue_comment_created.json", "/forgehand fix");
    let task = json!({ "type": "command", "command": { "name": "fix", "instructions": null } });
    let e = commanded("gitea", &v, false, task, "command.fix", "command:fix");
    cases.push(plan(
        "gitea issue comment `/forgehand fix`",
        Via::Gitea,
        &v,
        e,
    ));

    let v = gitea_comment(
        "pull_request_comment_created.json",
        "/forgehand fix keep it small",
    );
    let task =
        json!({ "type": "command", "command": { "name": "fix", "instructions": "keep it small" } });
    let e = commanded("gitea", &v, true, task, "command.fix", "command:fix");
    cases.push(plan(
        "gitea PR comment `/forgehand fix keep it small`",
        Via::Gitea,
        &v,
        e,
    ));

    // Gitea says only that an issue's labels changed; the new set has the
    // bot's label. And an issue whose assignees now include the bot.
    let mut v = gitea_example_json("drone-go-scm/issues_opened.json");
    v["action"] = json!("label_updated");
    v["issue"]["labels"] = json!([{ "id": 1, "name": LABEL, "color": "ee0701" }]);
    let e = gitea_expect("gitea", "issues", &v);
    assert!(e.job.is_some(), "labeled with the bot's label");
    cases.push(plan(
        "gitea issue labeled with the bot's label",
        Via::Gitea,
        &v,
        e,
    ));

    let mut v = gitea_example_json("drone-go-scm/issues_opened.json");
    v["action"] = json!("assigned");
    v["issue"]["assignees"] = json!([{ "id": 9, "login": BOT, "username": BOT }]);
    let e = gitea_expect("gitea", "issues", &v);
    assert!(e.job.is_some(), "assigned to the bot");
    cases.push(plan("gitea issue assigned to the bot", Via::Gitea, &v, e));

    // Forgejo: the delivery and its job are Forgejo's.
    let v = gitea_comment(
        "issue_comment_created.json",
        &format!("@{BOT} plan split the parser"),
    );
    let task = json!({ "type": "command", "command": { "name": "plan", "instructions": "split the parser" } });
    let e = commanded("forgejo", &v, false, task, "command.plan", "command:plan");
    cases.push(plan(
        "forgejo issue comment `@bot plan …`",
        Via::Forgejo,
        &v,
        e,
    ));

    // The bot's own comments never start work, whatever they say: no loops.
    for (ctx, handle, kind) in [
        (
            "github PR comment by the bot itself",
            BOT.to_owned(),
            "User",
        ),
        (
            "github PR comment by the bot's App",
            format!("{BOT}[bot]"),
            "Bot",
        ),
    ] {
        let mut v = github_comment(&format!("/forgehand fix\n\n@{BOT} please add tests"), true);
        for user in ["/sender", "/comment/user"] {
            let user = v.pointer_mut(user).expect("a user");
            user["login"] = json!(handle);
            user["type"] = json!(kind);
        }
        let e = ignored_comment("github", &v, "bot itself");
        cases.push(plan(ctx, Via::Github, &v, e));
    }
    let mut v = gitea_comment("issue_comment_created.json", "/forgehand fix");
    for user in ["/sender", "/comment/user"] {
        let user = v.pointer_mut(user).expect("a user");
        user["login"] = json!(BOT);
        user["username"] = json!(BOT);
    }
    let e = ignored_comment("gitea", &v, "bot itself");
    cases.push(plan("gitea comment by the bot itself", Via::Gitea, &v, e));

    cases
}

// ---- the tests ---------------------------------------------------------------------

/// One server takes every example and every built case; then the operator
/// API must show each delivery as expected, with its job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_payload_over_http_becomes_the_expected_delivery() {
    let server = server().await;
    let mut report = Report::default();

    let github = send_all(&server, github_examples(), &mut report).await;
    let gitea = send_all(&server, gitea_examples(), &mut report).await;
    let built = send_all(&server, built_cases(), &mut report).await;

    let all: Vec<&Sent> = github.iter().chain(&gitea).chain(&built).collect();
    let recorded = recorded(&server, &all, &mut report).await;
    for s in &all {
        check_record(&mut report, s, &recorded.rows, &recorded.jobs);
    }

    // No vacuous pass: everything was sent, and real payloads did trigger.
    assert_eq!(github.len(), GITHUB_FILES);
    assert_eq!(gitea.len(), GITEA_FILES);
    let forgejo = gitea.iter().filter(|s| s.expect.forge == "forgejo").count();
    assert_eq!(forgejo, 19, "woodpecker-forgejo examples sent as Forgejo");
    let real_jobs: Vec<&str> = github
        .iter()
        .chain(&gitea)
        .filter(|s| s.expect.job.is_some())
        .map(|s| s.ctx.as_str())
        .collect();
    assert_eq!(
        real_jobs,
        [
            "github issues/labeled.1.json",
            "github issues/labeled.2.json",
            "gitea woodpecker-gitea/HookPullRequestReviewAck.json (pull_request_approved)",
            "gitea woodpecker-gitea/HookPullRequestReviewComment.json (pull_request_comment)",
            "gitea woodpecker-gitea/HookPullRequestReviewDeny.json (pull_request_rejected)",
        ],
        "the real payloads that must start jobs"
    );
    let built_jobs = built.iter().filter(|s| s.expect.job.is_some()).count();
    assert_eq!(built_jobs, 9, "built cases that must start jobs");
    report.finish("deliveries read back through the operator API");

    server.stop().await.expect("the server stops cleanly");
}

/// The label, assignee or review state of every GitHub labeled, assigned
/// and review delivery is on record, whether or not it started a job:
/// `detail` is `label:<name>`, `assignee:<login>` or `review:<state>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_delivery_names_its_label_assignee_or_review_state() {
    let server = server().await;
    let mut report = Report::default();
    let planned: Vec<Planned> = github_examples()
        .into_iter()
        .chain(gitea_examples())
        .chain(built_cases())
        .filter(|p| p.expect.names.is_some())
        .collect();
    assert!(
        planned.len() >= 15,
        "labeled, assigned and review deliveries: {}",
        planned.len()
    );
    let sent = send_all(&server, planned, &mut report).await;
    let all: Vec<&Sent> = sent.iter().collect();
    let recorded = recorded(&server, &all, &mut report).await;
    for s in &sent {
        check_names(&mut report, s, &recorded.rows);
    }
    report.finish("`detail` of labeled, assigned and review deliveries");
}

/// The harness signs as the forges do: GitHub's documented vector (and the
/// typo'd one that must not verify), and the same vector in the headers
/// Gitea and Forgejo send.
#[test]
fn the_harness_signs_like_the_forges() {
    let vectors = testdata::json("signatures/github-signature-vectors.json");
    let vectors = vectors.as_array().expect("a list of vectors");
    let mut checked = 0;
    for v in vectors {
        let (Some(secret), Some(payload)) = (v["secret"].as_str(), v["payload"].as_str()) else {
            continue;
        };
        let header = |headers: &[(String, String)], name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let github = github_headers(secret, "ping", "d", payload.as_bytes());
        if let Some(want) = v["expected_header"]
            .as_str()
            .filter(|h| h.starts_with("sha256="))
        {
            let got = header(&github, "x-hub-signature-256").expect("signed");
            if v["must_reject"] == json!(true) {
                assert_ne!(got, want, "{}", v["source"]);
            } else {
                assert_eq!(got, want, "{}", v["source"]);
            }
            checked += 1;
        }
        if let Some(want) = v["headers"].as_object() {
            let gitea = gitea_headers(secret, "push", "d", payload.as_bytes());
            let forgejo = forgejo_headers(secret, "push", "d", payload.as_bytes());
            for name in ["X-Gitea-Signature", "X-Hub-Signature-256"] {
                assert_eq!(
                    header(&gitea, name).as_deref(),
                    want[name].as_str(),
                    "gitea {name}"
                );
                assert_eq!(
                    header(&forgejo, name).as_deref(),
                    want[name].as_str(),
                    "forgejo {name}"
                );
            }
            let bare = want["X-Gitea-Signature"].as_str();
            assert_eq!(header(&forgejo, "X-Forgejo-Signature").as_deref(), bare);
            assert_eq!(header(&gitea, "X-Gogs-Signature").as_deref(), bare);
            checked += 1;
        }
    }
    assert_eq!(checked, 5, "signature vectors checked");
}
