//! The last steps of a job on the host, in the only order they may run:
//! the gate, then the commit as the bot, then (for a forge job) the push.
//! The pipeline and `forgehand run` both go through here, so neither can
//! commit what the gate has not cleared, nor push what it has not
//! committed. The push itself is the caller's (the forge's transport):
//! given here, it runs only after the other two.

use git2::{Oid, Repository};

use crate::check::{self, Checks, Cleared, GateError, Refusal};
use crate::commit::{self, BotIdentity, CommitRequest};
use crate::integrity::LeftOut;

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
pub enum DeliverError<P> {
    #[error("{0}")]
    Refused(Box<Refusal>),
    /// Held for a maintainer (sensitive or destructive, and nothing
    /// worse): committed as the bot at [`crate::HELD_REF`], so that what a
    /// maintainer releases is exactly what the gate looked at, and not
    /// pushed.
    #[error("{refusal}")]
    Held { refusal: Box<Refusal>, commit: Oid },
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error("cannot commit: {0}")]
    Commit(git2::Error),
    #[error(transparent)]
    Push(P),
}

/// A push of the committed branch, as the caller's transport makes it.
pub type Push<'a, P> = &'a dyn Fn(&Repository) -> Result<(), P>;

/// Gate (the commit's message included), commit and, when `push` is
/// given, push.
pub fn deliver<P>(
    repo: &Repository,
    checks: Checks<'_>,
    bot: &BotIdentity,
    request: &CommitRequest<'_>,
    push: Option<Push<'_, P>>,
) -> Result<Delivery, DeliverError<P>> {
    let cleared = match check::check(repo, &checks, request.message)? {
        Ok(cleared) => cleared,
        Err(refusal) if refusal.is_held() => {
            // Every other check passed: the commit holds nothing the gate
            // refuses outright, only what a person must look at.
            let commit = commit::commit_held(repo, bot, request)
                .map_err(DeliverError::Commit)?
                .ok_or_else(|| {
                    DeliverError::Commit(git2::Error::from_str(
                        "a held change left nothing to commit",
                    ))
                })?;
            return Err(DeliverError::Held {
                refusal: Box::new(refusal),
                commit,
            });
        }
        Err(refusal) => return Err(DeliverError::Refused(Box::new(refusal))),
    };
    let oid = commit::commit_all(repo, bot, request).map_err(DeliverError::Commit)?;
    let pushed = match (oid, push) {
        (Some(_), Some(push)) => {
            push(repo).map_err(DeliverError::Push)?;
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
