//! The mirror cache: one bare mirror per repository on the host, fetched
//! incrementally, from which each job gets a fresh working copy quickly
//! (fetched from the mirror's path: no network; how that compares with a
//! fresh clone is for the benchmark to measure) on its own branch, with
//! its git directory kept outside the tree the sandbox sees.
//! Jobs on the same repository take turns on its mirror through a file
//! lock, so concurrent fetches cannot corrupt it. The fetch is retried
//! within the attempt when a passing fault ends it (see [`super::retry`]).

use forgehand_types::JobId;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::retry::{self, GitCall};
use super::transport::{self, Credentials, TransportError};
use crate::api::RetryPolicy;

/// Where the mirrors live: `<root>/<forge>/<owner>/<name>.git`.
#[derive(Debug, Clone)]
pub struct MirrorCache {
    root: PathBuf,
    retry: RetryPolicy,
}

/// A repository's mirror, held exclusively while this lives.
pub struct Mirror {
    pub path: PathBuf,
    pub repo: git2::Repository,
    _lock: Option<File>,
}

impl MirrorCache {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        MirrorCache {
            root: root.into(),
            retry: RetryPolicy::default(),
        }
    }

    /// The same cache, its fetches retried by `policy` instead of the
    /// default one.
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The up-to-date mirror of `url`: cloned the first time, fetched
    /// after. `key` names it in the cache (`github/owner/name`); it must
    /// be plain path segments.
    pub fn update(
        &self,
        key: &str,
        url: &str,
        credentials: &Credentials,
    ) -> Result<Mirror, TransportError> {
        let mirror = self.open(key)?;
        retry::retried(&self.retry, GitCall::Fetch, url, || {
            transport::fetch(&mirror.repo, url, &MIRROR_REFSPECS, credentials)
        })?;
        Ok(mirror)
    }

    /// Keeps the commit `local_ref` of the repository at `git_dir` (a
    /// job's, on this host) in the mirror of `key`, at `reference`
    /// (`refs/forgehand/held/<job>`): outside what the mirror fetches, so
    /// later fetches leave it, and no pull request or CI sees it.
    pub fn keep(
        &self,
        key: &str,
        git_dir: &Path,
        local_ref: &str,
        reference: &str,
    ) -> Result<(), TransportError> {
        if !reference.starts_with(HELD_PREFIX) {
            return Err(TransportError::Git(git2::Error::from_str(&format!(
                "{reference} is not under {HELD_PREFIX}"
            ))));
        }
        let mirror = self.open(key)?;
        let mut remote = mirror.repo.remote_anonymous(&git_dir.to_string_lossy())?;
        remote.fetch(&[format!("+{local_ref}:{reference}")], None, None)?;
        Ok(())
    }

    /// The mirror of `key`, locked, made empty the first time.
    fn open(&self, key: &str) -> Result<Mirror, TransportError> {
        transport::isolate_from_host_config();
        let valid = !key.is_empty()
            && key.split('/').all(|part| {
                !part.is_empty() && part != "." && part != ".." && !part.starts_with('.')
            });
        if !valid {
            return Err(TransportError::Git(git2::Error::from_str(&format!(
                "{key:?} is not a repository key like github/owner/name"
            ))));
        }
        let path = self.root.join(format!("{key}.git"));
        let parent = path.parent().expect("a key has a parent");
        std::fs::create_dir_all(parent).map_err(io_error)?;
        let lock = lock(&parent.join(format!(
            ".{}.lock",
            path.file_name().unwrap().to_string_lossy()
        )))?;
        let repo = if path.join("HEAD").exists() {
            let repo = git2::Repository::open_bare(&path)?;
            // Held under the lock: a lock file of git's own here is what a
            // process killed in the middle of a fetch left behind.
            remove_stale_lock_files(&path).map_err(io_error)?;
            repo
        } else {
            // A mirror whose making was interrupted before its `HEAD` was
            // written: start over. (Interrupted later, it is fetched into.)
            let _ = std::fs::remove_dir_all(&path);
            git2::Repository::init_bare(&path)?
        };
        Ok(Mirror {
            path,
            repo,
            _lock: Some(lock),
        })
    }
}

const MIRROR_REFSPECS: [&str; 2] = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];

/// Where held commits are kept in a mirror, one ref per job.
pub const HELD_PREFIX: &str = "refs/forgehand/held/";

/// The ref a job's held commit is kept at.
pub fn held_ref(job: JobId) -> String {
    format!("{HELD_PREFIX}{job}")
}

impl Mirror {
    /// A local repository standing in for a mirror (`forgehand run`):
    /// working copies are made from it the same way; it is only read.
    pub fn local(path: &Path) -> Result<Mirror, git2::Error> {
        transport::isolate_from_host_config();
        let repo = git2::Repository::open(path)?;
        Ok(Mirror {
            path: repo.path().to_owned(),
            repo,
            _lock: None,
        })
    }

    /// A fresh working copy of `base` on a new local branch `branch`:
    /// the files at `work_dir` (what the sandbox sees), the git directory
    /// at `git_dir`, outside it (what only the host sees). The work tree
    /// holds no `.git` at all, so nothing the agent writes there is ever
    /// read by the host's git as configuration, hooks or objects. Fetched
    /// from the mirror's path: no network is involved.
    pub fn working_copy(
        &self,
        work_dir: &Path,
        git_dir: &Path,
        base: &str,
        branch: &str,
    ) -> Result<git2::Repository, git2::Error> {
        self.copy(CopyStrategy::default(), work_dir, git_dir, base, branch)
    }

    /// [`Mirror::working_copy`] with a chosen way of getting the objects
    /// (for the benchmark that chose the default).
    pub fn working_copy_with(
        &self,
        strategy: CopyStrategy,
        work_dir: &Path,
        git_dir: &Path,
        base: &str,
        branch: &str,
    ) -> Result<git2::Repository, git2::Error> {
        self.copy(strategy, work_dir, git_dir, base, branch)
    }

    /// A fresh working copy of the bot's existing `branch` (a follow-up on
    /// its pull request), and where the branch stands in the mirror: the
    /// push that follows must find it there on the server (the lease).
    pub fn follow_up_copy(
        &self,
        work_dir: &Path,
        git_dir: &Path,
        branch: &str,
    ) -> Result<(git2::Repository, git2::Oid), git2::Error> {
        let tip = self
            .repo
            .find_reference(&format!("refs/heads/{branch}"))
            .map_err(|e| {
                git2::Error::from_str(&format!(
                    "the pull request's branch {branch} is not in the mirror: {}",
                    e.message()
                ))
            })?
            .target()
            .ok_or_else(|| git2::Error::from_str("the branch is a symbolic reference"))?;
        Ok((
            self.copy(CopyStrategy::default(), work_dir, git_dir, branch, branch)?,
            tip,
        ))
    }

    /// A working copy over a shared checkout of `commit` whose git index
    /// is `index`: the files at `work_dir` are already there (an overlay
    /// the caller mounted over the checkout), so nothing is checked out.
    /// The git directory at `git_dir` gets the mirror's objects, `branch`
    /// at `commit`, and a copy of the index, so that git finds the
    /// unchanged files unchanged without reading them.
    pub fn layered_copy(
        &self,
        commit: git2::Oid,
        index: &Path,
        work_dir: &Path,
        git_dir: &Path,
        branch: &str,
    ) -> Result<git2::Repository, git2::Error> {
        let repo = init_apart(work_dir, git_dir, Some(branch))?;
        link_objects(&self.path.join("objects"), &git_dir.join("objects"))
            .map_err(|e| git2::Error::from_str(&format!("cannot link objects: {e}")))?;
        repo.reference(
            &format!("refs/heads/{branch}"),
            commit,
            true,
            "from the shared checkout",
        )?;
        repo.set_head(&format!("refs/heads/{branch}"))?;
        std::fs::copy(index, git_dir.join("index"))
            .map_err(|e| git2::Error::from_str(&format!("cannot copy the index: {e}")))?;
        Ok(repo)
    }

    /// The commit kept at `reference` ([`MirrorCache::keep`]).
    pub fn held_commit(&self, reference: &str) -> Result<git2::Oid, git2::Error> {
        Ok(self.repo.find_reference(reference)?.peel_to_commit()?.id())
    }

    /// The commit `branch` points at in the mirror.
    pub fn branch_commit(&self, branch: &str) -> Result<git2::Oid, git2::Error> {
        Ok(self
            .repo
            .find_reference(&format!("refs/heads/{branch}"))?
            .peel_to_commit()?
            .id())
    }

    fn copy(
        &self,
        strategy: CopyStrategy,
        work_dir: &Path,
        git_dir: &Path,
        from: &str,
        branch: &str,
    ) -> Result<git2::Repository, git2::Error> {
        let repo = init_apart(work_dir, git_dir, Some(branch))?;
        match strategy {
            CopyStrategy::HardLinks => {
                let tip = self
                    .repo
                    .find_reference(&format!("refs/heads/{from}"))?
                    .peel_to_commit()?
                    .id();
                link_objects(&self.path.join("objects"), &git_dir.join("objects"))
                    .map_err(|e| git2::Error::from_str(&format!("cannot link objects: {e}")))?;
                repo.reference(
                    &format!("refs/heads/{branch}"),
                    tip,
                    true,
                    "from the mirror",
                )?;
            }
            CopyStrategy::LocalFetch => {
                let mut remote = repo.remote_anonymous(&self.path.to_string_lossy())?;
                remote.fetch(
                    &[format!("+refs/heads/{from}:refs/heads/{branch}")],
                    None,
                    None,
                )?;
            }
        }
        repo.set_head(&format!("refs/heads/{branch}"))?;
        repo.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))?;
        Ok(repo)
    }
}

/// How a working copy gets its objects from the mirror. `bench/workcopy.sh`
/// measured both (bench/README.md): hard links win by far, because the
/// objects are not read at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CopyStrategy {
    /// Hard-link the mirror's pack and loose object files (copied when
    /// the job directory is on another file system). Safe to share: git
    /// never changes an object file in place, it only adds and deletes
    /// whole files; and the job's git directory is the host's alone.
    #[default]
    HardLinks,
    /// A local fetch from the mirror's path: libgit2 reads the objects
    /// the branch needs and writes a new pack.
    LocalFetch,
}

/// A git directory at `git_dir` for the work tree `work_dir`, kept apart:
/// libgit2 leaves a `.git` file in the work tree pointing at the git
/// directory; the host opens the git directory itself (its
/// `core.worktree` names the tree), so the tree keeps no pointer.
pub(super) fn init_apart(
    work_dir: &Path,
    git_dir: &Path,
    initial_head: Option<&str>,
) -> Result<git2::Repository, git2::Error> {
    // libgit2 resolves a relative work tree against the git directory,
    // not the process's working directory: the files would land inside
    // the git directory and the tree meant for them stay empty.
    let work_dir = &std::path::absolute(work_dir)
        .map_err(|e| git2::Error::from_str(&format!("{}: {e}", work_dir.display())))?;
    let mut options = git2::RepositoryInitOptions::new();
    options
        .workdir_path(work_dir)
        .no_dotgit_dir(true)
        .mkpath(true);
    if let Some(branch) = initial_head {
        options.initial_head(branch);
    }
    let repo = git2::Repository::init_opts(git_dir, &options)?;
    let gitlink = work_dir.join(".git");
    if gitlink.is_file() {
        std::fs::remove_file(&gitlink).map_err(|e| git2::Error::from_str(&e.to_string()))?;
    }
    Ok(repo)
}

/// Links (or copies) every object file under `from` into `to`, except
/// `info/` (alternates and such are not the job's business).
fn link_objects(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "info" {
            continue;
        }
        let (source, target) = (entry.path(), to.join(&name));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            std::fs::create_dir_all(&target)?;
            link_objects(&source, &target)?;
        } else if kind.is_file()
            && !target.exists()
            && std::fs::hard_link(&source, &target).is_err()
        {
            std::fs::copy(&source, &target)?;
        }
    }
    Ok(())
}

fn lock(path: &Path) -> Result<File, TransportError> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io_error)?;
    // SAFETY: flock on a descriptor we own; released when the file closes.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    if rc != 0 {
        return Err(io_error(std::io::Error::last_os_error()));
    }
    Ok(file)
}

/// Removes the `*.lock` files git leaves in `refs/`, the git directory
/// itself (`packed-refs.lock`, `HEAD.lock`, `FETCH_HEAD.lock`,
/// `config.lock`) when it dies in the middle of an update;
/// the next fetch would otherwise fail on them for ever ("failed to lock
/// file"). Only with the mirror's lock held: no one else is writing.
fn remove_stale_lock_files(mirror: &Path) -> std::io::Result<()> {
    fn walk(dir: &Path, depth: u32) -> std::io::Result<()> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() && depth > 0 {
                walk(&entry.path(), depth - 1)?;
            } else if kind.is_file() && entry.file_name().to_string_lossy().ends_with(".lock") {
                tracing::warn!(file = %entry.path().display(), "removing a lock file a killed fetch left in the mirror");
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }
    walk(mirror, 0)?;
    // Branch names nest (`forgehand/12-x`): refs go as deep as they may.
    walk(&mirror.join("refs"), 64)
}

fn io_error(error: std::io::Error) -> TransportError {
    TransportError::Git(git2::Error::from_str(&error.to_string()))
}

/// The branch name for a job: `forgehand/<number>-<slug>`, the slug from
/// the issue title (lowercase ASCII words joined by `-`, at most 40
/// characters). `pattern` may reorder: `{number}` and `{slug}`.
pub fn branch_name(pattern: &str, number: u64, title: &str) -> String {
    let mut slug = String::new();
    for word in title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_ascii_lowercase();
        if slug.len() + word.len() + 1 > 40 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word);
    }
    if slug.is_empty() {
        slug.push_str("work");
    }
    pattern
        .replace("{number}", &number.to_string())
        .replace("{slug}", &slug)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_are_safe_and_short() {
        let p = "forgehand/{number}-{slug}";
        assert_eq!(
            branch_name(p, 42, "Fix the parser's crash on `..`!"),
            "forgehand/42-fix-the-parser-s-crash-on"
        );
        assert_eq!(branch_name(p, 7, "日本語"), "forgehand/7-work");
        assert_eq!(
            branch_name(p, 1, "a very long title that goes on and on and on and on"),
            "forgehand/1-a-very-long-title-that-goes-on-and-on"
        );
        assert!(git2::Reference::is_valid_name(&format!(
            "refs/heads/{}",
            branch_name(p, 9, "../../etc/passwd ~^:?*[")
        )));
    }
}
