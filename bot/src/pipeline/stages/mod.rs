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
