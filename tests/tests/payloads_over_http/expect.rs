//! What a delivery must become: the `Expect` record and the independent
//! oracle that works it out from the raw JSON with pointers.

use serde_json::{json, Value};

/// One delivery's expected record.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Expect {
    pub(crate) forge: String,
    /// Accepted without a job: the delivery changes what Forgehand
    /// records (an App installation and its repositories).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) records: bool,
    /// The event header sent.
    pub(crate) event: String,
    pub(crate) event_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) target: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sender: Option<String>,
    /// The delivery's `detail` when it starts a job: what made it act
    /// (`label:…`, `review:…`, `command:…`, `mention`). Not checked when
    /// `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<String>,
    /// The label, assignee or review state the event is about, as
    /// `detail` names it (`label:bug`, `assignee:octocat`,
    /// `review:approved`), whether or not it starts a job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) names: Option<String>,
    /// The job's typed payload (a subset of it) and its `kind`, when the
    /// delivery must start one; `None` means "ignored".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) job: Option<(Value, String)>,
    /// A piece of the reason an ignored delivery must give.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// The case whose body, byte for byte and signed with the same
    /// secrets, was sent before: this one is a replay of it, answered as
    /// a duplicate (200) that makes no job of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
            forge: forge.to_owned(),
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
