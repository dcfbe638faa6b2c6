//! The work of a job once it is authorized: the sequence of its stages
//! (`stages/`), and the types they share with the rest of the pipeline.

use std::time::Instant;

use forgehand_forge::api::{ForgeApi, RepoRef, ReviewComment};
use serde_json::{json, Value};

use super::stages::answer::Answer;
use super::stages::Stage;
use super::status::StatusComment;
use super::{Failure, Pipeline};
use crate::agent::prompts::Prompts;
use crate::store::ClaimedJob;

impl Pipeline {
    /// The stages of an authorized job, in order (see [`super::stages`]);
    /// the status comment's checklist moves with them.
    pub(super) async fn work(
        &self,
        claimed: &ClaimedJob,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        status: &StatusComment,
        steps: &mut Steps,
        mut work: Work,
    ) -> Result<Done, Failure> {
        let started = Instant::now();
        let mut copy = self.working_copy(claimed, api, repo, &work).await?;
        steps.done(Stage::WorkingCopy);
        if let Some(resumed) = copy.resumed.take() {
            // An earlier attempt pushed this job's commit: the agent's
            // and the gate's work is done; answer it.
            steps.done(Stage::Resumed);
            let answer = Answer::resumed(claimed, api, repo, status, work, resumed, started);
            return self.answer(answer, steps).await;
        }
        let _ = status.progress(api, repo, Stage::Agent).await;

        let prompt = std::mem::take(&mut work.prompt);
        let finished = self
            .agent(claimed, &copy, &work.prompts, prompt, steps)
            .await?;
        steps.done(Stage::Agent);
        if work.plan_only {
            // A plan changes nothing: what the agent wrote is thrown away.
            return Ok(Done::Planned {
                plan: finished.summary,
            });
        }
        let _ = status.progress(api, repo, Stage::Publish).await;

        let published = self.publish(claimed, &work, copy, &finished).await?;
        steps.done(Stage::Publish);

        let answer = Answer {
            claimed,
            api,
            repo,
            status,
            work,
            finished,
            published,
            started,
            resumed: false,
        };
        self.answer(answer, steps).await
    }
}

/// What a job works on.
pub(super) struct Work {
    pub branch: String,
    pub base: String,
    /// The task, for the agent.
    pub prompt: String,
    /// The prompts the task was made with: the system prompt must name
    /// the same forge-data tag as the task.
    pub prompts: Prompts,
    /// A follow-up's pull request and the review threads to answer.
    pub follow_up: Option<(forgehand_forge::api::PullRequest, Vec<ReviewComment>)>,
    /// `/forgehand plan`: the agent's summary is the answer, nothing is pushed.
    pub plan_only: bool,
    /// `/forgehand allow-sensitive`: sensitive files may be pushed this once.
    pub allow_sensitive: bool,
}

/// How a job's work ended well.
pub(super) enum Done {
    PullRequest {
        number: u64,
        url: String,
        /// A follow-up pushed to an existing pull request.
        updated: bool,
    },
    Planned {
        plan: String,
    },
}

/// Each step's time, as the job's result records it.
pub(super) struct Steps {
    last: Instant,
    pub list: Vec<Value>,
    /// Where the agent's transcript is, once there is one.
    pub transcript: Option<String>,
}

impl Steps {
    pub fn new() -> Self {
        Steps {
            last: Instant::now(),
            list: Vec::new(),
            transcript: None,
        }
    }

    pub fn done(&mut self, stage: Stage) {
        let now = Instant::now();
        self.list
            .push(json!({"step": stage.name(), "ms": (now - self.last).as_millis() as u64}));
        self.last = now;
    }
}
