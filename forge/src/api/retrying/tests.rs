use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use super::*;
use crate::model::Actor;

/// A forge that fails the calls it is told to, and keeps comments.
#[derive(Default)]
struct Flaky {
    /// Taken one per call of `issue` or `create_comment`.
    faults: Mutex<VecDeque<ForgeError>>,
    /// Whether a failed `create_comment` made the comment all the same
    /// (the answer was lost on the way back).
    made_anyway: bool,
    comments: Mutex<Vec<Comment>>,
    /// Taken one per call of `comments`.
    list_faults: Mutex<VecDeque<ForgeError>>,
    calls: AtomicU32,
}

impl Flaky {
    fn failing(faults: impl IntoIterator<Item = ForgeError>) -> Self {
        Flaky {
            faults: Mutex::new(faults.into_iter().collect()),
            ..Flaky::default()
        }
    }

    fn fault(&self) -> Option<ForgeError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.faults.lock().unwrap().pop_front()
    }
}

fn repo() -> RepoRef {
    RepoRef {
        owner: "o".into(),
        name: "r".into(),
    }
}

fn server_error() -> ForgeError {
    ForgeError::Other("GET /repos/o/r/issues/1: HTTP 502: bad gateway".into())
}

#[async_trait]
impl ForgeApi for Flaky {
    async fn issue(&self, _: &RepoRef, number: u64) -> Result<Issue, ForgeError> {
        if let Some(e) = self.fault() {
            return Err(e);
        }
        Err(ForgeError::NotFound(format!(
            "issue {number} (the test asks no more)"
        )))
    }
    async fn comments(&self, _: &RepoRef, _: u64) -> Result<Vec<Comment>, ForgeError> {
        if let Some(e) = self.list_faults.lock().unwrap().pop_front() {
            return Err(e);
        }
        Ok(self.comments.lock().unwrap().clone())
    }
    async fn permission(&self, _: &RepoRef, _: &str) -> Result<Permission, ForgeError> {
        unimplemented!("not asked by these tests")
    }
    async fn react_eyes(&self, _: &RepoRef, _: ReactionTarget) -> Result<(), ForgeError> {
        unimplemented!("not asked by these tests")
    }
    async fn create_comment(&self, _: &RepoRef, _: u64, body: &str) -> Result<Comment, ForgeError> {
        let fault = self.fault();
        let mut comments = self.comments.lock().unwrap();
        let comment = Comment {
            id: comments.len() as u64 + 1,
            body: body.into(),
            author: Actor {
                login: "bot".into(),
                id: 9,
                is_bot: true,
            },
        };
        match fault {
            Some(e) => {
                if self.made_anyway {
                    comments.push(comment);
                }
                Err(e)
            }
            None => {
                comments.push(comment.clone());
                Ok(comment)
            }
        }
    }
    async fn edit_comment(&self, _: &RepoRef, _: u64, _: &str) -> Result<(), ForgeError> {
        unimplemented!("not asked by these tests")
    }
    async fn pull_request(&self, _: &RepoRef, _: u64) -> Result<PullRequest, ForgeError> {
        unimplemented!("not asked by these tests")
    }
    async fn open_pull_request(
        &self,
        _: &RepoRef,
        _: &NewPullRequest<'_>,
    ) -> Result<PullRequest, ForgeError> {
        unimplemented!("not asked by these tests")
    }
    async fn request_review(&self, _: &RepoRef, _: u64, _: &[&str]) -> Result<(), ForgeError> {
        unimplemented!("not asked by these tests")
    }
    async fn reviews(&self, _: &RepoRef, _: u64) -> Result<Vec<Review>, ForgeError> {
        unimplemented!("not asked by these tests")
    }
    async fn review_comments(&self, _: &RepoRef, _: u64) -> Result<Vec<ReviewComment>, ForgeError> {
        unimplemented!("not asked by these tests")
    }
    async fn reply_to_review_comment(
        &self,
        _: &RepoRef,
        _: u64,
        _: &ReviewComment,
        _: &str,
    ) -> Result<(), ForgeError> {
        unimplemented!("not asked by these tests")
    }
    async fn set_status(
        &self,
        _: &RepoRef,
        _: &forgehand_types::CommitSha,
        _: &CommitStatus<'_>,
    ) -> Result<(), ForgeError> {
        unimplemented!("not asked by these tests")
    }
    async fn git_credentials(&self, _: &RepoRef) -> Result<(String, SecretString), ForgeError> {
        unimplemented!("not asked by these tests")
    }
}

fn retrying(flaky: Flaky) -> (Arc<Flaky>, Retrying) {
    let flaky = Arc::new(flaky);
    (flaky.clone(), Retrying::new(flaky, RetryPolicy::default()))
}

#[tokio::test(start_paused = true)]
async fn reads_wait_out_server_errors_and_rate_limits() {
    let (flaky, api) = retrying(Flaky::failing([
        server_error(),
        ForgeError::RateLimited {
            retry_after: Duration::from_secs(7),
            call: "GET /repos/o/r/issues/1".into(),
        },
    ]));
    let started = tokio::time::Instant::now();
    let error = api.issue(&repo(), 1).await.unwrap_err();
    // The third try reached the forge's real answer.
    assert!(matches!(error, ForgeError::NotFound(_)), "{error}");
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(250) + Duration::from_secs(7)
    );
}

#[tokio::test(start_paused = true)]
async fn what_waiting_cannot_fix_fails_at_once() {
    let (flaky, api) = retrying(Flaky::failing([ForgeError::Forbidden("no".into())]));
    let error = api.issue(&repo(), 1).await.unwrap_err();
    assert!(matches!(error, ForgeError::Forbidden(_)), "{error}");
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_longer_than_a_minute_is_left_to_the_queue() {
    let (flaky, api) = retrying(Flaky::failing([ForgeError::RateLimited {
        retry_after: Duration::from_secs(3600),
        call: "GET /repos/o/r/issues/1".into(),
    }]));
    let error = api.issue(&repo(), 1).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "GET /repos/o/r/issues/1: rate limited: try again in 3600 s"
    );
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn it_gives_up_after_five_tries_with_the_last_error() {
    let (flaky, api) = retrying(Flaky::failing((0..9).map(|_| server_error())));
    let started = tokio::time::Instant::now();
    let error = api.issue(&repo(), 1).await.unwrap_err();
    assert!(error.to_string().contains("HTTP 502"), "{error}");
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 5);
    // 250 + 500 + 1000 + 2000 ms between the five.
    assert_eq!(started.elapsed(), Duration::from_millis(3750));
}

#[tokio::test(start_paused = true)]
async fn a_comment_whose_answer_was_lost_is_not_made_twice() {
    let (flaky, api) = retrying(Flaky {
        made_anyway: true,
        ..Flaky::failing([server_error()])
    });
    let comment = api.create_comment(&repo(), 1, "the status").await.unwrap();
    assert_eq!(comment.id, 1);
    assert_eq!(flaky.comments.lock().unwrap().len(), 1);
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 1);
}

/// Issue 24: under a third of calls failing, a job had two status
/// comments: the look for the earlier try's comment failed, was read as
/// "none", and the comment was made again.
#[tokio::test(start_paused = true)]
async fn a_failed_look_for_the_earlier_try_is_not_read_as_none() {
    let (flaky, api) = retrying(Flaky {
        made_anyway: true,
        list_faults: Mutex::new([server_error(), server_error()].into_iter().collect()),
        ..Flaky::failing([server_error()])
    });
    let comment = api.create_comment(&repo(), 1, "the status").await.unwrap();
    assert_eq!(comment.id, 1);
    assert_eq!(flaky.comments.lock().unwrap().len(), 1, "made once");
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_comment_that_was_not_made_is_made_on_the_next_try() {
    let (flaky, api) = retrying(Flaky::failing([server_error()]));
    let comment = api.create_comment(&repo(), 1, "the status").await.unwrap();
    assert_eq!(comment.body, "the status");
    assert_eq!(flaky.comments.lock().unwrap().len(), 1);
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 2);
}
