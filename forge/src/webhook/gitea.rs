//! Gitea and Forgejo webhook payloads (`X-Gitea-Event`, `X-Forgejo-Event`)
//! turned into [`Event`]s.
//!
//! The event header is coarse (`issues`, `pull_request`,
//! `pull_request_approved`, …); the fine-grained names of
//! `X-Gitea-Event-Type` (`issue_label`, `pull_request_sync`, …) are
//! accepted too. Gitea's payloads changed over the years: users carry
//! `login`, `username` or both, pull requests may lack `number`, `merged`
//! or `state`, and 2018-era payloads carry a top-level `secret` (ignored).

use super::{comment_action, from_json, required, ParseError};
use crate::event::{
    Actor, Comment, CommentAction, Event, Issue, IssueAction, IssueState, PullRequest,
    PullRequestAction, Repo, ReviewState,
};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;

pub(super) fn parse(event: &str, body: &[u8]) -> Result<Event, ParseError> {
    // Every delivery must be a JSON object; its `action` decides whether
    // the rest is worth reading.
    let envelope: Envelope = from_json(body)?;
    let action = envelope.action;
    let other = || {
        Ok(Event::Other {
            event: event.to_owned(),
            action: action.clone(),
        })
    };
    let act = action.as_deref();
    match event {
        "issues" | "issue_assign" | "issue_label" | "issue_milestone" => {
            match issue_action(required(act)?) {
                Some(a) => issues(a, body),
                None => other(),
            }
        }
        "issue_comment" => match comment_action(required(act)?) {
            Some(a) => issue_comment(a, body),
            None => other(),
        },
        "pull_request"
        | "pull_request_assign"
        | "pull_request_label"
        | "pull_request_milestone"
        | "pull_request_sync"
        | "pull_request_review_request" => match required(act)? {
            "closed" => pull_request(None, body),
            a => match pull_request_action(a) {
                Some(a) => pull_request(Some(a), body),
                None => other(),
            },
        },
        // The coarse `pull_request_comment` is a review comment, the
        // fine-grained one a comment in a pull request's conversation:
        // only the latter carries `comment`.
        "pull_request_comment" if envelope.comment.is_some() => {
            match comment_action(required(act)?) {
                Some(a) => issue_comment(a, body),
                None => other(),
            }
        }
        "pull_request_approved"
        | "pull_request_rejected"
        | "pull_request_comment"
        | "pull_request_review_approved"
        | "pull_request_review_rejected"
        | "pull_request_review_comment"
        | "pull_request_review" => match act {
            None | Some("reviewed" | "submitted") => review(event, body),
            Some(_) => other(),
        },
        _ => other(),
    }
}

fn from_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ParseError> {
    Ok(from_json(body)?)
}

fn issue_action(action: &str) -> Option<IssueAction> {
    Some(match action {
        "opened" => IssueAction::Opened,
        "edited" => IssueAction::Edited,
        "closed" => IssueAction::Closed,
        "reopened" => IssueAction::Reopened,
        "assigned" => IssueAction::Assigned,
        "unassigned" => IssueAction::Unassigned,
        "label_updated" | "labeled" => IssueAction::Labeled,
        "label_cleared" | "unlabeled" => IssueAction::Unlabeled,
        _ => return None,
    })
}

/// Every action but `closed`, which depends on `pull_request.merged`.
fn pull_request_action(action: &str) -> Option<PullRequestAction> {
    Some(match action {
        "opened" => PullRequestAction::Opened,
        "synchronized" | "synchronize" => PullRequestAction::Synchronize,
        "reopened" => PullRequestAction::Reopened,
        "edited" => PullRequestAction::Edited,
        "label_updated" | "labeled" => PullRequestAction::Labeled,
        "label_cleared" | "unlabeled" => PullRequestAction::Unlabeled,
        "assigned" => PullRequestAction::Assigned,
        "unassigned" => PullRequestAction::Unassigned,
        "review_requested" => PullRequestAction::ReviewRequested,
        _ => return None,
    })
}

/// The review state named by an event header or by `review.type`
/// (`pull_request_review_approved`, …).
fn review_state(name: &str) -> Option<ReviewState> {
    Some(match name {
        "pull_request_approved" | "pull_request_review_approved" | "approved" => {
            ReviewState::Approved
        }
        "pull_request_rejected" | "pull_request_review_rejected" | "rejected" => {
            ReviewState::ChangesRequested
        }
        "pull_request_comment" | "pull_request_review_comment" | "comment" => {
            ReviewState::Commented
        }
        _ => return None,
    })
}

// ---- payload shapes -------------------------------------------------------

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    comment: Option<IgnoredAny>,
}

/// A Gitea user: `login` and `username` both name it, and payloads of
/// some versions carry only one of them.
#[derive(Deserialize)]
struct User {
    /// Gitea's ghost user is `-1` and its Actions user `-2`.
    #[serde(default)]
    id: i64,
    #[serde(default)]
    login: Option<String>,
    #[serde(default)]
    username: Option<String>,
}

impl User {
    fn name(self) -> Result<String, ParseError> {
        [self.login, self.username]
            .into_iter()
            .flatten()
            .find(|s| !s.is_empty())
            .ok_or(ParseError::Missing("login"))
    }

    fn actor(self) -> Result<Actor, ParseError> {
        Ok(Actor {
            id: self.id,
            login: self.name()?,
            is_bot: false,
        })
    }
}

#[derive(Deserialize)]
struct Repository {
    name: String,
    #[serde(default)]
    owner: Option<User>,
    #[serde(default)]
    full_name: Option<String>,
    #[serde(default)]
    clone_url: Option<String>,
    #[serde(default)]
    default_branch: Option<String>,
    #[serde(default)]
    private: Option<bool>,
}

impl Repository {
    fn repo(self) -> Result<Repo, ParseError> {
        let from_full_name = || {
            let full = self.full_name.as_deref()?;
            full.split_once('/').map(|(owner, _)| owner.to_owned())
        };
        let owner = match self.owner {
            Some(owner) => owner.name().ok(),
            None => None,
        }
        .or_else(from_full_name)
        .ok_or(ParseError::Missing("repository.owner.login"))?;
        Ok(Repo {
            owner,
            name: self.name,
            clone_url: self.clone_url.filter(|s| !s.is_empty()),
            default_branch: self.default_branch.filter(|s| !s.is_empty()),
            private: self.private.unwrap_or(false),
        })
    }
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

fn state(s: Option<&str>, merged: bool) -> IssueState {
    match s {
        Some(s) if s.eq_ignore_ascii_case("closed") => IssueState::Closed,
        Some(_) => IssueState::Open,
        None if merged => IssueState::Closed,
        None => IssueState::Open,
    }
}

#[derive(Deserialize)]
struct RawIssue {
    number: u64,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    body: Option<String>,
    user: User,
    #[serde(default)]
    labels: Option<Vec<Named>>,
    #[serde(default)]
    assignee: Option<User>,
    #[serde(default)]
    assignees: Option<Vec<User>>,
    /// Non-null when the issue is a pull request.
    #[serde(default)]
    pull_request: Option<IgnoredAny>,
    #[serde(default)]
    state: Option<String>,
}

impl RawIssue {
    fn issue(self, is_pull: bool) -> Result<Issue, ParseError> {
        let mut assignees = self
            .assignees
            .unwrap_or_default()
            .into_iter()
            .map(User::name)
            .collect::<Result<Vec<_>, _>>()?;
        if assignees.is_empty() {
            if let Some(a) = self.assignee {
                assignees.push(a.name()?);
            }
        }
        Ok(Issue {
            number: self.number,
            title: self.title.unwrap_or_default(),
            body: self.body.unwrap_or_default(),
            author: self.user.actor()?,
            labels: names(self.labels),
            assignees,
            is_pull_request: is_pull || self.pull_request.is_some(),
            state: state(self.state.as_deref(), false),
        })
    }
}

fn names(labels: Option<Vec<Named>>) -> Vec<String> {
    labels
        .unwrap_or_default()
        .into_iter()
        .map(|l| l.name)
        .collect()
}

#[derive(Deserialize)]
struct GitRef {
    #[serde(rename = "ref", default)]
    ref_name: Option<String>,
    #[serde(default)]
    sha: Option<String>,
}

#[derive(Deserialize)]
struct RawPull {
    /// Absent from some payloads; the payload's own `number` says.
    #[serde(default)]
    number: Option<u64>,
    html_url: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    body: Option<String>,
    user: User,
    #[serde(default)]
    head: Option<GitRef>,
    #[serde(default)]
    base: Option<GitRef>,
    #[serde(default)]
    head_branch: Option<String>,
    #[serde(default)]
    base_branch: Option<String>,
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    state: Option<String>,
}

impl RawPull {
    fn pull_request(self, payload_number: Option<u64>) -> Result<PullRequest, ParseError> {
        let number = self
            .number
            .or(payload_number)
            .ok_or(ParseError::Missing("pull_request.number"))?;
        let (head_ref, head_sha) = match self.head {
            Some(h) => (h.ref_name, h.sha),
            None => (None, None),
        };
        let head_ref = head_ref
            .or(self.head_branch)
            .ok_or(ParseError::Missing("pull_request.head.ref"))?;
        let base_ref = self
            .base
            .and_then(|b| b.ref_name)
            .or(self.base_branch)
            .ok_or(ParseError::Missing("pull_request.base.ref"))?;
        let merged = self.merged.unwrap_or(false);
        Ok(PullRequest {
            number,
            url: self.html_url,
            title: self.title.unwrap_or_default(),
            body: self.body.unwrap_or_default(),
            author: self.user.actor()?,
            head_ref,
            head_sha: head_sha.filter(|s| !s.is_empty()),
            base_ref,
            merged,
            state: state(self.state.as_deref(), merged),
        })
    }
}

// ---- events ---------------------------------------------------------------

#[derive(Deserialize)]
struct IssuesPayload {
    repository: Repository,
    sender: User,
    issue: RawIssue,
}

fn issues(action: IssueAction, body: &[u8]) -> Result<Event, ParseError> {
    let p: IssuesPayload = from_body(body)?;
    Ok(Event::Issue {
        action,
        repo: p.repository.repo()?,
        sender: p.sender.actor()?,
        issue: p.issue.issue(false)?,
        // Gitea says neither which label nor which assignee changed:
        // `issue.labels` and `issue.assignees` hold the new sets.
        label: None,
        assignee: None,
    })
}

#[derive(Deserialize)]
struct RawComment {
    id: u64,
    #[serde(default)]
    body: Option<String>,
    user: User,
}

#[derive(Deserialize)]
struct IssueCommentPayload {
    repository: Repository,
    sender: User,
    issue: RawIssue,
    comment: RawComment,
    /// Absent from 2018-era payloads, where only `issue.pull_request` tells.
    #[serde(default)]
    is_pull: Option<bool>,
}

fn issue_comment(action: CommentAction, body: &[u8]) -> Result<Event, ParseError> {
    let p: IssueCommentPayload = from_body(body)?;
    Ok(Event::IssueComment {
        action,
        repo: p.repository.repo()?,
        sender: p.sender.actor()?,
        issue: p.issue.issue(p.is_pull.unwrap_or(false))?,
        comment: Comment {
            id: p.comment.id,
            body: p.comment.body.unwrap_or_default(),
            author: p.comment.user.actor()?,
        },
    })
}

#[derive(Deserialize)]
struct PullRequestPayload {
    repository: Repository,
    sender: User,
    pull_request: RawPull,
    #[serde(default)]
    number: Option<u64>,
}

/// `action` is `None` for `closed`, which becomes `Merged` or `Closed`.
fn pull_request(action: Option<PullRequestAction>, body: &[u8]) -> Result<Event, ParseError> {
    let p: PullRequestPayload = from_body(body)?;
    let pull_request = p.pull_request.pull_request(p.number)?;
    let action = action.unwrap_or(if pull_request.merged {
        PullRequestAction::Merged
    } else {
        PullRequestAction::Closed
    });
    Ok(Event::PullRequest {
        action,
        repo: p.repository.repo()?,
        sender: p.sender.actor()?,
        pull_request,
    })
}

#[derive(Deserialize)]
struct RawReview {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct ReviewPayload {
    repository: Repository,
    sender: User,
    pull_request: RawPull,
    #[serde(default)]
    number: Option<u64>,
    #[serde(default)]
    review: Option<RawReview>,
}

fn review(event: &str, body: &[u8]) -> Result<Event, ParseError> {
    let p: ReviewPayload = from_body(body)?;
    let (kind, content) = match p.review {
        Some(r) => (r.kind, r.content),
        None => (None, None),
    };
    // The header names the state; `review.type` is the fallback for a
    // caller that passes a generic name.
    let state = review_state(event)
        .or_else(|| kind.as_deref().and_then(review_state))
        .ok_or(ParseError::Missing("review.type"))?;
    Ok(Event::ReviewSubmitted {
        repo: p.repository.repo()?,
        sender: p.sender.actor()?,
        pull_request: p.pull_request.pull_request(p.number)?,
        // Gitea's review payload carries no review id.
        review_id: None,
        state,
        body: content.unwrap_or_default(),
    })
}
