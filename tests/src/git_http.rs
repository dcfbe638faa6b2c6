//! A real smart-HTTP git server for the tests: `git http-backend` (CGI)
//! behind HTTP basic auth, on 127.0.0.1. Protocol v2 is passed through
//! (the `Git-Protocol` header becomes `GIT_PROTOCOL`), pushes are allowed
//! for the authenticated user, and every request's outcome is recorded so
//! tests can check what the server saw.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use base64::Engine;
use tokio::io::AsyncWriteExt;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    pub status: u16,
    /// The `Git-Protocol` header, e.g. `version=2`.
    pub git_protocol: Option<String>,
}

pub struct GitHttpServer {
    /// `http://127.0.0.1:<port>`; repositories are `<base>/<name>.git`.
    pub base_url: String,
    pub seen: Arc<Mutex<Vec<SeenRequest>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

#[derive(Clone)]
struct Config {
    root: PathBuf,
    user: String,
    expected_auth: String,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
}

impl GitHttpServer {
    /// Serves the bare repositories under `root`, to `user` with
    /// `password` only.
    pub async fn start(root: &Path, user: &str, password: &str) -> anyhow::Result<GitHttpServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let config = Config {
            root: root.to_owned(),
            user: user.to_owned(),
            expected_auth: format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            ),
            seen: seen.clone(),
        };
        let app = axum::Router::new().fallback(serve).with_state(config);
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stop.await;
                })
                .await;
        });
        Ok(GitHttpServer {
            base_url: format!("http://127.0.0.1:{}", addr.port()),
            seen,
            shutdown: Some(shutdown),
        })
    }

    pub fn seen(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

async fn serve(
    State(config): State<Config>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let response = if header("authorization").as_deref() != Some(config.expected_auth.as_str()) {
        Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("WWW-Authenticate", "Basic realm=\"git\"")
            .body(Body::from("authentication required\n"))
            .expect("a valid response")
    } else {
        match run_backend(&config, &method, &uri, &headers, body).await {
            Ok(response) => response,
            Err(error) => Response::builder()
                .status(StatusCode::INTERNAL_SERVER_ERROR)
                .body(Body::from(format!("{error:#}\n")))
                .expect("a valid response"),
        }
    };
    config.seen.lock().unwrap().push(SeenRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        status: response.status().as_u16(),
        git_protocol: header("git-protocol"),
    });
    response
}

/// Runs `git http-backend` as CGI for one request.
async fn run_backend(
    config: &Config,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> anyhow::Result<Response> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let mut command = tokio::process::Command::new("git");
    command
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", &config.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", uri.path())
        .env("QUERY_STRING", uri.query().unwrap_or(""))
        .env("REQUEST_METHOD", method.as_str())
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", &config.user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .context("running git http-backend (is git installed?)")?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&body).await;
    });
    let output = child.wait_with_output().await?;
    let _ = writer.await;
    anyhow::ensure!(
        output.status.success(),
        "git http-backend failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    cgi_response(&output.stdout)
}

/// A CGI answer: headers (with an optional `Status:`), a blank line, the body.
fn cgi_response(raw: &[u8]) -> anyhow::Result<Response> {
    let (head_end, body_start) = find_blank_line(raw).context("no end of CGI headers")?;
    let head = std::str::from_utf8(&raw[..head_end])?;
    let mut builder = Response::builder().status(StatusCode::OK);
    for line in head.lines() {
        let (name, value) = line.split_once(':').context("a malformed CGI header")?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code: u16 = value.split_whitespace().next().unwrap_or("500").parse()?;
            builder = builder.status(code);
        } else {
            builder = builder.header(name, value);
        }
    }
    Ok(builder.body(Body::from(raw[body_start..].to_vec()))?)
}

fn find_blank_line(raw: &[u8]) -> Option<(usize, usize)> {
    if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
        return Some((i, i + 4));
    }
    raw.windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2))
}
