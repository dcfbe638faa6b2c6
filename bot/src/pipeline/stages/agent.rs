//! Stage 2: the agent, in a sandbox over the working copy: the model
//! loop runs here on the host, every tool call in the sandbox, within the
//! host's budgets, into a transcript with the job's secrets redacted.

use super::super::run::JobRun;
use super::super::work::Work;
use super::super::{Failure, Pipeline};
use super::working_copy::WorkingCopy;
use super::Stage;
use crate::agent::tools::ThreadReply;
use crate::agent::{Outcome, Session, Transcript};

/// What the agent said when it called `finish`, and what it cost.
pub(in crate::pipeline) struct Finished {
    pub title: String,
    pub summary: String,
    pub replies: Vec<ThreadReply>,
    pub cost_usd: f64,
    pub turns: u32,
}

impl Pipeline {
    pub(in crate::pipeline) async fn agent(
        &self,
        run: &mut JobRun<'_>,
        copy: &WorkingCopy,
        work: &Work,
    ) -> Result<Finished, Failure> {
        run.progress(Stage::Agent).await;
        let tree = copy.job_dir.tree();
        let claimed = run.claimed;
        let mut transcript = Transcript::create(
            &self.config.agent.transcript_dir,
            &format!("job-{}-{}", claimed.id, claimed.run),
            run.secret_values(),
        )
        .map_err(Failure::infra)?;
        run.steps.transcript = Some(transcript.path().display().to_string());
        let session = Session {
            config: &self.config,
            model: &self.config.model,
            backend: &*self.backend,
            tree: &tree,
            prompts: &run.prompts,
            task: work.prompt.clone(),
        };
        let started = session.start().await.map_err(Failure::infra)?;
        run.steps.done(Stage::Sandbox);
        let report = started.run(&mut transcript).await;
        match report.outcome {
            Outcome::Finished {
                summary,
                title,
                replies,
            } => {
                run.steps.done(Stage::Agent);
                Ok(Finished {
                    title,
                    summary,
                    replies,
                    cost_usd: report.cost_usd,
                    turns: report.turns,
                })
            }
            Outcome::Stopped { reason, message } => Err(Failure::new(reason, message)),
        }
    }
}
