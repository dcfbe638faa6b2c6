//! Waking idle workers on every host: the intake's commit, a retry, a job
//! released at shutdown and a recovered one `NOTIFY forgehand_jobs` with
//! the time the job is due; a listener hears it and wakes its workers,
//! which otherwise poll. A notification can be lost (the listener's
//! connection dropped and came back): then the listener says so, and the
//! workers look as if one came.

use std::sync::Arc;
use std::time::Duration;

use forgehand_store::time::now_ms;
use forgehand_store::StoreResult;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The channel the store notifies on.
pub const JOBS_CHANNEL: &str = "forgehand_jobs";

/// Why a listener woke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A job was queued, due at this time (Unix ms, by the clock of the
    /// host that queued it): 0 when due at once, later for a retry's
    /// backoff.
    Queued { due_at: i64 },
    /// The connection was lost and made again: notifications may have been
    /// missed meanwhile, so look for jobs.
    Reconnected,
}

/// `LISTEN forgehand_jobs` on a connection of its own (not one of the
/// pool's, which it would hold for ever), without a statement timeout.
pub struct JobListener {
    listener: PgListener,
}

impl JobListener {
    pub(crate) async fn connect(connect: &PgConnectOptions) -> StoreResult<Self> {
        // Without the pool's statement timeout, whose `options` the
        // listener would keep: a LISTEN is one statement, waiting is not.
        let connect = connect.clone().options([("statement_timeout", "0")]);
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(connect)
            .await?;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(JOBS_CHANNEL).await?;
        Ok(JobListener { listener })
    }

    /// The next wake-up. An error is the database being unreachable; the
    /// next call tries to connect again.
    pub async fn next(&mut self) -> StoreResult<Wake> {
        match self.listener.try_recv().await? {
            Some(notification) => Ok(Wake::Queued {
                // Sent by this crate only; anything else wakes at once.
                due_at: notification.payload().parse().unwrap_or(0),
            }),
            None => Ok(Wake::Reconnected),
        }
    }

    /// Wakes every worker waiting on `workers` (the worker pool's
    /// `jobs_ready`) whenever a job is queued anywhere, at the time it is
    /// due; and after a reconnection. Runs until the task is stopped.
    pub fn wake(mut self, workers: Arc<Notify>) -> WakeTask {
        WakeTask(tokio::spawn(async move {
            loop {
                match self.next().await {
                    Ok(Wake::Queued { due_at }) => {
                        let wait = due_at - now_ms();
                        if wait <= 0 {
                            workers.notify_waiters();
                        } else {
                            let workers = workers.clone();
                            tokio::spawn(async move {
                                tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                                workers.notify_waiters();
                            });
                        }
                    }
                    Ok(Wake::Reconnected) => workers.notify_waiters(),
                    Err(error) => {
                        // The workers poll meanwhile.
                        tracing::warn!(%error, "listening for queued jobs failed; retrying in 1 s");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        }))
    }
}

/// The task of [`JobListener::wake`]; stopped when dropped.
pub struct WakeTask(JoinHandle<()>);

impl WakeTask {
    pub fn stop(self) {}
}

impl Drop for WakeTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
