//! The SQLite store: one file, WAL, every commit synced to disk.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

mod prune;
mod record;
#[cfg(test)]
mod tests;

use record::{SqliteIntake, SqliteIntakeLog, WalSync};

use crate::job::{Job, JobKind};
use crate::time::now_ms;
use crate::*;

#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    db_path: std::path::PathBuf,
    max_attempts: u32,
    wal_sync: Arc<WalSync>,
}

impl SqliteStore {
    /// Opens (creating when missing) the database at `url` and brings its
    /// schema up to date.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: what the workers commit survives power loss, not only
            // a crash of this process. (Intake syncs on its own: WalSync.)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            // Smaller pages write less to the WAL for each row that lands
            // in a random place of an index (delivery ids are random).
            .page_size(2048);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .test_before_acquire(false)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        let db_path = pool.connect_options().get_filename().to_owned();
        // Opened once here so that a database the intake cannot use is
        // an error at start-up, not at the first delivery.
        SqliteIntake::open(&db_path, 5)?;
        Ok(SqliteStore {
            pool,
            wal_sync: Arc::new(WalSync {
                db_path: db_path.clone(),
            }),
            db_path,
            max_attempts: 5,
        })
    }

    /// Attempts a new job gets before it is dead-lettered.
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts.max(1);
        self
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

/// How many candidates one claim tries before it lets the worker wait.
const CLAIM_TRIES: usize = 3;

/// Cancels a target's waiting work (older than job `by`).
async fn cancel_waiting(
    tx: &mut sqlx::SqliteConnection,
    target_key: &TargetKey,
    by: JobId,
    reason: &str,
    cause: CancelCause,
    now: i64,
) -> StoreResult<Vec<JobId>> {
    let (target_key, by) = (target_key.as_str(), by.get());
    Ok(sqlx::query_file_scalar!(
        "queries/jobs/cancel_waiting.sql",
        reason,
        by,
        now,
        target_key,
        cause
    )
    .fetch_all(tx)
    .await?
    .into_iter()
    .map(JobId)
    .collect())
}

/// A stored job, read back.
fn stored_job(id: i64, payload: &str) -> StoreResult<Job> {
    serde_json::from_str(payload).map_err(|source| StoreError::CorruptJob { id, source })
}

/// A stored JSON document (a job, a result), read back.
fn stored_json(id: i64, text: &str) -> StoreResult<serde_json::Value> {
    serde_json::from_str(text).map_err(|source| StoreError::CorruptJob { id, source })
}

/// What the end of an attempt writes.
struct Ending {
    state: JobState,
    run: RunOutcome,
    error: Option<String>,
    result: Option<String>,
    run_at: Option<i64>,
    /// Attempts given back: a released attempt does not count.
    given_back: i64,
    cancel_cause: Option<CancelCause>,
}

impl Ending {
    fn of(finish: Finish) -> Self {
        let ending = |state, run| Ending {
            state,
            run,
            error: None,
            result: None,
            run_at: None,
            given_back: 0,
            cancel_cause: None,
        };
        match finish {
            Finish::Succeeded { result } => Ending {
                result: Some(result.to_string()),
                ..ending(JobState::Succeeded, RunOutcome::Succeeded)
            },
            Finish::Failed { error } => Ending {
                error: Some(error),
                ..ending(JobState::Failed, RunOutcome::Failed)
            },
            Finish::Retry { error, run_at } => Ending {
                error: Some(error),
                run_at: Some(run_at),
                ..ending(JobState::Queued, RunOutcome::Retry)
            },
            Finish::Dead { error } => Ending {
                error: Some(error),
                ..ending(JobState::Dead, RunOutcome::Dead)
            },
            Finish::Released => Ending {
                given_back: 1,
                ..ending(JobState::Queued, RunOutcome::Released)
            },
            Finish::Cancelled { reason } => Ending {
                error: Some(reason),
                cancel_cause: Some(CancelCause::Stopped),
                ..ending(JobState::Cancelled, RunOutcome::Cancelled)
            },
        }
    }
}

#[async_trait]
impl JobLedger for SqliteStore {
    async fn target_history(
        &self,
        target_key: &TargetKey,
        limit: u32,
    ) -> StoreResult<Vec<TargetJob>> {
        let limit = i64::from(limit);
        let key = target_key.as_str();
        let rows = sqlx::query_file!("queries/jobs/target_history.sql", key, limit)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|row| {
                Ok(TargetJob {
                    id: JobId(row.id),
                    state: row.state,
                    job: stored_job(row.id, &row.payload)?,
                    result: row.result.and_then(|r| serde_json::from_str(&r).ok()),
                    error: row.last_error,
                    stopped_by: row.stopped_by.map(JobId),
                    cancel_cause: row.cancel_cause,
                })
            })
            .collect()
    }

    async fn supersede_waiting(
        &self,
        target_key: &TargetKey,
        by: JobId,
    ) -> StoreResult<Vec<JobId>> {
        let mut tx = self.pool.begin().await?;
        let reason = format!("superseded by job {by}, a newer request");
        let cause = CancelCause::Superseded;
        let cancelled = cancel_waiting(&mut tx, target_key, by, &reason, cause, now_ms()).await?;
        tx.commit().await?;
        Ok(cancelled)
    }

    async fn request_stop(
        &self,
        target_key: &TargetKey,
        by: JobId,
        reason: &str,
    ) -> StoreResult<Vec<JobId>> {
        let now = now_ms();
        let (key, by_id) = (target_key.as_str(), by.get());
        let mut tx = self.pool.begin().await?;
        let stopped =
            sqlx::query_file_scalar!("queries/jobs/request_stop.sql", reason, by_id, now, key)
                .fetch_all(&mut *tx)
                .await?;
        let cause = CancelCause::Stopped;
        let waiting = cancel_waiting(&mut tx, target_key, by, reason, cause, now).await?;
        tx.commit().await?;
        Ok(stopped.into_iter().map(JobId).chain(waiting).collect())
    }

    async fn record_result(&self, job: JobId, result: &serde_json::Value) -> StoreResult<()> {
        let result = result.to_string();
        let job = job.get();
        let now = now_ms();
        sqlx::query_file!("queries/jobs/record_result.sql", result, now, job)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn intake_log(&self) -> StoreResult<Box<dyn IntakeLog>> {
        Ok(Box::new(SqliteIntakeLog {
            intake: SqliteIntake::open(&self.db_path, self.max_attempts)?,
            sync: self.wal_sync.clone(),
        }))
    }

    async fn claim_job(&self, worker: &str, lease: Duration) -> StoreResult<Option<ClaimedJob>> {
        // Finding a candidate is a plain read: done inside the UPDATE it
        // would hold the write lock that every webhook's commit waits for.
        // The UPDATE then checks the one candidate again under that lock;
        // another worker may have taken it meanwhile, and then the next
        // one is looked for.
        for _ in 0..CLAIM_TRIES {
            let now = now_ms();
            let mut candidate =
                sqlx::query_file_scalar!("queries/claim/first_of_the_oldest.sql", now)
                    .fetch_optional(&self.pool)
                    .await?;
            if candidate.is_none() {
                candidate = sqlx::query_file_scalar!("queries/claim/first_by_target.sql", now)
                    .fetch_optional(&self.pool)
                    .await?;
            }
            let Some(candidate) = candidate else {
                return Ok(None);
            };
            let mut tx = self.pool.begin().await?;
            let lease_end = now + lease.as_millis() as i64;
            let claimed =
                sqlx::query_file!("queries/claim/take.sql", now, worker, lease_end, candidate)
                    .fetch_optional(&mut *tx)
                    .await?;
            let Some(claimed) = claimed else {
                tx.rollback().await?;
                continue;
            };
            let run = sqlx::query_file_scalar!(
                "queries/claim/start_run.sql",
                claimed.id,
                claimed.attempts,
                worker,
                now
            )
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            return Ok(Some(ClaimedJob {
                id: JobId(claimed.id),
                run,
                attempt: claimed.attempts as u32,
                max_attempts: claimed.max_attempts as u32,
                job: stored_job(claimed.id, &claimed.payload)?,
                last_error: claimed.last_error,
            }));
        }
        // Every candidate was taken by another worker: it polls again soon.
        Ok(None)
    }

    async fn heartbeat(
        &self,
        job: &ClaimedJob,
        worker: &str,
        lease: Duration,
    ) -> StoreResult<bool> {
        let now = now_ms();
        let lease_end = now + lease.as_millis() as i64;
        let job_id = job.id.get();
        let updated = sqlx::query_file!(
            "queries/claim/heartbeat.sql",
            lease_end,
            now,
            job_id,
            worker
        )
        .execute(&self.pool)
        .await?;
        Ok(updated.rows_affected() == 1)
    }

    async fn finish_job(
        &self,
        job: &ClaimedJob,
        worker: &str,
        finish: Finish,
    ) -> StoreResult<bool> {
        let now = now_ms();
        let ending = Ending::of(finish);
        let finished_at = (ending.state != JobState::Queued).then_some(now);
        let mut tx = self.pool.begin().await?;
        let job_id = job.id.get();
        let updated = sqlx::query_file!(
            "queries/claim/finish.sql",
            ending.state,
            ending.given_back,
            ending.error,
            ending.result,
            ending.run_at,
            now,
            finished_at,
            job_id,
            worker,
            ending.cancel_cause
        )
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query_file!(
            "queries/claim/finish_run.sql",
            now,
            ending.run,
            ending.error,
            job.run
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn recover_expired_leases(&self) -> StoreResult<Recovered> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        // A write first: it takes the write lock, waiting for it (the busy
        // timeout). A read first would hold a read lock that SQLite cannot
        // turn into the write lock while another reaper holds one: that
        // reaper failed at once with "database is locked".
        sqlx::query_file!("queries/claim/lose_runs.sql", now)
            .execute(&mut *tx)
            .await?;
        // Read under the same write lock as the update below: these are
        // exactly the jobs it makes dead (losing their runs changed none).
        let dying = sqlx::query_file!("queries/claim/dying.sql", now)
            .fetch_all(&mut *tx)
            .await?;
        let recovered = sqlx::query_file!("queries/claim/recover.sql", now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        let mut dead = Vec::with_capacity(dying.len());
        for row in dying {
            dead.push(ClaimedJob {
                id: JobId(row.id),
                run: row.run,
                attempt: row.attempts as u32,
                max_attempts: row.max_attempts as u32,
                job: stored_job(row.id, &row.payload)?,
                last_error: row.last_error,
            });
        }
        Ok(Recovered {
            requeued: recovered - dead.len() as u64,
            dead,
        })
    }

    async fn list_deliveries(&self, query: &DeliveryQuery) -> StoreResult<Vec<DeliveryRow>> {
        let before = query.before.unwrap_or(i64::MAX);
        let limit = i64::from(query.limit);
        let rows = sqlx::query_file!(
            "queries/deliveries/list.sql",
            query.forge,
            query.outcome,
            before,
            limit
        )
        .fetch_all(&self.pool)
        .await?;
        let mut listed = Vec::with_capacity(rows.len());
        for row in rows {
            let jobs = match (row.outcome, row.duplicate_of) {
                (Outcome::Duplicate, Some(first)) => self.jobs_of_delivery(first).await?,
                // Recorded before duplicates pointed at their first.
                (Outcome::Duplicate, None) => {
                    sqlx::query_file_scalar!(
                        "queries/deliveries/jobs_of_first.sql",
                        row.forge,
                        row.delivery_id
                    )
                    .fetch_all(&self.pool)
                    .await?
                }
                _ => self.jobs_of_delivery(row.id).await?,
            };
            let jobs = jobs.into_iter().map(JobId).collect();
            listed.push(DeliveryRow {
                id: row.id,
                forge: row.forge.parse().map_err(|what| StoreError::CorruptRow {
                    table: "deliveries",
                    id: row.id,
                    what,
                })?,
                delivery_id: row.delivery_id,
                event: row.event,
                event_name: row.event_name,
                outcome: row.outcome,
                status_code: row.status_code,
                reason: row.reason,
                repo: row.repo,
                target: row.target,
                sender: row.sender,
                detail: row.detail,
                received_at: row.received_at,
                duplicate_of: row.duplicate_of,
                jobs,
            });
        }
        Ok(listed)
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobRow>> {
        let before = query.before.map_or(i64::MAX, JobId::get);
        let limit = i64::from(query.limit);
        let rows = sqlx::query_file_as!(
            StoredJob,
            "queries/jobs/list.sql",
            query.state,
            before,
            limit
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(StoredJob::into_row).collect()
    }

    async fn job(&self, id: JobId) -> StoreResult<Option<JobDetail>> {
        let id = id.get();
        let job = sqlx::query_file_as!(StoredJob, "queries/jobs/one.sql", id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(job) = job else { return Ok(None) };
        let runs = sqlx::query_file_as!(JobRunRow, "queries/jobs/runs.sql", id)
            .fetch_all(&self.pool)
            .await?;
        Ok(Some(JobDetail {
            job: job.into_row()?,
            runs,
        }))
    }

    async fn installations(&self) -> StoreResult<Vec<InstallationRow>> {
        let rows = sqlx::query_file!("queries/deliveries/installations.sql")
            .fetch_all(&self.pool)
            .await?;
        let repos = sqlx::query_file!("queries/deliveries/installation_repositories.sql")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| InstallationRow {
                id: row.id,
                account: row.account,
                state: row.state,
                repositories: repos
                    .iter()
                    .filter(|r| r.installation == row.id)
                    .map(|r| r.repository.clone())
                    .collect(),
                updated_at: row.updated_at,
            })
            .collect())
    }

    async fn stop_requested(&self, job: JobId) -> StoreResult<Option<String>> {
        let job = job.get();
        let reason = sqlx::query_file_scalar!("queries/jobs/stop_requested.sql", job)
            .fetch_optional(&self.pool)
            .await?;
        Ok(reason.flatten())
    }

    async fn job_counts(&self) -> StoreResult<Vec<(JobState, i64)>> {
        let counted = sqlx::query_file!("queries/jobs/counts.sql")
            .fetch_all(&self.pool)
            .await?;
        Ok(JobState::ALL
            .iter()
            .map(|s| {
                let n = counted
                    .iter()
                    .find(|c| c.state == *s)
                    .map_or(0, |c| c.count);
                (*s, n)
            })
            .collect())
    }

    async fn delivery_payload(&self, id: i64) -> StoreResult<Option<Vec<u8>>> {
        let stored = sqlx::query_file_scalar!("queries/deliveries/payload.sql", id)
            .fetch_optional(&self.pool)
            .await?;
        match stored.flatten() {
            None => Ok(None),
            Some(bytes) => CompressedPayload::from_stored(bytes)
                .decompress()
                .map(Some)
                .map_err(|source| StoreError::CorruptPayload { id, source }),
        }
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

impl SqliteStore {
    async fn jobs_of_delivery(&self, delivery: i64) -> StoreResult<Vec<i64>> {
        Ok(
            sqlx::query_file_scalar!("queries/deliveries/jobs.sql", delivery)
                .fetch_all(&self.pool)
                .await?,
        )
    }
}

/// A job's row as `queries/jobs/{list,one}.sql` read it.
struct StoredJob {
    id: i64,
    delivery: Option<i64>,
    kind: JobKind,
    payload: String,
    target_key: String,
    state: JobState,
    attempts: i64,
    max_attempts: i64,
    run_at: i64,
    lease_owner: Option<String>,
    lease_expires_at: Option<i64>,
    last_error: Option<String>,
    result: Option<String>,
    cancel_cause: Option<CancelCause>,
    created_at: i64,
    updated_at: i64,
    finished_at: Option<i64>,
}

impl StoredJob {
    fn into_row(self) -> StoreResult<JobRow> {
        Ok(JobRow {
            payload: stored_json(self.id, &self.payload)?,
            result: self
                .result
                .as_deref()
                .map(|r| stored_json(self.id, r))
                .transpose()?,
            id: JobId(self.id),
            delivery: self.delivery,
            kind: self.kind,
            target_key: TargetKey::from_stored(self.target_key),
            state: self.state,
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            run_at: self.run_at,
            lease_owner: self.lease_owner,
            lease_expires_at: self.lease_expires_at,
            last_error: self.last_error,
            cancel_cause: self.cancel_cause,
            created_at: self.created_at,
            updated_at: self.updated_at,
            finished_at: self.finished_at,
        })
    }
}
