//! A job's directory on the host: its writable layers (on a file system
//! of `sandbox.disk_mib` when that is set: what the agent may write stops
//! there), the mount points of its working copy (what the sandbox sees at
//! `/workspace`: the job's layer over the shared checkout and the
//! environment), of its home and of its root, and its git directory
//! beside them (what only the host sees). Readable by Forgehand's user
//! only. Removed on every path out of the job, every file system in it
//! unmounted first, when the guard is dropped; kept instead (and its path
//! logged) when the operator asks for it (`git.keep_job_dirs`), for
//! debugging.

use std::path::{Path, PathBuf};

use forgehand_sandbox::disk::{self, SizedDir};

pub struct JobDir {
    dir: PathBuf,
    sized: Option<SizedDir>,
    keep: bool,
}

impl JobDir {
    /// Makes `dir` afresh (what an earlier attempt left there is removed)
    /// with its writable layers on a file system of `disk_mib` MiB (0: no
    /// limit); `keep` leaves it in place when dropped.
    pub fn create(dir: &Path, disk_mib: u64, keep: bool) -> anyhow::Result<JobDir> {
        let dir = std::path::absolute(dir)?;
        remove(&dir);
        crate::private::new_dir(&dir)?;
        let mut job = JobDir {
            dir,
            sized: None,
            keep,
        };
        if disk_mib > 0 {
            job.sized = Some(SizedDir::create(
                &job.layers(),
                &job.dir.join("layers.img"),
                disk_mib,
            )?);
        } else {
            std::fs::create_dir(job.layers())?;
        }
        for mount_point in [job.tree(), job.home(), job.rootfs()] {
            std::fs::create_dir(mount_point)?;
        }
        Ok(job)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The working copy's files: the merged view the sandbox sees.
    pub fn tree(&self) -> PathBuf {
        self.dir.join("tree")
    }

    /// Where the job's writable layers are (the working copy's and the
    /// home's), and overlayfs's scratch beside each.
    pub fn layers(&self) -> PathBuf {
        self.dir.join("layers")
    }

    /// The home's mount point, when the job has an environment.
    pub fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    /// The sandbox's root's mount point, when the environment adds
    /// packages to the guest image.
    pub fn rootfs(&self) -> PathBuf {
        self.dir.join("rootfs")
    }

    /// The working copy's git directory, outside the tree.
    pub fn git_dir(&self) -> PathBuf {
        self.dir.join("tree.git")
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        if self.keep {
            tracing::info!(path = %self.dir.display(), "job directory kept (git.keep_job_dirs)");
            return;
        }
        // Overlays over the layers first, then the layers' file system.
        disk::unmount_beneath(&self.dir);
        if let Some(sized) = self.sized.take() {
            sized.release();
        }
        remove(&self.dir);
    }
}

/// Removes a job directory, never descending into a file system still
/// mounted in it.
fn remove(dir: &Path) {
    disk::unmount_beneath(dir);
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_directory_goes_with_its_guard_unless_kept() {
        let root = tempfile::tempdir().unwrap();
        let gone = root.path().join("gone");
        let job = JobDir::create(&gone, 0, false).unwrap();
        std::fs::write(job.tree().join("f"), "x").unwrap();
        drop(job);
        assert!(!gone.exists());
        let kept = root.path().join("kept");
        let job = JobDir::create(&kept, 0, true).unwrap();
        drop(job);
        assert!(kept.join("tree").exists());
    }
}
