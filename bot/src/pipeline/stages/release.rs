//! A held change released: `/forgehand allow-sensitive` (or
//! `allow-destructive`) on a job whose change the gate held pushes the
//! commit kept in the mirror, exactly as the gate looked at it, and the
//! job is answered as if it had been pushed then. No model is called and
//! nothing is built: what a maintainer allows is what they were shown.

use forgehand_forge::git::{push_ref, MirrorCache, PushError, PushRequest};

use super::super::run::JobRun;
use super::super::work::Work;
use super::super::{Failure, Pipeline};
use super::agent::Finished;
use super::answer::Answer;
use super::publish::Published;
use super::working_copy::mirror_key;
use crate::job::HeldCommit;
use forgehand_jobcore::environment::Testing;
use forgehand_jobcore::Stage;
use forgehand_types::reason::Reason;

impl Pipeline {
    /// Pushes `held` onto its branch, over where the branch was when the
    /// change was held (and nowhere else).
    pub(in crate::pipeline) async fn release(
        &self,
        run: &mut JobRun<'_>,
        held: &HeldCommit,
    ) -> Result<(), Failure> {
        run.progress(Stage::Publish).await;
        let (url, credentials) = self.git_access(run).await?;
        let expected = held
            .expected
            .as_ref()
            .map(|sha| git2::Oid::from_str(sha.as_str()))
            .transpose()
            .map_err(Failure::infra)?;
        let commit = git2::Oid::from_str(held.commit.as_str()).map_err(Failure::infra)?;
        let mirrors = MirrorCache::new(self.config.git.mirror_dir.clone());
        let key = mirror_key(run);
        let prefix = self.config.git.branch_prefix().to_owned();
        let held = held.clone();
        tokio::task::spawn_blocking(move || {
            let mirror = mirrors
                .update(&key, &url, &credentials)
                .map_err(|e| Failure {
                    reason: Reason::ForgeError,
                    retryable: e.is_transient(),
                    message: e.to_string(),
                    held: None,
                })?;
            // The ref is the host's own; still, what is pushed must be the
            // commit the maintainer was shown, or nothing.
            let kept = mirror.held_commit(&held.reference).map_err(|e| {
                Failure::new(
                    Reason::Infra,
                    format!(
                        "the held commit is no longer kept at {}: {e}",
                        held.reference
                    ),
                )
            })?;
            if kept != commit {
                return Err(Failure::new(
                    Reason::Infra,
                    format!(
                        "{} holds {kept}, not the held commit {commit}: not pushed",
                        held.reference
                    ),
                ));
            }
            let request = PushRequest {
                url: &url,
                branch: &held.branch,
                default_branch: &held.base,
                prefix: &prefix,
                expected,
            };
            push_ref(&mirror.repo, &held.reference, &request, &credentials).map_err(pushed)
        })
        .await
        .map_err(Failure::infra)??;
        run.steps.done(Stage::Publish);
        Ok(())
    }
}

/// Why the release's push failed. The branch moving is final here: the
/// held commit was made on top of where it was.
fn pushed(error: PushError) -> Failure {
    let retryable = match &error {
        PushError::Stale { .. } => false,
        other => other.worth_another_attempt(),
    };
    let mut message = error.to_string();
    if !retryable {
        message.push_str("; `/forgehand retry` runs the job anew from where things are now");
    }
    Failure {
        reason: Reason::ForgeError,
        retryable,
        message,
        held: None,
    }
}

impl Answer {
    /// The answer for a held commit, released: what the job found and
    /// said when it held it.
    pub(in crate::pipeline) fn released(work: Work, held: HeldCommit) -> Self {
        let testing = held
            .testing
            .clone()
            .unwrap_or_else(|| Testing::observed(&[], None, &[]));
        let finished = Finished {
            title: held.title.clone(),
            summary: held.summary.clone(),
            replies: Vec::new(),
            spend: None,
            turns: 0,
            testing,
        };
        let published = Published {
            commit: held.commit,
            files: held.files,
            findings: held.findings,
            left_out: String::new(),
            ignored: Vec::new(),
            title: held.title,
            summary: held.summary,
        };
        Answer {
            work,
            finished,
            published,
            resumed: false,
            environment: None,
        }
    }
}
