//! The view a setup runs over: the environment's inputs copied out of the
//! base commit's checkout, and nothing else of it, so the setup cannot
//! read what the key does not cover.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path};

use crate::spec::MAX_INPUT_BYTES;

/// Copies each of `inputs` (paths relative to `base`, `/`-separated) from
/// `base` into `into`: a regular file with its contents and its
/// executable bit, a link as a link (its target as stored, never
/// followed). A path beneath a link of the checkout, or that is neither
/// file nor link, is not copied (the key, read from git's objects, saw
/// no such file either). Refuses a path that is absolute or climbs.
pub fn copy(base: &Path, inputs: &[String], into: &Path) -> io::Result<()> {
    for input in inputs {
        let rel = Path::new(input);
        if !rel
            .components()
            .all(|part| matches!(part, Component::Normal(_)))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{input:?} is not a path inside the repository"),
            ));
        }
        if beneath_a_link(base, rel)? {
            continue;
        }
        let from = base.join(rel);
        let Ok(meta) = std::fs::symlink_metadata(&from) else {
            continue;
        };
        let to = into.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if meta.file_type().is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
        } else if meta.is_file() {
            if meta.len() > MAX_INPUT_BYTES {
                return Err(io::Error::other(format!(
                    "{input:?} is larger than {MAX_INPUT_BYTES} bytes"
                )));
            }
            copy_file(&from, &to, meta.permissions().mode() & 0o100 != 0)?;
        }
    }
    Ok(())
}

/// Whether a directory on the way to `rel` in `base` is a link.
fn beneath_a_link(base: &Path, rel: &Path) -> io::Result<bool> {
    let mut at = base.to_owned();
    let mut parts: Vec<_> = rel.components().collect();
    parts.pop();
    for part in parts {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

/// Copies one regular file, opened without following a link (the
/// checkout is ours, but nothing here trusts a name twice).
fn copy_file(from: &Path, to: &Path, executable: bool) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut source = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(from)?;
    let mode = if executable { 0o755 } else { 0o644 };
    let mut target = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(to)?;
    io::copy(
        &mut io::Read::take(&mut source, MAX_INPUT_BYTES),
        &mut target,
    )?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_inputs_are_copied_with_their_modes_and_links() {
        let base = tempfile::tempdir().unwrap();
        let into = tempfile::tempdir().unwrap();
        let b = base.path();
        std::fs::create_dir_all(b.join("req")).unwrap();
        std::fs::write(b.join("package.json"), "{}").unwrap();
        std::fs::write(b.join("req/dev.txt"), "pytest\n").unwrap();
        std::fs::write(b.join("setup.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(b.join("setup.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::write(b.join("secret.py"), "not an input").unwrap();
        std::os::unix::fs::symlink("/etc", b.join("etc")).unwrap();
        std::os::unix::fs::symlink("package.json", b.join("p.json")).unwrap();
        let inputs: Vec<String> = [
            "package.json",
            "req/dev.txt",
            "setup.sh",
            "p.json",
            "etc/passwd",
            "absent.txt",
        ]
        .map(String::from)
        .to_vec();
        copy(b, &inputs, into.path()).unwrap();
        let i = into.path();
        assert_eq!(
            std::fs::read_to_string(i.join("req/dev.txt")).unwrap(),
            "pytest\n"
        );
        let mode = |p: &str| std::fs::metadata(i.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("setup.sh"), 0o755);
        assert_eq!(mode("package.json"), 0o644);
        assert_eq!(
            std::fs::read_link(i.join("p.json")).unwrap(),
            Path::new("package.json")
        );
        assert!(!i.join("secret.py").exists());
        assert!(!i.join("etc").exists(), "nothing beneath a link is copied");
        assert!(copy(b, &["../x".to_owned()], i).is_err());
        assert!(copy(b, &["/etc/passwd".to_owned()], i).is_err());
    }
}
