//! The host's test run, over what the commit will hold. It runs in a
//! sandbox of its own, made after the agent's is gone: the tree the gate
//! cleared and the commit would take, laid over the environment and the
//! shared checkout, with a fresh home over the environment's. Nothing the
//! agent left outside the commit (its home, `/tmp`, processes, its copies
//! of the environment's files, what git ignores) is there, so the result
//! is evidence of the change and of nothing the model arranged.

use std::collections::BTreeSet;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use forgehand_gate::{Checks, GatePolicy, SecretScanner, Snapshot};
use forgehand_sandbox::{Backend, ExecOutput, ExecRequest};
use git2::{Delta, ObjectType, Repository, Tree};

use forgehand_agent::{HostTestError, HostTestRunner};

use super::Layered;
use forgehand_sandbox::config::SandboxConfig;

/// What the gate checks the tree with before anything of it is read.
pub struct GateInputs {
    pub before: Snapshot,
    pub scanner: SecretScanner,
    pub policy: GatePolicy,
    /// The repository's `[gate]` rules, from its base commit.
    pub rules: forgehand_gate::RepoRules,
}

/// The host's test runs over a job's layers.
pub struct HostTests<'a> {
    pub backend: &'a dyn Backend,
    pub layered: &'a Layered,
    pub sandbox: &'a SandboxConfig,
    /// The working copy's git directory (outside the tree).
    pub git_dir: PathBuf,
    /// Where each run's layers are made (on the job's disk).
    pub scratch: PathBuf,
    pub gate: Arc<GateInputs>,
    runs: AtomicU32,
}

impl<'a> HostTests<'a> {
    pub fn new(
        backend: &'a dyn Backend,
        layered: &'a Layered,
        sandbox: &'a SandboxConfig,
        git_dir: PathBuf,
        scratch: PathBuf,
        gate: GateInputs,
    ) -> Self {
        HostTests {
            backend,
            layered,
            sandbox,
            git_dir,
            scratch,
            gate: Arc::new(gate),
            runs: AtomicU32::new(0),
        }
    }
}

#[async_trait::async_trait]
impl HostTestRunner for HostTests<'_> {
    /// Runs `command` over what the commit would hold now. Call it only
    /// while no sandbox of the agent's is up: the gate reads the tree.
    async fn run(&self, command: &str, timeout: Duration) -> Result<ExecOutput, HostTestError> {
        let run = self.runs.fetch_add(1, Ordering::Relaxed);
        let dir = self.scratch.join(format!("tested-{run}"));
        let result = self.run_in(&dir, command, timeout).await;
        if let Err(error) = remove(&dir) {
            tracing::warn!(%error, dir = %dir.display(), "removing a test run's layers failed");
        }
        result
    }

    async fn changes(&self, max_chars: usize) -> Result<String, HostTestError> {
        let (git_dir, gate, base) = (
            self.git_dir.clone(),
            Arc::clone(&self.gate),
            self.layered.commit(),
        );
        tokio::task::spawn_blocking(move || diff_of_commit(&git_dir, &gate, base, max_chars))
            .await
            .map_err(|e| HostTestError::Infra(e.to_string()))?
    }
}

impl HostTests<'_> {
    async fn run_in(
        &self,
        dir: &Path,
        command: &str,
        timeout: Duration,
    ) -> Result<ExecOutput, HostTestError> {
        let commit = dir.join("commit");
        let (git_dir, gate, base) = (
            self.git_dir.clone(),
            Arc::clone(&self.gate),
            self.layered.commit(),
        );
        let into = commit.clone();
        tokio::task::spawn_blocking(move || lay_out_commit(&git_dir, &gate, base, &into))
            .await
            .map_err(|e| HostTestError::Infra(e.to_string()))??;
        let layers = self
            .layered
            .over_commit(self.backend, dir, &commit)
            .await
            .map_err(HostTestError::Infra)?;
        let sandbox = self
            .backend
            .create(layers.spec(self.sandbox))
            .await
            .map_err(|e| HostTestError::Infra(e.to_string()))?;
        let out = sandbox
            .exec(ExecRequest::new(["bash", "-c", command]).timeout(timeout))
            .await;
        if let Err(error) = sandbox.destroy().await {
            tracing::warn!(%error, "destroying the test sandbox failed");
        }
        drop(layers);
        out.map_err(|e| HostTestError::Infra(e.to_string()))
    }
}

/// The gate's check of the working tree, then what a commit of it would
/// change against `base`, as a unified diff cut at `max_chars` (a
/// character boundary kept, the cut said).
fn diff_of_commit(
    git_dir: &Path,
    gate: &GateInputs,
    base: git2::Oid,
    max_chars: usize,
) -> Result<String, HostTestError> {
    let infra = |e: &dyn std::fmt::Display| HostTestError::Infra(e.to_string());
    let repo = Repository::open(git_dir).map_err(|e| infra(&e))?;
    let tree = checked_tree(&repo, gate)?;
    let base = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(|e| infra(&e))?;
    let tree = repo.find_tree(tree).map_err(|e| infra(&e))?;
    let diff = repo
        .diff_tree_to_tree(Some(&base), Some(&tree), None)
        .map_err(|e| infra(&e))?;
    let mut out = String::new();
    let mut cut = false;
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if out.len() >= max_chars {
            cut = true;
            return false;
        }
        if matches!(line.origin(), '+' | '-' | ' ') {
            out.push(line.origin());
        }
        out.push_str(&String::from_utf8_lossy(line.content()));
        true
    })
    .or_else(|e| if cut { Ok(()) } else { Err(infra(&e)) })?;
    if out.len() > max_chars {
        let end = (0..=max_chars)
            .rev()
            .find(|&i| out.is_char_boundary(i))
            .unwrap_or(0);
        out.truncate(end);
        cut = true;
    }
    if cut {
        out.push_str("\n[… the rest of the diff left out]\n");
    }
    Ok(out)
}

/// The gate's check of the working tree, then the tree a commit of it
/// would hold, written to the object store.
fn checked_tree(repo: &Repository, gate: &GateInputs) -> Result<git2::Oid, HostTestError> {
    let infra = |e: &dyn std::fmt::Display| HostTestError::Infra(e.to_string());
    let checks = Checks {
        before: &gate.before,
        scanner: &gate.scanner,
        policy: gate.policy,
        rules: &gate.rules,
    };
    // The commit's message is not written yet: the gate checks it when
    // the job commits.
    if let Err(refusal) = forgehand_gate::check(repo, &checks, "").map_err(|e| infra(&e))? {
        return Err(HostTestError::Refused(refusal.reason));
    }
    forgehand_gate::tree_to_commit(repo).map_err(|e| infra(&e))
}

/// The gate's check of the working tree, then what a commit of it would
/// hold, laid out in `dest` against `base`.
fn lay_out_commit(
    git_dir: &Path,
    gate: &GateInputs,
    base: git2::Oid,
    dest: &Path,
) -> Result<(), HostTestError> {
    let infra = |e: &dyn std::fmt::Display| HostTestError::Infra(e.to_string());
    let repo = Repository::open(git_dir).map_err(|e| infra(&e))?;
    let tree = checked_tree(&repo, gate)?;
    let base = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(|e| infra(&e))?;
    let tree = repo.find_tree(tree).map_err(|e| infra(&e))?;
    std::fs::create_dir_all(dest).map_err(|e| infra(&e))?;
    lay_out(&repo, &base, &tree, dest).map_err(|e| infra(&e))
}

/// Writes into `dest` (an empty directory of the host's) what `tree`
/// changes against `base`: each added or changed file and link, and an
/// overlay whiteout where a file or directory went, so that `dest` laid
/// over a checkout of `base` shows `tree`. Never follows a link: every
/// name is made new, and only directories made here are entered.
pub fn lay_out(repo: &Repository, base: &Tree, tree: &Tree, dest: &Path) -> std::io::Result<()> {
    let diff = repo
        .diff_tree_to_tree(Some(base), Some(tree), None)
        .map_err(std::io::Error::other)?;
    let mut gone = BTreeSet::new();
    for delta in diff.deltas() {
        if matches!(delta.status(), Delta::Deleted | Delta::Typechange) {
            if let Some(path) = delta.old_file().path() {
                gone.insert(path.to_owned());
            }
        }
        if delta.status() == Delta::Deleted {
            continue;
        }
        let new = delta.new_file();
        let (Some(path), Some(mode)) = (new.path(), file_mode(new.mode())) else {
            // A submodule's commit: nothing of it is in the tree.
            continue;
        };
        gone.remove(path);
        let blob = repo.find_blob(new.id()).map_err(std::io::Error::other)?;
        write_entry(dest, path, mode, blob.content())?;
    }
    // A name that went is whited out where it went: at its highest
    // directory the new tree lacks, unless something the new tree has
    // there (a file in place of a directory) already hides it.
    let mut whiteouts = BTreeSet::new();
    for path in &gone {
        if let Some(at) = whiteout_for(tree, path) {
            whiteouts.insert(at);
        }
    }
    for path in whiteouts {
        whiteout(dest, &path)?;
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Mode {
    File,
    Executable,
    Link,
}

fn file_mode(mode: git2::FileMode) -> Option<Mode> {
    match mode {
        git2::FileMode::Blob => Some(Mode::File),
        git2::FileMode::BlobExecutable => Some(Mode::Executable),
        git2::FileMode::Link => Some(Mode::Link),
        _ => None,
    }
}

/// Where the removal of `path` shows: its highest ancestor (or itself)
/// that `tree` does not hold; `None` when an ancestor is a file or link
/// in `tree` (which hides all beneath it).
fn whiteout_for(tree: &Tree, path: &Path) -> Option<PathBuf> {
    let mut prefix = PathBuf::new();
    for component in path.components() {
        prefix.push(component);
        match tree.get_path(&prefix) {
            Err(_) => return Some(prefix),
            Ok(entry) if entry.kind() != Some(ObjectType::Tree) => return None,
            Ok(_) => {}
        }
    }
    // The path is in the tree again (as a directory now): nothing to hide.
    None
}

/// The directories above `path` in `dest`, made as needed; an existing
/// one must be a real directory made here.
fn parent_dirs(dest: &Path, path: &Path) -> std::io::Result<PathBuf> {
    let mut at = dest.to_owned();
    let components: Vec<_> = path.components().collect();
    for component in &components[..components.len().saturating_sub(1)] {
        let std::path::Component::Normal(name) = component else {
            return Err(std::io::Error::other(format!(
                "a path outside the tree: {}",
                path.display()
            )));
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                    "{} is not a directory",
                    at.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&at)?,
            Err(e) => return Err(e),
        }
    }
    match components.last() {
        Some(std::path::Component::Normal(name)) => Ok(at.join(name)),
        _ => Err(std::io::Error::other(format!(
            "a path outside the tree: {}",
            path.display()
        ))),
    }
}

fn write_entry(dest: &Path, path: &Path, mode: Mode, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let target = parent_dirs(dest, path)?;
    match mode {
        Mode::Link => {
            use std::os::unix::ffi::OsStrExt;
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(content), &target)
        }
        Mode::File | Mode::Executable => {
            // A new name, never an existing one or a link's target.
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(if matches!(mode, Mode::Executable) {
                    0o755
                } else {
                    0o644
                })
                .open(&target)?;
            file.write_all(content)
        }
    }
}

/// An overlay whiteout (a character device 0:0) at `path` in `dest`.
fn whiteout(dest: &Path, path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let target = parent_dirs(dest, path)?;
    let c_path = std::ffi::CString::new(target.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a NUL in a path"))?;
    // SAFETY: mknod(2) with a NUL-terminated path we own.
    let rc = unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFCHR, libc::makedev(0, 0)) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Removes a test run's directory, whatever its layers left (mounts are
/// gone by then: they are unmounted when dropped).
fn remove(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    use super::*;

    fn commit(repo: &Repository, files: &[(&str, &str)], links: &[(&str, &str)]) -> git2::Oid {
        let dir = repo.workdir().unwrap();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            if entry.file_name() != ".git" {
                let path = entry.path();
                if path.symlink_metadata().unwrap().is_dir() {
                    std::fs::remove_dir_all(path).unwrap();
                } else {
                    std::fs::remove_file(path).unwrap();
                }
            }
        }
        for (path, text) in files {
            let full = dir.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
            if path.ends_with(".sh") {
                std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        for (path, target) in links {
            let full = dir.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target, full).unwrap();
        }
        let mut index = repo.index().unwrap();
        index.clear().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write_tree().unwrap()
    }

    #[test]
    fn the_laid_out_changes_over_the_base_show_the_new_tree() {
        if !nix_root() {
            panic!(
                "this test makes overlay whiteouts (character devices): run it as root, as CI does"
            );
        }
        let tmp = tempfile::tempdir().unwrap();
        let repo = Repository::init(tmp.path().join("repo")).unwrap();
        let base = commit(
            &repo,
            &[
                ("keep.txt", "same"),
                ("change.txt", "old"),
                ("gone.txt", "x"),
                ("olddir/a.txt", "a"),
                ("olddir/sub/b.txt", "b"),
                ("becomes_file/c.txt", "c"),
                ("half/stay.txt", "s"),
                ("half/go.txt", "g"),
            ],
            &[],
        );
        let new = commit(
            &repo,
            &[
                ("keep.txt", "same"),
                ("change.txt", "new"),
                ("added/deep/new.txt", "n"),
                ("run.sh", "#!/bin/sh\n"),
                ("becomes_file", "now a file"),
                ("half/stay.txt", "s"),
            ],
            &[("link", "/etc/passwd")],
        );
        let (base, new) = (repo.find_tree(base).unwrap(), repo.find_tree(new).unwrap());
        let dest = tmp.path().join("layer");
        std::fs::create_dir(&dest).unwrap();
        lay_out(&repo, &base, &new, &dest).unwrap();

        let read = |p: &str| std::fs::read_to_string(dest.join(p)).unwrap();
        assert_eq!(read("change.txt"), "new");
        assert_eq!(read("added/deep/new.txt"), "n");
        assert_eq!(read("becomes_file"), "now a file");
        assert!(
            !dest.join("keep.txt").exists(),
            "unchanged files stay beneath"
        );
        let mode = std::fs::metadata(dest.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(
            std::fs::read_link(dest.join("link")).unwrap(),
            Path::new("/etc/passwd"),
            "a link is made, never followed"
        );
        let is_whiteout = |p: &str| {
            let meta = std::fs::symlink_metadata(dest.join(p)).unwrap();
            meta.file_type().is_char_device() && {
                use std::os::unix::fs::MetadataExt;
                meta.rdev() == 0
            }
        };
        assert!(is_whiteout("gone.txt"));
        assert!(
            is_whiteout("olddir"),
            "a directory that went is hidden whole"
        );
        assert!(is_whiteout("half/go.txt"));
        assert!(!dest.join("olddir/sub").exists());
        assert!(
            !dest.join("becomes_file").is_dir(),
            "the file hides the directory it replaced"
        );
    }

    fn nix_root() -> bool {
        // SAFETY: geteuid(2) has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }
}
