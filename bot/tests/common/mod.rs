//! A Forgehand router over a real SQLite file, driven in-process.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use forgehand_bot::config::Config;
use forgehand_bot::server::{router, AppState};
use forgehand_bot::store::{IntakeWriter, SqliteStore, Store};
use forgehand_forge::webhook::signature::sign_hex;
use http_body_util::BodyExt;
use secrecy::SecretString;
use serde_json::Value;
use tower::ServiceExt;

pub const GITHUB_SECRET: &str = "github-secret";
pub const GITEA_SECRET: &str = "gitea-secret";
pub const API_TOKEN: &str = "operator-token";

pub struct TestApp {
    pub router: Router,
    pub store: Arc<dyn Store>,
    pub config: Config,
    _dir: tempfile::TempDir,
}

pub fn config_for(dir: &std::path::Path) -> Config {
    let mut config = Config::default();
    config.database.url = format!("sqlite://{}", dir.join("forgehand.db").display());
    config.github.webhook_secret = vec![
        SecretString::from("old-github-secret"),
        SecretString::from(GITHUB_SECRET),
    ];
    config.gitea.webhook_secret = vec![SecretString::from(GITEA_SECRET)];
    config.api.token = Some(SecretString::from(API_TOKEN));
    config
}

impl TestApp {
    pub async fn new() -> Self {
        Self::with(|_| {}).await
    }

    pub async fn with(adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config_for(dir.path());
        adjust(&mut config);
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::connect(&config.database.url).await.unwrap());
        let intake = IntakeWriter::spawn(
            store.intake_log().unwrap(),
            16,
            Arc::new(tokio::sync::Notify::new()),
        );
        let state = AppState::new(&config, store.clone(), intake);
        TestApp {
            router: router(state),
            store,
            config,
            _dir: dir,
        }
    }

    pub async fn send(&self, request: Request<Body>) -> (StatusCode, Value) {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
        (status, value)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(
            Request::get(path)
                .header("authorization", format!("Bearer {API_TOKEN}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
    }

    /// The most recent deliveries, newest first, as the operator API shows them.
    pub async fn deliveries(&self) -> Vec<Value> {
        let (status, body) = self.get("/api/deliveries").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["deliveries"].as_array().unwrap().clone()
    }

    pub async fn jobs(&self) -> Vec<Value> {
        let (status, body) = self.get("/api/jobs").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["jobs"].as_array().unwrap().clone()
    }
}

/// A GitHub delivery signed like GitHub signs it.
pub fn github(event: &str, delivery: &str, body: impl Into<Vec<u8>>) -> Request<Body> {
    github_signed_with(GITHUB_SECRET, event, delivery, body)
}

pub fn github_signed_with(
    secret: &str,
    event: &str,
    delivery: &str,
    body: impl Into<Vec<u8>>,
) -> Request<Body> {
    let body = body.into();
    Request::post("/webhooks/github")
        .header("content-type", "application/json")
        .header("x-github-event", event)
        .header("x-github-delivery", delivery)
        .header(
            "x-hub-signature-256",
            format!("sha256={}", sign_hex(secret.as_bytes(), &body)),
        )
        .body(Body::from(body))
        .unwrap()
}

/// A Gitea delivery with every header Gitea sends, GitHub's included.
pub fn gitea(path: &str, event: &str, delivery: &str, body: impl Into<Vec<u8>>) -> Request<Body> {
    let body = body.into();
    let sig = sign_hex(GITEA_SECRET.as_bytes(), &body);
    Request::post(path)
        .header("content-type", "application/json")
        .header("x-gitea-event", event)
        .header("x-gitea-delivery", delivery)
        .header("x-gitea-signature", &sig)
        .header("x-gogs-event", event)
        .header("x-github-event", event)
        .header("x-github-delivery", delivery)
        .header("x-hub-signature-256", format!("sha256={sig}"))
        .body(Body::from(body))
        .unwrap()
}

pub fn testdata() -> PathBuf {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/testdata"
    ));
    assert!(
        dir.is_dir(),
        "the shared test data is missing at {}: the suite needs ../shared/testdata beside the checkout",
        dir.display()
    );
    dir
}

/// A real GitHub `issues.labeled` payload, labeled with `label`.
pub fn labeled_issue(label: &str, number: u64) -> Vec<u8> {
    let path = testdata().join("github/webhook-examples/issues/labeled.1.json");
    let mut value: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    value["label"]["name"] = Value::from(label);
    value["issue"]["number"] = Value::from(number);
    serde_json::to_vec(&value).unwrap()
}
