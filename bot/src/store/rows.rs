//! Rows as the operator API shows them.

use serde::Serialize;

use super::{JobState, Outcome};

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct DeliveryRow {
    pub id: i64,
    pub forge: String,
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
    #[sqlx(skip)]
    pub jobs: Vec<i64>,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct JobRow {
    pub id: i64,
    pub delivery: Option<i64>,
    pub kind: String,
    #[sqlx(json)]
    pub payload: serde_json::Value,
    pub target_key: String,
    pub state: JobState,
    pub attempts: i64,
    pub max_attempts: i64,
    pub run_at: i64,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<i64>,
    pub last_error: Option<String>,
    /// What the handler returned, as JSON.
    #[sqlx(json(nullable))]
    pub result: Option<serde_json::Value>,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct JobRunRow {
    pub id: i64,
    pub attempt: i64,
    pub worker: String,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub outcome: Option<String>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobDetail {
    #[serde(flatten)]
    pub job: JobRow,
    pub runs: Vec<JobRunRow>,
}
