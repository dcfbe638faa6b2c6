//! The stages of a job's work once it is authorized, one file each, in
//! the order [`super::Pipeline::work`] runs them:
//!
//! 1. [`working_copy`]: the mirror updated, the working copy on the bot's
//!    branch in a job directory of its own, the integrity snapshot;
//! 2. [`agent`]: the agent in a sandbox over that copy;
//! 3. [`publish`]: the gate, the commit and the push;
//! 4. [`answer`]: the commit's status, then the replies in the review
//!    threads or the pull request.
//!
//! Each takes what the one before it made, typed, and nothing else.

pub(super) mod agent;
pub(super) mod answer;
pub(super) mod publish;
pub(super) mod working_copy;
