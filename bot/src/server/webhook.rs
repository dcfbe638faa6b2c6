//! `POST /webhooks/{github,gitea}`: authenticate, understand, record,
//! answer. The answer goes out only after the delivery and its jobs are
//! committed, and nothing slow happens before it.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use forgehand_forge::webhook::signature::{self, SignatureError};
use forgehand_forge::webhook::DeliveryHeaders;
use forgehand_forge::{parse_delivery, ForgeKind};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::json;
use tracing::{info, info_span, warn, Instrument};

use super::AppState;
use crate::store::{
    CompressedPayload, InstallationChange, InstallationUpdate, NewDelivery, NewJob, Outcome,
    Recorded,
};
use crate::time::now_ms;
use crate::trigger::{decide, Decision};

#[derive(Clone, Copy)]
enum Endpoint {
    Github,
    Gitea,
}

pub async fn github(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    receive(state, Endpoint::Github, headers, body).await
}

pub async fn gitea(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    receive(state, Endpoint::Gitea, headers, body).await
}

async fn receive(state: AppState, endpoint: Endpoint, headers: HeaderMap, body: Body) -> Response {
    let read = DeliveryHeaders::read(|name| headers.get(name).and_then(|v| v.to_str().ok()));
    let span = info_span!(
        "delivery",
        forge = %read.forge,
        delivery_id = read.delivery_id.as_deref().unwrap_or("-"),
        event = read.event.as_deref().unwrap_or("-"),
    );
    handle(state, endpoint, read, body).instrument(span).await
}

/// A refusal: recorded, counted, answered with a short reason.
struct Refusal {
    status: StatusCode,
    reason: String,
}

fn refuse(status: StatusCode, reason: impl Into<String>) -> Refusal {
    Refusal {
        status,
        reason: reason.into(),
    }
}

async fn handle(
    state: AppState,
    endpoint: Endpoint,
    read: DeliveryHeaders,
    body: Body,
) -> Response {
    let received_at = now_ms();
    match understand(&state, endpoint, &read, body).await {
        Ok(understood) => accept(&state, &read, understood, received_at).await,
        Err(refusal) => {
            warn!(status = refusal.status.as_u16(), reason = %refusal.reason, "delivery refused");
            let record = NewDelivery {
                forge: read.forge.as_str().to_owned(),
                delivery_id: read.delivery_id.clone(),
                event: read.event.clone(),
                event_name: None,
                outcome: Outcome::Rejected,
                status_code: refusal.status.as_u16(),
                reason: Some(refusal.reason.clone()),
                repo: None,
                target: None,
                sender: None,
                detail: None,
                payload: None,
                jobs: Vec::new(),
                installation: None,
                received_at,
            };
            // An untrusted event name must not become a metrics label.
            state
                .metrics
                .count(read.forge.as_str(), "unverified", Outcome::Rejected);
            if let Err(error) = state.intake.record(record).await {
                warn!(%error, "recording a refused delivery failed");
            }
            let body = json!({ "outcome": "rejected", "error": refusal.reason });
            (refusal.status, Json(body)).into_response()
        }
    }
}

struct Understood {
    forge: ForgeKind,
    event_header: String,
    delivery_id: String,
    event: forgehand_forge::Event,
    body: Vec<u8>,
}

async fn understand(
    state: &AppState,
    endpoint: Endpoint,
    read: &DeliveryHeaders,
    body: Body,
) -> Result<Understood, Refusal> {
    let secrets = match (endpoint, read.forge.is_gitea_family()) {
        (Endpoint::Github, false) => &state.github_secrets,
        (Endpoint::Gitea, true) => &state.gitea_secrets,
        (Endpoint::Github, true) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "this is a Gitea/Forgejo delivery; point the webhook at /webhooks/gitea",
            ))
        }
        (Endpoint::Gitea, false) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "missing X-Gitea-Event (or X-Forgejo-Event) header",
            ))
        }
    };
    let body = read_body(body, state.max_body_bytes).await?;

    // Authenticate before looking at anything else, so that an unsigned
    // caller learns nothing about what a valid delivery looks like.
    let Some((header, value)) = &read.signature else {
        let expected = if read.forge.is_gitea_family() {
            "X-Gitea-Signature"
        } else {
            "X-Hub-Signature-256"
        };
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            format!("missing {expected} header"),
        ));
    };
    let verified = signature::decode_signature(value, read.signature_is_prefixed())
        .and_then(|sig| signature::verify(&body, &sig, secrets));
    if let Err(error) = verified {
        let reason = match error {
            SignatureError::Malformed => format!("malformed {header} header"),
            SignatureError::NoSecretConfigured => {
                format!("no webhook secret is configured for {}", read.forge)
            }
            _ => "signature does not match".to_owned(),
        };
        return Err(refuse(StatusCode::UNAUTHORIZED, reason));
    }

    let event_name_header = if read.forge.is_gitea_family() {
        "X-Gitea-Event"
    } else {
        "X-GitHub-Event"
    };
    let delivery_header = if read.forge.is_gitea_family() {
        "X-Gitea-Delivery"
    } else {
        "X-GitHub-Delivery"
    };
    let Some(event_header) = read.event.clone().filter(|e| !e.is_empty()) else {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("missing {event_name_header} header"),
        ));
    };
    let Some(delivery_id) = read.delivery_id.clone().filter(|d| !d.is_empty()) else {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("missing {delivery_header} header"),
        ));
    };
    let event = parse_delivery(read.forge, &event_header, &body).map_err(|error| {
        refuse(
            StatusCode::BAD_REQUEST,
            format!("malformed payload: {error}"),
        )
    })?;
    Ok(Understood {
        forge: read.forge,
        event_header,
        delivery_id,
        event,
        body,
    })
}

async fn read_body(body: Body, limit: usize) -> Result<Vec<u8>, Refusal> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes().to_vec()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body larger than {limit} bytes"),
        )),
        Err(_) => Err(refuse(
            StatusCode::BAD_REQUEST,
            "the body could not be read",
        )),
    }
}

async fn accept(
    state: &AppState,
    read: &DeliveryHeaders,
    u: Understood,
    received_at: i64,
) -> Response {
    let decision = decide(u.forge, &u.event, &state.bot);
    let event_name = u.event.name();
    let installation = installation_change(&u.event);
    let (outcome, status, jobs, detail, reason) = match decision {
        // Nothing to do, but something to remember: which repositories
        // the App can reach.
        Decision::Ignore { .. } if installation.is_some() => (
            Outcome::Accepted,
            StatusCode::ACCEPTED,
            Vec::new(),
            Some(event_name.clone()),
            None,
        ),
        Decision::Act { jobs, detail } => (
            Outcome::Accepted,
            StatusCode::ACCEPTED,
            jobs,
            Some(detail),
            None,
        ),
        Decision::Ignore { reason, detail } => (
            Outcome::Ignored,
            StatusCode::ACCEPTED,
            Vec::new(),
            detail,
            Some(reason),
        ),
    };
    let target = jobs
        .first()
        .map(|j| j.target)
        .or_else(|| event_target(&u.event));
    let record = NewDelivery {
        forge: u.forge.as_str().to_owned(),
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
        received_at,
    };
    match state.intake.record(record).await {
        Ok(Recorded::New { jobs, .. }) => {
            state
                .metrics
                .count(read.forge.as_str(), &u.event_header, outcome);
            info!(outcome = outcome.as_str(), event = %event_name, ?jobs, "delivery recorded");
            let mut body =
                json!({ "outcome": outcome.as_str(), "delivery_id": u.delivery_id, "jobs": jobs });
            if let Some(reason) = reason {
                body["reason"] = json!(reason);
            }
            (status, Json(body)).into_response()
        }
        Ok(Recorded::Duplicate { jobs, .. }) => {
            state
                .metrics
                .count(read.forge.as_str(), &u.event_header, Outcome::Duplicate);
            info!("delivery id already recorded; no new job");
            let body =
                json!({ "outcome": "duplicate", "delivery_id": u.delivery_id, "jobs": jobs });
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

/// The change an App installation event makes to what the App can reach.
fn installation_change(event: &forgehand_forge::Event) -> Option<InstallationChange> {
    use forgehand_forge::{Event, InstallationAction};
    let (id, account, update) = match event {
        Event::Installation {
            action,
            installation_id,
            account,
            repositories,
            ..
        } => {
            let update = match action {
                InstallationAction::Created => InstallationUpdate::Installed {
                    repositories: repositories.clone(),
                },
                InstallationAction::Deleted => InstallationUpdate::Deleted,
                InstallationAction::Suspended => InstallationUpdate::Suspended,
                InstallationAction::Unsuspended => InstallationUpdate::Unsuspended,
                InstallationAction::NewPermissionsAccepted => return None,
            };
            (*installation_id, account, update)
        }
        // Both lists are applied whatever the action: an "added" event
        // lists nothing removed, and the other way round.
        Event::InstallationRepositories {
            installation_id,
            account,
            added,
            removed,
            ..
        } => (
            *installation_id,
            account,
            InstallationUpdate::Repositories {
                added: added.clone(),
                removed: removed.clone(),
            },
        ),
        _ => return None,
    };
    Some(InstallationChange {
        id,
        account: account.clone(),
        update,
    })
}

fn event_target(event: &forgehand_forge::Event) -> Option<u64> {
    use forgehand_forge::Event::*;
    match event {
        Issue { issue, .. } | IssueComment { issue, .. } => Some(issue.number),
        ReviewSubmitted { pull_request, .. }
        | ReviewComment { pull_request, .. }
        | PullRequest { pull_request, .. } => Some(pull_request.number),
        _ => None,
    }
}
