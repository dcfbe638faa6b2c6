//! The gate and the bot's commit over the working copy, then the caller's
//! push (a forge job's; none for `run`, which keeps the commit on a local
//! branch). What the agent wrote becomes the commit message, kept for
//! ever in the history: a secret in it is replaced by a marker first, and
//! the gate checks the message again.

use forgehand_gate::{
    BotIdentity, Checks, CommitRequest, DeliverError, Delivery, GatePolicy, Push, RepoRules,
    SecretScanner,
};

use super::copy::JobCopy;

/// What the agent said, as it may be kept: its title and summary with
/// every known secret replaced by a marker.
pub struct Said {
    pub title: String,
    pub summary: String,
}

impl Said {
    pub fn redacted(scanner: &SecretScanner, title: &str, summary: &str) -> Said {
        Said {
            title: scanner.redact(title).text,
            summary: scanner.redact(summary).text,
        }
    }

    /// The commit's message.
    pub fn message(&self) -> String {
        format!("{}\n\n{}", self.title, self.summary)
    }
}

/// The rules the change is judged by.
pub struct Judged<'a> {
    pub scanner: &'a SecretScanner,
    pub policy: GatePolicy,
    pub rules: &'a RepoRules,
}

/// Gate (against the snapshot taken before the agent ran), commit as the
/// bot and, given `push`, push.
pub fn deliver<P>(
    copy: &JobCopy,
    repo: &git2::Repository,
    judged: Judged<'_>,
    identity: &BotIdentity,
    request: &CommitRequest<'_>,
    push: Option<Push<'_, P>>,
) -> Result<Delivery, DeliverError<P>> {
    forgehand_gate::deliver(
        repo,
        Checks {
            before: copy.before(),
            scanner: judged.scanner,
            policy: judged.policy,
            rules: judged.rules,
        },
        identity,
        request,
        push,
    )
}
