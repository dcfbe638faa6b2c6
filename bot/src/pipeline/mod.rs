//! The job pipeline for an issue: authorize the sender, 👀, one status
//! comment kept up to date, the working copy from the mirror, the agent in
//! the sandbox, the gate, the push, and the pull request; the status
//! comment ends with a link or a reason code, never "working".

pub mod status;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use forgehand_forge::api::{
    ForgeApi, ForgeError, NewPullRequest, ReactionTarget, RepoRef, ReviewComment,
};
use forgehand_forge::git::{
    self, deliver, gate, Checks, CommitRequest, Credentials, DeliverError, MirrorCache,
    PushRequest, SecretScanner,
};
use forgehand_forge::ForgeKind;
use forgehand_sandbox::Backend;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::agent::prompts::{trusted_comments, wrap, ForgeText, Prompts};
use crate::agent::tools::{Files, Toolbox};
use crate::agent::{run_agent, AgentSettings, Budgets, Outcome, Transcript};
use crate::config::Config;
use crate::job::{JobCommand, Task};
use crate::model::{Message, ModelClient};
use crate::queue::{JobError, JobHandler};
use crate::store::ClaimedJob;

/// Runs jobs against the forges' APIs.
pub struct Pipeline {
    config: Config,
    github: Option<Arc<dyn ForgeApi>>,
    gitea: Option<Arc<dyn ForgeApi>>,
    backend: Arc<dyn Backend>,
    /// How the sandbox isolates, for the pull request's footer.
    isolation: String,
}

/// Why a job stopped, as its reason code and one line for people.
#[derive(Debug)]
struct Failure {
    reason: String,
    message: String,
    retryable: bool,
}

impl Failure {
    fn new(reason: &str, message: impl Into<String>) -> Self {
        Failure {
            reason: reason.into(),
            message: message.into(),
            retryable: false,
        }
    }

    fn forge(error: ForgeError) -> Self {
        let retryable = matches!(error, ForgeError::RateLimited { .. } | ForgeError::Other(_));
        Failure {
            reason: "forge_error".into(),
            message: error.to_string(),
            retryable,
        }
    }

    fn infra(message: impl std::fmt::Display) -> Self {
        Failure {
            reason: "infra".into(),
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
        Pipeline {
            config,
            github,
            gitea,
            backend,
            isolation,
        }
    }

    fn api(&self, forge: ForgeKind) -> Result<Arc<dyn ForgeApi>, JobError> {
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

#[async_trait]
impl JobHandler for Pipeline {
    async fn run(
        &self,
        claimed: &ClaimedJob,
        _cancel: CancellationToken,
    ) -> Result<Value, JobError> {
        let job = &claimed.job;
        let api = self.api(job.forge)?;
        let repo = RepoRef::new(&job.repo.owner, &job.repo.name);
        let forge_err = |e: ForgeError| match e {
            ForgeError::RateLimited { .. } | ForgeError::Other(_) => {
                JobError::retryable(e.to_string())
            }
            other => JobError::permanent(other.to_string()),
        };
        match &job.task {
            Task::Command {
                command: JobCommand::Help,
                ..
            } => {
                let text = crate::command::help_text(&self.config.bot.username);
                api.create_comment(&repo, job.target, &text)
                    .await
                    .map_err(forge_err)?;
                return Ok(json!({"outcome": "help"}));
            }
            Task::ExplainCommandError { message, .. } => {
                api.create_comment(&repo, job.target, message)
                    .await
                    .map_err(forge_err)?;
                return Ok(json!({"outcome": "explained"}));
            }
            Task::Labeled { .. }
            | Task::Assigned
            | Task::Request { .. }
            | Task::Command {
                command: JobCommand::Fix { .. },
                ..
            } if !job.on_pull_request => {}
            Task::Review { .. } if job.on_pull_request => {}
            _ => {
                info!(kind = %job.kind(), "this kind of job is not handled by the pipeline yet");
                return Ok(json!({"outcome": "unsupported", "kind": job.kind()}));
            }
        }

        let permission = api
            .permission(&repo, &job.requested_by)
            .await
            .map_err(forge_err)?;
        if !permission.can_write() {
            let reply = format!(
                "@{} thanks for asking! I only take requests from people with write access to this repository, so I will leave this one to a maintainer.",
                job.requested_by
            );
            api.create_comment(&repo, job.target, &reply)
                .await
                .map_err(forge_err)?;
            return Ok(json!({"outcome": "failed", "reason": "denied"}));
        }
        let reaction = match &job.task {
            Task::Request { comment_id, .. } | Task::Command { comment_id, .. } => {
                ReactionTarget::Comment(*comment_id)
            }
            _ => ReactionTarget::Issue(job.target),
        };
        api.react_eyes(&repo, reaction).await.map_err(forge_err)?;
        let status = api
            .create_comment(&repo, job.target, &status::working(1))
            .await
            .map_err(forge_err)?;

        let started = Instant::now();
        let mut steps = Steps::new();
        steps.done("authorized");
        let work = match &job.task {
            Task::Review {
                review_id, body, ..
            } => self.review_work(job, &*api, &repo, *review_id, body).await,
            _ => self.issue_work(job, &*api, &repo).await,
        };
        let follow_up = matches!(job.task, Task::Review { .. });
        let outcome = match work {
            Ok(work) => {
                self.work(claimed, &*api, &repo, status.id, &mut steps, work)
                    .await
            }
            Err(failure) => Err(failure),
        };
        match outcome {
            Ok((number, url)) => {
                api.edit_comment(&repo, status.id, &status::done(&url, number, follow_up))
                    .await
                    .map_err(forge_err)?;
                Ok(
                    json!({"outcome": "succeeded", "pull_request": number, "url": url,
                          "seconds": started.elapsed().as_secs(), "steps": steps.list, "transcript": steps.transcript}),
                )
            }
            Err(failure) => {
                // Whatever else failed, the status comment must not say "working".
                let _ = api
                    .edit_comment(
                        &repo,
                        status.id,
                        &status::failed(&failure.reason, &failure.message),
                    )
                    .await;
                let mut text = format!("{}: {}", failure.reason, failure.message);
                if let Some(path) = &steps.transcript {
                    text.push_str(&format!(" (transcript: {path})"));
                }
                Err(if failure.retryable {
                    JobError::retryable(text)
                } else {
                    JobError::permanent(text)
                })
            }
        }
    }
}

impl Pipeline {
    /// What an issue job works on: a new branch, the issue as its task.
    async fn issue_work(
        &self,
        job: &crate::job::Job,
        api: &dyn ForgeApi,
        repo: &RepoRef,
    ) -> Result<Work, Failure> {
        let issue = api.issue(repo, job.target).await.map_err(Failure::forge)?;
        let comments = api
            .comments(repo, job.target)
            .await
            .map_err(Failure::forge)?;
        let mut can_write: HashMap<String, bool> = HashMap::new();
        for login in std::iter::once(&issue.author).chain(comments.iter().map(|c| &c.author)) {
            if !can_write.contains_key(login) {
                let p = api.permission(repo, login).await.map_err(Failure::forge)?;
                can_write.insert(login.clone(), p.can_write());
            }
        }
        let prompts =
            Prompts::load(self.config.agent.prompts_dir.as_deref()).map_err(Failure::infra)?;
        let wrapped_issue = wrap(&ForgeText {
            kind: "issue",
            author: &issue.author,
            can_write: can_write.get(&issue.author).copied().unwrap_or(false),
            text: &format!("{}\n\n{}", issue.title, issue.body),
        });
        let forge_comments: Vec<ForgeText<'_>> = comments
            .iter()
            .map(|c| ForgeText {
                kind: "comment",
                author: &c.author,
                can_write: can_write.get(&c.author).copied().unwrap_or(false),
                text: &c.body,
            })
            .collect();
        let prompt = prompts.render(
            "new_issue.txt",
            &[
                ("number", &job.target.to_string()),
                ("repository", &repo.full_name()),
                ("issue", &wrapped_issue),
                ("comments", &trusted_comments(&forge_comments)),
            ],
        );
        Ok(Work {
            branch: self.config.git.branch_for(job.target, &issue.title),
            base: job
                .repo
                .default_branch
                .clone()
                .unwrap_or_else(|| "main".into()),
            prompt,
            follow_up: None,
        })
    }

    /// What a review follow-up works on: the pull request's own branch,
    /// the review and its threads as the task.
    async fn review_work(
        &self,
        job: &crate::job::Job,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        review_id: Option<u64>,
        review_body: &str,
    ) -> Result<Work, Failure> {
        let pr = api
            .pull_request(repo, job.target)
            .await
            .map_err(Failure::forge)?;
        if !pr.head.starts_with(self.config.git.branch_prefix()) {
            return Err(Failure::new(
                "denied",
                format!("{} is not a branch Forgehand owns", pr.head),
            ));
        }
        let threads: Vec<ReviewComment> = api
            .review_comments(repo, job.target)
            .await
            .map_err(Failure::forge)?
            .into_iter()
            .filter(|c| review_id.is_none() || c.review_id == review_id)
            .collect();
        let mut review = wrap(&ForgeText {
            kind: "review",
            author: &job.requested_by,
            can_write: true,
            text: review_body,
        });
        for thread in &threads {
            let place = match thread.line {
                Some(line) => format!("{}:{line}", thread.path),
                None => thread.path.clone(),
            };
            review.push_str("\n\n");
            review.push_str(&wrap(&ForgeText {
                kind: &format!("review thread on {place}"),
                author: &thread.author,
                can_write: true,
                text: &thread.body,
            }));
        }
        let prompts =
            Prompts::load(self.config.agent.prompts_dir.as_deref()).map_err(Failure::infra)?;
        let prompt = prompts.render(
            "review_follow_up.txt",
            &[
                ("number", &job.target.to_string()),
                ("repository", &repo.full_name()),
                ("branch", &pr.head),
                ("review", &review),
            ],
        );
        Ok(Work {
            branch: pr.head.clone(),
            base: pr.base.clone(),
            prompt,
            follow_up: Some((pr, threads)),
        })
    }

    async fn work(
        &self,
        claimed: &ClaimedJob,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        status_id: u64,
        steps: &mut Steps,
        work: Work,
    ) -> Result<(u64, String), Failure> {
        let job = &claimed.job;
        let started = Instant::now();
        let Work {
            branch,
            base,
            prompt,
            follow_up,
        } = work;
        let url = job.repo.clone_url.clone().ok_or_else(|| {
            Failure::new(
                "forge_error",
                "the webhook named no clone URL for the repository",
            )
        })?;
        let (user, token) = api.git_credentials(repo).await.map_err(Failure::forge)?;
        let credentials = Credentials::Token {
            username: user,
            token: token.clone(),
        };
        let job_dir = std::path::absolute(
            self.config
                .git
                .work_dir
                .join(format!("job-{}-{}", claimed.id, claimed.run)),
        )
        .map_err(Failure::infra)?;
        let (tree, git_dir) = (job_dir.join("tree"), job_dir.join("tree.git"));
        let _ = std::fs::remove_dir_all(&job_dir);

        // The working copy: from the mirror, on the bot's branch (its
        // existing one when a previous run pushed it).
        let mirrors = MirrorCache::new(self.config.git.mirror_dir.clone());
        let key = format!("{}/{}/{}", job.forge.as_str(), repo.owner, repo.name);
        let prepared = {
            let (url, credentials, branch, base, tree, git_dir) = (
                url.clone(),
                credentials.clone(),
                branch.clone(),
                base.clone(),
                tree.clone(),
                git_dir.clone(),
            );
            tokio::task::spawn_blocking(
                move || -> Result<(Option<git2::Oid>, git::Snapshot), String> {
                    let mirror = mirrors
                        .update(&key, &url, &credentials)
                        .map_err(|e| e.to_string())?;
                    let exists = mirror
                        .repo
                        .find_reference(&format!("refs/heads/{branch}"))
                        .is_ok();
                    let (copy, expected) = if exists {
                        let (copy, tip) = mirror
                            .follow_up_copy(&tree, &git_dir, &branch)
                            .map_err(|e| e.to_string())?;
                        (copy, Some(tip))
                    } else {
                        (
                            mirror
                                .working_copy(&tree, &git_dir, &base, &branch)
                                .map_err(|e| e.to_string())?,
                            None,
                        )
                    };
                    let before = gate::before(&copy).map_err(|e| e.to_string())?;
                    Ok((expected, before))
                },
            )
            .await
            .map_err(Failure::infra)?
        };
        let (expected, before) = prepared.map_err(|e| Failure {
            reason: "forge_error".into(),
            message: e,
            retryable: true,
        })?;
        steps.done("working copy");
        let _ = api.edit_comment(repo, status_id, &status::working(2)).await;

        // The agent, in the sandbox.
        let secrets = vec![("forge token".to_owned(), token)];
        let mut transcript = Transcript::create(
            &self.config.agent.transcript_dir,
            &format!("job-{}-{}", claimed.id, claimed.run),
            secrets
                .iter()
                .map(|(_, s)| s.clone())
                .chain(self.config.model.api_key.clone())
                .collect(),
        )
        .map_err(Failure::infra)?;
        steps.transcript = Some(transcript.path().display().to_string());
        let sandbox = self
            .backend
            .create(self.config.sandbox.spec(&tree))
            .await
            .map_err(Failure::infra)?;
        let files = Files::open(&tree).map_err(Failure::infra)?;
        let prompts =
            Prompts::load(self.config.agent.prompts_dir.as_deref()).map_err(Failure::infra)?;
        let messages = vec![
            Message::System {
                content: prompts.system(&files),
            },
            Message::User { content: prompt },
        ];
        let model = ModelClient::new(self.config.model.settings()).map_err(Failure::infra)?;
        let toolbox = Toolbox {
            files,
            sandbox: &*sandbox,
            max_command_time: self.config.sandbox.limits().timeout,
        };
        let price = |usage| self.config.model.cost(usage);
        let settings = AgentSettings {
            budgets: Budgets::from_config(&self.config.agent),
            context_tokens: self.config.agent.context_tokens,
            price: &price,
        };
        let report = run_agent(&model, &toolbox, &settings, messages, &mut transcript).await;
        let _ = sandbox.destroy().await;
        let (title, summary) = match report.outcome {
            Outcome::Finished { summary, title } => (title, summary),
            Outcome::Stopped { reason, message } => {
                let _ = std::fs::remove_dir_all(&job_dir);
                return Err(Failure::new(&reason, message));
            }
        };
        steps.done("agent");
        let _ = api.edit_comment(repo, status_id, &status::working(3)).await;

        // The gate, the commit and the push.
        let policy = self.config.git.policy_for(&repo.full_name());
        let scanner = SecretScanner::new(secrets);
        let identity = self.config.git.identity();
        let prefix = self.config.git.branch_prefix().to_owned();
        let requested_by = job.requested_by.clone();
        let job_id = claimed.id;
        let delivered = {
            let (git_dir, branch, base, url) =
                (git_dir.clone(), branch.clone(), base.clone(), url.clone());
            let message = format!("{title}\n\n{summary}");
            tokio::task::spawn_blocking(
                move || -> Result<(Option<String>, Vec<String>, String), Failure> {
                    let copy = git2::Repository::open(&git_dir).map_err(Failure::infra)?;
                    let co_author_email = format!("{requested_by}@users.noreply.github.com");
                    let delivery = deliver(
                        &copy,
                        Checks {
                            before: &before,
                            scanner: &scanner,
                            policy,
                        },
                        &identity,
                        &CommitRequest {
                            message: &message,
                            co_author: Some((&requested_by, &co_author_email)),
                            job: job_id,
                        },
                        Some((
                            &PushRequest {
                                url: &url,
                                branch: &branch,
                                default_branch: &base,
                                prefix: &prefix,
                                expected,
                            },
                            &credentials,
                        )),
                    )
                    .map_err(|e| match e {
                        DeliverError::Refused(refusal) => {
                            Failure::new(refusal.reason.code(), refusal.to_string())
                        }
                        DeliverError::Push(push) => Failure {
                            reason: "forge_error".into(),
                            message: push.to_string(),
                            retryable: true,
                        },
                        other => Failure::infra(other),
                    })?;
                    let files = match delivery.commit {
                        Some(oid) => changed_files(&copy, oid).map_err(Failure::infra)?,
                        None => Vec::new(),
                    };
                    Ok((
                        delivery.commit.map(|c| c.to_string()),
                        files,
                        delivery.cleared.report.to_markdown(),
                    ))
                },
            )
            .await
            .map_err(Failure::infra)??
        };
        let _ = std::fs::remove_dir_all(&job_dir);
        let (commit, files, findings) = delivered;
        if commit.is_none() {
            return Err(Failure::new(
                "no_changes",
                "the agent finished without changing anything",
            ));
        }
        steps.done("gate, commit and push");
        if let Some((pr, threads)) = follow_up {
            let sha: String = commit.unwrap_or_default().chars().take(10).collect();
            for thread in &threads {
                api.reply_to_review_comment(repo, pr.number, thread, &format!("Done in {sha}."))
                    .await
                    .map_err(Failure::forge)?;
            }
            steps.done("replies");
            return Ok((pr.number, pr.url));
        }
        let _ = api.edit_comment(repo, status_id, &status::working(5)).await;
        let body = status::pull_request_body(&status::PullRequestBody {
            summary: &summary,
            closes: job.target,
            files: &files,
            findings: &findings,
            isolation: &self.isolation,
            cost_usd: report.cost_usd,
            turns: report.turns,
            duration: started.elapsed(),
        });
        let pr = api
            .open_pull_request(
                repo,
                &NewPullRequest {
                    title: &title,
                    body: &body,
                    head: &branch,
                    base: &base,
                },
            )
            .await
            .map_err(Failure::forge)?;
        steps.done("pull request");
        Ok((pr.number, pr.url))
    }
}

/// What a job works on.
struct Work {
    branch: String,
    base: String,
    /// The task, for the agent.
    prompt: String,
    /// A follow-up's pull request and the review threads to answer.
    follow_up: Option<(forgehand_forge::api::PullRequest, Vec<ReviewComment>)>,
}

/// Each step's time, as the job's result records it.
struct Steps {
    last: Instant,
    list: Vec<Value>,
    /// Where the agent's transcript is, once there is one.
    transcript: Option<String>,
}

impl Steps {
    fn new() -> Self {
        Steps {
            last: Instant::now(),
            list: Vec::new(),
            transcript: None,
        }
    }

    fn done(&mut self, step: &str) {
        let now = Instant::now();
        self.list
            .push(json!({"step": step, "ms": (now - self.last).as_millis() as u64}));
        self.last = now;
    }
}

/// The paths the commit changed against its parent.
fn changed_files(repo: &git2::Repository, oid: git2::Oid) -> Result<Vec<String>, git2::Error> {
    let commit = repo.find_commit(oid)?;
    let parent = commit.parent(0).ok().map(|p| p.tree()).transpose()?;
    let diff = repo.diff_tree_to_tree(parent.as_ref(), Some(&commit.tree()?), None)?;
    Ok(diff
        .deltas()
        .filter_map(|d| {
            d.new_file()
                .path()
                .map(|p| p.to_string_lossy().into_owned())
        })
        .collect())
}
