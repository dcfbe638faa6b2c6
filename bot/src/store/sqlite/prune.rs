//! Retention: deleting what is past its time, a batch per transaction.
//! The intake writes on its own connection and waits (busy timeout) while
//! a batch holds the write lock, so a batch is kept small, and the pruner
//! pauses between batches to let the intake in.

use std::time::Duration;

use sqlx::SqlitePool;

use crate::store::{Pruned, Retention, StoreResult};

/// Rows deleted per statement.
const BATCH: i64 = 500;
/// The pause between two batches.
const PAUSE: Duration = Duration::from_millis(5);

/// Every query finds its rows through an index on age (migration 0006);
/// `store::sqlite::tests` checks their plans. The job queries name the
/// finished states one by one, which the partial index `jobs_finished`
/// does not need but which keeps a waiting or running job out whatever
/// its `finished_at` says.
macro_rules! finished_jobs {
    () => {
        "SELECT id FROM jobs WHERE finished_at < ?1 \
         AND state <> 'queued' AND state <> 'running' ORDER BY finished_at LIMIT ?2"
    };
}

pub(super) const PRUNE_JOB_RUNS: &str =
    concat!("DELETE FROM job_runs WHERE job IN (", finished_jobs!(), ")");

/// Runs are deleted first, in the same transaction; a job that still has
/// a run (one started meanwhile cannot be: the job is finished) is left.
pub(super) const PRUNE_JOBS: &str = concat!(
    "DELETE FROM jobs WHERE id IN (",
    finished_jobs!(),
    ") AND NOT EXISTS (SELECT 1 FROM job_runs r WHERE r.job = jobs.id)"
);

/// Deliveries other than refused ones, unless a job still points at one
/// (a waiting or running job, or a finished one not yet past its time).
pub(super) const PRUNE_DELIVERIES: &str = "DELETE FROM deliveries WHERE id IN (\
     SELECT d.id FROM deliveries d WHERE d.outcome IN ('accepted', 'ignored', 'duplicate') \
     AND d.received_at < ?1 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery = d.id) LIMIT ?2)";

/// Refused deliveries never have jobs.
pub(super) const PRUNE_REFUSED: &str = "DELETE FROM deliveries WHERE id IN (\
     SELECT id FROM deliveries WHERE outcome = 'rejected' AND received_at < ?1 LIMIT ?2)";

pub(super) const PRUNE_DIGESTS: &str = "DELETE FROM payload_digests WHERE (signer, sha256) IN (\
     SELECT signer, sha256 FROM payload_digests WHERE received_at < ?1 LIMIT ?2)";

pub(super) async fn prune(pool: &SqlitePool, retention: &Retention) -> StoreResult<Pruned> {
    let mut pruned = Pruned::default();
    // Jobs first: their deliveries can go only once they are gone.
    loop {
        let mut tx = pool.begin().await?;
        sqlx::query(PRUNE_JOB_RUNS)
            .bind(retention.jobs_before)
            .bind(BATCH)
            .execute(&mut *tx)
            .await?;
        let jobs = sqlx::query(PRUNE_JOBS)
            .bind(retention.jobs_before)
            .bind(BATCH)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        pruned.jobs += jobs;
        if jobs < BATCH as u64 {
            break;
        }
        tokio::time::sleep(PAUSE).await;
    }
    pruned.deliveries = in_batches(pool, PRUNE_DELIVERIES, retention.deliveries_before).await?;
    pruned.refused = in_batches(pool, PRUNE_REFUSED, retention.refused_before).await?;
    pruned.digests = in_batches(pool, PRUNE_DIGESTS, retention.digests_before).await?;
    Ok(pruned)
}

/// Runs `sql` (`?1` the time, `?2` the batch size) until a batch deletes
/// less than a full batch; returns how many rows went.
async fn in_batches(pool: &SqlitePool, sql: &str, before: i64) -> StoreResult<u64> {
    let mut total = 0;
    loop {
        let deleted = sqlx::query(sql)
            .bind(before)
            .bind(BATCH)
            .execute(pool)
            .await?
            .rows_affected();
        total += deleted;
        if deleted < BATCH as u64 {
            return Ok(total);
        }
        tokio::time::sleep(PAUSE).await;
    }
}
