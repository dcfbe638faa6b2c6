//! What a delivery must become: the `Expect` record and the independent
//! oracle that works it out from the raw JSON with pointers.

use serde_json::{json, Value};

use super::{BOT, LABEL};

/// One delivery's expected record, computed from the raw payload.
#[derive(Debug, Clone)]
pub(crate) struct Expect {
    pub(crate) forge: &'static str,
    /// Accepted without a job: the delivery changes what Forgehand
    /// records (an App installation and its repositories).
    pub(crate) records: bool,
    /// The event header sent.
    pub(crate) event: String,
    pub(crate) event_name: String,
    pub(crate) repo: Option<String>,
    pub(crate) target: Option<u64>,
    pub(crate) sender: Option<String>,
    /// The delivery's `detail` when it starts a job: what made it act
    /// (`label:…`, `review:…`, `command:…`, `mention`). Not checked when
    /// `None`.
    pub(crate) detail: Option<String>,
    /// The label, assignee or review state the event is about, as
    /// `detail` names it (`label:bug`, `assignee:octocat`,
    /// `review:approved`), whether or not it starts a job.
    pub(crate) names: Option<String>,
    /// The job's typed payload (a subset of it) and its `kind`, when the
    /// delivery must start one; `None` means "ignored".
    pub(crate) job: Option<(Value, String)>,
    /// A piece of the reason an ignored delivery must give.
    pub(crate) reason: Option<&'static str>,
    /// The case whose body, byte for byte and signed with the same
    /// secrets, was sent before: this one is a replay of it, answered as
    /// a duplicate (200) that makes no job of its own.
    pub(crate) replay_of: Option<String>,
}

pub(crate) fn text(v: &Value, ptr: &str) -> Option<String> {
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
pub(crate) fn login(v: &Value, ptr: &str) -> Option<String> {
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
pub(crate) fn job_base(
    forge: &str,
    v: &Value,
    target: u64,
    on_pr: bool,
    requested_by: &str,
) -> Value {
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

pub(crate) fn with_task(mut job: Value, task: Value) -> Value {
    job["task"] = task;
    job
}

impl Expect {
    /// A delivery Forgehand reads into a typed event.
    pub(crate) fn typed(
        forge: &'static str,
        event: &str,
        name: String,
        v: &Value,
        sender: Option<String>,
    ) -> Self {
        Expect {
            forge,
            records: false,
            event: event.to_owned(),
            event_name: name,
            repo: repo_of(v),
            target: target_of(v),
            sender,
            detail: None,
            names: None,
            job: None,
            reason: None,
            replay_of: None,
        }
    }

    /// An event or action Forgehand does not act on: kept by name only.
    fn other(forge: &'static str, event: &str, action: Option<&str>) -> Self {
        Expect {
            forge,
            records: false,
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
            replay_of: None,
        }
    }

    fn records(mut self) -> Self {
        self.records = true;
        self
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
pub(crate) fn github_expect(event: &str, v: &Value) -> Expect {
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
            let e = typed(format!("installation.{name}")).no_repo().no_target();
            if name == "new_permissions_accepted" {
                e
            } else {
                e.records()
            }
        }
        ("installation_repositories", Some(a @ ("added" | "removed"))) => {
            typed(format!("installation_repositories.{a}"))
                .no_repo()
                .no_target()
                .records()
        }
        _ => Expect::other(FORGE, event, action),
    }
}

pub(crate) use forgehand_tests::gitea_events::gitea_event;

/// Forgejo's examples come from Forgejo; the rest from Gitea.
pub(crate) fn gitea_forge(rel: &str) -> &'static str {
    if rel.starts_with("woodpecker-forgejo/") {
        "forgejo"
    } else {
        "gitea"
    }
}

/// What a Gitea or Forgejo delivery with header `event` and body `v` must
/// become.
pub(crate) fn gitea_expect(forge: &'static str, event: &str, v: &Value) -> Expect {
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
