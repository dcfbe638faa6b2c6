//! `GET /metrics` in Prometheus' text format.

use std::collections::BTreeMap;
use std::fmt::Write;
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
