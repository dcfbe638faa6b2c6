//! What the fake forge keeps of its webhooks — the hooks, the changes it
//! announces and every delivery — apart from how a delivery's body is
//! built (`webhooks/`, which reads the forge's state): the state holds
//! these and needs nothing of the payloads.

use std::collections::HashMap;

use tokio::sync::mpsc;

/// A change to the forge's state that the forge tells its hooks about.
#[derive(Debug, Clone)]
pub(in crate::fake_forge) enum Change {
    Labeled {
        number: u64,
        label: String,
    },
    Assigned {
        number: u64,
        assignee: String,
    },
    Commented {
        comment: u64,
    },
    CommentEdited {
        comment: u64,
        from: String,
    },
    PullOpened {
        number: u64,
    },
    PullEdited {
        number: u64,
        title_from: Option<String>,
        body_from: Option<String>,
    },
    ReviewRequested {
        number: u64,
        reviewer: String,
    },
    Reviewed {
        review: u64,
    },
    /// A reply in a review thread (GitHub's `pull_request_review_comment`).
    ReviewReply {
        comment: u64,
    },
    /// GitHub's `ping` to one hook, asked for through the API.
    Ping {
        hook: u64,
    },
    /// Gitea's test delivery to one hook: a `push`.
    TestPush {
        hook: u64,
    },
}

/// The hooks, the repositories' settings hooks report, and every delivery.
#[derive(Default)]
pub struct Webhooks {
    pub(in crate::fake_forge) hooks: Vec<Hook>,
    /// Every delivery, in the order it was queued.
    pub deliveries: Vec<Delivery>,
    /// `owner/name` → (clone URL, default branch) when a test set them.
    pub(in crate::fake_forge) repos: HashMap<String, (Option<String>, Option<String>)>,
    pub(in crate::fake_forge) base_url: String,
    /// Indexes into `deliveries`, for the task that posts them.
    pub(in crate::fake_forge) outbox: Option<mpsc::UnboundedSender<usize>>,
}

#[derive(Debug, Clone)]
pub(in crate::fake_forge) struct Hook {
    pub id: u64,
    pub url: String,
    pub secret: String,
    /// Whose changes it hears: `None` for a hook a test added (every
    /// repository), else one repository's or one organization's (made
    /// through the API).
    pub scope: Option<HookScope>,
    pub events: Vec<String>,
    pub active: bool,
    pub content_type: String,
}

/// What a hook made through the API belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookScope {
    Repo(String),
    Org(String),
    /// A GitHub App's webhook: it hears the repositories the App is
    /// installed on.
    App(u64),
}

impl Hook {
    /// Whether a change in `repo` (where the App `installed` is
    /// installed, if any) is delivered to it.
    pub(in crate::fake_forge) fn hears(&self, repo: &str, installed: Option<u64>) -> bool {
        self.active
            && match &self.scope {
                None => true,
                Some(HookScope::Repo(r)) => r == repo,
                Some(HookScope::Org(org)) => repo.split('/').next() == Some(org.as_str()),
                Some(HookScope::App(app)) => installed == Some(*app),
            }
    }
}

/// One delivery to one hook: what was sent and how it was answered.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub hook_id: u64,
    pub url: String,
    /// `X-GitHub-Event` or `X-Gitea-Event`.
    pub event: String,
    pub action: Option<String>,
    pub delivery_id: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The receiver's HTTP status, once it answered.
    pub status: Option<u16>,
    /// The receiver's answer body.
    pub answer: Option<String>,
    /// Why there was no answer (connection refused, timeout).
    pub error: Option<String>,
}

impl Delivery {
    /// A header's value, by its name in any case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn answered(&self) -> bool {
        self.status.is_some() || self.error.is_some()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the fake sends JSON")
    }
}
