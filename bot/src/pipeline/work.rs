//! The work of a job once it is authorized: the working copy from the
//! mirror, the agent in the sandbox, the gate, the commit and push, and
//! the pull request.

use std::time::Instant;

use forgehand_forge::api::{
    CommitStatus, ForgeApi, NewPullRequest, RepoRef, ReviewComment, StatusState,
};
use forgehand_forge::git::{
    self, deliver, gate, Checks, CommitRequest, Credentials, DeliverError, MirrorCache,
    PushRequest, SecretScanner,
};
use serde_json::{json, Value};
use tracing::warn;

use super::status::{self, StatusComment};
use super::{Failure, Pipeline};
use crate::agent::prompts::Prompts;
use crate::agent::tools::{Files, ThreadReply, Toolbox};
use crate::agent::{run_agent, AgentSettings, Budgets, Outcome, Transcript};
use crate::jobdir::JobDir;
use crate::model::{Message, ModelClient};
use crate::reason::Reason;
use crate::store::ClaimedJob;

impl Pipeline {
    pub(super) async fn work(
        &self,
        claimed: &ClaimedJob,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        status: &StatusComment,
        steps: &mut Steps,
        work: Work,
    ) -> Result<Done, Failure> {
        let job = &claimed.job;
        let started = Instant::now();
        let Work {
            branch,
            base,
            prompt,
            prompts,
            follow_up,
            plan_only,
            allow_sensitive,
        } = work;
        let url = job.repo.clone_url.clone().ok_or_else(|| {
            Failure::new(
                Reason::ForgeError,
                "the webhook named no clone URL for the repository",
            )
        })?;
        let (user, token) = api.git_credentials(repo).await.map_err(Failure::forge)?;
        let credentials = Credentials::Token {
            username: user,
            token: token.clone(),
        };
        // Removed (its file system unmounted) on every way out of here.
        let job_dir = JobDir::create(
            &self
                .config
                .git
                .work_dir
                .join(format!("job-{}-{}", claimed.id, claimed.run)),
            self.config.sandbox.disk_mib,
        )
        .map_err(Failure::infra)?;
        let (tree, git_dir) = (job_dir.tree(), job_dir.git_dir());
        // Mirrors hold the repository's code: for Forgehand's user alone.
        crate::private::dir(&self.config.git.mirror_dir).map_err(Failure::infra)?;

        // The working copy: from the mirror, on the bot's branch (its
        // existing one when a previous run pushed it).
        let mirrors = MirrorCache::new(self.config.git.mirror_dir.clone());
        let key = format!("{}/{}/{}", job.forge.as_str(), repo.owner, repo.name);
        let tree_limits = self.config.git.tree_limits(self.config.sandbox.disk_mib);
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
                    let before = gate::before(&copy, tree_limits).map_err(|e| e.to_string())?;
                    Ok((expected, before))
                },
            )
            .await
            .map_err(Failure::infra)?
        };
        let (expected, before) = prepared.map_err(|e| Failure {
            reason: Reason::ForgeError,
            message: e,
            retryable: true,
        })?;
        steps.done("working copy");
        let _ = status.progress(api, repo, 2).await;

        // The agent, in the sandbox.
        // The configured secrets first: their names (github.token, ...)
        // are what a finding reports; then the credential the forge gave
        // this job (an App's installation token is in no configuration).
        let mut secrets: Vec<_> = self.secrets.to_vec();
        secrets.push(("forge token".to_owned(), token));
        let mut transcript = Transcript::create(
            &self.config.agent.transcript_dir,
            &format!("job-{}-{}", claimed.id, claimed.run),
            secrets.iter().map(|(_, s)| s.clone()).collect(),
        )
        .map_err(Failure::infra)?;
        steps.transcript = Some(transcript.path().display().to_string());
        let sandbox = self
            .backend
            .create(self.config.sandbox.spec(&tree))
            .await
            .map_err(Failure::infra)?;
        steps.done("sandbox");
        let files = Files::open(&tree).map_err(Failure::infra)?;
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
        let (title, summary, replies) = match report.outcome {
            Outcome::Finished {
                summary,
                title,
                replies,
            } => (title, summary, replies),
            Outcome::Stopped { reason, message } => {
                return Err(Failure::new(reason, message));
            }
        };
        if plan_only {
            // A plan changes nothing: what the agent wrote is thrown away.
            steps.done("agent");
            return Ok(Done::Planned { plan: summary });
        }
        steps.done("agent");
        let _ = status.progress(api, repo, 3).await;

        // The gate, the commit and the push.
        let mut policy = self.config.git.policy_for(&repo.full_name());
        policy.allow_sensitive |= allow_sensitive;
        let model_key = self.config.model.api_key.clone();
        let scanner = SecretScanner::new(
            secrets
                .into_iter()
                .chain(model_key.map(|key| ("model.api_key".to_owned(), key))),
        );
        // What the agent wrote becomes the commit message (kept for ever in
        // the history) and the pull request: a secret in it is replaced by
        // a marker here, and the gate checks the message again.
        let (title, summary) = (scanner.redact(&title).text, scanner.redact(&summary).text);
        let identity = self.config.git.identity();
        let prefix = self.config.git.branch_prefix().to_owned();
        let requested_by = job.requested_by.clone();
        let co_author_email = self.config.co_author_email(job.forge, &requested_by);
        let job_id = claimed.id;
        let delivered = {
            let (git_dir, branch, base, url) =
                (git_dir.clone(), branch.clone(), base.clone(), url.clone());
            let message = format!("{title}\n\n{summary}");
            tokio::task::spawn_blocking(
                move || -> Result<(Option<String>, Vec<String>, String, String), Failure> {
                    let copy = git2::Repository::open(&git_dir).map_err(Failure::infra)?;
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
                            Failure::new(Reason::Gate(refusal.reason), refusal.to_string())
                        }
                        DeliverError::Push(push) => Failure {
                            reason: Reason::ForgeError,
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
                        delivery.cleared.report.left_out_markdown(),
                    ))
                },
            )
            .await
            .map_err(Failure::infra)??
        };
        let (commit, files, findings, left_out) = delivered;
        if commit.is_none() {
            return Err(Failure::new(
                Reason::NoChanges,
                "the agent finished without changing anything",
            ));
        }
        steps.done("gate, commit and push");
        // The gate's verdict on the pushed commit, where reviewers look: a
        // check run for an App, a commit status otherwise. Not worth
        // failing the job over.
        let checked = CommitStatus {
            state: StatusState::Success,
            context: "forgehand",
            description: "integrity and secret checks passed",
            target_url: None,
        };
        let sha = commit.clone().unwrap_or_default();
        if let Err(error) = api.set_status(repo, &sha, &checked).await {
            warn!(%error, "setting the commit status failed");
        }
        if let Some((pr, threads)) = follow_up {
            let sha: String = commit.unwrap_or_default().chars().take(10).collect();
            for (n, thread) in threads.iter().enumerate() {
                let reply = thread_reply(&replies, n + 1, &sha);
                api.reply_to_review_comment(repo, pr.number, thread, &reply)
                    .await
                    .map_err(Failure::forge)?;
            }
            steps.done("replies");
            return Ok(Done::PullRequest {
                number: pr.number,
                url: pr.url,
                updated: true,
            });
        }
        let _ = status.progress(api, repo, 5).await;
        let body = status::pull_request_body(&status::PullRequestBody {
            summary: &summary,
            closes: job.target,
            files: &files,
            findings: &findings,
            left_out: &left_out,
            isolation: &self.isolation,
            cost_usd: report.cost_usd,
            turns: report.turns,
            duration: started.elapsed(),
        });
        let new = NewPullRequest {
            title: &title,
            body: &body,
            head: &branch,
            base: &base,
        };
        // Safe to repeat: the open pull request of the branch is looked for
        // first, so a try that made it before failing is not made twice.
        let pr = api
            .open_pull_request(repo, &new)
            .await
            .map_err(Failure::forge)?;
        // Whoever asked reviews it. A pull request is there either way.
        let reviewer = [job.requested_by.as_str()];
        if let Err(error) = api.request_review(repo, pr.number, &reviewer).await {
            warn!(%error, "requesting a review failed");
        }
        steps.done("pull request");
        Ok(Done::PullRequest {
            number: pr.number,
            url: pr.url,
            updated: false,
        })
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

    pub fn done(&mut self, step: &str) {
        let now = Instant::now();
        self.list
            .push(json!({"step": step, "ms": (now - self.last).as_millis() as u64}));
        self.last = now;
    }
}

/// The answer in review thread `n` (numbered from 1, as the task lists
/// them): "Done in <sha>." with the agent's note when it changed the code
/// for it, the agent's reason when it did not, and "Done in <sha>." when
/// the agent said nothing of that thread.
fn thread_reply(replies: &[ThreadReply], n: usize, sha: &str) -> String {
    match replies.iter().find(|r| r.thread == n) {
        Some(r) if r.changed && r.note.trim().is_empty() => format!("Done in {sha}."),
        Some(r) if r.changed => format!("Done in {sha}: {}", r.note.trim()),
        Some(r) if r.note.trim().is_empty() => "No change for this one.".to_owned(),
        Some(r) => format!("No change: {}", r.note.trim()),
        None => format!("Done in {sha}."),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(thread: usize, changed: bool, note: &str) -> ThreadReply {
        ThreadReply {
            thread,
            changed,
            note: note.into(),
        }
    }

    #[test]
    fn each_thread_gets_the_agents_answer_or_done() {
        let replies = [
            reply(1, true, "Renamed it."),
            reply(2, false, "The name is used by the public API."),
            reply(3, true, " "),
            reply(5, false, ""),
        ];
        let sha = "0123456789";
        assert_eq!(
            thread_reply(&replies, 1, sha),
            "Done in 0123456789: Renamed it."
        );
        assert_eq!(
            thread_reply(&replies, 2, sha),
            "No change: The name is used by the public API."
        );
        assert_eq!(thread_reply(&replies, 3, sha), "Done in 0123456789.");
        assert_eq!(thread_reply(&replies, 4, sha), "Done in 0123456789.");
        assert_eq!(thread_reply(&replies, 5, sha), "No change for this one.");
    }
}
