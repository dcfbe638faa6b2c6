//! The tree as libgit2 will meet it: before the gate diffs and the host
//! commits (both read files whole, and block on a pipe that git reads as
//! `.gitignore` or `.gitattributes`), once the sandbox is gone, the tree
//! is walked with the same bounds as the snapshot. Pipes, sockets and
//! devices are removed (git cannot hold them, so they were never going to
//! be pushed) and listed; regular files above the size limit, and a tree
//! with more entries than the limit, are reported for the gate to refuse.

use std::fmt;
use std::path::{Path, PathBuf};

use super::count::{TreeBytes, MAX_CHECKED};
use super::walk::{self, Budget, Ignores, Kind, Special};
use super::{shown, SnapshotError, TreeLimits};

/// More of a kind than this are counted, not listed.
pub const MAX_LISTED: usize = 100;

/// A file the host removed from the tree instead of committing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    pub path: String,
    pub kind: Special,
}

impl fmt::Display for LeftOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}: git cannot hold it)",
            self.path,
            self.kind.describe()
        )
    }
}

/// A regular file above the size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LargeFile {
    pub rel: PathBuf,
    pub bytes: u64,
}

#[derive(Debug, Default)]
pub struct Audit {
    /// At most [`MAX_LISTED`]; `left_out_more` counts the rest.
    pub left_out: Vec<LeftOut>,
    pub left_out_more: usize,
    /// At most [`MAX_CHECKED`] (the gate asks git about each, and lists
    /// at most [`MAX_LISTED`] of those it would commit); `large_more`
    /// counts the rest.
    pub large: Vec<LargeFile>,
    pub large_more: usize,
    /// Set when the walk stopped at the entry limit.
    pub too_many_entries: Option<usize>,
    /// Set when the walk stopped at the depth limit.
    pub too_deep: Option<usize>,
    /// The regular files' lengths added up (holes count: git reads them),
    /// less the large ones git never commits ([`super::count`]).
    pub total_bytes: u64,
    /// Whether every `.gitignore` met was a plain file, so that asking git
    /// what is ignored reads only audited files.
    pub ignores_trusted: bool,
}

/// Walks the tree (leaving out the directories `ignores` says git never
/// enters, and the git directory when it lies inside), removes special
/// files, and notes large ones.
pub fn audit(
    tree: &Path,
    git_dir: &Path,
    limits: TreeLimits,
    ignores: &dyn Ignores,
) -> Result<Audit, SnapshotError> {
    let mut budget = Budget::for_tree(&limits);
    let git_in_tree = git_dir.strip_prefix(tree).ok().map(Path::to_owned);
    let mut audit = Audit {
        ignores_trusted: true,
        ..Audit::default()
    };
    let mut tree_bytes = TreeBytes::new();
    let walked = walk::walk(
        tree,
        Path::new(""),
        git_in_tree.as_deref(),
        ignores,
        &mut budget,
        &mut |item| {
            tree_bytes.add(item);
            if item.rel.file_name().is_some_and(|n| n == ".gitignore") && item.kind != Kind::File {
                audit.ignores_trusted = false;
            }
            match item.kind {
                Kind::Special(kind) => {
                    // Not `remove_dir_all` or anything that follows: the
                    // name itself goes, whatever it is.
                    std::fs::remove_file(item.path).map_err(|e| SnapshotError::io(item.path, e))?;
                    if audit.left_out.len() < MAX_LISTED {
                        audit.left_out.push(LeftOut {
                            path: shown(item.rel),
                            kind,
                        });
                    } else {
                        audit.left_out_more += 1;
                    }
                }
                Kind::File if item.meta.len() > limits.max_file_bytes => {
                    if audit.large.len() < MAX_CHECKED {
                        audit.large.push(LargeFile {
                            rel: item.rel.to_owned(),
                            bytes: item.meta.len(),
                        });
                    } else {
                        audit.large_more += 1;
                    }
                }
                _ => {}
            }
            Ok(())
        },
    );
    match walked {
        // Git is asked about ignores only once every `.gitignore` the files
        // checked lie under was seen: after a whole walk.
        Ok(()) => audit.total_bytes = tree_bytes.total(ignores),
        Err(SnapshotError::TooManyEntries { limit }) => audit.too_many_entries = Some(limit),
        Err(SnapshotError::TooDeep { limit }) => audit.too_deep = Some(limit),
        Err(other) => return Err(other),
    }
    Ok(audit)
}
