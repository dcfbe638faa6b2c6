//! Where a symlink in the tree leads, resolved the way the kernel resolves
//! it: component by component against the real tree, each symlink met on
//! the way replaced by its target, `..` applied to what the prefix really
//! is. `s1 -> s2/..` with `s2 -> .` leaves the tree, whatever the
//! spelling of `s1` suggests.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::walk::Budget;
use super::SnapshotError;

/// The kernel gives up after this many symlinks in one lookup (Linux's
/// `MAXSYMLINKS`).
const MAX_LINKS: u32 = 40;

/// Components one resolution may go through: far above any real link,
/// and it bounds what a crafted chain costs.
const MAX_STEPS: u32 = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// To this path in the tree (relative to its root; it may not exist).
    Inside(PathBuf),
    /// Outside: an absolute target, `..` above the root, a loop, or a
    /// chain too long to follow.
    Leaves,
}

/// Resolves the symlink at `rel` (relative to `root`); each component
/// looked up is taken from `budget`.
pub(crate) fn resolve(
    root: &Path,
    rel: &Path,
    budget: &mut Budget,
) -> Result<Resolution, SnapshotError> {
    let mut at: Vec<OsString> = Vec::new();
    let mut pending: VecDeque<OsString> = VecDeque::new();
    if let Some(parent) = rel.parent() {
        at.extend(parent.components().map(|c| c.as_os_str().to_owned()));
    }
    match rel.file_name() {
        Some(name) => pending.push_back(name.to_owned()),
        None => return Ok(Resolution::Leaves),
    }
    let (mut links, mut steps) = (0u32, 0u32);
    while let Some(part) = pending.pop_front() {
        budget.take()?;
        steps += 1;
        if steps > MAX_STEPS {
            return Ok(Resolution::Leaves);
        }
        match part.as_bytes() {
            b"" | b"." => continue,
            b".." => {
                if at.pop().is_none() {
                    return Ok(Resolution::Leaves);
                }
                continue;
            }
            _ => {}
        }
        let candidate: PathBuf = root.join(at.iter().collect::<PathBuf>()).join(&part);
        let is_link = std::fs::symlink_metadata(&candidate)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false);
        if !is_link {
            // A directory, a file, or nothing yet: a lookup goes on from
            // it as if it were a directory (a real lookup would stop at a
            // file or a missing name; that leads nowhere outside).
            at.push(part);
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return Ok(Resolution::Leaves);
        }
        let Ok(target) = std::fs::read_link(&candidate) else {
            return Ok(Resolution::Leaves);
        };
        if target.is_absolute() {
            return Ok(Resolution::Leaves);
        }
        for component in target.components().rev() {
            let text: &OsStr = match component {
                Component::Normal(name) => name,
                Component::ParentDir => OsStr::new(".."),
                Component::CurDir => continue,
                Component::RootDir | Component::Prefix(_) => return Ok(Resolution::Leaves),
            };
            pending.push_front(text.to_owned());
        }
        if pending.len() > MAX_STEPS as usize {
            return Ok(Resolution::Leaves);
        }
    }
    Ok(Resolution::Inside(at.iter().collect()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/file"), "x").unwrap();
        dir
    }

    fn link(dir: &tempfile::TempDir, at: &str, to: &str) {
        symlink(to, dir.path().join(at)).unwrap();
    }

    fn at(dir: &tempfile::TempDir, rel: &str) -> Resolution {
        let mut budget = Budget::new(10_000);
        resolve(dir.path(), Path::new(rel), &mut budget).unwrap()
    }

    #[test]
    fn plain_links_resolve_by_their_text() {
        let dir = tree();
        link(&dir, "a/up", "../a/b/file");
        link(&dir, "top", "a/b");
        link(&dir, "a/out", "../../elsewhere");
        link(&dir, "abs", "/etc/passwd");
        assert_eq!(at(&dir, "a/up"), Resolution::Inside("a/b/file".into()));
        assert_eq!(at(&dir, "top"), Resolution::Inside("a/b".into()));
        assert_eq!(at(&dir, "a/out"), Resolution::Leaves);
        assert_eq!(at(&dir, "abs"), Resolution::Leaves);
    }

    #[test]
    fn dot_dot_applies_to_what_the_prefix_really_is() {
        let dir = tree();
        // s2 is the root itself, so s2/.. is the root's parent.
        link(&dir, "s2", ".");
        link(&dir, "s1", "s2/..");
        assert_eq!(at(&dir, "s2"), Resolution::Inside("".into()));
        assert_eq!(at(&dir, "s1"), Resolution::Leaves);
        // deep is a/b, so deep/../../.. is above the root, though its
        // spelling climbs only three levels from the root.
        link(&dir, "deep", "a/b");
        link(&dir, "a/climb", "../deep/../../..");
        assert_eq!(at(&dir, "a/climb"), Resolution::Leaves);
        link(&dir, "a/stay", "../deep/..");
        assert_eq!(at(&dir, "a/stay"), Resolution::Inside("a".into()));
    }

    #[test]
    fn loops_and_long_chains_count_as_leaving() {
        let dir = tree();
        link(&dir, "l1", "l2");
        link(&dir, "l2", "l1");
        assert_eq!(at(&dir, "l1"), Resolution::Leaves);
        link(&dir, "self", "self/x");
        assert_eq!(at(&dir, "self"), Resolution::Leaves);
        for n in 0..50 {
            link(&dir, &format!("c{n}"), &format!("c{}", n + 1));
        }
        std::fs::write(dir.path().join("c50"), "end").unwrap();
        assert_eq!(at(&dir, "c0"), Resolution::Leaves, "more than 40 links");
        assert_eq!(at(&dir, "c20"), Resolution::Inside("c50".into()));
    }
}
