//! The job's working copy: its writable layer over the environment's over
//! the base commit's shared checkout, in a job directory removed (its
//! file systems unmounted) on every way out, its git directory beside the
//! tree (never in what the sandbox sees), what git must leave out, and the
//! integrity snapshot the gate compares the agent's tree with.

use std::path::{Path, PathBuf};

use forgehand_environment::cache::InUse;
use forgehand_forge::git::{Checkout, Mirror};
use forgehand_gate as gate;

use super::failure::{self, Failure};
use super::Core;
use crate::environment::{write_exclusions, Layered};
use crate::jobdir::JobDir;

/// A job's working copy. Its fields are private and drop in the order
/// they are declared: the layers are unmounted before the job directory
/// beneath them is removed, once each (a caller destructuring it could
/// reverse that, and did: a warning on every job).
pub struct JobCopy {
    layered: Layered,
    dir: JobDir,
    before: gate::Snapshot,
}

impl JobCopy {
    /// The tree the agent works in (the overlay's mount point).
    pub fn tree(&self) -> &Path {
        self.layered.tree()
    }

    /// The working copy's git directory, outside its tree.
    pub fn git_dir(&self) -> PathBuf {
        self.dir.git_dir()
    }

    /// The working copy as a repository (its work tree is the overlay).
    pub fn repo(&self) -> Result<git2::Repository, git2::Error> {
        git2::Repository::open(self.dir.git_dir())
    }

    pub fn layered(&self) -> &Layered {
        &self.layered
    }

    /// The tree before the agent ran, as the gate recorded it.
    pub fn before(&self) -> &gate::Snapshot {
        &self.before
    }

    /// Where the host's test runs make their layers.
    pub fn scratch(&self) -> PathBuf {
        self.dir.layers().join("tests")
    }

    /// The commit the working copy starts from.
    pub fn commit(&self) -> git2::Oid {
        self.layered.commit()
    }
}

impl Core<'_> {
    /// The job's working copy, named `name` under `git.work_dir`: the
    /// layers over `checkout` and `env`, a git directory whose history is
    /// `repository`'s (a mirror, or the user's own repository for `run`)
    /// on `branch`, and the snapshot.
    pub async fn working_copy(
        &self,
        name: &str,
        checkout: Checkout,
        env: Option<InUse>,
        repository: &Path,
        branch: &str,
    ) -> Result<JobCopy, Failure> {
        let dir = JobDir::create(
            &self.git.work_dir.join(name),
            self.sandbox.disk_mib,
            self.git.keep_job_dirs,
        )
        .map_err(Failure::infra)?;
        let layered = Layered::mount(self.backend, &dir, checkout, env, &self.sandbox.rootfs)
            .await
            .map_err(Failure::infra)?;
        let limits = self.git.tree_limits(self.sandbox.disk_mib);
        let (tree, git_dir) = (layered.tree().to_owned(), dir.git_dir());
        let (repository, branch) = (repository.to_owned(), branch.to_owned());
        let exclusions = layered.exclusions();
        let (commit, index) = (layered.commit(), layered.index().to_owned());
        // The snapshot reads the whole tree: not on the runtime's threads.
        let before = tokio::task::spawn_blocking(move || {
            let mirror = Mirror::local(&repository).map_err(Failure::infra)?;
            let copy = mirror
                .layered_copy(commit, &index, &tree, &git_dir, &branch)
                .map_err(Failure::infra)?;
            mismatch(&copy, &tree)?;
            write_exclusions(&git_dir, &exclusions).map_err(Failure::infra)?;
            gate::before(&copy, limits).map_err(failure::snapshot)
        })
        .await
        .map_err(Failure::infra)??;
        Ok(JobCopy {
            layered,
            dir,
            before,
        })
    }
}

/// The working copy must hold the commit's files before the agent sees
/// it: an empty tree becomes a commit deleting every file.
fn mismatch(copy: &git2::Repository, tree: &Path) -> Result<(), Failure> {
    let differs = forgehand_forge::git::working_copy_differs(copy, tree).map_err(Failure::infra)?;
    if differs.is_empty() {
        return Ok(());
    }
    Err(Failure::infra(format!(
        "the working copy at {} does not hold the base commit's files: {differs}",
        tree.display()
    )))
}
