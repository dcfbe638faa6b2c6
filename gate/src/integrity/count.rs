//! What the tree's files add up to as the host's diff and commit would
//! read them: every regular file's length (holes included), less the
//! files git ignores and does not track, which neither reads. An
//! environment's setup can leave a huge sparse file the host excludes
//! (`info/exclude`); it is never committed, and must not make every job
//! on the repository fail `too_large`.
//!
//! Asking git what it ignores reads the `.gitignore` files, so it is
//! asked only after the whole walk, and only when every `.gitignore` met
//! was a plain file (git would follow a link and block on a pipe).
//!
//! The bound that remains: only files of [`CHECKED_BYTES`] or more are
//! asked about, at most [`MAX_CHECKED`] of them (each question is one of
//! libgit2's ignore lookups). Ignored files below that size, and those
//! past the first [`MAX_CHECKED`], still count: to push the total past
//! its limit (10 GiB by default) through them, a setup has to leave more
//! than ten thousand ignored files in directories git walks (an ignored
//! directory is not walked at all), and it hurts only its own
//! repository's jobs.

use std::path::PathBuf;

use super::walk::{Ignores, Item, Kind};

/// Files this large or larger are looked at one by one.
pub const CHECKED_BYTES: u64 = 1 << 20;

/// At most this many are.
pub const MAX_CHECKED: usize = 10_000;

/// The running count of one walk.
pub(crate) struct TreeBytes {
    total: u64,
    checked: Vec<(PathBuf, u64)>,
    ignores_trusted: bool,
}

impl TreeBytes {
    pub(crate) fn new() -> Self {
        TreeBytes {
            total: 0,
            checked: Vec::new(),
            ignores_trusted: true,
        }
    }

    /// Counts one entry of the walk.
    pub(crate) fn add(&mut self, item: &Item<'_>) {
        if item.rel.file_name().is_some_and(|n| n == ".gitignore") && item.kind != Kind::File {
            self.ignores_trusted = false;
        }
        if item.kind != Kind::File {
            return;
        }
        let bytes = item.meta.len();
        self.total = self.total.saturating_add(bytes);
        if bytes >= CHECKED_BYTES && self.checked.len() < MAX_CHECKED {
            self.checked.push((item.rel.to_owned(), bytes));
        }
    }

    /// The total, less the files checked that `ignores` says git will
    /// never commit (none when a `.gitignore` was not a plain file).
    pub(crate) fn total(self, ignores: &dyn Ignores) -> u64 {
        if !self.ignores_trusted {
            return self.total;
        }
        let never: u64 = self
            .checked
            .iter()
            .filter(|(rel, _)| ignores.never_committed(rel))
            .map(|(_, bytes)| bytes)
            .sum();
        self.total.saturating_sub(never)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    struct IgnoresBin;

    impl Ignores for IgnoresBin {
        fn skip_dir(&self, _: &Path) -> bool {
            false
        }
        fn never_committed(&self, rel: &Path) -> bool {
            rel.extension().is_some_and(|e| e == "bin")
        }
    }

    fn walked(files: &[(&str, u64)], gitignore_is_a_link: bool) -> u64 {
        let tmp = tempfile::tempdir().unwrap();
        let mut count = TreeBytes::new();
        for (name, len) in files {
            let path = tmp.path().join(name);
            std::fs::File::create(&path).unwrap().set_len(*len).unwrap();
        }
        if gitignore_is_a_link {
            std::os::unix::fs::symlink("/dev/null", tmp.path().join(".gitignore")).unwrap();
        }
        for entry in std::fs::read_dir(tmp.path()).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            let rel = PathBuf::from(entry.file_name());
            count.add(&Item {
                rel: &rel,
                path: &entry.path(),
                meta: &meta,
                kind: super::super::walk::kind_of(&meta),
            });
        }
        count.total(&IgnoresBin)
    }

    #[test]
    fn large_files_git_never_commits_do_not_count() {
        let big = 200u64 << 30;
        assert_eq!(walked(&[("env.bin", big), ("a.txt", 10)], false), 10);
        assert_eq!(
            walked(&[("env.dat", big), ("a.txt", 10)], false),
            big + 10,
            "not ignored: counted"
        );
        // Small ignored files are not asked about: they count.
        assert_eq!(walked(&[("small.bin", 100), ("a.txt", 10)], false), 110);
        // A .gitignore that is not a plain file: git is not asked.
        assert_eq!(walked(&[("env.bin", big)], true), big);
    }
}
