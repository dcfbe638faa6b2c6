//! The SQLite store: one file, WAL, every commit synced to disk.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{QueryBuilder, Sqlite, SqlitePool};

mod prune;
mod record;

use record::{SqliteIntake, SqliteIntakeLog, WalSync};

use super::*;
use crate::time::now_ms;

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

/// The condition on job `j` (with `now` the given parameter) that makes it
/// claimable: due; not held back by a running job of its target (a stop
/// runs beside the job it stops; the unique index on running jobs per
/// target backs this up); and, of a target's waiting requests, the newest:
/// if its sender may command the bot, it supersedes the rest.
macro_rules! claimable {
    ($now:literal) => {
        concat!(
            "j.state = 'queued' AND j.run_at <= ", $now,
            " AND (j.kind = 'command.stop' OR NOT EXISTS (SELECT 1 FROM jobs r \
                 WHERE r.target_key = j.target_key AND r.state = 'running' AND r.kind <> 'command.stop')) \
             AND NOT (j.supersedable = 1 AND EXISTS (SELECT 1 FROM jobs n \
                 WHERE n.target_key = j.target_key AND n.state = 'queued' AND n.supersedable = 1 \
                 AND n.id > j.id AND n.run_at <= ", $now, "))"
        )
    };
}

// Looked up once per redelivery or per listed delivery: each must search
// an index (deliveries_once, jobs_by_delivery), never scan a table that
// grows with every delivery. `outcome IN (...)` repeats the condition of
// the partial index deliveries_once word for word, which is what lets
// SQLite use it.
const FIRST_DELIVERY: &str = "SELECT id FROM deliveries \
     WHERE forge = ?1 AND delivery_id = ?2 AND outcome IN ('accepted', 'ignored')";
/// The first delivery of a body, when a new delivery's digest is taken.
const DIGEST_OWNER: &str = "SELECT delivery FROM payload_digests WHERE signer = ?1 AND sha256 = ?2";
const JOBS_OF_DELIVERY: &str = "SELECT id FROM jobs WHERE delivery = ?1 ORDER BY id";
const JOBS_OF_FIRST_DELIVERY: &str = "SELECT j.id FROM jobs j JOIN deliveries d ON j.delivery = d.id \
     WHERE d.forge = ?1 AND d.delivery_id = ?2 AND d.outcome IN ('accepted', 'ignored') ORDER BY j.id";

/// The first claimable job among the 32 oldest due waiting ones: the usual
/// case, where little is held back.
const FIRST_OF_THE_OLDEST: &str = concat!(
    "SELECT j.id FROM (SELECT * FROM jobs WHERE state = 'queued' AND run_at <= ?1 \
         ORDER BY run_at, id LIMIT 32) j WHERE ",
    claimable!("?1"),
    " ORDER BY j.run_at, j.id LIMIT 1"
);

/// The claimable job found target by target, each target once, for when
/// the oldest waiting jobs are all held back (a target with a running job,
/// or many requests of which only the newest counts): walking them one by
/// one cost a claim time in proportion to how many waited. Of a target
/// with no running job, its newest due request (which supersedes the
/// others) and its oldest other due job (help, explanations, stops) are
/// candidates; of a target with one, its oldest due stop. The oldest
/// candidate wins. (CROSS JOIN keeps SQLite from reading all jobs to join
/// them to the few candidates, which it plans on a database without rows.)
const FIRST_BY_TARGET: &str = "\
    WITH RECURSIVE waiting(target) AS ( \
        SELECT (SELECT target_key FROM jobs WHERE state = 'queued' ORDER BY target_key LIMIT 1) \
        UNION ALL \
        SELECT (SELECT target_key FROM jobs WHERE state = 'queued' AND target_key > waiting.target \
                ORDER BY target_key LIMIT 1) \
        FROM waiting WHERE waiting.target IS NOT NULL \
    ), \
    targets(target, busy) AS ( \
        SELECT w.target, EXISTS (SELECT 1 FROM jobs r WHERE r.state = 'running' \
                                 AND r.target_key = w.target AND r.kind <> 'command.stop') \
        FROM waiting w WHERE w.target IS NOT NULL \
    ), \
    candidates(id) AS ( \
        SELECT (SELECT id FROM jobs WHERE state = 'queued' AND target_key = t.target \
                AND supersedable = 1 AND run_at <= ?1 ORDER BY id DESC LIMIT 1) \
        FROM targets t WHERE NOT t.busy \
        UNION ALL \
        SELECT (SELECT id FROM jobs WHERE state = 'queued' AND target_key = t.target \
                AND supersedable = 0 AND run_at <= ?1 ORDER BY id LIMIT 1) \
        FROM targets t WHERE NOT t.busy \
        UNION ALL \
        SELECT (SELECT id FROM jobs WHERE state = 'queued' AND kind = 'command.stop' \
                AND target_key = t.target AND run_at <= ?1 ORDER BY id LIMIT 1) \
        FROM targets t WHERE t.busy \
    ) \
    SELECT j.id FROM candidates c CROSS JOIN jobs j ON j.id = c.id ORDER BY j.run_at, j.id LIMIT 1";

const JOB_COLUMNS: &str =
    "id, delivery, kind, payload, target_key, state, attempts, max_attempts, run_at, \
     lease_owner, lease_expires_at, last_error, result, created_at, updated_at, finished_at";

/// Cancels a target's waiting work (older than job `by`).
async fn cancel_waiting(
    tx: &mut sqlx::SqliteConnection,
    target_key: &str,
    by: i64,
    reason: &str,
    now: i64,
) -> StoreResult<Vec<i64>> {
    Ok(sqlx::query_scalar(
        "UPDATE jobs SET state = 'cancelled', last_error = ?1, stopped_by = ?2, \
             finished_at = ?3, updated_at = ?3, lease_owner = NULL, lease_expires_at = NULL \
         WHERE target_key = ?4 AND state = 'queued' AND supersedable = 1 AND id < ?2 RETURNING id",
    )
    .bind(reason)
    .bind(by)
    .bind(now)
    .bind(target_key)
    .fetch_all(tx)
    .await?)
}

type TargetRow = (
    i64,
    JobState,
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
);

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
            let mut candidate: Option<i64> = sqlx::query_scalar(FIRST_OF_THE_OLDEST)
                .bind(now)
                .fetch_optional(&self.pool)
                .await?;
            if candidate.is_none() {
                candidate = sqlx::query_scalar(FIRST_BY_TARGET)
                    .bind(now)
                    .fetch_optional(&self.pool)
                    .await?;
            }
            let Some(candidate) = candidate else {
                return Ok(None);
            };
            let mut tx = self.pool.begin().await?;
            let claimed: Option<(i64, i64, i64, String)> = sqlx::query_as(concat!(
                "UPDATE jobs AS j SET state = 'running', attempts = attempts + 1, lease_owner = ?1, \
                     lease_expires_at = ?2, updated_at = ?3 \
                 WHERE j.id = ?4 AND ",
                claimable!("?3"),
                " RETURNING id, attempts, max_attempts, payload"
            ))
            .bind(worker)
            .bind(now + lease.as_millis() as i64)
            .bind(now)
            .bind(candidate)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((id, attempt, max_attempts, payload)) = claimed else {
                tx.rollback().await?;
                continue;
            };
            let run: i64 = sqlx::query_scalar(
                "INSERT INTO job_runs (job, attempt, worker, started_at) VALUES (?, ?, ?, ?) RETURNING id",
            )
            .bind(id)
            .bind(attempt)
            .bind(worker)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            let job = serde_json::from_str(&payload)
                .map_err(|source| StoreError::CorruptJob { id, source })?;
            return Ok(Some(ClaimedJob {
                id,
                run,
                attempt: attempt as u32,
                max_attempts: max_attempts as u32,
                job,
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
        let updated = sqlx::query(
            "UPDATE jobs SET lease_expires_at = ?, updated_at = ? \
             WHERE id = ? AND state = 'running' AND lease_owner = ?",
        )
        .bind(now + lease.as_millis() as i64)
        .bind(now)
        .bind(job.id)
        .bind(worker)
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
        let (state, run_outcome, error, result, run_at, attempts_delta) = match &finish {
            Finish::Succeeded { result } => (
                JobState::Succeeded,
                "succeeded",
                None,
                Some(result.to_string()),
                None,
                0,
            ),
            Finish::Failed { error } => (
                JobState::Failed,
                "failed",
                Some(error.clone()),
                None,
                None,
                0,
            ),
            Finish::Retry { error, run_at } => (
                JobState::Queued,
                "retry",
                Some(error.clone()),
                None,
                Some(*run_at),
                0,
            ),
            Finish::Dead { error } => (JobState::Dead, "dead", Some(error.clone()), None, None, 0),
            Finish::Released => (JobState::Queued, "released", None, None, None, 1),
            Finish::Cancelled { reason } => (
                JobState::Cancelled,
                "cancelled",
                Some(reason.clone()),
                None,
                None,
                0,
            ),
        };
        let terminal = !matches!(state, JobState::Queued);
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE jobs SET state = ?, attempts = attempts - ?, lease_owner = NULL, lease_expires_at = NULL, \
                 last_error = COALESCE(?, last_error), result = COALESCE(?, result), \
                 run_at = COALESCE(?, run_at), updated_at = ?, finished_at = ? \
             WHERE id = ? AND state = 'running' AND lease_owner = ?",
        )
        .bind(state)
        .bind(attempts_delta)
        .bind(&error)
        .bind(&result)
        .bind(run_at)
        .bind(now)
        .bind(terminal.then_some(now))
        .bind(job.id)
        .bind(worker)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query("UPDATE job_runs SET finished_at = ?, outcome = ?, error = ? WHERE id = ?")
            .bind(now)
            .bind(run_outcome)
            .bind(&error)
            .bind(job.run)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn recover_expired_leases(&self) -> StoreResult<Recovered> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        // Read under the same write lock as the update below: these are
        // exactly the jobs it makes dead.
        let dying: Vec<(i64, i64, i64, i64, String)> = sqlx::query_as(
            "SELECT j.id, COALESCE((SELECT MAX(r.id) FROM job_runs r WHERE r.job = j.id), 0), \
                 j.attempts, j.max_attempts, j.payload FROM jobs j \
             WHERE j.state = 'running' AND j.lease_expires_at < ?1 AND j.attempts >= j.max_attempts",
        )
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE job_runs SET finished_at = ?1, outcome = 'lost', \
                 error = 'lease expired: the worker stopped heartbeating (crashed or hung)' \
             WHERE finished_at IS NULL AND job IN \
                 (SELECT id FROM jobs WHERE state = 'running' AND lease_expires_at < ?1)",
        )
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let recovered = sqlx::query(
            "UPDATE jobs SET \
                 state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'queued' END, \
                 finished_at = CASE WHEN attempts >= max_attempts THEN ?1 END, \
                 last_error = 'lease of ' || COALESCE(lease_owner, '?') || ' expired: the worker stopped heartbeating', \
                 lease_owner = NULL, lease_expires_at = NULL, updated_at = ?1 \
             WHERE state = 'running' AND lease_expires_at < ?1",
        )
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        let mut dead = Vec::with_capacity(dying.len());
        for (id, run, attempts, max_attempts, payload) in dying {
            let job = serde_json::from_str(&payload)
                .map_err(|source| StoreError::CorruptJob { id, source })?;
            dead.push(ClaimedJob {
                id,
                run,
                attempt: attempts as u32,
                max_attempts: max_attempts as u32,
                job,
            });
        }
        Ok(Recovered {
            requeued: recovered - dead.len() as u64,
            dead,
        })
    }

    async fn list_deliveries(&self, query: &DeliveryQuery) -> StoreResult<Vec<DeliveryRow>> {
        let mut sql = QueryBuilder::<Sqlite>::new(
            "SELECT id, forge, delivery_id, event, event_name, outcome, status_code, reason, repo, target, \
             sender, detail, received_at, duplicate_of FROM deliveries WHERE 1 = 1",
        );
        if let Some(forge) = &query.forge {
            sql.push(" AND forge = ").push_bind(forge);
        }
        if let Some(outcome) = query.outcome {
            sql.push(" AND outcome = ").push_bind(outcome);
        }
        if let Some(before) = query.before {
            sql.push(" AND id < ").push_bind(before);
        }
        sql.push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::from(query.limit));
        let mut rows: Vec<DeliveryRow> = sql.build_query_as().fetch_all(&self.pool).await?;
        for row in &mut rows {
            row.jobs = match (row.outcome, row.duplicate_of) {
                (Outcome::Duplicate, Some(first)) => {
                    sqlx::query_scalar(JOBS_OF_DELIVERY)
                        .bind(first)
                        .fetch_all(&self.pool)
                        .await?
                }
                // Recorded before duplicates pointed at their first.
                (Outcome::Duplicate, None) => {
                    sqlx::query_scalar(JOBS_OF_FIRST_DELIVERY)
                        .bind(&row.forge)
                        .bind(&row.delivery_id)
                        .fetch_all(&self.pool)
                        .await?
                }
                _ => {
                    sqlx::query_scalar(JOBS_OF_DELIVERY)
                        .bind(row.id)
                        .fetch_all(&self.pool)
                        .await?
                }
            };
        }
        Ok(rows)
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobRow>> {
        let mut sql =
            QueryBuilder::<Sqlite>::new(format!("SELECT {JOB_COLUMNS} FROM jobs WHERE 1 = 1"));
        if let Some(state) = query.state {
            sql.push(" AND state = ").push_bind(state);
        }
        if let Some(before) = query.before {
            sql.push(" AND id < ").push_bind(before);
        }
        sql.push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::from(query.limit));
        Ok(sql.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn job(&self, id: i64) -> StoreResult<Option<JobDetail>> {
        let job: Option<JobRow> =
            sqlx::query_as(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?"))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        let Some(job) = job else { return Ok(None) };
        let runs = sqlx::query_as(
            "SELECT id, attempt, worker, started_at, finished_at, outcome, error FROM job_runs \
             WHERE job = ? ORDER BY id",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        Ok(Some(JobDetail { job, runs }))
    }

    async fn request_stop(&self, target_key: &str, by: i64, reason: &str) -> StoreResult<Vec<i64>> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let mut stopped: Vec<i64> = sqlx::query_scalar(
            "UPDATE jobs SET stop_reason = ?1, stopped_by = ?2, updated_at = ?3 \
             WHERE target_key = ?4 AND state = 'running' AND kind <> 'command.stop' RETURNING id",
        )
        .bind(reason)
        .bind(by)
        .bind(now)
        .bind(target_key)
        .fetch_all(&mut *tx)
        .await?;
        stopped.extend(cancel_waiting(&mut tx, target_key, by, reason, now).await?);
        tx.commit().await?;
        Ok(stopped)
    }

    async fn supersede_waiting(&self, target_key: &str, by: i64) -> StoreResult<Vec<i64>> {
        let mut tx = self.pool.begin().await?;
        let reason = format!("superseded by job {by}, a newer request");
        let cancelled = cancel_waiting(&mut tx, target_key, by, &reason, now_ms()).await?;
        tx.commit().await?;
        Ok(cancelled)
    }

    async fn record_result(&self, job: i64, result: &serde_json::Value) -> StoreResult<()> {
        sqlx::query("UPDATE jobs SET result = ?, updated_at = ? WHERE id = ?")
            .bind(result.to_string())
            .bind(now_ms())
            .bind(job)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn installations(&self) -> StoreResult<Vec<InstallationRow>> {
        let rows: Vec<(i64, String, String, i64)> =
            sqlx::query_as("SELECT id, account, state, updated_at FROM installations ORDER BY id")
                .fetch_all(&self.pool)
                .await?;
        let repos: Vec<(i64, String)> = sqlx::query_as(
            "SELECT installation, repository FROM installation_repositories ORDER BY repository",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, account, state, updated_at)| InstallationRow {
                id,
                account,
                state,
                repositories: repos
                    .iter()
                    .filter(|(i, _)| *i == id)
                    .map(|(_, r)| r.clone())
                    .collect(),
                updated_at,
            })
            .collect())
    }

    async fn stop_requested(&self, job: i64) -> StoreResult<Option<String>> {
        let reason: Option<Option<String>> =
            sqlx::query_scalar("SELECT stop_reason FROM jobs WHERE id = ?")
                .bind(job)
                .fetch_optional(&self.pool)
                .await?;
        Ok(reason.flatten())
    }

    async fn target_history(&self, target_key: &str, limit: u32) -> StoreResult<Vec<TargetJob>> {
        let rows: Vec<TargetRow> = sqlx::query_as(
            // Every state named, so that the index on (state, target) serves.
            "SELECT id, state, payload, result, last_error, stopped_by FROM jobs \
             WHERE state IN ('queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled') \
             AND target_key = ? ORDER BY id DESC LIMIT ?",
        )
        .bind(target_key)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(id, state, payload, result, error, stopped_by)| {
                Ok(TargetJob {
                    id,
                    state,
                    job: serde_json::from_str(&payload)
                        .map_err(|source| StoreError::CorruptJob { id, source })?,
                    result: result.and_then(|r| serde_json::from_str(&r).ok()),
                    error,
                    stopped_by,
                })
            })
            .collect()
    }

    async fn job_counts(&self) -> StoreResult<Vec<(JobState, i64)>> {
        let counted: Vec<(JobState, i64)> =
            sqlx::query_as("SELECT state, COUNT(*) FROM jobs GROUP BY state")
                .fetch_all(&self.pool)
                .await?;
        Ok(JobState::ALL
            .iter()
            .map(|s| {
                (
                    *s,
                    counted.iter().find(|(c, _)| c == s).map_or(0, |(_, n)| *n),
                )
            })
            .collect())
    }

    async fn delivery_payload(&self, id: i64) -> StoreResult<Option<Vec<u8>>> {
        let stored: Option<Option<Vec<u8>>> =
            sqlx::query_scalar("SELECT payload FROM deliveries WHERE id = ?")
                .bind(id)
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
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Row;

    /// The steps SQLite plans for `sql` on a freshly migrated database.
    async fn query_plan(sql: &str) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("plan.db").display());
        let store = SqliteStore::connect(&url).await.unwrap();
        let explain = format!("EXPLAIN QUERY PLAN {sql}");
        // EXPLAIN needs no values: an unbound parameter reads as NULL.
        sqlx::query(&explain)
            .fetch_all(store.pool())
            .await
            .unwrap()
            .iter()
            .map(|row| row.get("detail"))
            .collect()
    }

    /// A redelivery is handled inside the intake's one writer: a lookup
    /// there that scanned a table would hold up every webhook behind it,
    /// longer the more deliveries were ever recorded.
    #[tokio::test]
    async fn lookups_made_per_delivery_search_an_index() {
        for (sql, index) in [
            (FIRST_DELIVERY, "deliveries_once"),
            (JOBS_OF_DELIVERY, "jobs_by_delivery"),
            (JOBS_OF_FIRST_DELIVERY, "jobs_by_delivery"),
            (DIGEST_OWNER, "PRIMARY KEY"),
        ] {
            let plan = query_plan(sql).await;
            assert!(
                plan.iter().all(|step| step.starts_with("SEARCH")),
                "{sql}\n{plan:#?}"
            );
            assert!(
                plan.iter().any(|step| step.contains(index)),
                "{sql} does not use {index}\n{plan:#?}"
            );
        }
    }

    /// Pruning runs beside the intake, a batch at a time: finding a batch
    /// must not read every delivery, job or digest ever kept.
    #[tokio::test]
    async fn pruning_finds_its_rows_through_an_index() {
        for (sql, index) in [
            (prune::PRUNE_JOB_RUNS, "jobs_finished"),
            (prune::PRUNE_JOBS, "jobs_finished"),
            (prune::PRUNE_DELIVERIES, "deliveries_by_age"),
            (prune::PRUNE_REFUSED, "deliveries_by_age"),
            (prune::PRUNE_DIGESTS, "payload_digests_by_age"),
        ] {
            let plan = query_plan(sql).await;
            let scanned: Vec<&String> = plan
                .iter()
                .filter(|step| step.starts_with("SCAN ") || step.contains("TEMP B-TREE"))
                .collect();
            assert!(scanned.is_empty(), "{sql}\n{plan:#?}");
            assert!(
                plan.iter().any(|step| step.contains(index)),
                "{sql} does not use {index}\n{plan:#?}"
            );
        }
    }

    /// A claim must not cost more the more jobs wait: it may step through
    /// the targets with waiting jobs, but never read all waiting jobs.
    #[tokio::test]
    async fn claiming_reads_no_table_whole() {
        for sql in [FIRST_OF_THE_OLDEST, FIRST_BY_TARGET] {
            let plan = query_plan(sql).await;
            // Tables are read by SEARCH; what is scanned is the 32 oldest
            // (`j`) or the targets found (`waiting`, `w`, `t`, `c`).
            let scanned: Vec<&String> = plan
                .iter()
                .filter(|step| step.starts_with("SCAN "))
                .filter(|step| {
                    ![
                        "SCAN j",
                        "SCAN waiting",
                        "SCAN w",
                        "SCAN t",
                        "SCAN c",
                        "SCAN CONSTANT ROW",
                    ]
                    .contains(&step.as_str())
                })
                .collect();
            assert!(scanned.is_empty(), "{sql}\n{plan:#?}");
        }
    }
}
