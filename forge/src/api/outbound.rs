//! The one outbound filter for text sent to the forge: a [`ForgeApi`]
//! around the real client that redacts every free text the bot sends
//! (comments new and edited, pull request titles and bodies, replies in
//! review threads, commit status descriptions) with the host's secret
//! scanner, and logs each redaction by place, never the value. The
//! pipeline makes every forge call through it, so no path to the forge
//! is left unfiltered by forgetting to call a function.

use forgehand_types::CommitSha;
use std::borrow::Cow;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use secrecy::SecretString;

use super::{
    Comment, CommitStatus, ForgeApi, ForgeError, Issue, NewPullRequest, Permission, PullRequest,
    ReactionTarget, RepoRef, Review, ReviewComment,
};
use forgehand_secrets::SecretScanner;

/// Which text of a call a redaction was in, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Comment,
    EditedComment,
    PullRequestTitle,
    PullRequestBody,
    ReviewReply,
    StatusDescription,
}

impl Place {
    fn as_str(self) -> &'static str {
        match self {
            Place::Comment => "comment",
            Place::EditedComment => "edited comment",
            Place::PullRequestTitle => "pull request title",
            Place::PullRequestBody => "pull request body",
            Place::ReviewReply => "review thread reply",
            Place::StatusDescription => "commit status description",
        }
    }
}

pub struct Outbound {
    inner: Arc<dyn ForgeApi>,
    /// Grows with the credentials the forge hands out on the way (a
    /// GitHub App's installation tokens).
    scanner: RwLock<SecretScanner>,
}

impl Outbound {
    /// `scanner` knows the host's own secrets (forge tokens, the model's
    /// API key, webhook secrets, the operator API token, an App's key).
    pub fn new(inner: Arc<dyn ForgeApi>, scanner: SecretScanner) -> Self {
        Outbound {
            inner,
            scanner: RwLock::new(scanner),
        }
    }

    /// `text` as it may leave: redacted, with a warning per redaction.
    fn filter<'t>(&self, repo: &RepoRef, place: Place, text: &'t str) -> Cow<'t, str> {
        let redacted = self
            .scanner
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .redact(text);
        if redacted.findings.is_empty() {
            return Cow::Borrowed(text);
        }
        for finding in &redacted.findings {
            tracing::warn!(
                repo = %repo.full_name(),
                place = place.as_str(),
                line = finding.line,
                kind = %finding.kind,
                "redacted a secret from text bound for the forge"
            );
        }
        Cow::Owned(redacted.text)
    }
}

#[async_trait]
impl ForgeApi for Outbound {
    async fn issue(&self, repo: &RepoRef, number: u64) -> Result<Issue, ForgeError> {
        self.inner.issue(repo, number).await
    }

    async fn comments(&self, repo: &RepoRef, number: u64) -> Result<Vec<Comment>, ForgeError> {
        self.inner.comments(repo, number).await
    }

    async fn permission(&self, repo: &RepoRef, user: &str) -> Result<Permission, ForgeError> {
        self.inner.permission(repo, user).await
    }

    async fn react_eyes(&self, repo: &RepoRef, target: ReactionTarget) -> Result<(), ForgeError> {
        self.inner.react_eyes(repo, target).await
    }

    async fn create_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        body: &str,
    ) -> Result<Comment, ForgeError> {
        let body = self.filter(repo, Place::Comment, body);
        self.inner.create_comment(repo, number, &body).await
    }

    async fn edit_comment(&self, repo: &RepoRef, id: u64, body: &str) -> Result<(), ForgeError> {
        let body = self.filter(repo, Place::EditedComment, body);
        self.inner.edit_comment(repo, id, &body).await
    }

    async fn pull_request(&self, repo: &RepoRef, number: u64) -> Result<PullRequest, ForgeError> {
        self.inner.pull_request(repo, number).await
    }

    async fn open_pull_request(
        &self,
        repo: &RepoRef,
        pr: &NewPullRequest<'_>,
    ) -> Result<PullRequest, ForgeError> {
        let title = self.filter(repo, Place::PullRequestTitle, pr.title);
        let body = self.filter(repo, Place::PullRequestBody, pr.body);
        let filtered = NewPullRequest {
            title: &title,
            body: &body,
            head: pr.head,
            base: pr.base,
            draft: pr.draft,
        };
        self.inner.open_pull_request(repo, &filtered).await
    }

    async fn request_review(
        &self,
        repo: &RepoRef,
        number: u64,
        reviewers: &[&str],
    ) -> Result<(), ForgeError> {
        self.inner.request_review(repo, number, reviewers).await
    }

    async fn reviews(&self, repo: &RepoRef, number: u64) -> Result<Vec<Review>, ForgeError> {
        self.inner.reviews(repo, number).await
    }

    async fn review_comments(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        self.inner.review_comments(repo, number).await
    }

    async fn review_threads(
        &self,
        repo: &RepoRef,
        number: u64,
        review: u64,
    ) -> Result<Vec<ReviewComment>, ForgeError> {
        self.inner.review_threads(repo, number, review).await
    }

    async fn reply_to_review_comment(
        &self,
        repo: &RepoRef,
        number: u64,
        comment: &ReviewComment,
        body: &str,
    ) -> Result<(), ForgeError> {
        let body = self.filter(repo, Place::ReviewReply, body);
        self.inner
            .reply_to_review_comment(repo, number, comment, &body)
            .await
    }

    async fn set_status(
        &self,
        repo: &RepoRef,
        sha: &CommitSha,
        status: &CommitStatus<'_>,
    ) -> Result<(), ForgeError> {
        let description = self.filter(repo, Place::StatusDescription, status.description);
        let filtered = CommitStatus {
            description: &description,
            ..*status
        };
        self.inner.set_status(repo, sha, &filtered).await
    }

    /// The credentials, which from now on are also redacted wherever
    /// they appear.
    async fn git_credentials(&self, repo: &RepoRef) -> Result<(String, SecretString), ForgeError> {
        let (user, token) = self.inner.git_credentials(repo).await?;
        self.scanner
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .add_host_secret("forge token", token.clone());
        Ok((user, token))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::api::{Actor, IssueState, StatusState};

    fn actor(login: &str) -> Actor {
        Actor {
            login: login.into(),
            id: 1,
            is_bot: false,
        }
    }

    /// Records what reaches the forge.
    #[derive(Default)]
    struct Recorder {
        sent: Mutex<Vec<String>>,
    }

    impl Recorder {
        fn sent(&self, text: &str) {
            self.sent.lock().unwrap().push(text.to_owned());
        }
    }

    #[async_trait]
    impl ForgeApi for Recorder {
        async fn issue(&self, _: &RepoRef, _: u64) -> Result<Issue, ForgeError> {
            Err(ForgeError::NotFound("issue".into()))
        }
        async fn comments(&self, _: &RepoRef, _: u64) -> Result<Vec<Comment>, ForgeError> {
            Ok(Vec::new())
        }
        async fn permission(&self, _: &RepoRef, _: &str) -> Result<Permission, ForgeError> {
            Ok(Permission::None)
        }
        async fn react_eyes(&self, _: &RepoRef, _: ReactionTarget) -> Result<(), ForgeError> {
            Ok(())
        }
        async fn create_comment(
            &self,
            _: &RepoRef,
            _: u64,
            body: &str,
        ) -> Result<Comment, ForgeError> {
            self.sent(body);
            Ok(Comment {
                id: 1,
                author: actor("bot"),
                body: body.into(),
            })
        }
        async fn edit_comment(&self, _: &RepoRef, _: u64, body: &str) -> Result<(), ForgeError> {
            self.sent(body);
            Ok(())
        }
        async fn pull_request(&self, _: &RepoRef, _: u64) -> Result<PullRequest, ForgeError> {
            Err(ForgeError::NotFound("pull".into()))
        }
        async fn open_pull_request(
            &self,
            _: &RepoRef,
            pr: &NewPullRequest<'_>,
        ) -> Result<PullRequest, ForgeError> {
            self.sent(pr.title);
            self.sent(pr.body);
            Ok(PullRequest {
                number: 2,
                url: String::new(),
                title: pr.title.into(),
                body: pr.body.into(),
                author: actor("bot"),
                head_ref: pr.head.into(),
                head_sha: None,
                base_ref: pr.base.into(),
                merged: false,
                state: IssueState::Open,
            })
        }
        async fn request_review(&self, _: &RepoRef, _: u64, _: &[&str]) -> Result<(), ForgeError> {
            Ok(())
        }
        async fn reviews(&self, _: &RepoRef, _: u64) -> Result<Vec<Review>, ForgeError> {
            Ok(Vec::new())
        }
        async fn review_comments(
            &self,
            _: &RepoRef,
            _: u64,
        ) -> Result<Vec<ReviewComment>, ForgeError> {
            Ok(Vec::new())
        }
        async fn reply_to_review_comment(
            &self,
            _: &RepoRef,
            _: u64,
            _: &ReviewComment,
            body: &str,
        ) -> Result<(), ForgeError> {
            self.sent(body);
            Ok(())
        }
        async fn set_status(
            &self,
            _: &RepoRef,
            _: &CommitSha,
            status: &CommitStatus<'_>,
        ) -> Result<(), ForgeError> {
            self.sent(status.description);
            Ok(())
        }
        async fn git_credentials(&self, _: &RepoRef) -> Result<(String, SecretString), ForgeError> {
            Ok((
                "x-access-token".into(),
                SecretString::from("ghs-learned-installation-token-1".to_owned()),
            ))
        }
    }

    #[tokio::test]
    async fn every_text_bound_for_the_forge_is_redacted() {
        let recorder = Arc::new(Recorder::default());
        let api = Outbound::new(
            recorder.clone(),
            SecretScanner::new([(
                "model.api_key".to_owned(),
                SecretString::from("model-key-value-123456".to_owned()),
            )]),
        );
        let repo = RepoRef::new("acme", "demo");
        let secret = "model-key-value-123456";
        let text = format!("see {secret}");
        api.create_comment(&repo, 1, &text).await.unwrap();
        api.edit_comment(&repo, 1, &text).await.unwrap();
        let pr = NewPullRequest {
            title: &text,
            body: &text,
            head: "forgehand/1",
            base: "main",
            draft: false,
        };
        api.open_pull_request(&repo, &pr).await.unwrap();
        let thread = ReviewComment {
            id: 3,
            review_id: Some(2),
            author: actor("maintainer"),
            path: "a.rs".into(),
            line: Some(1),
            body: String::new(),
            commit_id: "abc".into(),
        };
        api.reply_to_review_comment(&repo, 2, &thread, &text)
            .await
            .unwrap();
        let status = CommitStatus {
            state: StatusState::Success,
            context: "forgehand",
            description: &text,
            target_url: None,
        };
        api.set_status(&repo, &CommitSha::parse(&"a".repeat(40)).unwrap(), &status)
            .await
            .unwrap();
        // A token the forge hands out is redacted from then on.
        let (_, token) = api.git_credentials(&repo).await.unwrap();
        let learned = format!("token {}", secrecy::ExposeSecret::expose_secret(&token));
        api.create_comment(&repo, 1, &learned).await.unwrap();

        let sent = recorder.sent.lock().unwrap().clone();
        assert_eq!(sent.len(), 7, "{sent:#?}");
        for text in &sent[..6] {
            assert_eq!(
                text, "see [redacted: the host's own credential model.api_key]",
                "{sent:#?}"
            );
        }
        assert_eq!(
            sent[6],
            "token [redacted: the host's own credential forge token]"
        );
    }
}
