//! Gitea and Forgejo over their REST API (`/api/v1`), with a token.
//! Answers are read leniently (field by field) because Gitea and Forgejo
//! versions differ in what else they send.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{json, Value};

use super::wire::{comment, login, pull, root_cause, text};
use super::{
    classify, Comment, CommitStatus, ForgeApi, ForgeError, Issue, NewPullRequest, Permission,
    PullRequest, ReactionTarget, RepoRef, Review, ReviewComment, ReviewState,
};

pub struct GiteaClient {
    api: String,
    token: SecretString,
    http: reqwest::Client,
}

impl GiteaClient {
    /// `base_url` is the server (`https://gitea.example.com`), not the API.
    pub fn new(base_url: &str, token: SecretString) -> Result<Self, ForgeError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("forgehand/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ForgeError::Other(e.to_string()))?;
        Ok(GiteaClient {
            api: format!("{}/api/v1", base_url.trim_end_matches('/')),
            token,
            http,
        })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ForgeError> {
        let url = format!("{}{path}", self.api);
        let mut request = self
            .http
            .request(method.clone(), &url)
            .header(
                "Authorization",
                format!("token {}", self.token.expose_secret()),
            )
            .header("Accept", "application/json");
        if let Some(body) = &body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| ForgeError::Other(format!("{method} {path}: {}", root_cause(&e))))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = response.text().await.unwrap_or_default();
        if !(200..300).contains(&status) {
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
        format!("/repos/{}/{}", seg(&repo.owner), seg(&repo.name))
    }
}

/// A path segment, percent-encoded.
fn seg(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

#[async_trait]
impl ForgeApi for GiteaClient {
    async fn issue(&self, repo: &RepoRef, number: u64) -> Result<Issue, ForgeError> {
        let v = self
            .send(
                Method::GET,
                &format!("{}/issues/{number}", Self::repo_path(repo)),
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
            .send(
                Method::GET,
                &format!("{}/issues/{number}/comments", Self::repo_path(repo)),
                None,
            )
            .await?;
        Ok(v.as_array().into_iter().flatten().map(comment).collect())
    }

    async fn permission(&self, repo: &RepoRef, user: &str) -> Result<Permission, ForgeError> {
        let path = format!(
            "{}/collaborators/{}/permission",
            Self::repo_path(repo),
            seg(user)
        );
        let v = match self.send(Method::GET, &path, None).await {
            Ok(v) => v,
            // Not a collaborator of a repository Gitea lets us see.
            Err(ForgeError::NotFound(_)) | Err(ForgeError::Forbidden(_)) => {
                return Ok(Permission::None)
            }
            Err(e) => return Err(e),
        };
        Ok(match v["permission"].as_str().unwrap_or_default() {
            "owner" | "admin" => Permission::Admin,
            "write" => Permission::Write,
            "read" => Permission::Read,
            _ => Permission::None,
        })
    }

    async fn react_eyes(&self, repo: &RepoRef, target: ReactionTarget) -> Result<(), ForgeError> {
        let path = match target {
            ReactionTarget::Issue(n) => format!("{}/issues/{n}/reactions", Self::repo_path(repo)),
            ReactionTarget::Comment(id) => {
                format!("{}/issues/comments/{id}/reactions", Self::repo_path(repo))
            }
        };
        self.send(Method::POST, &path, Some(json!({"content": "eyes"})))
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
            .send(
                Method::POST,
                &format!("{}/issues/{number}/comments", Self::repo_path(repo)),
                Some(json!({"body": body})),
            )
            .await?;
        Ok(comment(&v))
    }

    async fn edit_comment(&self, repo: &RepoRef, id: u64, body: &str) -> Result<(), ForgeError> {
        self.send(
            Method::PATCH,
            &format!("{}/issues/comments/{id}", Self::repo_path(repo)),
            Some(json!({"body": body})),
        )
        .await
        .map(drop)
    }

    async fn pull_request(&self, repo: &RepoRef, number: u64) -> Result<PullRequest, ForgeError> {
        let path = format!("{}/pulls/{number}", Self::repo_path(repo));
        Ok(pull(&self.send(Method::GET, &path, None).await?))
    }

    async fn open_pull_request(
        &self,
        repo: &RepoRef,
        pr: &NewPullRequest<'_>,
    ) -> Result<PullRequest, ForgeError> {
        let base = Self::repo_path(repo);
        let open = self
            .send(
                Method::GET,
                &format!("{base}/pulls?state=open&limit=50"),
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
                self.send(
                    Method::PATCH,
                    &format!("{base}/pulls/{}", found.number),
                    Some(json!({"title": pr.title, "body": pr.body})),
                )
                .await?
            }
            None => {
                self.send(
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
        self.send(
            Method::POST,
            &format!(
                "{}/pulls/{number}/requested_reviewers",
                Self::repo_path(repo)
            ),
            Some(json!({"reviewers": reviewers})),
        )
        .await
        .map(drop)
    }

    async fn reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, ForgeError> {
        let v = self
            .send(
                Method::GET,
                &format!("{}/pulls/{number}/reviews", Self::repo_path(repo)),
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
                    "REQUEST_CHANGES" => ReviewState::ChangesRequested,
                    "COMMENT" => ReviewState::Commented,
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
        let mut out = Vec::new();
        for review in self.reviews(repo, number).await? {
            out.extend(self.review_threads(repo, number, review.id).await?);
        }
        Ok(out)
    }

    async fn review_threads(
        &self,
        repo: &RepoRef,
        number: u64,
        review: u64,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        let v = self
            .send(
                Method::GET,
                &format!(
                    "{}/pulls/{number}/reviews/{review}/comments",
                    Self::repo_path(repo)
                ),
                None,
            )
            .await?;
        Ok(v.as_array()
            .into_iter()
            .flatten()
            .map(|c| ReviewComment {
                id: c["id"].as_u64().unwrap_or_default(),
                review_id: Some(review),
                author: login(&c["user"]),
                path: text(&c["path"]),
                line: c["position"].as_u64().filter(|&p| p > 0),
                body: text(&c["body"]),
                commit_id: c["commit_id"].as_str().map(str::to_owned),
            })
            .collect())
    }

    /// Gitea has no reply endpoint: a review comment on the same line
    /// joins the thread.
    async fn reply_to_review_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        comment: &ReviewComment,
        body: &str,
    ) -> Result<(), ForgeError> {
        self.send(
            Method::POST,
            &format!("{}/pulls/{number}/reviews", Self::repo_path(repo)),
            Some(json!({
                "event": "COMMENT",
                "body": "",
                "comments": [{"path": comment.path, "new_position": comment.line.unwrap_or(0), "body": body}],
            })),
        )
        .await
        .map(drop)
    }

    async fn git_credentials(&self, _repo: &RepoRef) -> Result<(String, SecretString), ForgeError> {
        // Gitea takes a token as the password whatever the user name.
        Ok(("forgehand".into(), self.token.clone()))
    }

    async fn set_status(
        &self,
        repo: &RepoRef,
        sha: &str,
        status: &CommitStatus<'_>,
    ) -> Result<(), ForgeError> {
        let mut body = json!({
            "state": status.state.as_str(),
            "context": status.context,
            "description": status.description,
        });
        if let Some(url) = status.target_url {
            body["target_url"] = json!(url);
        }
        self.send(
            Method::POST,
            &format!("{}/statuses/{}", Self::repo_path(repo), seg(sha)),
            Some(body),
        )
        .await
        .map(drop)
    }
}
