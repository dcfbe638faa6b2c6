//! The bot's side of the durable queue (forgehand-queue): its handlers
//! hand back a [`JobResult`], and the handler of dry runs and intake-only
//! nodes.

use async_trait::async_trait;
use tracing::info;

pub use forgehand_queue::{Backoff, JobContext, JobError, QueueSettings, WorkerPool};

use crate::job::{JobOutcome, JobResult};
use crate::store::ClaimedJob;

/// A job handler of this service: what it hands back is a [`JobResult`].
pub type JobHandler = dyn forgehand_queue::JobHandler<Output = JobResult>;

/// The handler of `bot.dry_run` and of intake-only nodes: it records that
/// the job was taken and what it asked for, and does nothing on the forge.
pub struct LoggingHandler;

#[async_trait]
impl forgehand_queue::JobHandler for LoggingHandler {
    type Output = JobResult;

    async fn run(&self, job: &ClaimedJob, _cx: JobContext) -> Result<JobResult, JobError> {
        info!(job = ?job.job, "dry run: recording the job as handled");
        Ok(JobResult {
            message: Some(
                "bot.dry_run: the job was recorded and logged, nothing was done on the forge"
                    .into(),
            ),
            ..JobResult::new(JobOutcome::DryRun)
        })
    }
}
