//! A job's working copy, home and root as layers: the job's own writable
//! layer over the environment's (what setup left in `/workspace`) over
//! the shared checkout of the base commit; the environment's home beneath
//! a writable layer of the job's; the environment's packages over the
//! guest image. Nothing of what the job starts from is copied, and what
//! the job changes is exactly its writable layers.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use forgehand_environment::cache::InUse;
use forgehand_forge::git::Checkout;
use forgehand_sandbox::layers::Overlay;
use forgehand_sandbox::{Backend, Handover, SandboxSpec};

use crate::jobdir::JobDir;
use forgehand_sandbox::config::SandboxConfig;

/// What common toolchains leave in a working copy and a teammate would
/// never commit (git's own ignore syntax; a path git already tracks is
/// never affected).
pub const ARTEFACTS: &[&str] = &[
    "__pycache__/",
    "*.pyc",
    "*.pyo",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".tox/",
    ".nox/",
    ".venv/",
    "*.egg-info/",
    ".eggs/",
    ".coverage",
    ".coverage.*",
    "htmlcov/",
    "coverage.xml",
    "node_modules/",
    ".npm/",
    ".nyc_output/",
    ".parcel-cache/",
    ".next/",
    ".turbo/",
    "target/",
    ".gradle/",
];

/// At most this many of the environment's additions are named one by one
/// in the exclusions; past it, their directories are.
const MAX_ADDED: usize = 500;

/// A job's layers, mounted; unmounted when dropped (before the job
/// directory goes).
pub struct Layered {
    tree: Overlay,
    home: Option<Overlay>,
    rootfs: Option<Overlay>,
    upper: PathBuf,
    home_upper: Option<PathBuf>,
    added: Vec<String>,
    _checkout: Checkout,
    _env: Option<InUse>,
}

impl Layered {
    /// Mounts the job's layers in `job_dir` over `checkout` and `env`.
    pub async fn mount(
        backend: &dyn Backend,
        job_dir: &JobDir,
        checkout: Checkout,
        env: Option<InUse>,
        image: &Path,
    ) -> Result<Layered, String> {
        let layers = job_dir.layers();
        let dir = |name: &str| {
            let path = layers.join(name);
            std::fs::create_dir_all(&path)
                .map(|()| path)
                .map_err(|e| format!("a job layer: {e}"))
        };
        let (upper, work) = (dir("upper")?, dir("work")?);
        backend
            .prepare_for_sandbox(&upper)
            .await
            .map_err(|e| e.to_string())?;
        // The commit's files above the environment's: what the setup
        // added at a path the commit has (the setup saw only its inputs)
        // never hides the commit's own file.
        let mut lowers: Vec<PathBuf> = vec![checkout.tree.clone()];
        if let Some(env) = &env {
            lowers.push(env.workspace());
        }
        let lower_refs: Vec<&Path> = lowers.iter().map(PathBuf::as_path).collect();
        let tree = Overlay::writable(&lower_refs, &upper, &work, &job_dir.tree())
            .map_err(|e| format!("the working copy's overlay: {e}"))?;
        let (mut home, mut home_upper, mut rootfs) = (None, None, None);
        if let Some(env) = &env {
            let (upper, work) = (dir("home-upper")?, dir("home-work")?);
            backend
                .prepare_for_sandbox(&upper)
                .await
                .map_err(|e| e.to_string())?;
            home = Some(
                Overlay::writable(&[&env.home()], &upper, &work, &job_dir.home())
                    .map_err(|e| format!("the home's overlay: {e}"))?,
            );
            home_upper = Some(upper);
            if let Some(layer) = env.rootfs() {
                rootfs = Some(
                    Overlay::read_only(&[&layer, image], &job_dir.rootfs())
                        .map_err(|e| format!("the root's overlay: {e}"))?,
                );
            }
        }
        let added = env
            .as_ref()
            .map(|env| additions(&env.workspace(), &checkout.tree))
            .unwrap_or_default();
        Ok(Layered {
            tree,
            home,
            rootfs,
            upper,
            home_upper,
            added,
            _checkout: checkout,
            _env: env,
        })
    }

    /// The commit the shared checkout beneath is of.
    pub fn commit(&self) -> git2::Oid {
        self._checkout.commit
    }

    /// The shared checkout's git index.
    pub fn index(&self) -> &Path {
        &self._checkout.index
    }

    /// The working copy's files (the merged view).
    pub fn tree(&self) -> &Path {
        self.tree.path()
    }

    /// What the job changed: its writable layer.
    pub fn upper(&self) -> &Path {
        &self.upper
    }

    /// The sandbox over these layers: the environment's root, the working
    /// copy, the home; only the job's writable layers go back to the host
    /// after.
    pub fn spec(&self, sandbox: &SandboxConfig) -> SandboxSpec {
        let mut spec = sandbox.spec(self.tree());
        if let Some(rootfs) = &self.rootfs {
            spec.rootfs = rootfs.path().to_owned();
        }
        spec.home = self.home.as_ref().map(|h| h.path().to_owned());
        spec.handover = Handover::Prepared {
            give_back: std::iter::once(self.upper.clone())
                .chain(self.home_upper.clone())
                .collect(),
        };
        spec
    }

    /// Layers for the host's test run, mounted in `dir` (empty, on the
    /// job's disk): `commit` (the files the commit changes, and whiteouts
    /// for those it removes) over the shared checkout and the
    /// environment's workspace, a fresh home over the environment's, and the
    /// environment's root. Nothing of the agent's layers is beneath: what
    /// the tests see is what is committed, over what the environment is.
    pub async fn over_commit(
        &self,
        backend: &dyn Backend,
        dir: &Path,
        commit: &Path,
    ) -> Result<TestLayers, String> {
        let made = |name: &str| {
            let path = dir.join(name);
            std::fs::create_dir_all(&path)
                .map(|()| path)
                .map_err(|e| format!("a test layer: {e}"))
        };
        let (upper, work, merged) = (made("upper")?, made("work")?, made("tree")?);
        for prepared in [commit, upper.as_path()] {
            backend
                .prepare_for_sandbox(prepared)
                .await
                .map_err(|e| e.to_string())?;
        }
        let mut lowers: Vec<PathBuf> = vec![commit.to_owned(), self._checkout.tree.clone()];
        if let Some(env) = &self._env {
            lowers.push(env.workspace());
        }
        let lower_refs: Vec<&Path> = lowers.iter().map(PathBuf::as_path).collect();
        let tree = Overlay::writable(&lower_refs, &upper, &work, &merged)
            .map_err(|e| format!("the tested tree's overlay: {e}"))?;
        let (mut home, mut home_upper) = (None, None);
        if let Some(env) = &self._env {
            let (upper, work, merged) = (made("home-upper")?, made("home-work")?, made("home")?);
            backend
                .prepare_for_sandbox(&upper)
                .await
                .map_err(|e| e.to_string())?;
            home = Some(
                Overlay::writable(&[&env.home()], &upper, &work, &merged)
                    .map_err(|e| format!("the tested home's overlay: {e}"))?,
            );
            home_upper = Some(upper);
        }
        Ok(TestLayers {
            tree,
            home,
            rootfs: self.rootfs.as_ref().map(|r| r.path().to_owned()),
            give_back: std::iter::once(upper).chain(home_upper).collect(),
        })
    }

    /// What git must never take into a commit: what the environment added
    /// to `/workspace` and the toolchains' artefacts, one line each in
    /// git's ignore syntax.
    pub fn exclusions(&self) -> Vec<String> {
        self.added
            .iter()
            .cloned()
            .chain(ARTEFACTS.iter().map(|a| (*a).to_owned()))
            .collect()
    }

    /// Writes [`Layered::exclusions`] into the git directory's own exclude
    /// file (which the agent cannot reach), before anything reads the
    /// tree: the integrity snapshot and the gate skip what git ignores.
    pub fn write_exclusions(&self, git_dir: &Path) -> std::io::Result<()> {
        write_exclusions(git_dir, &self.exclusions())
    }

    /// The environment's additions to `/workspace`, as excluded.
    pub fn environment_paths(&self) -> &[String] {
        &self.added
    }
}

/// The layers of a host's test run ([`Layered::over_commit`]); unmounted
/// when dropped.
pub struct TestLayers {
    // Unmounted in this order: the tree, then the home.
    tree: Overlay,
    home: Option<Overlay>,
    rootfs: Option<PathBuf>,
    give_back: Vec<PathBuf>,
}

impl TestLayers {
    /// A sandbox over them, as the agent's is made but for its layers.
    pub fn spec(&self, sandbox: &SandboxConfig) -> SandboxSpec {
        let mut spec = sandbox.spec(self.tree.path());
        if let Some(rootfs) = &self.rootfs {
            spec.rootfs = rootfs.clone();
        }
        spec.home = self.home.as_ref().map(|h| h.path().to_owned());
        spec.handover = Handover::Prepared {
            give_back: self.give_back.clone(),
        };
        spec
    }
}

/// At most this many ignored paths are listed.
const MAX_IGNORED: usize = 100;

/// What git ignores in the working tree now (a directory it ignores is
/// one entry, not looked into).
pub fn ignored_paths(repo: &git2::Repository) -> Result<Vec<String>, git2::Error> {
    let mut options = git2::StatusOptions::new();
    options
        .include_ignored(true)
        .include_untracked(false)
        .recurse_ignored_dirs(false)
        .exclude_submodules(true);
    let statuses = repo.statuses(Some(&mut options))?;
    Ok(statuses
        .iter()
        .filter(|s| s.status().contains(git2::Status::IGNORED))
        .filter_map(|s| s.path().map(str::to_owned))
        .take(MAX_IGNORED)
        .collect())
}

/// Writes `lines` into `git_dir`'s `info/exclude`.
pub fn write_exclusions(git_dir: &Path, lines: &[String]) -> std::io::Result<()> {
    let info = git_dir.join("info");
    std::fs::create_dir_all(&info)?;
    let mut text = String::from(
        "# Written by Forgehand: the environment's files and toolchains' artefacts are never committed.\n",
    );
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(info.join("exclude"), text)
}

/// What the environment's workspace layer adds to the checkout, anchored
/// (`/node_modules/`, `/frontend/node_modules/`, `/.env.local`): a
/// directory the checkout lacks is named whole, one it has is looked
/// into. Never follows a link; bounded.
fn additions(layer: &Path, checkout: &Path) -> Vec<String> {
    let mut found = BTreeSet::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(layer.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            if found.len() >= MAX_ADDED {
                // Too many to name: the directory being looked into goes
                // whole (never the root: that would be everything).
                if !rel.as_os_str().is_empty() {
                    found.insert(format!("/{}/", rel.display()));
                }
                return found.into_iter().collect();
            }
            let path = rel.join(entry.file_name());
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            let in_checkout = checkout.join(&path).symlink_metadata().is_ok();
            if meta.is_dir() && in_checkout {
                pending.push(path);
            } else if meta.is_dir() {
                found.insert(format!("/{}/", path.display()));
            } else if !in_checkout {
                found.insert(format!("/{}", path.display()));
            }
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environments_additions_are_named_where_they_begin() {
        let tmp = tempfile::tempdir().unwrap();
        let (layer, checkout) = (tmp.path().join("layer"), tmp.path().join("checkout"));
        for dir in [
            "layer/node_modules/x",
            "layer/web/node_modules/y",
            "layer/web/src",
            "checkout/web/src",
        ] {
            std::fs::create_dir_all(tmp.path().join(dir)).unwrap();
        }
        std::fs::write(layer.join(".env.local"), "x").unwrap();
        std::fs::write(layer.join("web/src/generated.js"), "x").unwrap();
        std::fs::write(checkout.join("web/src/app.js"), "x").unwrap();
        assert_eq!(
            additions(&layer, &checkout),
            vec![
                "/.env.local",
                "/node_modules/",
                "/web/node_modules/",
                "/web/src/generated.js"
            ]
        );
    }
}
