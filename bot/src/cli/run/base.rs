//! What `forgehand run` starts from: the repository given, its
//! checked-out branch's commit, and what the working tree holds that the
//! commit does not. Everything wrong here is the user's to fix, and said
//! in their words (`Reason::Input`), never as libgit2's.

use std::path::{Path, PathBuf};

use forgehand_forge::git::Mirror;

/// Why a run cannot start from what it was given.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("--repo {path}: {source}")]
    Missing {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is not a git repository (run `git init` there, or give --repo the repository's directory)")]
    NotARepository(PathBuf),
    #[error(
        "the repository at {0} has no commit yet: commit what the agent should start from first"
    )]
    NoCommit(PathBuf),
    #[error("the repository's HEAD is detached: check out a branch to start from")]
    Detached,
    #[error("the working tree has uncommitted changes the agent would not see ({}): commit or stash them, or run with --include-uncommitted to work on them too", .0.join(", "))]
    Uncommitted(Vec<String>),
    #[error("`git status` in {0} failed: {1}")]
    Status(PathBuf, String),
    #[error("the working tree at {0} could not be committed for the run: {1}")]
    Commit(PathBuf, String),
    #[error("Forgehand's data would be kept inside the repository it works on ({listed}): set server.data_dir in the configuration to a directory outside {repo}")]
    DataInside { listed: String, repo: PathBuf },
}

/// The repository and the commit a run starts from.
pub struct Base {
    pub path: PathBuf,
    pub source: Mirror,
    /// The checked-out branch's commit, or with `--include-uncommitted` a
    /// commit of the working tree on top of it (on no branch).
    pub commit: git2::Oid,
    /// What `--include-uncommitted` took in, as `git status --short`
    /// shows it; empty otherwise.
    pub included: Vec<String>,
}

/// Uncommitted paths listed before the rest is counted.
const LISTED: usize = 10;

/// The repository at `path` as a run's base, refusing a working tree
/// with uncommitted changes unless `include_uncommitted`.
pub fn open(path: &Path, include_uncommitted: bool) -> Result<Base, InputError> {
    let path = path.canonicalize().map_err(|source| InputError::Missing {
        path: path.to_owned(),
        source,
    })?;
    let source = Mirror::local(&path).map_err(|_| InputError::NotARepository(path.clone()))?;
    let head = match source.repo.head() {
        Ok(head) => head,
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => {
            return Err(InputError::NoCommit(path));
        }
        Err(_) => return Err(InputError::NotARepository(path)),
    };
    if !head.is_branch() {
        return Err(InputError::Detached);
    }
    let head_commit = head
        .peel_to_commit()
        .map_err(|_| InputError::NoCommit(path.clone()))?
        .id();
    drop(head);
    let changes =
        uncommitted(&path).map_err(|e| InputError::Status(path.clone(), e.to_string()))?;
    if changes.is_empty() {
        return Ok(Base {
            path,
            source,
            commit: head_commit,
            included: Vec::new(),
        });
    }
    if !include_uncommitted {
        let mut shown: Vec<String> = changes.iter().take(LISTED).cloned().collect();
        if changes.len() > LISTED {
            shown.push(format!("and {} more", changes.len() - LISTED));
        }
        return Err(InputError::Uncommitted(shown));
    }
    let commit = commit_working_tree(&path, &source.repo, head_commit)
        .map_err(|e| InputError::Commit(path.clone(), e.to_string()))?;
    Ok(Base {
        path,
        source,
        commit,
        included: changes,
    })
}

/// The working tree's changes against `HEAD`, ignored files left out, as
/// `git status --short` lists them (`M calc.py`, `?? notes.txt`), sorted
/// by path.
///
/// Asked of git itself, not libgit2: libgit2 knows none of the
/// repository's filters (`working-tree-encoding`, LFS's clean filter), so
/// a file whose checkout differs from its blob read as modified whenever
/// its timestamps sent libgit2 to the contents — a clean clone refused
/// or not depending on the second it was checked out in. What counts is
/// what the user's own `git status` says.
fn uncommitted(path: &Path) -> std::io::Result<Vec<String>> {
    let out = git(
        path,
        None,
        &[
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=all",
            "--no-renames",
        ],
    )?;
    let mut entries: Vec<(String, &str)> = out
        .split(|b| *b == 0)
        .filter(|entry| entry.len() > 3)
        .map(|entry| {
            let (x, y) = (entry[0], entry[1]);
            let code = match (x, y) {
                (b'?', b'?') => "??",
                (b'D', _) | (_, b'D') => "D",
                (b'A', _) => "A",
                _ => "M",
            };
            (String::from_utf8_lossy(&entry[3..]).into_owned(), code)
        })
        .collect();
    entries.sort();
    Ok(entries
        .into_iter()
        .map(|(name, code)| format!("{code} {}", forgehand_text::one_line(&name)))
        .collect())
}

/// `git ARGS` in the repository at `path` (with `index` as its index
/// when given), its standard output; a failure is git's own message.
/// `--no-optional-locks`: the user's index is not rewritten by looking.
fn git(path: &Path, index: Option<&Path>, args: &[&str]) -> std::io::Result<Vec<u8>> {
    let mut command = std::process::Command::new("git");
    command
        .arg("--no-optional-locks")
        .arg("-C")
        .arg(path)
        .args(args)
        // The repository is the one given, whatever the caller's shell
        // points git at.
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(std::process::Stdio::null());
    if let Some(index) = index {
        command.env("GIT_INDEX_FILE", index);
    }
    let out = command.output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(out.stdout)
}

/// A commit of the whole working tree (tracked changes and untracked,
/// not ignored files) on top of `head`, its tree made by git itself in an
/// index of its own: what is committed is what `git status` listed, the
/// repository's filters applied (libgit2 knows none, and committed a
/// `working-tree-encoding` file's checkout bytes as its contents), and
/// the user's index, branch and files are left as they were.
fn commit_working_tree(
    path: &Path,
    repo: &git2::Repository,
    head: git2::Oid,
) -> Result<git2::Oid, WorkingTreeError> {
    let scratch = tempfile::tempdir()?;
    let index = scratch.path().join("index");
    git(path, Some(&index), &["read-tree", &head.to_string()])?;
    git(path, Some(&index), &["add", "--all", "--", "."])?;
    let tree = git(path, Some(&index), &["write-tree"])?;
    let tree = git2::Oid::from_str(String::from_utf8_lossy(&tree).trim())?;
    let tree = repo.find_tree(tree)?;
    let signature = git2::Signature::now("forgehand run", "forgehand@localhost")?;
    let parent = repo.find_commit(head)?;
    Ok(repo.commit(
        None,
        &signature,
        &signature,
        "The working tree's uncommitted changes (forgehand run --include-uncommitted)",
        &tree,
        &[&parent],
    )?)
}

/// Why the working tree could not be committed.
#[derive(Debug, thiserror::Error)]
enum WorkingTreeError {
    #[error("{0}")]
    Git(#[from] std::io::Error),
    #[error("{0}")]
    Libgit2(#[from] git2::Error),
}

/// The configured data paths inside the repository, refused.
pub fn data_outside(config: &crate::config::Config, repo: &Path) -> Result<(), InputError> {
    let inside = config.data_inside(repo);
    if inside.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = inside
        .iter()
        .map(|(key, path)| format!("{key} = {}", path.display()))
        .collect();
    Err(InputError::DataInside {
        listed: listed.join(", "),
        repo: repo.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with_commit() -> (tempfile::TempDir, git2::Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        std::fs::write(dir.path().join("calc.py"), "x = 1\n").unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("calc.py")).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
            .unwrap();
        drop(tree);
        (dir, repo)
    }

    /// Issue 24, finding 7: a repository with no commit showed
    /// libgit2's `class=Reference (4); code=UnbornBranch (-9)`, and a
    /// directory that is not a repository said `infra`.
    #[test]
    fn what_cannot_be_started_from_is_said_plainly() {
        let dir = tempfile::tempdir().unwrap();
        let err = open(dir.path(), false).err().unwrap();
        assert!(matches!(err, InputError::NotARepository(_)), "{err}");
        assert!(err.to_string().ends_with("is not a git repository (run `git init` there, or give --repo the repository's directory)"));
        git2::Repository::init(dir.path()).unwrap();
        let err = open(dir.path(), false).err().unwrap();
        assert!(matches!(err, InputError::NoCommit(_)), "{err}");
        assert!(!err.to_string().contains("class="), "{err}");
        let err = open(&dir.path().join("nope"), false).err().unwrap();
        assert!(err.to_string().starts_with("--repo "), "{err}");
    }

    /// Issue 24, finding 5: an uncommitted `.forgehand.toml` or edit was
    /// silently ignored.
    #[test]
    fn a_dirty_tree_is_refused_or_taken_in_when_asked() {
        let (dir, repo) = repo_with_commit();
        let head = repo.head().unwrap().target().unwrap();
        std::fs::write(dir.path().join("calc.py"), "x = 2\n").unwrap();
        std::fs::write(dir.path().join(".forgehand.toml"), "[environment]\n").unwrap();
        std::fs::write(dir.path().join(".gitignore"), "build/\n").unwrap();
        std::fs::create_dir(dir.path().join("build")).unwrap();
        std::fs::write(dir.path().join("build/out.o"), "o").unwrap();
        let err = open(dir.path(), false).err().unwrap();
        assert_eq!(
            err.to_string(),
            "the working tree has uncommitted changes the agent would not see (?? .forgehand.toml, ?? .gitignore, M calc.py): commit or stash them, or run with --include-uncommitted to work on them too"
        );
        let base = open(dir.path(), true).unwrap();
        assert_eq!(
            base.included,
            ["?? .forgehand.toml", "?? .gitignore", "M calc.py"]
        );
        assert_ne!(base.commit, head);
        let commit = repo.find_commit(base.commit).unwrap();
        assert_eq!(commit.parent_id(0).unwrap(), head);
        let tree = commit.tree().unwrap();
        assert!(tree.get_path(Path::new(".forgehand.toml")).is_ok());
        assert!(
            tree.get_path(Path::new("build/out.o")).is_err(),
            "ignored files stay out"
        );
        // The user's branch, index and files are as they were.
        assert_eq!(repo.head().unwrap().target().unwrap(), head);
        let statuses = uncommitted(dir.path()).unwrap();
        assert_eq!(statuses.len(), 3, "{statuses:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("calc.py")).unwrap(),
            "x = 2\n"
        );
    }

    /// CI, stop 33: a clone whose checkout differs from its blobs (here
    /// `working-tree-encoding`, which libgit2 does not apply) was refused
    /// as uncommitted or not depending on its files' timestamps. New
    /// timestamps send any status to the contents: git's own, which
    /// converts them back, says clean, and so must the run.
    #[test]
    fn a_checkout_git_calls_clean_is_clean_whatever_its_timestamps() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(dir.path().join("calc.py"), "x = 1\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", "c"]);
        // Declared after the file was committed as UTF-8.
        std::fs::write(
            dir.path().join(".gitattributes"),
            "*.py working-tree-encoding=UTF-16LE\n",
        )
        .unwrap();
        git(&["add", ".gitattributes"]);
        git(&["commit", "-qm", "attributes"]);
        std::fs::remove_file(dir.path().join("calc.py")).unwrap();
        git(&["checkout", "--", "calc.py"]);
        let written = std::fs::read(dir.path().join("calc.py")).unwrap();
        assert_eq!(written.len(), 12, "checked out as UTF-16: {written:?}");
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(dir.path().join("calc.py"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        let index = std::fs::read(dir.path().join(".git/index")).unwrap();
        let base = open(dir.path(), false).unwrap_or_else(|e| panic!("{e}"));
        assert!(base.included.is_empty());
        assert_eq!(
            std::fs::read(dir.path().join(".git/index")).unwrap(),
            index,
            "looking does not rewrite the user's index"
        );

        // Taken in with a new file: what is committed is what git would
        // commit — the encoded file's blob as it was, not its checkout's
        // UTF-16 bytes (libgit2 committed those).
        std::fs::write(dir.path().join("notes.txt"), "n\n").unwrap();
        let base = open(dir.path(), true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(base.included, ["?? notes.txt"]);
        let repo = git2::Repository::open(dir.path()).unwrap();
        let tree = repo.find_commit(base.commit).unwrap().tree().unwrap();
        let head = repo.head().unwrap().peel_to_tree().unwrap();
        assert_eq!(
            tree.get_path(Path::new("calc.py")).unwrap().id(),
            head.get_path(Path::new("calc.py")).unwrap().id()
        );
        assert!(tree.get_path(Path::new("notes.txt")).is_ok());
        assert_eq!(
            std::fs::read(dir.path().join(".git/index")).unwrap(),
            index,
            "taking the tree in does not touch the user's index either"
        );
    }
}
