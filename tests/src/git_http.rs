//! A real smart-HTTP git server for the tests: `git http-backend` (CGI)
//! behind HTTP basic auth, on 127.0.0.1. Protocol v2 is passed through
//! (the `Git-Protocol` header becomes `GIT_PROTOCOL`), pushes are allowed
//! for the authenticated user, and every request's outcome is recorded so
//! tests can check what the server saw.
//!
//! It fails requests on demand, as a forge's git front end does under
//! load ([`GitFaults`]): the next requests of one kind (`info/refs`, the
//! pack exchange of a fetch or a push) answered 500/502/503, or 429 with
//! `Retry-After`, before or after the request was served (a push that
//! landed and whose answer was lost); every n-th request failed in turn;
//! or one request held, never answered, for a test to kill the client
//! there. Only authenticated requests count: the unauthenticated first
//! request of git's auth exchange is answered 401 as always.

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
    /// Which of git's requests it was, if one.
    pub kind: Option<GitRequest>,
    /// When it came in, and when its answer was ready: what a test
    /// measures a client's waits by.
    pub received: std::time::Instant,
    pub answered: std::time::Instant,
}

/// The requests of smart HTTP: a fetch (and an `ls-remote`) asks for the
/// refs with `upload-pack`, a push with `receive-pack`; then the pack goes
/// one way or the other in a POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitRequest {
    /// `GET …/info/refs?service=git-upload-pack`: a fetch's or an
    /// `ls-remote`'s first request.
    FetchRefs,
    /// `POST …/git-upload-pack`: a fetch's negotiation and pack.
    FetchPack,
    /// `GET …/info/refs?service=git-receive-pack`: a push's first request.
    PushRefs,
    /// `POST …/git-receive-pack`: a push's pack and ref updates.
    PushPack,
}

impl GitRequest {
    fn of(method: &Method, uri: &Uri) -> Option<GitRequest> {
        let path = uri.path();
        let query = uri.query().unwrap_or_default();
        match (method.as_str(), path) {
            ("GET", p) if p.ends_with("/info/refs") => match query {
                q if q.contains("service=git-upload-pack") => Some(GitRequest::FetchRefs),
                q if q.contains("service=git-receive-pack") => Some(GitRequest::PushRefs),
                _ => None,
            },
            ("POST", p) if p.ends_with("/git-upload-pack") => Some(GitRequest::FetchPack),
            ("POST", p) if p.ends_with("/git-receive-pack") => Some(GitRequest::PushPack),
            _ => None,
        }
    }
}

/// A failure for the next request of one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitFault {
    pub on: GitRequest,
    pub status: u16,
    pub retry_after: Option<u64>,
    /// Serve the request, then answer with the fault anyway: a push lands
    /// and the client is not told.
    pub after_serving: bool,
}

impl GitFault {
    /// `status` on the next `on`, before it is served.
    pub fn new(on: GitRequest, status: u16) -> Self {
        GitFault {
            on,
            status,
            retry_after: None,
            after_serving: false,
        }
    }
}

/// What the server fails or holds, changed while it runs.
#[derive(Debug, Default)]
pub struct GitFaults {
    /// Given in order, each to the next request of its kind.
    pub next: Vec<GitFault>,
    /// Every n-th authenticated request fails: 500, 502, 503 and 429 with
    /// `Retry-After: 1` in turn; every other one of those on a push's pack
    /// after it was served (it landed, its answer is lost).
    pub every: Option<u64>,
    /// Requests never answered, once each, (kind, after serving): a stage
    /// boundary a test kills the client at.
    pub holds: Vec<(GitRequest, bool)>,
    /// The held requests that came (one held after serving, once served).
    pub held: Vec<GitRequest>,
    /// Authenticated requests so far.
    pub requests: u64,
    /// Faults given so far.
    pub served: u64,
}

/// What the server does with one authenticated request.
enum Plan {
    Serve,
    Fail(GitFault),
    Hold { after_serving: bool },
}

impl GitFaults {
    fn plan(&mut self, kind: Option<GitRequest>) -> Plan {
        self.requests += 1;
        let Some(kind) = kind else {
            return Plan::Serve;
        };
        if let Some(at) = self.holds.iter().position(|(k, _)| *k == kind) {
            let (_, after_serving) = self.holds.remove(at);
            if !after_serving {
                self.held.push(kind);
            }
            return Plan::Hold { after_serving };
        }
        if let Some(at) = self.next.iter().position(|f| f.on == kind) {
            self.served += 1;
            return Plan::Fail(self.next.remove(at));
        }
        if let Some(every) = self.every {
            if self.requests.is_multiple_of(every) {
                const KINDS: [(u16, Option<u64>); 4] =
                    [(500, None), (502, None), (503, None), (429, Some(1))];
                // The first fault is the first of the kinds.
                let turn = self.requests / every - 1;
                let (status, retry_after) = KINDS[turn as usize % KINDS.len()];
                self.served += 1;
                return Plan::Fail(GitFault {
                    on: kind,
                    status,
                    retry_after,
                    after_serving: kind == GitRequest::PushPack && turn % 2 == 1,
                });
            }
        }
        Plan::Serve
    }
}

pub struct GitHttpServer {
    /// `http://127.0.0.1:<port>`; repositories are `<base>/<name>.git`.
    pub base_url: String,
    pub seen: Arc<Mutex<Vec<SeenRequest>>>,
    faults: Arc<Mutex<GitFaults>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

#[derive(Clone)]
struct Config {
    root: PathBuf,
    user: String,
    expected_auth: String,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    faults: Arc<Mutex<GitFaults>>,
}

impl GitHttpServer {
    /// Serves the bare repositories under `root`, to `user` with
    /// `password` only.
    pub async fn start(root: &Path, user: &str, password: &str) -> anyhow::Result<GitHttpServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let faults = Arc::new(Mutex::new(GitFaults::default()));
        let config = Config {
            root: root.to_owned(),
            user: user.to_owned(),
            expected_auth: format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            ),
            seen: seen.clone(),
            faults: faults.clone(),
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
            faults,
            shutdown: Some(shutdown),
        })
    }

    pub fn seen(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }

    /// Forgets the requests seen so far (a repository's seeding, say), and
    /// counts [`GitFaults::every`] from here.
    pub fn forget_seen(&self) {
        self.seen.lock().unwrap().clear();
        self.faults(|f| f.requests = 0);
    }

    /// How many requests of `kind` the server answered `status`.
    pub fn count(&self, kind: GitRequest, status: u16) -> usize {
        self.seen()
            .iter()
            .filter(|r| r.kind == Some(kind) && r.status == status)
            .count()
    }

    /// Reads or changes what the server fails or holds.
    pub fn faults<T>(&self, f: impl FnOnce(&mut GitFaults) -> T) -> T {
        f(&mut self.faults.lock().unwrap())
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
    let received = std::time::Instant::now();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let kind = GitRequest::of(&method, &uri);
    let response = if header("authorization").as_deref() != Some(config.expected_auth.as_str()) {
        Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("WWW-Authenticate", "Basic realm=\"git\"")
            .body(Body::from("authentication required\n"))
            .expect("a valid response")
    } else {
        let plan = config.faults.lock().unwrap().plan(kind);
        match plan {
            Plan::Serve => backend(&config, &method, &uri, &headers, body).await,
            Plan::Fail(fault) => {
                if fault.after_serving {
                    let _ = backend(&config, &method, &uri, &headers, body).await;
                }
                fault_response(&fault)
            }
            Plan::Hold { after_serving } => {
                if after_serving {
                    let _ = backend(&config, &method, &uri, &headers, body).await;
                    // Held only once served: a test that kills the client
                    // now finds the change made.
                    if let Some(kind) = kind {
                        config.faults.lock().unwrap().held.push(kind);
                    }
                }
                // Held at a stage boundary: the client waits until it
                // gives up or is killed.
                return std::future::pending().await;
            }
        }
    };
    config.seen.lock().unwrap().push(SeenRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        status: response.status().as_u16(),
        git_protocol: header("git-protocol"),
        kind,
        received,
        answered: std::time::Instant::now(),
    });
    response
}

async fn backend(
    config: &Config,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    match run_backend(config, method, uri, headers, body).await {
        Ok(response) => response,
        Err(error) => Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::from(format!("{error:#}\n")))
            .expect("a valid response"),
    }
}

fn fault_response(fault: &GitFault) -> Response {
    let mut builder = Response::builder()
        .status(fault.status)
        .header("content-type", "text/plain");
    if let Some(after) = fault.retry_after {
        builder = builder.header("retry-after", after.to_string());
    }
    builder
        .body(Body::from("injected fault\n"))
        .expect("a valid response")
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
