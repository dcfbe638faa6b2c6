//! The forges' APIs behind one trait with explicit error kinds, so the
//! pipeline treats GitHub and Gitea/Forgejo alike and can tell "not
//! found" from "forbidden" from "wait and try again".

pub mod gitea;
pub mod github;
mod outbound;
mod pager;
mod retrying;
mod wire;

pub use outbound::Outbound;
pub use pager::MAX_PAGES;
pub use retrying::{RetryPolicy, Retrying};

pub use crate::model::{Actor, Comment, Issue, IssueState, PullRequest, RepoRef, ReviewState};

use forgehand_types::CommitSha;
use std::time::Duration;

use async_trait::async_trait;
use secrecy::SecretString;

#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// `call` names the request (`GET /repos/o/r/issues/1`).
    #[error("{call}: rate limited: try again in {} s", .retry_after.as_secs())]
    RateLimited { retry_after: Duration, call: String },
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("the forge refused the request: {0}")]
    Invalid(String),
    /// The answer is not what the forge's API describes (a field missing
    /// or of another type, a page link to another server): asking again
    /// would not help.
    #[error("unexpected answer: {0}")]
    Malformed(String),
    #[error("{0}")]
    Other(String),
}

impl ForgeError {
    /// Whether waiting could fix it: a rate limit, a server error, the
    /// network. Not found, forbidden, conflict and invalid stay as they are.
    pub fn is_transient(&self) -> bool {
        matches!(self, ForgeError::RateLimited { .. } | ForgeError::Other(_))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    None,
    Read,
    Write,
    Admin,
}

impl Permission {
    pub fn can_write(self) -> bool {
        self >= Permission::Write
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPullRequest<'a> {
    pub title: &'a str,
    pub body: &'a str,
    /// The bot's branch.
    pub head: &'a str,
    pub base: &'a str,
    /// Opened as a draft (the change's tests fail): GitHub's own draft
    /// flag; Gitea and Forgejo mark a draft by a `WIP:` title.
    pub draft: bool,
}

/// A review of a pull request by a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub id: u64,
    pub author: Actor,
    /// `None` for a review that is pending or was dismissed, or that a
    /// forge's version names in a way Forgehand does not know.
    pub state: Option<ReviewState>,
    pub body: String,
}

/// A comment on a line of a pull request's diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewComment {
    pub id: u64,
    pub review_id: Option<u64>,
    pub author: Actor,
    pub path: String,
    pub line: Option<u64>,
    pub body: String,
    /// The commit the comment was made on (GitHub needs it to reply).
    pub commit_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReactionTarget {
    Issue(u64),
    Comment(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusState {
    Pending,
    Success,
    Failure,
    Error,
}

impl StatusState {
    pub fn as_str(self) -> &'static str {
        match self {
            StatusState::Pending => "pending",
            StatusState::Success => "success",
            StatusState::Failure => "failure",
            StatusState::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus<'a> {
    pub state: StatusState,
    pub context: &'a str,
    pub description: &'a str,
    pub target_url: Option<&'a str>,
}

/// What the pipeline does on a forge. Every list is read to its end, up
/// to [`MAX_PAGES`] pages (a warning says when a list is cut there).
#[async_trait]
pub trait ForgeApi: Send + Sync {
    async fn issue(&self, repo: &RepoRef, number: u64) -> Result<Issue, ForgeError>;
    /// Every comment of the issue or pull request's conversation, oldest
    /// first.
    async fn comments(&self, repo: &RepoRef, number: u64) -> Result<Vec<Comment>, ForgeError>;
    async fn permission(&self, repo: &RepoRef, user: &str) -> Result<Permission, ForgeError>;
    /// Adds 👀 to an issue, a pull request or a comment.
    async fn react_eyes(&self, repo: &RepoRef, target: ReactionTarget) -> Result<(), ForgeError>;
    async fn create_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<Comment, ForgeError>;
    async fn edit_comment(&self, repo: &RepoRef, id: u64, body: &str) -> Result<(), ForgeError>;
    async fn pull_request(&self, repo: &RepoRef, number: u64) -> Result<PullRequest, ForgeError>;
    /// Opens the pull request, or updates the open one from the same
    /// branch of this repository (a fork's branch of the same name is
    /// not the bot's).
    async fn open_pull_request(
        &self,
        repo: &RepoRef,
        pr: &NewPullRequest<'_>,
    ) -> Result<PullRequest, ForgeError>;
    async fn request_review(
        &self,
        repo: &RepoRef,
        number: u64,
        reviewers: &[&str],
    ) -> Result<(), ForgeError>;
    /// Every review a person wrote on the pull request.
    async fn reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, ForgeError>;
    /// Every review comment of the pull request, whoever wrote it.
    async fn review_comments(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<ReviewComment>, ForgeError>;
    /// The comments of one review: the threads a follow-up answers.
    async fn review_threads(
        &self,
        repo: &RepoRef,
        number: u64,
        review: u64,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        Ok(self
            .review_comments(repo, number)
            .await?
            .into_iter()
            .filter(|c| c.review_id == Some(review))
            .collect())
    }
    /// Answers in the thread of `comment`.
    async fn reply_to_review_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        comment: &ReviewComment,
        body: &str,
    ) -> Result<(), ForgeError>;
    async fn set_status(
        &self,
        repo: &RepoRef,
        sha: &CommitSha,
        status: &CommitStatus<'_>,
    ) -> Result<(), ForgeError>;
    /// The user name and token host-side git uses over HTTPS for `repo`
    /// (for a GitHub App, an installation token).
    async fn git_credentials(&self, repo: &RepoRef) -> Result<(String, SecretString), ForgeError>;
}

/// How long to wait on a rate limit whose answer says nothing of when to
/// come back: GitHub's documentation says a secondary rate limit without
/// `Retry-After` is waited out "at least one minute".
pub const RATE_LIMIT_UNSAID: Duration = Duration::from_secs(60);

/// The error kind for an HTTP answer.
pub(crate) fn classify(status: u16, retry_after: Option<Duration>, detail: String) -> ForgeError {
    // GitHub's secondary rate limits are 403s (sometimes without
    // Retry-After) that say so in their message.
    let says_rate_limit = detail.to_ascii_lowercase().contains("rate limit");
    match status {
        404 => ForgeError::NotFound(detail),
        401 | 403 if retry_after.is_some() => ForgeError::RateLimited {
            retry_after: retry_after.unwrap_or_default(),
            call: call_of(&detail),
        },
        403 if says_rate_limit => ForgeError::RateLimited {
            retry_after: RATE_LIMIT_UNSAID,
            call: call_of(&detail),
        },
        401 | 403 => ForgeError::Forbidden(detail),
        409 => ForgeError::Conflict(detail),
        422 | 400 => ForgeError::Invalid(detail),
        429 => ForgeError::RateLimited {
            retry_after: retry_after.unwrap_or(RATE_LIMIT_UNSAID),
            call: call_of(&detail),
        },
        _ => ForgeError::Other(format!("HTTP {status}: {detail}")),
    }
}

/// The request a `detail` (`"{call}: {message}"`) is about.
fn call_of(detail: &str) -> String {
    detail
        .split_once(": ")
        .map_or(detail, |(call, _)| call)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24, finding 9: GitHub's secondary rate limit, a 403 that
    /// says so and may carry no Retry-After, ended a job as `forbidden`
    /// instead of being waited out; what a limit names is its call.
    #[test]
    fn a_rate_limit_is_one_whatever_its_status_and_names_its_call() {
        let secondary = classify(
            403,
            None,
            "POST /repos/acme/demo/pulls: You have exceeded a secondary rate limit. Please wait a few minutes before you try again.".into(),
        );
        match &secondary {
            ForgeError::RateLimited { retry_after, call } => {
                assert_eq!(*retry_after, RATE_LIMIT_UNSAID);
                assert_eq!(call, "POST /repos/acme/demo/pulls");
            }
            other => panic!("{other:?}"),
        }
        assert!(secondary.is_transient());
        assert!(secondary
            .to_string()
            .starts_with("POST /repos/acme/demo/pulls: rate limited"));
        assert!(matches!(
            classify(
                403,
                None,
                "GET /x: Resource not accessible by integration".into()
            ),
            ForgeError::Forbidden(_)
        ));
        assert!(matches!(
            classify(429, None, "GET /x: slow down".into()),
            ForgeError::RateLimited { retry_after, .. } if retry_after == RATE_LIMIT_UNSAID
        ));
    }
}
