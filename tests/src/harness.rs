//! The real Forgehand service, started in-process on a real TCP port, and
//! a client that talks to it the way the forges and an operator do.

use std::time::{Duration, Instant};

use forgehand_bot::config::Config;
use forgehand_forge::webhook::signature::sign_hex;
use secrecy::SecretString;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The secret the server verifies GitHub deliveries with.
pub const GITHUB_SECRET: &str = "e2e-github-secret";
/// The secret the server verifies Gitea and Forgejo deliveries with.
pub const GITEA_SECRET: &str = "e2e-gitea-secret";
/// The operator API's bearer token.
pub const API_TOKEN: &str = "e2e-operator-token";

/// A running Forgehand. Dropping it stops the server; [`TestServer::stop`]
/// stops it gracefully and reports how it ended.
pub struct TestServer {
    base: String,
    config: Config,
    client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
    _dir: tempfile::TempDir,
}

/// The server's answer to a request: status and JSON body (a body that is
/// not JSON is kept as a string).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl TestServer {
    /// The service with the suite's defaults: both forges' secrets, the
    /// operator API on, and no workers, so that jobs stay queued.
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Like [`TestServer::start`], with the configuration adjusted first
    /// (the bot's username and label, say).
    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory for the database");
        let mut config = Config::default();
        config.database.url = format!("sqlite://{}", dir.path().join("forgehand.db").display());
        config.github.webhook_secret = vec![SecretString::from(GITHUB_SECRET)];
        config.gitea.webhook_secret = vec![SecretString::from(GITEA_SECRET)];
        config.api.token = Some(SecretString::from(API_TOKEN));
        config.queue.workers = 0;
        // The shared test data's payloads were written in 2017-2019: with
        // the default window they would be refused as replays (their own
        // timestamps are older than the digests are kept). A century
        // keeps the check, and lets them in.
        config.database.digest_retention_days = 36_500;
        adjust(&mut config);
        if let Err(e) = config.validate() {
            panic!("the test configuration is invalid: {e}");
        }

        // A free port, picked by the kernel and kept: the service serves
        // on this very listener.
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("the bound address");
        config.server.listen = addr.to_string();
        let (shutdown, stop) = oneshot::channel::<()>();
        let task = tokio::spawn(forgehand_bot::service::serve_on(
            listener,
            config.clone(),
            forgehand_bot::service::Runner::logging(),
            async move {
                let _ = stop.await;
            },
        ));

        // One connection per request: the client may outlive the runtime
        // of the test that made it, and a pooled connection would not.
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(30))
            .build()
            .expect("an HTTP client");
        let mut server = TestServer {
            base: format!("http://{addr}"),
            config,
            client,
            shutdown: Some(shutdown),
            task: Some(task),
            _dir: dir,
        };
        server.wait_until_healthy().await;
        // Ready, and with the workers configured.
        let ready = server.get("/readyz").await;
        assert_eq!(ready.status, 200, "GET /readyz: {}", ready.body);
        assert_eq!(
            ready.body["workers"],
            serde_json::json!(server.config.queue.workers),
            "GET /readyz: {}",
            ready.body
        );
        server
    }

    async fn wait_until_healthy(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(task) = &self.task {
                if task.is_finished() {
                    let task = self.task.take().expect("checked above");
                    match task.await {
                        Ok(Ok(())) => panic!("the server stopped before it became healthy"),
                        Ok(Err(e)) => panic!("the server failed to start: {e:#}"),
                        Err(e) => panic!("the server task panicked: {e}"),
                    }
                }
            }
            if let Ok(r) = self.client.get(self.url("/healthz")).send().await {
                if r.status().as_u16() == 200 {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "GET /healthz did not answer 200 within 20 s at {}",
                self.base
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The configuration the server runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// POSTs `body` to `path` with exactly these headers.
    pub async fn post_raw(
        &self,
        path: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Answer {
        let mut request = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        answer(response).await
    }

    /// A delivery as GitHub sends it, signed with [`GITHUB_SECRET`].
    pub async fn post_github(
        &self,
        event: &str,
        delivery_id: &str,
        body: impl Into<Vec<u8>>,
    ) -> Answer {
        let body = body.into();
        let headers = github_headers(GITHUB_SECRET, event, delivery_id, &body);
        self.post_raw("/webhooks/github", &headers, body).await
    }

    /// A delivery as Gitea sends it to `/webhooks/gitea`, signed with
    /// [`GITEA_SECRET`]. `event` is the coarse `X-Gitea-Event`; the
    /// fine-grained `X-Gitea-Event-Type` is derived from it and the
    /// payload as Gitea does.
    pub async fn post_gitea(
        &self,
        event: &str,
        delivery_id: &str,
        body: impl Into<Vec<u8>>,
    ) -> Answer {
        let body = body.into();
        let headers = gitea_headers(GITEA_SECRET, event, delivery_id, &body);
        self.post_raw("/webhooks/gitea", &headers, body).await
    }

    /// A delivery as Forgejo sends it to `/webhooks/forgejo`: Gitea's
    /// headers plus its own `X-Forgejo-*`.
    pub async fn post_forgejo(
        &self,
        event: &str,
        delivery_id: &str,
        body: impl Into<Vec<u8>>,
    ) -> Answer {
        let body = body.into();
        let headers = forgejo_headers(GITEA_SECRET, event, delivery_id, &body);
        self.post_raw("/webhooks/forgejo", &headers, body).await
    }

    /// `GET path` without credentials.
    pub async fn get(&self, path: &str) -> Answer {
        let response = self
            .client
            .get(self.url(path))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        answer(response).await
    }

    /// `GET path` with the operator's bearer token; panics unless 200.
    pub async fn api_get(&self, path: &str) -> Value {
        let response = self
            .client
            .get(self.url(path))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let a = answer(response).await;
        assert_eq!(a.status, 200, "GET {path}: {}", a.body);
        a.body
    }

    /// Every recorded delivery, newest first, read page by page.
    pub async fn deliveries(&self) -> Vec<Value> {
        self.all_pages("/api/deliveries", "deliveries").await
    }

    /// Every job, newest first, read page by page.
    pub async fn jobs(&self) -> Vec<Value> {
        self.all_pages("/api/jobs", "jobs").await
    }

    /// One job with its runs (`GET /api/jobs/{id}`).
    pub async fn job(&self, id: i64) -> Value {
        self.api_get(&format!("/api/jobs/{id}")).await
    }

    async fn all_pages(&self, path: &str, key: &str) -> Vec<Value> {
        const PAGE: usize = 500;
        let mut out: Vec<Value> = Vec::new();
        loop {
            let query = match out.last() {
                None => format!("{path}?limit={PAGE}"),
                Some(last) => {
                    let id = last["id"]
                        .as_i64()
                        .unwrap_or_else(|| panic!("{path}: a row without an id: {last}"));
                    format!("{path}?limit={PAGE}&before={id}")
                }
            };
            let body = self.api_get(&query).await;
            let page = body[key]
                .as_array()
                .unwrap_or_else(|| panic!("GET {query}: no `{key}` array in {body}"))
                .clone();
            let n = page.len();
            out.extend(page);
            if n < PAGE {
                return out;
            }
        }
    }

    /// Stops the server gracefully and returns how it ended.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|e| anyhow::anyhow!("the server task failed: {e}"))?,
            None => Ok(()),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("reading the response body");
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Answer { status, body }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// The headers GitHub sends with a delivery signed with `secret`.
pub fn github_headers(
    secret: &str,
    event: &str,
    delivery_id: &str,
    body: &[u8],
) -> Vec<(String, String)> {
    let signature = format!("sha256={}", sign_hex(secret.as_bytes(), body));
    pairs(&[
        ("user-agent", "GitHub-Hookshot/e2e"),
        ("x-github-event", event),
        ("x-github-delivery", delivery_id),
        ("x-github-hook-id", "109948940"),
        ("x-hub-signature-256", &signature),
    ])
}

/// The headers Gitea sends: its own, the same as `X-Gogs-*`, and
/// GitHub's, all from one HMAC-SHA256 (bare hex in Gitea's and Gogs'
/// headers, `sha256=` prefixed in GitHub's).
pub fn gitea_headers(
    secret: &str,
    event: &str,
    delivery_id: &str,
    body: &[u8],
) -> Vec<(String, String)> {
    let signature = sign_hex(secret.as_bytes(), body);
    let event_type = gitea_event_type(event, body);
    let prefixed = format!("sha256={signature}");
    pairs(&[
        ("user-agent", "Go-http-client/1.1"),
        ("x-gitea-delivery", delivery_id),
        ("x-gitea-event", event),
        ("x-gitea-event-type", &event_type),
        ("x-gitea-signature", &signature),
        ("x-gogs-delivery", delivery_id),
        ("x-gogs-event", event),
        ("x-gogs-event-type", &event_type),
        ("x-gogs-signature", &signature),
        ("x-github-delivery", delivery_id),
        ("x-github-event", event),
        ("x-github-event-type", &event_type),
        ("x-hub-signature-256", &prefixed),
    ])
}

/// The headers Forgejo sends: Gitea's plus `X-Forgejo-*`.
pub fn forgejo_headers(
    secret: &str,
    event: &str,
    delivery_id: &str,
    body: &[u8],
) -> Vec<(String, String)> {
    let signature = sign_hex(secret.as_bytes(), body);
    let event_type = gitea_event_type(event, body);
    let mut headers = pairs(&[
        ("x-forgejo-delivery", delivery_id),
        ("x-forgejo-event", event),
        ("x-forgejo-event-type", &event_type),
        ("x-forgejo-signature", &signature),
    ]);
    headers.extend(gitea_headers(secret, event, delivery_id, body));
    headers
}

/// The fine-grained `X-Gitea-Event-Type` Gitea sends beside the coarse
/// `X-Gitea-Event` (`modules/webhook/type.go`): which one follows from the
/// payload's `action` and, for comments, whether it is on a pull request.
pub fn gitea_event_type(event: &str, body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let action = v["action"].as_str().unwrap_or_default();
    let is_pull = v["is_pull"].as_bool().unwrap_or(false) || v["issue"]["pull_request"].is_object();
    let fine = match (event, action) {
        ("issues", "label_updated" | "label_cleared" | "labeled" | "unlabeled") => "issue_label",
        ("issues", "assigned" | "unassigned") => "issue_assign",
        ("issues", "milestoned" | "demilestoned") => "issue_milestone",
        ("issue_comment", _) if is_pull => "pull_request_comment",
        ("pull_request", "label_updated" | "label_cleared" | "labeled" | "unlabeled") => {
            "pull_request_label"
        }
        ("pull_request", "assigned" | "unassigned") => "pull_request_assign",
        ("pull_request", "milestoned" | "demilestoned") => "pull_request_milestone",
        ("pull_request", "synchronized" | "synchronize") => "pull_request_sync",
        ("pull_request", "review_requested" | "review_request_removed") => {
            "pull_request_review_request"
        }
        ("pull_request_approved", _) => "pull_request_review_approved",
        ("pull_request_rejected", _) => "pull_request_review_rejected",
        ("pull_request_comment", _) => "pull_request_review_comment",
        (other, _) => other,
    };
    fine.to_owned()
}
