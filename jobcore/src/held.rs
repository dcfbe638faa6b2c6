//! A change the gate held for a maintainer: what the job core hands back
//! instead of a commit to push, and what the service keeps of it.

use serde::{Deserialize, Serialize};

use forgehand_types::CommitSha;

use crate::environment::Testing;

/// What a maintainer must allow before a held change is pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldFor {
    /// Files that are not ordinary work (`/forgehand allow-sensitive`).
    Sensitive,
    /// It removes most of the repository (`/forgehand allow-destructive`).
    Destructive,
}

impl HeldFor {
    /// The command that allows it.
    pub fn command(self) -> &'static str {
        match self {
            HeldFor::Sensitive => "allow-sensitive",
            HeldFor::Destructive => "allow-destructive",
        }
    }
}

/// A held change: the commit the gate held, kept on the host at
/// `reference` in the repository's mirror (a ref no pull request and no
/// CI sees), and what its pull request will say once it is released.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldCommit {
    pub commit: CommitSha,
    /// `refs/forgehand/held/<job>` in the mirror.
    pub reference: String,
    /// Where it goes once released, and onto what.
    pub branch: String,
    pub base: String,
    /// Where the branch was on the forge when the job worked on it (a
    /// follow-up's); the release pushes only over that.
    pub expected: Option<CommitSha>,
    pub held_for: Vec<HeldFor>,
    pub title: String,
    pub summary: String,
    pub files: Vec<String>,
    /// The gate's findings, as Markdown.
    pub findings: String,
    pub testing: Option<Testing>,
}

/// A commit id as git2 holds it, as the crates pass it.
pub fn commit_sha(oid: git2::Oid) -> CommitSha {
    CommitSha::parse(&oid.to_string()).expect("git writes a commit id as lower-case hex")
}
