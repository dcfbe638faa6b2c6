//! The one forge model: repositories, people, issues, pull requests and
//! comments as Forgehand knows them, whichever forge spoke and whether a
//! webhook told of them or the API was asked. Webhook payloads
//! ([`crate::webhook`]) and API answers ([`crate::api`]) are both read
//! into these types at the edge.

use serde::{Deserialize, Serialize};

// The repository's names are shared with the store, which compiles no
// forge client: they live in forgehand-types.
pub use forgehand_types::{Repo, RepoRef};

/// A forge user. `login` is the handle people mention (`@login`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub login: String,
    /// The forge's id of the user. Gitea's stand-ins are negative: its
    /// ghost (a deleted user) is `-1`, its Actions user `-2`.
    pub id: i64,
    /// GitHub marks Apps and bots with `type: "Bot"`; Gitea has no such flag.
    pub is_bot: bool,
}

/// An issue (or a pull request, which both forges also treat as an
/// issue).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub author: Actor,
    pub labels: Vec<String>,
    pub assignees: Vec<String>,
    /// True when this "issue" is really a pull request.
    pub is_pull_request: bool,
    pub state: IssueState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueState {
    Open,
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    /// Its page on the forge (`html_url`).
    pub url: String,
    pub title: String,
    pub body: String,
    pub author: Actor,
    /// Branch the changes live on.
    pub head_ref: String,
    pub head_sha: Option<String>,
    /// Branch the changes are proposed for.
    pub base_ref: String,
    pub merged: bool,
    pub state: IssueState,
}

/// A comment in the conversation of an issue or a pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    pub id: u64,
    pub body: String,
    pub author: Actor,
}

pub use forgehand_types::ReviewState;
