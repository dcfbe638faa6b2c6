//! What the operator API and /metrics read.

use forgehand_store::job::JobKind;
use forgehand_store::{
    CancelCause, CompressedPayload, DeliveryQuery, DeliveryRow, InstallationRow, JobDetail, JobId,
    JobQuery, JobRow, JobRunRow, JobState, Outcome, RunOutcome, StoreError, StoreResult, TargetKey,
};
use sqlx::postgres::PgPool;

use crate::stored_json;

pub(crate) async fn list_deliveries(
    pool: &PgPool,
    query: &DeliveryQuery,
) -> StoreResult<Vec<DeliveryRow>> {
    let before = query.before.unwrap_or(i64::MAX);
    let limit = i64::from(query.limit);
    let rows = sqlx::query_file!(
        "queries/deliveries/list.sql",
        query.forge,
        query.outcome.map(Outcome::as_str),
        before,
        limit
    )
    .fetch_all(pool)
    .await?;
    let mut listed = Vec::with_capacity(rows.len());
    for row in rows {
        let jobs = match (row.outcome, row.duplicate_of) {
            (Outcome::Duplicate, Some(first)) => jobs_of_delivery(pool, first).await?,
            // A duplicate that does not point at its first (as SQLite
            // recorded before it kept duplicate_of; kept for parity).
            (Outcome::Duplicate, None) => {
                sqlx::query_file_scalar!(
                    "queries/deliveries/jobs_of_first.sql",
                    row.forge,
                    row.delivery_id
                )
                .fetch_all(pool)
                .await?
            }
            _ => jobs_of_delivery(pool, row.id).await?,
        };
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
            jobs: jobs.into_iter().map(JobId).collect(),
        });
    }
    Ok(listed)
}

async fn jobs_of_delivery(pool: &PgPool, delivery: i64) -> StoreResult<Vec<i64>> {
    Ok(
        sqlx::query_file_scalar!("queries/deliveries/jobs.sql", delivery)
            .fetch_all(pool)
            .await?,
    )
}

pub(crate) async fn list_jobs(pool: &PgPool, query: &JobQuery) -> StoreResult<Vec<JobRow>> {
    let before = query.before.map_or(i64::MAX, JobId::get);
    let limit = i64::from(query.limit);
    let rows = sqlx::query_file_as!(
        StoredJob,
        "queries/jobs/list.sql",
        query.state.map(JobState::as_str),
        before,
        limit
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(StoredJob::into_row).collect()
}

pub(crate) async fn job(pool: &PgPool, id: i64) -> StoreResult<Option<JobDetail>> {
    let job = sqlx::query_file_as!(StoredJob, "queries/jobs/one.sql", id)
        .fetch_optional(pool)
        .await?;
    let Some(job) = job else { return Ok(None) };
    let runs = sqlx::query_file_as!(JobRunRow, "queries/jobs/runs.sql", id)
        .fetch_all(pool)
        .await?;
    Ok(Some(JobDetail {
        job: job.into_row()?,
        runs,
    }))
}

pub(crate) async fn installations(pool: &PgPool) -> StoreResult<Vec<InstallationRow>> {
    let rows = sqlx::query_file!("queries/deliveries/installations.sql")
        .fetch_all(pool)
        .await?;
    let repos = sqlx::query_file!("queries/deliveries/installation_repositories.sql")
        .fetch_all(pool)
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

pub(crate) async fn stop_requested(pool: &PgPool, job: i64) -> StoreResult<Option<String>> {
    let reason = sqlx::query_file_scalar!("queries/jobs/stop_requested.sql", job)
        .fetch_optional(pool)
        .await?;
    Ok(reason.flatten())
}

pub(crate) async fn job_counts(pool: &PgPool) -> StoreResult<Vec<(JobState, i64)>> {
    let counted = sqlx::query_file!("queries/jobs/counts.sql")
        .fetch_all(pool)
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

pub(crate) async fn delivery_payload(pool: &PgPool, id: i64) -> StoreResult<Option<Vec<u8>>> {
    let stored = sqlx::query_file_scalar!("queries/deliveries/payload.sql", id)
        .fetch_optional(pool)
        .await?;
    match stored.flatten() {
        None => Ok(None),
        Some(bytes) => CompressedPayload::from_stored(bytes)
            .decompress()
            .map(Some)
            .map_err(|source| StoreError::CorruptPayload { id, source }),
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
