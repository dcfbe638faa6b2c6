//! One attempt of one authorized job: the context every stage takes.

use std::time::Instant;

use forgehand_forge::api::{ForgeApi, RepoRef};
use secrecy::SecretString;

use super::status::StatusComment;
use crate::job::{Job, StepTime};
use crate::store::ClaimedJob;
use forgehand_agent::prompts::Prompts;
use forgehand_jobcore::Stage;

/// What the stages of an authorized job share: the job, the forge, its
/// status comment, the prompts (loaded once), every secret of the job,
/// and the steps done so far. The job directory is the working copy's
/// (`stages::working_copy`), a guard removed on every way out.
pub(super) struct JobRun<'a> {
    pub claimed: &'a ClaimedJob,
    pub api: &'a dyn ForgeApi,
    pub repo: &'a RepoRef,
    pub status: &'a StatusComment,
    pub prompts: Prompts,
    /// Every secret of this job by name: the configured ones first (their
    /// names are what a finding reports), then the model's key, then
    /// (once the working copy has it) the forge's credential for this
    /// job. Kept out of transcripts, commits and what is sent.
    pub secrets: Vec<(String, SecretString)>,
    pub steps: Steps,
    pub started: Instant,
}

impl JobRun<'_> {
    pub fn job(&self) -> &Job {
        &self.claimed.job
    }

    /// The status comment's checklist at `stage`. Not worth failing the
    /// job over: the final edit says how it ended.
    pub async fn progress(&self, stage: Stage) {
        let steps = &self.steps;
        // An attempt that found its commit pushed by an earlier one: the
        // stages before were done there.
        let done = |s: Stage| steps.has(s) || steps.has(Stage::Resumed);
        let _ = self
            .status
            .progress(self.api, self.repo, stage, &done)
            .await;
    }
}

/// Each step's time, as the job's result records it.
pub(super) struct Steps {
    last: Instant,
    pub list: Vec<StepTime>,
    /// Where the agent's transcript is, once there is one.
    pub transcript: Option<String>,
    /// What the agent used and cost, once it ran.
    pub spend: Option<forgehand_model::Spend>,
}

impl Steps {
    pub fn new() -> Self {
        Steps {
            last: Instant::now(),
            list: Vec::new(),
            transcript: None,
            spend: None,
        }
    }

    /// Whether `stage` was done in this attempt.
    pub fn has(&self, stage: Stage) -> bool {
        self.list.iter().any(|s| s.step == stage.name())
    }

    pub fn done(&mut self, stage: Stage) {
        let now = Instant::now();
        self.list.push(StepTime {
            step: stage.name().to_owned(),
            ms: (now - self.last).as_millis() as u64,
        });
        self.last = now;
    }
}
