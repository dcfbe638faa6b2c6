//! GitHub (and GitHub Enterprise, at its own API URL) through octocrab:
//! with a personal token, or as a GitHub App. As an App, each repository's
//! installation is looked up once, and its installation token is cached
//! until shortly before it expires; when many jobs need a new one at the
//! same moment, one request fetches it and the others wait for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use http::Method;
use octocrab::Octocrab;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{json, Value};

use super::wire::{comment, login, pull, root_cause, text};
use super::{
    classify, Comment, CommitStatus, ForgeApi, ForgeError, Issue, NewPullRequest, Permission,
    PullRequest, ReactionTarget, RepoRef, Review, ReviewComment, ReviewState, StatusState,
};

/// How Forgehand signs in to GitHub.
pub enum GitHubAuth {
    Token(SecretString),
    App {
        app_id: u64,
        /// The App's private key, PEM.
        private_key: SecretString,
    },
}

/// A token is renewed when less than this is left of it.
const RENEW_BEFORE: Duration = Duration::from_secs(5 * 60);

struct Installation {
    client: Octocrab,
    token: SecretString,
    expires: SystemTime,
}

pub struct GitHubClient {
    api_url: String,
    mode: Mode,
}

enum Mode {
    Token(Octocrab, SecretString),
    App {
        app: Octocrab,
        /// `owner/name` → installation id.
        installations: tokio::sync::Mutex<HashMap<String, u64>>,
        /// installation id → its client; the lock is held while a token is
        /// fetched, so concurrent jobs wait for one request.
        tokens: tokio::sync::Mutex<HashMap<u64, Arc<Installation>>>,
    },
}

impl GitHubClient {
    /// `api_url`: `https://api.github.com`, or an Enterprise server's
    /// `https://host/api/v3`.
    pub fn new(api_url: &str, auth: GitHubAuth) -> Result<Self, ForgeError> {
        let api_url = api_url.trim_end_matches('/').to_owned();
        let builder = || {
            Octocrab::builder()
                .base_uri(api_url.as_str())
                .map_err(|e| ForgeError::Other(format!("github.api_url: {e}")))
        };
        let mode = match auth {
            GitHubAuth::Token(token) => Mode::Token(
                builder()?
                    .personal_token(token.expose_secret().to_owned())
                    .build()
                    .map_err(other)?,
                token,
            ),
            GitHubAuth::App {
                app_id,
                private_key,
            } => {
                let key =
                    jsonwebtoken::EncodingKey::from_rsa_pem(private_key.expose_secret().as_bytes())
                        .map_err(|e| {
                            ForgeError::Other(format!(
                                "github.private_key_path: not an RSA private key in PEM ({e})"
                            ))
                        })?;
                Mode::App {
                    app: builder()?.app(app_id.into(), key).build().map_err(other)?,
                    installations: Default::default(),
                    tokens: Default::default(),
                }
            }
        };
        Ok(GitHubClient { api_url, mode })
    }

    /// The client that acts on `repo`.
    async fn client(&self, repo: &RepoRef) -> Result<Octocrab, ForgeError> {
        Ok(self.installation(repo).await?.0)
    }

    /// The client for `repo` and the token it uses.
    async fn installation(&self, repo: &RepoRef) -> Result<(Octocrab, SecretString), ForgeError> {
        let (app, installations, tokens) = match &self.mode {
            Mode::Token(client, token) => return Ok((client.clone(), token.clone())),
            Mode::App {
                app,
                installations,
                tokens,
            } => (app, installations, tokens),
        };
        let key = repo.full_name();
        let id = {
            let mut known = installations.lock().await;
            match known.get(&key) {
                Some(id) => *id,
                None => {
                    let v = send(
                        app,
                        Method::GET,
                        &format!("{}/installation", repo_path(repo)),
                        None,
                    )
                    .await?;
                    let id = v["id"]
                        .as_u64()
                        .ok_or_else(|| ForgeError::Other("the installation has no id".into()))?;
                    known.insert(key, id);
                    id
                }
            }
        };
        let mut cache = tokens.lock().await;
        if let Some(installation) = cache.get(&id) {
            let left = installation
                .expires
                .duration_since(SystemTime::now())
                .unwrap_or_default();
            if left > RENEW_BEFORE {
                return Ok((installation.client.clone(), installation.token.clone()));
            }
        }
        let v = send(
            app,
            Method::POST,
            &format!("/app/installations/{id}/access_tokens"),
            Some(json!({})),
        )
        .await?;
        let token = v["token"]
            .as_str()
            .ok_or_else(|| ForgeError::Other("GitHub sent no installation token".into()))?;
        let expires = v["expires_at"]
            .as_str()
            .and_then(time_from_rfc3339)
            .unwrap_or_else(|| SystemTime::now() + Duration::from_secs(3600));
        let client = Octocrab::builder()
            .base_uri(self.api_url.as_str())
            .map_err(other)?
            .personal_token(token.to_owned())
            .build()
            .map_err(other)?;
        let token = SecretString::from(token.to_owned());
        cache.insert(
            id,
            Arc::new(Installation {
                client: client.clone(),
                token: token.clone(),
                expires,
            }),
        );
        Ok((client, token))
    }

    async fn call(
        &self,
        repo: &RepoRef,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ForgeError> {
        let client = self.client(repo).await?;
        send(&client, method, path, body).await
    }
}

fn other(e: impl std::fmt::Display) -> ForgeError {
    ForgeError::Other(e.to_string())
}

/// `2016-07-11T22:14:10Z` as a time.
fn time_from_rfc3339(text: &str) -> Option<SystemTime> {
    let parsed =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    let secs = u64::try_from(parsed.unix_timestamp()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

/// One request, its answer classified: rate limits are told apart from
/// refusals by GitHub's headers.
async fn send(
    client: &Octocrab,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, ForgeError> {
    let response = match method {
        Method::GET => client._get(path).await,
        Method::POST => client._post(path, body.as_ref()).await,
        Method::PATCH => client._patch(path, body.as_ref()).await,
        Method::PUT => client._put(path, body.as_ref()).await,
        Method::DELETE => client._delete(path, body.as_ref()).await,
        other => return Err(ForgeError::Other(format!("unsupported method {other}"))),
    }
    .map_err(|e| ForgeError::Other(format!("{method} {path}: {}", root_cause(&e))))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = client
        .body_to_string(response)
        .await
        .map_err(|e| ForgeError::Other(format!("{method} {path}: {}", root_cause(&e))))?;
    if !(200..300).contains(&status) {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let retry_after = header("retry-after")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
            .or_else(|| {
                // The primary rate limit: nothing left until the reset.
                (header("x-ratelimit-remaining").as_deref() == Some("0"))
                    .then(|| header("x-ratelimit-reset"))
                    .flatten()
                    .and_then(|reset| reset.parse::<u64>().ok())
                    .map(|reset| {
                        let now = SystemTime::now()
                            .duration_since(SystemTime::UNIX_EPOCH)
                            .unwrap_or_default()
                            .as_secs();
                        Duration::from_secs(reset.saturating_sub(now))
                    })
            });
        let detail = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| text.chars().take(200).collect());
        return Err(classify(
            status,
            retry_after,
            format!("{method} {path}: {detail}"),
        ));
    }
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&text)
        .map_err(|e| ForgeError::Other(format!("{method} {path}: the answer is not JSON: {e}")))
}

fn repo_path(repo: &RepoRef) -> String {
    format!("/repos/{}/{}", repo.owner, repo.name)
}

#[async_trait]
impl ForgeApi for GitHubClient {
    async fn issue(&self, repo: &RepoRef, number: u64) -> Result<Issue, ForgeError> {
        let v = self
            .call(
                repo,
                Method::GET,
                &format!("{}/issues/{number}", repo_path(repo)),
                None,
            )
            .await?;
        Ok(Issue {
            number,
            title: text(&v["title"]),
            body: text(&v["body"]),
            author: login(&v["user"]),
            open: v["state"] == "open",
            labels: v["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| text(&l["name"]))
                .collect(),
        })
    }

    async fn comments(&self, repo: &RepoRef, number: u64) -> Result<Vec<Comment>, ForgeError> {
        let v = self
            .call(
                repo,
                Method::GET,
                &format!("{}/issues/{number}/comments?per_page=100", repo_path(repo)),
                None,
            )
            .await?;
        Ok(v.as_array().into_iter().flatten().map(comment).collect())
    }

    async fn permission(&self, repo: &RepoRef, user: &str) -> Result<Permission, ForgeError> {
        let path = format!("{}/collaborators/{user}/permission", repo_path(repo));
        let v = match self.call(repo, Method::GET, &path, None).await {
            Ok(v) => v,
            Err(ForgeError::NotFound(_)) => return Ok(Permission::None),
            Err(e) => return Err(e),
        };
        Ok(match v["permission"].as_str().unwrap_or_default() {
            "admin" => Permission::Admin,
            "write" | "maintain" => Permission::Write,
            "read" | "triage" => Permission::Read,
            _ => Permission::None,
        })
    }

    async fn react_eyes(&self, repo: &RepoRef, target: ReactionTarget) -> Result<(), ForgeError> {
        let path = match target {
            ReactionTarget::Issue(n) => format!("{}/issues/{n}/reactions", repo_path(repo)),
            ReactionTarget::Comment(id) => {
                format!("{}/issues/comments/{id}/reactions", repo_path(repo))
            }
        };
        self.call(repo, Method::POST, &path, Some(json!({"content": "eyes"})))
            .await
            .map(drop)
    }

    async fn create_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<Comment, ForgeError> {
        let v = self
            .call(
                repo,
                Method::POST,
                &format!("{}/issues/{number}/comments", repo_path(repo)),
                Some(json!({"body": body})),
            )
            .await?;
        Ok(comment(&v))
    }

    async fn edit_comment(&self, repo: &RepoRef, id: u64, body: &str) -> Result<(), ForgeError> {
        self.call(
            repo,
            Method::PATCH,
            &format!("{}/issues/comments/{id}", repo_path(repo)),
            Some(json!({"body": body})),
        )
        .await
        .map(drop)
    }

    async fn pull_request(&self, repo: &RepoRef, number: u64) -> Result<PullRequest, ForgeError> {
        let path = format!("{}/pulls/{number}", repo_path(repo));
        Ok(pull(&self.call(repo, Method::GET, &path, None).await?))
    }

    async fn open_pull_request(
        &self,
        repo: &RepoRef,
        pr: &NewPullRequest<'_>,
    ) -> Result<PullRequest, ForgeError> {
        let base = repo_path(repo);
        let open = self
            .call(
                repo,
                Method::GET,
                &format!("{base}/pulls?state=open&head={}:{}", repo.owner, pr.head),
                None,
            )
            .await?;
        let existing = open
            .as_array()
            .into_iter()
            .flatten()
            .map(pull)
            .find(|p| p.head == pr.head);
        let v = match existing {
            Some(found) => {
                self.call(
                    repo,
                    Method::PATCH,
                    &format!("{base}/pulls/{}", found.number),
                    Some(json!({"title": pr.title, "body": pr.body})),
                )
                .await?
            }
            None => {
                self.call(
                    repo,
                    Method::POST,
                    &format!("{base}/pulls"),
                    Some(json!({"title": pr.title, "body": pr.body, "head": pr.head, "base": pr.base})),
                )
                .await?
            }
        };
        Ok(pull(&v))
    }

    async fn request_review(
        &self,
        repo: &RepoRef,
        number: u64,
        reviewers: &[&str],
    ) -> Result<(), ForgeError> {
        self.call(
            repo,
            Method::POST,
            &format!("{}/pulls/{number}/requested_reviewers", repo_path(repo)),
            Some(json!({"reviewers": reviewers})),
        )
        .await
        .map(drop)
    }

    async fn reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, ForgeError> {
        let v = self
            .call(
                repo,
                Method::GET,
                &format!("{}/pulls/{number}/reviews?per_page=100", repo_path(repo)),
                None,
            )
            .await?;
        Ok(v.as_array()
            .into_iter()
            .flatten()
            .map(|r| Review {
                id: r["id"].as_u64().unwrap_or_default(),
                author: login(&r["user"]),
                state: match r["state"].as_str().unwrap_or_default() {
                    "APPROVED" => ReviewState::Approved,
                    "CHANGES_REQUESTED" => ReviewState::ChangesRequested,
                    "COMMENTED" => ReviewState::Commented,
                    _ => ReviewState::Other,
                },
                body: text(&r["body"]),
            })
            .collect())
    }

    async fn review_comments(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        let v = self
            .call(
                repo,
                Method::GET,
                &format!("{}/pulls/{number}/comments?per_page=100", repo_path(repo)),
                None,
            )
            .await?;
        Ok(v.as_array()
            .into_iter()
            .flatten()
            .map(|c| ReviewComment {
                id: c["id"].as_u64().unwrap_or_default(),
                review_id: c["pull_request_review_id"].as_u64(),
                author: login(&c["user"]),
                path: text(&c["path"]),
                line: c["line"].as_u64(),
                body: text(&c["body"]),
                commit_id: c["commit_id"].as_str().map(str::to_owned),
            })
            .collect())
    }

    async fn reply_to_review_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        comment: &ReviewComment,
        body: &str,
    ) -> Result<(), ForgeError> {
        self.call(
            repo,
            Method::POST,
            &format!("{}/pulls/{number}/comments", repo_path(repo)),
            Some(json!({
                "body": body,
                "in_reply_to": comment.id,
                "commit_id": comment.commit_id.clone().unwrap_or_default(),
                "path": comment.path,
            })),
        )
        .await
        .map(drop)
    }

    async fn git_credentials(&self, repo: &RepoRef) -> Result<(String, SecretString), ForgeError> {
        let (_, token) = self.installation(repo).await?;
        Ok(("x-access-token".into(), token))
    }

    async fn set_status(
        &self,
        repo: &RepoRef,
        sha: &str,
        status: &CommitStatus<'_>,
    ) -> Result<(), ForgeError> {
        // An App reports with a check run, which shows in the pull
        // request's checks with its own name and summary; commit statuses
        // are what a personal token can set.
        let (path, body) = match &self.mode {
            Mode::App { .. } => (
                format!("{}/check-runs", repo_path(repo)),
                check_run(sha, status),
            ),
            Mode::Token(..) => {
                let mut body = json!({
                    "state": status.state.as_str(),
                    "context": status.context,
                    "description": status.description,
                });
                if let Some(url) = status.target_url {
                    body["target_url"] = json!(url);
                }
                (format!("{}/statuses/{sha}", repo_path(repo)), body)
            }
        };
        self.call(repo, Method::POST, &path, Some(body))
            .await
            .map(drop)
    }
}

/// A commit status as a GitHub check run (`POST /repos/{o}/{r}/check-runs`).
fn check_run(sha: &str, status: &CommitStatus<'_>) -> serde_json::Value {
    let mut body = json!({
        "name": status.context,
        "head_sha": sha,
        "output": {"title": status.description, "summary": status.description},
    });
    match status.state {
        StatusState::Pending => body["status"] = json!("in_progress"),
        StatusState::Success | StatusState::Failure | StatusState::Error => {
            body["status"] = json!("completed");
            body["conclusion"] = json!(match status.state {
                StatusState::Success => "success",
                _ => "failure",
            });
        }
    }
    if let Some(url) = status.target_url {
        body["details_url"] = json!(url);
    }
    body
}
