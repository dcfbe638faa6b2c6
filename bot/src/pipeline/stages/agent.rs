//! Stage 4: the agent, in a sandbox over the working copy, then the
//! repository's tests run by the host (a failure goes back to the agent),
//! as the job core runs every job's ([`forgehand_jobcore::agent`]). The
//! status comment's checklist moves and the job's steps are timed as it
//! goes.

use async_trait::async_trait;
use forgehand_model::Spend;

use super::super::run::JobRun;
use super::super::work::Work;
use super::super::{Failure, Pipeline};
use super::working_copy::WorkingCopy;
use forgehand_agent::tools::ThreadReply;
use forgehand_agent::Outcome;
use forgehand_jobcore::environment::{Prepared, Testing};
use forgehand_jobcore::Stage;
use forgehand_jobcore::{AgentTask, Progress};

/// What the agent said when it called `finish`, what it cost, and what
/// was tested.
pub(in crate::pipeline) struct Finished {
    pub title: String,
    pub summary: String,
    pub replies: Vec<ThreadReply>,
    pub spend: Option<Spend>,
    pub turns: u32,
    pub testing: Testing,
}

impl Pipeline {
    pub(in crate::pipeline) async fn agent(
        &self,
        run: &mut JobRun<'_>,
        copy: &WorkingCopy,
        work: &Work,
        environment: Option<&Prepared>,
    ) -> Result<Finished, Failure> {
        let claimed = run.claimed;
        // The task borrows these while the job's run hears the progress.
        let (prompts, secrets) = (run.prompts.clone(), run.secrets.clone());
        let policy = self.policy(work, run.job());
        // A plan changes nothing: nothing to test, nothing to propose.
        let test = environment
            .and_then(|e| e.declared.test.as_deref())
            .filter(|_| !work.plan_only);
        let task = AgentTask {
            prompt: work.prompt.clone(),
            prompts: &prompts,
            test,
            propose: environment.is_none() && !work.plan_only,
            review: !work.plan_only,
            policy,
            rules: &copy.rules,
            secrets: &secrets,
            transcript: &format!("job-{}-{}", claimed.id, claimed.run),
        };
        let worked = self.core().agent(&copy.copy, task, run).await?;
        run.steps.transcript = Some(worked.transcript.path().display().to_string());
        let report = worked.report;
        run.steps.spend = Some(report.spend);
        match report.outcome {
            Outcome::Finished {
                summary,
                title,
                replies,
            } => Ok(Finished {
                title,
                summary,
                replies,
                spend: Some(report.spend),
                turns: report.turns,
                testing: worked.testing,
            }),
            Outcome::Stopped { reason, message } => Err(Failure::new(reason, message)),
        }
    }
}

/// The job's run hears the core's progress: the status comment's
/// checklist moves, the steps are timed.
#[async_trait]
impl Progress for JobRun<'_> {
    async fn starting(&mut self, stage: Stage) {
        self.progress(stage).await;
    }

    fn done(&mut self, stage: Stage) {
        self.steps.done(stage);
    }
}
