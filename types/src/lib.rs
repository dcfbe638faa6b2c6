//! The names Forgehand's crates share at their seams: which forge spoke,
//! which repository, a review's verdict. The store keeps them and the
//! forge crate reads payloads into them; neither needs the other for it
//! (the store used to compile octocrab and libgit2 for three enums).

pub mod config;
mod ids;
pub mod reason;

pub use ids::{CommitSha, JobId, NotACommit, TargetKey};

use serde::{Deserialize, Serialize};

/// Which forge a delivery, a job or an installation belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForgeKind {
    Github,
    Gitea,
    Forgejo,
}

impl ForgeKind {
    pub const ALL: [ForgeKind; 3] = [ForgeKind::Github, ForgeKind::Gitea, ForgeKind::Forgejo];

    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::Github => "github",
            ForgeKind::Gitea => "gitea",
            ForgeKind::Forgejo => "forgejo",
        }
    }

    /// Gitea and Forgejo speak the same webhook dialect and share one
    /// endpoint and one set of secrets.
    pub fn is_gitea_family(self) -> bool {
        matches!(self, ForgeKind::Gitea | ForgeKind::Forgejo)
    }
}

impl std::str::FromStr for ForgeKind {
    type Err = String;

    /// The name [`ForgeKind::as_str`] gives, as the store keeps it.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ForgeKind::ALL
            .into_iter()
            .find(|f| f.as_str() == name)
            .ok_or_else(|| format!("unknown forge `{name}`"))
    }
}

impl std::fmt::Display for ForgeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// A submitted review's verdict. Pending and dismissed reviews have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewState {
    Approved,
    ChangesRequested,
    Commented,
}

impl ReviewState {
    pub const ALL: &'static [ReviewState] = &[
        ReviewState::Approved,
        ReviewState::ChangesRequested,
        ReviewState::Commented,
    ];

    /// The snake_case name serde uses too (forge's event tests hold the
    /// two together).
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewState::Approved => "approved",
            ReviewState::ChangesRequested => "changes_requested",
            ReviewState::Commented => "commented",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delivery's forge is read back from the name the store keeps,
    /// and the operator API shows the same name as before it was typed.
    #[test]
    fn a_forge_is_read_back_from_its_stored_name() {
        for forge in ForgeKind::ALL {
            assert_eq!(forge.as_str().parse::<ForgeKind>(), Ok(forge));
            assert_eq!(
                serde_json::to_value(forge).unwrap(),
                serde_json::Value::from(forge.as_str())
            );
        }
        assert_eq!(
            "gitlab".parse::<ForgeKind>(),
            Err("unknown forge `gitlab`".to_owned())
        );
    }

    /// The names are stored: their serialised forms must not move.
    #[test]
    fn stored_names_keep_their_forms() {
        assert_eq!(
            serde_json::to_string(&ForgeKind::Forgejo).unwrap(),
            "\"forgejo\""
        );
        assert_eq!(
            serde_json::to_string(&ReviewState::ChangesRequested).unwrap(),
            "\"changes_requested\""
        );
        assert!(ForgeKind::Gitea.is_gitea_family() && !ForgeKind::Github.is_gitea_family());
        let repo = Repo {
            owner: "o".into(),
            name: "n".into(),
            clone_url: None,
            default_branch: None,
            private: false,
        };
        assert_eq!(repo.key(), RepoRef::new("o", "n"));
        assert_eq!(repo.key().full_name(), "o/n");
    }
}
