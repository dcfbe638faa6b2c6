//! A live microVM sandbox.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use microsandbox::{MicrosandboxError, Sandbox as Vm};
use tokio::sync::{mpsc, Mutex};

use super::{exec, force};
use crate::{
    ExecOutput, ExecRequest, ExecStream, Isolation, Limits, OutputChunk, Sandbox, SandboxError,
    SandboxSpec,
};

/// A running microVM; destroyed (in the background) when dropped.
pub struct MicrovmSandbox {
    inner: Arc<Inner>,
}

/// What a sandbox's exec tasks share.
struct Inner {
    id: String,
    vm: Vm,
    /// The spec's environment: every command gets exactly it, plus its own.
    env: BTreeMap<String, String>,
    limits: Limits,
    /// No exec starts once this is set.
    closed: AtomicBool,
    /// Whether the VM is stopped and removed; held while destroying.
    removed: Mutex<bool>,
}

impl MicrovmSandbox {
    pub(super) fn new(id: String, vm: Vm, spec: SandboxSpec) -> Self {
        MicrovmSandbox {
            inner: Arc::new(Inner {
                id,
                vm,
                env: spec.env,
                limits: spec.limits,
                closed: AtomicBool::new(false),
                removed: Mutex::new(false),
            }),
        }
    }
}

impl Inner {
    async fn run(
        self: Arc<Self>,
        request: ExecRequest,
        chunks: Option<mpsc::Sender<OutputChunk>>,
    ) -> Result<ExecOutput, SandboxError> {
        let workdir = request.validate()?.to_owned();
        if self.closed.load(Ordering::SeqCst) {
            return Err(SandboxError::Destroyed);
        }
        let result = exec::run(&self.vm, &self.env, &self.limits, &workdir, request, chunks).await;
        match result {
            // The VM went away under the command: that was destroy.
            Err(_) if self.closed.load(Ordering::SeqCst) => Err(SandboxError::Destroyed),
            result => result,
        }
    }

    /// Stops (forcibly) and removes the VM. Idempotent; after the first
    /// call no exec starts, even if removing fails and is retried.
    async fn destroy(&self) -> Result<(), SandboxError> {
        self.closed.store(true, Ordering::SeqCst);
        let mut removed = self.removed.lock().await;
        if *removed {
            return Ok(());
        }
        match self.vm.destroy_with(force()).await {
            Ok(()) | Err(MicrosandboxError::SandboxNotFound(_)) => {
                *removed = true;
                tracing::debug!(sandbox = %self.id, "microVM destroyed");
                Ok(())
            }
            Err(e) => Err(SandboxError::Internal(format!(
                "destroying microVM {}: {e}",
                self.id
            ))),
        }
    }
}

#[async_trait]
impl Sandbox for MicrovmSandbox {
    fn id(&self) -> &str {
        &self.inner.id
    }

    fn isolation(&self) -> Isolation {
        Isolation::MicroVm
    }

    async fn exec(&self, request: ExecRequest) -> Result<ExecOutput, SandboxError> {
        self.inner.clone().run(request, None).await
    }

    async fn exec_stream(&self, request: ExecRequest) -> Result<ExecStream, SandboxError> {
        // Refused before anything starts, like `exec`.
        request.validate()?;
        let inner = self.inner.clone();
        Ok(ExecStream::spawn(|tx| inner.run(request, Some(tx))))
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        self.inner.destroy().await
    }
}

impl Drop for MicrovmSandbox {
    /// Best effort: destroys on the current runtime, if there is one. With
    /// none, the VM still stops once the last handle to it is gone (its
    /// runtime watches this process) and, being ephemeral, is removed.
    fn drop(&mut self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        if let Ok(removed) = self.inner.removed.try_lock() {
            if *removed {
                return;
            }
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let inner = self.inner.clone();
            runtime.spawn(async move {
                if let Err(error) = inner.destroy().await {
                    tracing::warn!(sandbox = %inner.id, %error, "destroying a dropped microVM");
                }
            });
        }
    }
}
