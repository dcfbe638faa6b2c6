//! An instance's repository on the host: where its history comes from,
//! a clone of it per run at the row's base commit (with the row's
//! environment declared on top), and the tree that is scored, made from
//! git objects only: a patch is applied to a tree in memory and never
//! written through a working tree, so nothing a patch names can reach a
//! file of the host's.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use git2::{Oid, Repository};

use super::dataset::Row;
use super::results::Unresolved;

/// Where a row's history is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A repository on this host.
    Local(PathBuf),
    /// A repository to clone once, into the evaluation's `mirrors/`.
    Remote(String),
}

impl Source {
    /// `repo` as a row gives it: a path (relative ones from the dataset's
    /// directory), a URL, or `owner/name` (under `--repos` when it is
    /// there, else GitHub's).
    pub fn of(repo: &str, dataset_dir: &Path, repos: Option<&Path>) -> Source {
        if repo.contains("://") || repo.starts_with("git@") {
            return Source::Remote(repo.to_owned());
        }
        let path = dataset_dir.join(repo);
        let owner_name = {
            let parts: Vec<&str> = repo.split('/').collect();
            parts.len() == 2
                && parts.iter().all(|p| {
                    !p.is_empty()
                        && !p.starts_with('.')
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                })
        };
        if owner_name && !path.exists() {
            if let Some(repos) = repos {
                for candidate in [repos.join(repo), repos.join(repo.replace('/', "__"))] {
                    if candidate.exists() {
                        return Source::Local(candidate);
                    }
                }
            }
            return Source::Remote(format!("https://github.com/{repo}.git"));
        }
        Source::Local(path)
    }
}

/// Runs git with the host's configuration left out (a user's
/// `url.*.insteadOf` or hooks path is not the evaluation's).
fn git(args: &[&str], cwd: Option<&Path>) -> anyhow::Result<()> {
    let mut command = Command::new("git");
    command
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0");
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    // Killed, the evaluation takes its git with it: a clone left writing
    // into a directory the resumed evaluation is removing made that fail.
    // SAFETY: prctl is async-signal-safe and touches only this process.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let out = command.output().context("running git")?;
    if !out.status.success() {
        anyhow::bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// A remote source's history, cloned once into `mirrors` (a name made
/// from the URL); a local one as it is.
pub fn history(source: &Source, mirrors: &Path) -> anyhow::Result<PathBuf> {
    match source {
        Source::Local(path) => Ok(path.clone()),
        Source::Remote(url) => {
            let name: String = url
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            let path = mirrors.join(format!("{name}.git"));
            if !path.exists() {
                std::fs::create_dir_all(mirrors)?;
                let partial = mirrors.join(format!("{name}.partial"));
                let _ = std::fs::remove_dir_all(&partial);
                git(
                    &[
                        "clone",
                        "--quiet",
                        "--mirror",
                        url,
                        &partial.to_string_lossy(),
                    ],
                    None,
                )
                .with_context(|| format!("cloning {url}"))?;
                std::fs::rename(&partial, &path)?;
            }
            Ok(path)
        }
    }
}

/// A run's clone of the instance: its base commit, and the commit the
/// run starts from (the base, or the base with the row's environment
/// declared).
pub struct Clone {
    pub path: PathBuf,
    pub base: Oid,
    pub start: Oid,
}

/// The branch a run's clone has checked out.
pub const BRANCH: &str = "forgehand-eval";

/// Clones `history` into `dir` (a new directory) at the row's base
/// commit; with `checkout`, the start commit is checked out on
/// [`BRANCH`] (what `forgehand run` starts from).
pub fn clone(row: &Row, history: &Path, dir: &Path, checkout: bool) -> anyhow::Result<Clone> {
    std::fs::create_dir_all(dir.parent().unwrap_or(dir))?;
    git(
        &[
            "clone",
            "--quiet",
            "--no-checkout",
            "--no-hardlinks",
            &history.to_string_lossy(),
            &dir.to_string_lossy(),
        ],
        None,
    )
    .with_context(|| format!("cloning {}", history.display()))?;
    let repo = Repository::open(dir)?;
    let base = Oid::from_str(&row.base_commit)?;
    if repo.find_commit(base).is_err() {
        // A base on no branch (SWE-bench's often are): asked for by id.
        git(&["fetch", "--quiet", "origin", &row.base_commit], Some(dir))
            .with_context(|| format!("{}: base_commit {}", row.instance_id, row.base_commit))?;
    }
    let base_commit = repo
        .find_commit(base)
        .with_context(|| format!("{}: no commit {}", row.instance_id, row.base_commit))?;
    let start = match &row.environment {
        None => base,
        Some(environment) => declare(&repo, &base_commit, environment)?,
    };
    if checkout {
        git(
            &["checkout", "--quiet", "-B", BRANCH, &start.to_string()],
            Some(dir),
        )?;
    }
    Ok(Clone {
        path: dir.to_owned(),
        base,
        start,
    })
}

/// A commit on `base` whose `.forgehand.toml` has the row's
/// `[environment]` (the rest of an existing file kept).
fn declare(
    repo: &Repository,
    base: &git2::Commit<'_>,
    environment: &toml::Table,
) -> anyhow::Result<Oid> {
    let tree = base.tree()?;
    let mut file: toml::Table = match tree.get_path(Path::new(".forgehand.toml")) {
        Ok(entry) => {
            let blob = repo.find_blob(entry.id())?;
            std::str::from_utf8(blob.content())
                .ok()
                .and_then(|text| text.parse().ok())
                .context("the base commit's .forgehand.toml does not parse")?
        }
        Err(_) => toml::Table::new(),
    };
    file.insert(
        "environment".into(),
        toml::Value::Table(environment.clone()),
    );
    let text = toml::to_string(&file)?;
    let blob = repo.blob(text.as_bytes())?;
    let mut update = git2::build::TreeUpdateBuilder::new();
    update.upsert(".forgehand.toml", blob, git2::FileMode::Blob);
    let tree = repo.find_tree(update.create_updated(repo, &tree)?)?;
    let sig = signature()?;
    Ok(repo.commit(
        None,
        &sig,
        &sig,
        "forgehand eval: the instance's environment",
        &tree,
        &[base],
    )?)
}

fn signature() -> Result<git2::Signature<'static>, git2::Error> {
    git2::Signature::new(
        "forgehand eval",
        "eval@forgehand.invalid",
        &git2::Time::new(0, 0),
    )
}

/// `patch` applied to `tree`, in memory.
fn apply(repo: &Repository, tree: &git2::Tree<'_>, patch: &str) -> Result<Oid, git2::Error> {
    let diff = git2::Diff::from_buffer(patch.as_bytes())?;
    let mut index = repo.apply_to_tree(tree, &diff, None)?;
    index.write_tree_to(repo)
}

/// Why a patch was not applied, said.
pub type NotApplied = (Unresolved, String);

/// The start commit with the row's gold patch.
pub fn gold(repo: &Repository, start: Oid, patch: &str) -> Result<Oid, NotApplied> {
    let said = |e: git2::Error| {
        (
            Unresolved::PatchDoesNotApply,
            format!("the gold patch: {}", e.message()),
        )
    };
    let commit = repo.find_commit(start).map_err(said)?;
    let tree = commit.tree().map_err(said)?;
    let tree = apply(repo, &tree, patch).map_err(said)?;
    let tree = repo.find_tree(tree).map_err(said)?;
    let sig = signature().map_err(said)?;
    repo.commit(
        None,
        &sig,
        &sig,
        "forgehand eval: the gold patch",
        &tree,
        &[&commit],
    )
    .map_err(said)
}

/// A tree entry's mode, as the tree update takes it.
fn mode(entry: &git2::TreeEntry<'_>) -> git2::FileMode {
    match entry.filemode() {
        0o100755 => git2::FileMode::BlobExecutable,
        0o120000 => git2::FileMode::Link,
        0o040000 => git2::FileMode::Tree,
        _ => git2::FileMode::Blob,
    }
}

/// What is scored: `candidate`'s tree with every file the test patch
/// touches put back as `base` has it, then the test patch applied; a
/// commit on `candidate`, at a ref of its own so that copies of the
/// repository carry it.
///
/// Put back means whatever the candidate has at such a path (a file, a
/// directory, nothing) and in its way (a file where the base has a
/// directory above it) gives way to the base's; and a package the
/// candidate added beside a test module (`tests/test_x/` beside
/// `tests/test_x.py`, which Python imports first) goes too, or the put
/// back file would never run.
pub fn scored(
    repo: &Repository,
    base: Oid,
    candidate: Oid,
    test_patch: &str,
) -> anyhow::Result<Result<Oid, NotApplied>> {
    let base_tree = repo.find_commit(base)?.tree()?;
    let candidate = repo.find_commit(candidate)?;
    let said = |e: git2::Error| {
        (
            Unresolved::TestPatchDoesNotApply,
            format!("the test patch: {}", e.message()),
        )
    };
    let diff = match git2::Diff::from_buffer(test_patch.as_bytes()) {
        Ok(diff) => diff,
        Err(e) => return Ok(Err(said(e))),
    };
    let paths: std::collections::BTreeSet<PathBuf> = diff
        .deltas()
        .flat_map(|delta| [delta.old_file().path(), delta.new_file().path()])
        .flatten()
        .map(Path::to_owned)
        .collect();
    let candidate_tree = candidate.tree()?;
    let in_base = |p: &Path| base_tree.get_path(p).is_ok();
    let in_candidate = |p: &Path| candidate_tree.get_path(p).is_ok();
    // First what the candidate has there or in the way goes; then the
    // base's files come back (one update cannot do both to one path).
    let mut gone = std::collections::BTreeSet::new();
    for path in &paths {
        if in_candidate(path) {
            gone.insert(path.clone());
        }
        if path.extension().is_some_and(|e| e == "py") {
            let package = path.with_extension("");
            if in_candidate(&package) && !in_base(&package) {
                gone.insert(package);
            }
        }
        for ancestor in path.ancestors().skip(1) {
            let blob_in_the_way = candidate_tree
                .get_path(ancestor)
                .is_ok_and(|e| e.kind() != Some(git2::ObjectType::Tree));
            if !ancestor.as_os_str().is_empty() && blob_in_the_way {
                gone.insert(ancestor.to_owned());
            }
        }
    }
    let cleared = (|| {
        let mut update = git2::build::TreeUpdateBuilder::new();
        for path in &gone {
            update.remove(path);
        }
        let cleared = repo.find_tree(update.create_updated(repo, &candidate_tree)?)?;
        let mut update = git2::build::TreeUpdateBuilder::new();
        for path in &paths {
            if let Ok(entry) = base_tree.get_path(path) {
                update.upsert(path, entry.id(), mode(&entry));
            }
        }
        repo.find_tree(update.create_updated(repo, &cleared)?)
    })();
    let reset = match cleared {
        Ok(tree) => tree,
        Err(e) => return Ok(Err(said(e))),
    };
    let tree = match apply(repo, &reset, test_patch).and_then(|t| repo.find_tree(t)) {
        Ok(tree) => tree,
        Err(e) => return Ok(Err(said(e))),
    };
    let sig = signature()?;
    let commit = repo.commit(
        None,
        &sig,
        &sig,
        "forgehand eval: the test patch",
        &tree,
        &[&candidate],
    )?;
    repo.reference("refs/forgehand-eval/scored", commit, true, "scored")?;
    Ok(Ok(commit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with(dir: &Path, files: &[(&str, &str)]) -> (Repository, Oid) {
        let repo = Repository::init(dir).unwrap();
        let mut update = git2::build::TreeUpdateBuilder::new();
        for (path, text) in files {
            let blob = repo.blob(text.as_bytes()).unwrap();
            update.upsert(*path, blob, git2::FileMode::Blob);
        }
        let commit = {
            let empty = repo.treebuilder(None).unwrap().write().unwrap();
            let empty = repo.find_tree(empty).unwrap();
            let tree = update.create_updated(&repo, &empty).unwrap();
            let tree = repo.find_tree(tree).unwrap();
            let sig = signature().unwrap();
            repo.commit(Some("HEAD"), &sig, &sig, "start", &tree, &[])
                .unwrap()
        };
        (repo, commit)
    }

    fn file(repo: &Repository, commit: Oid, path: &str) -> Option<String> {
        let tree = repo.find_commit(commit).unwrap().tree().unwrap();
        let entry = tree.get_path(Path::new(path)).ok()?;
        let blob = repo.find_blob(entry.id()).unwrap();
        Some(String::from_utf8(blob.content().to_vec()).unwrap())
    }

    const TEST_PATCH: &str = "diff --git a/t/test_a.py b/t/test_a.py\n--- a/t/test_a.py\n+++ b/t/test_a.py\n@@ -1 +1,2 @@\n def test_a(): pass\n+def test_new(): pass\n";

    /// A candidate that rewrote the tests the patch touches (or deleted
    /// them) is scored on the base's tests with the patch's: what the
    /// agent did to them does not count.
    #[test]
    fn the_test_patch_goes_over_the_bases_tests_whatever_the_candidate_did() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, base) = repo_with(
            dir.path(),
            &[("t/test_a.py", "def test_a(): pass\n"), ("m.py", "x = 1\n")],
        );
        let base_commit = repo.find_commit(base).unwrap();
        let mut update = git2::build::TreeUpdateBuilder::new();
        update.remove("t/test_a.py");
        let blob = repo.blob(b"x = 2\n").unwrap();
        update.upsert("m.py", blob, git2::FileMode::Blob);
        let tree = update
            .create_updated(&repo, &base_commit.tree().unwrap())
            .unwrap();
        let tree = repo.find_tree(tree).unwrap();
        let sig = signature().unwrap();
        let candidate = repo
            .commit(None, &sig, &sig, "c", &tree, &[&base_commit])
            .unwrap();
        let scored = scored(&repo, base, candidate, TEST_PATCH).unwrap().unwrap();
        assert_eq!(
            file(&repo, scored, "t/test_a.py").unwrap(),
            "def test_a(): pass\ndef test_new(): pass\n"
        );
        assert_eq!(file(&repo, scored, "m.py").unwrap(), "x = 2\n");
        assert_eq!(
            scored_error(&repo, base, candidate, "not a patch"),
            Unresolved::TestPatchDoesNotApply
        );
        let wrong = TEST_PATCH.replace(" def test_a(): pass\n+", " def test_b(): pass\n+");
        assert_eq!(
            scored_error(&repo, base, candidate, &wrong),
            Unresolved::TestPatchDoesNotApply
        );
    }

    /// `base` with `remove` gone and `add` written, as a commit.
    fn candidate(repo: &Repository, base: Oid, remove: &[&str], add: &[(&str, &str)]) -> Oid {
        let base_commit = repo.find_commit(base).unwrap();
        let mut update = git2::build::TreeUpdateBuilder::new();
        for path in remove {
            update.remove(*path);
        }
        let tree = update
            .create_updated(repo, &base_commit.tree().unwrap())
            .unwrap();
        let mut update = git2::build::TreeUpdateBuilder::new();
        for (path, text) in add {
            let blob = repo.blob(text.as_bytes()).unwrap();
            update.upsert(*path, blob, git2::FileMode::Blob);
        }
        let tree = update
            .create_updated(repo, &repo.find_tree(tree).unwrap())
            .unwrap();
        let tree = repo.find_tree(tree).unwrap();
        let sig = signature().unwrap();
        repo.commit(None, &sig, &sig, "c", &tree, &[&base_commit])
            .unwrap()
    }

    /// Red-team round 1 of `forgehand eval`: a directory where the test
    /// file was crashed the whole evaluation (libgit2: cannot replace a
    /// tree with a blob), every time it was resumed; a package beside the
    /// test module (imported first) kept the put back test from running;
    /// a file where the base has the tests' directory.
    #[test]
    fn whatever_stands_where_the_tests_go_gives_way_to_them() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, base) = repo_with(
            dir.path(),
            &[("t/test_a.py", "def test_a(): pass\n"), ("m.py", "x = 1\n")],
        );
        let want = "def test_a(): pass\ndef test_new(): pass\n";
        for (remove, add) in [
            (vec!["t/test_a.py"], vec![("t/test_a.py/a.txt", "hi")]),
            (vec![], vec![("t/test_a/__init__.py", "class T: pass")]),
            (vec!["t/test_a.py"], vec![("t", "a file")]),
        ] {
            let c = candidate(&repo, base, &remove, &add);
            let scored = scored(&repo, base, c, TEST_PATCH).unwrap().unwrap();
            assert_eq!(
                file(&repo, scored, "t/test_a.py").as_deref(),
                Some(want),
                "{add:?}"
            );
            assert_eq!(file(&repo, scored, "t/test_a/__init__.py"), None);
        }
    }

    fn scored_error(repo: &Repository, base: Oid, candidate: Oid, patch: &str) -> Unresolved {
        scored(repo, base, candidate, patch).unwrap().unwrap_err().0
    }

    #[test]
    fn the_gold_patch_applies_in_memory_or_is_said_not_to() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, base) = repo_with(dir.path(), &[("m.py", "x = 1\n")]);
        let patch =
            "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n";
        let fixed = gold(&repo, base, patch).unwrap();
        assert_eq!(file(&repo, fixed, "m.py").unwrap(), "x = 2\n");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "only .git"
        );
        let escaping = "diff --git a/../../etc/x b/../../etc/x\nnew file mode 100644\n--- /dev/null\n+++ b/../../etc/x\n@@ -0,0 +1 @@\n+owned\n";
        let (reason, message) = gold(&repo, base, escaping).unwrap_err();
        assert_eq!(reason, Unresolved::PatchDoesNotApply);
        assert!(message.starts_with("the gold patch: "), "{message}");
    }

    #[test]
    fn a_rows_repo_is_a_path_a_url_or_owner_and_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("local/repo")).unwrap();
        std::fs::create_dir_all(dir.path().join("repos/astropy__astropy")).unwrap();
        let d = dir.path();
        assert_eq!(
            Source::of("local/repo", d, None),
            Source::Local(d.join("local/repo"))
        );
        assert_eq!(
            Source::of("https://example.invalid/r.git", d, None),
            Source::Remote("https://example.invalid/r.git".into())
        );
        assert_eq!(
            Source::of("astropy/astropy", d, Some(&d.join("repos"))),
            Source::Local(d.join("repos/astropy__astropy"))
        );
        assert_eq!(
            Source::of("django/django", d, Some(&d.join("repos"))),
            Source::Remote("https://github.com/django/django.git".into())
        );
    }
}
