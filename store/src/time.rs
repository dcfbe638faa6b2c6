//! Timestamps are stored as Unix milliseconds: sortable, compact and the
//! same in SQLite and PostgreSQL.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
