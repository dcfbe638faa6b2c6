//! Stage 3: the gate, the commit and the push. What the agent wrote
//! becomes the commit message (kept for ever in the history) and later
//! the pull request: a secret in it is replaced by a marker first, and the
//! gate checks the message again.

use forgehand_forge::git::{held_ref, push_branch, MirrorCache, PushError, PushRequest};
use forgehand_gate::{CommitRequest, DeliverError, RefusalReason, SecretScanner, HELD_REF};
use forgehand_types::JobId;

use super::super::run::JobRun;
use super::super::work::Work;
use super::super::{Failure, Pipeline};
use super::agent::Finished;
use super::working_copy::{changed_files, WorkingCopy};
use crate::job::{HeldCommit, HeldFor};
use forgehand_jobcore::deliver::{deliver, Judged, Said};
use forgehand_jobcore::environment::Testing;
use forgehand_jobcore::held::commit_sha;
use forgehand_jobcore::Stage;
use forgehand_types::reason::Reason;
use forgehand_types::CommitSha;

/// A pushed commit and what the pull request says of it.
pub(in crate::pipeline) struct Published {
    pub commit: CommitSha,
    pub files: Vec<String>,
    /// The gate's findings on what was pushed anyway (allowed sensitive
    /// files), and what was left out, as Markdown.
    pub findings: String,
    pub left_out: String,
    /// What was not committed because git ignores it: the repository's
    /// ignore rules, the environment's files, toolchains' artefacts.
    pub ignored: Vec<String>,
    /// The agent's title and summary, redacted.
    pub title: String,
    pub summary: String,
}

impl Pipeline {
    pub(in crate::pipeline) async fn publish(
        &self,
        run: &mut JobRun<'_>,
        work: &Work,
        copy: WorkingCopy,
        finished: &Finished,
    ) -> Result<Published, Failure> {
        run.progress(Stage::Publish).await;
        let claimed = run.claimed;
        let job = &claimed.job;
        let scanner = SecretScanner::new(run.secrets.iter().cloned());
        let said = Said::redacted(&scanner, &finished.title, &finished.summary);
        let requested_by = job.requested_by.clone();
        let delivering = Delivering {
            policy: self.policy(work, job),
            identity: self.config.git.identity(),
            prefix: self.config.git.branch_prefix().to_owned(),
            co_author_email: self.config.co_author_email(job.forge, &requested_by),
            requested_by,
            job_id: claimed.id,
            branch: work.branch.clone(),
            base: work.base.clone(),
            message: said.message(),
            mirrors: MirrorCache::new(self.config.git.mirror_dir.clone()),
        };
        let delivered = tokio::task::spawn_blocking(move || delivering.run(copy, &scanner))
            .await
            .map_err(Failure::infra)?;
        let delivered = match delivered {
            Ok(delivered) => delivered,
            Err(Undelivered::Failed(failure)) => return Err(failure),
            Err(Undelivered::Held(held)) => {
                return Err(held.failure(said.title, said.summary, finished.testing.clone()))
            }
        };
        run.steps.done(Stage::Publish);
        Ok(Published {
            commit: delivered.commit,
            files: delivered.files,
            findings: delivered.findings,
            ignored: delivered.ignored,
            left_out: delivered.left_out,
            title: said.title,
            summary: said.summary,
        })
    }
}

/// What the blocking part of [`Pipeline::publish`] works with.
struct Delivering {
    policy: forgehand_gate::GatePolicy,
    identity: forgehand_gate::BotIdentity,
    prefix: String,
    requested_by: String,
    co_author_email: String,
    job_id: JobId,
    branch: String,
    base: String,
    message: String,
    mirrors: MirrorCache,
}

/// What the gate cleared and the push sent.
struct Delivered {
    commit: CommitSha,
    files: Vec<String>,
    findings: String,
    left_out: String,
    ignored: Vec<String>,
}

enum Undelivered {
    Failed(Failure),
    /// Committed and kept for a maintainer, not pushed.
    Held(Box<Kept>),
}

impl From<Failure> for Undelivered {
    fn from(failure: Failure) -> Self {
        Undelivered::Failed(failure)
    }
}

/// A held commit, kept in the mirror.
struct Kept {
    refusal: forgehand_gate::Refusal,
    commit: CommitSha,
    reference: String,
    branch: String,
    base: String,
    expected: Option<CommitSha>,
    files: Vec<String>,
}

impl Kept {
    /// The job's failure, carrying what a maintainer's command releases.
    fn failure(self, title: String, summary: String, testing: Testing) -> Failure {
        let held_for = self
            .refusal
            .needs
            .iter()
            .filter_map(|n| match n {
                RefusalReason::Sensitive => Some(HeldFor::Sensitive),
                RefusalReason::Destructive => Some(HeldFor::Destructive),
                _ => None,
            })
            .collect();
        Failure {
            reason: Reason::Gate(self.refusal.reason),
            message: self.refusal.to_string(),
            retryable: false,
            held: Some(Box::new(HeldCommit {
                commit: self.commit,
                reference: self.reference,
                branch: self.branch,
                base: self.base,
                expected: self.expected,
                held_for,
                title,
                summary,
                files: self.files,
                findings: self.refusal.report.to_markdown(),
                testing: Some(testing),
            })),
        }
    }
}

impl Delivering {
    fn run(self, copy: WorkingCopy, scanner: &SecretScanner) -> Result<Delivered, Undelivered> {
        let WorkingCopy {
            copy,
            url,
            credentials,
            expected,
            rules,
            mirror_key,
        } = copy;
        let repo = copy.repo().map_err(Failure::infra)?;
        let delivery = deliver(
            &copy,
            &repo,
            Judged {
                scanner,
                policy: self.policy,
                rules: &rules,
            },
            &self.identity,
            &CommitRequest {
                message: &self.message,
                co_author: Some((&self.requested_by, &self.co_author_email)),
                job: self.job_id,
            },
            Some(&|repo| {
                let request = PushRequest {
                    url: &url,
                    branch: &self.branch,
                    default_branch: &self.base,
                    prefix: &self.prefix,
                    expected,
                };
                push_branch(repo, &request, &credentials)
            }),
        );
        let delivery = match delivery {
            Ok(delivery) => delivery,
            Err(DeliverError::Held { refusal, commit }) => {
                // Kept where the job directory's removal cannot take it.
                let reference = held_ref(self.job_id);
                self.mirrors
                    .keep(&mirror_key, &copy.git_dir(), HELD_REF, &reference)
                    .map_err(Failure::infra)?;
                return Err(Undelivered::Held(Box::new(Kept {
                    refusal: *refusal,
                    commit: commit_sha(commit),
                    reference,
                    files: changed_files(&repo, commit).map_err(Failure::infra)?,
                    branch: self.branch,
                    base: self.base,
                    expected: expected.map(commit_sha),
                })));
            }
            Err(error) => return Err(failure(error).into()),
        };
        let Some(commit) = delivery.commit else {
            return Err(Failure::new(
                Reason::NoChanges,
                "the agent finished without changing anything",
            )
            .into());
        };
        Ok(Delivered {
            commit: commit_sha(commit),
            files: changed_files(&repo, commit).map_err(Failure::infra)?,
            findings: delivery.cleared.report.to_markdown(),
            left_out: delivery.cleared.report.left_out_markdown(),
            ignored: forgehand_jobcore::environment::ignored_paths(&repo)
                .map_err(Failure::infra)?,
        })
        // The job directory goes here, its file system unmounted.
    }
}

/// Why the delivery failed, as the job says it.
fn failure(error: DeliverError<PushError>) -> Failure {
    match error {
        DeliverError::Refused(refusal) | DeliverError::Held { refusal, .. } => {
            Failure::new(Reason::Gate(refusal.reason), refusal.to_string())
        }
        DeliverError::Push(push) => Failure {
            reason: Reason::ForgeError,
            retryable: push.worth_another_attempt(),
            message: push.to_string(),
            held: None,
        },
        other => Failure::infra(other),
    }
}
