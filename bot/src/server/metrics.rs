//! `GET /metrics` in Prometheus' text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::store::Outcome;

/// Deliveries since this process started, by forge, event and outcome.
#[derive(Default)]
pub struct Metrics {
    /// forge → event → count per outcome (in `Outcome::ALL` order). Nested
    /// maps so that counting looks up by `&str` and allocates only the
    /// first time a forge or event is seen.
    deliveries: Mutex<BTreeMap<String, BTreeMap<String, [u64; 4]>>>,
    refusals_recorded: AtomicU64,
    /// Refusals past `server.refusal_records_*`: counted, not written.
    refusals_unrecorded: AtomicU64,
    /// Connections answered 503 and closed: `server.max_connections` open.
    connections_refused: AtomicU64,
}

impl Metrics {
    pub fn count(&self, forge: &str, event: &str, outcome: Outcome) {
        let mut map = self.deliveries.lock().unwrap_or_else(|p| p.into_inner());
        if !map.contains_key(forge) {
            map.insert(forge.to_owned(), BTreeMap::new());
        }
        let events = map.get_mut(forge).expect("inserted above");
        if !events.contains_key(event) {
            events.insert(event.to_owned(), [0; 4]);
        }
        events.get_mut(event).expect("inserted above")[outcome as usize] += 1;
    }

    pub fn refusal_recorded(&self) {
        self.refusals_recorded.fetch_add(1, Ordering::Relaxed);
    }

    pub fn refusal_unrecorded(&self) {
        self.refusals_unrecorded.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Relaxed);
    }

    fn render_counters(&self, out: &mut String) {
        for (name, help, value) in [
            (
                "forgehand_webhook_refusals_recorded_total",
                "Refused deliveries written to the database.",
                &self.refusals_recorded,
            ),
            (
                "forgehand_webhook_refusals_unrecorded_total",
                "Refused deliveries only counted, past the rate limit of server.refusal_records_burst and server.refusal_records_per_minute.",
                &self.refusals_unrecorded,
            ),
            (
                "forgehand_http_connections_refused_total",
                "Connections answered 503 and closed because server.max_connections were open.",
                &self.connections_refused,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
    }
}

pub async fn render(State(state): State<AppState>) -> Response {
    let mut out = String::new();
    out.push_str("# HELP forgehand_webhook_deliveries_total Webhook deliveries received, by forge, event and outcome.\n");
    out.push_str("# TYPE forgehand_webhook_deliveries_total counter\n");
    {
        let map = state
            .metrics
            .deliveries
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for (forge, events) in map.iter() {
            for (event, counts) in events {
                for (outcome, n) in Outcome::ALL.iter().zip(counts) {
                    if *n == 0 {
                        continue;
                    }
                    let _ = writeln!(
                        out,
                        "forgehand_webhook_deliveries_total{{forge=\"{}\",event=\"{}\",outcome=\"{}\"}} {n}",
                        escape(forge),
                        escape(event),
                        outcome.as_str()
                    );
                }
            }
        }
    }
    state.metrics.render_counters(&mut out);
    match state.store.job_counts().await {
        Ok(counts) => {
            out.push_str("# HELP forgehand_jobs Jobs in the queue, by state.\n");
            out.push_str("# TYPE forgehand_jobs gauge\n");
            for (job_state, n) in counts {
                let _ = writeln!(
                    out,
                    "forgehand_jobs{{state=\"{}\"}} {n}",
                    job_state.as_str()
                );
            }
        }
        Err(e) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("# cannot read job counts: {e}\n"),
            )
                .into_response()
        }
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
