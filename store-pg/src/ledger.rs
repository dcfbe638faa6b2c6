//! What a job's handler may do with the store ([`JobLedger`]): its
//! target's history, supersede and stop, keep a result.
//!
//! [`JobLedger`]: forgehand_store::JobLedger

use forgehand_store::time::now_ms;
use forgehand_store::{CancelCause, JobId, JobState, StoreResult, TargetJob};
use sqlx::postgres::{PgConnection, PgPool};

use crate::stored_json;

pub(crate) async fn target_history(
    pool: &PgPool,
    target_key: &str,
    limit: u32,
) -> StoreResult<Vec<TargetJob>> {
    let limit = i64::from(limit);
    let rows = sqlx::query_file!("queries/jobs/target_history.sql", target_key, limit)
        .fetch_all(pool)
        .await?;
    rows.into_iter()
        .map(|row| {
            Ok(TargetJob {
                id: JobId(row.id),
                state: row.state,
                job: stored_json(row.id, &row.payload)?,
                result: row.result.and_then(|r| serde_json::from_str(&r).ok()),
                error: row.last_error,
                stopped_by: row.stopped_by.map(JobId),
                cancel_cause: row.cancel_cause,
            })
        })
        .collect()
}

/// Cancels a target's waiting work (older than job `by`).
async fn cancel_waiting(
    tx: &mut PgConnection,
    target_key: &str,
    by: i64,
    reason: &str,
    cause: CancelCause,
    now: i64,
) -> StoreResult<Vec<i64>> {
    Ok(sqlx::query_file_scalar!(
        "queries/jobs/cancel_waiting.sql",
        reason,
        by,
        now,
        target_key,
        cause as _
    )
    .fetch_all(tx)
    .await?)
}

pub(crate) async fn supersede_waiting(
    pool: &PgPool,
    target_key: &str,
    by: i64,
) -> StoreResult<Vec<i64>> {
    let mut tx = pool.begin().await?;
    let reason = format!("superseded by job {by}, a newer request");
    let cause = CancelCause::Superseded;
    let cancelled = cancel_waiting(&mut tx, target_key, by, &reason, cause, now_ms()).await?;
    tx.commit().await?;
    Ok(cancelled)
}

pub(crate) async fn request_stop(
    pool: &PgPool,
    target_key: &str,
    by: i64,
    reason: &str,
) -> StoreResult<Vec<i64>> {
    let now = now_ms();
    let mut tx = pool.begin().await?;
    let mut stopped =
        sqlx::query_file_scalar!("queries/jobs/request_stop.sql", reason, by, now, target_key)
            .fetch_all(&mut *tx)
            .await?;
    let cause = CancelCause::Stopped;
    stopped.extend(cancel_waiting(&mut tx, target_key, by, reason, cause, now).await?);
    tx.commit().await?;
    Ok(stopped)
}

pub(crate) async fn record_result(
    pool: &PgPool,
    job: i64,
    result: &serde_json::Value,
) -> StoreResult<()> {
    let result = result.to_string();
    let now = now_ms();
    sqlx::query_file!("queries/jobs/record_result.sql", result, now, job)
        .execute(pool)
        .await?;
    Ok(())
}
