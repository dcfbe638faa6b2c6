//! The last steps of a job on the host, in the only order they may run:
//! the gate, then the commit as the bot, then (for a forge job) the push.
//! The pipeline and `forgehand run` both go through here, so neither can
//! commit what the gate has not cleared.

use git2::{Oid, Repository};

pub use super::gate::Checks;
use super::gate::{self, Cleared, GateError, Refusal};
use super::integrity::LeftOut;
use super::publish::{self, BotIdentity, CommitRequest, PushError, PushRequest};
use super::transport::Credentials;

/// What was delivered: the commit (none when the agent changed nothing)
/// and the findings the pull request must list.
#[derive(Debug)]
pub struct Delivery {
    pub commit: Option<Oid>,
    pub pushed: bool,
    pub cleared: Cleared,
}

impl Delivery {
    /// Special files removed from the tree instead of committed, for the
    /// pull request to list.
    pub fn left_out(&self) -> &[LeftOut] {
        &self.cleared.report.left_out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    #[error("{0}")]
    Refused(Refusal),
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error("cannot commit: {0}")]
    Commit(git2::Error),
    #[error(transparent)]
    Push(#[from] PushError),
}

/// Gate (the commit's message included), commit and, when `push` is
/// given, push.
pub fn deliver(
    repo: &Repository,
    checks: Checks<'_>,
    bot: &BotIdentity,
    commit: &CommitRequest<'_>,
    push: Option<(&PushRequest<'_>, &Credentials)>,
) -> Result<Delivery, DeliverError> {
    let cleared = gate::check(repo, &checks, commit.message)?.map_err(DeliverError::Refused)?;
    let oid = publish::commit_all(repo, bot, commit).map_err(DeliverError::Commit)?;
    let pushed = match (oid, push) {
        (Some(_), Some((request, credentials))) => {
            publish::push_branch(repo, request, credentials)?;
            true
        }
        _ => false,
    };
    Ok(Delivery {
        commit: oid,
        pushed,
        cleared,
    })
}
