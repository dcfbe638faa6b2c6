//! Stage 3: the gate, the commit and the push. What the agent wrote
//! becomes the commit message (kept for ever in the history) and later
//! the pull request: a secret in it is replaced by a marker first, and the
//! gate checks the message again.

use forgehand_forge::git::{push_branch, PushError, PushRequest};
use forgehand_gate::{deliver, Checks, CommitRequest, DeliverError, SecretScanner};

use super::super::run::JobRun;
use super::super::work::Work;
use super::super::{Failure, Pipeline};
use super::agent::Finished;
use super::working_copy::WorkingCopy;
use super::Stage;
use crate::reason::Reason;

/// A pushed commit and what the pull request says of it.
pub(in crate::pipeline) struct Published {
    pub commit: String,
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
        let policy = self.policy(work, job);
        let scanner = SecretScanner::new(run.secrets.iter().cloned());
        let title = scanner.redact(&finished.title).text;
        let summary = scanner.redact(&finished.summary).text;
        let identity = self.config.git.identity();
        let prefix = self.config.git.branch_prefix().to_owned();
        let (requested_by, job_id) = (job.requested_by.clone(), claimed.id);
        let co_author_email = self.config.co_author_email(job.forge, &requested_by);
        let (branch, base) = (work.branch.clone(), work.base.clone());
        let message = format!("{title}\n\n{summary}");
        let delivered = tokio::task::spawn_blocking(move || {
            let WorkingCopy {
                job_dir,
                url,
                credentials,
                expected,
                before,
                rules,
                ..
            } = copy;
            let repo = git2::Repository::open(job_dir.git_dir()).map_err(Failure::infra)?;
            let delivery = deliver(
                &repo,
                Checks {
                    before: &before,
                    scanner: &scanner,
                    policy,
                    rules: &rules,
                },
                &identity,
                &CommitRequest {
                    message: &message,
                    co_author: Some((&requested_by, &co_author_email)),
                    job: job_id,
                },
                Some(&|repo| {
                    let request = PushRequest {
                        url: &url,
                        branch: &branch,
                        default_branch: &base,
                        prefix: &prefix,
                        expected,
                    };
                    push_branch(repo, &request, &credentials)
                }),
            )
            .map_err(failure)?;
            let Some(commit) = delivery.commit else {
                return Err(Failure::new(
                    Reason::NoChanges,
                    "the agent finished without changing anything",
                ));
            };
            let files = changed_files(&repo, commit).map_err(Failure::infra)?;
            let ignored = crate::environment::ignored_paths(&repo).map_err(Failure::infra)?;
            Ok((
                commit.to_string(),
                files,
                delivery.cleared.report.to_markdown(),
                delivery.cleared.report.left_out_markdown(),
                ignored,
            ))
            // The job directory goes here, its file system unmounted.
        })
        .await
        .map_err(Failure::infra)??;
        let (commit, files, findings, left_out, ignored) = delivered;
        run.steps.done(Stage::Publish);
        Ok(Published {
            commit,
            files,
            findings,
            ignored,
            left_out,
            title,
            summary,
        })
    }
}

/// Why the delivery failed, as the job says it.
fn failure(error: DeliverError<PushError>) -> Failure {
    match error {
        DeliverError::Refused(refusal) => {
            Failure::new(Reason::Gate(refusal.reason), refusal.to_string())
        }
        DeliverError::Push(push) => Failure {
            reason: Reason::ForgeError,
            retryable: push.worth_another_attempt(),
            message: push.to_string(),
        },
        other => Failure::infra(other),
    }
}

/// The paths the commit changed against its parent.
pub(super) fn changed_files(
    repo: &git2::Repository,
    oid: git2::Oid,
) -> Result<Vec<String>, git2::Error> {
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
