//! Shared checkouts: the files of one commit, checked out once from the
//! mirror and read by every job that starts from that commit. A job's
//! working copy is a writable layer over one (an overlay the job mounts),
//! so starting a job on a large repository writes nothing but the job's
//! own git directory, and concurrent jobs share one checkout on disk.
//!
//! ```text
//! <root>/<forge>/<owner>/<name>/<commit>/tree/     the files (the sandbox user's: it writes through a layer above them)
//! <root>/<forge>/<owner>/<name>/<commit>/repo.git/ a git directory whose index knows the files' stat data
//! <root>/<forge>/<owner>/<name>/<commit>.make      held exclusively to make or remove it
//! <root>/<forge>/<owner>/<name>/<commit>.use       held shared by each job using it, exclusively to remove it
//! ```
//!
//! A job takes the use lock before it lets the make lock go, and removing
//! takes the make lock first: a checkout is never removed between being
//! found and being used, and no lock waits on another in a cycle.
//!
//! A checkout is never changed once made: overlayfs writes only to a
//! job's upper layer.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use super::transport;

/// Where the shared checkouts live, and how large a commit they check
/// out.
#[derive(Debug, Clone)]
pub struct Checkouts {
    root: PathBuf,
    limits: CheckoutLimits,
}

/// What a checkout may hold, measured from the objects' headers before a
/// file is written: libgit2 holds each file whole in memory while it
/// writes it, and a blob of zeros that compresses to a few megabytes
/// would cost the host gigabytes of memory and disk.
#[derive(Debug, Clone, Copy)]
pub struct CheckoutLimits {
    /// One file, at most.
    pub max_file_bytes: u64,
    /// All files together, at most.
    pub max_total_bytes: u64,
    /// Entries (files, links, directories), at most: a tree reused under
    /// many names makes a million files from a few kilobytes.
    pub max_entries: usize,
    /// How deep directories may nest.
    pub max_depth: usize,
}

impl Default for CheckoutLimits {
    fn default() -> Self {
        CheckoutLimits {
            max_file_bytes: u64::MAX,
            max_total_bytes: u64::MAX,
            max_entries: usize::MAX,
            max_depth: usize::MAX,
        }
    }
}

/// A checkout in use: not removed while this lives.
#[derive(Debug)]
pub struct Checkout {
    pub commit: Oid,
    /// The commit's files.
    pub tree: PathBuf,
    /// The git index of `tree`: a job's git directory starts from a copy
    /// of it, so git finds the unchanged files unchanged without reading
    /// them.
    pub index: PathBuf,
    _lock: File,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error("the shared checkout at {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("checking out {commit}: {source}")]
    Git {
        commit: Oid,
        #[source]
        source: git2::Error,
    },
    #[error("{path} is {size} bytes, more than the {max} bytes one checked-out file may have")]
    FileTooLarge { path: String, size: u64, max: u64 },
    #[error("the commit's files add up to more than the {max} bytes a checkout may have")]
    TreeTooLarge { max: u64 },
    #[error("the commit has more than the {max} entries a checkout may have")]
    TooManyEntries { max: usize },
    #[error("the commit's directories nest deeper than the {max} levels a checkout may have")]
    TooDeep { max: usize },
}

impl CheckoutError {
    /// Whether the commit is larger than the checkout may be: the
    /// repository's, and no later attempt changes it.
    pub fn is_too_large(&self) -> bool {
        matches!(
            self,
            CheckoutError::FileTooLarge { .. }
                | CheckoutError::TreeTooLarge { .. }
                | CheckoutError::TooManyEntries { .. }
                | CheckoutError::TooDeep { .. }
        )
    }
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> CheckoutError + '_ {
    move |source| CheckoutError::Io {
        path: path.to_owned(),
        source,
    }
}

impl Checkouts {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Checkouts {
            root: root.into(),
            limits: CheckoutLimits::default(),
        }
    }

    /// The same, checking out no commit larger than `limits`.
    pub fn with_limits(mut self, limits: CheckoutLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The checkout of `commit` of the repository `key` (plain path
    /// segments: `github/owner/name`), made from `repo` (its mirror) when
    /// missing. `prepare` runs on the fresh files before anyone uses them
    /// (the caller gives them to the sandbox user); the index is brought
    /// up to date with what it did.
    pub fn ensure(
        &self,
        key: &str,
        repo: &Repository,
        commit: Oid,
        prepare: &dyn Fn(&Path) -> io::Result<()>,
    ) -> Result<Checkout, CheckoutError> {
        let parent = self.root.join(key);
        std::fs::create_dir_all(&parent).map_err(at(&parent))?;
        let dir = parent.join(commit.to_string());
        let making = open_lock(&parent.join(format!("{commit}.make")))?;
        flock(&making, libc::LOCK_EX).map_err(at(&dir))?;
        if !dir.join("ready").exists() {
            make(repo, commit, &dir, prepare, self.limits)?;
        }
        // In use from here: removed only when no job holds it.
        let using = open_lock(&parent.join(format!("{commit}.use")))?;
        flock(&using, libc::LOCK_SH).map_err(at(&dir))?;
        drop(making);
        Ok(Checkout {
            commit,
            tree: dir.join("tree"),
            index: dir.join("repo.git").join("index"),
            _lock: using,
        })
    }

    /// Removes the checkouts of `key` that no job holds, but the `keep`
    /// most recently made ones and `except`.
    pub fn prune(&self, key: &str, keep: usize, except: Oid) -> usize {
        let parent = self.root.join(key);
        let mut made: Vec<(std::time::SystemTime, String)> = std::fs::read_dir(&parent)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("ready").exists())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let when = e.path().join("ready").metadata().ok()?.modified().ok()?;
                (name != except.to_string()).then_some((when, name))
            })
            .collect();
        made.sort();
        let mut removed = 0;
        let surplus = made.len().saturating_sub(keep);
        for (_, name) in made.into_iter().take(surplus) {
            let (Ok(making), Ok(using)) = (
                open_lock(&parent.join(format!("{name}.make"))),
                open_lock(&parent.join(format!("{name}.use"))),
            ) else {
                continue;
            };
            if flock(&making, libc::LOCK_EX).is_ok()
                && flock(&using, libc::LOCK_EX | libc::LOCK_NB).is_ok()
            {
                remove_tree(&parent.join(&name));
                removed += 1;
            }
        }
        removed
    }
}

/// Checks `commit` out into `dir`, under the make lock; `ready` is
/// written last, so what a crash left half made is made again.
fn make(
    repo: &Repository,
    commit: Oid,
    dir: &Path,
    prepare: &dyn Fn(&Path) -> io::Result<()>,
    limits: CheckoutLimits,
) -> Result<(), CheckoutError> {
    transport::isolate_from_host_config();
    let git = |source| CheckoutError::Git { commit, source };
    remove_tree(dir);
    let (tree_dir, git_dir) = (dir.join("tree"), dir.join("repo.git"));
    std::fs::create_dir_all(&tree_dir).map_err(at(&tree_dir))?;
    let copy = super::mirror::init_apart(&tree_dir, &git_dir, None).map_err(git)?;
    // The mirror's objects, read in place.
    let alternates = git_dir.join("objects/info/alternates");
    std::fs::write(
        &alternates,
        format!("{}\n", repo.path().join("objects").display()),
    )
    .map_err(at(&alternates))?;
    // Read through the alternates: the objects are the mirror's.
    let tree = copy.find_commit(commit).map_err(git)?.tree().map_err(git)?;
    measure(&copy, &tree, limits).map_err(|e| match e {
        Measured::Git(source) => git(source),
        Measured::Over(e) => e,
    })?;
    copy.set_head_detached(commit).map_err(git)?;
    copy.checkout_tree(
        tree.as_object(),
        Some(git2::build::CheckoutBuilder::new().force()),
    )
    .map_err(git)?;
    drop(tree);
    prepare(&tree_dir).map_err(at(&tree_dir))?;
    // The owner changed: the index learns the files' stat data again.
    let mut index = copy.index().map_err(git)?;
    index.update_all(["*"].iter(), None).map_err(git)?;
    index.write().map_err(git)?;
    drop(copy);
    let ready = dir.join("ready");
    std::fs::write(&ready, commit.to_string()).map_err(at(&ready))
}

enum Measured {
    Git(git2::Error),
    Over(CheckoutError),
}

/// Checks `tree` against `limits` by its objects' sizes, read from their
/// headers: no file is inflated to be measured.
fn measure(
    repo: &Repository,
    tree: &git2::Tree<'_>,
    limits: CheckoutLimits,
) -> Result<(), Measured> {
    let odb = repo.odb().map_err(Measured::Git)?;
    let (mut total, mut entries) = (0u64, 0usize);
    let mut problem = None;
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        entries += 1;
        if entries > limits.max_entries {
            problem = Some(Measured::Over(CheckoutError::TooManyEntries {
                max: limits.max_entries,
            }));
            return git2::TreeWalkResult::Abort;
        }
        // `dir` is `a/b/` for an entry two levels down.
        if dir.matches('/').count() >= limits.max_depth {
            problem = Some(Measured::Over(CheckoutError::TooDeep {
                max: limits.max_depth,
            }));
            return git2::TreeWalkResult::Abort;
        }
        // Files and links are written; submodules (commits) are not.
        if entry.kind() != Some(git2::ObjectType::Blob) {
            return git2::TreeWalkResult::Ok;
        }
        let size = match odb.read_header(entry.id()) {
            Ok((size, _)) => size as u64,
            Err(e) => {
                problem = Some(Measured::Git(e));
                return git2::TreeWalkResult::Abort;
            }
        };
        if size > limits.max_file_bytes {
            let name = String::from_utf8_lossy(entry.name_bytes());
            problem = Some(Measured::Over(CheckoutError::FileTooLarge {
                path: forgehand_text::one_line(&format!("{dir}{name}")).into_owned(),
                size,
                max: limits.max_file_bytes,
            }));
            return git2::TreeWalkResult::Abort;
        }
        total = total.saturating_add(size);
        if total > limits.max_total_bytes {
            problem = Some(Measured::Over(CheckoutError::TreeTooLarge {
                max: limits.max_total_bytes,
            }));
            return git2::TreeWalkResult::Abort;
        }
        git2::TreeWalkResult::Ok
    })
    .or_else(|e| {
        if problem.is_some() {
            Ok(())
        } else {
            Err(Measured::Git(e))
        }
    })?;
    problem.map_or(Ok(()), Err)
}

fn open_lock(path: &Path) -> Result<File, CheckoutError> {
    File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(at(path))
}

fn flock(file: &File, operation: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on a descriptor we hold; released when it closes.
    if unsafe { libc::flock(file.as_raw_fd(), operation) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn remove_tree(dir: &Path) {
    if std::fs::symlink_metadata(dir).is_ok() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Repository, Oid) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path().join("r")).unwrap();
        let mut index = repo.index().unwrap();
        for (path, text) in files {
            let full = repo.workdir().unwrap().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let commit = repo
            .commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
            .unwrap();
        drop(tree);
        (dir, repo, commit)
    }

    /// Red-team round 3, M2: a 1.2 GB file of zeros (a megabyte as a git
    /// object) cost the host its size in memory as libgit2 checked it
    /// out. A commit larger than the limits is refused from the objects'
    /// headers, before any file is written.
    #[test]
    fn a_commit_past_the_limits_is_refused_before_anything_is_written() {
        let big = "0".repeat(3000);
        let (dir, repo, commit) = repo_with(&[
            ("a.txt", "a\n"),
            ("sub/big\u{1b}.bin", &big),
            ("sub/c.txt", &big[..1500]),
        ]);
        let noop = |_: &Path| Ok(());
        let root = dir.path().join("checkouts");
        let limited = |max_file_bytes, max_total_bytes| {
            Checkouts::new(&root).with_limits(CheckoutLimits {
                max_file_bytes,
                max_total_bytes,
                ..CheckoutLimits::default()
            })
        };
        let err = limited(2000, u64::MAX)
            .ensure("k/o/r", &repo, commit, &noop)
            .unwrap_err();
        assert!(err.is_too_large(), "{err}");
        assert_eq!(
            err.to_string(),
            "sub/big\\u{1b}.bin is 3000 bytes, more than the 2000 bytes one checked-out file may have"
        );
        let made = root.join("k/o/r").join(commit.to_string());
        assert!(!made.join("tree/a.txt").exists() && !made.join("ready").exists());
        let err = limited(3000, 4000)
            .ensure("k/o/r", &repo, commit, &noop)
            .unwrap_err();
        assert!(
            matches!(err, CheckoutError::TreeTooLarge { max: 4000 }),
            "{err}"
        );
        let held = limited(3000, 4502)
            .ensure("k/o/r", &repo, commit, &noop)
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(held.tree.join("a.txt")).unwrap(),
            "a\n"
        );
    }

    /// Red-team round 4, F2: one subtree reused under many names made
    /// 700,000 files from 192 KB of objects, checked out for a minute and
    /// then refused by the gate as Forgehand's own fault; a tree 3,000
    /// levels deep likewise. Both are refused from the tree objects first.
    #[test]
    fn a_commit_with_too_many_entries_or_too_deep_is_refused_before_checkout() {
        let (dir, repo, commit) = repo_with(&[("a/b/c/d.txt", "d\n"), ("e.txt", "e\n")]);
        let noop = |_: &Path| Ok(());
        let root = dir.path().join("checkouts");
        let limited = |max_entries, max_depth| {
            Checkouts::new(&root).with_limits(CheckoutLimits {
                max_entries,
                max_depth,
                ..CheckoutLimits::default()
            })
        };
        // Entries: a/, a/b/, a/b/c/, a/b/c/d.txt, e.txt.
        let err = limited(4, 10)
            .ensure("k/o/r", &repo, commit, &noop)
            .unwrap_err();
        assert!(
            matches!(err, CheckoutError::TooManyEntries { max: 4 }),
            "{err}"
        );
        assert!(err.is_too_large());
        // d.txt is three directories down.
        let err = limited(10, 3)
            .ensure("k/o/r", &repo, commit, &noop)
            .unwrap_err();
        assert!(matches!(err, CheckoutError::TooDeep { max: 3 }), "{err}");
        let made = root.join("k/o/r").join(commit.to_string());
        assert!(!made.join("tree/e.txt").exists());
        let held = limited(5, 4).ensure("k/o/r", &repo, commit, &noop).unwrap();
        assert!(held.tree.join("a/b/c/d.txt").exists());
    }

    #[test]
    fn a_commit_is_checked_out_once_and_shared() {
        let (dir, repo, commit) = repo_with(&[("a.txt", "a\n"), ("src/b.rs", "fn b() {}\n")]);
        let checkouts = Checkouts::new(dir.path().join("checkouts"));
        let prepared = std::sync::atomic::AtomicUsize::new(0);
        let count = |_: &Path| {
            prepared.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        };
        let first = checkouts
            .ensure("github/acme/r", &repo, commit, &count)
            .unwrap();
        let second = checkouts
            .ensure("github/acme/r", &repo, commit, &count)
            .unwrap();
        assert_eq!(first.tree, second.tree);
        assert_eq!(
            prepared.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "made once"
        );
        assert_eq!(
            std::fs::read_to_string(first.tree.join("src/b.rs")).unwrap(),
            "fn b() {}\n"
        );
        assert!(
            !first.tree.join(".git").exists(),
            "no pointer to a git directory in the tree"
        );
        // The index knows the files: a status reads none of them as changed.
        let copy = Repository::open(first.tree.parent().unwrap().join("repo.git")).unwrap();
        assert!(copy.statuses(None).unwrap().is_empty());
    }

    #[test]
    fn only_unheld_old_checkouts_are_pruned() {
        let (dir, repo, one) = repo_with(&[("a", "1")]);
        let checkouts = Checkouts::new(dir.path().join("checkouts"));
        let noop = |_: &Path| Ok(());
        let held = checkouts.ensure("k/o/r", &repo, one, &noop).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let parent = repo.find_commit(one).unwrap();
        let two = repo
            .commit(
                Some("HEAD"),
                &sig,
                &sig,
                "2",
                &parent.tree().unwrap(),
                &[&parent],
            )
            .unwrap();
        drop(checkouts.ensure("k/o/r", &repo, two, &noop).unwrap());
        assert_eq!(
            checkouts.prune("k/o/r", 0, Oid::zero()),
            1,
            "the held one stays"
        );
        assert!(held.tree.exists());
        drop(held);
        assert_eq!(checkouts.prune("k/o/r", 0, Oid::zero()), 1);
        assert!(!dir
            .path()
            .join("checkouts/k/o/r")
            .join(one.to_string())
            .exists());
    }
}
