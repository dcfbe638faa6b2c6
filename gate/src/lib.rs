//! What stands between the agent's work and a push, used the same way by
//! `forgehand serve`'s jobs and by `forgehand run` (which has no forge):
//!
//! - [`integrity`]: the tree's snapshot before the agent runs and its
//!   audit after (git's own files, what runs code, sizes, special files),
//!   bounded so that nothing the agent left is read unbounded;
//! - [`secrets`]: the host's secrets and secret-shaped text in the diff,
//!   the file names and the commit message, and the redaction of text
//!   that leaves for the forge;
//! - [`destructive`](mod@destructive): what a change removes of the
//!   tracked files, refused past a share;
//! - [`check`]: the gate's decision from all three;
//! - [`commit`]: the bot's commit;
//! - [`deliver`](mod@deliver): gate, commit, push (the caller's), in that order;
//! - [`markdown`]: text from outside (paths the agent chose, a
//!   repository's setup output, commands) in what the bot writes on the
//!   forge, shown and never read as markup.

pub mod check;
pub mod classify;
pub mod commit;
pub mod deliver;
pub mod destructive;
pub mod integrity;
/// Lives in the text crate (the agent shows outside text too); its old
/// path stays.
pub use forgehand_text::markdown;
// The scanner and the redaction stand below the gate and the forge crate.
pub use forgehand_secrets as secrets;
#[cfg(test)]
mod secrets_tests;

pub use check::{
    before, check, locations, working_diff, Checks, Cleared, GateError, GatePolicy, GateReport,
    HeldPath, Oversize, Refusal, RefusalReason, DEFAULT_MAX_REMOVED_SHARE,
};
pub use classify::RepoRules;
pub use commit::{commit_all, commit_held, tree_to_commit, BotIdentity, CommitRequest, HELD_REF};
pub use deliver::{deliver, DeliverError, Delivery, Push};
pub use destructive::Removal;
pub use integrity::{
    compare, snapshot, Class, IntegrityFinding, LeftOut, Snapshot, SnapshotError, TreeLimits,
    DEFAULT_MAX_FILE_BYTES,
};
pub use secrets::{Finding, Place, SecretKind, SecretScanner};
