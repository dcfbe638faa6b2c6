//! What a sandbox is made from and what an exec asks for.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::SandboxError;

/// Where the working copy appears inside every sandbox.
pub const WORKSPACE: &str = "/workspace";

/// Where a sandbox's own home is when it has one ([`SandboxSpec::home`]):
/// an environment's, kept from its setup to the jobs that use it, so the
/// paths tools wrote into it (a virtualenv's) stay right.
pub const GUEST_HOME: &str = "/home/agent";

/// The user commands run as inside (the image's `agent` user). Never 0:
/// root inside a user namespace could remount what it was given.
pub const GUEST_UID: u32 = 1000;
pub const GUEST_GID: u32 = 1000;

/// Everything a sandbox is created from. There is no network setting:
/// a sandbox never has a network, whatever the caller asks.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The guest root file system (a directory built by
    /// `images/build-rootfs`), mounted read-only.
    pub rootfs: PathBuf,
    /// The job's working copy, mounted read-write at [`WORKSPACE`].
    pub workspace: PathBuf,
    /// A directory mounted read-write at [`GUEST_HOME`]; without one,
    /// `HOME` is in `/tmp` and goes with the sandbox.
    pub home: Option<PathBuf>,
    /// How the working copy (and the home) become the sandbox user's.
    pub handover: Handover,
    /// The only environment commands see, besides what an exec adds. No
    /// host variable is passed through.
    pub env: BTreeMap<String, String>,
    pub limits: Limits,
}

/// How what a sandbox writes to becomes the sandbox user's, and goes
/// back to the host's after.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Handover {
    /// A plain directory: given to the sandbox user for the sandbox's life
    /// (every file of it) and back to its owner after.
    #[default]
    Chown,
    /// Made for the sandbox user already by the caller (overlay layers
    /// whose writable layer and lower layers the sandbox user owns, see
    /// [`crate::layers`]): nothing is changed on the way in, so a large
    /// read-only layer is never walked; on the way out these directories
    /// (the writable layers: only what the sandbox changed) go back to
    /// the host's user.
    Prepared { give_back: Vec<PathBuf> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub memory_mib: u64,
    pub vcpus: u32,
    /// Processes and threads alive at once, in the whole sandbox.
    pub max_pids: u32,
    /// The longest any one exec may run; its whole process tree is killed
    /// then.
    pub timeout: Duration,
    /// Bytes kept of each of stdout and stderr per exec.
    pub output_limit_bytes: usize,
    /// Size of `/tmp` (and so of `HOME`), in MiB; its pages also count
    /// against `memory_mib`.
    pub tmp_mib: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_mib: 2048,
            vcpus: 2,
            max_pids: 512,
            timeout: Duration::from_secs(600),
            output_limit_bytes: 1 << 20,
            tmp_mib: 1024,
        }
    }
}

/// The environment every sandbox starts with.
pub fn base_env() -> BTreeMap<String, String> {
    [
        (
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ),
        ("HOME", "/tmp"),
        ("USER", "agent"),
        ("LANG", "C.UTF-8"),
        ("TERM", "dumb"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// One command to run in a sandbox.
#[derive(Debug, Clone, Default)]
pub struct ExecRequest {
    /// The program and its arguments; the program is looked up in `PATH`.
    pub argv: Vec<String>,
    /// Inside the sandbox; defaults to [`WORKSPACE`].
    pub workdir: Option<String>,
    /// Added to (and overriding) the sandbox's environment.
    pub env: BTreeMap<String, String>,
    /// At most the sandbox's limit; defaults to it.
    pub timeout: Option<Duration>,
    pub stdin: Option<Vec<u8>>,
}

impl ExecRequest {
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ExecRequest {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// `sh -c <script>`.
    pub fn shell(script: impl Into<String>) -> Self {
        ExecRequest::new(["/bin/sh".to_owned(), "-c".to_owned(), script.into()])
    }

    pub fn workdir(mut self, dir: impl Into<String>) -> Self {
        self.workdir = Some(dir.into());
        self
    }

    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Checks what every backend needs; returns the working directory.
    pub(crate) fn validate(&self) -> Result<&str, SandboxError> {
        let bad = |why: String| Err(SandboxError::InvalidRequest(why));
        match self.argv.first() {
            None => return bad("the command is empty".into()),
            Some(program) if program.is_empty() => return bad("the program name is empty".into()),
            _ => {}
        }
        if let Some(arg) = self.argv.iter().find(|a| a.contains('\0')) {
            return bad(format!("argument {arg:?} contains a NUL byte"));
        }
        for (name, value) in &self.env {
            validate_env(name, value)?;
        }
        let workdir = self.workdir.as_deref().unwrap_or(WORKSPACE);
        if !workdir.starts_with('/') || workdir.contains('\0') {
            return bad(format!(
                "the working directory must be an absolute path inside the sandbox, got {workdir:?}"
            ));
        }
        Ok(workdir)
    }
}

pub(crate) fn validate_env(name: &str, value: &str) -> Result<(), SandboxError> {
    let valid_name = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_name {
        return Err(SandboxError::InvalidRequest(format!(
            "{name:?} is not a valid environment variable name"
        )));
    }
    if value.contains('\0') {
        return Err(SandboxError::InvalidRequest(format!(
            "the value of {name} contains a NUL byte"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_before_anything_runs() {
        let err = |r: ExecRequest| r.validate().unwrap_err().to_string();
        assert!(err(ExecRequest::new(Vec::<String>::new())).contains("empty"));
        assert!(err(ExecRequest::new(["a\0b"])).contains("NUL"));
        assert!(err(ExecRequest::new(["ls"]).workdir("relative")).contains("absolute"));
        assert!(err(ExecRequest::new(["ls"]).env("1X", "v")).contains("not a valid"));
        assert!(err(ExecRequest::new(["ls"]).env("A-B", "v")).contains("not a valid"));
        assert!(err(ExecRequest::new(["ls"]).env("A", "\0")).contains("NUL"));
        assert_eq!(ExecRequest::new(["ls"]).validate().unwrap(), WORKSPACE);
        assert_eq!(
            ExecRequest::new(["ls"]).workdir("/tmp").validate().unwrap(),
            "/tmp"
        );
    }
}
