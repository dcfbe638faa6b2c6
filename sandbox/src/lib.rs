//! Where the agent's tools run. Every shell command and file the agent
//! writes goes through a [`Sandbox`]: a place with no network, none of the
//! host's files or credentials, and limits on memory, processes and time.
//! It sees one directory of the host, the job's working copy, at
//! `/workspace`.
//!
//! Backends: [`namespace`] (bubblewrap: Linux namespaces and cgroups, a
//! shared kernel) and, with the `microvm` feature, `microvm` (a
//! microsandbox microVM). [`choose`] picks one from the configuration.

mod error;
mod output;
pub mod owner;
pub mod private;
mod spec;

pub mod choose;
pub mod config;
pub mod disk;
pub mod layers;
#[cfg(feature = "microvm")]
pub mod microvm;
pub mod namespace;

use std::time::Duration;

use async_trait::async_trait;

pub use choose::{choose, BackendChoice, Chosen, Readiness};
pub use error::SandboxError;
pub use output::{Captured, ExecOutput, ExitStatus, OutputChunk, Stream};
pub use spec::{
    ExecRequest, Handover, Limits, SandboxSpec, GUEST_GID, GUEST_HOME, GUEST_UID, WORKSPACE,
};

/// The kind of isolation a sandbox gives; reported to operators and in
/// every pull request's footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// A virtual machine with its own kernel and no network device.
    MicroVm,
    /// Linux namespaces and cgroups: the host's kernel is shared.
    SharedKernel,
}

impl Isolation {
    pub fn describe(self) -> &'static str {
        match self {
            Isolation::MicroVm => "microVM (own kernel, no network device)",
            Isolation::SharedKernel => {
                "Linux namespaces (bubblewrap): no network, but the host's kernel is shared"
            }
        }
    }
}

/// A live sandbox. It lives for a whole job: files in `/tmp` and
/// background processes persist from one `exec` to the next; after
/// [`Sandbox::destroy`] (or drop) nothing but `/workspace` remains.
#[async_trait]
pub trait Sandbox: Send + Sync {
    /// A name unique on this host, also used to find it after a crash.
    fn id(&self) -> &str;

    fn isolation(&self) -> Isolation;

    /// Runs a command to completion (or to its time limit).
    async fn exec(&self, request: ExecRequest) -> Result<ExecOutput, SandboxError>;

    /// Runs a command and yields its output as it comes.
    async fn exec_stream(&self, request: ExecRequest) -> Result<ExecStream, SandboxError>;

    /// Kills everything inside and frees what the sandbox held. Idempotent.
    async fn destroy(&self) -> Result<(), SandboxError>;

    /// A TCP listener on `127.0.0.1:port` as the sandbox sees it (its own
    /// loopback), accepted from the host: the one door a setup phase gets
    /// (the egress proxy serves it). The sandbox still has no other
    /// network. Backends without one say so.
    async fn listen_inside(&self, port: u16) -> Result<std::net::TcpListener, SandboxError> {
        let _ = port;
        Err(SandboxError::Unavailable {
            backend: "this",
            reason: "it cannot give a sandbox a door to the host (environments with a setup phase need the namespace backend)".into(),
        })
    }
}

/// A sandbox kind that can make sandboxes.
#[async_trait]
pub trait Backend: Send + Sync {
    fn name(&self) -> &'static str;

    fn isolation(&self) -> Isolation;

    /// Whether this backend can run sandboxes here, and if not, why.
    async fn readiness(&self) -> Readiness;

    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError>;

    /// Finds sandboxes left behind by a process that died and removes
    /// them; returns how many there were.
    async fn remove_leftovers(&self) -> Result<usize, SandboxError>;

    /// Makes the tree at `dir` the sandbox user's, for a caller preparing
    /// layers a sandbox will write through ([`Handover::Prepared`]).
    async fn prepare_for_sandbox(&self, dir: &std::path::Path) -> Result<(), SandboxError> {
        let _ = dir;
        Ok(())
    }
}

/// Output of a running command, then its result.
pub struct ExecStream {
    chunks: tokio::sync::mpsc::Receiver<OutputChunk>,
    done: tokio::task::JoinHandle<Result<ExecOutput, SandboxError>>,
}

impl ExecStream {
    /// Runs `run` on its own task, handing it the sender of the chunks.
    pub(crate) fn spawn<Run>(
        run: impl FnOnce(tokio::sync::mpsc::Sender<OutputChunk>) -> Run,
    ) -> Self
    where
        Run: std::future::Future<Output = Result<ExecOutput, SandboxError>> + Send + 'static,
    {
        let (tx, chunks) = tokio::sync::mpsc::channel(64);
        let done = tokio::spawn(run(tx));
        ExecStream { chunks, done }
    }

    /// The next piece of output; `None` once the command's output is over.
    pub async fn next_chunk(&mut self) -> Option<OutputChunk> {
        self.chunks.recv().await
    }

    /// Waits for the command; the result holds all output (within the cap).
    pub async fn finish(mut self) -> Result<ExecOutput, SandboxError> {
        // Unread chunks must not hold the command back.
        self.chunks.close();
        while self.chunks.recv().await.is_some() {}
        self.done
            .await
            .map_err(|e| SandboxError::Internal(format!("the exec task failed: {e}")))?
    }
}

/// How long output is still read after the command exits, for what a
/// background process it started holds open: it must not keep the exec
/// from returning.
pub(crate) const OUTPUT_GRACE: Duration = Duration::from_millis(100);
