//! A working copy's changes against its commit, path by path, with their
//! modes, and the two versions of a file for the kinds judged by content.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use git2::{Delta, DiffOptions, Repository};

use super::{Contents, PathChange, Status};

/// Most bytes read of one version of a manifest or lockfile: larger ones
/// are not judged, and held.
const MAX_READ: u64 = 32 << 20;

/// Each path the working tree changes against `HEAD` (new files
/// included, ignored ones not), once: a rename is its old path removed
/// and its new one added.
pub fn working_changes(repo: &Repository) -> Result<Vec<PathChange>, git2::Error> {
    let head = repo.head().ok().and_then(|h| h.peel_to_tree().ok());
    let mut options = DiffOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_typechange(true)
        .ignore_submodules(false);
    let diff = repo.diff_tree_to_workdir_with_index(head.as_ref(), Some(&mut options))?;
    let mut out = Vec::new();
    for delta in diff.deltas() {
        let status = match delta.status() {
            Delta::Added | Delta::Untracked | Delta::Copied => Status::Added,
            Delta::Deleted => Status::Deleted,
            Delta::Modified | Delta::Typechange | Delta::Renamed => Status::Modified,
            _ => continue,
        };
        let mode = |m: git2::FileMode| -> Option<u32> {
            match u32::from(m) {
                0 => None,
                other => Some(other),
            }
        };
        let (old, new) = (delta.old_file(), delta.new_file());
        // The name as it is, for the classification (its folding drops
        // zero-width characters: an escaped form would keep them as text
        // and judge `tests/\u{200c}Makefile` a file of its own); shown
        // escaped only where it is displayed.
        let path = new
            .path()
            .or(old.path())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push(PathChange {
            path,
            status,
            old_mode: if status == Status::Added {
                None
            } else {
                mode(old.mode())
            },
            new_mode: if status == Status::Deleted {
                None
            } else {
                mode(new.mode())
            },
        });
    }
    Ok(out)
}

/// The old version from `HEAD`'s tree, the new one from the working tree
/// (a regular file only: a link is never followed).
pub struct WorkingContents<'r> {
    pub repo: &'r Repository,
    pub tree: PathBuf,
    /// What the base tree's agent files import, read once when asked.
    pub imported: std::cell::OnceCell<super::imports::Imported>,
}

impl<'r> WorkingContents<'r> {
    pub fn new(repo: &'r Repository, tree: PathBuf) -> Self {
        WorkingContents {
            repo,
            tree,
            imported: std::cell::OnceCell::new(),
        }
    }
}

/// `tree`'s directory `dir` (`""`: the tree itself), when it is one.
fn subtree<'r>(repo: &'r Repository, tree: &git2::Tree<'r>, dir: &str) -> Option<git2::Tree<'r>> {
    if dir.is_empty() {
        return Some(tree.clone());
    }
    tree.get_path(Path::new(dir))
        .ok()
        .filter(|e| e.kind() == Some(git2::ObjectType::Tree))
        .and_then(|e| repo.find_tree(e.id()).ok())
}

/// The folded names of the files directly in `tree`'s directory `dir`.
fn file_names(repo: &Repository, tree: &git2::Tree<'_>, dir: &str) -> Vec<String> {
    let Some(sub) = subtree(repo, tree, dir) else {
        return Vec::new();
    };
    sub.iter()
        .filter(|entry| entry.kind() == Some(git2::ObjectType::Blob))
        .map(|entry| super::names::fold(&String::from_utf8_lossy(entry.name_bytes())))
        .collect()
}

/// Whether `tree`'s directory `dir` (`""`: its root) holds a file whose
/// folded name ends with `.ext` (folded).
pub fn had_kind(repo: &Repository, tree: &git2::Tree<'_>, dir: &str, ext: &str) -> bool {
    let suffix = format!(".{ext}");
    file_names(repo, tree, dir)
        .iter()
        .any(|name| name.ends_with(&suffix))
}

/// Whether `tree`'s directory `dir` (`""`: its root) holds a known
/// manifest.
pub fn holds_manifest(repo: &Repository, tree: &git2::Tree<'_>, dir: &str) -> bool {
    file_names(repo, tree, dir)
        .iter()
        .any(|name| super::known::MANIFESTS.iter().any(|m| m.name == name))
}

/// Whether `tree`'s directory `dir`, at any depth, holds a file of kind
/// `ext` a documentation builder would run: documentation that is not
/// plain (bounded: 20,000 entries walked, 64 files read, each as far as
/// the gate reads).
pub fn had_code_kind(repo: &Repository, tree: &git2::Tree<'_>, dir: &str, ext: &str) -> bool {
    let Some(sub) = subtree(repo, tree, dir) else {
        return false;
    };
    let suffix = format!(".{ext}");
    let (mut walked, mut read, mut found) = (0usize, 0usize, false);
    let _ = sub.walk(git2::TreeWalkMode::PreOrder, |_, entry| {
        walked += 1;
        if found || walked > 20_000 || read >= 64 {
            return git2::TreeWalkResult::Abort;
        }
        let name = super::names::fold(&String::from_utf8_lossy(entry.name_bytes()));
        if entry.kind() != Some(git2::ObjectType::Blob) || !name.ends_with(&suffix) {
            return git2::TreeWalkResult::Ok;
        }
        read += 1;
        if let Ok(blob) = repo.find_blob(entry.id()) {
            let bytes = &blob.content()[..blob.size().min(MAX_READ as usize)];
            found = super::markup::runs_as_code(Some(ext), None, &String::from_utf8_lossy(bytes))
                .is_some();
        }
        git2::TreeWalkResult::Ok
    });
    found
}

impl WorkingContents<'_> {
    /// `HEAD`'s tree: the base the change is judged against.
    fn base(&self) -> Option<git2::Tree<'_>> {
        self.repo.head().ok()?.peel_to_tree().ok()
    }
}

impl Contents for WorkingContents<'_> {
    fn had_code_kind(&self, dir: &str, ext: &str) -> bool {
        self.base()
            .is_some_and(|tree| had_code_kind(self.repo, &tree, dir, ext))
    }

    fn is_project_root(&self, dir: &str) -> bool {
        self.base()
            .is_some_and(|tree| holds_manifest(self.repo, &tree, dir))
    }

    fn before(&self, path: &str) -> Option<Vec<u8>> {
        let tree = self.base()?;
        let entry = tree.get_path(Path::new(path)).ok()?;
        let blob = self.repo.find_blob(entry.id()).ok()?;
        (blob.size() as u64 <= MAX_READ).then(|| blob.content().to_vec())
    }

    fn had_kind(&self, dir: &str, ext: &str) -> bool {
        self.base()
            .is_some_and(|tree| had_kind(self.repo, &tree, dir, ext))
    }

    fn imported_by_agents(&self, path: &str) -> bool {
        let imported = self.imported.get_or_init(|| match self.base() {
            Some(tree) => super::imports::agent_imports(self.repo, &tree),
            None => Default::default(),
        });
        imported.contains(&super::names::FoldedPath::new(path).joined())
    }

    fn after(&self, path: &str) -> Option<Vec<u8>> {
        let full = self.tree.join(path);
        let meta = std::fs::symlink_metadata(&full).ok()?;
        if !meta.is_file() || meta.size() > MAX_READ {
            return None;
        }
        let mut bytes = Vec::new();
        std::fs::File::open(&full)
            .ok()?
            .take(MAX_READ)
            .read_to_end(&mut bytes)
            .ok()?;
        Some(bytes)
    }
}

/// `path` (relative to the tree's root) as a change of the working tree
/// against `HEAD`, for `forgehand gate explain`: modes from `HEAD`'s
/// entry and from the file as it is (a link not followed); a path in
/// neither is taken as a new regular file, judged by its name. `None`
/// for a directory.
pub fn change_of(repo: &Repository, tree: &Path, path: &str) -> Option<PathChange> {
    let old_mode = repo
        .head()
        .ok()
        .and_then(|h| h.peel_to_tree().ok())
        .and_then(|t| t.get_path(Path::new(path)).ok())
        .map(|entry| entry.filemode() as u32);
    let new_mode = match std::fs::symlink_metadata(tree.join(path)) {
        Ok(meta) if meta.is_dir() => return None,
        Ok(meta) if meta.file_type().is_symlink() => Some(0o120000),
        Ok(meta) if meta.mode() & 0o111 != 0 => Some(0o100755),
        Ok(_) => Some(0o100644),
        Err(_) => None,
    };
    let (status, new_mode) = match (old_mode, new_mode) {
        (Some(_), Some(_)) => (Status::Modified, new_mode),
        (Some(_), None) => (Status::Deleted, None),
        (None, _) => (Status::Added, new_mode.or(Some(0o100644))),
    };
    Some(PathChange {
        path: path.to_owned(),
        status,
        old_mode,
        new_mode,
    })
}
