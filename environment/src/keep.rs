//! What a setup left, checked and then copied into the cache.
//!
//! The layers are the repository's making: before the host copies them
//! (with `cp`, which keeps owners, modes, whiteouts and xattrs), they are
//! walked once, never following a link and visiting a bounded number of
//! entries, for what the host could not copy or later walk: a path longer
//! than the host's paths hold once the cache's or a job's own directories
//! are put before it (`PATH_MAX` is 4096 bytes). That is the repository's
//! doing, said so, not a failure of Forgehand's.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use forgehand_text::one_line;

/// The longest path (from a layer's root) an environment may hold:
/// `PATH_MAX` less a kilobyte for the cache's, a build's or a job's
/// directories before it.
pub const MAX_PATH_BYTES: usize = 3072;

/// Entries one layer may hold: far more than any toolchain leaves (a
/// large `node_modules` holds some hundreds of thousands), and a bound on
/// the walk when the setup's file system is not size-limited.
pub const MAX_ENTRIES: usize = 2_000_000;

/// How much of a path is shown.
const SHOWN_CHARS: usize = 120;

/// How much of `cp`'s complaint is kept.
const MAX_STDERR: usize = 2048;

/// Why what a setup left cannot be kept: the repository's doing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unkeepable {
    #[error(
        "the setup left a path longer than the {max} bytes an environment may hold \
         (the host's paths would not reach it): {shown}"
    )]
    PathTooLong { shown: String, max: usize },
    #[error(
        "the setup left more than {max} entries in {place}, more than an environment may hold"
    )]
    TooManyEntries { place: &'static str, max: usize },
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Unkeepable(Unkeepable),
    #[error("reading {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Walks `layer` (seen at `place` in the sandbox: `/workspace`,
/// `/home/agent`) for what cannot be kept, within `max_path` bytes of path
/// and `max_entries` entries; returns how many entries it holds.
/// Iterative, never following a link, and never opening a path longer
/// than `max_path` below `layer`.
pub fn check(
    layer: &Path,
    place: &'static str,
    max_path: usize,
    max_entries: usize,
) -> Result<usize, CheckError> {
    let mut entries = 0usize;
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let dir = layer.join(&rel);
        let io = |source| CheckError::Io {
            path: dir.clone(),
            source,
        };
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            entries += 1;
            if entries > max_entries {
                return Err(CheckError::Unkeepable(Unkeepable::TooManyEntries {
                    place,
                    max: max_entries,
                }));
            }
            let rel = rel.join(entry.file_name());
            if rel.as_os_str().len() > max_path {
                return Err(CheckError::Unkeepable(Unkeepable::PathTooLong {
                    shown: shown(place, &rel),
                    max: max_path,
                }));
            }
            // The entry's own type (`d_type`, else `lstat`): a link to a
            // directory is not one.
            if entry.file_type().map_err(io)?.is_dir() {
                pending.push(rel);
            }
        }
    }
    Ok(entries)
}

/// `place/rel`, its controls escaped, its first characters only.
fn shown(place: &str, rel: &Path) -> String {
    let full = format!(
        "{place}/{}",
        String::from_utf8_lossy(rel.as_os_str().as_bytes())
    );
    let line = one_line(&full);
    match line.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}… ({} bytes)", &line[..cut], full.len()),
        None => line.into_owned(),
    }
}

/// Copies the tree at `from` to `to` as it is (`cp -a`: owners, modes,
/// links, special files, xattrs). What `cp` says when it fails is kept up
/// to [`MAX_STDERR`] bytes, its controls escaped: it quotes the tree's
/// paths, which the repository chose.
pub fn copy(from: &Path, to: &Path) -> Result<(), String> {
    let mut child = Command::new("cp")
        .args(["-a", "--no-dereference", "--"])
        .arg(from)
        .arg(to)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running cp: {e}"))?;
    let mut said = Vec::new();
    let mut more = 0u64;
    if let Some(mut stderr) = child.stderr.take() {
        // The head is kept; the rest is read and counted, not kept, so
        // that cp never blocks on a full pipe.
        let _ = (&mut stderr).take(MAX_STDERR as u64).read_to_end(&mut said);
        more = std::io::copy(&mut stderr, &mut std::io::sink()).unwrap_or(0);
    }
    let status = child.wait().map_err(|e| format!("waiting for cp: {e}"))?;
    if status.success() {
        return Ok(());
    }
    let mut message = format!("cp {status}");
    let said = String::from_utf8_lossy(&said);
    let said = said.trim();
    if !said.is_empty() {
        message.push_str(": ");
        message.push_str(&one_line(said));
    }
    if more > 0 {
        message.push_str(&format!(" […{more} more bytes]"));
    }
    Err(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deep(root: &Path, levels: usize, name: &str) -> PathBuf {
        let mut path = root.to_owned();
        for _ in 0..levels {
            path.push(name);
        }
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    #[test]
    fn a_path_past_the_bound_is_refused_shown_short_and_escaped() {
        let tmp = tempfile::tempdir().unwrap();
        deep(tmp.path(), 10, "d");
        assert!(check(tmp.path(), "/workspace", 19, 100).is_ok());
        let bottom = deep(tmp.path(), 10, "d");
        std::fs::create_dir(bottom.join("e\u{1b}]0;x\u{7}\n")).unwrap();
        match check(tmp.path(), "/workspace", 19, 100) {
            Err(CheckError::Unkeepable(Unkeepable::PathTooLong { shown, max: 19 })) => {
                assert!(
                    shown.starts_with("/workspace/d/d/d/d/d/d/d/d/d/d/e\\u{1b}]0;x\\u{7}\\n"),
                    "{shown}"
                );
            }
            other => panic!("{other:?}"),
        }
        let long = deep(tmp.path(), 200, "x");
        drop(long);
        match check(tmp.path(), "/home/agent", 300, 1000) {
            Err(CheckError::Unkeepable(Unkeepable::PathTooLong { shown, .. })) => {
                assert!(shown.ends_with("… (313 bytes)"), "{shown}");
                assert!(shown.chars().count() < 150, "{shown}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn links_are_not_followed_and_entries_are_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        // A loop through a link: never followed, so never walked twice.
        std::os::unix::fs::symlink("..", tree.join("up")).unwrap();
        std::os::unix::fs::symlink("/", tree.join("root")).unwrap();
        assert!(check(&tree, "/workspace", 64, 10).is_ok());
        for i in 0..10 {
            std::fs::write(tree.join(format!("f{i}")), "").unwrap();
        }
        assert!(matches!(
            check(&tree, "/workspace", 64, 10),
            Err(CheckError::Unkeepable(Unkeepable::TooManyEntries {
                max: 10,
                ..
            }))
        ));
    }

    #[test]
    fn what_cp_says_is_kept_bounded_and_escaped() {
        let tmp = tempfile::tempdir().unwrap();
        let from = tmp.path().join("from");
        std::fs::create_dir(&from).unwrap();
        std::fs::write(from.join("f"), "x").unwrap();
        copy(&from, &tmp.path().join("to")).unwrap();
        assert_eq!(std::fs::read(tmp.path().join("to/f")).unwrap(), b"x");
        // A source that is missing, with a name cp quotes back.
        let missing = tmp
            .path()
            .join(format!("gone\u{1b}[31m{}", "z".repeat(5000)));
        let error = copy(&missing, &tmp.path().join("to2")).unwrap_err();
        assert!(error.starts_with("cp exit status: 1: cp: "), "{error}");
        // cp quotes names itself ('gone'$'\033''[31m…'); whatever its
        // locale's style, nothing raw passes.
        assert!(error.contains("gone"), "{error}");
        assert!(!error.chars().any(char::is_control), "{error}");
        assert!(error.len() < MAX_STDERR + 200, "{}", error.len());
        assert!(error.ends_with("more bytes]"), "{error}");
    }
}
