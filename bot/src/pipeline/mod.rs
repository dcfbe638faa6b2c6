//! The job pipeline: authorize the sender, 👀, one status comment kept up
//! to date, the working copy from the mirror, the agent in the sandbox,
//! the gate, the push, and the pull request; the status comment ends with
//! a link or a reason code, never "working". Commands (`stop`, `retry`,
//! `plan`, `go`, `help`) are read here too.

// No function here over 80 lines (clippy.toml): a stage is a function.
#![warn(clippy::too_many_lines)]

mod orders;
mod prepare;
mod stages;
pub mod status;
mod work;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use forgehand_forge::api::{
    ForgeApi, ForgeError, Outbound, ReactionTarget, RepoRef, RetryPolicy, Retrying,
};
use forgehand_forge::git::SecretScanner;
use forgehand_forge::ForgeKind;
use forgehand_sandbox::Backend;
use secrecy::SecretString;
use serde_json::{json, Value};
use tracing::info;

use crate::config::Config;
use crate::job::{Job, JobCommand, Task};
use crate::queue::{JobContext, JobError, JobHandler};
use crate::reason::Reason;
use crate::store::ClaimedJob;
use orders::{Order, Resolved};
use status::StatusComment;
use work::{Done, Steps};

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
}

/// Why a job stopped, as its reason code and one line for people.
#[derive(Debug)]
struct Failure {
    reason: Reason,
    message: String,
    retryable: bool,
}

impl Failure {
    fn new(reason: Reason, message: impl Into<String>) -> Self {
        Failure {
            reason,
            message: message.into(),
            retryable: false,
        }
    }

    fn forge(error: ForgeError) -> Self {
        let retryable = error.is_transient();
        Failure {
            reason: Reason::ForgeError,
            message: error.to_string(),
            retryable,
        }
    }

    fn stopped(reason: &str) -> Self {
        Failure::new(Reason::Stopped, reason)
    }

    fn infra(message: impl std::fmt::Display) -> Self {
        Failure {
            reason: Reason::Infra,
            message: message.to_string(),
            retryable: true,
        }
    }
}

impl Pipeline {
    pub fn new(
        config: Config,
        github: Option<Arc<dyn ForgeApi>>,
        gitea: Option<Arc<dyn ForgeApi>>,
        backend: Arc<dyn Backend>,
        isolation: String,
    ) -> Self {
        let secrets = crate::host_secrets::host_secrets(&config);
        Pipeline {
            config,
            github,
            gitea,
            backend,
            isolation,
            secrets,
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
impl JobHandler for Pipeline {
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
            tracing::warn!(job_id = claimed.id, %error, "the dead job's status comment could not be set");
        }
    }

    /// A job's stages: answers that need no work, authorize, resolve the
    /// order, supersede, the status comment, the work, the report.
    async fn run(&self, claimed: &ClaimedJob, cx: JobContext) -> Result<Value, JobError> {
        let job = &claimed.job;
        let api = self.api(job.forge)?;
        let repo = RepoRef::new(&job.repo.owner, &job.repo.name);
        if let Some(answered) = self.answer_at_once(job, &*api, &repo).await {
            return answered;
        }
        if !self.authorized(&*api, &repo, job).await? {
            return Ok(json!({"outcome": "failed", "reason": Reason::Denied}));
        }
        if let Task::Command {
            command: JobCommand::Stop,
            comment_id,
        } = &job.task
        {
            return self.stop(claimed, &cx, &*api, &repo, *comment_id).await;
        }
        let (order, allow_sensitive) = match self.resolve(claimed, &cx).await? {
            Resolved::Work {
                order,
                allow_sensitive,
            } => (order, allow_sensitive),
            Resolved::Answer { reply, outcome } => {
                api.create_comment(&repo, job.target, &reply)
                    .await
                    .map_err(forge_err)?;
                return Ok(json!({"outcome": outcome}));
            }
        };
        let status = self.acknowledge(claimed, &cx, &*api, &repo).await?;
        let started = Instant::now();
        let mut steps = Steps::new();
        steps.done(stages::Stage::Authorized);
        let work = async {
            let mut work = self.prepare(job, &*api, &repo, &order).await?;
            work.allow_sensitive = allow_sensitive;
            self.work(claimed, &*api, &repo, &status, &mut steps, work)
                .await
        };
        // A stop drops the work where it is: the sandbox goes with it.
        let outcome = tokio::select! {
            outcome = work => outcome,
            _ = cx.cancel.cancelled() => Err(Failure::stopped(
                cx.stop_reason().unwrap_or("the node is shutting down"),
            )),
        };
        let ended = Ended {
            claimed,
            api: &*api,
            repo: &repo,
            status: &status,
            steps: &steps,
            seconds: started.elapsed().as_secs(),
        };
        match outcome {
            Ok(done) => self.report_done(&ended, done).await,
            Err(failure) => Err(self.report_failure(&ended, &cx, failure).await),
        }
    }
}

/// What the report of a job's end needs.
struct Ended<'a> {
    claimed: &'a ClaimedJob,
    api: &'a dyn ForgeApi,
    repo: &'a RepoRef,
    status: &'a StatusComment,
    steps: &'a Steps,
    seconds: u64,
}

impl Pipeline {
    /// `help`, and a command that could not be read: one reply, no work.
    async fn answer_at_once(
        &self,
        job: &Job,
        api: &dyn ForgeApi,
        repo: &RepoRef,
    ) -> Option<Result<Value, JobError>> {
        let (text, outcome) = match &job.task {
            Task::Command {
                command: JobCommand::Help,
                ..
            } => (crate::command::help_text(&self.config.bot.username), "help"),
            Task::ExplainCommandError { message, .. } => (message.clone(), "explained"),
            _ => return None,
        };
        Some(
            api.create_comment(repo, job.target, &text)
                .await
                .map(|_| json!({ "outcome": outcome }))
                .map_err(forge_err),
        )
    }

    /// The order read against the target's history; older waiting work
    /// on the target gives way (this sender may command the bot).
    async fn resolve(&self, claimed: &ClaimedJob, cx: &JobContext) -> Result<Resolved, JobError> {
        let resolved = orders::resolve(claimed, &*cx.store)
            .await
            .map_err(|e| JobError::retryable(e.to_string()))?;
        if matches!(resolved, Resolved::Work { .. }) {
            let superseded = cx
                .store
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
        cx: &JobContext,
        api: &dyn ForgeApi,
        repo: &RepoRef,
    ) -> Result<StatusComment, JobError> {
        let job = &claimed.job;
        let reaction = match &job.task {
            Task::Request { comment_id, .. } | Task::Command { comment_id, .. } => {
                ReactionTarget::Comment(*comment_id)
            }
            _ => ReactionTarget::Issue(job.target),
        };
        api.react_eyes(repo, reaction).await.map_err(forge_err)?;
        let attempt = self.attempt(claimed, cx).await;
        StatusComment::open(
            api,
            repo,
            job.target,
            claimed.id,
            attempt,
            &self.bot_identity(),
        )
        .await
        .map_err(forge_err)
    }

    /// What the order asks the agent to do.
    async fn prepare(
        &self,
        job: &Job,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        order: &Order,
    ) -> Result<work::Work, Failure> {
        match order {
            Order::Issue { plan } => self.issue_work(job, api, repo, plan).await,
            Order::Review {
                review_id,
                state,
                body,
            } => {
                let review = prepare::AnnouncedReview {
                    id: *review_id,
                    state: *state,
                    body,
                };
                self.review_work(job, api, repo, &review).await
            }
            Order::PullRequestRequest { text } => {
                self.pull_request_request_work(job, api, repo, text).await
            }
        }
    }

    /// The status comment's final form and the job's result.
    async fn report_done(&self, ended: &Ended<'_>, done: Done) -> Result<Value, JobError> {
        let Ended {
            api,
            repo,
            status,
            steps,
            seconds,
            ..
        } = ended;
        let (text, result) = match done {
            Done::PullRequest {
                number,
                url,
                updated,
            } => (
                status::done(&url, number, updated),
                json!({"outcome": "succeeded", "pull_request": number, "url": url}),
            ),
            Done::Planned { plan } => (
                status::planned(&plan, &self.config.bot.username),
                json!({"outcome": "planned", "plan": plan}),
            ),
        };
        status.set(*api, repo, &text).await.map_err(forge_err)?;
        let mut result = result;
        result["seconds"] = json!(seconds);
        result["steps"] = json!(steps.list);
        result["transcript"] = json!(steps.transcript);
        Ok(result)
    }

    /// Says why in the status comment (a retry as a retry) and the job's
    /// record; the queue's verdict follows from the failure.
    async fn report_failure(
        &self,
        ended: &Ended<'_>,
        cx: &JobContext,
        failure: Failure,
    ) -> JobError {
        let Ended {
            claimed,
            api,
            repo,
            status,
            steps,
            seconds,
        } = ended;
        let text = if failure.reason == Reason::Stopped {
            status::stopped(&failure.message)
        } else if failure.retryable && status.attempt().has_next() {
            status::retrying(status.attempt(), failure.reason, &failure.message)
        } else {
            status::failed(failure.reason, &failure.message)
        };
        // Whatever else failed, the status comment must not say "working".
        let _ = status.set(*api, repo, &text).await;
        let record = json!({"outcome": "failed", "reason": failure.reason,
            "message": failure.message, "seconds": seconds,
            "steps": steps.list, "transcript": steps.transcript});
        if let Err(error) = cx.store.record_result(claimed.id, &record).await {
            tracing::warn!(%error, "keeping the failed job's steps failed");
        }
        let mut text = format!("{}: {}", failure.reason, failure.message);
        if let Some(path) = &steps.transcript {
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

    /// Which attempt this is, and how the last one ended (for the status
    /// comment: a retry shows as a retry).
    async fn attempt(&self, claimed: &ClaimedJob, cx: &JobContext) -> status::Attempt {
        let after = if claimed.attempt > 1 {
            match cx.store.job(claimed.id).await {
                Ok(Some(detail)) => detail.job.last_error,
                _ => None,
            }
        } else {
            None
        };
        status::Attempt {
            number: claimed.attempt,
            of: claimed.max_attempts,
            after,
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
        let reply = format!(
            "@{} thanks for asking! I only take requests from people with write access to this repository, so I will leave this one to a maintainer.",
            job.requested_by
        );
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
    ) -> Result<Value, JobError> {
        let job = &claimed.job;
        let reason = format!("stopped by @{}", job.requested_by);
        let stopped = cx
            .store
            .request_stop(&job.target_key(), claimed.id, &reason)
            .await
            .map_err(|e| JobError::retryable(e.to_string()))?;
        if stopped.is_empty() {
            let reply = format!(
                "@{} there is nothing to stop: no job of mine is running or waiting on #{}.",
                job.requested_by, job.target
            );
            api.create_comment(repo, job.target, &reply)
                .await
                .map_err(forge_err)?;
        } else {
            api.react_eyes(repo, ReactionTarget::Comment(comment_id))
                .await
                .map_err(forge_err)?;
        }
        Ok(json!({"outcome": "stopped", "jobs": stopped}))
    }
}
