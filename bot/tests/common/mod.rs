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
    /// The same store, for reading its tables directly.
    pub sqlite: SqliteStore,
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
        let sqlite = SqliteStore::connect(&config.database.url).await.unwrap();
        let store: Arc<dyn Store> = Arc::new(sqlite.clone());
        let intake = IntakeWriter::spawn(
            store.intake_log().unwrap(),
            16,
            Arc::new(tokio::sync::Notify::new()),
        );
        let state = AppState::new(&config, store.clone(), intake);
        TestApp {
            router: router(state),
            store,
            sqlite,
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

    /// The text of `GET /metrics`.
    pub async fn metrics(&self) -> String {
        let (status, body) = self
            .send(Request::get("/metrics").body(Body::empty()).unwrap())
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body.as_str().unwrap().to_owned()
    }

    /// How many rows `table` has.
    pub async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(self.sqlite.pool())
            .await
            .unwrap()
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

/// A real GitHub `issues.labeled` payload, labeled with `label`, as if
/// sent now.
pub fn labeled_issue(label: &str, number: u64) -> Vec<u8> {
    let mut value = testdata_json("github/webhook-examples/issues/labeled.1.json");
    value["label"]["name"] = Value::from(label);
    value["issue"]["number"] = Value::from(number);
    serde_json::to_vec(&value).unwrap()
}

/// A test data payload, its timestamps moved to now: the real examples
/// are years old, older than `database.digest_retention_days`, and a body
/// that old is refused as a replay.
pub fn testdata_json(path: &str) -> Value {
    let mut value: Value =
        serde_json::from_slice(&std::fs::read(testdata().join(path)).unwrap()).unwrap();
    stamp(&mut value, &now_rfc3339());
    value
}

/// Sets every timestamp the replay check reads that `payload` has.
pub fn stamp(payload: &mut Value, at: &str) {
    for object in ["comment", "issue", "pull_request", "review"] {
        for field in ["created_at", "updated_at", "submitted_at"] {
            if let Some(v) = payload.get_mut(object).and_then(|o| o.get_mut(field)) {
                if !v.is_null() {
                    *v = Value::from(at);
                }
            }
        }
    }
}

pub fn now_rfc3339() -> String {
    rfc3339_days_ago(0)
}

pub fn rfc3339_days_ago(days: i64) -> String {
    let at = time::OffsetDateTime::now_utc() - time::Duration::days(days);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

/// An assignment of issue `target` on acme/widgets, as the store queues it.
pub fn job(target: u64) -> forgehand_bot::store::NewJob {
    let job = forgehand_bot::job::Job {
        forge: forgehand_forge::ForgeKind::Github,
        repo: forgehand_forge::Repo {
            owner: "acme".into(),
            name: "widgets".into(),
            clone_url: None,
            default_branch: None,
            private: false,
        },
        target,
        on_pull_request: false,
        requested_by: "maintainer".into(),
        task: forgehand_bot::job::Task::Assigned,
    };
    (&job).into()
}
