//! The forges' JSON answers as types. Gitea's API mirrors GitHub's for
//! what Forgehand reads (users, issues, comments, pull requests, review
//! comments), so those shapes are shared; what differs (review states,
//! permission names, GitHub's App tokens) is in each client.
//!
//! What the APIs always send is required: an answer without it is an
//! error that names the call and the field, never a zero or an empty
//! string. What they may leave out or send as `null` is an `Option`.
//! Fields Forgehand does not read are ignored, so other server versions'
//! additions do not fail a job.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

use super::{Comment as ApiComment, ForgeError, ReviewComment as ApiReviewComment};
use crate::model::{self, Actor, IssueState, RepoRef};

/// At most this much of one answer is read: a page of 100 GitHub
/// comments at their longest (65,536 characters each) is 26 MB.
pub(crate) const MAX_ANSWER_BYTES: usize = 48 << 20;

/// A successful answer, not read yet.
pub(crate) struct Answer {
    /// `GET /repos/o/r/issues/1`, for errors: the method and the path
    /// without its query.
    pub call: String,
    pub headers: http::HeaderMap,
    pub text: String,
}

impl Answer {
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ForgeError> {
        parse(&self.call, &self.text)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Gitea's `X-Total-Count`: the length of the whole list.
    pub fn total_count(&self) -> Option<usize> {
        self.header("x-total-count")?.trim().parse().ok()
    }
}

/// `METHOD path`, without the query.
pub(crate) fn call_name(method: &http::Method, path: &str) -> String {
    format!("{method} {}", path.split('?').next().unwrap_or(path))
}

/// What an error answer says, in a line: its `message`, or the start of
/// the body.
pub(crate) fn error_detail(text: &str) -> String {
    serde_json::from_str::<ErrorBody>(text)
        .map(|e| e.message)
        .unwrap_or_else(|_| text.chars().take(200).collect())
}

// ---- what the bot sends ---------------------------------------------------

/// A new comment, or a comment's new text.
#[derive(Serialize)]
pub(crate) struct CommentBody<'a> {
    pub body: &'a str,
}

#[derive(Serialize)]
pub(crate) struct Reaction<'a> {
    pub content: &'a str,
}

#[derive(Serialize)]
pub(crate) struct NewPull<'a> {
    pub title: &'a str,
    pub body: &'a str,
    pub head: &'a str,
    pub base: &'a str,
    /// GitHub's; never sent to Gitea (its API has no such field).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub draft: bool,
}

#[derive(Serialize)]
pub(crate) struct EditPull<'a> {
    pub title: &'a str,
    pub body: &'a str,
}

#[derive(Serialize)]
pub(crate) struct Reviewers<'a> {
    pub reviewers: &'a [&'a str],
}

/// A commit status, as both forges take it.
#[derive(Serialize)]
pub(crate) struct Status<'a> {
    pub state: &'a str,
    pub context: &'a str,
    pub description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_url: Option<&'a str>,
}

impl<'a> From<&'a super::CommitStatus<'a>> for Status<'a> {
    fn from(s: &'a super::CommitStatus<'a>) -> Self {
        Status {
            state: s.state.as_str(),
            context: s.context,
            description: s.description,
            target_url: s.target_url,
        }
    }
}

// ---- what the forges answer -----------------------------------------------

/// `text`, the answer to `call` (`GET /repos/o/r/issues/1`), read as a
/// `T`; the error names the call and where in the answer it broke
/// (`[3].user: missing field `id``).
pub(crate) fn parse<T: DeserializeOwned>(call: &str, text: &str) -> Result<T, ForgeError> {
    let mut json = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let at = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ForgeError::Malformed(format!("{call}: the answer is not JSON: {inner}"))
        } else {
            ForgeError::Malformed(format!("{call}: at {at}: {inner}"))
        }
    })
}

/// An error answer's `message`, which both forges send.
#[derive(Deserialize)]
pub(crate) struct ErrorBody {
    pub message: String,
}

#[derive(Deserialize)]
pub(crate) struct User {
    pub login: String,
    pub id: i64,
    /// GitHub's `User`, `Bot` or `Organization`; Gitea sends none.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
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

/// GitHub describes an issue's labels as objects or bare names.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum Label {
    Named { name: String },
    Bare(String),
}

impl Label {
    fn name(self) -> String {
        match self {
            Label::Named { name } | Label::Bare(name) => name,
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct Issue {
    pub number: u64,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    pub user: User,
    pub state: IssueState,
    /// `null` or absent: none.
    #[serde(default)]
    pub labels: Option<Vec<Label>>,
    #[serde(default)]
    pub assignees: Option<Vec<User>>,
    /// Present (not `null`) when the issue is a pull request.
    #[serde(default)]
    pub pull_request: Option<IgnoredAny>,
}

impl From<Issue> for model::Issue {
    fn from(i: Issue) -> Self {
        model::Issue {
            number: i.number,
            title: i.title,
            body: i.body.unwrap_or_default(),
            author: i.user.into(),
            labels: i
                .labels
                .unwrap_or_default()
                .into_iter()
                .map(Label::name)
                .collect(),
            assignees: i
                .assignees
                .unwrap_or_default()
                .into_iter()
                .map(|a| a.login)
                .collect(),
            is_pull_request: i.pull_request.is_some(),
            state: i.state,
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct Comment {
    pub id: u64,
    /// GitHub may leave an empty body out.
    #[serde(default)]
    pub body: Option<String>,
    pub user: User,
}

impl From<Comment> for ApiComment {
    fn from(c: Comment) -> Self {
        ApiComment {
            id: c.id,
            body: c.body.unwrap_or_default(),
            author: c.user.into(),
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct Branch {
    #[serde(rename = "ref")]
    pub name: String,
    #[serde(default)]
    pub sha: Option<String>,
    /// `null` when the head's repository (a fork) was deleted.
    #[serde(default)]
    pub repo: Option<BranchRepo>,
}

#[derive(Deserialize)]
pub(crate) struct BranchRepo {
    pub full_name: String,
}

#[derive(Deserialize)]
pub(crate) struct Pull {
    pub number: u64,
    pub html_url: String,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    pub user: User,
    pub state: IssueState,
    pub head: Branch,
    pub base: Branch,
    /// Gitea's; GitHub's lists leave it out, `merged_at` still tells.
    #[serde(default)]
    pub merged: Option<bool>,
    #[serde(default)]
    pub merged_at: Option<String>,
}

impl Pull {
    /// Whether the head branch is in `repo` itself, not in a fork: a
    /// fork's branch may carry any name, the bot's own among them.
    pub fn is_from(&self, repo: &RepoRef) -> bool {
        self.head
            .repo
            .as_ref()
            .is_some_and(|r| r.full_name.eq_ignore_ascii_case(&repo.full_name()))
    }
}

impl From<Pull> for model::PullRequest {
    fn from(p: Pull) -> Self {
        let merged = p.merged.unwrap_or(p.merged_at.is_some());
        model::PullRequest {
            number: p.number,
            url: p.html_url,
            title: p.title,
            body: p.body.unwrap_or_default(),
            author: p.user.into(),
            head_ref: p.head.name,
            head_sha: p.head.sha,
            base_ref: p.base.name,
            merged,
            state: p.state,
        }
    }
}

/// A comment on a line of a diff. GitHub names the line `line`; Gitea
/// names it `position` (0 when the comment is on no line of the new
/// side).
#[derive(Deserialize)]
pub(crate) struct ReviewComment {
    pub id: u64,
    #[serde(default)]
    pub pull_request_review_id: Option<u64>,
    pub user: User,
    pub path: String,
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(default)]
    pub position: Option<u64>,
    #[serde(default)]
    pub body: Option<String>,
    pub commit_id: String,
}

impl ReviewComment {
    pub fn into_api(self, line: Option<u64>) -> ApiReviewComment {
        ApiReviewComment {
            id: self.id,
            review_id: self.pull_request_review_id,
            author: self.user.into(),
            path: self.path,
            line,
            body: self.body.unwrap_or_default(),
            commit_id: self.commit_id,
        }
    }
}

/// A review; `S` is the forge's own names for its states. Reviews with
/// no user (a Gitea review requested from a team) are no one's.
#[derive(Deserialize)]
pub(crate) struct Review<S> {
    pub id: u64,
    #[serde(default)]
    pub user: Option<User>,
    #[serde(default)]
    pub body: Option<String>,
    pub state: S,
}

impl<S: Into<Option<model::ReviewState>>> Review<S> {
    /// The review as Forgehand sees it: `None` when no person wrote it.
    pub fn into_api(self) -> Option<super::Review> {
        Some(super::Review {
            id: self.id,
            author: self.user?.into(),
            state: self.state.into(),
            body: self.body.unwrap_or_default(),
        })
    }
}

/// The innermost cause: reqwest's and octocrab's outer errors name the
/// URL, which stays out of messages.
pub(crate) fn root_cause(error: &dyn std::error::Error) -> String {
    let mut source = error;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: &str = "GET /repos/acme/demo/issues/1/comments";

    #[test]
    fn a_missing_id_is_an_error_naming_the_call_and_the_field() {
        let answer = r#"[{"id": 1, "body": "a", "user": {"login": "x", "id": 5}},
                         {"body": "b", "user": {"login": "y", "id": 6}}]"#;
        let error = parse::<Vec<Comment>>(CALL, answer).err().unwrap();
        let text = error.to_string();
        assert!(matches!(error, ForgeError::Malformed(_)), "{error:?}");
        assert!(!error.is_transient());
        assert!(
            text.contains(CALL) && text.contains("[1]") && text.contains("missing field `id`"),
            "{text}"
        );
        let answer = r#"[{"id": 1, "body": "a", "user": {"login": "x"}}]"#;
        let text = parse::<Vec<Comment>>(CALL, answer)
            .err()
            .unwrap()
            .to_string();
        assert!(
            text.contains("[0].user") && text.contains("missing field `id`"),
            "{text}"
        );
        let text = parse::<Vec<Comment>>(CALL, "<html>")
            .err()
            .unwrap()
            .to_string();
        assert!(text.contains("not JSON"), "{text}");
    }

    #[test]
    fn what_may_be_null_or_absent_is_read_as_none() {
        let issue: Issue = parse(
            CALL,
            r#"{"number": 3, "title": "t", "body": null, "state": "closed",
                "user": {"login": "ghost", "id": -1}, "labels": null, "assignees": null,
                "pull_request": null, "extra": {"ignored": true}}"#,
        )
        .unwrap();
        let issue = model::Issue::from(issue);
        assert_eq!(
            (issue.body.as_str(), issue.state, issue.is_pull_request),
            ("", IssueState::Closed, false)
        );
        assert_eq!(issue.author.id, -1, "Gitea's ghost user");
        assert!(issue.labels.is_empty() && issue.assignees.is_empty());
        // GitHub describes labels as objects or names.
        let issue: Issue = parse(
            CALL,
            r#"{"number": 3, "title": "t", "state": "open", "user": {"login": "a", "id": 1, "type": "Bot"},
                "labels": [{"id": 9, "name": "forgehand"}, "bug"], "pull_request": {"url": "u"}}"#,
        )
        .unwrap();
        let issue = model::Issue::from(issue);
        assert_eq!(issue.labels, ["forgehand", "bug"]);
        assert!(issue.is_pull_request && issue.author.is_bot);
        let wrong = parse::<Issue>(
            CALL,
            r#"{"number": 3, "title": "t", "state": "merged", "user": {"login": "a", "id": 1}}"#,
        );
        assert!(
            wrong.err().unwrap().to_string().contains("state"),
            "an unknown state is named"
        );
    }

    #[test]
    fn a_pull_request_knows_whether_its_head_is_a_fork() {
        let pull: Pull = parse(
            CALL,
            r#"{"number": 2, "html_url": "https://x/pull/2", "title": "t", "state": "open",
                "user": {"login": "a", "id": 1},
                "head": {"ref": "forgehand/1-x", "repo": {"full_name": "Acme/Demo"}},
                "base": {"ref": "main", "repo": {"full_name": "acme/demo"}}, "merged_at": null}"#,
        )
        .unwrap();
        assert!(pull.is_from(&RepoRef::new("acme", "demo")));
        assert!(!pull.is_from(&RepoRef::new("mallory", "demo")));
        let pr = model::PullRequest::from(pull);
        assert_eq!((pr.head_ref.as_str(), pr.merged), ("forgehand/1-x", false));
        let gone: Pull = parse(
            CALL,
            r#"{"number": 2, "html_url": "u", "title": "t", "state": "open", "user": {"login": "a", "id": 1},
                "head": {"ref": "forgehand/1-x", "repo": null}, "base": {"ref": "main"}}"#,
        )
        .unwrap();
        assert!(!gone.is_from(&RepoRef::new("acme", "demo")));
    }
}
