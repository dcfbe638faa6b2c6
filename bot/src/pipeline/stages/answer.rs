//! Stage 4: the pushed commit answered where people look: the gate's
//! verdict as the commit's status, then, for a follow-up, a reply in each
//! review thread; otherwise the pull request, with whoever asked as its
//! reviewer.

use forgehand_forge::api::{
    CommitStatus, ForgeApi, NewPullRequest, RepoRef, ReviewComment, StatusState,
};
use forgehand_types::CommitSha;
use tracing::warn;

use super::super::replies::thread_reply;
use super::super::run::JobRun;
use super::super::status;
use super::super::work::{Done, Evidence, Work};
use super::super::{Failure, Pipeline};
use super::agent::Finished;
use super::publish::Published;
use super::working_copy::Resumed;
use forgehand_jobcore::environment::{EnvironmentReport, TestResult, Testing};
use forgehand_jobcore::Stage;

/// What answering needs of the stages before it.
pub(in crate::pipeline) struct Answer {
    pub work: Work,
    pub finished: Finished,
    pub published: Published,
    /// The commit was pushed by an earlier attempt of this job, which may
    /// have answered some review threads before it died.
    pub resumed: bool,
    /// The environment the job worked in.
    pub environment: Option<EnvironmentReport>,
}

impl Answer {
    /// The answer for a commit an earlier attempt of the job pushed.
    pub(in crate::pipeline) fn resumed(work: Work, resumed: Resumed) -> Self {
        let finished = Finished {
            title: resumed.title.clone(),
            summary: resumed.summary.clone(),
            replies: Vec::new(),
            spend: None,
            turns: 0,
            // What this attempt did not see is not claimed.
            testing: Testing::observed(&[], None, &[]),
        };
        let published = Published {
            commit: resumed.commit,
            files: resumed.files,
            findings: String::new(),
            left_out: String::new(),
            ignored: Vec::new(),
            title: resumed.title,
            summary: resumed.summary,
        };
        Answer {
            work,
            finished,
            published,
            resumed: true,
            environment: None,
        }
    }
}

impl Answer {
    /// What the pull request shows it was made with.
    fn evidence(&self) -> Box<Evidence> {
        let drift = self
            .environment
            .as_ref()
            .map(|env| env.drift(&self.published.files))
            .unwrap_or_default();
        Box::new(Evidence {
            draft: self.finished.testing.result == TestResult::Failed,
            testing: Some(self.finished.testing.clone()).filter(|_| !self.resumed),
            environment: self.environment.clone(),
            left_out: self.published.ignored.clone(),
            drift,
        })
    }
}

impl Pipeline {
    pub(in crate::pipeline) async fn answer(
        &self,
        run: &mut JobRun<'_>,
        answer: Answer,
    ) -> Result<Done, Failure> {
        let evidence = answer.evidence();
        let Answer {
            work,
            finished,
            published,
            resumed,
            ..
        } = answer;
        let (claimed, api, repo) = (run.claimed, run.api, run.repo);
        set_checked(run, &published.commit).await;
        if let Some((pr, threads)) = work.follow_up {
            let sha = published.commit.short().to_owned();
            let answered = if resumed {
                self.answered(api, repo, pr.number, &sha).await?
            } else {
                Vec::new()
            };
            for (n, thread) in threads.iter().enumerate() {
                if answered.iter().any(|reply| answers(reply, thread)) {
                    continue;
                }
                let reply = thread_reply(&finished.replies, n + 1, &sha);
                api.reply_to_review_comment(repo, pr.number, thread, &reply)
                    .await
                    .map_err(Failure::forge)?;
            }
            run.steps.done(Stage::Replies);
            return Ok(Done::PullRequest {
                number: pr.number,
                url: pr.url,
                updated: true,
                evidence,
            });
        }
        run.progress(Stage::PullRequest).await;
        let body = status::pull_request_body(&status::PullRequestBody {
            summary: &published.summary,
            closes: claimed.job.target,
            files: &published.files,
            findings: &published.findings,
            left_out: &published.left_out,
            isolation: &self.isolation,
            spend: finished.spend,
            turns: finished.turns,
            duration: run.started.elapsed(),
            testing: evidence.testing.as_ref(),
            environment: evidence.environment.as_ref(),
            drift: &evidence.drift,
        });
        let new = NewPullRequest {
            title: &published.title,
            body: &body,
            head: &work.branch,
            base: &work.base,
            draft: evidence.draft,
        };
        // Safe to repeat: the open pull request of the branch is looked for
        // first, so a try that made it before failing is not made twice.
        let pr = api
            .open_pull_request(repo, &new)
            .await
            .map_err(Failure::forge)?;
        // Whoever asked reviews it. A pull request is there either way.
        let reviewer = [claimed.job.requested_by.as_str()];
        if let Err(error) = api.request_review(repo, pr.number, &reviewer).await {
            warn!(%error, "requesting a review failed");
        }
        run.steps.done(Stage::PullRequest);
        Ok(Done::PullRequest {
            number: pr.number,
            url: pr.url,
            updated: false,
            evidence,
        })
    }
}

impl Pipeline {
    /// The bot's answers on pull request `number` about commit `sha`: what
    /// an earlier attempt that pushed it replied before it died. Every
    /// answer names the commit ("Done in <sha>") or says "No change".
    async fn answered(
        &self,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        number: u64,
        sha: &str,
    ) -> Result<Vec<ReviewComment>, Failure> {
        let bot = self.bot_identity();
        let comments = api
            .review_comments(repo, number)
            .await
            .map_err(Failure::forge)?;
        Ok(comments
            .into_iter()
            .filter(|c| bot.is_me(&c.author.login))
            .filter(|c| c.body.contains(sha) || c.body.starts_with("No change"))
            .collect())
    }
}

/// Whether `reply` answers review `thread`: made after it, on its line
/// (both forges put an answer on the line of the comment it answers).
fn answers(reply: &ReviewComment, thread: &ReviewComment) -> bool {
    reply.id > thread.id && reply.path == thread.path && reply.line == thread.line
}

/// The gate's verdict as the commit's status. Not worth failing the job
/// over.
async fn set_checked(run: &JobRun<'_>, commit: &CommitSha) {
    let checked = CommitStatus {
        state: StatusState::Success,
        context: "forgehand",
        description: "integrity and secret checks passed",
        target_url: None,
    };
    if let Err(error) = run.api.set_status(run.repo, commit, &checked).await {
        warn!(%error, "setting the commit status failed");
    }
}
