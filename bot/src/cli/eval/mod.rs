//! `forgehand eval --dataset FILE.jsonl --out DIR`: the agent measured on
//! instances in SWE-bench's format. Each instance's run is a
//! `forgehand run` on a clone of the instance at its base commit (the one
//! job core: the same sandbox, environment, agent and gate as a forge
//! job; nothing pushed), then the tests that show the fix, over what the
//! run committed with the row's test patch on top, in a fresh sandbox.
//! `--patch gold` scores the row's own fix and `--patch empty` nothing:
//! the controls that prove a dataset before a model is paid.
//!
//! Each instance-run's line is in `DIR/results.jsonl` before the next
//! starts, so an evaluation killed half-way goes on from there when run
//! again with the same `--out`.

pub mod dataset;
pub mod instance;
pub mod results;
mod score;

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use forgehand_model::Provider;
use forgehand_sandbox::BackendChoice;
use forgehand_types::reason::Reason;

use crate::cli::run::{self, RunArgs};
use crate::config::Config;
use crate::sandboxes;
use dataset::Row;
use results::{InstanceRun, ResultsFile, Summary, Unresolved};

/// Runs of one instance an evaluation takes (more measures the model's
/// variance no better than more instances would, and is a typo).
const MAX_RUNS: u32 = 1000;

/// What is scored instead of the agent's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum PatchMode {
    /// The row's `patch`: every instance should be resolved.
    Gold,
    /// Nothing: no instance should be.
    Empty,
}

#[derive(Debug, Clone)]
pub struct EvalArgs {
    pub dataset: PathBuf,
    pub out: PathBuf,
    pub patch: Option<PatchMode>,
    pub runs: u32,
    pub jobs: usize,
    pub max_dollars: Option<f64>,
    /// Where `owner/name` repositories are looked for first.
    pub repos: Option<PathBuf>,
    pub provider: Option<Provider>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub backend: Option<BackendChoice>,
}

/// How an evaluation ended.
pub enum Ended {
    /// Every instance-run is done.
    Complete(Summary),
    /// `--max-dollars` was reached first.
    Stopped(Summary),
}

/// What `DIR/eval.json` records, so that a resumed evaluation is the
/// same one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Setup {
    dataset_sha256: String,
    /// `agent`, `gold` or `empty`.
    scores: String,
    model: Option<String>,
}

pub async fn eval(config: &Config, args: EvalArgs, out: &mut dyn Write) -> anyhow::Result<Ended> {
    tokio::select! {
        ended = evaluate(config, args, out) => ended,
        _ = super::interrupted() => anyhow::bail!(
            "interrupted: the finished instance-runs are in results.jsonl; run the same command again to go on"
        ),
    }
}

async fn evaluate(config: &Config, args: EvalArgs, out: &mut dyn Write) -> anyhow::Result<Ended> {
    let rows = dataset::read(&args.dataset)?;
    if args.runs == 0 || args.jobs == 0 {
        anyhow::bail!("--runs and --jobs must be at least 1");
    }
    if args.runs > MAX_RUNS {
        anyhow::bail!("--runs {}: at most {MAX_RUNS}", args.runs);
    }
    if let Some(max) = args.max_dollars {
        if !(max.is_finite() && max > 0.0) {
            anyhow::bail!("--max-dollars {max}: must be a number of dollars above 0");
        }
    }
    let run_args = |repo: PathBuf, task: String| RunArgs {
        repo,
        task,
        provider: args.provider,
        base_url: args.base_url.clone(),
        model: args.model.clone(),
        backend: args.backend,
        allow_sensitive: false,
        allow_destructive: false,
        include_uncommitted: false,
    };
    let model = run::model_config(config, &run_args(PathBuf::new(), String::new()));
    if let (Some(max), None) = (args.max_dollars, args.patch) {
        if model.price().is_none() {
            anyhow::bail!(
                "--max-dollars {max}: the model `{}` has no price (model.prices.{}), so its spend cannot be counted",
                model.name,
                model.name
            );
        }
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("making --out {}", args.out.display()))?;
    let dir = args.out.canonicalize()?;
    // One evaluation at a time in a directory: two would each run what
    // the other has not recorded yet, and pay for it twice.
    let _lock = lock(&dir)?;
    check_setup(
        &dir,
        Setup {
            dataset_sha256: format!("{:x}", sha2::Sha256::digest(std::fs::read(&args.dataset)?)),
            scores: match args.patch {
                None => "agent".into(),
                Some(PatchMode::Gold) => "gold".into(),
                Some(PatchMode::Empty) => "empty".into(),
            },
            // The provider and the name, not the address: the same model
            // may be served from elsewhere when the evaluation goes on.
            model: args
                .patch
                .is_none()
                .then(|| format!("{:?} {}", model.provider, model.name)),
        },
    )?;
    let known: HashSet<&str> = rows.iter().map(|r| r.instance_id.as_str()).collect();
    let (file, mut done) = ResultsFile::open(&dir, &known)?;
    // Runs beyond --runs (an earlier evaluation asked for more) are kept
    // in the file and left out of this one's count.
    done.retain(|r| r.run <= args.runs);
    let dataset_dir = args
        .dataset
        .canonicalize()?
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default();
    // Remote histories are cloned once, one at a time, before any run.
    let mut histories = BTreeMap::new();
    for row in &rows {
        let source = instance::Source::of(&row.repo, &dataset_dir, args.repos.as_deref());
        let path = tokio::task::block_in_place(|| instance::history(&source, &dir.join("mirrors")))
            .with_context(|| format!("{}: repo {}", row.instance_id, row.repo))?;
        histories.insert(row.instance_id.clone(), path);
    }
    if let forgehand_sandbox::Readiness::Unusable(why) =
        sandboxes::rootfs_status(&config.sandbox.rootfs)
    {
        anyhow::bail!("{why}");
    }
    forgehand_jobcore::jobdir::sweep(&config.git.work_dir, false);
    sweep_clones(&dir.join("work"));
    let chosen = sandboxes::choose(&config.sandbox, args.backend).await?;
    if let Some(warning) = &chosen.warning {
        eprintln!("forgehand: {warning}");
    }
    let backend = &*chosen.backend;

    let finished: HashSet<(String, u32)> = done
        .iter()
        .map(|r| (r.instance_id.clone(), r.run))
        .collect();
    let pending: Vec<(&Row, u32)> = rows
        .iter()
        .flat_map(|row| (1..=args.runs).map(move |run| (row, run)))
        .filter(|(row, run)| !finished.contains(&(row.instance_id.clone(), *run)))
        .collect();
    let total = rows.len() * args.runs as usize;
    let spent = done.iter().filter_map(|r| r.cost_usd).sum::<f64>();
    let state = Arc::new(Mutex::new(Progress {
        file,
        results: done,
        spent,
        stopped: false,
        lines: Vec::new(),
        failed: 0,
    }));
    if !state.lock().unwrap().results.is_empty() {
        writeln!(
            out,
            "resuming: {} of {total} instance-runs done",
            state.lock().unwrap().results.len()
        )?;
    }
    let context = Shared {
        config,
        dir: &dir,
        patch: args.patch,
        backend,
        histories: &histories,
    };
    let mut runs = futures::stream::iter(pending)
        .map(|(row, run)| {
            let state = Arc::clone(&state);
            let context = &context;
            let run_args = &run_args;
            async move {
                if let Some(max) = args.max_dollars {
                    let mut state = state.lock().unwrap();
                    if state.spent >= max {
                        state.stopped = true;
                        return Ok(());
                    }
                }
                let result = context
                    .instance_run(row, run, |repo| {
                        run_args(repo.to_owned(), row.problem_statement.clone())
                    })
                    .await;
                let mut state = state.lock().unwrap();
                let result = match result {
                    Ok(result) => result,
                    Err(error) => {
                        // Not the agent's measure: left for the next run
                        // of the same command; the others go on.
                        state.failed += 1;
                        state.lines.push(format!(
                            "{} run {run}: not recorded, to be run again: {}",
                            row.instance_id,
                            run::said(&error)
                        ));
                        return Ok(());
                    }
                };
                state.file.append(&result)?;
                state.spent += result.cost_usd.unwrap_or(0.0);
                let n = state.results.len() + 1;
                state.lines.push(line(n, total, &result));
                state.results.push(result);
                anyhow::Ok(())
            }
        })
        .buffer_unordered(args.jobs);
    while let Some(done) = runs.next().await {
        done?;
        for text in std::mem::take(&mut state.lock().unwrap().lines) {
            writeln!(out, "{text}")?;
            out.flush()?;
        }
    }
    drop(runs);
    let state = state.lock().unwrap();
    let mut summary = Summary::of(rows.len(), args.runs, &state.results);
    let stopped = state.stopped && summary.done < total;
    if stopped {
        summary.stopped = Some(format!(
            "--max-dollars {}: ${:.4} spent",
            args.max_dollars.unwrap_or_default(),
            state.spent
        ));
    }
    write_summary(&dir, &summary)?;
    table(&rows, &state.results, &summary, out)?;
    if state.failed > 0 {
        anyhow::bail!(
            "{} instance-run(s) ended in an error and are not recorded (above); run the same command again to do them",
            state.failed
        );
    }
    Ok(if stopped {
        Ended::Stopped(summary)
    } else {
        Ended::Complete(summary)
    })
}

/// What a killed evaluation left in `work`: clones named for a process
/// that is gone. Best effort: what cannot be removed now is left for the
/// next time (a new clone never reuses a name).
fn sweep_clones(work: &Path) {
    let Ok(entries) = std::fs::read_dir(work) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .rsplit_once('.')
            .and_then(|(_, pid)| pid.parse::<i32>().ok());
        // SAFETY: kill with signal 0 only asks whether the process exists.
        let alive = pid.is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0);
        if !alive {
            if let Err(error) = std::fs::remove_dir_all(entry.path()) {
                eprintln!(
                    "forgehand: a stopped evaluation's clone {} stays: {error}",
                    entry.path().display()
                );
            }
        }
    }
}

struct Progress {
    file: ResultsFile,
    results: Vec<InstanceRun>,
    spent: f64,
    /// A run was not started for `--max-dollars`.
    stopped: bool,
    /// What to print as runs end.
    lines: Vec<String>,
    /// Runs that ended in an error, not recorded.
    failed: usize,
}

/// Refuses to add to `dir` the results of another dataset, scoring or
/// model.
fn check_setup(dir: &Path, setup: Setup) -> anyhow::Result<()> {
    let path = dir.join("eval.json");
    match std::fs::read(&path) {
        Ok(bytes) => {
            let earlier: Setup = serde_json::from_slice(&bytes)
                .with_context(|| format!("{} does not parse", path.display()))?;
            if earlier != setup {
                anyhow::bail!(
                    "{} holds another evaluation ({} of dataset {}…, model {}); this one is {} of {}…, model {}: use another --out",
                    dir.display(),
                    earlier.scores,
                    &earlier.dataset_sha256[..12.min(earlier.dataset_sha256.len())],
                    earlier.model.as_deref().unwrap_or("none"),
                    setup.scores,
                    &setup.dataset_sha256[..12],
                    setup.model.as_deref().unwrap_or("none"),
                );
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::write(&path, serde_json::to_vec_pretty(&setup)?)?;
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn write_summary(dir: &Path, summary: &Summary) -> anyhow::Result<()> {
    let partial = dir.join("summary.json.partial");
    std::fs::write(&partial, serde_json::to_vec_pretty(summary)?)?;
    std::fs::rename(&partial, dir.join("summary.json"))?;
    Ok(())
}

/// `DIR/.lock`, held while this evaluation runs.
fn lock(dir: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        anyhow::bail!(
            "another forgehand eval is writing to {}: wait for it, or use another --out",
            dir.display()
        );
    }
    Ok(file)
}

/// What every instance-run shares.
struct Shared<'a> {
    config: &'a Config,
    dir: &'a Path,
    patch: Option<PatchMode>,
    backend: &'a dyn forgehand_sandbox::Backend,
    histories: &'a BTreeMap<String, PathBuf>,
}

impl Shared<'_> {
    async fn instance_run(
        &self,
        row: &Row,
        run: u32,
        run_args: impl Fn(&Path) -> RunArgs,
    ) -> anyhow::Result<InstanceRun> {
        let started = Instant::now();
        let name = format!("{}-run{run}", file_name(&row.instance_id));
        // Named for this process: a killed evaluation's are swept.
        let clone_dir = self
            .dir
            .join("work")
            .join(format!("{name}.{}", std::process::id()));
        let history = &self.histories[&row.instance_id];
        let agent = self.patch.is_none();
        let clone =
            tokio::task::block_in_place(|| instance::clone(row, history, &clone_dir, agent))?;
        let mut result = InstanceRun {
            instance_id: row.instance_id.clone(),
            run,
            resolved: false,
            reason: None,
            message: None,
            usage: forgehand_model::Usage::default(),
            cost_usd: Some(0.0),
            turns: 0,
            wall_secs: 0.0,
            transcript: None,
            test_log: None,
        };
        let outcome = self.score(row, &clone, &name, run_args, &mut result).await;
        tokio::task::block_in_place(|| prune_checkouts(self.config, &clone));
        if let Err(error) = tokio::task::block_in_place(|| std::fs::remove_dir_all(&clone.path)) {
            eprintln!(
                "forgehand: removing {} (swept next time): {error}",
                clone.path.display()
            );
        }
        outcome?;
        if result.resolved {
            result.message = None;
        }
        result.wall_secs = started.elapsed().as_secs_f64();
        Ok(result)
    }

    /// The candidate (the agent's commit, the gold patch or the base),
    /// the scored commit, its tests: into `result`. An error (Forgehand's
    /// own, or the model's API failing) is not a measure of the agent:
    /// the run is not recorded, and a resumed evaluation does it again.
    async fn score(
        &self,
        row: &Row,
        clone: &instance::Clone,
        name: &str,
        run_args: impl Fn(&Path) -> RunArgs,
        result: &mut InstanceRun,
    ) -> anyhow::Result<()> {
        let candidate = match self.patch {
            Some(PatchMode::Empty) => Ok(clone.start),
            Some(PatchMode::Gold) => {
                let repo = git2::Repository::open(&clone.path)?;
                instance::gold(&repo, clone.start, &row.patch)
            }
            None => {
                let report = match run::run_to_end(self.config, run_args(&clone.path)).await {
                    Ok(report) => report,
                    Err(error) => run::RunReport::from_error(&error),
                };
                // Not the agent's doing: the model's API, Forgehand's own
                // machinery, or a clone `run` will not start from (git
                // calls a fresh clone clean, so none is expected).
                if let Some(reason @ (Reason::ModelError | Reason::Infra | Reason::Input)) =
                    report.reason
                {
                    anyhow::bail!(
                        "{reason}: {}",
                        report.message.as_deref().unwrap_or("no message")
                    );
                }
                result.usage = report.usage;
                result.cost_usd = report.cost_usd;
                result.turns = report.turns;
                result.transcript = report.transcript.clone();
                let message = report.message.clone().unwrap_or_default();
                match (&report.held, &report.commit) {
                    (None, Some(commit)) => Ok(git2::Oid::from_str(commit)?),
                    _ => Err((
                        Unresolved::Run(report.reason.unwrap_or(Reason::NoChanges)),
                        message,
                    )),
                }
            }
        };
        let scored = match candidate {
            Ok(candidate) => {
                let repo = git2::Repository::open(&clone.path)?;
                instance::scored(&repo, clone.base, candidate, &row.test_patch)?
            }
            Err(not) => Err(not),
        };
        let commit = match scored {
            Ok(commit) => commit,
            Err((reason, message)) => {
                result.reason = Some(reason);
                result.message = Some(message);
                return Ok(());
            }
        };
        // Named for this evaluation alone: another one on the same data
        // directory scores its own.
        let job = format!("eval-{name}-{:08x}", rand::random::<u32>());
        let tested = score::tests(
            self.config,
            self.backend,
            &clone.path,
            commit,
            &job,
            &row.test_command(),
        )
        .await?;
        match tested {
            Ok(tested) => {
                let logs = self.dir.join("logs");
                std::fs::create_dir_all(&logs)?;
                let log = logs.join(format!("{name}.log"));
                std::fs::write(&log, &tested.log)?;
                result.test_log = Some(log);
                result.resolved = tested.passed;
                if !tested.passed {
                    result.reason = Some(Unresolved::TestsFailed);
                    result.message = Some(tested.said);
                }
            }
            Err((Unresolved::Run(reason @ Reason::Infra), message)) => {
                anyhow::bail!("{reason}: {message}")
            }
            Err((reason, message)) => {
                result.reason = Some(reason);
                result.message = Some(message);
            }
        }
        Ok(())
    }
}

/// The shared checkouts a run made of the commits it scored: one-offs,
/// removed (those another run holds are left), but for the start
/// commit's, which the instance's next run uses again. Without this an
/// evaluation keeps a checkout of every commit it scored.
fn prune_checkouts(config: &Config, clone: &instance::Clone) {
    let Ok(repo) = git2::Repository::open(&clone.path) else {
        return;
    };
    let Ok(root) = run::root_commit(&repo) else {
        return;
    };
    let checkouts = forgehand_forge::git::Checkouts::new(config.git.work_dir.join("checkouts"));
    checkouts.prune(&format!("local/{root}"), 0, clone.start);
}

/// An instance id as a file name: its safe characters, then a digest of
/// the whole, so that ids that differ only in what was replaced (`a b`,
/// `a_b`, `a\\b`) do not share their logs.
fn file_name(id: &str) -> String {
    let safe: String = id
        .chars()
        .take(80)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let digest = sha2::Sha256::digest(id.as_bytes());
    format!("{safe}-{:x}", &digest)[..safe.len() + 9].to_owned()
}

fn dollars(cost: Option<f64>) -> String {
    cost.map_or("unpriced".into(), |c| format!("${c:.4}"))
}

/// The line printed as an instance-run ends.
fn line(n: usize, total: usize, result: &InstanceRun) -> String {
    let verdict = match result.reason {
        None => "resolved".to_owned(),
        Some(reason) => format!("not resolved ({reason})"),
    };
    format!(
        "[{n}/{total}] {} run {}: {verdict} · {} turns · {} · {:.1}s",
        result.instance_id,
        result.run,
        result.turns,
        dollars(result.cost_usd),
        result.wall_secs
    )
}

/// Each instance's resolved runs, then the totals.
fn table(
    rows: &[Row],
    results: &[InstanceRun],
    summary: &Summary,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let width = rows
        .iter()
        .map(|r| r.instance_id.chars().count())
        .max()
        .unwrap_or(0)
        .max("instance".len());
    writeln!(out, "\n{:<width$}  resolved  runs  cost", "instance")?;
    for row in rows {
        let mine: Vec<&InstanceRun> = results
            .iter()
            .filter(|r| r.instance_id == row.instance_id)
            .collect();
        let resolved = mine.iter().filter(|r| r.resolved).count();
        let cost = mine
            .iter()
            .try_fold(0.0, |sum, r| r.cost_usd.map(|c| sum + c));
        writeln!(
            out,
            "{:<width$}  {resolved:>8}  {:>4}  {}",
            row.instance_id,
            mine.len(),
            dollars(cost)
        )?;
    }
    let [lo, hi] = summary.interval;
    writeln!(
        out,
        "\nresolved {} of {} ({:.1}%, 95% interval {:.1}%–{:.1}%) · {} · {} tokens in ({} read from the cache, {} written to it) · {} out",
        summary.resolved,
        summary.done,
        summary.resolved_rate * 100.0,
        lo * 100.0,
        hi * 100.0,
        dollars(summary.cost_usd),
        summary.usage.input_tokens,
        summary.usage.cache_read_tokens,
        summary.usage.cache_write_tokens,
        summary.usage.output_tokens
    )?;
    for (reason, count) in &summary.reasons {
        writeln!(out, "  not resolved, {reason}: {count}")?;
    }
    if let Some(stopped) = &summary.stopped {
        writeln!(
            out,
            "stopped at {stopped}: {} of {} instance-runs done; run again with a higher --max-dollars to go on",
            summary.done,
            summary.instances * summary.runs as usize
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Red-team round 2: `a b`, `a_b` and `a\b` shared one log file.
    #[test]
    fn instance_ids_that_differ_keep_apart_as_file_names() {
        let names: HashSet<String> = ["a b", "a_b", "a\\b", "é", "ü"]
            .iter()
            .map(|id| file_name(id))
            .collect();
        assert_eq!(names.len(), 5, "{names:?}");
        assert!(file_name("django__django-11099").starts_with("django__django-11099-"));
        assert_eq!(file_name(&"x".repeat(500)).len(), 80 + 9);
    }
}
