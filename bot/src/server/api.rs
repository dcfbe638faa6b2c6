//! The operator API: read-only JSON over deliveries and jobs, behind a
//! bearer token.

use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use forgehand_types::JobId;
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::json;
use subtle::ConstantTimeEq;

use super::AppState;
use crate::store::{DeliveryQuery, JobQuery, JobState, Outcome};

pub fn router(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/deliveries", get(deliveries))
        .route("/jobs", get(jobs))
        .route("/jobs/{id}", get(job))
        .route("/installations", get(installations))
        .layer(middleware::from_fn_with_state(state, require_token))
}

/// What the API answers, every known secret redacted (a job's message
/// carries what the agent wrote).
fn redacted(value: &impl serde::Serialize) -> serde_json::Value {
    crate::redaction::to_json(value)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(token) = &state.api_token else {
        return error(
            StatusCode::NOT_FOUND,
            "the operator API is off: set api.token to turn it on",
        );
    };
    let presented = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let ok =
        presented.is_some_and(|p| bool::from(p.as_bytes().ct_eq(token.expose_secret().as_bytes())));
    if !ok {
        let mut response = error(
            StatusCode::UNAUTHORIZED,
            "a valid `Authorization: Bearer <api.token>` header is required",
        );
        response
            .headers_mut()
            .insert("www-authenticate", "Bearer".parse().expect("static header"));
        return response;
    }
    next.run(request).await
}

/// The GitHub App's installations and the repositories each can reach,
/// as their webhooks told.
async fn installations(State(state): State<AppState>) -> Response {
    match state.store.installations().await {
        Ok(rows) => Json(redacted(&json!({ "installations": rows }))).into_response(),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cannot read installations: {e}"),
        ),
    }
}

const MAX_LIMIT: u32 = 500;

#[derive(Deserialize)]
pub struct DeliveriesParams {
    forge: Option<String>,
    outcome: Option<Outcome>,
    before: Option<i64>,
    limit: Option<u32>,
}

async fn deliveries(State(state): State<AppState>, Query(p): Query<DeliveriesParams>) -> Response {
    let query = DeliveryQuery {
        forge: p.forge,
        outcome: p.outcome,
        before: p.before,
        limit: p.limit.unwrap_or(100).min(MAX_LIMIT),
    };
    match state.store.list_deliveries(&query).await {
        Ok(rows) => Json(redacted(&json!({ "deliveries": rows }))).into_response(),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cannot read deliveries: {e}"),
        ),
    }
}

#[derive(Deserialize)]
pub struct JobsParams {
    state: Option<JobState>,
    before: Option<JobId>,
    limit: Option<u32>,
}

async fn jobs(State(state): State<AppState>, Query(p): Query<JobsParams>) -> Response {
    let query = JobQuery {
        state: p.state,
        before: p.before,
        limit: p.limit.unwrap_or(100).min(MAX_LIMIT),
    };
    match state.store.list_jobs(&query).await {
        Ok(rows) => Json(redacted(&json!({ "jobs": rows }))).into_response(),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cannot read jobs: {e}"),
        ),
    }
}

async fn job(State(state): State<AppState>, Path(id): Path<JobId>) -> Response {
    match state.store.job(id).await {
        Ok(Some(detail)) => Json(redacted(&detail)).into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no job {id}")),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cannot read job {id}: {e}"),
        ),
    }
}

/// Ready when the database answers. The body says what this node does.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let role = if state.workers == 0 {
        "intake"
    } else {
        "intake+workers"
    };
    let sandbox = state.sandbox.as_ref().map(|s| s.to_json());
    // A worker node without its guest rootfs would fail every job.
    let sandbox_ready = state.sandbox.as_ref().is_none_or(|s| s.rootfs.is_usable());
    let database = state.store.ping().await;
    let ready = database.is_ok() && sandbox_ready;
    let body = json!({
        "ready": ready,
        "database": database.err().map_or("ok".to_owned(), |e| e.to_string()),
        "role": role,
        "workers": state.workers,
        "sandbox": sandbox,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}
