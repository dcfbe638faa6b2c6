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
        forgehand_sandbox::private::new_dir(&dir)?;
        // Whose it is: a process started later removes it when this one
        // died without doing so (`sweep`).
        std::fs::write(dir.join(OWNER), forgehand_sandbox::owner::this_process())?;
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

/// The file in a job directory naming the process that made it.
const OWNER: &str = "owner";

/// Removes the job directories under `work_dir` whose process died
/// without removing them (SIGKILL, a crash), their file systems
/// unmounted first; a live process's are left alone, so `serve` and
/// `run` sharing a `work_dir` never sweep each other's. With
/// `ownerless`, also directories that name no owner (made by a release
/// before owners were written; only `serve`, which used to own them
/// all, takes those). The shared checkouts are not job directories.
/// Returns how many were removed.
pub fn sweep(work_dir: &Path, ownerless: bool) -> usize {
    let Ok(entries) = std::fs::read_dir(work_dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name() == "checkouts" || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let gone = match std::fs::read_to_string(path.join(OWNER)) {
            Ok(owner) => !forgehand_sandbox::owner::is_alive(&owner),
            Err(_) => ownerless && path.join("tree").exists(),
        };
        if gone {
            remove(&path);
            removed += 1;
        }
    }
    removed
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

    /// Issue 24, finding 9: a `run` killed by a signal left its job
    /// directory (and its mounts); only `serve` swept, and it swept
    /// every directory, a live `run`'s too.
    #[test]
    fn a_sweep_takes_what_dead_processes_left_and_nothing_of_the_living() {
        let root = tempfile::tempdir().unwrap();
        let live = JobDir::create(&root.path().join("run-live"), 0, true).unwrap();
        let dead = root.path().join("run-dead");
        drop(JobDir::create(&dead, 0, true).unwrap());
        // A pid that runs nothing, at a start time no process has.
        std::fs::write(dead.join(OWNER), "4194303 1").unwrap();
        let old = root.path().join("job-1-1");
        std::fs::create_dir_all(old.join("tree")).unwrap();
        std::fs::create_dir_all(root.path().join("checkouts/k")).unwrap();
        assert_eq!(sweep(root.path(), false), 1);
        assert!(!dead.exists() && live.path().exists() && old.exists());
        assert_eq!(sweep(root.path(), true), 1, "the ownerless one, for serve");
        assert!(!old.exists() && live.path().exists());
        assert!(root.path().join("checkouts/k").exists());
    }
}
