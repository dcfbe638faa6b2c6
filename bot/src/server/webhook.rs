//! `POST /webhooks/{github,gitea}`: authenticate, understand, record,
//! answer. The answer goes out only after the delivery and its jobs are
//! committed, and nothing slow happens before it.
//!
//! What a caller without the secret can make the service do is bounded:
//! a request is refused before a byte of its body is read unless it
//! carries a well-formed signature header for its endpoint and declares
//! no more than `server.max_body_bytes`; a body is read within its time,
//! its size and the budget of buffered bytes; and a refusal is recorded
//! in bounded form, at a bounded rate.

use std::marker::PhantomData;

use axum::body::Body;
use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use forgehand_forge::parse_delivery;
use forgehand_forge::webhook::signature::{self, SignatureError};
use forgehand_forge::webhook::DeliveryHeaders;
use secrecy::SecretString;
use serde_json::json;
use tracing::{debug, info_span, warn, Instrument, Span};

use super::accept::{self, Understood};
use super::body::{self, BodyError};
use super::refusals::{self, bounded, MAX_DELIVERY_ID_BYTES, MAX_EVENT_BYTES};
use super::{replay, AppState};
use crate::time::now_ms;

/// Which webhook endpoint a delivery came to: its secrets, and the forges
/// whose headers belong there.
pub trait Endpoint: Send + Sync + 'static {
    const GITEA: bool;
}

/// `/webhooks/github`.
pub struct Github;
/// `/webhooks/gitea` and `/webhooks/forgejo`.
pub struct Gitea;

impl Endpoint for Github {
    const GITEA: bool = false;
}

impl Endpoint for Gitea {
    const GITEA: bool = true;
}

/// A delivery to endpoint `E`, authenticated against its secrets, read
/// within its limits and parsed into one [`forgehand_forge::Event`]: the
/// one extractor both webhook endpoints take (its rejection,
/// [`Refused`], says why not). Nothing of an unverified body reaches a
/// handler.
pub struct Verified<E> {
    pub(super) understood: Understood,
    received_at: i64,
    span: Span,
    endpoint: PhantomData<E>,
}

/// A delivery refused before it was understood: the headers it came
/// with, why, and when. The handler records it (within the rate) and
/// answers; on its own it answers without recording.
pub struct Refused {
    read: DeliveryHeaders,
    refusal: Refusal,
    received_at: i64,
    span: Span,
}

impl<E: Endpoint> FromRequest<AppState> for Verified<E> {
    type Rejection = Refused;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Refused> {
        let received_at = now_ms();
        let (parts, body) = request.into_parts();
        let headers: &HeaderMap = &parts.headers;
        let read = DeliveryHeaders::read(|name| headers.get(name).and_then(|v| v.to_str().ok()));
        // Cut short: these are whatever the caller sent, signed or not.
        let span = info_span!(
            "delivery",
            forge = %read.forge,
            delivery_id = bounded(read.delivery_id.as_deref().unwrap_or("-"), MAX_DELIVERY_ID_BYTES),
            event = bounded(read.event.as_deref().unwrap_or("-"), MAX_EVENT_BYTES),
        );
        let understood = understand(state, E::GITEA, &read, body)
            .instrument(span.clone())
            .await;
        match understood {
            Ok(understood) => Ok(Verified {
                understood,
                received_at,
                span,
                endpoint: PhantomData,
            }),
            Err(refusal) => Err(Refused {
                read,
                refusal,
                received_at,
                span,
            }),
        }
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let reason = bounded(&self.refusal.reason, refusals::MAX_REASON_BYTES);
        answer_refusal(self.refusal, &reason)
    }
}

pub async fn github(
    State(state): State<AppState>,
    delivery: Result<Verified<Github>, Refused>,
) -> Response {
    receive(state, delivery).await
}

pub async fn gitea(
    State(state): State<AppState>,
    delivery: Result<Verified<Gitea>, Refused>,
) -> Response {
    receive(state, delivery).await
}

/// Accepted (the trigger decides, the intake records, then the answer),
/// or refused (recorded within the rate, counted, answered).
async fn receive<E>(state: AppState, delivery: Result<Verified<E>, Refused>) -> Response {
    match delivery {
        Ok(verified) => {
            let span = verified.span.clone();
            accept::accept(&state, verified.understood, verified.received_at)
                .instrument(span)
                .await
        }
        Err(refused) => {
            let span = refused.span.clone();
            record_refusal(&state, refused).instrument(span).await
        }
    }
}

/// A refusal: recorded (within the rate), counted, answered with a short
/// reason.
struct Refusal {
    status: StatusCode,
    reason: String,
    /// The body was left unread: the connection is closed after the answer.
    unread: bool,
    retry_after: Option<&'static str>,
}

fn refuse(status: StatusCode, reason: impl Into<String>) -> Refusal {
    Refusal {
        status,
        reason: reason.into(),
        unread: false,
        retry_after: None,
    }
}

/// A refusal before the body is read.
fn refuse_unread(status: StatusCode, reason: impl Into<String>) -> Refusal {
    Refusal {
        unread: true,
        ..refuse(status, reason)
    }
}

async fn record_refusal(state: &AppState, refused: Refused) -> Response {
    let Refused {
        read,
        refusal,
        received_at,
        ..
    } = refused;
    let reason = bounded(&refusal.reason, refusals::MAX_REASON_BYTES);
    // An untrusted event name must not become a metrics label.
    state.metrics.count(
        read.forge.as_str(),
        "unverified",
        crate::store::Outcome::Rejected,
    );
    // The log is written at the rate of the records: a flood of refusals
    // shows in /metrics, not as a flood of log lines.
    if state.refusals.take() {
        warn!(status = refusal.status.as_u16(), %reason, "delivery refused");
        let record = refusals::record(&read, refusal.status.as_u16(), &reason, received_at);
        match state.intake.record(record).await {
            Ok(_) => state.metrics.refusal_recorded(),
            Err(error) => warn!(%error, "recording a refused delivery failed"),
        }
    } else {
        debug!(status = refusal.status.as_u16(), %reason, "delivery refused, past the rate of records");
        state.metrics.refusal_unrecorded();
    }
    answer_refusal(refusal, &reason)
}

fn answer_refusal(refusal: Refusal, reason: &str) -> Response {
    let body = json!({ "outcome": "rejected", "error": reason });
    let mut response = (refusal.status, Json(body)).into_response();
    let headers = response.headers_mut();
    if refusal.unread {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    if let Some(seconds) = refusal.retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static(seconds));
    }
    response
}

async fn understand(
    state: &AppState,
    gitea_endpoint: bool,
    read: &DeliveryHeaders,
    body: Body,
) -> Result<Understood, Refusal> {
    let secrets = secrets_for(state, gitea_endpoint, read)?;
    let limit = state.webhooks.max_body_bytes;
    if body::declared_too_large(&body, limit) {
        return Err(too_large(limit));
    }
    // Authenticate before looking at anything else, so that an unsigned
    // caller learns nothing about what a valid delivery looks like; and
    // before reading the body, so that it costs nothing to refuse.
    let signature = signature_header(read)?;
    if secrets.is_empty() {
        return Err(refuse_unread(
            StatusCode::UNAUTHORIZED,
            format!("no webhook secret is configured for {}", read.forge),
        ));
    }
    let deadline = tokio::time::Instant::now() + state.webhooks.body_read_timeout;
    let body = body::read(body, limit, &state.body_budget, deadline)
        .await
        .map_err(|error| body_refusal(error, limit))?;
    if signature::verify(&body, &signature, &secrets).is_err() {
        return Err(refuse(StatusCode::UNAUTHORIZED, "signature does not match"));
    }

    let (event_header, delivery_id) = signed_headers(read)?;
    let event = parse_delivery(read.forge, &event_header, &body).map_err(|error| {
        refuse(
            StatusCode::BAD_REQUEST,
            format!("malformed payload: {error}"),
        )
    })?;
    // A captured body older than its digest is kept would not be known
    // as a replay: its own timestamps give it away.
    let stale_before = state.webhooks.database.stale_before(now_ms());
    if replay::newest_timestamp(&body).is_some_and(|newest| newest < stale_before) {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            format!(
                "the payload is older than {} days (database.digest_retention_days): refused as a replay",
                state.webhooks.database.digest_retention_days
            ),
        ));
    }
    Ok(Understood {
        forge: read.forge,
        event_header,
        delivery_id,
        event,
        body,
    })
}

/// The secrets of the endpoint, if the delivery's headers belong there.
fn secrets_for(
    state: &AppState,
    gitea_endpoint: bool,
    read: &DeliveryHeaders,
) -> Result<std::sync::Arc<Vec<SecretString>>, Refusal> {
    match (gitea_endpoint, read.forge.is_gitea_family()) {
        (false, false) => Ok(state.github_secrets.current()),
        (true, true) => Ok(state.gitea_secrets.current()),
        (false, true) => Err(refuse_unread(
            StatusCode::BAD_REQUEST,
            "this is a Gitea/Forgejo delivery; point the webhook at /webhooks/gitea",
        )),
        (true, false) => Err(refuse_unread(
            StatusCode::BAD_REQUEST,
            "missing X-Gitea-Event (or X-Forgejo-Event) header",
        )),
    }
}

/// The signature the headers carry, decoded: a request without one that
/// could match is refused before its body is read.
fn signature_header(read: &DeliveryHeaders) -> Result<[u8; 32], Refusal> {
    let Some((header, value)) = &read.signature else {
        let expected = if read.forge.is_gitea_family() {
            "X-Gitea-Signature"
        } else {
            "X-Hub-Signature-256"
        };
        return Err(refuse_unread(
            StatusCode::UNAUTHORIZED,
            format!("missing {expected} header"),
        ));
    };
    signature::decode_signature(value, read.signature_is_prefixed()).map_err(|error| {
        let reason = match error {
            SignatureError::Malformed => format!("malformed {header} header"),
            other => other.to_string(),
        };
        refuse_unread(StatusCode::UNAUTHORIZED, reason)
    })
}

/// The event and delivery headers of a verified delivery. The signature
/// covers the body only: these are still the sender's say, and are
/// refused when longer than any forge sends.
fn signed_headers(read: &DeliveryHeaders) -> Result<(String, String), Refusal> {
    let (event_name_header, delivery_header) = if read.forge.is_gitea_family() {
        ("X-Gitea-Event", "X-Gitea-Delivery")
    } else {
        ("X-GitHub-Event", "X-GitHub-Delivery")
    };
    let present = |value: &Option<String>, name: &str, max: usize| match value {
        Some(v) if v.len() > max => Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("{name} header longer than {max} bytes"),
        )),
        Some(v) if !v.is_empty() => Ok(v.clone()),
        _ => Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("missing {name} header"),
        )),
    };
    let event = present(&read.event, event_name_header, MAX_EVENT_BYTES)?;
    let delivery = present(&read.delivery_id, delivery_header, MAX_DELIVERY_ID_BYTES)?;
    Ok((event, delivery))
}

fn too_large(limit: usize) -> Refusal {
    refuse_unread(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("body larger than {limit} bytes (server.max_body_bytes)"),
    )
}

fn body_refusal(error: BodyError, limit: usize) -> Refusal {
    match error {
        BodyError::TooLarge => too_large(limit),
        BodyError::Busy => Refusal {
            retry_after: Some("5"),
            ..refuse_unread(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many webhook bodies are being received at once (server.body_buffer_bytes); retry later",
            )
        },
        BodyError::TimedOut => refuse_unread(
            StatusCode::REQUEST_TIMEOUT,
            "the body did not arrive in time (server.body_read_timeout_ms)",
        ),
        BodyError::Unreadable => refuse_unread(StatusCode::BAD_REQUEST, "the body could not be read"),
    }
}
