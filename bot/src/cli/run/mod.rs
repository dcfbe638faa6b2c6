//! `forgehand run --repo <path> --task "<text>"`: the agent on a local
//! repository, no forge involved. The checked-out branch's commit is the
//! base: its environment (as its own commit declares it, never the
//! working tree) is kept or built, a working copy is layered over a
//! shared checkout of it (its git directory outside the tree the sandbox
//! sees), the agent works in the configured sandbox, the host runs the
//! tests, and what it did goes through the same gate as a forge job
//! before it is committed on a new branch of the repository.

use std::path::{Path, PathBuf};

mod base;
mod report;

use anyhow::Context;
use forgehand_forge::git::{self, Checkouts, Mirror};
use forgehand_gate::{self as gate, CommitRequest, DeliverError, GatePolicy, SecretScanner};
use forgehand_sandbox::{Backend, BackendChoice};

use crate::config::Config;
use crate::sandboxes;
use forgehand_agent::prompts::Prompts;
use forgehand_agent::Outcome;
use forgehand_jobcore::deliver::{deliver, Judged, Said};
use forgehand_jobcore::environment::{CommitFiles, EnvFailure, Environments, Prepared};
use forgehand_jobcore::{failure, AgentTask, Core, Failure, JobCopy, Quiet, Worked};
use forgehand_model::Provider;
use forgehand_types::reason::{EnvProblem, Reason};

use base::Base;
pub use base::InputError;
pub use report::{print_human, said, RunReport, RunStatus};

#[derive(Debug, Clone)]
pub struct RunArgs {
    pub repo: PathBuf,
    pub task: String,
    pub provider: Option<Provider>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub backend: Option<BackendChoice>,
    /// Commit changes to sensitive files (CI, agent instructions, …).
    pub allow_sensitive: bool,
    /// Commit a change that removes most of the repository.
    pub allow_destructive: bool,
    /// Work on the working tree's uncommitted changes too (committed on
    /// top of the branch first, on no branch).
    pub include_uncommitted: bool,
}

pub async fn run(config: &Config, args: RunArgs) -> anyhow::Result<RunReport> {
    // Interrupted, the run's future is dropped: its sandbox is destroyed
    // and its job directory removed on the way out.
    tokio::select! {
        report = run_to_end(config, args) => report,
        _ = super::interrupted() => anyhow::bail!("interrupted: nothing was committed"),
    }
}

/// The configured model with the run's flags over it.
pub(crate) fn model_config(config: &Config, args: &RunArgs) -> crate::config::ModelConfig {
    let mut model_config = config.model.clone();
    if let Some(provider) = args.provider {
        model_config.provider = provider;
    }
    if let Some(url) = &args.base_url {
        model_config.base_url = url.clone();
        model_config.base_url_named = Some("--base-url".into());
    }
    if let Some(name) = &args.model {
        model_config.name = name.clone();
    }
    model_config
}

/// A run without the interruption `run` races it against (the caller
/// has its own: `forgehand eval`).
pub(crate) async fn run_to_end(config: &Config, args: RunArgs) -> anyhow::Result<RunReport> {
    let model_config = model_config(config, &args);
    // The checked-out branch's commit is the base, never what the
    // working tree holds besides (refused, or taken in when asked).
    let Base {
        path: repo_path,
        source,
        commit: base_commit,
        included,
    } = base::open(&args.repo, args.include_uncommitted)?;
    base::data_outside(config, &repo_path)?;
    // The model is asked first: a server that is not there is said
    // before minutes go into an environment.
    forgehand_model::ModelClient::new(model_config.settings())?
        .probe()
        .await?;
    let id = format!(
        "run-{}-{:04x}",
        crate::time::now_ms() / 1000,
        rand::random::<u16>()
    );
    let branch = format!(
        "{}{}",
        config.git.branch_prefix(),
        git::branch_name("run-{slug}", 0, &args.task)
    );
    let branch = unique_branch(&source.repo, &branch);
    // No sandbox without its guest rootfs: said once, before anything
    // is built.
    if let forgehand_sandbox::Readiness::Unusable(why) =
        sandboxes::rootfs_status(&config.sandbox.rootfs)
    {
        anyhow::bail!("{why}");
    }
    // What an interrupted run left: its job directory and mounts.
    forgehand_jobcore::jobdir::sweep(&config.git.work_dir, false);
    let chosen = sandboxes::choose(&config.sandbox, args.backend).await?;
    if let Some(warning) = &chosen.warning {
        eprintln!("forgehand: {warning}");
    }
    let backend = &*chosen.backend;
    // The repository's own `[gate]`, from the base commit: a broken one
    // is the repository's to fix.
    let rules = CommitFiles::new(&source.repo, base_commit)
        .map_err(anyhow::Error::from)
        .and_then(|files| {
            forgehand_jobcore::environment::repo_rules(&files).map_err(anyhow::Error::from)
        });
    let rules = match rules {
        Ok(rules) => rules,
        Err(error) => {
            return Ok(RunReport::failed(
                Some(Reason::Environment(EnvProblem::Declaration)),
                Some(error.to_string()),
            ))
        }
    };
    let Local {
        checkout, prepared, ..
    } = local_environment(config, backend, &source, base_commit).await?;
    let mut prepared = match prepared {
        Ok(prepared) => prepared,
        Err(failure) => return Ok(RunReport::from_failure(failure)),
    };
    let environment = prepared.as_ref().map(Prepared::report);
    let test = prepared.as_ref().and_then(|p| p.declared.test.clone());
    let core = Core {
        backend,
        sandbox: &config.sandbox,
        git: &config.git,
        agent: &config.agent,
        model: model_config.settings(),
        price: model_config.price(),
        test_retries: config.environment.test_retries,
    };
    // Removed (its file systems unmounted) on every way out of here.
    let copy = core
        .working_copy(
            &id,
            checkout,
            prepared.as_mut().and_then(|p| p.env.take()),
            &source.path,
            &branch,
        )
        .await;
    let copy = match copy {
        Ok(copy) => copy,
        Err(failure) => return Ok(RunReport::from_failure(failure)),
    };
    let run = Run {
        config,
        core,
        args: &args,
        id: &id,
        test: test.as_deref(),
        propose: environment.is_none(),
        branch: &branch,
        rules: &rules,
    };
    let mut report = run.agent_and_deliver(&copy).await?;
    report.environment = environment;
    report.test_command = test.clone();
    report.included_uncommitted = included;
    if let Some(commit) = &report.commit {
        // The branch goes into the user's repository; a held change to a
        // ref of its own, on no branch.
        let (from, to) = match &report.held {
            Some(held) => (gate::HELD_REF.to_owned(), held.clone()),
            None => (
                format!("refs/heads/{branch}"),
                format!("refs/heads/{branch}"),
            ),
        };
        let mut remote = source
            .repo
            .remote_anonymous(&copy.git_dir().to_string_lossy())?;
        remote
            .fetch(&[format!("+{from}:{to}")], None, None)
            .context("bringing the branch into the repository")?;
        let new = source.repo.find_commit(git2::Oid::from_str(commit)?)?;
        let old = source.repo.find_commit(base_commit)?;
        let diff = source
            .repo
            .diff_tree_to_tree(Some(&old.tree()?), Some(&new.tree()?), None)?;
        let stats = diff.stats()?;
        report.diff_stat = Some(format!(
            "{} files changed, {} insertions(+), {} deletions(-)",
            stats.files_changed(),
            stats.insertions(),
            stats.deletions()
        ));
        let mut text = String::new();
        diff.print(git2::DiffFormat::Patch, |_, _, line| {
            if matches!(line.origin(), '+' | '-' | ' ') {
                text.push(line.origin());
            }
            text.push_str(&String::from_utf8_lossy(line.content()));
            true
        })?;
        report.diff = text;
        if report.held.is_none() {
            report.branch = Some(branch);
        }
    }
    Ok(report)
}

/// What one run works with.
struct Run<'a> {
    config: &'a Config,
    core: Core<'a>,
    args: &'a RunArgs,
    id: &'a str,
    test: Option<&'a str>,
    /// Nothing declared or detected: the report proposes a declaration.
    propose: bool,
    /// The branch the commit goes on in the repository.
    branch: &'a str,
    /// The repository's `[gate]` rules, from the base commit.
    rules: &'a forgehand_gate::RepoRules,
}

/// A local repository's base commit, checked out for the sandbox user,
/// and its environment: kept, built now, or why it could not be had.
pub(crate) struct Local {
    /// `local:<root commit>`: the same repository is found again from a
    /// fresh clone.
    pub repository: String,
    pub checkout: forgehand_forge::git::Checkout,
    pub prepared: Result<Option<Prepared>, Failure>,
}

/// The environment of the repository `source` at `base` (its checked-out
/// branch's commit), as that commit declares it.
pub(crate) async fn local_environment(
    config: &Config,
    backend: &dyn Backend,
    source: &Mirror,
    base: git2::Oid,
) -> anyhow::Result<Local> {
    let environments =
        Environments::new(&config.environment, &config.sandbox).map_err(|e| anyhow::anyhow!(e))?;
    let root = root_commit(&source.repo)?;
    let repository = format!("local:{root}");
    let checkouts = Checkouts::new(config.git.work_dir.join("checkouts"))
        .with_limits(config.git.checkout_limits(config.sandbox.disk_mib));
    let handle = tokio::runtime::Handle::current();
    let give = |tree: &Path| {
        tokio::task::block_in_place(|| handle.block_on(backend.prepare_for_sandbox(tree)))
            .map_err(std::io::Error::other)
    };
    forgehand_sandbox::private::dir(&config.git.work_dir)?;
    let checkout = checkouts
        .ensure(&format!("local/{root}"), &source.repo, base, &give)
        .map_err(failure::checkout)?;
    let declared = environments.declare(&CommitFiles::new(&source.repo, base)?, &repository);
    let prepared = match declared {
        Err(error) => Err(failure::environment(EnvFailure::Declaration(error))),
        Ok(None) => Ok(None),
        Ok(Some((declared, key))) => environments
            .prepare(backend, &repository, declared, key, &checkout.tree)
            .await
            .map(Some)
            .map_err(failure::environment),
    };
    Ok(Local {
        repository,
        checkout,
        prepared,
    })
}

/// The commit every history of the repository starts from.
pub(crate) fn root_commit(repo: &git2::Repository) -> anyhow::Result<git2::Oid> {
    let mut walk = repo.revwalk()?;
    walk.push_head()?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    walk.next()
        .context("the repository has no commit")?
        .context("walking the history")
}

impl Run<'_> {
    /// The operator's gate policy, widened by the run's flags.
    fn policy(&self) -> GatePolicy {
        GatePolicy {
            allow_sensitive: self.args.allow_sensitive,
            allow_destructive: self.args.allow_destructive,
            max_removed_share: self.config.gate.max_removed_share,
        }
    }

    /// The agent (and the host's tests), then the gate and the commit.
    async fn agent_and_deliver(&self, copy: &JobCopy) -> anyhow::Result<RunReport> {
        let args = self.args;
        let secrets = crate::host_secrets::host_secrets(self.config);
        let prompts = Prompts::load(self.config.agent.prompts_dir.as_deref())?;
        let task = AgentTask {
            prompt: prompts.render("local_task.txt", &[("task", &args.task)]),
            prompts: &prompts,
            test: self.test,
            propose: self.propose,
            review: true,
            policy: self.policy(),
            rules: self.rules,
            secrets: &secrets,
            transcript: self.id,
        };
        let worked = match self.core.agent(copy, task, &mut Quiet).await {
            Ok(worked) => worked,
            Err(failure) => return Ok(RunReport::from_failure(failure)),
        };
        let Worked {
            report: agent,
            testing,
            mut transcript,
        } = worked;
        let mut report = RunReport::failed(None, None);
        report.turns = agent.turns;
        report.tool_calls = agent.tool_calls;
        report.usage = agent.spend.usage;
        report.cost_usd = agent.spend.cost_usd;
        report.transcript = Some(transcript.path().to_owned());
        report.testing = testing;
        let (title, summary) = match &agent.outcome {
            Outcome::Finished { summary, title, .. } => {
                report.title = Some(title.clone());
                report.summary = Some(summary.clone());
                (title.clone(), summary.clone())
            }
            Outcome::Stopped { reason, message } => {
                report.reason = Some(*reason);
                report.message = Some(message.clone());
                (
                    format!("Unfinished: {}", first_line(&args.task)),
                    format!("The agent stopped ({reason}): {message}"),
                )
            }
        };
        let report = self.deliver(copy, secrets, &title, &summary, &agent.outcome, report)?;
        transcript.record("delivered", serde_json::json!({ "report": &report }));
        Ok(report)
    }

    /// Whatever happened, the work so far goes through the gate and, when
    /// it passes, is kept on the branch.
    fn deliver(
        &self,
        copy: &JobCopy,
        secrets: Vec<(String, secrecy::SecretString)>,
        title: &str,
        summary: &str,
        outcome: &Outcome,
        mut report: RunReport,
    ) -> anyhow::Result<RunReport> {
        let scanner = SecretScanner::new(secrets);
        let said = Said::redacted(&scanner, title, summary);
        let repo = copy.repo()?;
        let delivered = deliver(
            copy,
            &repo,
            Judged {
                scanner: &scanner,
                policy: self.policy(),
                rules: self.rules,
            },
            &self.config.git.identity(),
            &CommitRequest {
                message: &said.message(),
                co_author: None,
                job: forgehand_types::JobId(0),
            },
            // `run` keeps the commit on a local branch: nothing is pushed.
            None::<gate::Push<'_, std::convert::Infallible>>,
        );
        match delivered {
            Ok(delivery) => {
                report.findings = delivery
                    .cleared
                    .report
                    .integrity
                    .iter()
                    .map(|f| f.to_string())
                    .chain(delivery.left_out().iter().map(|l| format!("left out: {l}")))
                    .collect();
                report.commit = delivery.commit.map(|c| c.to_string());
                report.branch = report.commit.as_ref().map(|_| self.branch.to_owned());
                report.left_out = forgehand_jobcore::environment::ignored_paths(&repo)?;
                if matches!(outcome, Outcome::Finished { .. }) {
                    if report.commit.is_some() {
                        report.status = RunStatus::of_commit(&report.testing, self.test.is_some());
                        report.reason = None;
                        report.message = None;
                    } else {
                        report.reason = Some(Reason::NoChanges);
                        report.message =
                            Some("the agent finished without changing anything".into());
                    }
                }
            }
            Err(DeliverError::Refused(refusal)) => {
                report.reason = Some(Reason::Gate(refusal.reason));
                report.message = Some(refusal.to_string());
            }
            Err(DeliverError::Held { refusal, commit }) => {
                // Kept for the person who ran it to look at and take; the
                // options that allow it say so up front next time.
                let kept = format!("refs/forgehand/held/{}", self.branch);
                let options: Vec<String> = refusal
                    .commands()
                    .iter()
                    .map(|c| format!("--{c}"))
                    .collect();
                report.reason = Some(Reason::Gate(refusal.reason));
                report.message = Some(format!(
                    "{refusal}\nThe change is kept as commit {commit} at {kept}: \
                     `git branch <name> {kept}` takes it as it is; {} commits it on a branch \
                     next time.",
                    options.join(" ")
                ));
                report.held = Some(kept);
                report.commit = Some(commit.to_string());
            }
            Err(other) => return Err(other.into()),
        }
        Ok(report)
    }
}

fn unique_branch(repo: &git2::Repository, wanted: &str) -> String {
    let mut name = wanted.to_owned();
    let mut n = 2;
    while repo.find_branch(&name, git2::BranchType::Local).is_ok() {
        name = format!("{wanted}-{n}");
        n += 1;
    }
    name
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").chars().take(72).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Red-team round 5: a base commit too large to check out was
    /// reported as `infra` by `run --json`, where the job says too_large.
    #[test]
    fn a_base_too_large_to_check_out_is_reported_too_large() {
        let error = anyhow::Error::new(failure::checkout(
            forgehand_forge::git::CheckoutError::TooManyEntries { max: 500_000 },
        ))
        .context("the shared checkout of the base commit");
        let report = RunReport::from_error(&error);
        assert_eq!(
            report.reason,
            Some(Reason::Gate(forgehand_gate::RefusalReason::TooLarge))
        );
        assert!(report
            .message
            .unwrap()
            .contains("more than the 500000 entries"));
        let other = RunReport::from_error(&anyhow::anyhow!("disk full"));
        assert_eq!(other.reason, Some(Reason::Infra));
    }

    /// Red-team round 2, N3: the agent's title and diff reached the
    /// operator's terminal raw (a window title set, a diff line erased).
    #[test]
    fn what_the_agent_wrote_reaches_the_terminal_escaped() {
        let mut report = RunReport::failed(None, None);
        report.status = RunStatus::Succeeded;
        report.title = Some("Fix\u{1b}]0;PWNED\u{7}".into());
        report.diff = "+ok\n+hidden\u{1b}[1A\u{1b}[2K\r+shown\n".into();
        let mut out = Vec::new();
        print_human(&report, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains(['\u{1b}', '\u{7}', '\r']), "{out:?}");
        assert!(out.contains("succeeded: Fix\\u{1b}]0;PWNED\\u{7}"), "{out}");
        assert!(out.contains("+hidden\\u{1b}[1A"), "{out}");
    }
}
