//! GitHub (and GitHub Enterprise, at its own API URL) through octocrab:
//! with a personal token, or as a GitHub App. As an App, each repository's
//! installation is looked up once, and its installation token is cached
//! until shortly before it expires; when many jobs need a new one at the
//! same moment, one request fetches it and the others wait for it.

use forgehand_types::CommitSha;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use http::Method;
use http_body_util::BodyExt;
use octocrab::Octocrab;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use url::Url;

use super::pager::{next_link, Bound, List};
use super::wire::{
    self, call_name, error_detail, root_cause, Answer, CommentBody, EditPull, NewPull, Reaction,
    Reviewers, Status, MAX_ANSWER_BYTES,
};
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
    /// The same, parsed: the pages a `Link` header names must be under it.
    api: Url,
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
        let api =
            Url::parse(&api_url).map_err(|e| ForgeError::Other(format!("github.api_url: {e}")))?;
        Ok(GitHubClient { api_url, api, mode })
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
                    let path = format!("{}/installation", repo_path(repo));
                    let installation: InstallationAnswer = get(app, &path).await?.json()?;
                    known.insert(key, installation.id);
                    installation.id
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
        let answer = send(
            app,
            Method::POST,
            &format!("/app/installations/{id}/access_tokens"),
            Some(&NoBody {}),
        )
        .await?;
        let granted: AccessToken = answer.json()?;
        let expires = time_from_rfc3339(&granted.expires_at).ok_or_else(|| {
            ForgeError::Malformed(format!(
                "{}: expires_at is not a time: {:?}",
                answer.call, granted.expires_at
            ))
        })?;
        let token = granted.token;
        let client = Octocrab::builder()
            .base_uri(self.api_url.as_str())
            .map_err(other)?
            .personal_token(token.expose_secret().to_owned())
            .build()
            .map_err(other)?;
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

    async fn call<B: Serialize + ?Sized>(
        &self,
        repo: &RepoRef,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Answer, ForgeError> {
        let client = self.client(repo).await?;
        send(&client, method, path, body).await
    }

    /// `GET path` on `repo`'s behalf, read as a `T`.
    async fn get<T: serde::de::DeserializeOwned>(
        &self,
        repo: &RepoRef,
        path: &str,
    ) -> Result<T, ForgeError> {
        self.call(repo, Method::GET, path, None::<&NoBody>)
            .await?
            .json()
    }

    /// Every item of the list at `first`, following each answer's
    /// `Link: <…>; rel="next"` up to [`super::MAX_PAGES`] pages.
    async fn list<T: serde::de::DeserializeOwned>(
        &self,
        repo: &RepoRef,
        mut bound: Bound,
        first: String,
    ) -> Result<Vec<T>, ForgeError> {
        let client = self.client(repo).await?;
        let mut items = Vec::new();
        let mut next = Some(first);
        while let Some(path) = next.take() {
            if !bound.another(items.len()) {
                break;
            }
            let answer = get(&client, &path).await?;
            let page: Vec<T> = answer.json()?;
            next = match answer.header("link") {
                Some(link) => next_link(&answer.call, link, &self.api)?,
                None => None,
            };
            items.extend(page);
        }
        Ok(items)
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

/// A request without a body (`{}` where GitHub wants an object).
#[derive(Serialize)]
struct NoBody {}

#[derive(Deserialize)]
struct InstallationAnswer {
    id: u64,
}

#[derive(Deserialize)]
struct AccessToken {
    token: SecretString,
    expires_at: String,
}

/// `permission` of `GET /repos/{o}/{r}/collaborators/{u}/permission`:
/// GitHub's legacy names, in which `maintain` reads `write` and `triage`
/// reads `read`; they are matched all the same.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum GitHubPermission {
    Admin,
    Maintain,
    Write,
    Triage,
    Read,
    None,
    /// A name this version does not know: no permission.
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct PermissionAnswer {
    permission: GitHubPermission,
}

#[derive(Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum GitHubReviewState {
    Approved,
    ChangesRequested,
    Commented,
    Dismissed,
    Pending,
    #[serde(other)]
    Unknown,
}

impl From<GitHubReviewState> for Option<ReviewState> {
    fn from(state: GitHubReviewState) -> Self {
        match state {
            GitHubReviewState::Approved => Some(ReviewState::Approved),
            GitHubReviewState::ChangesRequested => Some(ReviewState::ChangesRequested),
            GitHubReviewState::Commented => Some(ReviewState::Commented),
            GitHubReviewState::Dismissed
            | GitHubReviewState::Pending
            | GitHubReviewState::Unknown => None,
        }
    }
}

/// `POST /repos/{o}/{r}/pulls/{n}/comments` as a reply in a thread.
#[derive(Serialize)]
struct Reply<'a> {
    body: &'a str,
    in_reply_to: u64,
    commit_id: &'a str,
    path: &'a str,
}

/// `POST /repos/{o}/{r}/check-runs`.
#[derive(Serialize)]
struct CheckRun<'a> {
    name: &'a str,
    head_sha: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    conclusion: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    details_url: Option<&'a str>,
    output: CheckOutput<'a>,
}

#[derive(Serialize)]
struct CheckOutput<'a> {
    title: &'a str,
    summary: &'a str,
}

async fn get(client: &Octocrab, path: &str) -> Result<Answer, ForgeError> {
    send(client, Method::GET, path, None::<&NoBody>).await
}

/// One request, its answer classified: rate limits are told apart from
/// refusals by GitHub's headers. At most [`MAX_ANSWER_BYTES`] of the
/// answer are read.
async fn send<B: Serialize + ?Sized>(
    client: &Octocrab,
    method: Method,
    path: &str,
    body: Option<&B>,
) -> Result<Answer, ForgeError> {
    let call = call_name(&method, path);
    let response = match method {
        Method::GET => client._get(path).await,
        Method::POST => client._post(path, body).await,
        Method::PATCH => client._patch(path, body).await,
        Method::PUT => client._put(path, body).await,
        Method::DELETE => client._delete(path, body).await,
        other => return Err(ForgeError::Other(format!("unsupported method {other}"))),
    }
    .map_err(|e| ForgeError::Other(format!("{call}: {}", root_cause(&e))))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                ForgeError::Malformed(format!(
                    "{call}: the answer is larger than {} MiB",
                    MAX_ANSWER_BYTES >> 20
                ))
            } else {
                ForgeError::Other(format!("{call}: {}", root_cause(&*e)))
            }
        })?
        .to_bytes();
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| ForgeError::Malformed(format!("{call}: the answer is not UTF-8")))?;
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
        return Err(classify(
            status,
            retry_after,
            format!("{call}: {}", error_detail(&text)),
        ));
    }
    Ok(Answer {
        call,
        headers,
        text,
    })
}

fn repo_path(repo: &RepoRef) -> String {
    format!("/repos/{}/{}", repo.owner, repo.name)
}

/// A query string, each value percent-encoded.
fn query(pairs: &[(&str, &str)]) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        query.append_pair(name, value);
    }
    query.finish()
}

#[async_trait]
impl ForgeApi for GitHubClient {
    async fn issue(&self, repo: &RepoRef, number: u64) -> Result<Issue, ForgeError> {
        let path = format!("{}/issues/{number}", repo_path(repo));
        Ok(self.get::<wire::Issue>(repo, &path).await?.into())
    }

    async fn comments(&self, repo: &RepoRef, number: u64) -> Result<Vec<Comment>, ForgeError> {
        let first = format!("{}/issues/{number}/comments?per_page=100", repo_path(repo));
        let bound = Bound::new(List::IssueComments, repo, Some(number));
        let comments: Vec<wire::Comment> = self.list(repo, bound, first).await?;
        Ok(comments.into_iter().map(Into::into).collect())
    }

    async fn permission(&self, repo: &RepoRef, user: &str) -> Result<Permission, ForgeError> {
        let path = format!("{}/collaborators/{user}/permission", repo_path(repo));
        let answer: PermissionAnswer = match self.get(repo, &path).await {
            Ok(answer) => answer,
            Err(ForgeError::NotFound(_)) => return Ok(Permission::None),
            Err(e) => return Err(e),
        };
        Ok(match answer.permission {
            GitHubPermission::Admin => Permission::Admin,
            GitHubPermission::Write | GitHubPermission::Maintain => Permission::Write,
            GitHubPermission::Read | GitHubPermission::Triage => Permission::Read,
            GitHubPermission::None | GitHubPermission::Unknown => Permission::None,
        })
    }

    async fn react_eyes(&self, repo: &RepoRef, target: ReactionTarget) -> Result<(), ForgeError> {
        let path = match target {
            ReactionTarget::Issue(n) => format!("{}/issues/{n}/reactions", repo_path(repo)),
            ReactionTarget::Comment(id) => {
                format!("{}/issues/comments/{id}/reactions", repo_path(repo))
            }
        };
        let eyes = Reaction { content: "eyes" };
        self.call(repo, Method::POST, &path, Some(&eyes))
            .await
            .map(drop)
    }

    async fn create_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<Comment, ForgeError> {
        let path = format!("{}/issues/{number}/comments", repo_path(repo));
        let answer = self
            .call(repo, Method::POST, &path, Some(&CommentBody { body }))
            .await?;
        Ok(answer.json::<wire::Comment>()?.into())
    }

    async fn edit_comment(&self, repo: &RepoRef, id: u64, body: &str) -> Result<(), ForgeError> {
        let path = format!("{}/issues/comments/{id}", repo_path(repo));
        self.call(repo, Method::PATCH, &path, Some(&CommentBody { body }))
            .await
            .map(drop)
    }

    async fn pull_request(&self, repo: &RepoRef, number: u64) -> Result<PullRequest, ForgeError> {
        let path = format!("{}/pulls/{number}", repo_path(repo));
        Ok(self.get::<wire::Pull>(repo, &path).await?.into())
    }

    async fn open_pull_request(
        &self,
        repo: &RepoRef,
        pr: &NewPullRequest<'_>,
    ) -> Result<PullRequest, ForgeError> {
        let base = repo_path(repo);
        // `head=owner:branch` lists the open pull requests from branches
        // of the owner's repositories; only one from this repository's
        // own branch is the bot's.
        let head = format!("{}:{}", repo.owner, pr.head);
        let first = format!(
            "{base}/pulls?{}",
            query(&[("state", "open"), ("head", &head), ("per_page", "100")])
        );
        let bound = Bound::new(List::OpenPullRequests, repo, None);
        let open: Vec<wire::Pull> = self.list(repo, bound, first).await?;
        let existing = open
            .into_iter()
            .find(|p| p.head.name == pr.head && p.is_from(repo));
        let answer = match existing {
            Some(found) => {
                let edit = EditPull {
                    title: pr.title,
                    body: pr.body,
                };
                let path = format!("{base}/pulls/{}", found.number);
                self.call(repo, Method::PATCH, &path, Some(&edit)).await?
            }
            None => {
                let new = NewPull {
                    title: pr.title,
                    body: pr.body,
                    head: pr.head,
                    base: pr.base,
                    draft: pr.draft,
                };
                let made = self
                    .call(repo, Method::POST, &format!("{base}/pulls"), Some(&new))
                    .await;
                match made {
                    // An earlier try's pull request, whose answer was lost
                    // and which the list did not show yet: GitHub says it
                    // exists. Taken, not made twice.
                    Err(ForgeError::Invalid(message)) if message.contains("already exists") => {
                        let again = format!(
                            "{base}/pulls?{}",
                            query(&[("state", "open"), ("head", &head), ("per_page", "100")])
                        );
                        let bound = Bound::new(List::OpenPullRequests, repo, None);
                        let open: Vec<wire::Pull> = self.list(repo, bound, again).await?;
                        let found = open
                            .into_iter()
                            .find(|p| p.head.name == pr.head && p.is_from(repo))
                            .ok_or(ForgeError::Invalid(message))?;
                        let edit = EditPull {
                            title: pr.title,
                            body: pr.body,
                        };
                        let path = format!("{base}/pulls/{}", found.number);
                        self.call(repo, Method::PATCH, &path, Some(&edit)).await?
                    }
                    other => other?,
                }
            }
        };
        Ok(answer.json::<wire::Pull>()?.into())
    }

    async fn request_review(
        &self,
        repo: &RepoRef,
        number: u64,
        reviewers: &[&str],
    ) -> Result<(), ForgeError> {
        let path = format!("{}/pulls/{number}/requested_reviewers", repo_path(repo));
        self.call(repo, Method::POST, &path, Some(&Reviewers { reviewers }))
            .await
            .map(drop)
    }

    async fn reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, ForgeError> {
        let first = format!("{}/pulls/{number}/reviews?per_page=100", repo_path(repo));
        let bound = Bound::new(List::Reviews, repo, Some(number));
        let reviews: Vec<wire::Review<GitHubReviewState>> = self.list(repo, bound, first).await?;
        Ok(reviews
            .into_iter()
            .filter_map(wire::Review::into_api)
            .collect())
    }

    async fn review_comments(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        let first = format!("{}/pulls/{number}/comments?per_page=100", repo_path(repo));
        let bound = Bound::new(List::ReviewComments, repo, Some(number));
        let comments: Vec<wire::ReviewComment> = self.list(repo, bound, first).await?;
        Ok(comments
            .into_iter()
            .map(|c| {
                let line = c.line;
                c.into_api(line)
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
        let reply = Reply {
            body,
            in_reply_to: comment.id,
            commit_id: &comment.commit_id,
            path: &comment.path,
        };
        let path = format!("{}/pulls/{number}/comments", repo_path(repo));
        self.call(repo, Method::POST, &path, Some(&reply))
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
        sha: &CommitSha,
        status: &CommitStatus<'_>,
    ) -> Result<(), ForgeError> {
        // An App reports with a check run, which shows in the pull
        // request's checks with its own name and summary; commit statuses
        // are what a personal token can set.
        let answer = match &self.mode {
            Mode::App { .. } => {
                let path = format!("{}/check-runs", repo_path(repo));
                let run = check_run(sha.as_str(), status);
                self.call(repo, Method::POST, &path, Some(&run)).await
            }
            Mode::Token(..) => {
                let path = format!("{}/statuses/{sha}", repo_path(repo));
                self.call(repo, Method::POST, &path, Some(&Status::from(status)))
                    .await
            }
        };
        answer.map(drop)
    }
}

/// A commit status as a GitHub check run.
fn check_run<'a>(sha: &'a str, status: &'a CommitStatus<'a>) -> CheckRun<'a> {
    let (state, conclusion) = match status.state {
        StatusState::Pending => ("in_progress", None),
        StatusState::Success => ("completed", Some("success")),
        StatusState::Failure | StatusState::Error => ("completed", Some("failure")),
    };
    CheckRun {
        name: status.context,
        head_sha: sha,
        status: state,
        conclusion,
        details_url: status.target_url,
        output: CheckOutput {
            title: status.description,
            summary: status.description,
        },
    }
}
