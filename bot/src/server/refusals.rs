//! Refused deliveries are recorded for the operator, but anyone can send
//! them: each record has a fixed largest size, whatever the request
//! carried, and records are rate-limited by a token bucket. Past it a
//! refusal is only counted (`/metrics`), so a flood costs the database at
//! most a bucket's worth of rows.

use std::sync::Mutex;
use std::time::Instant;

use forgehand_forge::webhook::DeliveryHeaders;

use crate::store::{NewDelivery, Outcome};

/// The longest delivery id kept. Both forges send UUIDs (36 bytes).
pub const MAX_DELIVERY_ID_BYTES: usize = 128;
/// The longest event header kept (GitHub's longest is 27 bytes).
pub const MAX_EVENT_BYTES: usize = 64;
/// The longest reason kept.
pub const MAX_REASON_BYTES: usize = 256;

/// At most `max` bytes of `text`, cut at a character boundary and marked
/// with `…` when cut.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    const MARK: &str = "…";
    let mut end = max.saturating_sub(MARK.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &text[..end])
}

/// The record of a refusal: the forge the headers name, the delivery id
/// and event header cut short, the status and the reason. Nothing else of
/// the request is kept.
pub fn record(read: &DeliveryHeaders, status: u16, reason: &str, received_at: i64) -> NewDelivery {
    NewDelivery {
        forge: read.forge,
        delivery_id: read
            .delivery_id
            .as_deref()
            .map(|id| bounded(id, MAX_DELIVERY_ID_BYTES)),
        event: read.event.as_deref().map(|e| bounded(e, MAX_EVENT_BYTES)),
        event_name: None,
        outcome: Outcome::Rejected,
        status_code: status,
        reason: Some(bounded(reason, MAX_REASON_BYTES)),
        repo: None,
        target: None,
        sender: None,
        detail: None,
        payload: None,
        jobs: Vec::new(),
        installation: None,
        digest: None,
        received_at,
    }
}

/// A token bucket: `burst` tokens, refilled at `per_minute`.
pub struct TokenBucket {
    state: Mutex<Bucket>,
    burst: f64,
    per_second: f64,
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(burst: u32, per_minute: u32) -> Self {
        TokenBucket {
            state: Mutex::new(Bucket {
                tokens: f64::from(burst),
                last: Instant::now(),
            }),
            burst: f64::from(burst),
            per_second: f64::from(per_minute) / 60.0,
        }
    }

    /// Takes a token if there is one.
    pub fn take(&self) -> bool {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> bool {
        let mut bucket = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = now.saturating_duration_since(bucket.last);
        bucket.last = bucket.last.max(now);
        bucket.tokens = (bucket.tokens + elapsed.as_secs_f64() * self.per_second).min(self.burst);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_bucket_gives_its_burst_then_refills_at_its_rate() {
        let bucket = TokenBucket::new(3, 60);
        let start = Instant::now();
        let taken = (0..10).filter(|_| bucket.take_at(start)).count();
        assert_eq!(taken, 3);
        assert!(!bucket.take_at(start + Duration::from_millis(900)));
        assert!(bucket.take_at(start + Duration::from_millis(1000)));
        assert!(!bucket.take_at(start + Duration::from_millis(1100)));
        // Never more than the burst, however long it rested.
        let later = start + Duration::from_secs(3600);
        assert_eq!((0..10).filter(|_| bucket.take_at(later)).count(), 3);
    }

    #[test]
    fn an_empty_bucket_records_nothing() {
        let bucket = TokenBucket::new(0, 0);
        assert!(!bucket.take());
        assert!(!bucket.take_at(Instant::now() + Duration::from_secs(3600)));
    }

    #[test]
    fn bounded_cuts_at_a_character_boundary() {
        assert_eq!(bounded("short", 10), "short");
        let long = "é".repeat(100);
        let cut = bounded(&long, 11);
        assert!(cut.len() <= 11, "{cut}");
        assert!(cut.ends_with('…'));
        assert_eq!(bounded(&"x".repeat(60_000), 128).len(), 128);
    }
}
