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
    /// What was written is not the commit: never marked ready, never
    /// used (an empty tree would become a commit deleting every file).
    #[error("the checkout of {commit} at {tree} does not hold the commit's files: {differs}")]
    Mismatch {
        commit: Oid,
        tree: PathBuf,
        differs: Box<Differs>,
    },
}

/// How a tree on disk differs from the commit it should hold: a few
/// paths of each kind, and how many in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Differs {
    /// In the commit, not on disk (or not as the commit has it).
    pub missing: Vec<String>,
    pub missing_count: usize,
    /// On disk, not in the commit.
    pub extra: Vec<String>,
    pub extra_count: usize,
    /// Anything else: the git directory's work tree elsewhere, the tree
    /// git builds from the files another than the commit's.
    pub other: Option<String>,
}

/// Paths of each kind a [`Differs`] names.
const SHOWN: usize = 5;

impl Differs {
    pub fn is_empty(&self) -> bool {
        self.missing_count == 0 && self.extra_count == 0 && self.other.is_none()
    }

    fn missing(&mut self, path: String) {
        self.missing_count += 1;
        if self.missing.len() < SHOWN {
            self.missing.push(path);
        }
    }

    fn extra(&mut self, path: String) {
        self.extra_count += 1;
        if self.extra.len() < SHOWN {
            self.extra.push(path);
        }
    }
}

impl std::fmt::Display for Differs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        let list = |count: usize, shown: &[String], what: &str| {
            let names: Vec<String> = shown
                .iter()
                .map(|p| forgehand_text::one_line(p).into_owned())
                .collect();
            let more = count - shown.len();
            format!(
                "{what}: {count} ({}{})",
                names.join(", "),
                if more > 0 {
                    format!(", and {more} more")
                } else {
                    String::new()
                }
            )
        };
        if self.missing_count > 0 {
            parts.push(list(
                self.missing_count,
                &self.missing,
                "the commit's files missing or different",
            ));
        }
        if self.extra_count > 0 {
            parts.push(list(
                self.extra_count,
                &self.extra,
                "files the commit does not have",
            ));
        }
        if let Some(other) = &self.other {
            parts.push(other.clone());
        }
        write!(f, "{}", parts.join("; "))
    }
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
        if !is_ready(&dir) {
            // Missing, half made, or made before checkouts were verified
            // (releases before 0.2 left some empty, their files inside
            // their own git directories): made again, once.
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
            .filter(|e| is_ready(&e.path()))
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

/// What `ready` holds once the checkout was verified against its commit
/// ([`verify`]); a `ready` without it was written by a release that did
/// not verify, and the checkout is made again.
const VERIFIED: &str = "verified: the files are the commit's";

/// Whether the checkout at `dir` is made and verified.
fn is_ready(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("ready")).is_ok_and(|text| text.lines().any(|l| l == VERIFIED))
}

/// Checks `commit` out into `dir`, under the make lock, and verifies what
/// was written against the commit; `ready` is written last, so what a
/// crash left half made is made again.
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
    // libgit2 resolves a relative work tree against the git directory.
    let tree_dir = tree_dir.canonicalize().map_err(at(&tree_dir))?;
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
    let differs = verify(&copy, &tree_dir, commit).map_err(git)?;
    drop(copy);
    if !differs.is_empty() {
        remove_tree(dir);
        return Err(CheckoutError::Mismatch {
            commit,
            tree: tree_dir,
            differs: Box::new(differs),
        });
    }
    let ready = dir.join("ready");
    std::fs::write(&ready, format!("{commit}\n{VERIFIED}\n")).map_err(at(&ready))
}

/// How the files at `tree_dir` differ from `commit`: the git directory's
/// work tree must be `tree_dir` itself; the tree git builds from the
/// index (brought up to date with the files, which reads them through
/// the repository's filters, so line endings git converts are no
/// difference) must be the commit's; every entry of the index must be
/// on disk as a file or link of its size, and nothing else may be.
fn verify(copy: &Repository, tree_dir: &Path, commit: Oid) -> Result<Differs, git2::Error> {
    let mut differs = Differs::default();
    let workdir = copy
        .workdir()
        .map(|w| w.canonicalize().unwrap_or_else(|_| w.to_owned()));
    if workdir.as_deref() != Some(tree_dir) {
        differs.other = Some(format!(
            "the git directory's work tree is {}, not the checkout's tree",
            workdir.map_or("none".into(), |w| w.display().to_string())
        ));
        return Ok(differs);
    }
    let wanted = copy.find_commit(commit)?.tree_id();
    let mut index = copy.index()?;
    let built = index.write_tree()?;
    let on_disk = entries_differ(&index, tree_dir, &mut differs);
    if let Err(e) = on_disk {
        differs.other = Some(format!("reading the tree: {e}"));
    }
    if built != wanted && differs.is_empty() {
        differs.other = Some(format!(
            "git reads the files as tree {built}, the commit's is {wanted}"
        ));
    }
    Ok(differs)
}

/// Every index entry against what is at its path under `tree`, and every
/// file under `tree` against the index.
fn entries_differ(index: &git2::Index, tree: &Path, differs: &mut Differs) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let mut known = std::collections::HashSet::new();
    for entry in index.iter() {
        let name = String::from_utf8_lossy(&entry.path).into_owned();
        let path = tree.join(std::ffi::OsStr::from_bytes(&entry.path));
        known.insert(entry.path.clone());
        // Submodules (gitlinks) are directories git does not fill.
        if entry.mode == 0o160000 {
            continue;
        }
        let fits = std::fs::symlink_metadata(&path).is_ok_and(|meta| {
            let link = entry.mode == 0o120000;
            (link == meta.file_type().is_symlink())
                && (link || meta.is_file())
                && (link || meta.size() as u32 == entry.file_size)
        });
        if !fits {
            differs.missing(name);
        }
    }
    let mut stack = vec![tree.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            let relative = path.strip_prefix(tree).unwrap_or(&path);
            let bytes = relative.as_os_str().as_bytes().to_vec();
            if kind.is_dir() {
                // A submodule's empty directory, or one holding files.
                if !known.contains(&bytes) {
                    stack.push(path);
                }
            } else if !known.contains(&bytes) {
                differs.extra(relative.to_string_lossy().into_owned());
            }
        }
    }
    Ok(())
}

/// What a job's working copy at `tree` lacks of its git directory's
/// index: a file or link of the index missing, of another kind or size.
/// Cheap (one `lstat` a file): what the job's agent starts from is the
/// commit, or the job stops before the agent runs.
pub fn working_copy_differs(repo: &Repository, tree: &Path) -> Result<Differs, git2::Error> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let mut differs = Differs::default();
    let index = repo.index()?;
    for entry in index.iter() {
        if entry.mode == 0o160000 {
            continue;
        }
        let path = tree.join(std::ffi::OsStr::from_bytes(&entry.path));
        let link = entry.mode == 0o120000;
        let fits = std::fs::symlink_metadata(&path).is_ok_and(|meta| {
            (link == meta.file_type().is_symlink())
                && (link || (meta.is_file() && meta.size() as u32 == entry.file_size))
        });
        if !fits {
            differs.missing(String::from_utf8_lossy(&entry.path).into_owned());
        }
    }
    Ok(differs)
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

    /// Issue 24: releases before checkouts were verified left some
    /// empty (their files inside `repo.git/forgehand-data/…`) and marked
    /// them ready. Such a checkout is made again, once, and what the old
    /// code left inside its git directory goes with it.
    #[test]
    fn a_checkout_made_before_verification_is_made_again_once() {
        let (dir, repo, commit) = repo_with(&[("README.md", "hi\n"), ("src/a.py", "a = 1\n")]);
        let root = dir.path().join("checkouts");
        let made = root.join("k/o/r").join(commit.to_string());
        let stray = made.join("repo.git/forgehand-data/jobs/checkouts/k/o/r/x/tree");
        std::fs::create_dir_all(&stray).unwrap();
        std::fs::write(stray.join("README.md"), "hi\n").unwrap();
        std::fs::create_dir_all(made.join("tree")).unwrap();
        std::fs::write(made.join("ready"), commit.to_string()).unwrap();
        let made_count = std::sync::atomic::AtomicUsize::new(0);
        let count = |_: &Path| {
            made_count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        };
        let checkouts = Checkouts::new(&root);
        let held = checkouts.ensure("k/o/r", &repo, commit, &count).unwrap();
        assert_eq!(
            std::fs::read_to_string(held.tree.join("src/a.py")).unwrap(),
            "a = 1\n"
        );
        assert!(!made.join("repo.git/forgehand-data").exists());
        drop(held);
        checkouts.ensure("k/o/r", &repo, commit, &count).unwrap();
        assert_eq!(
            made_count.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "made again once"
        );
    }

    /// What differs between a tree on disk and its commit is found and
    /// named: missing, changed and extra files, and a git directory whose
    /// work tree is elsewhere.
    #[test]
    fn a_tree_that_is_not_the_commit_is_named() {
        let (dir, repo, commit) = repo_with(&[
            ("README.md", "hi\n"),
            ("src/a.py", "a = 1\n"),
            ("src/b.py", "b = 2\n"),
        ]);
        let checkouts = Checkouts::new(dir.path().join("checkouts"));
        let noop = |_: &Path| Ok(());
        let held = checkouts.ensure("k/o/r", &repo, commit, &noop).unwrap();
        let copy = Repository::open(held.tree.parent().unwrap().join("repo.git")).unwrap();
        assert!(verify(&copy, &held.tree, commit).unwrap().is_empty());
        assert!(working_copy_differs(&copy, &held.tree).unwrap().is_empty());
        std::fs::remove_file(held.tree.join("README.md")).unwrap();
        std::fs::write(held.tree.join("src/b.py"), "b = 22\n").unwrap();
        std::fs::write(held.tree.join("stray.txt"), "x").unwrap();
        let differs = working_copy_differs(&copy, &held.tree).unwrap();
        assert_eq!(differs.missing, ["README.md", "src/b.py"]);
        let differs = verify(&copy, &held.tree, commit).unwrap();
        assert_eq!(differs.extra, ["stray.txt"]);
        assert_eq!(differs.missing_count, 2, "{differs}");
        assert_eq!(
            differs.to_string(),
            "the commit's files missing or different: 2 (README.md, src/b.py); files the commit does not have: 1 (stray.txt)"
        );
        let elsewhere = verify(&copy, &dir.path().join("checkouts"), commit).unwrap();
        assert!(elsewhere.other.unwrap().contains("work tree is"));
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
