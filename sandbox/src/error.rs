use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The backend cannot run here; the message says what is missing.
    #[error("the {backend} sandbox backend is not usable: {reason}")]
    Unavailable {
        backend: &'static str,
        reason: String,
    },
    #[error("guest root file system {path}: {problem}")]
    Rootfs { path: PathBuf, problem: String },
    #[error("working copy {path}: {problem}")]
    Workspace { path: PathBuf, problem: String },
    /// The request itself is wrong (empty command, bad variable name…).
    #[error("invalid exec request: {0}")]
    InvalidRequest(String),
    #[error("the sandbox has been destroyed")]
    Destroyed,
    #[error("starting the sandbox failed: {0}")]
    Start(String),
    #[error("cgroup {path}: {source}")]
    Cgroup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Internal(String),
}

impl SandboxError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> SandboxError {
        let context = context.into();
        move |source| SandboxError::Io { context, source }
    }
}
