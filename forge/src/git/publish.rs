//! Pushing the bot's commit: only to a
//! branch the bot owns, never the default branch, and only if the branch
//! on the server is still where the bot left it (force-with-lease). The
//! push is retried within the attempt when a passing fault ends it, and
//! is safe to repeat (see [`push_branch_with`]).
//! libgit2 runs no hooks, so nothing in the working copy runs here.

use git2::{Oid, Repository};

use super::retry::{self, GitCall};
use super::transport::{self, Credentials, TransportError};
use crate::api::RetryPolicy;

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("refusing to push to {branch}: it is the default branch")]
    DefaultBranch { branch: String },
    #[error("refusing to push to {branch}: the bot only pushes to branches under {prefix}")]
    NotOurs { branch: String, prefix: String },
    #[error("{branch} moved on the server since the bot last pushed it: not overwriting someone else's work")]
    Stale { branch: String },
    #[error("{branch} has no commit to push: {error}")]
    NoCommit { branch: String, error: git2::Error },
    #[error(transparent)]
    Transport(#[from] TransportError),
}

impl PushError {
    /// Whether a later attempt of the job could push: the network or the
    /// server failing through every retry, or the branch moving (the next
    /// attempt starts from where it is).
    pub fn worth_another_attempt(&self) -> bool {
        match self {
            PushError::Stale { .. } => true,
            PushError::Transport(error) => error.is_transient(),
            PushError::DefaultBranch { .. }
            | PushError::NotOurs { .. }
            | PushError::NoCommit { .. } => false,
        }
    }
}

pub struct PushRequest<'a> {
    pub url: &'a str,
    pub branch: &'a str,
    pub default_branch: &'a str,
    /// Branches the bot owns start with this (`forgehand/`).
    pub prefix: &'a str,
    /// Where the bot left the branch on the server; `None` for a new one.
    pub expected: Option<Oid>,
}

/// Pushes the local `branch` over the server's, if the server's is where
/// `expected` says (or absent when `expected` is `None`); retried within
/// the call by the default [`RetryPolicy`].
pub fn push_branch(
    repo: &Repository,
    request: &PushRequest<'_>,
    credentials: &Credentials,
) -> Result<(), PushError> {
    push_branch_with(repo, request, credentials, &RetryPolicy::default())
}

/// [`push_branch`], retried by `policy`. Each try reads where the
/// server's branch is first (the lease), so a repeat is safe: a push
/// whose answer was lost but which landed shows as the branch already at
/// the local commit, and that is success, not someone else's work.
pub fn push_branch_with(
    repo: &Repository,
    request: &PushRequest<'_>,
    credentials: &Credentials,
    policy: &RetryPolicy,
) -> Result<(), PushError> {
    let local = format!("refs/heads/{}", request.branch);
    push_ref_with(repo, &local, request, credentials, policy)
}

/// [`push_branch`] of what the local ref `local` holds (a held commit
/// kept in the mirror, say) instead of the local branch of that name.
pub fn push_ref(
    repo: &Repository,
    local: &str,
    request: &PushRequest<'_>,
    credentials: &Credentials,
) -> Result<(), PushError> {
    push_ref_with(repo, local, request, credentials, &RetryPolicy::default())
}

fn push_ref_with(
    repo: &Repository,
    local: &str,
    request: &PushRequest<'_>,
    credentials: &Credentials,
    policy: &RetryPolicy,
) -> Result<(), PushError> {
    let branch = request.branch;
    if branch == request.default_branch {
        return Err(PushError::DefaultBranch {
            branch: branch.into(),
        });
    }
    if !branch.starts_with(request.prefix) || branch.contains("..") {
        return Err(PushError::NotOurs {
            branch: branch.into(),
            prefix: request.prefix.into(),
        });
    }
    let full = format!("refs/heads/{branch}");
    let ours = repo
        .refname_to_id(local)
        .map_err(|error| PushError::NoCommit {
            branch: branch.into(),
            error,
        })?;
    let remote = retry::remote_name(request.url);
    let pushed = retry::retried(policy, GitCall::Push, request.url, || {
        let on_server = transport::remote_heads(request.url, credentials)
            .map_err(|e| e.during(GitCall::ListRemote, &remote))?
            .into_iter()
            .find(|(name, _)| *name == full)
            .map(|(_, oid)| oid);
        if on_server == Some(ours) {
            // Already there: an earlier try landed (or nothing changed).
            return Ok(Pushed::Already);
        }
        if on_server != request.expected {
            return Ok(Pushed::Stale);
        }
        transport::push(
            repo,
            request.url,
            &[&format!("+{local}:{full}")],
            credentials,
        )?;
        Ok(Pushed::Now)
    })?;
    match pushed {
        Pushed::Now | Pushed::Already => Ok(()),
        Pushed::Stale => Err(PushError::Stale {
            branch: branch.into(),
        }),
    }
}

/// How a try of the push ended, short of an error to retry.
enum Pushed {
    Now,
    /// The server's branch was at the local commit already.
    Already,
    /// The server's branch is neither where the bot left it nor at the
    /// local commit: someone else's work.
    Stale,
}
