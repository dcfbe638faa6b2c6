//! The one forge model: repositories, people, issues, pull requests and
//! comments as Forgehand knows them, whichever forge spoke and whether a
//! webhook told of them or the API was asked. Webhook payloads
//! ([`crate::webhook`]) and API answers ([`crate::api`]) are both read
//! into these types at the edge.

use serde::{Deserialize, Serialize};

/// A repository as named by the forge. `owner/name` is the key Forgehand
/// uses everywhere (jobs, locks, logs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repo {
    pub owner: String,
    pub name: String,
    /// The clone URL over HTTPS, when the payload carries one.
    pub clone_url: Option<String>,
    pub default_branch: Option<String>,
    pub private: bool,
}

impl Repo {
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// The repository's address on the forge's API.
    pub fn key(&self) -> RepoRef {
        RepoRef::new(&self.owner, &self.name)
    }
}

/// Which repository an API call is about: its owner and name, nothing
/// the forge would have to tell first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoRef {
    pub owner: String,
    pub name: String,
}

impl RepoRef {
    pub fn new(owner: &str, name: &str) -> Self {
        RepoRef {
            owner: owner.into(),
            name: name.into(),
        }
    }

    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }
}

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

/// A submitted review's verdict. Pending and dismissed reviews have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewState {
    Approved,
    ChangesRequested,
    Commented,
}
