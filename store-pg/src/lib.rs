//! Forgehand's store on PostgreSQL: what `forgehand-store` keeps on SQLite
//! (deliveries recorded once, typed jobs with leases, heartbeats, retries,
//! dead letters, one running job per issue or pull request, stop and
//! supersede, installations, retention), for replicas on several hosts
//! sharing one database. It implements the same [`Store`] and
//! [`IntakeLog`] traits, and one conformance suite
//! (`forgehand-store-conformance`) runs against both.
//!
//! What differs from SQLite, and why:
//! - Claiming takes a job with `FOR UPDATE SKIP LOCKED` in the `UPDATE`
//!   itself: PostgreSQL has no single writer to keep out of, and claimers
//!   on every host take different jobs without waiting for each other.
//! - Idle workers are woken across hosts by `LISTEN`/`NOTIFY`
//!   ([`PgStore::listen_for_jobs`]); polling stays the fallback.
//! - The intake's transaction is made durable by its `COMMIT` (with
//!   `synchronous_commit` on, the default), so its [`SyncHandle`] has
//!   nothing left to do; deliveries arriving during a commit share the next.
//! - The jobs per state are counted as rows change (migration 0002), so
//!   [`Store::job_counts`] reads a few rows, not the jobs table.
//! - Migrations run under an advisory lock: replicas starting at the same
//!   moment apply them once.
//!
//! Every query is a file under `queries/`, checked against a migrated
//! PostgreSQL at compile time by sqlx's `query_file!` macros, with the
//! offline data committed in `.sqlx/` (`scripts/sqlx-prepare.sh`).
//!
//! [`IntakeLog`]: forgehand_store::IntakeLog
//! [`SyncHandle`]: forgehand_store::SyncHandle

mod intake;
mod ledger;
mod migrate;
mod options;
mod prune;
mod queue;
mod read;
mod wake;

use std::time::Duration;

use async_trait::async_trait;
use forgehand_store::*;
use sqlx::postgres::{PgConnectOptions, PgPool};

pub use migrate::MIGRATION_LOCK;
pub use options::{redact_url, PgOptions};
pub use wake::{JobListener, Wake, WakeTask, JOBS_CHANNEL};

/// The PostgreSQL store. Cheap to clone (a pool inside); usable as
/// `Arc<dyn Store>`.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// What the pool connects with, for the connections kept apart from
    /// it: the intake's, the listener's, the migrations'.
    connect: PgConnectOptions,
    max_attempts: u32,
}

impl std::fmt::Debug for PgStore {
    // Never the connect options: they hold the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("host", &self.connect.get_host())
            .field("database", &self.connect.get_database())
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:password@host/db?sslmode=…`;
    /// the standard `PG*` environment variables fill in what it leaves
    /// out, the URL wins) and applies pending migrations.
    pub async fn connect(url: &str, options: &PgOptions) -> StoreResult<Self> {
        let store = Self::connect_without_migrating(url, options).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects without touching the schema (tools that only read it).
    pub async fn connect_without_migrating(url: &str, options: &PgOptions) -> StoreResult<Self> {
        let connect = options::connect_options(url, options)?;
        let pool = options.pool_options().connect_with(connect.clone()).await?;
        Ok(PgStore {
            pool,
            connect,
            max_attempts: options.max_attempts.max(1),
        })
    }

    /// Attempts a new job gets before it is dead-lettered.
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts.max(1);
        self
    }

    /// Applies the migrations not applied yet, under an advisory lock:
    /// replicas starting at the same moment apply each once.
    pub async fn migrate(&self) -> StoreResult<()> {
        migrate::migrate(&self.connect).await
    }

    /// Wakes on jobs queued anywhere (any replica's intake, a retry, a
    /// released or recovered job): `LISTEN forgehand_jobs` on a
    /// connection of its own.
    pub async fn listen_for_jobs(&self) -> StoreResult<JobListener> {
        JobListener::connect(&self.connect).await
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes the pool's connections (each waits for its query to end).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

#[async_trait]
impl JobLedger for PgStore {
    async fn target_history(
        &self,
        target_key: &TargetKey,
        limit: u32,
    ) -> StoreResult<Vec<TargetJob>> {
        ledger::target_history(&self.pool, target_key.as_str(), limit).await
    }

    async fn supersede_waiting(
        &self,
        target_key: &TargetKey,
        by: JobId,
    ) -> StoreResult<Vec<JobId>> {
        let ids = ledger::supersede_waiting(&self.pool, target_key.as_str(), by.get()).await?;
        Ok(ids.into_iter().map(JobId).collect())
    }

    async fn request_stop(
        &self,
        target_key: &TargetKey,
        by: JobId,
        reason: &str,
    ) -> StoreResult<Vec<JobId>> {
        let ids = ledger::request_stop(&self.pool, target_key.as_str(), by.get(), reason).await?;
        Ok(ids.into_iter().map(JobId).collect())
    }

    async fn record_result(&self, job: JobId, result: &serde_json::Value) -> StoreResult<()> {
        ledger::record_result(&self.pool, job.get(), result).await
    }
}

#[async_trait]
impl Store for PgStore {
    fn intake_log(&self) -> StoreResult<Box<dyn IntakeLog>> {
        Ok(Box::new(intake::PgIntakeLog::open(
            self.connect.clone(),
            self.max_attempts,
        )?))
    }

    /// One transaction on the pool: PostgreSQL's commit is the sync.
    async fn record_deliveries(&self, batch: &[NewDelivery]) -> StoreResult<Vec<Recorded>> {
        intake::record_deliveries(&self.pool, batch, self.max_attempts).await
    }

    async fn claim_job(&self, worker: &str, lease: Duration) -> StoreResult<Option<ClaimedJob>> {
        queue::claim(&self.pool, worker, lease).await
    }

    async fn heartbeat(
        &self,
        job: &ClaimedJob,
        worker: &str,
        lease: Duration,
    ) -> StoreResult<bool> {
        queue::heartbeat(&self.pool, job, worker, lease).await
    }

    async fn finish_job(
        &self,
        job: &ClaimedJob,
        worker: &str,
        finish: Finish,
    ) -> StoreResult<bool> {
        queue::finish(&self.pool, job, worker, finish).await
    }

    async fn recover_expired_leases(&self) -> StoreResult<Recovered> {
        queue::recover(&self.pool).await
    }

    async fn installations(&self) -> StoreResult<Vec<InstallationRow>> {
        read::installations(&self.pool).await
    }

    async fn stop_requested(&self, job: JobId) -> StoreResult<Option<String>> {
        read::stop_requested(&self.pool, job.get()).await
    }

    async fn list_deliveries(&self, query: &DeliveryQuery) -> StoreResult<Vec<DeliveryRow>> {
        read::list_deliveries(&self.pool, query).await
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobRow>> {
        read::list_jobs(&self.pool, query).await
    }

    async fn job(&self, id: JobId) -> StoreResult<Option<JobDetail>> {
        read::job(&self.pool, id.get()).await
    }

    async fn job_counts(&self) -> StoreResult<Vec<(JobState, i64)>> {
        read::job_counts(&self.pool).await
    }

    async fn delivery_payload(&self, id: i64) -> StoreResult<Option<Vec<u8>>> {
        read::delivery_payload(&self.pool, id).await
    }

    async fn prune(&self, retention: &Retention) -> StoreResult<Pruned> {
        prune::prune(&self.pool, retention).await
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query_file_scalar!("queries/ping.sql")
            .fetch_one(&self.pool)
            .await?;
        Ok(())
    }
}

/// A stored JSON document (a job, a result), read back.
pub(crate) fn stored_json<T: serde::de::DeserializeOwned>(id: i64, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|source| StoreError::CorruptJob { id, source })
}
