//! The stages of a job's work once it is authorized, one file each, in
//! the order [`super::Pipeline::work`] runs them:
//!
//! 1. [`working_copy`] (`fetch`): the mirror updated, the base commit's
//!    shared checkout, what it declares of its environment;
//! 2. [`environment`]: the environment kept, or built in the setup phase;
//! 3. [`working_copy`]: the job's working copy layered over both, on the
//!    bot's branch, the integrity snapshot;
//! 4. [`agent`]: the agent in a sandbox over that copy, then the
//!    repository's tests run by the host (a failure goes back to the
//!    agent);
//! 5. [`publish`]: the gate, the commit and the push;
//! 6. [`answer`]: the commit's status, then the replies in the review
//!    threads or the pull request.
//!
//! A held change, once a maintainer allows it, goes through [`release`]
//! (its kept commit pushed) straight to [`answer`].
//!
//! Each takes what the one before it made, typed, and nothing else.

pub(super) mod agent;
pub(super) mod answer;
pub(super) mod environment;
pub(super) mod publish;
pub(super) mod release;
pub(super) mod working_copy;

/// A job's stages as the job's recorded steps and the status comment's
/// checklist name them: one list, so that the two cannot drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Authorized,
    WorkingCopy,
    Environment,
    Sandbox,
    Agent,
    Tests,
    Publish,
    PullRequest,
    /// A follow-up's answers in its review threads, instead of a pull
    /// request.
    Replies,
    /// An earlier attempt had pushed this job's commit.
    Resumed,
    /// A held change pushed as it was kept, the agent not run again.
    Released,
}

impl Stage {
    /// The stages the status comment lists, in order (the sandbox is part
    /// of the agent's line; replies and resumption are not steps of their
    /// own there).
    pub const CHECKLIST: [Stage; 7] = [
        Stage::Authorized,
        Stage::WorkingCopy,
        Stage::Environment,
        Stage::Agent,
        Stage::Tests,
        Stage::Publish,
        Stage::PullRequest,
    ];

    /// Its name, in the job's steps and on the checklist.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Authorized => "authorized",
            Stage::WorkingCopy => "working copy",
            Stage::Environment => "environment",
            Stage::Tests => "tests",
            Stage::Sandbox => "sandbox",
            Stage::Agent => "agent",
            Stage::Publish => "gate, commit and push",
            Stage::PullRequest => "pull request",
            Stage::Replies => "replies",
            Stage::Resumed => "resumed after the push",
            Stage::Released => "held change released",
        }
    }
}
