//! The ids that cross crates: a job's, the target a job works on, a
//! commit's. Typed so that a job id is never passed where a run's or a
//! delivery's is meant, and a target key or a commit is never a string
//! built twice.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{ForgeKind, Repo};

/// A job's id, as the store numbers jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub i64);

impl JobId {
    pub fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A job id read back beside a number a test or an answer holds.
impl PartialEq<i64> for JobId {
    fn eq(&self, other: &i64) -> bool {
        self.0 == *other
    }
}

impl From<i64> for JobId {
    fn from(id: i64) -> Self {
        JobId(id)
    }
}

/// What a job works on — an issue or a pull request of a repository on a
/// forge — as `forge:owner/name#number`: at most one job of a target runs
/// at a time, and a newer request supersedes a waiting one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TargetKey(String);

impl TargetKey {
    pub fn new(forge: ForgeKind, repo: &Repo, number: u64) -> Self {
        TargetKey(format!("{}:{}#{number}", forge.as_str(), repo.full_name()))
    }

    /// A key as the store keeps it (read back, never made up).
    pub fn from_stored(key: String) -> Self {
        TargetKey(key)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TargetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A commit's id as git prints it: 40 hexadecimal digits (64 in a SHA-256
/// repository), lower case.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct CommitSha(String);

/// What is not a commit id (its first 80 characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotACommit(pub String);

impl fmt::Display for NotACommit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a commit id (40 or 64 lower-case hex digits)",
            self.0
        )
    }
}

impl std::error::Error for NotACommit {}

impl CommitSha {
    pub fn parse(text: &str) -> Result<Self, NotACommit> {
        let ok = matches!(text.len(), 40 | 64)
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(CommitSha(text.to_owned()))
        } else {
            Err(NotACommit(text.chars().take(80).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first ten digits, as a status comment shows a commit.
    pub fn short(&self) -> &str {
        &self.0[..10]
    }
}

impl fmt::Display for CommitSha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CommitSha {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        CommitSha::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_id_is_forty_or_sixty_four_lower_case_hex_digits() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(CommitSha::parse(sha).unwrap().short(), "0123456789");
        assert!(CommitSha::parse(&"a".repeat(64)).is_ok());
        for bad in [
            "",
            "0123",
            &sha.to_uppercase(),
            &format!("{sha}0"),
            "g".repeat(40).as_str(),
        ] {
            assert!(CommitSha::parse(bad).is_err(), "{bad}");
        }
        let json = serde_json::to_string(&CommitSha::parse(sha).unwrap()).unwrap();
        assert_eq!(json, format!("\"{sha}\""));
        assert!(serde_json::from_str::<CommitSha>("\"main\"").is_err());
    }

    #[test]
    fn a_target_key_names_the_forge_the_repository_and_the_number() {
        let repo = Repo {
            owner: "acme".into(),
            name: "demo".into(),
            clone_url: None,
            default_branch: None,
            private: false,
        };
        assert_eq!(
            TargetKey::new(ForgeKind::Gitea, &repo, 7).as_str(),
            "gitea:acme/demo#7"
        );
        assert_eq!(serde_json::to_string(&JobId(42)).unwrap(), "42");
    }
}
