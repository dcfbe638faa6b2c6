//! What `forgehand run` says of a run: one JSON object with `--json`,
//! otherwise lines for people whose first says how it ended, tests
//! included, and an exit status that does too.

use std::path::PathBuf;

use serde::Serialize;

use super::base::InputError;
use forgehand_jobcore::environment::{EnvironmentReport, TestResult, Testing};
use forgehand_model::{Spend, Usage};
use forgehand_types::reason::Reason;

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Committed, and the host's tests passed.
    Succeeded,
    /// Committed; the repository declares no test command and none was
    /// detected, so nothing tested it.
    Untested,
    /// Committed, and the host's tests failed.
    TestsFailed,
    /// Committed, but the declared tests did not run.
    TestsNotRun,
    /// Nothing committed.
    Failed,
}

impl RunStatus {
    /// The process's exit status: 0 when the change was tested and
    /// passed (or nothing declares tests); 3 when it was committed
    /// untested or failing (0 with `--allow-failing-tests`, the old
    /// behaviour); 1 when nothing was committed.
    pub fn exit_code(self, allow_failing_tests: bool) -> u8 {
        match self {
            RunStatus::Succeeded | RunStatus::Untested => 0,
            RunStatus::TestsFailed | RunStatus::TestsNotRun if allow_failing_tests => 0,
            RunStatus::TestsFailed | RunStatus::TestsNotRun => 3,
            RunStatus::Failed => 1,
        }
    }

    /// A committed run's status, from what the host tested.
    pub fn of_commit(testing: &Testing, declared_test: bool) -> RunStatus {
        match (testing.result, declared_test) {
            (TestResult::Passed, _) => RunStatus::Succeeded,
            (TestResult::Failed, _) => RunStatus::TestsFailed,
            (TestResult::None, true) => RunStatus::TestsNotRun,
            (TestResult::None, false) => RunStatus::Untested,
        }
    }
}

/// The outcome, printed as one JSON object with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub status: RunStatus,
    pub reason: Option<Reason>,
    pub message: Option<String>,
    pub branch: Option<String>,
    pub commit: Option<String>,
    /// The change the gate held, committed and kept in the repository at
    /// this ref (on no branch), for a person to look at and take.
    pub held: Option<String>,
    pub diff_stat: Option<String>,
    pub turns: u32,
    pub tool_calls: u32,
    /// Tokens as the provider billed them: input not read from a cache,
    /// output, cache reads, cache writes.
    pub usage: Usage,
    /// Dollars, from the four counts; `null` when the model has no price
    /// (`model.prices.<name>`), never 0 for a model that costs money.
    pub cost_usd: Option<f64>,
    pub transcript: Option<PathBuf>,
    pub title: Option<String>,
    pub summary: Option<String>,
    /// Gate findings that were committed anyway (allowed sensitive files,
    /// an allowed destructive change).
    pub findings: Vec<String>,
    /// The configuration file read, and how it was named; none means
    /// built-in defaults and `FORGEHAND_*` variables only.
    pub config: Option<crate::config::ConfigFile>,
    /// The repository's environment (`null` when it declares and shows
    /// none).
    pub environment: Option<EnvironmentReport>,
    /// The test command the environment declares, when there is one.
    pub test_command: Option<String>,
    /// What was tested, as the host saw it.
    pub testing: Testing,
    /// The paths not committed because they are ignored or artefacts.
    pub left_out: Vec<String>,
    /// Uncommitted changes the run took in (`--include-uncommitted`).
    pub included_uncommitted: Vec<String>,
    #[serde(skip)]
    pub diff: String,
}

impl RunReport {
    /// A run that could not start or finish for reasons outside the agent.
    pub fn infra(message: String) -> Self {
        Self::failed(Some(Reason::Infra), Some(message))
    }

    /// The report of a run the job core ended early: the reason a forge
    /// job would give for the same tree.
    pub fn from_failure(failure: forgehand_jobcore::Failure) -> Self {
        Self::failed(Some(failure.reason), Some(failure.message))
    }

    /// The report of a run that stopped with `error`: what it was given
    /// (`input`), a base commit too large to check out (`too_large`, the
    /// repository's), anything else Forgehand's (`infra`).
    pub fn from_error(error: &anyhow::Error) -> Self {
        let input = error
            .chain()
            .any(|cause| cause.downcast_ref::<InputError>().is_some());
        let core = error
            .chain()
            .find_map(|cause| cause.downcast_ref::<forgehand_jobcore::Failure>());
        let model = error.chain().any(|cause| {
            cause
                .downcast_ref::<forgehand_model::ModelError>()
                .is_some()
        });
        let reason = if input {
            Reason::Input
        } else if model {
            Reason::ModelError
        } else if let Some(core) = core {
            core.reason
        } else {
            Reason::Infra
        };
        Self::failed(Some(reason), Some(said(error)))
    }

    pub(super) fn failed(reason: Option<Reason>, message: Option<String>) -> Self {
        RunReport {
            status: RunStatus::Failed,
            reason,
            message,
            branch: None,
            commit: None,
            held: None,
            diff_stat: None,
            turns: 0,
            tool_calls: 0,
            usage: Usage::default(),
            cost_usd: None,
            transcript: None,
            title: None,
            summary: None,
            findings: Vec::new(),
            config: None,
            environment: None,
            test_command: None,
            testing: Testing::observed(&[], None, &[]),
            left_out: Vec::new(),
            included_uncommitted: Vec::new(),
            diff: String::new(),
        }
    }

    /// The report with every known secret redacted from what the agent
    /// wrote or the run said (`crate::redaction`): what is printed.
    pub fn redacted(mut self) -> Self {
        let text = |s: &mut String| *s = crate::redaction::text(s).into_owned();
        for field in [
            &mut self.title,
            &mut self.summary,
            &mut self.message,
            &mut self.diff_stat,
        ] {
            if let Some(s) = field.as_mut() {
                text(s);
            }
        }
        text(&mut self.diff);
        self.findings.iter_mut().for_each(text);
        self.left_out.iter_mut().for_each(text);
        self.included_uncommitted.iter_mut().for_each(text);
        for run in &mut self.testing.commands {
            text(&mut run.command);
        }
        self
    }

    /// The first line people read: how it ended, the tests included.
    pub fn headline(&self) -> String {
        let title = self.title.as_deref().unwrap_or("");
        let test = self.test_command.as_deref().unwrap_or("the tests");
        match self.status {
            RunStatus::Succeeded => {
                format!("succeeded: {title} (the host ran `{test}`: passed)")
            }
            RunStatus::Untested => format!(
                "untested: {title} (no environment: the tests were not run — declare one in .forgehand.toml)"
            ),
            RunStatus::TestsFailed => format!(
                "tests failed: {title} (the committed change fails `{test}`{})",
                match self.testing.commands.last() {
                    Some(run) if run.by == forgehand_jobcore::environment::By::Agent => {
                        ", as the agent ran it"
                    }
                    _ => " as the host ran it",
                }
            ),
            RunStatus::TestsNotRun => format!(
                "tests not run: {title} (`{test}` did not run on the committed change)"
            ),
            RunStatus::Failed => format!(
                "failed ({}): {}",
                self.reason.map_or("unknown", Reason::code),
                self.message.as_deref().unwrap_or("")
            ),
        }
    }
}

/// What `error` says, each cause once: an error that shows its source in
/// its own text (`creating the sandbox: {0}`) and also gives it as its
/// source printed it twice in anyhow's `{:#}` (issue 24: a missing rootfs
/// was said twice).
pub fn said(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// The report for people: how it ended, where the change is, what it
/// cost, then the diff.
///
/// The agent wrote the diff and the title, and the repository the rest:
/// a terminal obeys the escape sequences they may hold (a title set, a
/// line of the diff rewritten or hidden), so every control character but
/// line breaks and tabs is shown escaped.
pub fn print_human(report: &RunReport, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut text = Vec::new();
    write_human(report, &mut text)?;
    let text = String::from_utf8_lossy(&text);
    out.write_all(forgehand_text::printable(&text).as_bytes())
}

fn write_human(report: &RunReport, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(out, "{}", report.headline())?;
    if let (RunStatus::Untested, Some(proposal)) = (report.status, &report.testing.proposal) {
        writeln!(out, "a .forgehand.toml to start from:")?;
        for line in proposal.lines() {
            writeln!(out, "    {line}")?;
        }
    }
    if let Some(branch) = &report.branch {
        writeln!(
            out,
            "branch:     {branch} ({})",
            report.commit.as_deref().unwrap_or("")
        )?;
    }
    if let Some(held) = &report.held {
        writeln!(
            out,
            "held:       {held} ({})",
            report.commit.as_deref().unwrap_or("")
        )?;
    }
    if let Some(stat) = &report.diff_stat {
        writeln!(out, "changes:    {stat}")?;
    }
    if !report.included_uncommitted.is_empty() {
        writeln!(
            out,
            "included:   {} uncommitted change(s) of the working tree ({})",
            report.included_uncommitted.len(),
            report.included_uncommitted.join(", ")
        )?;
    }
    for run in &report.testing.commands {
        let by = match run.by {
            forgehand_jobcore::environment::By::Agent => "agent",
            forgehand_jobcore::environment::By::Host => "host",
        };
        writeln!(
            out,
            "tested:     {} ({by}): exit {}",
            run.command, run.exit_code
        )?;
    }
    for finding in &report.findings {
        writeln!(out, "flagged:    {finding}")?;
    }
    let spend = Spend {
        usage: report.usage,
        cost_usd: report.cost_usd,
    };
    writeln!(
        out,
        "turns:      {} ({} tool calls)\nspent:      {}",
        report.turns,
        report.tool_calls,
        crate::pipeline::status::spend_line(&spend)
    )?;
    if report.cost_usd.is_none() && report.turns > 0 {
        writeln!(
            out,
            "            (the model has no price: set model.prices.<name> to see dollars)"
        )?;
    }
    if let Some(path) = &report.transcript {
        writeln!(out, "transcript: {}", path.display())?;
    }
    if !report.diff.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", report.diff.trim_end())?;
    }
    Ok(())
}
