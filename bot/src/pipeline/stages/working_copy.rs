//! Stage 1: the working copy, from the mirror, on the bot's branch (its
//! existing one when an earlier run pushed it), in a job directory that
//! is removed (its file system unmounted) on every way out; and the
//! integrity snapshot the gate compares the agent's tree with.

use forgehand_forge::git::{self, gate, Credentials, MirrorCache};

use super::super::run::JobRun;
use super::super::work::Work;
use super::super::{Failure, Pipeline};
use super::Stage;
use crate::jobdir::JobDir;
use crate::reason::Reason;
use crate::store::ClaimedJob;

/// What the later stages work in and push with.
pub(in crate::pipeline) struct WorkingCopy {
    pub job_dir: JobDir,
    pub url: String,
    pub credentials: Credentials,
    /// The bot's branch tip an earlier run pushed, which the push must
    /// find unchanged.
    pub expected: Option<git2::Oid>,
    pub before: git::Snapshot,
    /// An earlier attempt of this very job pushed its commit (the bot's,
    /// with this job's `Forgehand-Job:` trailer) and then died: the
    /// agent's work is done, and the job goes on from there.
    pub resumed: Option<Resumed>,
}

/// This job's commit, pushed by an earlier attempt.
pub(in crate::pipeline) struct Resumed {
    pub commit: String,
    /// The commit message's first line and the rest, without trailers:
    /// what the agent said, as it was redacted then.
    pub title: String,
    pub summary: String,
    pub files: Vec<String>,
}

impl Pipeline {
    pub(in crate::pipeline) async fn working_copy(
        &self,
        run: &mut JobRun<'_>,
        work: &Work,
    ) -> Result<WorkingCopy, Failure> {
        let (claimed, repo) = (run.claimed, run.repo);
        let job = &claimed.job;
        let url = job.repo.clone_url.clone().ok_or_else(|| {
            Failure::new(
                Reason::ForgeError,
                "the webhook named no clone URL for the repository",
            )
        })?;
        let (username, token) = run
            .api
            .git_credentials(repo)
            .await
            .map_err(Failure::forge)?;
        // The credential the forge gave this job (an App's installation
        // token is in no configuration): kept out of what leaves.
        run.secrets.push(("forge token".to_owned(), token.clone()));
        let credentials = Credentials::Token { username, token };
        let job_dir = self.job_dir(claimed)?;
        // Mirrors hold the repository's code: for Forgehand's user alone.
        crate::private::dir(&self.config.git.mirror_dir).map_err(Failure::infra)?;
        let mirrors = MirrorCache::new(self.config.git.mirror_dir.clone());
        let key = format!("{}/{}/{}", job.forge.as_str(), repo.owner, repo.name);
        let limits = self.config.git.tree_limits(self.config.sandbox.disk_mib);
        let (tree, git_dir) = (job_dir.tree(), job_dir.git_dir());
        let (source, with, branch, base) = (
            url.clone(),
            credentials.clone(),
            work.branch.clone(),
            work.base.clone(),
        );
        let (job_id, bot_email) = (claimed.id, self.config.git.commit_email.clone());
        let prepared = tokio::task::spawn_blocking(move || {
            // Retried within the call; what is left is worth another
            // attempt only if waiting could fix it (not refused
            // credentials, say).
            let mirror = mirrors
                .update(&key, &source, &with)
                .map_err(|e| (e.to_string(), e.is_transient()))?;
            let pushed_before = mirror
                .repo
                .find_reference(&format!("refs/heads/{branch}"))
                .is_ok();
            let (copy, expected) = if pushed_before {
                let (copy, tip) = mirror
                    .follow_up_copy(&tree, &git_dir, &branch)
                    .map_err(|e| (e.to_string(), true))?;
                (copy, Some(tip))
            } else {
                let copy = mirror
                    .working_copy(&tree, &git_dir, &base, &branch)
                    .map_err(|e| (e.to_string(), true))?;
                (copy, None)
            };
            let before = gate::before(&copy, limits).map_err(|e| (e.to_string(), true))?;
            // The tip is this very job's commit (a follow-up's branch also
            // holds earlier jobs' commits, with their own job numbers).
            let resumed = expected.and_then(|tip| resumed(&copy, tip, job_id, &bot_email));
            Ok::<_, (String, bool)>((expected, before, resumed))
        })
        .await
        .map_err(Failure::infra)?;
        let (expected, before, resumed) = prepared.map_err(|(message, retryable)| Failure {
            reason: Reason::ForgeError,
            message,
            retryable,
        })?;
        run.steps.done(Stage::WorkingCopy);
        Ok(WorkingCopy {
            job_dir,
            url,
            credentials,
            expected,
            before,
            resumed,
        })
    }
}

impl Pipeline {
    /// This attempt's job directory, afresh.
    fn job_dir(&self, claimed: &ClaimedJob) -> Result<JobDir, Failure> {
        let git = &self.config.git;
        JobDir::create(
            &git.work_dir
                .join(format!("job-{}-{}", claimed.id, claimed.run)),
            self.config.sandbox.disk_mib,
            git.keep_job_dirs,
        )
        .map_err(Failure::infra)
    }
}

/// `tip` as this job's own pushed commit, if it is one.
fn resumed(repo: &git2::Repository, tip: git2::Oid, job: i64, bot_email: &str) -> Option<Resumed> {
    let commit = repo.find_commit(tip).ok()?;
    let message = commit.message()?;
    let ours = commit.committer().email() == Some(bot_email)
        && message
            .lines()
            .rev()
            .any(|line| line.trim() == format!("Forgehand-Job: {job}"));
    if !ours {
        return None;
    }
    let (title, rest) = message.split_once('\n').unwrap_or((message, ""));
    let summary: Vec<&str> = rest
        .lines()
        .filter(|l| !l.starts_with("Forgehand-Job: ") && !l.starts_with("Co-authored-by: "))
        .collect();
    Some(Resumed {
        commit: tip.to_string(),
        title: title.trim().to_owned(),
        summary: summary.join("\n").trim().to_owned(),
        files: super::publish::changed_files(repo, tip).ok()?,
    })
}
