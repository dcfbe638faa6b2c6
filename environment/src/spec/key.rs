//! The key an environment is kept under: a SHA-256 over everything that
//! defines what setup leaves behind, so that an environment is reused
//! exactly while that is unchanged.
//!
//! Covered: the guest image, the repository's identity (an environment
//! holds what one repository's setup chose to leave, and is never handed
//! to another), the packages (sorted: their order installs nothing
//! different), the setup line, the extra CA bundle (it is installed into
//! the environment's trust), the hosts the egress lets the setup reach,
//! and each input's path, mode and contents: the view the setup ran over,
//! whole (with `inputs = ["**"]`, the tree's id). Not covered: the test
//! command, which installs nothing.
//!
//! Every field is length-prefixed and the encoding starts with its
//! version, so two different sets of parts never encode alike (no
//! `"ab" + "c"` = `"a" + "bc"`), and a change to the encoding cannot
//! reuse an environment built under the old one.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use super::declared::Declared;
use super::{FilesError, RepoFiles, MAX_INPUT_BYTES};

/// Bumped whenever the encoding below changes.
const ENCODING: &[u8] = b"forgehand-environment-key/4";

/// What the key is computed from, besides the inputs' contents.
#[derive(Debug, Clone, Copy)]
pub struct KeyParts<'a> {
    /// The guest image's id.
    pub image: &'a str,
    /// `forge:owner/name`, or for `forgehand run` the root commit.
    pub repository: &'a str,
    pub declared: &'a Declared,
    /// The operator's extra CA certificates, when configured.
    pub ca_bundle: Option<&'a [u8]>,
    /// What the egress lets the setup reach (`environment.allow_hosts`),
    /// in the operator's words: a host added or taken away can change
    /// what the setup installs.
    pub allowed: &'a [String],
}

/// An environment's key: 64 lower-case hex digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EnvKey(String);

impl EnvKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EnvKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A string that is not an environment key (`forgehand env rm KEY`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an environment key is 64 lower-case hexadecimal digits")]
pub struct EnvKeyError;

impl FromStr for EnvKey {
    type Err = EnvKeyError;
    fn from_str(text: &str) -> Result<Self, EnvKeyError> {
        let valid =
            text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        valid.then(|| EnvKey(text.to_owned())).ok_or(EnvKeyError)
    }
}

/// The key of the environment `parts` describe, reading each input from
/// `files` (at most [`MAX_INPUT_BYTES`] each; a larger one is an error,
/// not a partial hash).
pub fn key(parts: &KeyParts<'_>, files: &dyn RepoFiles) -> Result<EnvKey, FilesError> {
    let mut hash = Hash(Sha256::new());
    hash.field(ENCODING);
    hash.field(parts.image.as_bytes());
    hash.field(parts.repository.as_bytes());

    let mut packages: Vec<&str> = parts.declared.packages.iter().map(|p| p.as_str()).collect();
    packages.sort_unstable();
    packages.dedup();
    hash.count(packages.len());
    for package in packages {
        hash.field(package.as_bytes());
    }
    hash.optional(parts.declared.setup.as_deref().map(str::as_bytes));
    hash.optional(parts.ca_bundle);
    let mut allowed: Vec<&str> = parts.allowed.iter().map(String::as_str).collect();
    allowed.sort_unstable();
    allowed.dedup();
    hash.count(allowed.len());
    for host in allowed {
        hash.field(host.as_bytes());
    }
    if parts.declared.whole_tree {
        let root = files.tree_id("").ok_or_else(|| FilesError::Read {
            path: "the base commit's tree".into(),
            source: "no tree id".into(),
        })?;
        hash.optional(Some(root.as_bytes()));
    } else {
        hash.optional(None);
    }

    let mut inputs: Vec<&str> = parts.declared.inputs.iter().map(String::as_str).collect();
    inputs.sort_unstable();
    inputs.dedup();
    hash.count(inputs.len());
    for path in inputs {
        hash.field(path.as_bytes());
        hash.optional(files.read(path, MAX_INPUT_BYTES)?.as_deref());
        hash.count(usize::from(files.executable(path)));
        // A link input is its target, as stored (the view holds the link).
        hash.optional(files.link(path).as_deref().map(str::as_bytes));
    }
    Ok(EnvKey(hex::encode(hash.0.finalize())))
}

/// The encoder: every variable-length part preceded by its length.
struct Hash(Sha256);

impl Hash {
    fn count(&mut self, n: usize) {
        self.0.update((n as u64).to_be_bytes());
    }

    fn field(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.update(bytes);
    }

    fn optional(&mut self, bytes: Option<&[u8]>) {
        match bytes {
            None => self.0.update([0]),
            Some(bytes) => {
                self.0.update([1]);
                self.field(bytes);
            }
        }
    }
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
