//! The job pipeline: authorize the sender, 👀, one status comment kept up
//! to date, the working copy from the mirror, the agent in the sandbox,
//! the gate, the push, and the pull request; the status comment ends with
//! a link or a reason code, never "working". Commands (`stop`, `retry`,
//! `plan`, `go`, `help`) are read here too.

// No function here over 80 lines (clippy.toml): a stage is a function.
#![warn(clippy::too_many_lines)]

mod flow;
mod orders;
mod prepare;
pub mod replies;
mod run;
mod stages;
pub mod status;
#[cfg(test)]
mod texts;
mod work;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use forgehand_forge::api::{
    ForgeApi, ForgeError, Outbound, ReactionTarget, RepoRef, RetryPolicy, Retrying,
};
use forgehand_forge::ForgeKind;
use forgehand_gate::SecretScanner;
use forgehand_sandbox::Backend;
use secrecy::SecretString;
use tracing::info;

use crate::config::Config;
use crate::job::{Command, Job, JobOutcome, JobResult, Task};
use crate::queue::{JobContext, JobError};
use crate::store::ClaimedJob;
use forgehand_agent::prompts::Prompts;
use forgehand_jobcore::environment::Environments;
use forgehand_jobcore::{Core, Failure};
use forgehand_types::reason::Reason;
use orders::{Assignment, Resolved};
use run::{JobRun, Steps};
use status::StatusComment;
use work::Done;

/// Runs jobs against the forges' APIs.
pub struct Pipeline {
    config: Config,
    github: Option<Arc<dyn ForgeApi>>,
    gitea: Option<Arc<dyn ForgeApi>>,
    backend: Arc<dyn Backend>,
    /// How the sandbox isolates, for the pull request's footer.
    isolation: String,
    /// The host's own credentials, by name: kept out of what is sent to
    /// the forge, of transcripts and of pushed changes.
    secrets: Vec<(String, SecretString)>,
    /// Repositories' environments: their cache, the egress's policy.
    environments: Arc<Environments>,
}

impl Pipeline {
    pub fn new(
        config: Config,
        github: Option<Arc<dyn ForgeApi>>,
        gitea: Option<Arc<dyn ForgeApi>>,
        backend: Arc<dyn Backend>,
        isolation: String,
    ) -> Result<Self, String> {
        let secrets = crate::host_secrets::host_secrets(&config);
        let environments = Arc::new(Environments::new(&config.environment, &config.sandbox)?);
        Ok(Pipeline {
            config,
            github,
            gitea,
            backend,
            isolation,
            secrets,
            environments,
        })
    }

    /// The one job core, with the sections of the configuration it reads.
    fn core(&self) -> Core<'_> {
        Core {
            backend: &*self.backend,
            sandbox: &self.config.sandbox,
            git: &self.config.git,
            agent: &self.config.agent,
            model: self.config.model.settings(),
            price: self.config.model.price(),
            test_retries: self.config.environment.test_retries,
        }
    }

    /// The forge's API for a job: every call retried within the attempt
    /// when a passing fault ends it, and behind the outbound filter, so
    /// every text the job sends is redacted of the host's secrets.
    fn api(&self, forge: ForgeKind) -> Result<Arc<dyn ForgeApi>, JobError> {
        let api = Arc::new(Retrying::new(self.raw_api(forge)?, RetryPolicy::default()));
        let scanner = SecretScanner::new(self.secrets.iter().cloned());
        Ok(Arc::new(Outbound::new(api, scanner)))
    }

    fn raw_api(&self, forge: ForgeKind) -> Result<Arc<dyn ForgeApi>, JobError> {
        let (api, keys) = match forge {
            ForgeKind::Github => (
                &self.github,
                "github.token or github.app_id + github.private_key_path",
            ),
            ForgeKind::Gitea | ForgeKind::Forgejo => {
                (&self.gitea, "gitea.base_url and gitea.token")
            }
        };
        api.clone().ok_or_else(|| {
            JobError::permanent(format!("no {} API credentials: set {keys}", forge.as_str()))
        })
    }
}

fn forge_err(e: ForgeError) -> JobError {
    if e.is_transient() {
        JobError::retryable(e.to_string())
    } else {
        JobError::permanent(e.to_string())
    }
}

#[async_trait]
impl forgehand_queue::JobHandler for Pipeline {
    type Output = JobResult;

    /// The worker died on the job's last attempt: its status comment, if
    /// it has one, must not say "working" for good.
    async fn dead_lettered(&self, claimed: &ClaimedJob, error: &str) {
        let job = &claimed.job;
        let Ok(api) = self.api(job.forge) else {
            return;
        };
        let repo = RepoRef::new(&job.repo.owner, &job.repo.name);
        let bot = self.bot_identity();
        let found = StatusComment::find(&*api, &repo, job.target, claimed.id, &bot).await;
        let result = match found {
            Ok(Some(status)) => {
                status
                    .set(&*api, &repo, &status::failed(Reason::Infra, error))
                    .await
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(error) = result {
            tracing::warn!(job_id = claimed.id.get(), %error, "the dead job's status comment could not be set");
        }
    }

    /// A job's stages: answers that need no work, authorize, resolve the
    /// order, supersede, the status comment, the work, the report.
    async fn run(&self, claimed: &ClaimedJob, cx: JobContext) -> Result<JobResult, JobError> {
        let job = &claimed.job;
        let api = self.api(job.forge)?;
        let repo = RepoRef::new(&job.repo.owner, &job.repo.name);
        if let Some(answered) = self.answer_at_once(job, &*api, &repo).await {
            return answered;
        }
        if !self.authorized(&*api, &repo, job).await? {
            return Ok(JobResult::failed(Reason::Denied, None));
        }
        if let Task::Command {
            command: Command::Stop,
            comment_id,
        } = &job.task
        {
            return self.stop(claimed, &cx, &*api, &repo, *comment_id).await;
        }
        let assignment = match self.resolve(claimed, &cx).await? {
            Resolved::Answer { reply, outcome } => {
                api.create_comment(&repo, job.target, &reply)
                    .await
                    .map_err(forge_err)?;
                return Ok(JobResult::new(outcome));
            }
            Resolved::Do(assignment) => assignment,
        };
        let status = self
            .acknowledge(claimed, &*api, &repo, assignment.checklist())
            .await?;
        let mut run = JobRun {
            claimed,
            api: &*api,
            repo: &repo,
            status: &status,
            // The operator's templates replace these once the work starts
            // (reading them can fail, and a failure is reported like any).
            prompts: Prompts::load(None).expect("the built-in prompts load"),
            secrets: self.secrets.clone(),
            steps: Steps::new(),
            started: Instant::now(),
        };
        run.steps.done(forgehand_jobcore::Stage::Authorized);
        // A stop drops the work where it is: the sandbox goes with it.
        let outcome = tokio::select! {
            outcome = self.authorized_work(&mut run, assignment) => outcome,
            _ = cx.cancel.cancelled() => Err(Failure::stopped(
                cx.stop_reason().unwrap_or("the node is shutting down"),
            )),
        };
        match outcome {
            Ok(done) => self.report_done(&run, done).await,
            Err(failure) => Err(self.report_failure(&run, &cx, failure).await),
        }
    }
}

impl Pipeline {
    /// The work of an authorized job, with what it runs with: the
    /// operator's prompts, loaded once, and every secret of the job.
    async fn authorized_work(
        &self,
        run: &mut JobRun<'_>,
        assignment: Assignment,
    ) -> Result<Done, Failure> {
        run.prompts =
            Prompts::load(self.config.agent.prompts_dir.as_deref()).map_err(Failure::infra)?;
        if let Some(key) = &self.config.model.api_key {
            run.secrets.push(("model.api_key".to_owned(), key.clone()));
        }
        match assignment {
            Assignment::Work { order, allowed } => self.work(run, &order, allowed).await,
            Assignment::Release { order, held } => self.work_released(run, &order, *held).await,
        }
    }

    /// `help`, and a command that could not be read: one reply, no work.
    async fn answer_at_once(
        &self,
        job: &Job,
        api: &dyn ForgeApi,
        repo: &RepoRef,
    ) -> Option<Result<JobResult, JobError>> {
        let (text, outcome) = match &job.task {
            Task::Command {
                command: Command::Help,
                ..
            } => (
                crate::command::help_text(&self.config.bot.username),
                JobOutcome::Help,
            ),
            Task::ExplainCommandError { message, .. } => (message.clone(), JobOutcome::Explained),
            _ => return None,
        };
        Some(
            api.create_comment(repo, job.target, &text)
                .await
                .map(|_| JobResult::new(outcome))
                .map_err(forge_err),
        )
    }

    /// The order read against the target's history; older waiting work
    /// on the target gives way (this sender may command the bot).
    async fn resolve(&self, claimed: &ClaimedJob, cx: &JobContext) -> Result<Resolved, JobError> {
        let resolved = orders::resolve(claimed, &*cx.ledger)
            .await
            .map_err(|e| JobError::retryable(e.to_string()))?;
        if matches!(resolved, Resolved::Do(_)) {
            let superseded = cx
                .ledger
                .supersede_waiting(&claimed.job.target_key(), claimed.id)
                .await
                .map_err(|e| JobError::retryable(e.to_string()))?;
            if !superseded.is_empty() {
                info!(?superseded, "older waiting requests superseded");
            }
        }
        Ok(resolved)
    }

    /// 👀 on what asked, and the job's one status comment.
    async fn acknowledge(
        &self,
        claimed: &ClaimedJob,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        checklist: status::Checklist,
    ) -> Result<StatusComment, JobError> {
        let job = &claimed.job;
        let reaction = match &job.task {
            Task::Request { comment_id, .. } | Task::Command { comment_id, .. } => {
                ReactionTarget::Comment(*comment_id)
            }
            _ => ReactionTarget::Issue(job.target),
        };
        api.react_eyes(repo, reaction).await.map_err(forge_err)?;
        let attempt = status::Attempt {
            number: claimed.attempt,
            of: claimed.max_attempts,
            after: claimed.last_error.clone().filter(|_| claimed.attempt > 1),
        };
        StatusComment::open(
            api,
            repo,
            job.target,
            claimed.id,
            attempt,
            checklist,
            &self.bot_identity(),
        )
        .await
        .map_err(forge_err)
    }

    /// The status comment's final form and the job's result.
    async fn report_done(&self, run: &JobRun<'_>, done: Done) -> Result<JobResult, JobError> {
        let (text, mut result) = match done {
            Done::PullRequest {
                number,
                url,
                updated,
                evidence,
            } => {
                let text = status::done(
                    &url,
                    number,
                    updated,
                    evidence.environment.as_ref(),
                    evidence.testing.as_ref(),
                );
                let result = JobResult {
                    pull_request: Some(number),
                    url: Some(url),
                    environment: evidence.environment.clone(),
                    testing: evidence.testing.clone(),
                    left_out: evidence.left_out.clone(),
                    ..JobResult::new(JobOutcome::Succeeded)
                };
                (text, result)
            }
            Done::Planned { plan } => {
                let text = status::planned(&plan, &self.config.bot.username);
                let result = JobResult {
                    plan: Some(plan),
                    ..JobResult::new(JobOutcome::Planned)
                };
                (text, result)
            }
        };
        run.status
            .set(run.api, run.repo, &text)
            .await
            .map_err(forge_err)?;
        result.seconds = Some(run.started.elapsed().as_secs());
        result.steps = run.steps.list.clone();
        result.transcript = run.steps.transcript.clone();
        result.spend = run.steps.spend;
        Ok(result)
    }

    /// Says why in the status comment (a retry as a retry) and the job's
    /// record; the queue's verdict follows from the failure.
    async fn report_failure(
        &self,
        run: &JobRun<'_>,
        cx: &JobContext,
        failure: Failure,
    ) -> JobError {
        let status = run.status;
        let text = if failure.reason == Reason::Stopped {
            status::stopped(&failure.message)
        } else if failure.retryable && status.attempt().has_next() {
            status::retrying(status.attempt(), failure.reason, &failure.message)
        } else if let (Some(held), Reason::Gate(reason)) = (&failure.held, failure.reason) {
            status::held(reason, held)
        } else {
            status::failed(failure.reason, &failure.message)
        };
        // Whatever else failed, the status comment must not say "working".
        let _ = status.set(run.api, run.repo, &text).await;
        let record = JobResult {
            seconds: Some(run.started.elapsed().as_secs()),
            steps: run.steps.list.clone(),
            transcript: run.steps.transcript.clone(),
            spend: run.steps.spend,
            held: failure.held.as_deref().cloned(),
            ..JobResult::failed(failure.reason, Some(failure.message.clone()))
        };
        let id = run.claimed.id;
        if let Err(error) = cx.ledger.record_result(id, &record.to_value()).await {
            tracing::warn!(%error, "keeping the failed job's steps failed");
        }
        let mut text = format!("{}: {}", failure.reason, failure.message);
        if let Some(path) = &run.steps.transcript {
            text.push_str(&format!(" (transcript: {path})"));
        }
        if failure.reason == Reason::Stopped {
            JobError::Cancelled(failure.message)
        } else if failure.retryable {
            JobError::retryable(text)
        } else {
            JobError::permanent(text)
        }
    }
}

impl Pipeline {
    fn bot_identity(&self) -> crate::trigger::BotIdentity {
        crate::trigger::BotIdentity {
            username: self.config.bot.username.clone(),
            label: self.config.bot.label.clone(),
        }
    }

    /// Whether the job's sender has write access; one polite reply when not.
    async fn authorized(
        &self,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        job: &Job,
    ) -> Result<bool, JobError> {
        let permission = api
            .permission(repo, &job.requested_by)
            .await
            .map_err(forge_err)?;
        if permission.can_write() {
            return Ok(true);
        }
        let reply = replies::not_authorized(&job.requested_by);
        api.create_comment(repo, job.target, &reply)
            .await
            .map_err(forge_err)?;
        Ok(false)
    }

    /// `/forgehand stop`: the target's running job is asked to stop (it
    /// says so in its own status comment) and its waiting work cancelled.
    async fn stop(
        &self,
        claimed: &ClaimedJob,
        cx: &JobContext,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        comment_id: u64,
    ) -> Result<JobResult, JobError> {
        let job = &claimed.job;
        let reason = format!("stopped by @{}", job.requested_by);
        let stopped = cx
            .ledger
            .request_stop(&job.target_key(), claimed.id, &reason)
            .await
            .map_err(|e| JobError::retryable(e.to_string()))?;
        if stopped.is_empty() {
            let reply = replies::nothing_to_stop(job);
            api.create_comment(repo, job.target, &reply)
                .await
                .map_err(forge_err)?;
        } else {
            api.react_eyes(repo, ReactionTarget::Comment(comment_id))
                .await
                .map_err(forge_err)?;
        }
        Ok(JobResult {
            stopped,
            ..JobResult::new(JobOutcome::Stopped)
        })
    }
}
