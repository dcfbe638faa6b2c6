//! Stateful fake forges for the tests: a GitHub and a Gitea that hold
//! repositories, issues, comments, reactions, pull requests, reviews and
//! statuses, and answer in each forge's own shapes. Every request is first
//! checked against the forge's own API description in
//! `../shared/testdata` (GitHub's REST OpenAPI subset, Gitea's Swagger); one
//! the real API would not take is answered 422 and recorded as a
//! violation, and tests assert there are none. Lists are served in
//! pages where the description says the real API pages them (see
//! [`paging`]). Changes are announced to registered webhooks as the real
//! forge would (see [`webhooks`]).

mod gitea;
mod github;
pub mod hooks;
mod manifest;
mod paging;
mod setup;
pub mod state;
pub mod strict;
pub mod webhooks;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::api_spec::ApiSpec;
pub use github::APP_BOT;
pub use hooks::Delivery;
pub use state::{CallFault, FaultShare, ForgeState, Hold};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    GitHub,
    Gitea,
}

pub struct FakeForge {
    /// `http://127.0.0.1:<port>`: what `gitea.base_url` or
    /// `github.api_url` is set to.
    pub base_url: String,
    pub state: Arc<Mutex<ForgeState>>,
    kind: Kind,
    /// Told each time a delivery is answered.
    answered: Arc<tokio::sync::Notify>,
    _deliverer: webhooks::Deliverer,
    _server: crate::local_server::LocalServer,
    /// Directories the forge's repositories live in, removed with it
    /// (kept past the test, they added up on the machine).
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

struct Shared {
    kind: Kind,
    spec: ApiSpec,
    state: Arc<Mutex<ForgeState>>,
}

impl FakeForge {
    pub async fn start(kind: Kind) -> anyhow::Result<FakeForge> {
        let spec = match kind {
            Kind::Gitea => ApiSpec::load(
                &crate::testdata::root().join("gitea/gitea-swagger-v1.22.json"),
                "/api/v1",
            )?,
            Kind::GitHub => ApiSpec::load(
                &crate::testdata::root().join("github/github-rest-subset.json"),
                "",
            )?,
        };
        let state = Arc::new(Mutex::new(ForgeState::default()));
        let shared = Arc::new(Shared {
            kind,
            spec,
            state: state.clone(),
        });
        let app = Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let shared = shared.clone();
                async move {
                    if shared.kind == Kind::GitHub && manifest::is_web(uri.path()) {
                        let mut state = shared.state.lock().unwrap();
                        let query = uri.query().unwrap_or_default();
                        return manifest::serve(
                            &mut state,
                            method.as_str(),
                            uri.path(),
                            query,
                            &body,
                        );
                    }
                    match held(&shared, &method, &uri, &body) {
                        None => handle(&shared, method, uri, headers, body),
                        // Held at a stage boundary: the client waits until
                        // it gives up or is killed.
                        Some((call, after_serving)) => {
                            if after_serving {
                                let _ = handle(&shared, method, uri, headers, body);
                            }
                            // Held only once served: a test that kills
                            // Forgehand now finds the change made.
                            shared.state.lock().unwrap().held.push(call);
                            std::future::pending().await
                        }
                    }
                }
            },
        );
        let server = crate::local_server::LocalServer::start(app).await?;
        {
            let mut s = state.lock().unwrap();
            s.web_base = server.base_url.clone();
            s.web_user = "maintainer".into();
        }
        let answered = Arc::new(tokio::sync::Notify::new());
        let deliverer = webhooks::start(state.clone(), &server.base_url, answered.clone());
        Ok(FakeForge {
            base_url: server.base_url.clone(),
            state,
            kind,
            answered,
            _deliverer: deliverer,
            _server: server,
            dirs: Mutex::new(Vec::new()),
        })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut ForgeState) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    /// Where `repo`'s commits and branches are: a bare git directory.
    pub fn set_git_dir(&self, repo: &str, dir: &std::path::Path) {
        self.with(|s| s.git_dirs.insert(repo.to_owned(), dir.to_owned()));
    }

    /// Gives `repo` a small git directory of its own (inside `dir`) with
    /// `branches`; returns each branch's commit.
    pub fn make_git(
        &self,
        repo: &str,
        dir: &std::path::Path,
        branches: &[&str],
    ) -> Vec<(String, String)> {
        let git = dir.join(format!("{}.git", repo.replace('/', "_")));
        let made = strict::make_git(&git, branches);
        self.set_git_dir(repo, &git);
        made
    }

    /// `acme/demo` as the API tests use it: a git directory (removed
    /// with the forge) with `main` and the head
    /// branches the tests open pull requests from, and the bot (`login`)
    /// a collaborator that may write, as its installation would make it.
    /// Returns `main`'s commit.
    pub fn api_test_repository(&self, login: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let made = self.make_git(
            "acme/demo",
            dir.path(),
            &[
                "main",
                "forgehand/1-fix",
                "forgehand/1-x",
                "forgehand/1-fix-the-readme",
            ],
        );
        self.with(|s| {
            s.permissions
                .insert(("acme/demo".into(), login.into()), "write".into());
        });
        self.hold(dir);
        made[0].1.clone()
    }

    /// Keeps `dir` (a repository's) until the forge is dropped.
    pub fn hold(&self, dir: tempfile::TempDir) {
        self.dirs.lock().unwrap().push(dir);
    }

    /// What the forge refused for what it asked (see `strict`).
    pub fn refused(&self) -> Vec<String> {
        self.with(|s| s.refused.clone())
    }

    pub fn violations(&self) -> Vec<String> {
        self.with(|s| s.violations.clone())
    }
}

/// Whether the request is a call [`ForgeState::holds`] names: then it
/// is taken off the list (the next one is answered), never answered, and
/// recorded in [`ForgeState::held`] by the caller: `Some((call, true))` when it is to be
/// served first.
fn held(shared: &Shared, method: &Method, uri: &Uri, body: &Bytes) -> Option<(String, bool)> {
    let mut state = shared.state.lock().unwrap();
    if state.holds.is_empty() {
        return None;
    }
    let body: Option<Value> = serde_json::from_slice(body).ok();
    let matched = shared
        .spec
        .check(method.as_str(), uri.path(), uri.query(), body.as_ref())
        .ok()?;
    let call = format!("{} {}", matched.method, matched.template);
    let text = body
        .as_ref()
        .and_then(|b| b.get("body"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let at = state.holds.iter().position(|h| {
        h.call == call
            && h.body_contains
                .as_deref()
                .is_none_or(|wanted| text.contains(wanted))
    })?;
    let hold = state.holds.remove(at);
    Some((call, hold.after_serving))
}

fn handle(shared: &Shared, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let mut state = shared.state.lock().unwrap();
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    // GitHub's manifest conversion takes no sign-in: its code is the
    // credential.
    let anonymous = shared.kind == Kind::GitHub
        && authorization.is_empty()
        && uri.path().starts_with("/app-manifests/");
    let user = match who(shared.kind, &state, authorization) {
        Some(user) => user,
        None if anonymous => String::new(),
        None => {
            return (
                StatusCode::UNAUTHORIZED,
                Json(json!({"message": "Bad credentials"})),
            )
                .into_response()
        }
    };
    let token = authorization
        .split_once(' ')
        .map(|(_, t)| t.to_owned())
        .unwrap_or_default();
    let body: Option<Value> = if body.is_empty() {
        None
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => Some(v),
            Err(e) => {
                state.violations.push(format!(
                    "{method} {}: the body is not JSON: {e}",
                    uri.path()
                ));
                return (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    Json(json!({"message": "invalid JSON"})),
                )
                    .into_response();
            }
        }
    };
    let checked = shared
        .spec
        .check(method.as_str(), uri.path(), uri.query(), body.as_ref())
        .or_else(|problem| match shared.kind {
            Kind::GitHub => github::outside_the_subset(method.as_str(), uri.path(), body.as_ref())
                .ok_or(problem),
            Kind::Gitea => Err(problem),
        });
    let matched = match checked {
        Ok(m) => m,
        Err(problem) => {
            state.violations.push(problem.clone());
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({"message": problem})),
            )
                .into_response();
        }
    };
    state
        .calls
        .push(format!("{} {}", matched.method, matched.template));
    if let Some((status, retry_after)) = state.faults.pop_front() {
        return fault(status, retry_after);
    }
    if let Some(every) = state.fault_every {
        state.calls_seen += 1;
        if state.calls_seen.is_multiple_of(every) {
            // 5xx, a rate limit, a secondary rate limit (403 with
            // Retry-After), another 5xx, in turn.
            const KINDS: [(u16, Option<u64>); 4] =
                [(500, None), (429, Some(1)), (403, Some(1)), (502, None)];
            let (status, retry_after) = KINDS[(state.calls_seen / every) as usize % KINDS.len()];
            state.faults_served += 1;
            return fault(status, retry_after);
        }
    }
    // A random fault: before serving, or (half of the writes' faults)
    // after, the change made and its answer lost.
    let mut lost_answer = None;
    if let Some(mut share) = state.fault_share {
        let (draw, kind, lose) = (share.draw(), share.draw(), share.draw());
        state.fault_share = Some(share);
        if draw < share.per_mille {
            const KINDS: [(u16, Option<u64>); 4] =
                [(500, None), (429, Some(1)), (403, Some(1)), (502, None)];
            let (status, retry_after) = KINDS[kind as usize % KINDS.len()];
            state.faults_served += 1;
            if matched.method != "GET" && lose < 500 {
                lost_answer = Some((status, retry_after));
            } else {
                return fault(status, retry_after);
            }
        }
    }
    let call = format!("{} {}", matched.method, matched.template);
    let call_fault = state
        .call_faults
        .iter()
        .position(|f| f.call == call)
        .map(|i| state.call_faults.remove(i));
    if let Some(f) = &call_fault {
        if !f.after_serving {
            return fault(f.status, f.retry_after);
        }
    }
    // The template's `{name}`s, read from the request's path and
    // percent-decoded (a branch `forgehand/1-x` travels as one segment,
    // `forgehand%2F1-x`).
    let actual = uri
        .path()
        .trim_start_matches(match shared.kind {
            Kind::Gitea => "/api/v1",
            Kind::GitHub => "",
        })
        .split('/')
        .filter(|p| !p.is_empty());
    let args: HashMap<String, String> = matched
        .template
        .split('/')
        .filter(|p| !p.is_empty())
        .zip(actual)
        .filter_map(|(t, a)| {
            Some((
                t.strip_prefix('{')?.strip_suffix('}')?.to_owned(),
                percent_encoding::percent_decode_str(a)
                    .decode_utf8_lossy()
                    .into_owned(),
            ))
        })
        .collect();
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let repo = format!(
        "{}/{}",
        args.get("owner").cloned().unwrap_or_default(),
        args.get("repo").cloned().unwrap_or_default()
    );
    if shared.kind == Kind::Gitea {
        if let Some(granted) = state.token_scopes.get(&token) {
            let needed = setup::gitea_scope(&matched.method, &matched.template);
            if !setup::covers(granted, &needed) {
                return (
                    StatusCode::FORBIDDEN,
                    Json(json!({"message": format!("token does not have at least one of required scope(s): [{needed}]")})),
                )
                    .into_response();
            }
        }
    }
    let body = body.unwrap_or(Value::Null);
    let call = strict::Call {
        kind: shared.kind,
        method: &matched.method,
        template: &matched.template,
        repo: &repo,
        user: &user,
        token: &token,
        args: &args,
        body: &body,
    };
    if let Err((status, message)) = strict::check(&state, &call) {
        state
            .refused
            .push(format!("{} {}: {message}", matched.method, uri.path()));
        return (status, Json(json!({"message": message}))).into_response();
    }
    let request = Request {
        repo: &repo,
        user: &user,
        token: &token,
        body: &body,
        args: &args,
        query: &query,
    };
    // A GitHub App's own calls (JWT) act as the App, not a user.
    let app_call = matched.template == "/app" || matched.template.starts_with("/app/");
    if user.starts_with("app:") != app_call
        && !(user.starts_with("app:") && matched.template.ends_with("/installation"))
    {
        return (
            StatusCode::FORBIDDEN,
            Json(json!({"message": format!("{user} cannot call {}", matched.template)})),
        )
            .into_response();
    }
    let (method, template) = (matched.method.as_str(), matched.template.as_str());
    state.extra_headers.clear();
    let answer = match shared.kind {
        Kind::Gitea => setup::gitea(&mut state, method, template, &request)
            .unwrap_or_else(|| gitea::route(&mut state, method, template, &request)),
        Kind::GitHub => setup::github(&mut state, method, template, &request)
            .unwrap_or_else(|| github::route(&mut state, method, template, &request)),
    };
    let extra = std::mem::take(&mut state.extra_headers);
    if let Some(f) = call_fault {
        return fault(f.status, f.retry_after);
    }
    if let Some((status, retry_after)) = lost_answer {
        return fault(status, retry_after);
    }
    let mut response = respond(shared, answer, &matched, &headers, &uri, &query);
    for (name, value) in extra {
        if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::try_from(name),
            axum::http::HeaderValue::try_from(value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// The answer as the forge sends it: a list in pages where the
/// description says the real API pages it.
fn respond(
    shared: &Shared,
    answer: Answer,
    matched: &crate::api_spec::Matched,
    headers: &HeaderMap,
    uri: &Uri,
    query: &[(String, String)],
) -> Response {
    match answer {
        Ok((StatusCode::OK, Value::Array(items))) if matched.method == "GET" => {
            let host = headers
                .get("host")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("127.0.0.1");
            let origin = format!("http://{host}");
            let asked = paging::Asked {
                origin: &origin,
                path: uri.path(),
                query,
            };
            let page = match shared.kind {
                Kind::GitHub if matched.takes("per_page") => paging::github(items, &asked),
                Kind::Gitea if matched.takes("limit") => paging::gitea(items, &asked),
                Kind::Gitea if matched.template.ends_with("/issues/{index}/comments") => {
                    paging::gitea_whole(items)
                }
                _ => paging::Page {
                    items,
                    headers: Vec::new(),
                },
            };
            let mut response = (StatusCode::OK, Json(Value::Array(page.items))).into_response();
            for (name, value) in page.headers {
                response
                    .headers_mut()
                    .insert(name, value.parse().expect("a header value"));
            }
            response
        }
        Ok((status, value)) => (status, Json(value)).into_response(),
        Err((status, message)) => (status, Json(json!({"message": message}))).into_response(),
    }
}

fn fault(status: u16, retry_after: Option<u64>) -> Response {
    let mut response = (
        StatusCode::from_u16(status).unwrap(),
        Json(json!({"message": "injected fault"})),
    )
        .into_response();
    if let Some(after) = retry_after {
        response.headers_mut().insert("retry-after", after.into());
    }
    response
}

/// The login a request acts as: a token's user, or `app:<id>` for a
/// GitHub App's JWT signed by a key the forge knows.
fn who(kind: Kind, state: &ForgeState, authorization: &str) -> Option<String> {
    let (scheme, credential) = authorization.split_once(' ')?;
    match (kind, scheme.to_ascii_lowercase().as_str()) {
        (Kind::Gitea, "token") | (Kind::GitHub, "token") => state.tokens.get(credential).cloned(),
        (Kind::GitHub, "bearer") => state
            .tokens
            .get(credential)
            .cloned()
            .or_else(|| github::app_from_jwt(state, credential)),
        _ => None,
    }
}

type Answer = Result<(StatusCode, Value), (StatusCode, String)>;

/// A user as both forges' API objects name one: a login and a stable id
/// (the fake keeps no user table; the id is made from the login). GitHub
/// also says whether it is an App's bot.
fn user_json(kind: Kind, login: &str) -> Value {
    // FNV-1a: the same login has the same id in every answer.
    let id = login.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) % 1_000_000_000
        + 1;
    match kind {
        Kind::GitHub => {
            let kind = if login.ends_with("[bot]") {
                "Bot"
            } else {
                "User"
            };
            json!({"login": login, "id": id, "type": kind})
        }
        Kind::Gitea => json!({"login": login, "id": id}),
    }
}

struct Request<'a> {
    repo: &'a str,
    user: &'a str,
    /// The credential the request carried (a token's scopes are looked
    /// up by it).
    token: &'a str,
    body: &'a Value,
    args: &'a HashMap<String, String>,
    /// The query, decoded, in order.
    query: &'a [(String, String)],
}

impl Request<'_> {
    fn num(&self, name: &str) -> u64 {
        self.args
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    fn arg(&self, name: &str) -> String {
        self.args.get(name).cloned().unwrap_or_default()
    }

    /// The query parameter `name`, decoded.
    fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}
