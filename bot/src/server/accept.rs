//! Accepting a verified delivery: the trigger rules decide, the intake
//! records it with its jobs, and only then is it answered.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use forgehand_forge::{Event, ForgeKind};
use serde_json::json;
use tracing::{info, warn};

use super::body::HeldBody;
use super::AppState;
use crate::store::{CompressedPayload, NewDelivery, NewJob, Outcome, PayloadDigest, Recorded};
use crate::trigger::{decide, Decision};

/// A delivery the webhook handler verified and read: what is recorded.
pub(super) struct Understood {
    pub forge: ForgeKind,
    pub event_header: String,
    pub delivery_id: String,
    pub event: forgehand_forge::Event,
    pub body: HeldBody,
}

pub(super) async fn accept(state: &AppState, u: Understood, received_at: i64) -> Response {
    let event_name = u.event.name();
    let (outcome, jobs, installation, detail, reason) = match decide(u.forge, &u.event, &state.bot)
    {
        Decision::Act { jobs, detail } => (Outcome::Accepted, jobs, None, Some(detail), None),
        // Nothing to do, but something to remember: which repositories
        // the App can reach.
        Decision::Remember { installation } => (
            Outcome::Accepted,
            Vec::new(),
            Some(installation),
            Some(event_name.clone()),
            None,
        ),
        Decision::Ignore { reason, detail } => (
            Outcome::Ignored,
            Vec::new(),
            None,
            detail,
            Some(reason.to_string()),
        ),
    };
    let status = StatusCode::ACCEPTED;
    let target = jobs
        .first()
        .map(|j| j.target)
        .or_else(|| event_target(&u.event));
    let record = NewDelivery {
        forge: u.forge,
        delivery_id: Some(u.delivery_id.clone()),
        event: Some(u.event_header.clone()),
        event_name: Some(event_name.clone()),
        outcome,
        status_code: status.as_u16(),
        reason: reason.clone(),
        repo: u.event.repo().map(|r| r.full_name()),
        target,
        sender: u.event.sender().map(|s| s.login.clone()),
        detail,
        payload: state
            .keep_payloads
            .then(|| CompressedPayload::compress(&u.body)),
        jobs: jobs.iter().map(NewJob::from).collect(),
        installation,
        digest: Some(PayloadDigest::of(u.forge, &u.body)),
        received_at,
    };
    // The event header is not signed: only one the parser knows becomes
    // a metrics label, or replays under made-up names would add labels
    // without end.
    let label = match &u.event {
        Event::Other { .. } => "other",
        _ => u.event_header.as_str(),
    };
    match state.intake.record(record).await {
        Ok(Recorded::New { jobs, .. }) => {
            state.metrics.count(u.forge.as_str(), label, outcome);
            info!(outcome = outcome.as_str(), event = %event_name, ?jobs, "delivery recorded");
            let mut body =
                json!({ "outcome": outcome.as_str(), "delivery_id": u.delivery_id, "jobs": jobs });
            if let Some(reason) = reason {
                body["reason"] = json!(reason);
            }
            (status, Json(body)).into_response()
        }
        Ok(Recorded::Duplicate { jobs, of, .. }) => {
            state
                .metrics
                .count(u.forge.as_str(), label, Outcome::Duplicate);
            info!(reason = of.reason(), "duplicate delivery; no new job");
            let body = json!({
                "outcome": "duplicate",
                "delivery_id": u.delivery_id,
                "jobs": jobs,
                "reason": of.reason(),
            });
            (StatusCode::OK, Json(body)).into_response()
        }
        Err(error) => {
            warn!(%error, "recording the delivery failed");
            let body = json!({ "error": "the delivery could not be recorded; redeliver it later" });
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [("retry-after", "30")],
                Json(body),
            )
                .into_response()
        }
    }
}

fn event_target(event: &Event) -> Option<u64> {
    use forgehand_forge::Event::*;
    match event {
        Issue { issue, .. } | IssueComment { issue, .. } => Some(issue.number),
        ReviewSubmitted { pull_request, .. }
        | ReviewComment { pull_request, .. }
        | PullRequest { pull_request, .. } => Some(pull_request.number),
        _ => None,
    }
}
