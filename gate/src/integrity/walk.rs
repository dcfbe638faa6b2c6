//! Reading the agent's tree on the host without letting the tree decide
//! how much is read: an iterative walk with a cap on entries and on depth
//! (no recursion, so no depth the tree chooses), files opened without
//! following links and without blocking (`O_NOFOLLOW | O_NONBLOCK`, then
//! `fstat` on the descriptor: only a regular file is read), and reads
//! streamed through a fixed buffer.

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{SnapshotError, TreeLimits};

/// What a directory entry is, from `lstat`: links are never followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Symlink,
    Special(Special),
}

/// Files git cannot hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    Fifo,
    Socket,
    BlockDevice,
    CharDevice,
}

impl Special {
    pub fn describe(self) -> &'static str {
        match self {
            Special::Fifo => "a named pipe",
            Special::Socket => "a socket",
            Special::BlockDevice => "a block device",
            Special::CharDevice => "a character device",
        }
    }
}

pub(crate) fn kind_of(meta: &Metadata) -> Kind {
    let t = meta.file_type();
    if t.is_symlink() {
        Kind::Symlink
    } else if t.is_dir() {
        Kind::Dir
    } else if t.is_file() {
        Kind::File
    } else if t.is_fifo() {
        Kind::Special(Special::Fifo)
    } else if t.is_socket() {
        Kind::Special(Special::Socket)
    } else if t.is_block_device() {
        Kind::Special(Special::BlockDevice)
    } else {
        Kind::Special(Special::CharDevice)
    }
}

/// Which directories the walk may leave out: those git would not look
/// into either (ignored, and holding nothing tracked).
pub trait Ignores {
    fn skip_dir(&self, rel: &Path) -> bool;

    /// Whether git ignores the file at `rel` and does not track it: it is
    /// never committed, and its size does not count. Asked only once
    /// every `.gitignore` met was a plain file.
    fn never_committed(&self, _rel: &Path) -> bool {
        false
    }
}

/// Leaves nothing out.
pub struct NoIgnores;

impl Ignores for NoIgnores {
    fn skip_dir(&self, _: &Path) -> bool {
        false
    }
}

/// How many entries a walk may still visit, shared by every walk of one
/// snapshot, and how deep it may go.
pub(crate) struct Budget {
    pub entries: usize,
    pub limit: usize,
    /// Directories deeper than this (counted from the walk's root) are
    /// not entered: the walk fails.
    pub max_depth: usize,
}

impl Budget {
    /// `limit` entries, at any depth.
    pub(crate) fn new(limit: usize) -> Budget {
        Budget {
            entries: limit,
            limit,
            max_depth: usize::MAX,
        }
    }

    /// A working tree's: `max_entries` entries, `max_depth` deep.
    pub(crate) fn for_tree(limits: &TreeLimits) -> Budget {
        Budget {
            max_depth: limits.max_depth,
            ..Budget::new(limits.max_entries)
        }
    }

    pub(crate) fn take(&mut self) -> Result<(), SnapshotError> {
        if self.entries == 0 {
            return Err(SnapshotError::TooManyEntries { limit: self.limit });
        }
        self.entries -= 1;
        Ok(())
    }
}

/// One entry met by [`walk`].
pub(crate) struct Item<'a> {
    /// Relative to the root the walk started from.
    pub rel: &'a Path,
    pub path: &'a Path,
    pub meta: &'a Metadata,
    pub kind: Kind,
}

/// Visits every entry under `root/start`, directories included (depth-first,
/// by an explicit stack), not following symlinks. `skip` is a path (from
/// `root`) not to enter. Directories are handed to `ignores` only after
/// the whole of their parent was listed, and only while every
/// `.gitignore` seen was a plain file: git reads those to decide what is
/// ignored, following links and blocking on pipes.
pub(crate) fn walk(
    root: &Path,
    start: &Path,
    skip: Option<&Path>,
    ignores: &dyn Ignores,
    budget: &mut Budget,
    visit: &mut dyn FnMut(&Item<'_>) -> Result<(), SnapshotError>,
) -> Result<(), SnapshotError> {
    let mut trust_ignores = true;
    let mut stack: Vec<PathBuf> = vec![start.to_owned()];
    while let Some(dir) = stack.pop() {
        let full = root.join(&dir);
        let listing = std::fs::read_dir(&full).map_err(|e| SnapshotError::io(&full, e))?;
        let mut subdirs: Vec<PathBuf> = Vec::new();
        for item in listing {
            let item = item.map_err(|e| SnapshotError::io(&full, e))?;
            budget.take()?;
            let name: OsString = item.file_name();
            let rel = dir.join(&name);
            if skip == Some(rel.as_path()) {
                continue;
            }
            let path = root.join(&rel);
            let meta = std::fs::symlink_metadata(&path).map_err(|e| SnapshotError::io(&path, e))?;
            let kind = kind_of(&meta);
            if name == ".gitignore" && kind != Kind::File {
                trust_ignores = false;
            }
            visit(&Item {
                rel: &rel,
                path: &path,
                meta: &meta,
                kind,
            })?;
            if kind == Kind::Dir {
                subdirs.push(rel);
            }
        }
        for sub in subdirs {
            // Git ignores every `.git`; the agent's are walked all the same,
            // to be listed as what they are.
            let planted = super::planted_git(&sub.to_string_lossy());
            if trust_ignores && !planted && ignores.skip_dir(&sub) {
                continue;
            }
            // Before it is listed or asked about: each question about
            // ignores walks up every level again.
            if sub.components().count() > budget.max_depth {
                return Err(SnapshotError::TooDeep {
                    limit: budget.max_depth,
                });
            }
            stack.push(sub);
        }
    }
    Ok(())
}

/// A regular file, read without following a link and without blocking.
pub(crate) enum Opened {
    File {
        file: File,
        meta: Metadata,
    },
    /// Not a regular file once opened: a pipe, a socket, a device, or a
    /// directory that took the name since it was listed.
    Other(Kind),
}

pub(crate) fn open_nofollow(path: &Path) -> io::Result<Opened> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    match kind_of(&meta) {
        Kind::File => Ok(Opened::File { file, meta }),
        other => Ok(Opened::Other(other)),
    }
}

pub(crate) fn is_executable(meta: &Metadata) -> bool {
    meta.permissions().mode() & 0o111 != 0
}

const BUFFER: usize = 64 * 1024;

/// SHA-256 of everything `file` holds, through a fixed buffer.
pub(crate) fn hash(file: &mut impl Read) -> io::Result<[u8; 32]> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; BUFFER];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => return Ok(hasher.finalize().into()),
            Ok(n) => hasher.update(&buffer[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// At most `limit` bytes of `file`.
pub(crate) fn read_capped(file: &mut impl Read, limit: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    file.take(limit as u64).read_to_end(&mut out)?;
    Ok(out)
}
