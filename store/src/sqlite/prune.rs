//! Retention: deleting what is past its time, a batch per transaction.
//! The intake writes on its own connection and waits (busy timeout) while
//! a batch holds the write lock, so a batch is kept small, and the pruner
//! pauses between batches to let the intake in.

use std::time::Duration;

use sqlx::sqlite::SqliteQueryResult;
use sqlx::SqlitePool;

use crate::{Pruned, Retention, StoreResult};

/// Rows deleted per statement.
const BATCH: i64 = 500;
/// The pause between two batches.
const PAUSE: Duration = Duration::from_millis(5);

#[cfg(test)]
/// Every query (`queries/prune/`) finds its rows through an index on age
/// (migration 0006); `sqlite::tests` checks their plans.
pub(super) const PRUNE_QUERIES: [(&str, &str); 5] = [
    (
        include_str!("../../queries/prune/job_runs.sql"),
        "jobs_finished",
    ),
    (
        include_str!("../../queries/prune/jobs.sql"),
        "jobs_finished",
    ),
    (
        include_str!("../../queries/prune/deliveries.sql"),
        "deliveries_by_age",
    ),
    (
        include_str!("../../queries/prune/refused.sql"),
        "deliveries_by_age",
    ),
    (
        include_str!("../../queries/prune/digests.sql"),
        "payload_digests_by_age",
    ),
];

pub(super) async fn prune(pool: &SqlitePool, retention: &Retention) -> StoreResult<Pruned> {
    let mut pruned = Pruned::default();
    // Jobs first: their deliveries can go only once they are gone.
    loop {
        let mut tx = pool.begin().await?;
        let before = retention.jobs_before;
        sqlx::query_file!("queries/prune/job_runs.sql", before, BATCH)
            .execute(&mut *tx)
            .await?;
        let jobs = sqlx::query_file!("queries/prune/jobs.sql", before, BATCH)
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
    let before = retention.deliveries_before;
    pruned.deliveries = in_batches(|| {
        sqlx::query_file!("queries/prune/deliveries.sql", before, BATCH).execute(pool)
    })
    .await?;
    let before = retention.refused_before;
    pruned.refused =
        in_batches(|| sqlx::query_file!("queries/prune/refused.sql", before, BATCH).execute(pool))
            .await?;
    let before = retention.digests_before;
    pruned.digests =
        in_batches(|| sqlx::query_file!("queries/prune/digests.sql", before, BATCH).execute(pool))
            .await?;
    Ok(pruned)
}

/// Runs a batch's deletion until a batch deletes less than a full batch;
/// returns how many rows went.
async fn in_batches<F, Fut>(mut batch: F) -> StoreResult<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<SqliteQueryResult, sqlx::Error>>,
{
    let mut total = 0;
    loop {
        let deleted = batch().await?.rows_affected();
        total += deleted;
        if deleted < BATCH as u64 {
            return Ok(total);
        }
        tokio::time::sleep(PAUSE).await;
    }
}
