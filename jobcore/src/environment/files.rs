//! A commit's files as the environment's declaration reads them: from the
//! git objects (the mirror's, or a local repository's), never from a
//! working tree the agent could have changed.

use forgehand_environment::spec::{FilesError, RepoFiles};
use git2::{ObjectType, Repository, Tree};

/// The files of one commit's tree.
pub struct CommitFiles<'r> {
    repo: &'r Repository,
    tree: Tree<'r>,
}

impl<'r> CommitFiles<'r> {
    pub fn new(repo: &'r Repository, commit: git2::Oid) -> Result<Self, git2::Error> {
        let tree = repo.find_commit(commit)?.tree()?;
        Ok(CommitFiles { repo, tree })
    }

    /// The blob at `path`, when it is a regular file (not a link, a
    /// submodule or a directory).
    fn blob(&self, path: &str) -> Option<git2::Oid> {
        let entry = self.tree.get_path(std::path::Path::new(path)).ok()?;
        let regular = matches!(entry.filemode(), 0o100644 | 0o100755);
        (entry.kind() == Some(ObjectType::Blob) && regular).then(|| entry.id())
    }
}

impl RepoFiles for CommitFiles<'_> {
    fn read(&self, path: &str, max: u64) -> Result<Option<Vec<u8>>, FilesError> {
        let Some(id) = self.blob(path) else {
            return Ok(None);
        };
        let read_error = |e: git2::Error| FilesError::Read {
            path: path.to_owned(),
            source: Box::new(e),
        };
        // The object's size from its header first: a large blob is never
        // read whole.
        let odb = self.repo.odb().map_err(read_error)?;
        let (size, _) = odb.read_header(id).map_err(read_error)?;
        if size as u64 > max {
            return Err(FilesError::TooLarge {
                path: path.to_owned(),
                max,
            });
        }
        let blob = self.repo.find_blob(id).map_err(read_error)?;
        Ok(Some(blob.content().to_vec()))
    }

    fn exists(&self, path: &str) -> bool {
        self.blob(path).is_some()
    }

    fn is_dir(&self, path: &str) -> bool {
        self.tree
            .get_path(std::path::Path::new(path))
            .is_ok_and(|entry| entry.kind() == Some(ObjectType::Tree))
    }

    fn tree_id(&self, dir: &str) -> Option<String> {
        if dir.is_empty() {
            return Some(self.tree.id().to_string());
        }
        let entry = self.tree.get_path(std::path::Path::new(dir)).ok()?;
        (entry.kind() == Some(ObjectType::Tree)).then(|| entry.id().to_string())
    }

    /// Links count too: a `x.pyc` may be a link to a file of any name.
    fn ending_with(
        &self,
        suffixes: &[&str],
        max_entries: usize,
    ) -> Result<Vec<String>, FilesError> {
        let mut found = Vec::new();
        let mut entries = 0usize;
        let walked = self.tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            entries += 1;
            if entries > max_entries {
                return git2::TreeWalkResult::Abort;
            }
            let regular = matches!(entry.filemode(), 0o100644 | 0o100755 | 0o120000);
            let name = String::from_utf8_lossy(entry.name_bytes());
            if regular && suffixes.iter().any(|s| name.ends_with(s)) {
                found.push(format!("{dir}{name}"));
            }
            git2::TreeWalkResult::Ok
        });
        if entries > max_entries {
            return Err(FilesError::TooManyEntries { max: max_entries });
        }
        walked.map_err(|e| FilesError::Read {
            path: "the base commit's tree".to_owned(),
            source: Box::new(e),
        })?;
        found.sort();
        Ok(found)
    }

    fn list(&self, dir: &str, max: usize) -> Vec<String> {
        let names = |tree: &Tree<'_>| -> Vec<String> {
            tree.iter()
                .take(max)
                .map(|entry| String::from_utf8_lossy(entry.name_bytes()).into_owned())
                .collect()
        };
        if dir.is_empty() {
            return names(&self.tree);
        }
        let Ok(entry) = self.tree.get_path(std::path::Path::new(dir)) else {
            return Vec::new();
        };
        match entry.to_object(self.repo).map(|o| o.into_tree()) {
            Ok(Ok(tree)) => names(&tree),
            _ => Vec::new(),
        }
    }

    fn executable(&self, path: &str) -> bool {
        self.tree
            .get_path(std::path::Path::new(path))
            .is_ok_and(|entry| entry.filemode() == 0o100755)
    }

    fn link(&self, path: &str) -> Option<String> {
        let entry = self.tree.get_path(std::path::Path::new(path)).ok()?;
        if entry.filemode() != 0o120000 {
            return None;
        }
        // A link's target is a path: short, but bounded all the same, and
        // measured before it is read (git stores any blob as a link).
        let (size, _) = self.repo.odb().ok()?.read_header(entry.id()).ok()?;
        if size > 4096 {
            return None;
        }
        let blob = self.repo.find_blob(entry.id()).ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    }
}

/// The repository's own `[gate]` rules, from the `.forgehand.toml` of the
/// commit `files` reads (the base branch's: never the agent's copy).
pub fn repo_rules(
    files: &CommitFiles<'_>,
) -> Result<forgehand_gate::RepoRules, forgehand_gate::classify::RepoRulesError> {
    const MAX: u64 = 1 << 20;
    let bad = |e: &dyn std::fmt::Display| forgehand_gate::classify::RepoRulesError(e.to_string());
    match files.read(".forgehand.toml", MAX).map_err(|e| bad(&e))? {
        Some(bytes) => forgehand_gate::RepoRules::parse(&bytes),
        None => Ok(forgehand_gate::RepoRules::none()),
    }
}
