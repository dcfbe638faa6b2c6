//! Every path of the configuration made absolute once, at load.
//!
//! A relative path reaching a library is resolved against whatever that
//! library takes as its base: libgit2 resolves a relative work tree
//! against the git directory, so with the default `git.work_dir` the
//! shared checkouts' files landed inside their own git directories, the
//! real trees stayed empty, and the agent's commits deleted the
//! repositories' files. Nothing past [`super::Config::load`] sees a
//! relative path.
//!
//! The data paths (`git.mirror_dir`, `git.work_dir`,
//! `agent.transcript_dir`, `environment.cache_dir`, `github.app_dir`)
//! default beneath `server.data_dir`; that defaults to `forgehand-data`
//! in the working directory when a configuration file is read, and to the
//! user's state directory (`$XDG_STATE_HOME/forgehand`, else
//! `~/.local/state/forgehand`) when none is: `forgehand run` with no
//! configuration is started inside the repository it works on, and its
//! data must not land there. Any other relative path is relative to the
//! working directory.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Config;

/// What relative paths are resolved against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    /// The working directory.
    pub cwd: PathBuf,
    /// `server.data_dir` when the configuration leaves it unset.
    pub default_data_dir: PathBuf,
}

/// The data paths, by section and key, and their name beneath
/// `server.data_dir` when unset.
pub const DATA_PATHS: [(&str, &str, &str); 5] = [
    ("git", "mirror_dir", "mirrors"),
    ("git", "work_dir", "jobs"),
    ("agent", "transcript_dir", "transcripts"),
    ("environment", "cache_dir", "environments"),
    ("github", "app_dir", "github-app"),
];

impl Places {
    /// For a process whose variables are `env`: with a configuration
    /// file, data beside the working directory; without one, in the
    /// user's state directory (or beside the working directory when the
    /// process knows no home).
    pub fn new(cwd: PathBuf, with_file: bool, env: &[(String, String)]) -> Places {
        let var = |name: &str| {
            env.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| PathBuf::from(v))
                // The XDG specification: a relative value is invalid
                // and ignored.
                .filter(|p| p.is_absolute())
        };
        let state = var("XDG_STATE_HOME")
            .or_else(|| var("HOME").map(|home| home.join(".local/state")))
            .map(|state| state.join("forgehand"));
        let default_data_dir = match (with_file, state) {
            (false, Some(state)) => state,
            _ => cwd.join("forgehand-data"),
        };
        Places {
            cwd,
            default_data_dir,
        }
    }

    /// `path` made absolute against the working directory.
    pub fn absolute(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            return normal(path);
        }
        normal(&self.cwd.join(path))
    }
}

/// `path` without `.` components and with `..` taken lexically, as
/// [`std::path::absolute`] does not: names shown in messages stay plain.
fn normal(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(part);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Whether the configuration as written sets `section.key`.
fn written(value: &Value, section: &str, key: &str) -> bool {
    value
        .get(section)
        .and_then(|s| s.get(key))
        .is_some_and(|v| !v.is_null())
}

impl Config {
    /// Every path absolute: the data paths left unset beneath
    /// `server.data_dir`, the rest against the working directory.
    /// `as_written` is the configuration as the file and the variables
    /// wrote it, before defaults.
    pub fn anchor_paths(&mut self, as_written: &Value, places: &Places) {
        self.server.data_dir = if written(as_written, "server", "data_dir") {
            places.absolute(&self.server.data_dir)
        } else {
            places.default_data_dir.clone()
        };
        let data = self.server.data_dir.clone();
        for (section, key, name) in DATA_PATHS {
            let slot = match (section, key) {
                ("git", "mirror_dir") => &mut self.git.mirror_dir,
                ("git", "work_dir") => &mut self.git.work_dir,
                ("agent", "transcript_dir") => &mut self.agent.transcript_dir,
                ("environment", "cache_dir") => &mut self.environment.cache_dir,
                ("github", "app_dir") => &mut self.github.app_dir,
                _ => unreachable!("every data path has a slot"),
            };
            *slot = if written(as_written, section, key) {
                places.absolute(slot)
            } else {
                data.join(name)
            };
        }
        let optional = [
            &mut self.environment.ca_bundle,
            &mut self.github.private_key_path,
            &mut self.git.ssh_key_path,
            &mut self.git.known_hosts_path,
            &mut self.agent.prompts_dir,
            &mut self.sandbox.msb_path,
            &mut self.sandbox.libkrunfw_path,
            &mut self.sandbox.agentd_path,
            &mut self.sandbox.msb_home,
        ];
        for path in optional.into_iter().flatten() {
            *path = places.absolute(path);
        }
        self.sandbox.rootfs = places.absolute(&self.sandbox.rootfs);
        if let Some(file) = self.database.url.strip_prefix("sqlite://") {
            // `sqlite://forgehand.db` and `sqlite:///var/lib/x.db`; an
            // in-memory database and query options are kept as written.
            let (file, query) = file
                .split_once('?')
                .map_or((file, None), |(f, q)| (f, Some(q)));
            if !file.is_empty() && !file.starts_with(':') {
                let path = places.absolute(Path::new(file));
                self.database.url = match query {
                    Some(query) => format!("sqlite://{}?{query}", path.display()),
                    None => format!("sqlite://{}", path.display()),
                };
            }
        }
    }

    /// The data paths (with their keys) that lie inside `repository`:
    /// `forgehand run` refuses to keep its data in the repository it
    /// works on (an agent's commit would hold it, and a checkout there
    /// would nest in itself).
    pub fn data_inside(&self, repository: &Path) -> Vec<(String, PathBuf)> {
        let paths = [
            ("git.mirror_dir", &self.git.mirror_dir),
            ("git.work_dir", &self.git.work_dir),
            ("agent.transcript_dir", &self.agent.transcript_dir),
            ("environment.cache_dir", &self.environment.cache_dir),
        ];
        paths
            .into_iter()
            .filter(|(_, path)| inside(path, repository))
            .map(|(key, path)| (key.to_owned(), path.clone()))
            .collect()
    }
}

/// Whether `path` is `dir` or beneath it, links in what exists of both
/// resolved.
fn inside(path: &Path, dir: &Path) -> bool {
    let resolve = |p: &Path| {
        // The longest existing ancestor, resolved, with the rest joined.
        let mut existing = p.to_path_buf();
        let mut rest = Vec::new();
        while !existing.exists() {
            match (
                existing.file_name().map(ToOwned::to_owned),
                existing.parent(),
            ) {
                (Some(name), Some(parent)) => {
                    rest.push(name);
                    existing = parent.to_path_buf();
                }
                _ => break,
            }
        }
        let mut resolved = existing.canonicalize().unwrap_or(existing);
        for name in rest.into_iter().rev() {
            resolved.push(name);
        }
        resolved
    };
    resolve(path).starts_with(resolve(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn without_a_file_data_goes_to_the_state_directory() {
        let cwd = PathBuf::from("/home/u/src/project");
        let places = Places::new(cwd.clone(), false, &env(&[("HOME", "/home/u")]));
        assert_eq!(
            places.default_data_dir,
            Path::new("/home/u/.local/state/forgehand")
        );
        let xdg = env(&[("HOME", "/home/u"), ("XDG_STATE_HOME", "/xdg/state")]);
        assert_eq!(
            Places::new(cwd.clone(), false, &xdg).default_data_dir,
            Path::new("/xdg/state/forgehand")
        );
        // A relative XDG_STATE_HOME is not a valid one.
        let relative = env(&[("HOME", "/home/u"), ("XDG_STATE_HOME", "state")]);
        assert_eq!(
            Places::new(cwd.clone(), false, &relative).default_data_dir,
            Path::new("/home/u/.local/state/forgehand")
        );
        assert_eq!(
            Places::new(cwd.clone(), true, &xdg).default_data_dir,
            cwd.join("forgehand-data"),
            "with a file, beside the working directory as documented"
        );
    }

    #[test]
    fn paths_are_made_plain_and_absolute() {
        let places = Places::new(PathBuf::from("/srv/fh"), true, &[]);
        assert_eq!(
            places.absolute(Path::new("a/./b/../c")),
            Path::new("/srv/fh/a/c")
        );
        assert_eq!(places.absolute(Path::new("/x/y")), Path::new("/x/y"));
        assert_eq!(places.absolute(Path::new("../up")), Path::new("/srv/up"));
    }

    #[test]
    fn a_path_beneath_a_directory_is_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        assert!(inside(&repo.join("forgehand-data/jobs"), &repo));
        assert!(!inside(&dir.path().join("other/jobs"), &repo));
        assert!(
            !inside(&dir.path().join("repository"), &repo),
            "a prefix of a name is not a parent"
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&repo, &link).unwrap();
        assert!(inside(&link.join("x"), &repo), "through a link");
    }
}
