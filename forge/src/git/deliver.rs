//! The last steps of a job on the host, in the only order they may run:
//! the gate, then the commit as the bot, then (for a forge job) the push.
//! The pipeline and `forgehand run` both go through here, so neither can
//! commit what the gate has not cleared.

use git2::{Oid, Repository};

use super::gate::{self, Cleared, GateError, GatePolicy, Refusal};
use super::integrity::Snapshot;
use super::publish::{self, BotIdentity, CommitRequest, PushError, PushRequest};
use super::secrets::SecretScanner;
use super::transport::Credentials;

/// What was delivered: the commit (none when the agent changed nothing)
/// and the findings the pull request must list.
#[derive(Debug)]
pub struct Delivery {
    pub commit: Option<Oid>,
    pub pushed: bool,
    pub cleared: Cleared,
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

pub struct Checks<'a> {
    /// Taken before the agent ran.
    pub before: &'a Snapshot,
    pub scanner: &'a SecretScanner,
    pub policy: GatePolicy,
}

/// Gate, commit and, when `push` is given, push.
pub fn deliver(
    repo: &Repository,
    checks: Checks<'_>,
    bot: &BotIdentity,
    commit: &CommitRequest<'_>,
    push: Option<(&PushRequest<'_>, &Credentials)>,
) -> Result<Delivery, DeliverError> {
    let cleared = gate::check(repo, checks.before, checks.scanner, checks.policy)?
        .map_err(DeliverError::Refused)?;
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
