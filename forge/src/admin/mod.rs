//! What setting Forgehand up asks of a forge, once, from the command line
//! (`forgehand setup …`) or the set-up page: a GitHub App made from a
//! manifest, a repository's or organization's webhook, the trigger label,
//! and what a token may do. These are not the pipeline's calls (those are
//! `crate::api::ForgeApi`): they run before any job, with the operator's
//! credentials, and each answer is small.

pub mod gitea;
pub mod github;
mod http;

pub use http::SetupError;

use secrecy::SecretString;

/// Where a webhook or label lives: one repository, or an organization
/// (every repository in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Repo { owner: String, name: String },
    Org(String),
}

impl Scope {
    /// `OWNER/NAME`, checked.
    pub fn repo(full: &str) -> Result<Scope, SetupError> {
        match full.split_once('/') {
            Some((owner, name)) if !owner.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(Scope::Repo {
                    owner: owner.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(SetupError::Invalid(format!(
                "`{full}` is not a repository: give OWNER/NAME"
            ))),
        }
    }

    pub fn org(name: &str) -> Result<Scope, SetupError> {
        if name.is_empty() || name.contains('/') {
            return Err(SetupError::Invalid(format!(
                "`{name}` is not an organization's name"
            )));
        }
        Ok(Scope::Org(name.to_owned()))
    }

    /// The API path it is reached at: `/repos/o/n` or `/orgs/o`.
    pub(crate) fn path(&self) -> String {
        match self {
            Scope::Repo { owner, name } => {
                format!("/repos/{}/{}", http::segment(owner), http::segment(name))
            }
            Scope::Org(org) => format!("/orgs/{}", http::segment(org)),
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Repo { owner, name } => write!(f, "{owner}/{name}"),
            Scope::Org(org) => write!(f, "organization {org}"),
        }
    }
}

/// The webhook Forgehand wants: where, signed with what, for which events.
pub struct HookSpec {
    pub url: String,
    pub secret: SecretString,
    pub events: Vec<String>,
}

/// A webhook as the forge lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub id: u64,
    pub url: String,
    pub events: Vec<String>,
    pub active: bool,
    pub content_type: Option<String>,
}

/// What was done to bring something to the wanted state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    /// There already; its settings written again (a secret cannot be read
    /// back to compare).
    Updated,
    Unchanged,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Updated => "updated",
            Outcome::Unchanged => "already there",
        }
    }
}

/// Of `hooks`, the one delivering to `url` (the same address, whatever
/// its trailing slash).
pub fn hook_for<'a>(hooks: &'a [Hook], url: &str) -> Option<&'a Hook> {
    let want = url.trim_end_matches('/');
    hooks.iter().find(|h| h.url.trim_end_matches('/') == want)
}

/// The trigger label's colour, as both forges take it (six hex digits).
pub const LABEL_COLOR: &str = "5319e7";
pub const LABEL_DESCRIPTION: &str = "Ask Forgehand to work on this issue";
