use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use std::sync::{Arc, OnceLock};

use forgehand_store::{ClaimedJob, JobLedger};

/// How a job attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// Worth another attempt (the forge was down, a timeout).
    #[error("{0}")]
    Retryable(String),
    /// Another attempt would fail the same way.
    #[error("{0}")]
    Permanent(String),
    /// Stopped on request (`/forgehand stop`, a newer request).
    #[error("cancelled: {0}")]
    Cancelled(String),
}

impl JobError {
    pub fn retryable(message: impl Into<String>) -> Self {
        JobError::Retryable(message.into())
    }
    pub fn permanent(message: impl Into<String>) -> Self {
        JobError::Permanent(message.into())
    }
}

/// What a handler gets beside its job.
#[derive(Clone)]
pub struct JobContext {
    /// Triggered when the job must end early: `/forgehand stop`, or the
    /// node giving the job up at shutdown. The handler should stop soon
    /// after, cleaning up what it started (the sandbox, the status).
    pub cancel: CancellationToken,
    /// What the handler may do with the store: its target's history (for
    /// retry and go), superseding, stopping, keeping a failure's result.
    pub ledger: Arc<dyn JobLedger>,
    stop_reason: Arc<OnceLock<String>>,
}

impl JobContext {
    pub fn new(ledger: Arc<dyn JobLedger>) -> Self {
        JobContext {
            cancel: CancellationToken::new(),
            ledger,
            stop_reason: Arc::default(),
        }
    }

    /// Why the job was asked to stop (`stopped by @someone`), if it was
    /// asked rather than abandoned at shutdown.
    pub fn stop_reason(&self) -> Option<&str> {
        self.stop_reason.get().map(String::as_str)
    }

    /// Asks the job to stop, saying why.
    pub fn stop(&self, reason: String) {
        let _ = self.stop_reason.set(reason);
        self.cancel.cancel();
    }
}

/// Does the work of one job. Runs with the job's lease held.
#[async_trait]
pub trait JobHandler: Send + Sync + 'static {
    /// What an attempt that succeeded hands back: kept, serialised, as
    /// the job's result (the queue reads nothing of it).
    type Output: serde::Serialize + Send + 'static;

    async fn run(&self, job: &ClaimedJob, cx: JobContext) -> Result<Self::Output, JobError>;

    /// The job ended without its handler's last word: its worker died on
    /// the last attempt and the queue dead-lettered it. The handler says
    /// so where people look (the status comment). Called once, outside
    /// any attempt; a failure is only logged.
    async fn dead_lettered(&self, _job: &ClaimedJob, _error: &str) {}
}
