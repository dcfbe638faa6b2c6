//! Gitea and Forgejo over their REST API (`/api/v1`), with a token.
//! Answers are read into the shared wire types ([`super::wire`]); what
//! Gitea names its own way (review states, permissions) is here.

use forgehand_types::CommitSha;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::pager::{Bound, GiteaPages, List};
use super::wire::{
    self, call_name, error_detail, root_cause, Answer, CommentBody, EditPull, NewPull, Reaction,
    Reviewers, Status, MAX_ANSWER_BYTES,
};
use super::{
    classify, Comment, CommitStatus, ForgeApi, ForgeError, Issue, IssueState, NewPullRequest,
    Permission, PullRequest, ReactionTarget, RepoRef, Review, ReviewComment, ReviewState,
};

/// The page size asked for: Gitea's default `MAX_RESPONSE_ITEMS`. A
/// server set to fewer answers fewer, which the pager allows for.
const PAGE_SIZE: usize = 50;

pub struct GiteaClient {
    api: String,
    token: SecretString,
    http: reqwest::Client,
}

/// A request without a body.
#[derive(Serialize)]
struct NoBody {}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum GiteaPermission {
    Owner,
    Admin,
    Write,
    Read,
    None,
    /// A name this version does not know: no permission.
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct PermissionAnswer {
    permission: GiteaPermission,
}

#[derive(Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum GiteaReviewState {
    Approved,
    RequestChanges,
    Comment,
    Pending,
    RequestReview,
    #[serde(other)]
    Unknown,
}

impl From<GiteaReviewState> for Option<ReviewState> {
    fn from(state: GiteaReviewState) -> Self {
        match state {
            GiteaReviewState::Approved => Some(ReviewState::Approved),
            GiteaReviewState::RequestChanges => Some(ReviewState::ChangesRequested),
            GiteaReviewState::Comment => Some(ReviewState::Commented),
            GiteaReviewState::Pending
            | GiteaReviewState::RequestReview
            | GiteaReviewState::Unknown => None,
        }
    }
}

/// `POST /repos/{o}/{r}/pulls/{n}/reviews`: Gitea's way to answer in a
/// thread is a review comment on the same line.
#[derive(Serialize)]
struct NewReview<'a> {
    event: &'static str,
    body: &'a str,
    comments: [NewReviewComment<'a>; 1],
}

#[derive(Serialize)]
struct NewReviewComment<'a> {
    path: &'a str,
    new_position: u64,
    body: &'a str,
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

    /// One request, its answer classified; at most [`MAX_ANSWER_BYTES`]
    /// of the answer are read.
    async fn send<B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Answer, ForgeError> {
        let call = call_name(&method, path);
        let url = format!("{}{path}", self.api);
        let mut request = self
            .http
            .request(method.clone(), &url)
            .header(
                "Authorization",
                format!("token {}", self.token.expose_secret()),
            )
            .header("Accept", "application/json");
        if let Some(body) = body {
            request = request.json(body);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| ForgeError::Other(format!("{call}: {}", root_cause(&e))))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ForgeError::Other(format!("{call}: {}", root_cause(&e))))?
        {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(ForgeError::Malformed(format!(
                    "{call}: the answer is larger than {} MiB",
                    MAX_ANSWER_BYTES >> 20
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| ForgeError::Malformed(format!("{call}: the answer is not UTF-8")))?;
        if !(200..300).contains(&status) {
            let retry_after = headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
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

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, ForgeError> {
        self.send(Method::GET, path, None::<&NoBody>).await?.json()
    }

    /// Every item of a list Gitea pages (`page`, `limit`), read to its
    /// end or to [`super::MAX_PAGES`] pages.
    async fn list<T: serde::de::DeserializeOwned>(
        &self,
        mut bound: Bound,
        path: &str,
    ) -> Result<Vec<T>, ForgeError> {
        let join = if path.contains('?') { '&' } else { '?' };
        let mut pages = GiteaPages::default();
        let mut items = Vec::new();
        let mut next = Some(1);
        while let Some(page) = next {
            if !bound.another(items.len()) {
                break;
            }
            let answer = self
                .send(
                    Method::GET,
                    &format!("{path}{join}page={page}&limit={PAGE_SIZE}"),
                    None::<&NoBody>,
                )
                .await?;
            let got: Vec<T> = answer.json()?;
            next = pages.after(page, got.len(), answer.total_count());
            items.extend(got);
        }
        Ok(items)
    }

    /// A list Gitea answers whole (an issue's comments, a review's): its
    /// API takes no `page` there. A count beyond what came is logged.
    async fn whole<T: serde::de::DeserializeOwned>(
        &self,
        list: List,
        repo: &RepoRef,
        path: &str,
    ) -> Result<Vec<T>, ForgeError> {
        let answer = self.send(Method::GET, path, None::<&NoBody>).await?;
        let items: Vec<T> = answer.json()?;
        if let Some(total) = answer.total_count().filter(|&t| t > items.len()) {
            tracing::warn!(
                list = list.as_str(),
                repo = %repo.full_name(),
                total,
                read = items.len(),
                "the forge answered part of a list it does not page"
            );
        }
        Ok(items)
    }

    /// Every open pull request of `repo`, newest first.
    async fn open_pulls(&self, repo: &RepoRef) -> Result<Vec<wire::Pull>, ForgeError> {
        let bound = Bound::new(List::OpenPullRequests, repo, None);
        let path = format!("{}/pulls?state=open", Self::repo_path(repo));
        self.list(bound, &path).await
    }

    /// The open pull request from `head` (a branch of `repo` itself) to
    /// `base`. Gitea's `GET /pulls/{base}/{head}` answers the first pull
    /// request of that base and head whatever its state; when that one
    /// is closed, an open one may still come after it, and the open ones
    /// are read.
    async fn open_pull_from(
        &self,
        repo: &RepoRef,
        head: &str,
        base: &str,
    ) -> Result<Option<wire::Pull>, ForgeError> {
        let path = format!(
            "{}/pulls/{}/{}",
            Self::repo_path(repo),
            seg(base),
            seg(head)
        );
        let found = match self.get::<wire::Pull>(&path).await {
            Ok(found) => found,
            Err(ForgeError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let ours = |p: &wire::Pull| {
            p.state == IssueState::Open
                && p.head.name == head
                && p.base.name == base
                && p.is_from(repo)
        };
        if ours(&found) {
            return Ok(Some(found));
        }
        Ok(self.open_pulls(repo).await?.into_iter().find(ours))
    }

    fn repo_path(repo: &RepoRef) -> String {
        format!("/repos/{}/{}", seg(&repo.owner), seg(&repo.name))
    }
}

/// A path segment, percent-encoded (a branch `forgehand/1-x` is one
/// segment, `forgehand%2F1-x`, which Gitea decodes).
fn seg(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

#[async_trait]
impl ForgeApi for GiteaClient {
    async fn issue(&self, repo: &RepoRef, number: u64) -> Result<Issue, ForgeError> {
        let path = format!("{}/issues/{number}", Self::repo_path(repo));
        Ok(self.get::<wire::Issue>(&path).await?.into())
    }

    async fn comments(&self, repo: &RepoRef, number: u64) -> Result<Vec<Comment>, ForgeError> {
        let path = format!("{}/issues/{number}/comments", Self::repo_path(repo));
        let comments: Vec<wire::Comment> = self.whole(List::IssueComments, repo, &path).await?;
        Ok(comments.into_iter().map(Into::into).collect())
    }

    async fn permission(&self, repo: &RepoRef, user: &str) -> Result<Permission, ForgeError> {
        let path = format!(
            "{}/collaborators/{}/permission",
            Self::repo_path(repo),
            seg(user)
        );
        let answer: PermissionAnswer = match self.get(&path).await {
            Ok(answer) => answer,
            // Not a collaborator of a repository Gitea lets us see.
            Err(ForgeError::NotFound(_)) | Err(ForgeError::Forbidden(_)) => {
                return Ok(Permission::None)
            }
            Err(e) => return Err(e),
        };
        Ok(match answer.permission {
            GiteaPermission::Owner | GiteaPermission::Admin => Permission::Admin,
            GiteaPermission::Write => Permission::Write,
            GiteaPermission::Read => Permission::Read,
            GiteaPermission::None | GiteaPermission::Unknown => Permission::None,
        })
    }

    async fn react_eyes(&self, repo: &RepoRef, target: ReactionTarget) -> Result<(), ForgeError> {
        let path = match target {
            ReactionTarget::Issue(n) => format!("{}/issues/{n}/reactions", Self::repo_path(repo)),
            ReactionTarget::Comment(id) => {
                format!("{}/issues/comments/{id}/reactions", Self::repo_path(repo))
            }
        };
        let eyes = Reaction { content: "eyes" };
        self.send(Method::POST, &path, Some(&eyes)).await.map(drop)
    }

    async fn create_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<Comment, ForgeError> {
        let path = format!("{}/issues/{number}/comments", Self::repo_path(repo));
        let answer = self
            .send(Method::POST, &path, Some(&CommentBody { body }))
            .await?;
        Ok(answer.json::<wire::Comment>()?.into())
    }

    async fn edit_comment(&self, repo: &RepoRef, id: u64, body: &str) -> Result<(), ForgeError> {
        let path = format!("{}/issues/comments/{id}", Self::repo_path(repo));
        self.send(Method::PATCH, &path, Some(&CommentBody { body }))
            .await
            .map(drop)
    }

    async fn pull_request(&self, repo: &RepoRef, number: u64) -> Result<PullRequest, ForgeError> {
        let path = format!("{}/pulls/{number}", Self::repo_path(repo));
        Ok(self.get::<wire::Pull>(&path).await?.into())
    }

    async fn open_pull_request(
        &self,
        repo: &RepoRef,
        pr: &NewPullRequest<'_>,
    ) -> Result<PullRequest, ForgeError> {
        let base = Self::repo_path(repo);
        // Gitea's drafts are pull requests whose title says so.
        let title = if pr.draft {
            format!("WIP: {}", pr.title)
        } else {
            pr.title.to_owned()
        };
        let answer = match self.open_pull_from(repo, pr.head, pr.base).await? {
            Some(found) => {
                let edit = EditPull {
                    title: &title,
                    body: pr.body,
                };
                let path = format!("{base}/pulls/{}", found.number);
                self.send(Method::PATCH, &path, Some(&edit)).await?
            }
            None => {
                let new = NewPull {
                    title: &title,
                    body: pr.body,
                    head: pr.head,
                    base: pr.base,
                    draft: false,
                };
                let made = self
                    .send(Method::POST, &format!("{base}/pulls"), Some(&new))
                    .await;
                match made {
                    // An earlier try's pull request whose answer was lost:
                    // Gitea says one exists for these branches. Taken, not
                    // made twice.
                    Err(ForgeError::Conflict(message) | ForgeError::Invalid(message))
                        if message.contains("already exists") =>
                    {
                        let found = self
                            .open_pull_from(repo, pr.head, pr.base)
                            .await?
                            .ok_or(ForgeError::Conflict(message))?;
                        let edit = EditPull {
                            title: &title,
                            body: pr.body,
                        };
                        let path = format!("{base}/pulls/{}", found.number);
                        self.send(Method::PATCH, &path, Some(&edit)).await?
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
        let path = format!(
            "{}/pulls/{number}/requested_reviewers",
            Self::repo_path(repo)
        );
        self.send(Method::POST, &path, Some(&Reviewers { reviewers }))
            .await
            .map(drop)
    }

    async fn reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, ForgeError> {
        let path = format!("{}/pulls/{number}/reviews", Self::repo_path(repo));
        let bound = Bound::new(List::Reviews, repo, Some(number));
        let reviews: Vec<wire::Review<GiteaReviewState>> = self.list(bound, &path).await?;
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
        let path = format!(
            "{}/pulls/{number}/reviews/{review}/comments",
            Self::repo_path(repo)
        );
        let comments: Vec<wire::ReviewComment> =
            self.whole(List::ReviewComments, repo, &path).await?;
        Ok(comments
            .into_iter()
            .map(|c| {
                let line = c.position.filter(|&p| p > 0);
                let mut comment = c.into_api(line);
                comment.review_id = Some(review);
                comment
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
        let review = NewReview {
            event: "COMMENT",
            body: "",
            comments: [NewReviewComment {
                path: &comment.path,
                new_position: comment.line.unwrap_or(0),
                body,
            }],
        };
        let path = format!("{}/pulls/{number}/reviews", Self::repo_path(repo));
        self.send(Method::POST, &path, Some(&review))
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
        sha: &CommitSha,
        status: &CommitStatus<'_>,
    ) -> Result<(), ForgeError> {
        let path = format!("{}/statuses/{}", Self::repo_path(repo), seg(sha.as_str()));
        self.send(Method::POST, &path, Some(&Status::from(status)))
            .await
            .map(drop)
    }
}
