//! What the queue tests share: a queue on a real SQLite file, jobs and
//! deliveries to put in it, and a handler whose every attempt is scripted.
#![allow(dead_code, unused_imports)] // each test file uses its own part

// Re-exported: the test files use most of these too.
pub use std::sync::atomic::{AtomicU32, Ordering};
pub use std::sync::{Arc, Mutex};
pub use std::time::Duration;

use async_trait::async_trait;
pub use forgehand_queue::{Backoff, JobContext, JobError, JobHandler, QueueSettings, WorkerPool};
pub use forgehand_store::job::{Command, Job, Task};
pub use forgehand_store::{
    ClaimedJob, CompressedPayload, Finish, JobState, NewDelivery, Outcome, Recorded, SqliteStore,
    Store,
};
use forgehand_types::{ForgeKind, Repo};
pub use forgehand_types::{JobId, TargetKey};
pub use tokio::sync::Notify;

/// What a scripted attempt hands back: the queue keeps it serialised as
/// the job's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Done {
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
}

impl Done {
    pub fn succeeded() -> Done {
        Done {
            outcome: "succeeded",
            seconds: None,
        }
    }
}

pub struct Queue {
    pub store: Arc<dyn Store>,
    pub _dir: tempfile::TempDir,
}

/// A queue on a fresh database of the store these tests run on: SQLite,
/// or with `FORGEHAND_TEST_STORE=postgres` (tests/run.sh runs them both
/// ways) a PostgreSQL database on the server the harness starts.
pub async fn queue(max_attempts: u32) -> Queue {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = match std::env::var("FORGEHAND_TEST_STORE").as_deref() {
        Ok("postgres") => {
            let url = forgehand_store_test_support::PgServer::shared()
                .create_database()
                .await
                .unwrap();
            let options = forgehand_store_pg::PgOptions::default();
            Arc::new(
                forgehand_store_pg::PgStore::connect(&url, &options)
                    .await
                    .unwrap()
                    .with_max_attempts(max_attempts),
            )
        }
        Ok("sqlite") | Err(_) => {
            let url = format!("sqlite://{}", dir.path().join("q.db").display());
            Arc::new(
                SqliteStore::connect(&url)
                    .await
                    .unwrap()
                    .with_max_attempts(max_attempts),
            )
        }
        Ok(other) => panic!("FORGEHAND_TEST_STORE={other}: sqlite or postgres"),
    };
    Queue { store, _dir: dir }
}

/// A job that supersedes nothing, so several can wait for one target.
pub fn help(target: u64) -> Job {
    Job {
        task: Task::Command {
            command: Command::Help,
            comment_id: 1,
        },
        ..job(target)
    }
}

pub fn job(target: u64) -> Job {
    Job {
        forge: ForgeKind::Github,
        repo: Repo {
            owner: "acme".into(),
            name: "widgets".into(),
            clone_url: None,
            default_branch: None,
            private: false,
        },
        target,
        on_pull_request: false,
        requested_by: "maintainer".into(),
        task: Task::Labeled {
            label: "forgehand".into(),
        },
    }
}

impl Queue {
    pub async fn enqueue(&self, targets: &[u64]) -> Vec<JobId> {
        self.enqueue_jobs(targets.iter().map(|&t| job(t)).collect())
            .await
    }

    pub async fn enqueue_jobs(&self, jobs: Vec<Job>) -> Vec<JobId> {
        let mut ids = Vec::new();
        for job in jobs {
            let target = job.target;
            let delivery = NewDelivery {
                forge: ForgeKind::Github,
                delivery_id: Some(uuid()),
                event: Some("issues".into()),
                event_name: Some("issues.labeled".into()),
                outcome: Outcome::Accepted,
                status_code: 202,
                reason: None,
                repo: Some("acme/widgets".into()),
                target: Some(target),
                sender: Some("maintainer".into()),
                detail: None,
                payload: Some(CompressedPayload::compress(b"{}")),
                jobs: vec![(&job).into()],
                installation: None,
                digest: None,
                received_at: forgehand_store::time::now_ms(),
            };
            match self
                .store
                .record_deliveries(&[delivery])
                .await
                .unwrap()
                .remove(0)
            {
                Recorded::New { jobs, .. } => ids.extend(jobs),
                other => panic!("{other:?}"),
            }
        }
        ids
    }

    pub async fn state(&self, id: JobId) -> (JobState, i64, Option<String>, Vec<String>) {
        let detail = self.store.job(id).await.unwrap().unwrap();
        let runs = detail
            .runs
            .iter()
            .map(|r| {
                r.outcome.map_or("running".to_owned(), |o| {
                    serde_json::to_value(o)
                        .unwrap()
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
            })
            .collect();
        (
            detail.job.state,
            detail.job.attempts,
            detail.job.last_error,
            runs,
        )
    }

    /// Waits until job `id` is in `state`; fails the test, saying it
    /// hung, after [`HANG`].
    pub async fn wait_for(&self, id: JobId, state: JobState) {
        let deadline = tokio::time::Instant::now() + HANG;
        while tokio::time::Instant::now() < deadline {
            if self.state(id).await.0 == state {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "hung: job {id} did not reach {state:?} within {HANG:?}: {:?}",
            self.state(id).await
        );
    }

    pub fn pool(
        &self,
        handler: Arc<dyn JobHandler<Output = Done>>,
        workers: usize,
        lease_ms: u64,
        grace_ms: u64,
    ) -> WorkerPool {
        pool_on(self.store.clone(), handler, workers, lease_ms, grace_ms)
    }
}

/// A worker pool on `store` (the queue's, or one wrapped around it).
pub fn pool_on(
    store: Arc<dyn Store>,
    handler: Arc<dyn JobHandler<Output = Done>>,
    workers: usize,
    lease_ms: u64,
    grace_ms: u64,
) -> WorkerPool {
    WorkerPool::start(
        store,
        handler,
        QueueSettings {
            workers,
            lease: Duration::from_millis(lease_ms),
            poll_interval: Duration::from_millis(20),
            backoff: Backoff {
                base: Duration::from_millis(30),
                max: Duration::from_millis(100),
            },
            shutdown_grace: Duration::from_millis(grace_ms),
        },
        Arc::new(Notify::new()),
    )
}

pub fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A handler whose behaviour per attempt is scripted, and which records
/// what it ran.
pub struct Scripted {
    pub script: Box<dyn Fn(&ClaimedJob) -> Step + Send + Sync>,
    pub ran: Mutex<Vec<(JobId, u32)>>,
    pub running: AtomicU32,
    pub max_concurrent: AtomicU32,
    /// The jobs the queue said were dead-lettered without a last word.
    pub dead_lettered: Mutex<Vec<(JobId, String)>>,
}

pub enum Step {
    Succeed,
    Sleep(Duration),
    /// Runs until `Notify` is notified (or the job is cancelled), then
    /// succeeds.
    Until(Arc<Notify>),
    Retry(&'static str),
    Permanent(&'static str),
    Panic,
}

impl Scripted {
    pub fn new(script: impl Fn(&ClaimedJob) -> Step + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Scripted {
            script: Box::new(script),
            ran: Mutex::new(Vec::new()),
            running: AtomicU32::new(0),
            max_concurrent: AtomicU32::new(0),
            dead_lettered: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl JobHandler for Scripted {
    type Output = Done;

    async fn dead_lettered(&self, job: &ClaimedJob, error: &str) {
        self.dead_lettered
            .lock()
            .unwrap()
            .push((job.id, error.to_owned()));
    }

    async fn run(&self, job: &ClaimedJob, cx: JobContext) -> Result<Done, JobError> {
        self.ran.lock().unwrap().push((job.id, job.attempt));
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_concurrent.fetch_max(now, Ordering::SeqCst);
        let step = (self.script)(job);
        let result = match step {
            Step::Succeed => Ok(Done::succeeded()),
            Step::Sleep(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => Ok(Done {
                        seconds: Some(d.as_secs()),
                        ..Done::succeeded()
                    }),
                    _ = cx.cancel.cancelled() => Err(JobError::Cancelled("asked to stop".into())),
                }
            }
            Step::Until(done) => {
                tokio::select! {
                    _ = done.notified() => Ok(Done::succeeded()),
                    _ = cx.cancel.cancelled() => Err(JobError::Cancelled("asked to stop".into())),
                }
            }
            Step::Retry(e) => Err(JobError::retryable(e)),
            Step::Permanent(e) => Err(JobError::permanent(e)),
            Step::Panic => {
                self.running.fetch_sub(1, Ordering::SeqCst);
                panic!("the handler blew up");
            }
        };
        self.running.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

pub fn stop(target: u64) -> Job {
    Job {
        task: Task::Command {
            command: Command::Stop,
            comment_id: 9,
        },
        ..job(target)
    }
}

pub async fn claim(q: &Queue) -> Option<ClaimedJob> {
    q.store
        .claim_job("w", Duration::from_secs(30))
        .await
        .unwrap()
}

/// A hang detector for the waits below: far above what any of them takes
/// on a loaded machine, not a claim about speed.
pub const HANG: Duration = Duration::from_secs(60);

/// Polls `done` until it holds; fails the test, saying it hung, after
/// [`HANG`].
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + HANG;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "hung: {what} did not happen within {HANG:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The store, counting the reaper's passes (its calls of
/// `recover_expired_leases`), so that a test can wait for the next ones
/// instead of for a while.
pub struct CountingReaps {
    pub inner: Arc<dyn Store>,
    pub reaps: AtomicU32,
}

impl CountingReaps {
    pub fn wrap(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(CountingReaps {
            inner,
            reaps: AtomicU32::new(0),
        })
    }

    pub fn reaps(&self) -> u32 {
        self.reaps.load(Ordering::SeqCst)
    }
}

mod counting {
    use super::*;
    use forgehand_store::{
        DeliveryQuery, DeliveryRow, InstallationRow, IntakeLog, JobDetail, JobLedger, JobQuery,
        JobRow, Pruned, Recovered, Retention, StoreResult, TargetJob,
    };

    #[async_trait]
    impl JobLedger for CountingReaps {
        async fn target_history(&self, key: &TargetKey, limit: u32) -> StoreResult<Vec<TargetJob>> {
            self.inner.target_history(key, limit).await
        }
        async fn supersede_waiting(&self, key: &TargetKey, by: JobId) -> StoreResult<Vec<JobId>> {
            self.inner.supersede_waiting(key, by).await
        }
        async fn request_stop(
            &self,
            key: &TargetKey,
            by: JobId,
            reason: &str,
        ) -> StoreResult<Vec<JobId>> {
            self.inner.request_stop(key, by, reason).await
        }
        async fn record_result(&self, job: JobId, result: &serde_json::Value) -> StoreResult<()> {
            self.inner.record_result(job, result).await
        }
    }

    #[async_trait]
    impl Store for CountingReaps {
        fn intake_log(&self) -> StoreResult<Box<dyn IntakeLog>> {
            self.inner.intake_log()
        }
        async fn record_deliveries(&self, batch: &[NewDelivery]) -> StoreResult<Vec<Recorded>> {
            self.inner.record_deliveries(batch).await
        }
        async fn claim_job(
            &self,
            worker: &str,
            lease: Duration,
        ) -> StoreResult<Option<ClaimedJob>> {
            self.inner.claim_job(worker, lease).await
        }
        async fn heartbeat(
            &self,
            job: &ClaimedJob,
            worker: &str,
            lease: Duration,
        ) -> StoreResult<bool> {
            self.inner.heartbeat(job, worker, lease).await
        }
        async fn finish_job(
            &self,
            job: &ClaimedJob,
            worker: &str,
            finish: Finish,
        ) -> StoreResult<bool> {
            self.inner.finish_job(job, worker, finish).await
        }
        async fn recover_expired_leases(&self) -> StoreResult<Recovered> {
            let recovered = self.inner.recover_expired_leases().await;
            self.reaps.fetch_add(1, Ordering::SeqCst);
            recovered
        }
        async fn installations(&self) -> StoreResult<Vec<InstallationRow>> {
            self.inner.installations().await
        }
        async fn stop_requested(&self, job: JobId) -> StoreResult<Option<String>> {
            self.inner.stop_requested(job).await
        }
        async fn list_deliveries(&self, query: &DeliveryQuery) -> StoreResult<Vec<DeliveryRow>> {
            self.inner.list_deliveries(query).await
        }
        async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobRow>> {
            self.inner.list_jobs(query).await
        }
        async fn job(&self, id: JobId) -> StoreResult<Option<JobDetail>> {
            self.inner.job(id).await
        }
        async fn job_counts(&self) -> StoreResult<Vec<(JobState, i64)>> {
            self.inner.job_counts().await
        }
        async fn delivery_payload(&self, id: i64) -> StoreResult<Option<Vec<u8>>> {
            self.inner.delivery_payload(id).await
        }
        async fn prune(&self, retention: &Retention) -> StoreResult<Pruned> {
            self.inner.prune(retention).await
        }
        async fn ping(&self) -> StoreResult<()> {
            self.inner.ping().await
        }
    }
}
