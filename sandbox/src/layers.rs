//! Overlay file systems for working copies and environments: a writable
//! layer over read-only ones, so that what a job starts from (a shared
//! checkout of the base commit, an environment's installed dependencies)
//! is read in place, never copied, and what a job changes is exactly its
//! writable layer. Mounted by the host (Forgehand runs as root), in the
//! host's mount namespace, and bound into a sandbox like any directory.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A mounted overlay, unmounted when dropped.
#[derive(Debug)]
pub struct Overlay {
    merged: PathBuf,
    mounted: bool,
}

impl Overlay {
    /// Mounts `lowers` (the topmost first) beneath the writable `upper` at
    /// `merged`. `work` is overlayfs's scratch directory, empty, on the
    /// same file system as `upper`.
    pub fn writable(
        lowers: &[&Path],
        upper: &Path,
        work: &Path,
        merged: &Path,
    ) -> io::Result<Self> {
        let mut options = format!("lowerdir={}", lower_list(lowers)?);
        options.push_str(&format!(
            ",upperdir={},workdir={}",
            option_path(upper)?,
            option_path(work)?
        ));
        Self::mount(&options, merged)
    }

    /// Mounts `lowers` (the topmost first) read-only at `merged`: at least
    /// two of them (overlayfs needs two for a mount without an upper).
    pub fn read_only(lowers: &[&Path], merged: &Path) -> io::Result<Self> {
        if lowers.len() < 2 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a read-only overlay needs two layers at least",
            ));
        }
        let options = format!("lowerdir={}", lower_list(lowers)?);
        Self::mount(&options, merged)
    }

    fn mount(options: &str, merged: &Path) -> io::Result<Self> {
        // Nothing that an untrusted layer could turn into a path outside
        // it: no redirects or metadata-only copies followed from xattrs a
        // layer carries, no index; xino off keeps inode numbers the
        // layers' own.
        let options = format!("{options},redirect_dir=off,metacopy=off,index=off,xino=off");
        let target = c_path(merged)?;
        let data = CString::new(options).map_err(|_| invalid("a NUL in the options"))?;
        // SAFETY: plain mount(2) with NUL-terminated strings we own.
        let rc = unsafe {
            libc::mount(
                c"overlay".as_ptr(),
                target.as_ptr(),
                c"overlay".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                data.as_ptr().cast(),
            )
        };
        if rc != 0 {
            let error = io::Error::last_os_error();
            return Err(io::Error::new(
                error.kind(),
                format!("mounting an overlay at {}: {error}", merged.display()),
            ));
        }
        Ok(Overlay {
            merged: merged.to_owned(),
            mounted: true,
        })
    }

    /// The merged view.
    pub fn path(&self) -> &Path {
        &self.merged
    }

    /// Unmounts now, saying whether it went.
    pub fn unmount(mut self) -> io::Result<()> {
        self.mounted = false;
        detach(&self.merged)
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        if self.mounted {
            if let Err(error) = detach(&self.merged) {
                tracing::warn!(path = %self.merged.display(), %error, "unmounting an overlay failed");
            }
        }
    }
}

/// Whether overlays can be mounted here (root, a kernel with overlayfs):
/// tried once in a scratch directory.
pub fn available() -> Result<(), String> {
    let dir = tempfile_dir().map_err(|e| format!("a scratch directory: {e}"))?;
    let result = (|| {
        let (a, b, merged) = (dir.join("a"), dir.join("b"), dir.join("m"));
        for d in [&a, &b, &merged] {
            std::fs::create_dir(d)?;
        }
        Overlay::read_only(&[&a, &b], &merged)?.unmount()
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result.map_err(|e| e.to_string())
}

fn tempfile_dir() -> io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "forgehand-overlay-probe-{}-{:x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

fn detach(path: &Path) -> io::Result<()> {
    let target = c_path(path)?;
    // SAFETY: plain umount2(2) on a NUL-terminated path.
    if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn lower_list(lowers: &[&Path]) -> io::Result<String> {
    if lowers.is_empty() {
        return Err(invalid("an overlay needs a lower layer"));
    }
    Ok(lowers
        .iter()
        .map(|p| option_path(p))
        .collect::<io::Result<Vec<_>>>()?
        .join(":"))
}

/// A path as overlayfs's options take it: absolute, and without the
/// characters that separate options and layers (Forgehand makes these
/// paths; one with them is refused rather than escaped).
fn option_path(path: &Path) -> io::Result<String> {
    let path = std::path::absolute(path)?;
    let text = path
        .to_str()
        .ok_or_else(|| invalid("a layer's path is not UTF-8"))?;
    if text.contains([':', ',', '\\', '\n']) {
        return Err(invalid(&format!(
            "a layer's path may not hold ':', ',' or '\\': {text}"
        )));
    }
    Ok(text.to_owned())
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| invalid("a NUL in a path"))
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> bool {
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() == 0 }
    }

    /// What a job writes lands in its writable layer; the lower layers
    /// are read where they are and never changed.
    #[test]
    fn writes_go_to_the_upper_layer_and_lowers_stay_as_they_were() {
        assert!(
            root(),
            "mounting overlays needs root (run the suite as root)"
        );
        let dir = tempfile::tempdir().unwrap();
        let d = |name: &str| {
            let p = dir.path().join(name);
            std::fs::create_dir(&p).unwrap();
            p
        };
        let (base, env, upper, work, merged) = (d("base"), d("env"), d("upper"), d("work"), d("m"));
        std::fs::write(base.join("a.txt"), "base a").unwrap();
        std::fs::write(base.join("gone.txt"), "base").unwrap();
        std::fs::create_dir(env.join("node_modules")).unwrap();
        std::fs::write(env.join("node_modules/x.js"), "env").unwrap();
        let overlay = Overlay::writable(&[&env, &base], &upper, &work, &merged).unwrap();
        assert_eq!(
            std::fs::read_to_string(merged.join("a.txt")).unwrap(),
            "base a"
        );
        assert_eq!(
            std::fs::read_to_string(merged.join("node_modules/x.js")).unwrap(),
            "env"
        );
        std::fs::write(merged.join("a.txt"), "changed").unwrap();
        std::fs::remove_file(merged.join("gone.txt")).unwrap();
        std::fs::write(merged.join("new.txt"), "new").unwrap();
        drop(overlay);
        assert_eq!(
            std::fs::read_to_string(base.join("a.txt")).unwrap(),
            "base a"
        );
        assert!(base.join("gone.txt").exists());
        assert_eq!(
            std::fs::read_to_string(upper.join("a.txt")).unwrap(),
            "changed"
        );
        assert!(upper.join("new.txt").exists());
        assert!(!merged.join("a.txt").exists(), "unmounted when dropped");
    }

    #[test]
    fn a_read_only_overlay_refuses_writes() {
        assert!(
            root(),
            "mounting overlays needs root (run the suite as root)"
        );
        let dir = tempfile::tempdir().unwrap();
        let (a, b, m) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("m"),
        );
        for p in [&a, &b, &m] {
            std::fs::create_dir(p).unwrap();
        }
        std::fs::write(b.join("f"), "x").unwrap();
        let overlay = Overlay::read_only(&[&a, &b], &m).unwrap();
        assert!(std::fs::write(m.join("f"), "y").is_err());
        overlay.unmount().unwrap();
        assert!(available().is_ok());
    }

    #[test]
    fn paths_that_would_split_the_options_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("a,upperdir=x");
        std::fs::create_dir(&odd).unwrap();
        let m = dir.path().join("m");
        std::fs::create_dir(&m).unwrap();
        let err = Overlay::read_only(&[&odd, dir.path()], &m).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    }
}
