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
    deliveries: Mutex<BTreeMap<(String, String, &'static str), u64>>,
}

impl Metrics {
    pub fn count(&self, forge: &str, event: &str, outcome: Outcome) {
        let mut map = self.deliveries.lock().unwrap_or_else(|p| p.into_inner());
        *map.entry((forge.to_owned(), event.to_owned(), outcome.as_str()))
            .or_default() += 1;
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
        for ((forge, event, outcome), n) in map.iter() {
            let _ = writeln!(
                out,
                "forgehand_webhook_deliveries_total{{forge=\"{}\",event=\"{}\",outcome=\"{outcome}\"}} {n}",
                escape(forge),
                escape(event)
            );
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
