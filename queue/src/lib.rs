//! The worker side of the durable queue: claim a job with a lease, keep
//! the lease alive with heartbeats while the handler runs, and record how
//! the attempt ended — retried with backoff, dead-lettered after the last
//! attempt, or released untouched on shutdown. A panicking handler fails
//! its job, not the worker.

mod backoff;
mod handler;

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, info_span, warn, Instrument};

pub use backoff::Backoff;
pub use handler::{JobContext, JobError, JobHandler};

use forgehand_store::time::now_ms;
use forgehand_store::{ClaimedJob, Finish, JobLedger, Store};

/// How long a job asked to stop has to clean up before it is aborted.
const STOP_GRACE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct QueueSettings {
    pub workers: usize,
    pub lease: Duration,
    pub poll_interval: Duration,
    pub backoff: Backoff,
    /// How long running jobs may take to finish once shutdown begins.
    pub shutdown_grace: Duration,
}

/// A running pool of workers. Dropping it does not stop them: call
/// [`WorkerPool::shutdown`].
pub struct WorkerPool {
    tasks: JoinSet<()>,
    stop_claiming: CancellationToken,
    abandon: CancellationToken,
    grace: Duration,
}

impl WorkerPool {
    /// Starts `settings.workers` workers, and a reaper that returns jobs of
    /// crashed nodes to the queue when their lease runs out.
    pub fn start<O: serde::Serialize + Send + 'static>(
        store: Arc<dyn Store>,
        handler: Arc<dyn JobHandler<Output = O>>,
        settings: QueueSettings,
        jobs_ready: Arc<Notify>,
    ) -> Self {
        let stop_claiming = CancellationToken::new();
        let abandon = CancellationToken::new();
        let mut tasks = JoinSet::new();
        if settings.workers > 0 {
            let reaper = Reaper {
                store: store.clone(),
                handler: handler.clone(),
                every: settings.lease / 2,
                stop: stop_claiming.clone(),
            };
            tasks.spawn(reaper.run());
        }
        let node = uuid::Uuid::new_v4().simple().to_string();
        for n in 0..settings.workers {
            let worker = Worker {
                id: format!("{}-{}-{n}", hostname(), &node[..8]),
                store: store.clone(),
                handler: handler.clone(),
                settings: settings.clone(),
                jobs_ready: jobs_ready.clone(),
                stop_claiming: stop_claiming.clone(),
                abandon: abandon.clone(),
            };
            tasks.spawn(worker.run());
        }
        WorkerPool {
            tasks,
            stop_claiming,
            abandon,
            grace: settings.shutdown_grace,
        }
    }

    /// Stops claiming, lets running jobs finish within the grace period,
    /// then cancels what is left and gives those jobs back to the queue.
    pub async fn shutdown(mut self) {
        self.stop_claiming.cancel();
        let drained = tokio::time::timeout(self.grace, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            warn!(grace = ?self.grace, "jobs still running after the grace period; releasing them");
            self.abandon.cancel();
            while self.tasks.join_next().await.is_some() {}
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "forgehand".into())
}

struct Reaper<O> {
    store: Arc<dyn Store>,
    handler: Arc<dyn JobHandler<Output = O>>,
    every: Duration,
    stop: CancellationToken,
}

impl<O: serde::Serialize + Send + 'static> Reaper<O> {
    async fn run(self) {
        loop {
            match self.store.recover_expired_leases().await {
                Ok(recovered) => {
                    if recovered.requeued > 0 {
                        warn!(
                            recovered = recovered.requeued,
                            "returned jobs with expired leases to the queue"
                        );
                    }
                    for job in recovered.dead {
                        let error = format!(
                            "the worker stopped heartbeating (crashed or hung) on the last attempt ({} of {})",
                            job.attempt, job.max_attempts
                        );
                        error!(job_id = job.id.get(), %error, "job dead-lettered after its lease ran out");
                        // Its own task: a slow forge must not hold up the
                        // recovery of other jobs.
                        let handler = self.handler.clone();
                        tokio::spawn(async move { handler.dead_lettered(&job, &error).await });
                    }
                }
                Err(error) => error!(%error, "recovering expired leases failed"),
            }
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(self.every) => {}
            }
        }
    }
}

struct Worker<O> {
    id: String,
    store: Arc<dyn Store>,
    handler: Arc<dyn JobHandler<Output = O>>,
    settings: QueueSettings,
    jobs_ready: Arc<Notify>,
    stop_claiming: CancellationToken,
    abandon: CancellationToken,
}

impl<O: serde::Serialize + Send + 'static> Worker<O> {
    async fn run(self) {
        while !self.stop_claiming.is_cancelled() {
            // Registered before looking, so a job queued between the look
            // and the wait still wakes this worker.
            let ready = self.jobs_ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            match self.store.claim_job(&self.id, self.settings.lease).await {
                Ok(Some(job)) => {
                    self.run_job(job).await;
                    continue;
                }
                Ok(None) => {}
                Err(error) => error!(worker = %self.id, %error, "claiming a job failed"),
            }
            tokio::select! {
                _ = self.stop_claiming.cancelled() => break,
                _ = ready => {}
                _ = tokio::time::sleep(self.settings.poll_interval) => {}
            }
        }
    }

    async fn run_job(&self, job: ClaimedJob) {
        let span = info_span!(
            "job",
            job_id = job.id.get(),
            kind = %job.job.kind(),
            target = %job.job.target_key(),
            attempt = job.attempt,
            worker = %self.id,
        );
        async {
            info!("job started");
            let finish = self.attempt(&job).await;
            match &finish {
                Finish::Succeeded { .. } => info!("job succeeded"),
                Finish::Retry { error, run_at } => {
                    warn!(%error, retry_in_ms = run_at - now_ms(), "job failed; will retry")
                }
                Finish::Failed { error } => warn!(%error, "job failed"),
                Finish::Dead { error } => error!(%error, "job failed on its last attempt; dead-lettered"),
                Finish::Released => info!("job released unfinished for another worker"),
                Finish::Cancelled { reason } => info!(%reason, "job cancelled"),
            }
            match self.store.finish_job(&job, &self.id, finish).await {
                Ok(true) => {}
                Ok(false) => warn!("the lease was lost before the job finished; another worker owns it now"),
                Err(error) => error!(%error, "recording the job's end failed; its lease will expire and it will run again"),
            }
        }
        .instrument(span)
        .await
    }

    /// Runs the handler with heartbeats; decides how the attempt ends.
    async fn attempt(&self, job: &ClaimedJob) -> Finish {
        let cx = JobContext::new(self.store.clone() as Arc<dyn JobLedger>);
        let abandoned = self.abandon.child_token();
        let handler = self.handler.clone();
        let owned = job.clone();
        let handler_cx = cx.clone();
        let mut run = tokio::spawn(
            async move {
                std::panic::AssertUnwindSafe(handler.run(&owned, handler_cx))
                    .catch_unwind()
                    .await
            }
            .in_current_span(),
        );
        let mut heartbeat = tokio::time::interval(self.settings.lease / 3);
        heartbeat.tick().await;
        // A stop is looked for more often than the lease is renewed: a
        // person who typed `/forgehand stop` is waiting to see it work.
        let mut stop_check = tokio::time::interval(self.settings.poll_interval);
        stop_check.tick().await;
        loop {
            tokio::select! {
                joined = &mut run => {
                    return match joined {
                        Ok(Ok(result)) => self.settle(job, &cx, result),
                        Ok(Err(panic)) => self.settle(job, &cx, Err(JobError::retryable(format!("panicked: {}", panic_message(&panic))))),
                        Err(join) => self.settle(job, &cx, Err(JobError::retryable(format!("task failed: {join}")))),
                    };
                }
                _ = abandoned.cancelled() => {
                    cx.cancel.cancel();
                    run.abort();
                    return Finish::Released;
                }
                _ = stop_check.tick(), if !cx.cancel.is_cancelled() => {
                    match self.store.stop_requested(job.id).await {
                        Ok(Some(reason)) => {
                            info!(%reason, "stop requested; cancelling the job");
                            cx.stop(reason.clone());
                            // The handler cleans up (its sandbox, its
                            // status comment); one that does not is cut off.
                            match tokio::time::timeout(STOP_GRACE, &mut run).await {
                                Ok(Ok(Ok(Ok(result)))) => {
                                    return Finish::Succeeded { result: serde_json::to_value(&result).expect("a job's result serialises") }
                                }
                                Ok(_) => {}
                                Err(_) => {
                                    warn!(grace = ?STOP_GRACE, "the job did not stop in time; aborting it");
                                    run.abort();
                                }
                            }
                            return Finish::Cancelled { reason };
                        }
                        Ok(None) => {}
                        Err(error) => warn!(%error, "looking for a stop request failed; retrying"),
                    }
                }
                _ = heartbeat.tick() => {
                    match self.store.heartbeat(job, &self.id, self.settings.lease).await {
                        Ok(true) => {}
                        Ok(false) => {
                            // Another worker reclaimed it: stop, never run twice at once.
                            cx.cancel.cancel();
                            run.abort();
                            return Finish::Failed { error: "lease lost".into() };
                        }
                        Err(error) => warn!(%error, "heartbeat failed; retrying at the next tick"),
                    }
                }
            }
        }
    }

    fn settle(&self, job: &ClaimedJob, cx: &JobContext, result: Result<O, JobError>) -> Finish {
        match result {
            Ok(result) => Finish::Succeeded {
                result: serde_json::to_value(&result).expect("a job's result serialises"),
            },
            Err(_) if cx.stop_reason().is_some() => Finish::Cancelled {
                reason: cx.stop_reason().unwrap_or_default().to_owned(),
            },
            Err(JobError::Permanent(error)) => Finish::Failed { error },
            Err(JobError::Cancelled(reason)) => Finish::Cancelled { reason },
            Err(JobError::Retryable(error)) if job.attempt >= job.max_attempts => Finish::Dead {
                error: format!("{error} (attempt {} of {})", job.attempt, job.max_attempts),
            },
            Err(JobError::Retryable(error)) => Finish::Retry {
                error,
                run_at: now_ms() + self.settings.backoff.delay(job.attempt).as_millis() as i64,
            },
        }
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic".into())
}
