//! A size-limited directory for a job's working copy: a file system of
//! its own (ext4 in a sparse image file, loop-mounted `nosuid,nodev`), so
//! that what a sandbox writes to `/workspace` stops at its size with
//! ENOSPC instead of filling the host's disk. The image costs only what
//! is written into it. The host makes it before it checks the working
//! copy out into it, and unmounts it and deletes the image when the job
//! is done. Mounting needs root, as the namespace backend does.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::SandboxError;

/// A mounted size-limited directory; unmounted (and its image deleted)
/// when dropped.
#[derive(Debug)]
pub struct SizedDir {
    path: PathBuf,
    image: PathBuf,
    mounted: bool,
}

impl SizedDir {
    /// Makes `path` (a directory that does not exist yet, or is empty)
    /// the root of a new file system of `mib` MiB backed by `image`
    /// (which must not exist; it is created sparse). `path` ends up
    /// owned by root with mode 0755.
    pub fn create(path: &Path, image: &Path, mib: u64) -> Result<SizedDir, SandboxError> {
        let problem = |problem: String| SandboxError::Workspace {
            path: path.to_owned(),
            problem,
        };
        std::fs::create_dir_all(path).map_err(|e| problem(format!("cannot create it: {e}")))?;
        if std::fs::read_dir(path)
            .map_err(|e| problem(e.to_string()))?
            .next()
            .is_some()
        {
            return Err(problem(
                "not empty: a size-limited file system is made on an empty directory".into(),
            ));
        }
        let file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(image)
            .map_err(|e| problem(format!("cannot create the image {}: {e}", image.display())))?;
        file.set_len(mib << 20)
            .map_err(|e| problem(format!("cannot size the image: {e}")))?;
        drop(file);
        let mut dir = SizedDir {
            path: path.to_owned(),
            image: image.to_owned(),
            mounted: false,
        };
        // No journal (the image is thrown away after the job), no blocks
        // reserved for root, inode tables initialised lazily: an 8 GiB
        // file system is made in a fraction of a second.
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-O", "^has_journal", "-m", "0", "-E"])
            .arg("lazy_itable_init=1,lazy_journal_init=1,nodiscard")
            .arg(image))
        .map_err(|e| problem(format!("mkfs.ext4 failed ({e}); it comes with e2fsprogs")))?;
        run(Command::new("mount")
            .args(["-o", "loop,nosuid,nodev,noatime"])
            .arg(image)
            .arg(path))
        .map_err(|e| {
            problem(format!(
                "mounting it failed ({e}): the size limit needs root and loop devices \
                 (set sandbox.disk_mib = 0 to run without one)"
            ))
        })?;
        dir.mounted = true;
        let _ = std::fs::remove_dir(path.join("lost+found"));
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unmounts and deletes the image now (also done on drop).
    pub fn release(mut self) {
        self.release_now();
    }

    fn release_now(&mut self) {
        if self.mounted {
            unmount(&self.path);
            self.mounted = false;
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

impl Drop for SizedDir {
    fn drop(&mut self) {
        self.release_now();
    }
}

fn run(command: &mut Command) -> Result<(), String> {
    let out = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// Detaches the mount at `path`; the loop device goes with the last user.
fn unmount(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a plain system call on a NUL-terminated path.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) == 0 }
}

/// Unmounts every mount at or beneath `dir` (deepest first), such as the
/// size-limited working copies a crashed process left; returns how many.
/// A directory is never removed recursively while one is mounted in it.
pub fn unmount_beneath(dir: &Path) -> usize {
    let Ok(dir) = std::path::absolute(dir) else {
        return 0;
    };
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape(p)))
        .filter(|p| p.starts_with(&dir))
        .collect();
    // The latest mounted first (an overlay before the file system its
    // layers are on), then the deepest first (a stable sort keeps that).
    points.reverse();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.iter().filter(|p| unmount(p)).count()
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            if let Some(v) = field
                .get(i + 1..i + 4)
                .and_then(|octal| u8::from_str_radix(octal, 8).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape(r"/jobs/a\040b"), "/jobs/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape(r"/x\134y"), r"/x\y");
    }
}
