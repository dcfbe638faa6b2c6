//! Timestamps: stored as Unix milliseconds (the store's [`now_ms`]),
//! shown as RFC 3339.

pub use forgehand_store::time::now_ms;

/// RFC 3339 for people and JSON clients.
pub fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}
