//! Jobs: the typed jobs the queue holds (from the store, where they are
//! kept) and the typed result a job's handler hands back.

use forgehand_types::JobId;
use serde::{Deserialize, Serialize};

pub use forgehand_store::job::*;

use forgehand_jobcore::environment::{EnvironmentReport, Testing};
pub use forgehand_jobcore::held::{HeldCommit, HeldFor};
use forgehand_types::reason::Reason;

/// What a job did, as its record keeps it (`GET /api/jobs/{id}`'s
/// `result`) and as a later job reads it back (`go` reads the plan).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub outcome: JobOutcome,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// The failure's message, or a note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The plan a `/forgehand plan` proposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// Jobs a `/forgehand stop` stopped.
    #[serde(default, rename = "jobs", skip_serializing_if = "Vec::is_empty")]
    pub stopped: Vec<JobId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepTime>,
    /// Where the agent's transcript is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
    /// What the agent used (tokens as billed) and cost (`cost_usd` null
    /// when the model has no price), once it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<forgehand_model::Spend>,
    /// The repository's environment the job worked in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentReport>,
    /// What was tested, as the host saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub testing: Option<Testing>,
    /// What was not committed: ignored by the repository, the
    /// environment's files, toolchains' artefacts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// The agent's change the gate held for a maintainer: kept as a
    /// commit on the host, never pushed, until a maintainer allows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<HeldCommit>,
}

/// How a job ended, in its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    /// A pull request opened, or a follow-up pushed.
    Succeeded,
    /// A plan proposed; `go` carries it out.
    Planned,
    Failed,
    /// `/forgehand stop` did its part.
    Stopped,
    /// `/forgehand help` answered.
    Help,
    /// A command that could not be read was explained.
    Explained,
    /// Nothing to work on in what was asked (a plan on a pull request).
    Unsupported,
    /// `retry` or `allow-sensitive` with no failed work to run again.
    NothingToRetry,
    /// `go` with no plan.
    NoPlan,
    /// An allowance noted for a held change that needs another one too.
    AwaitingAllowance,
    /// `bot.dry_run`: recorded and logged, nothing done on the forge.
    DryRun,
}

/// One step of a job and how long it took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepTime {
    pub step: String,
    pub ms: u64,
}

impl JobResult {
    pub fn new(outcome: JobOutcome) -> Self {
        JobResult {
            outcome,
            reason: None,
            message: None,
            pull_request: None,
            url: None,
            plan: None,
            stopped: Vec::new(),
            seconds: None,
            steps: Vec::new(),
            transcript: None,
            spend: None,
            environment: None,
            testing: None,
            left_out: Vec::new(),
            held: None,
        }
    }

    /// A failure for `reason`.
    pub fn failed(reason: Reason, message: Option<String>) -> Self {
        JobResult {
            reason: Some(reason),
            message,
            ..JobResult::new(JobOutcome::Failed)
        }
    }

    /// As the store keeps it.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a job result serializes")
    }

    /// A kept result read back; `None` for one this version cannot read.
    pub fn from_value(value: &serde_json::Value) -> Option<Self> {
        serde_json::from_value(value.clone()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_reads_back_as_it_was_kept() {
        let mut result = JobResult::new(JobOutcome::Succeeded);
        result.pull_request = Some(4);
        result.url = Some("https://forge/pr/4".into());
        result.steps.push(StepTime {
            step: "agent".into(),
            ms: 12,
        });
        let value = result.to_value();
        assert_eq!(value["outcome"], "succeeded");
        assert_eq!(value["steps"][0]["step"], "agent");
        assert!(value.get("reason").is_none(), "{value}");
        assert_eq!(JobResult::from_value(&value), Some(result));
        let failed = JobResult::failed(Reason::Denied, None).to_value();
        assert_eq!(failed["reason"], "denied");
    }
}
