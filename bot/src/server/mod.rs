//! The HTTP face of Forgehand: webhook intake, the operator API, health
//! and metrics. Handlers only verify, decide and record; all real work
//! happens later in the job queue.

mod accept;
mod api;
mod body;
mod listener;
mod metrics;
mod refusals;
mod replay;
mod setup;
mod webhook;

use crate::sandboxes::SandboxStatus;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use secrecy::SecretString;

pub use body::BodyBudget;
pub use listener::{serve, HttpLimits};
pub use metrics::Metrics;
pub use refusals::{TokenBucket, MAX_DELIVERY_ID_BYTES, MAX_EVENT_BYTES, MAX_REASON_BYTES};
// What the live service swaps and the endpoints read: apart from both.
pub use crate::webhook_secrets::SecretSet;

use crate::config::{Config, DatabaseConfig};
use crate::store::{IntakeWriter, Store};
use crate::trigger::BotIdentity;

/// How webhook requests are read and judged, from `[server]` and `[database]`.
#[derive(Debug, Clone)]
pub struct WebhookLimits {
    pub max_body_bytes: usize,
    pub body_read_timeout: Duration,
    /// Its digest retention is also how old a body may be.
    pub database: DatabaseConfig,
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub intake: IntakeWriter,
    pub metrics: Arc<Metrics>,
    pub bot: BotIdentity,
    /// GitHub's grow when the set-up page creates an App.
    pub github_secrets: SecretSet,
    pub gitea_secrets: SecretSet,
    pub api_token: Option<Arc<SecretString>>,
    pub webhooks: Arc<WebhookLimits>,
    /// Bytes of webhook bodies held at once, all requests together.
    pub body_budget: BodyBudget,
    /// Which refusals are written to the database.
    pub refusals: Arc<TokenBucket>,
    pub http: HttpLimits,
    pub keep_payloads: bool,
    pub workers: usize,
    /// Set on nodes that run jobs.
    pub sandbox: Option<SandboxStatus>,
    /// What may change while serving (a GitHub App the set-up page makes);
    /// set by `service::serve_on`.
    pub live: Option<Arc<crate::live::Live>>,
    /// The set-up pages' sessions.
    pub setup_sessions: Arc<setup::Sessions>,
}

impl AppState {
    pub fn new(config: &Config, store: Arc<dyn Store>, intake: IntakeWriter) -> Self {
        AppState {
            store,
            intake,
            metrics: Arc::new(Metrics::default()),
            bot: BotIdentity {
                username: config.bot.username.clone(),
                label: config.bot.label.clone(),
            },
            github_secrets: SecretSet::new(config.github.webhook_secret.clone()),
            gitea_secrets: SecretSet::new(config.gitea.webhook_secret.clone()),
            api_token: config.api.token.clone().map(Arc::new),
            webhooks: Arc::new(WebhookLimits {
                max_body_bytes: config.server.max_body_bytes,
                body_read_timeout: config.server.body_read_timeout(),
                database: config.database.clone(),
            }),
            body_budget: BodyBudget::new(config.server.body_buffer_bytes),
            refusals: Arc::new(TokenBucket::new(
                config.server.refusal_records_burst,
                config.server.refusal_records_per_minute,
            )),
            http: HttpLimits::new(&config.server),
            keep_payloads: config.database.keep_payloads,
            workers: config.queue.workers,
            sandbox: None,
            live: None,
            setup_sessions: Arc::default(),
        }
    }

    pub fn with_sandbox(mut self, sandbox: Option<SandboxStatus>) -> Self {
        self.sandbox = sandbox;
        self
    }

    pub fn with_live(mut self, live: Arc<crate::live::Live>) -> Self {
        self.live = Some(live);
        self
    }
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/webhooks/github", post(webhook::github))
        .route("/webhooks/gitea", post(webhook::gitea))
        .route("/webhooks/forgejo", post(webhook::gitea))
        .route("/setup/github", get(setup::page).post(setup::sign_in))
        .route("/setup/github/callback", get(setup::callback))
        .nest("/api", api::router(state.clone()))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(api::readyz))
        .route("/metrics", get(metrics::render))
        .with_state(state)
}
