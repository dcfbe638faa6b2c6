//! A change that removes most of the repository is refused
//! (`destructive`) unless a maintainer allows it: an agent that saw an
//! empty tree, or was told to by a hostile text, would otherwise open a
//! pull request deleting everything, and a reviewer skimming a long diff
//! may merge it.
//!
//! Measured from the committed tree against the working tree: files
//! deleted, left empty or rewritten (more than half of their bytes in
//! lines they no longer hold, or a binary file changed: overwriting every
//! file with as many bytes of junk removes them all), and bytes removed
//! (a deleted, emptied or rewritten file's size, a shrunk file's lost
//! bytes), each as a share of what the committed tree tracks; the bytes
//! only past 4 KiB removed. A file renamed (git's rename detection, new files included) is
//! not removed. A change leaving no file at all is always destructive.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use git2::{
    Delta, DiffFindOptions, DiffOptions, ObjectType, Repository, TreeWalkMode, TreeWalkResult,
};

/// What a change removes of the tracked files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removal {
    /// Files (and links) the committed tree holds, and their bytes.
    pub tracked_files: usize,
    pub tracked_bytes: u64,
    /// Deleted, not renamed.
    pub deleted_files: usize,
    /// Still there, with no bytes left.
    pub emptied_files: usize,
    /// Still there, with more than half of their bytes in lines removed
    /// (of those holding more than [`MIN_REWRITTEN_FILE_BYTES`]).
    pub rewritten_files: usize,
    /// What the deleted files held and the shrunk files lost.
    pub removed_bytes: u64,
    /// Files the working tree holds after the change (tracked and new).
    pub files_after: usize,
}

impl Removal {
    /// The share of tracked files deleted, emptied or rewritten.
    pub fn file_share(&self) -> f64 {
        share(
            (self.deleted_files + self.emptied_files + self.rewritten_files) as f64,
            self.tracked_files as f64,
        )
    }

    /// The share of tracked bytes removed.
    pub fn byte_share(&self) -> f64 {
        share(self.removed_bytes as f64, self.tracked_bytes as f64)
    }

    /// Whether the change removes more than `max_share` of the files or
    /// of the bytes, or leaves nothing where there was something. The
    /// bytes count only past [`MIN_REMOVED_BYTES`]: in a repository of a
    /// few small files, rewriting one is an ordinary fix.
    pub fn is_destructive(&self, max_share: f64) -> bool {
        if self.tracked_files == 0 {
            return false;
        }
        self.files_after == 0
            || self.file_share() > max_share
            || (self.removed_bytes > MIN_REMOVED_BYTES && self.byte_share() > max_share)
    }
}

/// Bytes removed below which the byte share does not make a change
/// destructive (the file share still does).
pub const MIN_REMOVED_BYTES: u64 = 4096;

/// A file rewritten counts among the files removed only when it held
/// more than this: its bytes count either way.
pub const MIN_REWRITTEN_FILE_BYTES: u64 = 512;

fn share(part: f64, whole: f64) -> f64 {
    if whole == 0.0 {
        0.0
    } else {
        part / whole
    }
}

impl fmt::Display for Removal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the change deletes {}, empties {} and rewrites {} of the {} tracked files ({:.0}%) and removes {} of their {} bytes ({:.0}%)",
            self.deleted_files,
            self.emptied_files,
            self.rewritten_files,
            self.tracked_files,
            self.file_share() * 100.0,
            self.removed_bytes,
            self.tracked_bytes,
            self.byte_share() * 100.0
        )?;
        if self.files_after == 0 {
            write!(f, "; no file is left")?;
        }
        Ok(())
    }
}

/// What the working tree of `repo` removes of its `HEAD` tree. Reads the
/// trees' object headers and the working tree's file sizes; file contents
/// only for git's rename detection between deleted and new files.
pub fn measure(repo: &Repository) -> Result<Removal, git2::Error> {
    let mut removal = Removal::default();
    let Some(head) = repo.head().ok().and_then(|h| h.peel_to_tree().ok()) else {
        return Ok(removal);
    };
    let odb = repo.odb()?;
    let size = |id| odb.read_header(id).map(|(size, _)| size as u64);
    let mut walk_error = None;
    head.walk(TreeWalkMode::PreOrder, |_, entry| {
        if entry.kind() == Some(ObjectType::Blob) {
            match size(entry.id()) {
                Ok(bytes) => {
                    removal.tracked_files += 1;
                    removal.tracked_bytes += bytes;
                }
                Err(e) => {
                    walk_error = Some(e);
                    return TreeWalkResult::Abort;
                }
            }
        }
        TreeWalkResult::Ok
    })?;
    if let Some(e) = walk_error {
        return Err(e);
    }
    let tree = repo
        .workdir()
        .ok_or_else(|| git2::Error::from_str("the repository has no working tree"))?
        .to_owned();
    let mut options = DiffOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_typechange(true);
    let mut diff = repo.diff_tree_to_workdir_with_index(Some(&head), Some(&mut options))?;
    diff.find_similar(Some(
        DiffFindOptions::new()
            .renames(true)
            .for_untracked(true)
            .renames_from_rewrites(false),
    ))?;
    let (mut added, mut deleted) = (0usize, 0usize);
    for (index, delta) in diff.deltas().enumerate() {
        match delta.status() {
            Delta::Deleted => {
                deleted += 1;
                removal.deleted_files += 1;
                removal.removed_bytes += size(delta.old_file().id())?;
            }
            Delta::Modified | Delta::Typechange => {
                let old = size(delta.old_file().id())?;
                let new = delta
                    .new_file()
                    .path()
                    .map_or(0, |p| on_disk(&tree.join(p)));
                if new == 0 && old > 0 {
                    removal.emptied_files += 1;
                    removal.removed_bytes += old;
                } else if old > 0 && removed_lines(&diff, index, old)? * 2 > old {
                    // Rewritten: what it held is gone, whatever its size;
                    // a file counts as one only past a few lines (a fix
                    // of a one-line file rewrites it).
                    if old > MIN_REWRITTEN_FILE_BYTES {
                        removal.rewritten_files += 1;
                    }
                    removal.removed_bytes += old;
                } else {
                    removal.removed_bytes += old.saturating_sub(new);
                }
            }
            Delta::Added | Delta::Untracked | Delta::Copied => added += 1,
            _ => {}
        }
    }
    removal.files_after = (removal.tracked_files + added).saturating_sub(deleted);
    Ok(removal)
}

/// The bytes of the lines the `index`th change of `diff` removes from a
/// file of `old` bytes; all of them when it is binary (no lines to
/// compare). The gate bounded the changed files' sizes before this reads
/// them.
fn removed_lines(diff: &git2::Diff<'_>, index: usize, old: u64) -> Result<u64, git2::Error> {
    let Some(patch) = git2::Patch::from_diff(diff, index)? else {
        return Ok(old);
    };
    if patch.delta().flags().is_binary() {
        return Ok(old);
    }
    let mut removed = 0u64;
    for hunk in 0..patch.num_hunks() {
        for line in 0..patch.num_lines_in_hunk(hunk)? {
            let line = patch.line_in_hunk(hunk, line)?;
            if line.origin() == '-' {
                removed += line.content().len() as u64;
            }
        }
    }
    Ok(removed)
}

/// A file's size as it is, a link's length; nothing for what is gone.
fn on_disk(path: &Path) -> u64 {
    std::fs::symlink_metadata(path).map_or(0, |m| m.size())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let mut index = repo.index().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
            .unwrap();
        drop(tree);
        (dir, repo)
    }

    const FILES: [(&str, &str); 4] = [
        ("README.md", "# calc\n\nAdds numbers.\n"),
        ("calc.py", "def add(a, b):\n    return a - b\n"),
        (
            "test_calc.py",
            "from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n",
        ),
        (".github/workflows/ci.yml", "on: push\n"),
    ];

    #[test]
    fn an_ordinary_fix_removes_nothing() {
        let (dir, repo) = repo(&FILES);
        std::fs::write(
            dir.path().join("calc.py"),
            "def add(a, b):\n    return a + b\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("NEWS.md"), "fixed\n").unwrap();
        let removal = measure(&repo).unwrap();
        assert_eq!(removal.tracked_files, 4);
        assert_eq!((removal.deleted_files, removal.emptied_files), (0, 0));
        assert_eq!(removal.files_after, 5);
        assert!(!removal.is_destructive(0.5));
    }

    /// Issue 24: the empty working copy's commit removed every file.
    #[test]
    fn a_tree_left_empty_is_destructive_whatever_the_share() {
        let (dir, repo) = repo(&FILES);
        for (path, _) in FILES {
            std::fs::remove_file(dir.path().join(path)).unwrap();
        }
        let removal = measure(&repo).unwrap();
        assert_eq!(removal.deleted_files, 4);
        assert_eq!(removal.files_after, 0);
        assert!(removal.is_destructive(1.0));
        assert!(
            removal.to_string().ends_with("no file is left"),
            "{removal}"
        );
    }

    #[test]
    fn most_files_deleted_or_emptied_is_destructive() {
        let (dir, repo) = repo(&FILES);
        std::fs::remove_file(dir.path().join("README.md")).unwrap();
        std::fs::remove_file(dir.path().join("test_calc.py")).unwrap();
        std::fs::write(dir.path().join("calc.py"), "").unwrap();
        std::fs::write(dir.path().join("calc2.py"), "x = 1\n").unwrap();
        let removal = measure(&repo).unwrap();
        assert_eq!((removal.deleted_files, removal.emptied_files), (2, 1));
        assert!(removal.is_destructive(0.5));
        assert!(!removal.is_destructive(0.95));
        assert_eq!(
            removal.to_string(),
            "the change deletes 2, empties 1 and rewrites 0 of the 4 tracked files (75%) and removes 118 of their 127 bytes (93%)"
        );
    }

    #[test]
    fn the_bytes_count_too_and_renames_remove_nothing() {
        let big = "line of the library\n".repeat(300);
        let (dir, repo) = repo(&[
            ("lib.py", &big),
            ("a.py", "a\n"),
            ("b.py", "b\n"),
            ("c.py", "c\n"),
        ]);
        // One file of four, but nearly all the bytes.
        std::fs::write(dir.path().join("lib.py"), "pass\n").unwrap();
        let removal = measure(&repo).unwrap();
        assert_eq!(removal.file_share(), 0.25, "lib.py is rewritten");
        assert!(removal.byte_share() > 0.9);
        assert!(removal.is_destructive(0.5));
        std::fs::write(dir.path().join("lib.py"), &big).unwrap();
        // Every file moved: nothing removed.
        std::fs::create_dir(dir.path().join("src")).unwrap();
        for name in ["lib.py", "a.py", "b.py", "c.py"] {
            std::fs::rename(dir.path().join(name), dir.path().join("src").join(name)).unwrap();
        }
        let removal = measure(&repo).unwrap();
        assert_eq!(removal.deleted_files, 0, "{removal:?}");
        assert!(!removal.is_destructive(0.5), "{removal}");
    }

    /// Red-team round 1 (issue 25): every file overwritten with as many
    /// bytes of junk removed nothing by size (larger files: the test
    /// below).
    #[test]
    fn files_overwritten_with_junk_of_the_same_size_are_removed() {
        let (dir, repo) = repo(&FILES);
        for (path, text) in FILES {
            std::fs::write(dir.path().join(path), "#".repeat(text.len())).unwrap();
        }
        let removal = measure(&repo).unwrap();
        // Four small files: each rewritten, none past the size a file
        // counts at; their bytes, all of them, under the floor.
        assert_eq!(removal.removed_bytes, removal.tracked_bytes, "{removal}");
        assert_eq!(removal.rewritten_files, 0, "{removal}");
        // A fix of one line removes that line only.
        let (_dir, repo) = repo_of_fix();
        assert!(!measure(&repo).unwrap().is_destructive(0.5));
    }

    fn repo_of_fix() -> (tempfile::TempDir, Repository) {
        let (dir, repo) = repo(&FILES);
        std::fs::write(
            dir.path().join("calc.py"),
            "def add(a, b):\n    return a + b\n",
        )
        .unwrap();
        (dir, repo)
    }

    /// Red-team round 2 (issue 25): 21 of 50 files overwritten held 89%
    /// of the bytes, and every file's lines reversed passed.
    #[test]
    fn rewritten_bytes_count_and_so_do_reversed_lines() {
        let line = |i: usize| format!("value_{i} = compute({i}, {i})\n");
        let big: String = (0..200).map(line).collect();
        let mut files: Vec<(String, String)> = (0..21)
            .map(|i| (format!("src/m{i}.py"), big.clone()))
            .collect();
        files.extend((0..29).map(|i| (format!("small{i}.txt"), "x\n".to_owned())));
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let (dir, git) = repo(&refs);
        for i in 0..21 {
            std::fs::write(
                dir.path().join(format!("src/m{i}.py")),
                "#".repeat(big.len()),
            )
            .unwrap();
        }
        let removal = measure(&git).unwrap();
        assert!(removal.byte_share() > 0.9, "{removal}");
        assert!(removal.is_destructive(0.5), "{removal}");
        let (dir, git) = repo(&refs);
        for i in 0..21 {
            let reversed: String = big.lines().rev().map(|l| format!("{l}\n")).collect();
            std::fs::write(dir.path().join(format!("src/m{i}.py")), reversed).unwrap();
        }
        let removal = measure(&git).unwrap();
        assert!(removal.is_destructive(0.5), "{removal}");
    }
}
