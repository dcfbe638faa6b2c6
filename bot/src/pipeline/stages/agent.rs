//! Stage 2: the agent, in a sandbox over the working copy: the model
//! loop runs here on the host, every tool call in the sandbox, within the
//! host's budgets, into a transcript with the job's secrets redacted.

use secrecy::SecretString;

use super::super::work::Steps;
use super::super::{Failure, Pipeline};
use super::working_copy::WorkingCopy;
use crate::agent::prompts::Prompts;
use crate::agent::tools::ThreadReply;
use crate::agent::{Outcome, Session, Transcript};
use crate::store::ClaimedJob;

/// What the agent said when it called `finish`, and what it cost.
pub(in crate::pipeline) struct Finished {
    pub title: String,
    pub summary: String,
    pub replies: Vec<ThreadReply>,
    pub cost_usd: f64,
    pub turns: u32,
}

impl Pipeline {
    /// Every secret of this job by name: the configured ones first (their
    /// names are what a finding reports), then the forge's credential
    /// for this job, then the model's key.
    pub(in crate::pipeline) fn job_secrets(
        &self,
        copy: &WorkingCopy,
    ) -> Vec<(String, SecretString)> {
        let mut secrets = self.secrets.to_vec();
        secrets.push(("forge token".to_owned(), copy.token.clone()));
        if let Some(key) = &self.config.model.api_key {
            secrets.push(("model.api_key".to_owned(), key.clone()));
        }
        secrets
    }

    pub(in crate::pipeline) async fn agent(
        &self,
        claimed: &ClaimedJob,
        copy: &WorkingCopy,
        prompts: &Prompts,
        prompt: String,
        steps: &mut Steps,
    ) -> Result<Finished, Failure> {
        let tree = copy.job_dir.tree();
        let mut transcript = Transcript::create(
            &self.config.agent.transcript_dir,
            &format!("job-{}-{}", claimed.id, claimed.run),
            self.job_secrets(copy)
                .into_iter()
                .map(|(_, secret)| secret)
                .collect(),
        )
        .map_err(Failure::infra)?;
        steps.transcript = Some(transcript.path().display().to_string());
        let session = Session {
            config: &self.config,
            model: &self.config.model,
            backend: &*self.backend,
            tree: &tree,
            prompts,
            task: prompt,
        };
        let started = session.start().await.map_err(Failure::infra)?;
        steps.done(super::Stage::Sandbox);
        let report = started.run(&mut transcript).await;
        match report.outcome {
            Outcome::Finished {
                summary,
                title,
                replies,
            } => Ok(Finished {
                title,
                summary,
                replies,
                cost_usd: report.cost_usd,
                turns: report.turns,
            }),
            Outcome::Stopped { reason, message } => Err(Failure::new(reason, message)),
        }
    }
}
