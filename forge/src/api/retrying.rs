//! Every forge call, read or write, made again when a passing fault ended
//! it: a [`ForgeApi`] around the real client that waits out a 5xx, a
//! dropped connection or a rate limit (`Retry-After`, else a doubling
//! backoff) a few times within the attempt, so that one 502 no longer
//! ends a job. The pipeline makes every call through it, so no call is
//! left without retries by forgetting to wrap it.
//!
//! Writes are made safe to repeat: a comment or a thread reply whose
//! answer was lost may have been made, so before making it again the
//! list is read for one with the same body (the status comment carries
//! the job's marker, so the same body is the same comment). Opening a
//! pull request already takes the open one from the branch; edits,
//! reactions, review requests and statuses are the same when repeated.

use forgehand_types::CommitSha;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use secrecy::SecretString;

use super::{
    Comment, CommitStatus, ForgeApi, ForgeError, Issue, NewPullRequest, Permission, PullRequest,
    ReactionTarget, RepoRef, Review, ReviewComment,
};

/// How calls are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// How many times a call is made in all.
    pub attempts: u32,
    /// The first wait after a fault that says nothing of when to come
    /// back; doubled each time.
    pub first_backoff: Duration,
    /// The longest wait for a rate limit: a longer one fails the call (the
    /// queue's backoff takes over), instead of holding a worker.
    pub longest_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            first_backoff: Duration::from_millis(250),
            longest_wait: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// How long to wait before try `attempt + 1` after `error`, or `None`
    /// when waiting cannot fix it.
    fn wait(&self, error: &ForgeError, attempt: u32) -> Option<Duration> {
        match error {
            ForgeError::RateLimited { retry_after, .. } if *retry_after <= self.longest_wait => {
                Some(*retry_after)
            }
            ForgeError::Other(_) => Some(
                self.first_backoff
                    .saturating_mul(1 << (attempt - 1).min(16))
                    .min(self.longest_wait),
            ),
            _ => None,
        }
    }

    /// Runs `call` until it succeeds, fails for a reason waiting cannot
    /// fix, or has been tried [`RetryPolicy::attempts`] times. `before`
    /// runs before each repeat (not the first try) and may find that an
    /// earlier try took effect after all. A `before` that itself fails is
    /// a try of its own, waited out and made again: a write is repeated
    /// only once a check said the earlier try did not take effect (a
    /// failed look at the comments read as "none" made a second status
    /// comment).
    pub async fn run<T, F, Fut, B, BFut>(
        &self,
        name: &str,
        mut call: F,
        mut before: B,
    ) -> Result<T, ForgeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ForgeError>>,
        B: FnMut() -> BFut,
        BFut: Future<Output = Result<Option<T>, ForgeError>>,
    {
        let mut attempt = 1;
        let mut error = match call().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        loop {
            let Some(wait) = self.wait(&error, attempt) else {
                return Err(error);
            };
            if attempt >= self.attempts {
                tracing::warn!(call = name, %error, attempt, "forge call failed; giving up");
                return Err(error);
            }
            tracing::warn!(
                call = name,
                %error,
                attempt,
                wait_ms = wait.as_millis() as u64,
                "forge call failed; trying again"
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
            let checked = before().await;
            tracing::info!(
                call = name,
                attempt,
                took_effect = matches!(checked, Ok(Some(_))),
                check_failed = checked.is_err(),
                "looked whether the earlier try took effect"
            );
            error = match checked {
                Ok(Some(done)) => return Ok(done),
                Ok(None) => match call().await {
                    Ok(value) => return Ok(value),
                    Err(error) => error,
                },
                // Not known whether the earlier try took effect: look
                // again after the next wait, never write blindly.
                Err(error) => error,
            };
        }
    }

    /// [`RetryPolicy::run`] for a call that is the same when repeated.
    pub async fn plain<T, F, Fut>(&self, name: &str, call: F) -> Result<T, ForgeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ForgeError>>,
    {
        self.run(name, call, || async { Ok(None) }).await
    }
}

pub struct Retrying {
    inner: Arc<dyn ForgeApi>,
    policy: RetryPolicy,
}

impl Retrying {
    pub fn new(inner: Arc<dyn ForgeApi>, policy: RetryPolicy) -> Self {
        Retrying { inner, policy }
    }
}

#[async_trait]
impl ForgeApi for Retrying {
    async fn issue(&self, repo: &RepoRef, number: u64) -> Result<Issue, ForgeError> {
        self.policy
            .plain("issue", || self.inner.issue(repo, number))
            .await
    }

    async fn comments(&self, repo: &RepoRef, number: u64) -> Result<Vec<Comment>, ForgeError> {
        self.policy
            .plain("comments", || self.inner.comments(repo, number))
            .await
    }

    async fn permission(&self, repo: &RepoRef, user: &str) -> Result<Permission, ForgeError> {
        self.policy
            .plain("permission", || self.inner.permission(repo, user))
            .await
    }

    async fn react_eyes(&self, repo: &RepoRef, target: ReactionTarget) -> Result<(), ForgeError> {
        self.policy
            .plain("reaction", || self.inner.react_eyes(repo, target))
            .await
    }

    async fn create_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<Comment, ForgeError> {
        self.policy
            .run(
                "create comment",
                || self.inner.create_comment(repo, number, body),
                || async {
                    // The newest first: an earlier try's comment is recent.
                    let comments = self.inner.comments(repo, number).await?;
                    Ok(comments.into_iter().rev().find(|c| c.body == body))
                },
            )
            .await
    }

    async fn edit_comment(&self, repo: &RepoRef, id: u64, body: &str) -> Result<(), ForgeError> {
        self.policy
            .plain("edit comment", || self.inner.edit_comment(repo, id, body))
            .await
    }

    async fn pull_request(&self, repo: &RepoRef, number: u64) -> Result<PullRequest, ForgeError> {
        self.policy
            .plain("pull request", || self.inner.pull_request(repo, number))
            .await
    }

    async fn open_pull_request(
        &self,
        repo: &RepoRef,
        pr: &NewPullRequest<'_>,
    ) -> Result<PullRequest, ForgeError> {
        // Takes the open pull request from the branch when one is there:
        // a repeat after a lost answer updates what the first try opened.
        self.policy
            .plain("open pull request", || {
                self.inner.open_pull_request(repo, pr)
            })
            .await
    }

    async fn request_review(
        &self,
        repo: &RepoRef,
        number: u64,
        reviewers: &[&str],
    ) -> Result<(), ForgeError> {
        self.policy
            .plain("request review", || {
                self.inner.request_review(repo, number, reviewers)
            })
            .await
    }

    async fn reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, ForgeError> {
        self.policy
            .plain("reviews", || self.inner.reviews(repo, number))
            .await
    }

    async fn review_comments(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        self.policy
            .plain("review comments", || {
                self.inner.review_comments(repo, number)
            })
            .await
    }

    async fn review_threads(
        &self,
        repo: &RepoRef,
        number: u64,
        review: u64,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        self.policy
            .plain("review threads", || {
                self.inner.review_threads(repo, number, review)
            })
            .await
    }

    async fn reply_to_review_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        comment: &ReviewComment,
        body: &str,
    ) -> Result<(), ForgeError> {
        self.policy
            .run(
                "reply in review thread",
                || {
                    self.inner
                        .reply_to_review_comment(repo, number, comment, body)
                },
                || async {
                    let comments = self.inner.review_comments(repo, number).await?;
                    Ok(comments
                        .iter()
                        .any(|c| c.id > comment.id && c.path == comment.path && c.body == body)
                        .then_some(()))
                },
            )
            .await
    }

    async fn set_status(
        &self,
        repo: &RepoRef,
        sha: &CommitSha,
        status: &CommitStatus<'_>,
    ) -> Result<(), ForgeError> {
        self.policy
            .plain("commit status", || self.inner.set_status(repo, sha, status))
            .await
    }

    async fn git_credentials(&self, repo: &RepoRef) -> Result<(String, SecretString), ForgeError> {
        self.policy
            .plain("git credentials", || self.inner.git_credentials(repo))
            .await
    }
}

#[cfg(test)]
mod tests;
