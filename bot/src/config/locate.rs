//! Where the configuration file comes from: the operator, never the
//! directory Forgehand happens to be started in. A repository can hold a
//! `forgehand.toml`, and `forgehand run` is started inside repositories:
//! a file found there would let the repository choose the model server
//! (and so where the API key goes), the sandbox and where transcripts go.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// The system-wide file, read when neither `--config` nor
/// `$FORGEHAND_CONFIG` names one and it exists.
pub const SYSTEM_CONFIG: &str = "/etc/forgehand/forgehand.toml";

/// How the operator named the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigOrigin {
    /// `--config FILE`.
    Flag,
    /// `$FORGEHAND_CONFIG`.
    Environment,
    /// [`SYSTEM_CONFIG`], found there.
    System,
}

/// The configuration file to read, and why that one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub origin: ConfigOrigin,
}

impl ConfigFile {
    /// `--config`, else `$FORGEHAND_CONFIG` (when not empty), else
    /// `system` when it exists; otherwise none: built-in defaults and
    /// `FORGEHAND_*` variables only. A file named by the flag or the
    /// variable must exist (loading says so when it does not).
    pub fn locate(
        flag: Option<&Path>,
        variable: Option<&OsStr>,
        system: &Path,
    ) -> Option<ConfigFile> {
        if let Some(path) = flag {
            return Some(ConfigFile {
                path: path.to_owned(),
                origin: ConfigOrigin::Flag,
            });
        }
        if let Some(path) = variable.filter(|v| !v.is_empty()) {
            return Some(ConfigFile {
                path: PathBuf::from(path),
                origin: ConfigOrigin::Environment,
            });
        }
        system.exists().then(|| ConfigFile {
            path: system.to_owned(),
            origin: ConfigOrigin::System,
        })
    }

    /// [`ConfigFile::locate`] with the process's `$FORGEHAND_CONFIG` and
    /// [`SYSTEM_CONFIG`].
    pub fn for_process(flag: Option<&Path>) -> Option<ConfigFile> {
        let variable = std::env::var_os(super::CONFIG_PATH_VAR);
        Self::locate(flag, variable.as_deref(), Path::new(SYSTEM_CONFIG))
    }

    /// One line for people: which file was read, or that none was.
    pub fn describe(file: Option<&ConfigFile>) -> String {
        match file {
            Some(file) => format!("configuration from {file}"),
            None => format!(
                "no configuration file (no --config, no ${}, no {SYSTEM_CONFIG}): built-in defaults and FORGEHAND_* variables",
                super::CONFIG_PATH_VAR
            ),
        }
    }
}

impl fmt::Display for ConfigFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match self.origin {
            ConfigOrigin::Flag => "--config".to_owned(),
            ConfigOrigin::Environment => format!("${}", super::CONFIG_PATH_VAR),
            ConfigOrigin::System => "the system file".to_owned(),
        };
        write!(f, "{} ({how})", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_then_the_variable_then_the_system_file() {
        let dir = tempfile::tempdir().unwrap();
        let system = dir.path().join("system.toml");
        let flag = Path::new("/srv/flag.toml");
        let var = OsStr::new("/srv/var.toml");
        let found = ConfigFile::locate(Some(flag), Some(var), &system).unwrap();
        assert_eq!(
            (found.path.as_path(), found.origin),
            (flag, ConfigOrigin::Flag)
        );
        let found = ConfigFile::locate(None, Some(var), &system).unwrap();
        assert_eq!(
            (found.path.as_path(), found.origin),
            (Path::new(var), ConfigOrigin::Environment)
        );
        assert_eq!(
            ConfigFile::locate(None, Some(OsStr::new("")), &system),
            None,
            "an empty variable names no file, and the system file is missing"
        );
        std::fs::write(&system, "").unwrap();
        let found = ConfigFile::locate(None, None, &system).unwrap();
        assert_eq!(
            (found.path.as_path(), found.origin),
            (system.as_path(), ConfigOrigin::System)
        );
        assert!(found.to_string().ends_with("(the system file)"), "{found}");
    }
}
