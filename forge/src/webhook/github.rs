//! GitHub webhook payloads (`X-GitHub-Event`) turned into [`Event`]s.
//!
//! Only the fields Forgehand needs are read; everything else GitHub sends
//! is ignored, and anything the 2019-era payloads lack is optional.

use super::{comment_action, from_json, required, ParseError};
use crate::event::{
    Actor, Comment, CommentAction, Event, InstallationAction, InstallationReposAction, Issue,
    IssueAction, IssueState, PullRequest, PullRequestAction, Repo, ReviewState,
};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;

pub(super) fn parse(event: &str, body: &[u8]) -> Result<Event, ParseError> {
    // The two most frequent events are read in one pass when they carry an
    // action Forgehand acts on; anything else takes the general path below.
    if let Some(event) = fast_path(event, body) {
        return Ok(event);
    }
    // Every delivery must be a JSON object; its `action` decides whether
    // the rest is worth reading.
    let action = from_json::<Envelope>(body)?.action;
    let other = || {
        Ok(Event::Other {
            event: event.to_owned(),
            action: action.clone(),
        })
    };
    let act = action.as_deref();
    match event {
        "ping" => ping(body),
        "issues" => match issue_action(required(act)?) {
            Some(a) => issues(a, body),
            None => other(),
        },
        "issue_comment" => match comment_action(required(act)?) {
            Some(a) => issue_comment(a, body),
            None => other(),
        },
        "pull_request" => match required(act)? {
            "closed" => pull_request(None, body),
            a => match pull_request_action(a) {
                Some(a) => pull_request(Some(a), body),
                None => other(),
            },
        },
        "pull_request_review" => match required(act)? {
            "submitted" => review(body)?.map_or_else(other, Ok),
            _ => other(),
        },
        "pull_request_review_comment" => match comment_action(required(act)?) {
            Some(a) => review_comment(a, body),
            None => other(),
        },
        "installation" => match installation_action(required(act)?) {
            Some(a) => installation(a, body),
            None => other(),
        },
        "installation_repositories" => match required(act)? {
            "added" => installation_repositories(InstallationReposAction::Added, body),
            "removed" => installation_repositories(InstallationReposAction::Removed, body),
            _ => other(),
        },
        _ => other(),
    }
}

fn fast_path(event: &str, body: &[u8]) -> Option<Event> {
    match event {
        "issues" => {
            let p: IssuesPayload = from_json(body).ok()?;
            let action = issue_action(p.action.as_deref()?)?;
            Some(issues_event(action, p))
        }
        "issue_comment" => {
            let p: IssueCommentPayload = from_json(body).ok()?;
            let action = comment_action(p.action.as_deref()?)?;
            Some(issue_comment_event(action, p))
        }
        _ => None,
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
        "labeled" => IssueAction::Labeled,
        "unlabeled" => IssueAction::Unlabeled,
        "assigned" => IssueAction::Assigned,
        "unassigned" => IssueAction::Unassigned,
        _ => return None,
    })
}

/// Every action but `closed`, which depends on `pull_request.merged`.
fn pull_request_action(action: &str) -> Option<PullRequestAction> {
    Some(match action {
        "opened" => PullRequestAction::Opened,
        "synchronize" => PullRequestAction::Synchronize,
        "reopened" => PullRequestAction::Reopened,
        "edited" => PullRequestAction::Edited,
        "labeled" => PullRequestAction::Labeled,
        "unlabeled" => PullRequestAction::Unlabeled,
        "assigned" => PullRequestAction::Assigned,
        "unassigned" => PullRequestAction::Unassigned,
        "review_requested" => PullRequestAction::ReviewRequested,
        _ => return None,
    })
}

fn installation_action(action: &str) -> Option<InstallationAction> {
    Some(match action {
        "created" => InstallationAction::Created,
        "deleted" => InstallationAction::Deleted,
        "suspend" => InstallationAction::Suspended,
        "unsuspend" => InstallationAction::Unsuspended,
        "new_permissions_accepted" => InstallationAction::NewPermissionsAccepted,
        _ => return None,
    })
}

fn review_state(state: &str) -> Option<ReviewState> {
    let state = state.to_ascii_lowercase();
    Some(match state.as_str() {
        "approved" => ReviewState::Approved,
        "changes_requested" => ReviewState::ChangesRequested,
        "commented" => ReviewState::Commented,
        _ => return None,
    })
}

// ---- payload shapes -------------------------------------------------------

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    action: Option<String>,
}

#[derive(Deserialize)]
struct User {
    login: String,
    id: i64,
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

impl From<User> for Actor {
    fn from(u: User) -> Self {
        Actor {
            is_bot: u.kind.as_deref() == Some("Bot"),
            login: u.login,
            id: u.id,
        }
    }
}

#[derive(Deserialize)]
struct Login {
    login: String,
}

#[derive(Deserialize)]
struct Repository {
    name: String,
    owner: Login,
    #[serde(default)]
    clone_url: Option<String>,
    #[serde(default)]
    default_branch: Option<String>,
    #[serde(default)]
    private: Option<bool>,
}

impl From<Repository> for Repo {
    fn from(r: Repository) -> Self {
        Repo {
            owner: r.owner.login,
            name: r.name,
            clone_url: r.clone_url,
            default_branch: r.default_branch,
            private: r.private.unwrap_or(false),
        }
    }
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

#[derive(Deserialize)]
struct FullName {
    full_name: String,
}

fn state(s: Option<&str>) -> IssueState {
    match s {
        Some(s) if s.eq_ignore_ascii_case("closed") => IssueState::Closed,
        _ => IssueState::Open,
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
    assignee: Option<Login>,
    #[serde(default)]
    assignees: Option<Vec<Login>>,
    /// Present (an object with URLs) when the issue is a pull request.
    #[serde(default)]
    pull_request: Option<IgnoredAny>,
    /// Absent from `pinned`/`unpinned` payloads.
    #[serde(default)]
    state: Option<String>,
}

impl From<RawIssue> for Issue {
    fn from(i: RawIssue) -> Self {
        let mut assignees: Vec<String> = i
            .assignees
            .unwrap_or_default()
            .into_iter()
            .map(|a| a.login)
            .collect();
        if assignees.is_empty() {
            assignees.extend(i.assignee.map(|a| a.login));
        }
        Issue {
            number: i.number,
            title: i.title.unwrap_or_default(),
            body: i.body.unwrap_or_default(),
            author: i.user.into(),
            labels: i
                .labels
                .unwrap_or_default()
                .into_iter()
                .map(|l| l.name)
                .collect(),
            assignees,
            is_pull_request: i.pull_request.is_some(),
            state: state(i.state.as_deref()),
        }
    }
}

#[derive(Deserialize)]
struct GitRef {
    #[serde(rename = "ref")]
    ref_name: String,
    #[serde(default)]
    sha: Option<String>,
}

#[derive(Deserialize)]
struct RawPull {
    number: u64,
    html_url: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    body: Option<String>,
    user: User,
    head: GitRef,
    base: GitRef,
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    merged_at: Option<String>,
    #[serde(default)]
    state: Option<String>,
}

impl From<RawPull> for PullRequest {
    fn from(p: RawPull) -> Self {
        PullRequest {
            number: p.number,
            url: p.html_url,
            title: p.title.unwrap_or_default(),
            body: p.body.unwrap_or_default(),
            author: p.user.into(),
            head_ref: p.head.ref_name,
            head_sha: p.head.sha,
            base_ref: p.base.ref_name,
            // Review payloads carry a shorter pull request without
            // `merged`; `merged_at` still tells.
            merged: p.merged.unwrap_or(p.merged_at.is_some()),
            state: state(p.state.as_deref()),
        }
    }
}

#[derive(Deserialize)]
struct RawComment {
    id: u64,
    #[serde(default)]
    body: Option<String>,
    user: User,
}

impl From<RawComment> for Comment {
    fn from(c: RawComment) -> Self {
        Comment {
            id: c.id,
            body: c.body.unwrap_or_default(),
            author: c.user.into(),
        }
    }
}

// ---- events ---------------------------------------------------------------

#[derive(Deserialize)]
struct PingPayload {
    #[serde(default)]
    zen: Option<String>,
    #[serde(default)]
    hook_id: Option<u64>,
    #[serde(default)]
    repository: Option<Repository>,
    #[serde(default)]
    sender: Option<User>,
}

fn ping(body: &[u8]) -> Result<Event, ParseError> {
    let p: PingPayload = from_body(body)?;
    Ok(Event::Ping {
        zen: p.zen,
        hook_id: p.hook_id,
        repo: p.repository.map(Into::into),
        sender: p.sender.map(Into::into),
    })
}

#[derive(Deserialize)]
struct IssuesPayload {
    #[serde(default)]
    action: Option<String>,
    repository: Repository,
    sender: User,
    issue: RawIssue,
    #[serde(default)]
    label: Option<Named>,
    #[serde(default)]
    assignee: Option<User>,
}

fn issues(action: IssueAction, body: &[u8]) -> Result<Event, ParseError> {
    Ok(issues_event(action, from_body(body)?))
}

fn issues_event(action: IssueAction, p: IssuesPayload) -> Event {
    Event::Issue {
        action,
        repo: p.repository.into(),
        sender: p.sender.into(),
        issue: p.issue.into(),
        label: p.label.map(|l| l.name),
        assignee: p.assignee.map(Into::into),
    }
}

#[derive(Deserialize)]
struct IssueCommentPayload {
    #[serde(default)]
    action: Option<String>,
    repository: Repository,
    sender: User,
    issue: RawIssue,
    comment: RawComment,
}

fn issue_comment(action: CommentAction, body: &[u8]) -> Result<Event, ParseError> {
    Ok(issue_comment_event(action, from_body(body)?))
}

fn issue_comment_event(action: CommentAction, p: IssueCommentPayload) -> Event {
    Event::IssueComment {
        action,
        repo: p.repository.into(),
        sender: p.sender.into(),
        issue: p.issue.into(),
        comment: p.comment.into(),
    }
}

#[derive(Deserialize)]
struct PullRequestPayload {
    repository: Repository,
    sender: User,
    pull_request: RawPull,
}

/// `action` is `None` for `closed`, which becomes `Merged` or `Closed`.
fn pull_request(action: Option<PullRequestAction>, body: &[u8]) -> Result<Event, ParseError> {
    let p: PullRequestPayload = from_body(body)?;
    let pull_request: PullRequest = p.pull_request.into();
    let action = action.unwrap_or(if pull_request.merged {
        PullRequestAction::Merged
    } else {
        PullRequestAction::Closed
    });
    Ok(Event::PullRequest {
        action,
        repo: p.repository.into(),
        sender: p.sender.into(),
        pull_request,
    })
}

#[derive(Deserialize)]
struct RawReview {
    #[serde(default)]
    id: Option<u64>,
    state: String,
    #[serde(default)]
    body: Option<String>,
}

#[derive(Deserialize)]
struct ReviewPayload {
    repository: Repository,
    sender: User,
    pull_request: RawPull,
    review: RawReview,
}

/// `None` when the review's state is not one Forgehand acts on
/// (`pending`, `dismissed`).
fn review(body: &[u8]) -> Result<Option<Event>, ParseError> {
    let p: ReviewPayload = from_body(body)?;
    let Some(state) = review_state(&p.review.state) else {
        return Ok(None);
    };
    Ok(Some(Event::ReviewSubmitted {
        repo: p.repository.into(),
        sender: p.sender.into(),
        pull_request: p.pull_request.into(),
        review_id: p.review.id,
        state,
        body: p.review.body.unwrap_or_default(),
    }))
}

#[derive(Deserialize)]
struct RawReviewComment {
    id: u64,
    #[serde(default)]
    body: Option<String>,
    user: User,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    line: Option<u64>,
    #[serde(default)]
    original_line: Option<u64>,
    #[serde(default)]
    position: Option<u64>,
    #[serde(default)]
    in_reply_to_id: Option<u64>,
}

#[derive(Deserialize)]
struct ReviewCommentPayload {
    repository: Repository,
    sender: User,
    pull_request: RawPull,
    comment: RawReviewComment,
}

fn review_comment(action: CommentAction, body: &[u8]) -> Result<Event, ParseError> {
    let p: ReviewCommentPayload = from_body(body)?;
    let c = p.comment;
    Ok(Event::ReviewComment {
        action,
        repo: p.repository.into(),
        sender: p.sender.into(),
        pull_request: p.pull_request.into(),
        line: c.line.or(c.original_line).or(c.position),
        path: c.path,
        in_reply_to: c.in_reply_to_id,
        comment: Comment {
            id: c.id,
            body: c.body.unwrap_or_default(),
            author: c.user.into(),
        },
    })
}

#[derive(Deserialize)]
struct Account {
    #[serde(default)]
    login: Option<String>,
    /// Enterprise accounts have a slug instead of a login.
    #[serde(default)]
    slug: Option<String>,
}

#[derive(Deserialize)]
struct RawInstallation {
    id: u64,
    #[serde(default)]
    account: Option<Account>,
}

impl RawInstallation {
    fn account(self) -> Result<(u64, String), ParseError> {
        let account = self
            .account
            .and_then(|a| a.login.or(a.slug))
            .ok_or(ParseError::Missing("installation.account.login"))?;
        Ok((self.id, account))
    }
}

fn full_names(repos: Option<Vec<FullName>>) -> Vec<String> {
    repos
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.full_name)
        .collect()
}

#[derive(Deserialize)]
struct InstallationPayload {
    installation: RawInstallation,
    sender: User,
    #[serde(default)]
    repositories: Option<Vec<FullName>>,
}

fn installation(action: InstallationAction, body: &[u8]) -> Result<Event, ParseError> {
    let p: InstallationPayload = from_body(body)?;
    let (installation_id, account) = p.installation.account()?;
    Ok(Event::Installation {
        action,
        installation_id,
        account,
        sender: p.sender.into(),
        repositories: full_names(p.repositories),
    })
}

#[derive(Deserialize)]
struct InstallationReposPayload {
    installation: RawInstallation,
    sender: User,
    #[serde(default)]
    repositories_added: Option<Vec<FullName>>,
    #[serde(default)]
    repositories_removed: Option<Vec<FullName>>,
}

fn installation_repositories(
    action: InstallationReposAction,
    body: &[u8],
) -> Result<Event, ParseError> {
    let p: InstallationReposPayload = from_body(body)?;
    let (installation_id, account) = p.installation.account()?;
    Ok(Event::InstallationRepositories {
        action,
        installation_id,
        account,
        sender: p.sender.into(),
        added: full_names(p.repositories_added),
        removed: full_names(p.repositories_removed),
    })
}
