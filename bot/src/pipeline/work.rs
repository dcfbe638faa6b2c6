//! The work of a job once it is authorized: the sequence of its stages
//! (`stages/`), and the types they share with the rest of the pipeline.

use forgehand_forge::api::ReviewComment;

use super::orders::{Allowed, Order};
use super::run::JobRun;
use super::stages::answer::Answer;
use super::stages::Stage;
use super::{Failure, Pipeline};
use crate::job::HeldCommit;
use forgehand_jobcore::environment::{EnvironmentReport, Prepared, Testing};

impl Pipeline {
    /// The stages of an authorized job, in order (see [`super::stages`]);
    /// the status comment's checklist moves with them. A new stage is one
    /// function in `stages/` and one line here.
    pub(super) async fn work(
        &self,
        run: &mut JobRun<'_>,
        order: &Order,
        allowed: Allowed,
    ) -> Result<Done, Failure> {
        let mut work = self.task(run, order).await?;
        work.allowed = allowed;
        let mut source = self.fetch(run, &work).await?;
        if let Some(resumed) = source.resumed.take() {
            // An earlier attempt pushed this job's commit: the agent's
            // and the gate's work is done; answer it.
            run.steps.done(Stage::Resumed);
            return self.answer(run, Answer::resumed(work, resumed)).await;
        }
        let mut environment = self.environment(run, &mut source).await?;
        let environment_report = environment.as_ref().map(Prepared::report);
        let copy = self
            .working_copy(run, &work, source, environment.as_mut())
            .await?;
        let finished = self.agent(run, &copy, &work, environment.as_ref()).await?;
        if work.plan_only {
            // A plan changes nothing: what the agent wrote is thrown away.
            return Ok(Done::Planned {
                plan: finished.summary,
            });
        }
        let published = self.publish(run, &work, copy, &finished).await?;
        let answer = Answer {
            work,
            finished,
            published,
            resumed: false,
            environment: environment_report,
        };
        self.answer(run, answer).await
    }
}

impl Pipeline {
    /// A held change released: the order's work read again (its branch
    /// and base as they were when the change was held), the kept commit
    /// pushed, and the answer the job would have given then.
    pub(super) async fn work_released(
        &self,
        run: &mut JobRun<'_>,
        order: &Order,
        held: HeldCommit,
    ) -> Result<Done, Failure> {
        let mut work = self.task(run, order).await?;
        work.branch = held.branch.clone();
        work.base = held.base.clone();
        self.release(run, &held).await?;
        run.steps.done(Stage::Released);
        self.answer(run, Answer::released(work, held)).await
    }

    /// The gate's policy for a job's work: the operator's for its
    /// repository, widened by what a maintainer allowed.
    pub(super) fn policy(&self, work: &Work, job: &crate::job::Job) -> forgehand_gate::GatePolicy {
        work.allowed
            .widen(self.config.policy_for(&job.repo.full_name()))
    }
}

/// What a job works on.
pub(super) struct Work {
    pub branch: String,
    pub base: String,
    /// The task, for the agent.
    pub prompt: String,
    /// A follow-up's pull request and the review threads to answer.
    pub follow_up: Option<(forgehand_forge::api::PullRequest, Vec<ReviewComment>)>,
    /// `/forgehand plan`: the agent's summary is the answer, nothing is pushed.
    pub plan_only: bool,
    /// What a maintainer allowed this once (`allow-sensitive`,
    /// `allow-destructive`).
    pub allowed: Allowed,
}

/// How a job's work ended well.
pub(super) enum Done {
    PullRequest {
        number: u64,
        url: String,
        /// A follow-up pushed to an existing pull request.
        updated: bool,
        evidence: Box<Evidence>,
    },
    Planned {
        plan: String,
    },
}

/// What the pull request shows it was made with: the environment, what
/// was tested and how it came out, what was not committed.
pub(super) struct Evidence {
    pub environment: Option<EnvironmentReport>,
    pub testing: Option<Testing>,
    pub left_out: Vec<String>,
    /// Files the change edits that define the environment: it stays the
    /// base branch's, and the pull request says so.
    pub drift: Vec<String>,
    /// Its tests fail: opened as a draft.
    pub draft: bool,
}
