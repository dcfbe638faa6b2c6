//! Retention: deleting what is past its time, a batch per statement (or
//! per transaction, for a job and its runs), pausing between batches so
//! that a long backlog never holds locks the intake and workers wait for.

use std::time::Duration;

use forgehand_store::{Pruned, Retention, StoreResult};
use sqlx::postgres::{PgPool, PgQueryResult};

/// Rows deleted per statement.
const BATCH: i64 = 500;
/// The pause between two batches.
const PAUSE: Duration = Duration::from_millis(5);

pub(crate) async fn prune(pool: &PgPool, retention: &Retention) -> StoreResult<Pruned> {
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
    Fut: std::future::Future<Output = Result<PgQueryResult, sqlx::Error>>,
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
