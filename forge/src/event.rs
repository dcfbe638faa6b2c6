//! The forge-neutral events. Both forges' payloads are turned into these
//! types at the edge, so nothing past the webhook handler ever looks at
//! raw JSON or cares which forge spoke. What they are about (issues, pull
//! requests, comments, people) is the one model in [`crate::model`], the
//! same the API clients answer with.

use serde::{Deserialize, Serialize};

pub use crate::model::{Actor, Comment, Issue, IssueState, PullRequest, Repo, ReviewState};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueAction {
    Opened,
    Edited,
    Closed,
    Reopened,
    /// `label` on the event says which label. Gitea only says the label set
    /// changed (`label_updated`); then `label` is `None` and
    /// `issue.labels` holds the new set.
    Labeled,
    Unlabeled,
    /// `assignee` on the event says who, when the forge tells.
    Assigned,
    Unassigned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommentAction {
    Created,
    Edited,
    Deleted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullRequestAction {
    Opened,
    /// New commits were pushed to the head branch.
    Synchronize,
    /// Closed without merging.
    Closed,
    Merged,
    Reopened,
    Edited,
    Labeled,
    Unlabeled,
    Assigned,
    Unassigned,
    ReviewRequested,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstallationAction {
    Created,
    Deleted,
    Suspended,
    Unsuspended,
    NewPermissionsAccepted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstallationReposAction {
    Added,
    Removed,
}

/// Every event Forgehand understands. A delivery it has no use for becomes
/// [`Event::Other`] and is answered "ignored", not refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    Ping {
        zen: Option<String>,
        hook_id: Option<u64>,
        repo: Option<Repo>,
        sender: Option<Actor>,
    },
    Issue {
        action: IssueAction,
        repo: Repo,
        sender: Actor,
        issue: Issue,
        /// The label added or removed (GitHub says; Gitea does not).
        label: Option<String>,
        /// The user assigned or unassigned, when the forge says.
        assignee: Option<Actor>,
    },
    /// A comment in the conversation of an issue or of a pull request
    /// (`issue.is_pull_request` tells which).
    IssueComment {
        action: CommentAction,
        repo: Repo,
        sender: Actor,
        issue: Issue,
        comment: Comment,
    },
    ReviewSubmitted {
        repo: Repo,
        sender: Actor,
        pull_request: PullRequest,
        review_id: Option<u64>,
        state: ReviewState,
        body: String,
    },
    /// A comment on a line of a pull request's diff.
    ReviewComment {
        action: CommentAction,
        repo: Repo,
        sender: Actor,
        pull_request: PullRequest,
        comment: Comment,
        path: Option<String>,
        line: Option<u64>,
        in_reply_to: Option<u64>,
    },
    PullRequest {
        action: PullRequestAction,
        repo: Repo,
        sender: Actor,
        pull_request: PullRequest,
    },
    Installation {
        action: InstallationAction,
        installation_id: u64,
        account: String,
        sender: Actor,
        /// Repositories (`owner/name`) listed with the event.
        repositories: Vec<String>,
    },
    InstallationRepositories {
        action: InstallationReposAction,
        installation_id: u64,
        account: String,
        sender: Actor,
        added: Vec<String>,
        removed: Vec<String>,
    },
    /// An event or action Forgehand does not act on, kept by name.
    Other {
        event: String,
        action: Option<String>,
    },
}

impl Event {
    /// The repository the event happened in, when there is one.
    pub fn repo(&self) -> Option<&Repo> {
        match self {
            Event::Ping { repo, .. } => repo.as_ref(),
            Event::Issue { repo, .. }
            | Event::IssueComment { repo, .. }
            | Event::ReviewSubmitted { repo, .. }
            | Event::ReviewComment { repo, .. }
            | Event::PullRequest { repo, .. } => Some(repo),
            Event::Installation { .. }
            | Event::InstallationRepositories { .. }
            | Event::Other { .. } => None,
        }
    }

    /// Who caused the event.
    pub fn sender(&self) -> Option<&Actor> {
        match self {
            Event::Ping { sender, .. } => sender.as_ref(),
            Event::Issue { sender, .. }
            | Event::IssueComment { sender, .. }
            | Event::ReviewSubmitted { sender, .. }
            | Event::ReviewComment { sender, .. }
            | Event::PullRequest { sender, .. }
            | Event::Installation { sender, .. }
            | Event::InstallationRepositories { sender, .. } => Some(sender),
            Event::Other { .. } => None,
        }
    }

    /// A short stable name, `event.action`, for logs and metrics.
    pub fn name(&self) -> String {
        match self {
            Event::Ping { .. } => "ping".into(),
            Event::Issue { action, .. } => format!("issues.{}", action.as_str()),
            Event::IssueComment { action, .. } => format!("issue_comment.{}", action.as_str()),
            Event::ReviewSubmitted { state, .. } => format!("review.{}", state.as_str()),
            Event::ReviewComment { action, .. } => format!("review_comment.{}", action.as_str()),
            Event::PullRequest { action, .. } => format!("pull_request.{}", action.as_str()),
            Event::Installation { action, .. } => format!("installation.{}", action.as_str()),
            Event::InstallationRepositories { action, .. } => {
                format!("installation_repositories.{}", action.as_str())
            }
            Event::Other { event, action } => match action {
                Some(a) => format!("{event}.{a}"),
                None => event.clone(),
            },
        }
    }
}

/// `as_str` for the action enums: the same snake_case names serde uses
/// (a test holds them together), without serde's allocations on the
/// request path.
macro_rules! names {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }
    };
}

names!(IssueAction {
    Opened => "opened", Edited => "edited", Closed => "closed", Reopened => "reopened",
    Labeled => "labeled", Unlabeled => "unlabeled", Assigned => "assigned", Unassigned => "unassigned",
});
names!(CommentAction { Created => "created", Edited => "edited", Deleted => "deleted" });
// `ReviewState`'s names are in forgehand-types, beside the type.
names!(PullRequestAction {
    Opened => "opened", Synchronize => "synchronize", Closed => "closed", Merged => "merged",
    Reopened => "reopened", Edited => "edited", Labeled => "labeled", Unlabeled => "unlabeled",
    Assigned => "assigned", Unassigned => "unassigned", ReviewRequested => "review_requested",
});
names!(InstallationAction {
    Created => "created", Deleted => "deleted", Suspended => "suspended",
    Unsuspended => "unsuspended", NewPermissionsAccepted => "new_permissions_accepted",
});
names!(InstallationReposAction { Added => "added", Removed => "removed" });

#[cfg(test)]
mod tests {
    use super::*;

    fn serde_name<T: Serialize>(v: &T) -> String {
        serde_json::to_value(v)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn names_match_what_serde_writes() {
        for v in IssueAction::ALL {
            assert_eq!(v.as_str(), serde_name(v));
        }
        for v in CommentAction::ALL {
            assert_eq!(v.as_str(), serde_name(v));
        }
        for v in ReviewState::ALL {
            assert_eq!(v.as_str(), serde_name(v));
        }
        for v in PullRequestAction::ALL {
            assert_eq!(v.as_str(), serde_name(v));
        }
        for v in InstallationAction::ALL {
            assert_eq!(v.as_str(), serde_name(v));
        }
        for v in InstallationReposAction::ALL {
            assert_eq!(v.as_str(), serde_name(v));
        }
    }
}
