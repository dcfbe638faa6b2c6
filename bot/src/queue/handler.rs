use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::store::ClaimedJob;

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

/// Does the work of one job. Runs with the job's lease held; `cancel` is
/// triggered when the node gives the job up (shutdown past the grace
/// period) and the handler should stop soon after.
#[async_trait]
pub trait JobHandler: Send + Sync + 'static {
    async fn run(
        &self,
        job: &ClaimedJob,
        cancel: CancellationToken,
    ) -> Result<serde_json::Value, JobError>;
}

/// The handler of `bot.dry_run` and of intake-only nodes: it records that
/// the job was taken and what it asked for, and does nothing on the forge.
pub struct LoggingHandler;

#[async_trait]
impl JobHandler for LoggingHandler {
    async fn run(
        &self,
        job: &ClaimedJob,
        _cancel: CancellationToken,
    ) -> Result<serde_json::Value, JobError> {
        info!(job = ?job.job, "dry run: recording the job as handled");
        Ok(serde_json::json!({
            "handled_by": "dry_run",
            "note": "bot.dry_run: the job was recorded and logged, nothing was done on the forge",
        }))
    }
}
