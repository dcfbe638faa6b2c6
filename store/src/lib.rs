//! Durable storage: deliveries, jobs and their runs, and the typed jobs
//! themselves ([`job`]). Everything above this crate talks to the
//! [`Store`] trait; a job's handler sees only its narrow part,
//! [`JobLedger`]. The trait is the seam where a PostgreSQL implementation
//! (claiming with `FOR UPDATE SKIP LOCKED`) slots in beside
//! [`SqliteStore`] for deployments with several replicas, in a crate of
//! its own: sqlx checks a crate's queries against one database, and every
//! query here is checked against SQLite at compile time (`query_file!`
//! over `queries/`, with the offline data in `.sqlx/`; see
//! `scripts/sqlx-prepare.sh`).

mod intake;
pub mod job;
mod rows;
mod sqlite;
pub mod time;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::job::{Job, JobKind};
pub use forgehand_types::{JobId, TargetKey};
pub use intake::IntakeWriter;
pub use rows::*;
pub use sqlite::SqliteStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored job {id} cannot be read: {source}")]
    CorruptJob {
        id: i64,
        #[source]
        source: serde_json::Error,
    },
    #[error("stored payload of delivery {id} cannot be decompressed: {source}")]
    CorruptPayload {
        id: i64,
        #[source]
        source: std::io::Error,
    },
    #[error("stored {table} row {id} cannot be read: {what}")]
    CorruptRow {
        table: &'static str,
        id: i64,
        what: String,
    },
    #[error("syncing deliveries to disk failed: {0}")]
    Sync(#[source] std::io::Error),
    #[error("the intake writer has stopped")]
    IntakeClosed,
}

pub type StoreResult<T> = Result<T, StoreError>;

/// How a delivery was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "TEXT", rename_all = "snake_case")]
pub enum Outcome {
    Accepted,
    Ignored,
    Duplicate,
    Rejected,
}

impl Outcome {
    /// In declaration order, which `as usize` follows.
    pub const ALL: [Outcome; 4] = [
        Outcome::Accepted,
        Outcome::Ignored,
        Outcome::Duplicate,
        Outcome::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Ignored => "ignored",
            Outcome::Duplicate => "duplicate",
            Outcome::Rejected => "rejected",
        }
    }
}

/// A delivery about to be recorded, with the jobs it creates.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub forge: forgehand_types::ForgeKind,
    pub delivery_id: Option<String>,
    pub event: Option<String>,
    pub event_name: Option<String>,
    /// `Accepted`, `Ignored` or `Rejected`; `Duplicate` is decided by the
    /// store when the delivery id was already recorded.
    pub outcome: Outcome,
    pub status_code: u16,
    pub reason: Option<String>,
    pub repo: Option<String>,
    pub target: Option<u64>,
    pub sender: Option<String>,
    pub detail: Option<String>,
    /// The verified body, kept for accepted deliveries.
    pub payload: Option<CompressedPayload>,
    pub jobs: Vec<NewJob>,
    /// A GitHub App installation event's change, recorded with it.
    pub installation: Option<InstallationChange>,
    /// The verified body's digest, for an accepted or ignored delivery:
    /// the same body under another delivery id is then a duplicate.
    pub digest: Option<PayloadDigest>,
    pub received_at: i64,
}

/// The SHA-256 of a verified body, and which set of secrets signed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadDigest {
    /// `github`, or `gitea` for Gitea and Forgejo, which share their
    /// secrets: whether Gitea's or Forgejo's header names a delivery is
    /// the sender's say, not the signature's, so it is not part of the key.
    pub signer: &'static str,
    pub sha256: [u8; 32],
}

impl PayloadDigest {
    pub fn of(forge: forgehand_types::ForgeKind, body: &[u8]) -> Self {
        use sha2::Digest;
        PayloadDigest {
            signer: if forge.is_gitea_family() {
                "gitea"
            } else {
                "github"
            },
            sha256: sha2::Sha256::digest(body).into(),
        }
    }
}

/// What an installation event changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallationChange {
    pub id: u64,
    pub account: String,
    pub update: InstallationUpdate,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallationUpdate {
    /// Installed, with the repositories it was given.
    Installed {
        repositories: Vec<String>,
    },
    Deleted,
    Suspended,
    Unsuspended,
    Repositories {
        added: Vec<String>,
        removed: Vec<String>,
    },
}

/// An installation as recorded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InstallationRow {
    pub id: i64,
    pub account: String,
    pub state: String,
    pub repositories: Vec<String>,
    pub updated_at: i64,
}

/// A job as it is stored, encoded by the request that made it: the intake
/// writer is one thread that every request in a batch waits for, so it
/// only writes.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub kind: JobKind,
    pub target_key: TargetKey,
    /// The [`Job`] as JSON.
    pub payload: String,
    /// Work on the target, which a newer request supersedes while it
    /// waits ([`Job::supersedable`]).
    pub supersedable: bool,
}

impl From<&Job> for NewJob {
    fn from(job: &Job) -> Self {
        NewJob {
            kind: job.kind(),
            target_key: job.target_key(),
            payload: serde_json::to_string(job).expect("jobs serialize"),
            supersedable: job.supersedable(),
        }
    }
}

/// One job of a target, as its history shows it.
#[derive(Debug, Clone)]
pub struct TargetJob {
    pub id: JobId,
    pub state: JobState,
    pub job: Job,
    pub result: Option<serde_json::Value>,
    pub error: Option<String>,
    /// The stop or newer request that ended it.
    pub stopped_by: Option<JobId>,
    /// Why it was cancelled, when it was.
    pub cancel_cause: Option<CancelCause>,
}

/// What cancelled a job: kept in a column of its own, never read back
/// out of its error text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "TEXT", rename_all = "snake_case")]
pub enum CancelCause {
    /// `/forgehand stop`.
    Stopped,
    /// A newer request on the same target, from someone who may command
    /// the bot, while it waited.
    Superseded,
}

/// A delivery body, compressed with LZ4. Webhook bodies are repetitive
/// JSON and shrink about fourfold, and the bytes written (twice, with the
/// WAL) count against how many deliveries a disk makes durable. LZ4 is
/// chosen for speed: the request that received the body compresses it,
/// and that time is on every request's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressedPayload(Vec<u8>);

impl CompressedPayload {
    pub fn compress(raw: &[u8]) -> Self {
        CompressedPayload(lz4_flex::compress_prepend_size(raw))
    }

    /// Wraps bytes read back from storage.
    pub fn from_stored(bytes: Vec<u8>) -> Self {
        CompressedPayload(bytes)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn decompress(&self) -> std::io::Result<Vec<u8>> {
        lz4_flex::decompress_size_prepended(&self.0).map_err(std::io::Error::other)
    }
}

/// What recording a delivery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    New {
        delivery: i64,
        jobs: Vec<JobId>,
    },
    /// The delivery id, or the same body under another delivery id, was
    /// already recorded: no new job; `jobs` are the ones the first
    /// delivery created (none once they are past their retention).
    Duplicate {
        delivery: i64,
        jobs: Vec<JobId>,
        of: DuplicateOf,
    },
}

/// What made a delivery a duplicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuplicateOf {
    /// A redelivery: the forge sent the same delivery id again.
    DeliveryId,
    /// A replay: a body already recorded, under a new delivery id.
    Payload,
}

impl DuplicateOf {
    /// The reason recorded with the duplicate.
    pub fn reason(self) -> &'static str {
        match self {
            DuplicateOf::DeliveryId => "delivery id already recorded",
            DuplicateOf::Payload => "payload already recorded under another delivery id",
        }
    }
}

/// What is past its retention: everything older than these times (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Deliveries other than refused ones, unless a job of theirs is kept.
    pub deliveries_before: i64,
    pub refused_before: i64,
    /// Finished jobs (succeeded, failed, dead, cancelled), by when they
    /// finished, with their runs. Waiting and running jobs are never deleted.
    pub jobs_before: i64,
    /// Digests of accepted and ignored bodies.
    pub digests_before: i64,
}

/// What one pruning deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub deliveries: u64,
    pub refused: u64,
    pub jobs: u64,
    pub digests: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "TEXT", rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    Failed,
    Dead,
    Cancelled,
}

impl JobState {
    pub const ALL: [JobState; 6] = [
        JobState::Queued,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Dead,
        JobState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
        }
    }
}

/// How one attempt (a row of `job_runs`) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "TEXT", rename_all = "snake_case")]
pub enum RunOutcome {
    Succeeded,
    Failed,
    /// Failed, and tried again later.
    Retry,
    /// Failed on its last attempt.
    Dead,
    /// Given back at shutdown: the attempt does not count.
    Released,
    /// Its worker stopped heartbeating (crashed or hung).
    Lost,
    Cancelled,
}

/// A job this worker holds the lease of.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: JobId,
    pub run: i64,
    /// 1 for the first attempt.
    pub attempt: u32,
    pub max_attempts: u32,
    pub job: Job,
    /// How the attempt before this one ended, if there was one.
    pub last_error: Option<String>,
}

/// What [`Store::recover_expired_leases`] did.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Jobs given back to the queue for another attempt.
    pub requeued: u64,
    /// Jobs whose lease ran out on their last attempt, now dead: as they
    /// were claimed last (`attempt` is the one that was lost).
    pub dead: Vec<ClaimedJob>,
}

/// How an attempt ended, as the queue decided.
#[derive(Debug, Clone)]
pub enum Finish {
    Succeeded {
        result: serde_json::Value,
    },
    /// Failed for good: not retried.
    Failed {
        error: String,
    },
    /// Failed; tried again at `run_at`.
    Retry {
        error: String,
        run_at: i64,
    },
    /// Failed on its last attempt.
    Dead {
        error: String,
    },
    /// Given back unfinished (shutdown): the attempt does not count.
    Released,
    /// Stopped on request while it ran.
    Cancelled {
        reason: String,
    },
}

#[derive(Debug, Clone, Default)]
pub struct DeliveryQuery {
    pub forge: Option<String>,
    pub outcome: Option<Outcome>,
    /// Only deliveries with an id below this (paging backwards).
    pub before: Option<i64>,
    pub limit: u32,
}

#[derive(Debug, Clone, Default)]
pub struct JobQuery {
    pub state: Option<JobState>,
    /// Jobs older than this one (the next page).
    pub before: Option<JobId>,
    pub limit: u32,
}

/// Where deliveries are written, on the intake writer's thread and its
/// sync thread (never both at once). Blocking by design: see
/// `store::intake`.
pub trait IntakeLog: Send + 'static {
    /// Writes a batch atomically and commits it: all of it or none.
    /// Results come in the batch's order. Durable once a sync that started
    /// after this returned has finished.
    fn write(&mut self, batch: &[NewDelivery]) -> StoreResult<Vec<Recorded>> {
        let recorded = self.add(batch)?;
        if let Err(error) = self.commit() {
            self.rollback();
            return Err(error);
        }
        Ok(recorded)
    }

    /// Writes deliveries into the open transaction, opening one when there
    /// is none. On an error the whole open transaction is rolled back,
    /// deliveries added before included.
    fn add(&mut self, batch: &[NewDelivery]) -> StoreResult<Vec<Recorded>>;

    /// Commits the open transaction, if there is one.
    fn commit(&mut self) -> StoreResult<()>;

    /// Drops the open transaction, if there is one.
    fn rollback(&mut self);

    /// What makes committed deliveries durable; called from another thread
    /// while the next deliveries are added.
    fn sync_handle(&self) -> Arc<dyn SyncHandle>;
}

pub trait SyncHandle: Send + Sync + 'static {
    /// Makes every batch written before this call durable.
    fn sync(&self) -> StoreResult<()>;
}

/// What a job's handler may do with the store: read its target's
/// history, cancel older waiting work, stop its target's work, keep its
/// result. Nothing of the queue's own bookkeeping.
#[async_trait]
pub trait JobLedger: Send + Sync + 'static {
    /// The latest jobs of one target (`forge:owner/name#number`), newest first.
    async fn target_history(
        &self,
        target_key: &TargetKey,
        limit: u32,
    ) -> StoreResult<Vec<TargetJob>>;

    /// A newer request (job `by`) whose sender may command the bot cancels
    /// the target's older waiting work. Returns the ids cancelled.
    async fn supersede_waiting(&self, target_key: &TargetKey, by: JobId)
        -> StoreResult<Vec<JobId>>;

    /// `/forgehand stop` (job `by`): cancels the target's waiting work and
    /// asks its running job to stop with `reason`. Returns the ids of the
    /// jobs stopped, running ones first.
    async fn request_stop(
        &self,
        target_key: &TargetKey,
        by: JobId,
        reason: &str,
    ) -> StoreResult<Vec<JobId>>;

    /// Keeps what a job did before it failed (its steps, its reason code),
    /// shown with the job like a success's result.
    async fn record_result(&self, job: JobId, result: &serde_json::Value) -> StoreResult<()>;
}

#[async_trait]
pub trait Store: JobLedger {
    /// The log deliveries are written to. The intake writer takes one and
    /// drives it from a thread of its own.
    fn intake_log(&self) -> StoreResult<Box<dyn IntakeLog>>;

    /// Records deliveries and their jobs atomically, durable on return.
    async fn record_deliveries(&self, batch: &[NewDelivery]) -> StoreResult<Vec<Recorded>> {
        let mut log = self.intake_log()?;
        let batch = batch.to_vec();
        tokio::task::spawn_blocking(move || {
            let recorded = log.write(&batch)?;
            log.sync_handle().sync()?;
            Ok(recorded)
        })
        .await
        .map_err(|e| StoreError::Sync(std::io::Error::other(e)))?
    }

    /// Claims the oldest due job whose target has no running job.
    async fn claim_job(&self, worker: &str, lease: Duration) -> StoreResult<Option<ClaimedJob>>;

    /// Extends the lease; false when it is no longer this worker's.
    async fn heartbeat(&self, job: &ClaimedJob, worker: &str, lease: Duration)
        -> StoreResult<bool>;

    /// Ends an attempt; false when the lease was lost meanwhile.
    async fn finish_job(&self, job: &ClaimedJob, worker: &str, finish: Finish)
        -> StoreResult<bool>;

    /// Returns jobs whose lease expired (their worker died) to the queue,
    /// or to the dead letters when they have no attempt left. Returns how
    /// many went back, and the jobs dead-lettered (their handler never
    /// had its last word: the queue gives it to them).
    async fn recover_expired_leases(&self) -> StoreResult<Recovered>;

    /// The GitHub App installations recorded from their webhooks.
    async fn installations(&self) -> StoreResult<Vec<InstallationRow>>;

    /// Why `job` was asked to stop (`/forgehand stop`), once it was.
    async fn stop_requested(&self, job: JobId) -> StoreResult<Option<String>>;

    async fn list_deliveries(&self, query: &DeliveryQuery) -> StoreResult<Vec<DeliveryRow>>;
    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobRow>>;
    async fn job(&self, id: JobId) -> StoreResult<Option<JobDetail>>;
    async fn job_counts(&self) -> StoreResult<Vec<(JobState, i64)>>;

    /// The verified body of an accepted delivery (by row id).
    async fn delivery_payload(&self, id: i64) -> StoreResult<Option<Vec<u8>>>;

    /// Deletes what is past `retention`, a batch at a time so that the
    /// intake is never held up for long.
    async fn prune(&self, retention: &Retention) -> StoreResult<Pruned>;

    /// Cheap liveness check of the database for `/readyz`.
    async fn ping(&self) -> StoreResult<()>;
}
