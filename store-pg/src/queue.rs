//! The queue's side of the store: claiming with a lease, heartbeats, the
//! end of an attempt, and the recovery of jobs whose worker died.

use std::time::Duration;

use forgehand_store::time::now_ms;
use forgehand_store::{
    CancelCause, ClaimedJob, Finish, JobId, JobState, Recovered, RunOutcome, StoreResult,
};
use sqlx::postgres::PgPool;

use crate::stored_json;

/// How many times one claim looks again after losing a race for a target
/// (another claimer took another job of it at the same moment).
const CLAIM_TRIES: usize = 3;

/// The SQLSTATE of a unique violation.
const UNIQUE_VIOLATION: &str = "23505";

/// What a take returns.
struct Taken {
    id: i64,
    attempts: i64,
    max_attempts: i64,
    payload: String,
    last_error: Option<String>,
}

pub(crate) async fn claim(
    pool: &PgPool,
    worker: &str,
    lease: Duration,
) -> StoreResult<Option<ClaimedJob>> {
    for _ in 0..CLAIM_TRIES {
        match try_claim(pool, worker, lease).await {
            Err(sqlx::Error::Database(error))
                if error.code().as_deref() == Some(UNIQUE_VIOLATION) =>
            {
                // Two claimers took two jobs of one target at once: the
                // index let the first through. Look again.
                continue;
            }
            Err(error) => return Err(error.into()),
            Ok(None) => return Ok(None),
            Ok(Some((taken, run))) => {
                return Ok(Some(ClaimedJob {
                    job: stored_json(taken.id, &taken.payload)?,
                    id: JobId(taken.id),
                    run,
                    attempt: taken.attempts as u32,
                    max_attempts: taken.max_attempts as u32,
                    last_error: taken.last_error,
                }))
            }
        }
    }
    // Every candidate was taken by another claimer: the worker polls again soon.
    Ok(None)
}

async fn try_claim(
    pool: &PgPool,
    worker: &str,
    lease: Duration,
) -> Result<Option<(Taken, i64)>, sqlx::Error> {
    let now = now_ms();
    let lease_end = now + lease.as_millis() as i64;
    let mut tx = pool.begin().await?;
    let mut taken = sqlx::query_file_as!(
        Taken,
        "queries/claim/take_oldest.sql",
        now,
        worker,
        lease_end
    )
    .fetch_optional(&mut *tx)
    .await?;
    if taken.is_none() {
        taken = sqlx::query_file_as!(
            Taken,
            "queries/claim/take_by_target.sql",
            now,
            worker,
            lease_end
        )
        .fetch_optional(&mut *tx)
        .await?;
    }
    let Some(taken) = taken else {
        tx.rollback().await?;
        return Ok(None);
    };
    let run = sqlx::query_file_scalar!(
        "queries/claim/start_run.sql",
        taken.id,
        taken.attempts,
        worker,
        now
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some((taken, run)))
}

pub(crate) async fn heartbeat(
    pool: &PgPool,
    job: &ClaimedJob,
    worker: &str,
    lease: Duration,
) -> StoreResult<bool> {
    let now = now_ms();
    let lease_end = now + lease.as_millis() as i64;
    let updated = sqlx::query_file!(
        "queries/claim/heartbeat.sql",
        lease_end,
        now,
        job.id.get(),
        worker
    )
    .execute(pool)
    .await?;
    Ok(updated.rows_affected() == 1)
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

pub(crate) async fn finish(
    pool: &PgPool,
    job: &ClaimedJob,
    worker: &str,
    finish: Finish,
) -> StoreResult<bool> {
    let now = now_ms();
    let ending = Ending::of(finish);
    let finished_at = (ending.state != JobState::Queued).then_some(now);
    let mut tx = pool.begin().await?;
    let updated = sqlx::query_file!(
        "queries/claim/finish.sql",
        ending.state.as_str(),
        ending.given_back,
        ending.error,
        ending.result,
        ending.run_at,
        now,
        finished_at,
        job.id.get(),
        worker,
        ending.cancel_cause as _
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
        ending.run as _,
        ending.error,
        job.run
    )
    .execute(&mut *tx)
    .await?;
    if ending.state == JobState::Queued {
        // Back in the queue (a retry, or released at shutdown): workers
        // on other hosts may take it when it is due (0: at once).
        let due = ending.run_at.unwrap_or(0);
        sqlx::query_file!("queries/claim/notify.sql", due)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(true)
}

pub(crate) async fn recover(pool: &PgPool) -> StoreResult<Recovered> {
    let now = now_ms();
    let mut tx = pool.begin().await?;
    let recovered = sqlx::query_file!("queries/claim/recover.sql", now)
        .fetch_all(&mut *tx)
        .await?;
    let mut requeued = 0;
    let mut dead = Vec::new();
    for row in recovered {
        if row.state == JobState::Queued {
            requeued += 1;
            continue;
        }
        dead.push(ClaimedJob {
            id: JobId(row.id),
            run: row.run,
            attempt: row.attempts as u32,
            max_attempts: row.max_attempts as u32,
            job: stored_json(row.id, &row.payload)?,
            last_error: row.last_error,
        });
    }
    if requeued > 0 {
        sqlx::query_file!("queries/claim/notify.sql", 0_i64)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(Recovered { requeued, dead })
}
