//! The work of a job once it is authorized: the types its stages
//! (`stages/`) share with the rest of the pipeline (their sequence is
//! `flow.rs`).

use forgehand_forge::api::ReviewComment;

use super::orders::Allowed;
use super::Pipeline;
use forgehand_jobcore::environment::{EnvironmentReport, Testing};

impl Pipeline {
    /// The gate's policy for a job's work: the operator's for its
    /// repository, widened by what a maintainer allowed.
    pub(super) fn policy(&self, work: &Work, job: &crate::job::Job) -> forgehand_gate::GatePolicy {
        work.allowed
            .widen(self.config.policy_for(&job.repo.full_name()))
    }
}

/// What a job works on.
pub(super) struct Work {
    pub branch: String,
    pub base: String,
    /// The task, for the agent.
    pub prompt: String,
    /// A follow-up's pull request and the review threads to answer.
    pub follow_up: Option<(forgehand_forge::api::PullRequest, Vec<ReviewComment>)>,
    /// `/forgehand plan`: the agent's summary is the answer, nothing is pushed.
    pub plan_only: bool,
    /// What a maintainer allowed this once (`allow-sensitive`,
    /// `allow-destructive`).
    pub allowed: Allowed,
}

/// How a job's work ended well.
pub(super) enum Done {
    PullRequest {
        number: u64,
        url: String,
        /// A follow-up pushed to an existing pull request.
        updated: bool,
        evidence: Box<Evidence>,
    },
    Planned {
        plan: String,
    },
}

/// What the pull request shows it was made with: the environment, what
/// was tested and how it came out, what was not committed.
pub(super) struct Evidence {
    pub environment: Option<EnvironmentReport>,
    pub testing: Option<Testing>,
    pub left_out: Vec<String>,
    /// Files the change edits that define the environment: it stays the
    /// base branch's, and the pull request says so.
    pub drift: Vec<String>,
    /// Its tests fail: opened as a draft.
    pub draft: bool,
}
