//! Stage 1: what the job starts from, and the working copy over it. The
//! mirror is updated; the base commit (the bot's branch tip for a
//! follow-up) is checked out once, shared by every job that starts from
//! it; its declared environment is read from its git objects. Then, once
//! the environment is had (`environment.rs`), the job's working copy, as
//! the job core makes every job's ([`forgehand_jobcore::copy`]).

use forgehand_jobcore::held::commit_sha;
use forgehand_types::CommitSha;
use forgehand_types::JobId;
use std::path::PathBuf;
use std::sync::Arc;

use forgehand_environment::spec::{DeclareError, Declared, EnvKey};
use forgehand_forge::git::{Checkout, Checkouts, Credentials, MirrorCache};

use super::super::run::JobRun;
use super::super::work::Work;
use super::super::{Failure, Pipeline};
use forgehand_jobcore::environment::{CommitFiles, Environments, Prepared};
use forgehand_jobcore::Stage;
use forgehand_jobcore::{failure, JobCopy};
use forgehand_types::reason::Reason;

/// What the job starts from.
pub(in crate::pipeline) struct Source {
    pub url: String,
    pub credentials: Credentials,
    /// The bot's branch tip an earlier run pushed, which the push must
    /// find unchanged.
    pub expected: Option<git2::Oid>,
    /// An earlier attempt of this very job pushed its commit (the bot's,
    /// with this job's `Forgehand-Job:` trailer) and then died: the
    /// agent's work is done, and the job goes on from there.
    pub resumed: Option<Resumed>,
    /// The commit the job works on: the bot's branch for a follow-up,
    /// else the base branch's.
    pub checkout: Checkout,
    /// The base branch's commit, when it is not the one worked on: the
    /// environment is always the base's (setup never runs on a tree the
    /// agent changed).
    pub base_checkout: Option<Checkout>,
    mirror: PathBuf,
    /// The mirror's name in the cache (`github/owner/name`).
    mirror_key: String,
    /// What the base commit declares of its environment, and its key.
    pub declared: Result<Option<(Declared, EnvKey)>, DeclareError>,
    /// The repository's own `[gate]` rules, from the base commit.
    pub rules: forgehand_gate::RepoRules,
}

impl Source {
    /// The base commit's files, for the environment's setup.
    pub fn base_tree(&self) -> &std::path::Path {
        &self.base_checkout.as_ref().unwrap_or(&self.checkout).tree
    }
}

/// What the later stages work in and push with.
pub(in crate::pipeline) struct WorkingCopy {
    pub copy: JobCopy,
    pub url: String,
    pub credentials: Credentials,
    pub expected: Option<git2::Oid>,
    pub rules: forgehand_gate::RepoRules,
    /// The mirror's name in the cache: a held commit is kept there.
    pub mirror_key: String,
}

/// This job's commit, pushed by an earlier attempt.
pub(in crate::pipeline) struct Resumed {
    pub commit: CommitSha,
    /// The commit message's first line and the rest, without trailers:
    /// what the agent said, as it was redacted then.
    pub title: String,
    pub summary: String,
    pub files: Vec<String>,
}

impl Pipeline {
    /// The mirror updated, the base commit's shared checkout, what it
    /// declares, and whether an earlier attempt pushed this job's commit.
    pub(in crate::pipeline) async fn fetch(
        &self,
        run: &mut JobRun<'_>,
        work: &Work,
    ) -> Result<Source, Failure> {
        let (url, credentials) = self.git_access(run).await?;
        let claimed = run.claimed;
        let job = &claimed.job;
        let key = mirror_key(run);
        let fetching = Fetching {
            mirrors: MirrorCache::new(self.config.git.mirror_dir.clone()),
            checkouts: Checkouts::new(self.config.git.work_dir.join("checkouts")).with_limits(
                self.config
                    .git
                    .checkout_limits(self.config.sandbox.disk_mib),
            ),
            environments: self.environments.clone(),
            backend: self.backend.clone(),
            key,
            repository: job.repository_key(),
            url: url.clone(),
            credentials: credentials.clone(),
            branch: work.branch.clone(),
            base: work.base.clone(),
            job_id: claimed.id,
            bot_email: self.config.git.commit_email.clone(),
        };
        let handle = tokio::runtime::Handle::current();
        let source = tokio::task::spawn_blocking(move || fetching.run(&handle))
            .await
            .map_err(Failure::infra)??;
        run.steps.done(Stage::WorkingCopy);
        Ok(source)
    }

    /// The repository's URL and the credentials the forge gives this
    /// job for it, with the directories that will hold its code made
    /// private.
    pub(in crate::pipeline) async fn git_access(
        &self,
        run: &mut JobRun<'_>,
    ) -> Result<(String, Credentials), Failure> {
        let url = run.job().repo.clone_url.clone().ok_or_else(|| {
            Failure::new(
                Reason::ForgeError,
                "the webhook named no clone URL for the repository",
            )
        })?;
        let (username, token) = run
            .api
            .git_credentials(run.repo)
            .await
            .map_err(Failure::forge)?;
        // The credential the forge gave this job (an App's installation
        // token is in no configuration): kept out of what leaves.
        run.secrets.push(("forge token".to_owned(), token.clone()));
        crate::redaction::know([("forge token".to_owned(), token.clone())]);
        // Mirrors and checkouts hold the repository's code: for
        // Forgehand's user alone.
        for dir in [&self.config.git.mirror_dir, &self.config.git.work_dir] {
            forgehand_sandbox::private::dir(dir).map_err(Failure::infra)?;
        }
        Ok((url, Credentials::Token { username, token }))
    }

    /// The job's working copy over `source` and the environment.
    pub(in crate::pipeline) async fn working_copy(
        &self,
        run: &mut JobRun<'_>,
        work: &Work,
        source: Source,
        prepared: Option<&mut Prepared>,
    ) -> Result<WorkingCopy, Failure> {
        let claimed = run.claimed;
        let copy = self
            .core()
            .working_copy(
                &format!("job-{}-{}", claimed.id, claimed.run),
                source.checkout,
                prepared.and_then(|p| p.env.take()),
                &source.mirror,
                &work.branch,
            )
            .await?;
        Ok(WorkingCopy {
            copy,
            url: source.url,
            credentials: source.credentials,
            expected: source.expected,
            rules: source.rules,
            mirror_key: source.mirror_key,
        })
    }
}

/// The job's repository's mirror, by name in the cache.
pub(in crate::pipeline) fn mirror_key(run: &JobRun<'_>) -> String {
    format!(
        "{}/{}/{}",
        run.job().forge.as_str(),
        run.repo.owner,
        run.repo.name
    )
}

/// What [`Pipeline::fetch`] does on a blocking thread.
struct Fetching {
    mirrors: MirrorCache,
    checkouts: Checkouts,
    environments: Arc<Environments>,
    backend: Arc<dyn forgehand_sandbox::Backend>,
    key: String,
    repository: String,
    url: String,
    credentials: Credentials,
    branch: String,
    base: String,
    job_id: JobId,
    bot_email: String,
}

impl Fetching {
    fn run(self, handle: &tokio::runtime::Handle) -> Result<Source, Failure> {
        let forge = |message: String, retryable| Failure {
            reason: Reason::ForgeError,
            message,
            retryable,
            held: None,
        };
        // Retried within the call; what is left is worth another attempt
        // only if waiting could fix it (not refused credentials, say).
        let mirror = self
            .mirrors
            .update(&self.key, &self.url, &self.credentials)
            .map_err(|e| forge(e.to_string(), e.is_transient()))?;
        let local = |e: git2::Error| forge(e.to_string(), true);
        // A follow-up (or a retry after a push) starts from the bot's
        // branch as pushed; new work from the base branch. The environment
        // is the base branch's either way.
        let base = mirror.branch_commit(&self.base).map_err(local)?;
        let (commit, expected) = match mirror.branch_commit(&self.branch) {
            Ok(tip) => (tip, Some(tip)),
            Err(_) => (base, None),
        };
        // The tip is this very job's commit (a follow-up's branch also
        // holds earlier jobs' commits, with their own job numbers).
        let resumed =
            expected.and_then(|tip| resumed(&mirror.repo, tip, self.job_id, &self.bot_email));
        let backend = self.backend.clone();
        let give = move |tree: &std::path::Path| {
            handle
                .block_on(backend.prepare_for_sandbox(tree))
                .map_err(std::io::Error::other)
        };
        let ensure = |commit| {
            self.checkouts
                .ensure(&self.key, &mirror.repo, commit, &give)
                .map_err(failure::checkout)
        };
        let checkout = ensure(commit)?;
        let base_checkout = if base == commit {
            None
        } else {
            Some(ensure(base)?)
        };
        self.checkouts.prune(&self.key, 3, commit);
        let files = CommitFiles::new(&mirror.repo, base).map_err(local)?;
        let declared = self.environments.declare(&files, &self.repository);
        // A broken `[gate]` is the repository's to fix, like a broken
        // `[environment]`: the job says where.
        let rules = forgehand_jobcore::environment::repo_rules(&files).map_err(|e| {
            Failure::new(
                Reason::Environment(forgehand_types::reason::EnvProblem::Declaration),
                e.to_string(),
            )
        })?;
        drop(files);
        Ok(Source {
            url: self.url,
            credentials: self.credentials,
            expected,
            resumed,
            checkout,
            base_checkout,
            mirror: mirror.path.clone(),
            mirror_key: self.key,
            declared,
            rules,
        })
    }
}

/// `tip` as this job's own pushed commit, if it is one.
fn resumed(
    repo: &git2::Repository,
    tip: git2::Oid,
    job: JobId,
    bot_email: &str,
) -> Option<Resumed> {
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
        commit: commit_sha(tip),
        title: title.trim().to_owned(),
        summary: summary.join("\n").trim().to_owned(),
        files: changed_files(repo, tip).ok()?,
    })
}

/// The paths the commit changed against its parent.
pub(in crate::pipeline) fn changed_files(
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
