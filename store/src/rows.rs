//! Rows as the operator API shows them.

use serde::Serialize;

use super::{CancelCause, JobId, JobState, Outcome, RunOutcome, TargetKey};
use crate::job::JobKind;

#[derive(Debug, Clone, Serialize)]
pub struct DeliveryRow {
    pub id: i64,
    pub forge: forgehand_types::ForgeKind,
    pub delivery_id: Option<String>,
    pub event: Option<String>,
    pub event_name: Option<String>,
    pub outcome: Outcome,
    pub status_code: i64,
    pub reason: Option<String>,
    pub repo: Option<String>,
    pub target: Option<i64>,
    pub sender: Option<String>,
    pub detail: Option<String>,
    pub received_at: i64,
    /// For a duplicate: the row of the first delivery (a redelivery's, or
    /// a replayed body's). Unset on duplicates recorded before it was kept.
    pub duplicate_of: Option<i64>,
    /// Jobs this delivery created (for a duplicate: the original's).
    pub jobs: Vec<JobId>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobRow {
    pub id: JobId,
    pub delivery: Option<i64>,
    pub kind: JobKind,
    /// The job as stored: the typed [`crate::job::Job`] as JSON.
    pub payload: serde_json::Value,
    pub target_key: TargetKey,
    pub state: JobState,
    pub attempts: i64,
    pub max_attempts: i64,
    pub run_at: i64,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<i64>,
    pub last_error: Option<String>,
    /// Why it was cancelled, when it was.
    pub cancel_cause: Option<CancelCause>,
    /// What the handler returned, as JSON.
    pub result: Option<serde_json::Value>,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobRunRow {
    pub id: i64,
    pub attempt: i64,
    pub worker: String,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    /// How it ended; none while it runs.
    pub outcome: Option<RunOutcome>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobDetail {
    #[serde(flatten)]
    pub job: JobRow,
    pub runs: Vec<JobRunRow>,
}
