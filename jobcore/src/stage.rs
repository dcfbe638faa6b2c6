//! A job's stages, as the job's recorded steps and the status comment's
//! checklist name them: one list, so that the two cannot drift.

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
