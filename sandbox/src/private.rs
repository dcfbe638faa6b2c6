//! Directories and files only Forgehand's own user can read: working
//! copies, mirrors and transcripts hold a repository's private code and
//! what the agent did with it. They are created with their final modes
//! (0700 directories, 0600 files) rather than chmod-ed afterwards, so no
//! other user on the host can open them in between.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;

/// `path` (and any missing parent) as a directory only the owner can
/// enter. One that already exists with wider modes (made by an older
/// version, say) is narrowed when it is this user's own and not a shared
/// directory like `/tmp`; otherwise it is left alone with a warning.
pub fn dir(path: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(path)?;
    let meta = std::fs::metadata(path)?;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let own = meta.uid() == unsafe { libc::geteuid() };
    let shared = mode & 0o002 != 0 || mode & 0o1000 != 0;
    if own && !shared {
        std::fs::set_permissions(path, Permissions::from_mode(DIR_MODE))?;
        tracing::info!(path = %path.display(), from = format!("{mode:o}"), "narrowed the directory to mode 700: it holds private code");
    } else {
        tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "other users can enter this directory; make it Forgehand's own with mode 700");
    }
    Ok(())
}

/// A new directory only the owner can enter; its parent is made with
/// [`dir`]. Fails when `path` already exists, so the mode is the one it
/// was created with.
pub fn new_dir(path: &Path) -> io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        dir(parent)?;
    }
    DirBuilder::new().mode(DIR_MODE).create(path)
}

/// `path` opened for appending, created 0600 when missing.
pub fn append_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn directories_and_files_are_made_for_the_owner_alone() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("a/b/c");
        dir(&deep).unwrap();
        for p in ["a", "a/b", "a/b/c"] {
            assert_eq!(mode(&root.path().join(p)), 0o700, "{p}");
        }
        let job = deep.join("job-1");
        new_dir(&job).unwrap();
        assert_eq!(mode(&job), 0o700);
        assert!(
            new_dir(&job).is_err(),
            "an existing directory is not reused"
        );
        let file = job.join("t.jsonl");
        drop(append_file(&file).unwrap());
        assert_eq!(mode(&file), 0o600);
    }

    #[test]
    fn an_own_wide_directory_is_narrowed_and_a_shared_one_left_alone() {
        let root = tempfile::tempdir().unwrap();
        let wide = root.path().join("wide");
        std::fs::create_dir(&wide).unwrap();
        std::fs::set_permissions(&wide, Permissions::from_mode(0o755)).unwrap();
        dir(&wide).unwrap();
        assert_eq!(mode(&wide), 0o700);
        let shared = root.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, Permissions::from_mode(0o1777)).unwrap();
        dir(&shared).unwrap();
        assert_eq!(
            mode(&shared),
            0o1777,
            "a sticky shared directory is not ours to narrow"
        );
    }
}
