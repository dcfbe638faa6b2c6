//! A stateful fake Gitea API for the tests: repositories with
//! collaborators, issues, comments, reactions, pull requests, reviews,
//! review comments and commit statuses, answered in Gitea's shapes.
//! Every request is first checked against Gitea's own API description
//! (`../shared/testdata/gitea/gitea-swagger-v1.22.json`); one the real
//! API would not take is answered 422 and recorded as a violation, and
//! tests assert there are none.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::api_spec::ApiSpec;

#[derive(Default)]
pub struct GiteaState {
    /// token → login
    pub tokens: HashMap<String, String>,
    /// (owner/name, login) → none|read|write|admin|owner
    pub permissions: HashMap<(String, String), String>,
    pub issues: Vec<FakeIssue>,
    pub comments: Vec<FakeComment>,
    /// (repo, "issue:N" or "comment:ID", login, content)
    pub reactions: Vec<(String, String, String, String)>,
    pub reviews: Vec<FakeReview>,
    pub review_comments: Vec<FakeReviewComment>,
    /// (repo, pr, reviewer)
    pub review_requests: Vec<(String, u64, String)>,
    /// (repo, sha, state, context, description)
    pub statuses: Vec<(String, String, String, String, String)>,
    /// Requests refused because the real API would not take them.
    pub violations: Vec<String>,
    /// `METHOD template` of every request that got through.
    pub calls: Vec<String>,
    /// Answers to give the next requests instead of serving them:
    /// (status, Retry-After seconds).
    pub faults: std::collections::VecDeque<(u16, Option<u64>)>,
    next_id: u64,
}

#[derive(Debug, Clone)]
pub struct FakeIssue {
    pub repo: String,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub user: String,
    pub open: bool,
    pub labels: Vec<String>,
    /// Pull requests are issues too, as in Gitea.
    pub pull: Option<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct FakeComment {
    pub repo: String,
    pub issue: u64,
    pub id: u64,
    pub user: String,
    pub body: String,
}

#[derive(Debug, Clone)]
pub struct FakeReview {
    pub repo: String,
    pub pr: u64,
    pub id: u64,
    pub user: String,
    pub state: String,
    pub body: String,
}

#[derive(Debug, Clone)]
pub struct FakeReviewComment {
    pub review_id: u64,
    pub id: u64,
    pub user: String,
    pub path: String,
    pub position: u64,
    pub body: String,
}

impl GiteaState {
    pub fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn next_number(&self, repo: &str) -> u64 {
        self.issues.iter().filter(|i| i.repo == repo).count() as u64 + 1
    }

    pub fn add_issue(&mut self, repo: &str, user: &str, title: &str, body: &str) -> u64 {
        let number = self.next_number(repo);
        self.issues.push(FakeIssue {
            repo: repo.into(),
            number,
            title: title.into(),
            body: body.into(),
            user: user.into(),
            open: true,
            labels: vec![],
            pull: None,
        });
        number
    }

    pub fn add_comment(&mut self, repo: &str, issue: u64, user: &str, body: &str) -> u64 {
        let id = self.id();
        self.comments.push(FakeComment {
            repo: repo.into(),
            issue,
            id,
            user: user.into(),
            body: body.into(),
        });
        id
    }

    pub fn add_review(
        &mut self,
        repo: &str,
        pr: u64,
        user: &str,
        state: &str,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> u64 {
        let id = self.id();
        self.reviews.push(FakeReview {
            repo: repo.into(),
            pr,
            id,
            user: user.into(),
            state: state.into(),
            body: body.into(),
        });
        for (path, position, text) in comments {
            let cid = self.id();
            self.review_comments.push(FakeReviewComment {
                review_id: id,
                id: cid,
                user: user.into(),
                path: (*path).into(),
                position: *position,
                body: (*text).into(),
            });
        }
        id
    }
}

pub struct FakeGitea {
    /// `http://127.0.0.1:<port>`: what `gitea.base_url` is set to.
    pub base_url: String,
    pub state: Arc<Mutex<GiteaState>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for FakeGitea {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

struct Shared {
    spec: ApiSpec,
    state: Arc<Mutex<GiteaState>>,
}

impl FakeGitea {
    pub async fn start() -> anyhow::Result<FakeGitea> {
        let spec = ApiSpec::load(
            &crate::testdata::root().join("gitea/gitea-swagger-v1.22.json"),
            "/api/v1",
        )?;
        let state = Arc::new(Mutex::new(GiteaState::default()));
        let shared = Arc::new(Shared {
            spec,
            state: state.clone(),
        });
        let app = Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let shared = shared.clone();
                async move { handle(&shared, method, uri, headers, body) }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(FakeGitea {
            base_url,
            state,
            shutdown: Some(tx),
        })
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut GiteaState) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    pub fn violations(&self) -> Vec<String> {
        self.with(|s| s.violations.clone())
    }
}

fn handle(shared: &Shared, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let mut state = shared.state.lock().unwrap();
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("token "));
    let Some(user) = token.and_then(|t| state.tokens.get(t)).cloned() else {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "token is required"})),
        )
            .into_response();
    };
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
    let matched = match shared
        .spec
        .check(method.as_str(), uri.path(), uri.query(), body.as_ref())
    {
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
        let mut response = (
            StatusCode::from_u16(status).unwrap(),
            Json(json!({"message": "injected fault"})),
        )
            .into_response();
        if let Some(after) = retry_after {
            response.headers_mut().insert("retry-after", after.into());
        }
        return response;
    }
    // The template's `{name}`s, read from the request's path.
    let actual = uri
        .path()
        .trim_start_matches("/api/v1")
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
                a.to_owned(),
            ))
        })
        .collect();
    let repo = format!(
        "{}/{}",
        args.get("owner").cloned().unwrap_or_default(),
        args.get("repo").cloned().unwrap_or_default()
    );
    let request = Request {
        repo: &repo,
        user: &user,
        body: &body.unwrap_or(Value::Null),
        args: &args,
        query: uri.query(),
    };
    let answer = route(&mut state, &matched.method, &matched.template, &request);
    match answer {
        Ok((status, value)) => (status, Json(value)).into_response(),
        Err((status, message)) => (status, Json(json!({"message": message}))).into_response(),
    }
}

type Answer = Result<(StatusCode, Value), (StatusCode, String)>;

struct Request<'a> {
    repo: &'a str,
    user: &'a str,
    body: &'a Value,
    args: &'a HashMap<String, String>,
    query: Option<&'a str>,
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
}

fn route(s: &mut GiteaState, method: &str, template: &str, r: &Request<'_>) -> Answer {
    let (repo, user, body, query) = (r.repo, r.user, r.body, r.query);
    let not_found = || (StatusCode::NOT_FOUND, "not found".to_owned());
    let t = template
        .strip_prefix("/repos/{owner}/{repo}")
        .unwrap_or(template);
    match (method, t) {
        ("GET", "/issues/{index}") => {
            let issue = s
                .issues
                .iter()
                .find(|i| i.repo == repo && i.number == r.num("index"))
                .ok_or_else(not_found)?;
            Ok((StatusCode::OK, issue_json(issue)))
        }
        ("GET", "/issues/{index}/comments") => {
            let list: Vec<Value> = s
                .comments
                .iter()
                .filter(|c| c.repo == repo && c.issue == r.num("index"))
                .map(comment_json)
                .collect();
            Ok((StatusCode::OK, Value::Array(list)))
        }
        ("POST", "/issues/{index}/comments") => {
            if !s
                .issues
                .iter()
                .any(|i| i.repo == repo && i.number == r.num("index"))
            {
                return Err(not_found());
            }
            let id = s.add_comment(
                repo,
                r.num("index"),
                user,
                body["body"].as_str().unwrap_or_default(),
            );
            let c = s.comments.iter().find(|c| c.id == id).unwrap();
            Ok((StatusCode::CREATED, comment_json(c)))
        }
        ("PATCH", "/issues/comments/{id}") => {
            let c = s
                .comments
                .iter_mut()
                .find(|c| c.repo == repo && c.id == r.num("id"))
                .ok_or_else(not_found)?;
            if c.user != user {
                return Err((StatusCode::FORBIDDEN, "not your comment".into()));
            }
            c.body = body["body"].as_str().unwrap_or_default().into();
            Ok((StatusCode::OK, comment_json(c)))
        }
        ("POST", "/issues/{index}/reactions") | ("POST", "/issues/comments/{id}/reactions") => {
            let target = if t.contains("comments") {
                format!("comment:{}", r.num("id"))
            } else {
                format!("issue:{}", r.num("index"))
            };
            let content = body["content"].as_str().unwrap_or_default().to_owned();
            let known = [
                "+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes",
            ];
            if !known.contains(&content.as_str()) {
                return Err((
                    StatusCode::FORBIDDEN,
                    format!("'{content}' is not an allowed reaction"),
                ));
            }
            s.reactions
                .push((repo.into(), target, user.into(), content.clone()));
            Ok((
                StatusCode::CREATED,
                json!({"user": {"login": user}, "content": content}),
            ))
        }
        ("GET", "/collaborators/{collaborator}/permission") => {
            let login = r.arg("collaborator");
            match s.permissions.get(&(repo.to_owned(), login.clone())) {
                Some(p) => Ok((
                    StatusCode::OK,
                    json!({"permission": p, "role_name": p, "user": {"login": login}}),
                )),
                None => Err((
                    StatusCode::FORBIDDEN,
                    format!("{login} is not a collaborator"),
                )),
            }
        }
        ("GET", "/pulls") => {
            let want_open = query.unwrap_or_default().contains("state=open");
            let list: Vec<Value> = s
                .issues
                .iter()
                .filter(|i| i.repo == repo && i.pull.is_some() && (!want_open || i.open))
                .map(pull_json)
                .collect();
            Ok((StatusCode::OK, Value::Array(list)))
        }
        ("POST", "/pulls") => {
            let head = body["head"].as_str().unwrap_or_default().to_owned();
            let base = body["base"].as_str().unwrap_or_default().to_owned();
            if s.issues
                .iter()
                .any(|i| i.repo == repo && i.open && i.pull.as_ref().is_some_and(|p| p.0 == head))
            {
                return Err((
                    StatusCode::CONFLICT,
                    "pull request already exists for these targets".into(),
                ));
            }
            let number = s.next_number(repo);
            s.issues.push(FakeIssue {
                repo: repo.into(),
                number,
                title: body["title"].as_str().unwrap_or_default().into(),
                body: body["body"].as_str().unwrap_or_default().into(),
                user: user.into(),
                open: true,
                labels: vec![],
                pull: Some((head, base)),
            });
            Ok((StatusCode::CREATED, pull_json(s.issues.last().unwrap())))
        }
        ("PATCH", "/pulls/{index}") => {
            let pr = s
                .issues
                .iter_mut()
                .find(|i| i.repo == repo && i.number == r.num("index") && i.pull.is_some())
                .ok_or_else(not_found)?;
            if let Some(title) = body["title"].as_str() {
                pr.title = title.into();
            }
            if let Some(text) = body["body"].as_str() {
                pr.body = text.into();
            }
            Ok((StatusCode::CREATED, pull_json(pr)))
        }
        ("POST", "/pulls/{index}/requested_reviewers") => {
            for reviewer in body["reviewers"].as_array().into_iter().flatten() {
                s.review_requests.push((
                    repo.into(),
                    r.num("index"),
                    reviewer.as_str().unwrap_or_default().into(),
                ));
            }
            Ok((StatusCode::CREATED, json!([])))
        }
        ("GET", "/pulls/{index}/reviews") => {
            let list: Vec<Value> = s
                .reviews
                .iter()
                .filter(|review| review.repo == repo && review.pr == r.num("index"))
                .map(|review| json!({"id": review.id, "user": {"login": review.user}, "state": review.state, "body": review.body}))
                .collect();
            Ok((StatusCode::OK, Value::Array(list)))
        }
        ("GET", "/pulls/{index}/reviews/{id}/comments") => {
            let list: Vec<Value> = s
                .review_comments
                .iter()
                .filter(|c| c.review_id == r.num("id"))
                .map(|c| json!({"id": c.id, "pull_request_review_id": c.review_id, "user": {"login": c.user},
                               "path": c.path, "position": c.position, "body": c.body}))
                .collect();
            Ok((StatusCode::OK, Value::Array(list)))
        }
        ("POST", "/pulls/{index}/reviews") => {
            let comments: Vec<(String, u64, String)> = body["comments"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    (
                        c["path"].as_str().unwrap_or_default().to_owned(),
                        c["new_position"].as_u64().unwrap_or_default(),
                        c["body"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect();
            let borrowed: Vec<(&str, u64, &str)> = comments
                .iter()
                .map(|(p, l, b)| (p.as_str(), *l, b.as_str()))
                .collect();
            let state = match body["event"].as_str().unwrap_or("COMMENT") {
                "APPROVED" => "APPROVED",
                "REQUEST_CHANGES" => "REQUEST_CHANGES",
                _ => "COMMENT",
            };
            let id = s.add_review(
                repo,
                r.num("index"),
                user,
                state,
                body["body"].as_str().unwrap_or_default(),
                &borrowed,
            );
            Ok((
                StatusCode::OK,
                json!({"id": id, "user": {"login": user}, "state": state}),
            ))
        }
        ("POST", "/statuses/{sha}") => {
            let sha = r.arg("sha");
            s.statuses.push((
                repo.into(),
                sha.clone(),
                body["state"].as_str().unwrap_or_default().into(),
                body["context"].as_str().unwrap_or_default().into(),
                body["description"].as_str().unwrap_or_default().into(),
            ));
            Ok((
                StatusCode::CREATED,
                json!({"state": body["state"], "context": body["context"]}),
            ))
        }
        _ => Err((
            StatusCode::NOT_IMPLEMENTED,
            format!("the fake Gitea does not do {method} {template} yet"),
        )),
    }
}

fn issue_json(i: &FakeIssue) -> Value {
    json!({
        "id": i.number, "number": i.number, "title": i.title, "body": i.body,
        "user": {"login": i.user}, "state": if i.open { "open" } else { "closed" },
        "labels": i.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
        "pull_request": i.pull.as_ref().map(|_| json!({"merged": false})),
    })
}

fn comment_json(c: &FakeComment) -> Value {
    json!({"id": c.id, "body": c.body, "user": {"login": c.user}})
}

fn pull_json(i: &FakeIssue) -> Value {
    let (head, base) = i.pull.clone().unwrap_or_default();
    json!({
        "number": i.number, "title": i.title, "body": i.body, "state": if i.open { "open" } else { "closed" },
        "html_url": format!("http://gitea.invalid/{}/pulls/{}", i.repo, i.number),
        "head": {"ref": head}, "base": {"ref": base}, "user": {"login": i.user},
    })
}
