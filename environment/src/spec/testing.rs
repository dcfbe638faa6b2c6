//! A repository as a map, for tests; it records every read and its bound.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::{FilesError, RepoFiles};

enum Entry {
    Bytes(Vec<u8>),
    /// A file of this size whose contents must never be read: a reader
    /// bounded below its size gets `TooLarge`; one that is not, a panic.
    Huge(u64),
    /// A file whose reading fails.
    Broken,
    /// A symbolic link, to this target.
    Link(String),
}

#[derive(Default)]
pub(crate) struct MapFiles {
    files: BTreeMap<String, Entry>,
    executable: std::collections::BTreeSet<String>,
    reads: RefCell<Vec<(String, u64)>>,
}

impl MapFiles {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(self, path: &str, text: &str) -> Self {
        self.with_bytes(path, text.as_bytes().to_vec())
    }

    pub fn with_bytes(mut self, path: &str, bytes: Vec<u8>) -> Self {
        self.files.insert(path.to_owned(), Entry::Bytes(bytes));
        self
    }

    /// `path` (present) made executable.
    pub fn executable(mut self, path: &str) -> Self {
        self.executable.insert(path.to_owned());
        self
    }

    pub fn link(mut self, path: &str, target: &str) -> Self {
        self.files
            .insert(path.to_owned(), Entry::Link(target.to_owned()));
        self
    }

    pub fn huge(mut self, path: &str, size: u64) -> Self {
        self.files.insert(path.to_owned(), Entry::Huge(size));
        self
    }

    pub fn broken(mut self, path: &str) -> Self {
        self.files.insert(path.to_owned(), Entry::Broken);
        self
    }

    pub fn without(mut self, path: &str) -> Self {
        self.files.remove(path);
        self
    }

    /// Every read so far: the path and the bound it was read with.
    pub fn reads(&self) -> Vec<(String, u64)> {
        self.reads.borrow().clone()
    }
}

impl RepoFiles for MapFiles {
    fn read(&self, path: &str, max: u64) -> Result<Option<Vec<u8>>, FilesError> {
        self.reads.borrow_mut().push((path.to_owned(), max));
        let too_large = || FilesError::TooLarge {
            path: path.to_owned(),
            max,
        };
        match self.files.get(path) {
            None | Some(Entry::Link(_)) => Ok(None),
            Some(Entry::Bytes(bytes)) if bytes.len() as u64 > max => Err(too_large()),
            Some(Entry::Bytes(bytes)) => Ok(Some(bytes.clone())),
            Some(Entry::Huge(size)) if *size > max => Err(too_large()),
            Some(Entry::Huge(size)) => {
                panic!("{path} ({size} bytes) was read whole with a bound of {max}")
            }
            Some(Entry::Broken) => Err(FilesError::Read {
                path: path.to_owned(),
                source: "the tree is unreadable".into(),
            }),
        }
    }

    fn exists(&self, path: &str) -> bool {
        matches!(
            self.files.get(path),
            Some(Entry::Bytes(_) | Entry::Huge(_) | Entry::Broken)
        )
    }

    fn is_dir(&self, path: &str) -> bool {
        let prefix = format!("{path}/");
        self.files.keys().any(|p| p.starts_with(&prefix))
    }

    fn executable(&self, path: &str) -> bool {
        self.executable.contains(path)
    }

    fn link(&self, path: &str) -> Option<String> {
        match self.files.get(path) {
            Some(Entry::Link(target)) => Some(target.clone()),
            _ => None,
        }
    }

    fn tree_id(&self, dir: &str) -> Option<String> {
        if !dir.is_empty() && !self.is_dir(dir) {
            return None;
        }
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let mut digest = String::new();
        for (path, entry) in self.files.range(prefix.clone()..) {
            if !path.starts_with(&prefix) {
                break;
            }
            let content = match entry {
                Entry::Bytes(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                Entry::Huge(size) => format!("huge {size}"),
                Entry::Broken => "broken".to_owned(),
                Entry::Link(target) => format!("link {target}"),
            };
            digest.push_str(&format!("{path}\0{content}\0"));
        }
        Some(digest)
    }

    fn ending_with(
        &self,
        suffixes: &[&str],
        max_entries: usize,
    ) -> Result<Vec<String>, FilesError> {
        if self.files.len() > max_entries {
            return Err(FilesError::TooManyEntries { max: max_entries });
        }
        Ok(self
            .files
            .iter()
            .filter(|(path, _)| suffixes.iter().any(|s| path.ends_with(s)))
            .map(|(path, _)| path.clone())
            .collect())
    }

    fn list(&self, dir: &str, max: usize) -> Vec<String> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let mut names: Vec<String> = self
            .files
            .keys()
            .filter_map(|p| p.strip_prefix(&prefix))
            .map(|rest| rest.split('/').next().unwrap_or(rest).to_owned())
            .collect();
        names.dedup();
        names.truncate(max);
        names
    }
}
