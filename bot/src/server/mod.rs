//! The HTTP face of Forgehand: webhook intake, the operator API, health
//! and metrics. Handlers only verify, decide and record; all real work
//! happens later in the job queue.

mod api;
mod metrics;
mod webhook;

use crate::sandboxes::SandboxStatus;
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use secrecy::SecretString;

pub use metrics::Metrics;

use crate::config::Config;
use crate::store::{IntakeWriter, Store};
use crate::trigger::BotIdentity;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub intake: IntakeWriter,
    pub metrics: Arc<Metrics>,
    pub bot: BotIdentity,
    pub github_secrets: Arc<Vec<SecretString>>,
    pub gitea_secrets: Arc<Vec<SecretString>>,
    pub api_token: Option<Arc<SecretString>>,
    pub max_body_bytes: usize,
    pub keep_payloads: bool,
    pub workers: usize,
    /// Set on nodes that run jobs.
    pub sandbox: Option<SandboxStatus>,
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
            github_secrets: Arc::new(config.github.webhook_secret.clone()),
            gitea_secrets: Arc::new(config.gitea.webhook_secret.clone()),
            api_token: config.api.token.clone().map(Arc::new),
            max_body_bytes: config.server.max_body_bytes,
            keep_payloads: config.database.keep_payloads,
            workers: config.queue.workers,
            sandbox: None,
        }
    }

    pub fn with_sandbox(mut self, sandbox: Option<SandboxStatus>) -> Self {
        self.sandbox = sandbox;
        self
    }
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/webhooks/github", post(webhook::github))
        .route("/webhooks/gitea", post(webhook::gitea))
        .route("/webhooks/forgejo", post(webhook::gitea))
        .nest("/api", api::router(state.clone()))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(api::readyz))
        .route("/metrics", get(metrics::render))
        .with_state(state)
}
