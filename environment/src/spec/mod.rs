//! What a repository declares about its environment, and the key an
//! environment is kept under.
//!
//! The agent can only show that a change works if the project's
//! dependencies are installed, and its sandbox has no network. So a
//! setup phase installs them once, through a door that reaches only
//! package registries, and the result is kept and reused. This module
//! decides *what* that setup is, from the base commit's files (never from
//! a tree the agent changed, which the caller guarantees by what it hands
//! in as [`RepoFiles`]):
//!
//! 1. `.forgehand.toml`'s `[environment]` table (`packages`, `setup`,
//!    `test`): the repository's own, explicit word. When the table is
//!    there it is the whole declaration: nothing is added from a
//!    devcontainer or from detection, so a repository can also turn both
//!    off with an empty `[environment]`, and a test it did not declare is
//!    not guessed. Unknown keys are errors, since a typo silently ignored
//!    would build the wrong environment with no word to anyone.
//! 2. Else `.devcontainer/devcontainer.json` (or `.devcontainer.json`):
//!    its `onCreateCommand`, `updateContentCommand` and `postCreateCommand`
//!    are the setup. A devcontainer's tools come from its image, which
//!    Forgehand does not use, so with detection on the detected
//!    toolchains' Debian packages and test are added (see [`detect`]).
//!    A devcontainer file with none of the three commands declares no
//!    setup, and detection proceeds as if it were absent.
//! 3. Else, when the operator leaves detection on, a default from the
//!    lockfiles and manifests at the root ([`detect`]).
//!
//! Whatever the source, [`Declared::inputs`] lists the lockfiles and
//! manifests present and what `[environment] inputs` adds ([`inputs`]):
//! the setup runs over a view holding only them, and [`key()`](key::key)
//! hashes exactly them, so that a changed lockfile means a new
//! environment and a change to anything else cannot be in it.
//!
//! Errors in a repository's files reach a person in the status comment,
//! so [`DeclareError`] always names the file, the line and what was
//! expected. Every read is bounded: nothing here reads more of a file
//! than its limit, whatever the repository holds.

mod declared;
pub mod detect;
mod devcontainer;
mod error;
mod forgehand_toml;
pub mod inputs;
mod key;
mod package;
mod propose;
mod python_project;
pub use propose::propose;
#[cfg(test)]
mod testing;

pub use declared::{declared, Declared, Source};
pub use detect::Toolchain;
pub use error::{DeclFile, DeclareError, DevcontainerPath, FilesError, Location, Problem};
pub use key::{key, EnvKey, EnvKeyError, KeyParts};
pub use package::{DebianPackage, PackageNameError};

/// The base commit's files, as the caller has them (a git tree, or a map in
/// tests). Paths are relative to the repository root and `/`-separated.
pub trait RepoFiles {
    /// The file at `path`, at most `max` bytes; `Ok(None)` when absent (or
    /// not a regular file); [`FilesError::TooLarge`] when larger than `max`,
    /// without reading it all.
    fn read(&self, path: &str, max: u64) -> Result<Option<Vec<u8>>, FilesError>;
    /// Whether a regular file exists at `path`, for detection.
    fn exists(&self, path: &str) -> bool;
    /// Whether a directory exists at `path`.
    fn is_dir(&self, path: &str) -> bool;
    /// Whether the regular file at `path` is executable (git's mode
    /// `100755`).
    fn executable(&self, path: &str) -> bool {
        let _ = path;
        false
    }
    /// The target of the symbolic link at `path`, as stored.
    fn link(&self, path: &str) -> Option<String>;
    /// The names of the entries directly in the directory `dir` (`""`:
    /// the root), at most `max` of them.
    fn list(&self, dir: &str, max: usize) -> Vec<String>;
    /// A digest of everything under the directory `dir`, recursively
    /// (git's tree id; `""`: the root's); `None` when `dir` is not a
    /// directory.
    fn tree_id(&self, dir: &str) -> Option<String>;
    /// The paths of every regular file or link in the tree whose name ends
    /// with one of `suffixes`, sorted; [`FilesError::TooLarge`] when the walk
    /// would pass `max_entries` entries.
    fn ending_with(&self, suffixes: &[&str], max_entries: usize)
        -> Result<Vec<String>, FilesError>;
}

/// The largest `.forgehand.toml` or `devcontainer.json` read.
pub const MAX_DECLARATION_BYTES: u64 = 64 * 1024;
/// The longest `setup` or `test` command, in bytes: enough for any real
/// setup line, short enough to show in a status comment.
pub const MAX_COMMAND_BYTES: usize = 4 * 1024;
/// The most Debian packages one repository may add to the guest image.
pub const MAX_PACKAGES: usize = 100;
/// The largest manifest read to detect a toolchain or its test
/// (`package.json`, requirement files, `pyproject.toml`, lockfiles).
pub const MAX_DETECT_BYTES: u64 = 4 * 1024 * 1024;
/// The largest input whose contents the key covers.
pub const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;
