//! Host-side git: what the host does with a job's working copy, and the
//! checks that stand between the agent's work and a push.

pub mod deliver;
pub mod gate;
pub mod integrity;
pub mod mirror;
pub mod publish;
pub mod retry;
pub mod secrets;
pub mod transport;

pub use deliver::{deliver, Checks, DeliverError, Delivery};
pub use gate::{Cleared, GatePolicy, GateReport, Oversize, Refusal, RefusalReason};
pub use integrity::{
    compare, snapshot, Class, IntegrityFinding, LeftOut, Snapshot, TreeLimits,
    DEFAULT_MAX_FILE_BYTES,
};
pub use mirror::{branch_name, CopyStrategy, Mirror, MirrorCache};
pub use publish::{
    commit_all, push_branch, push_branch_with, BotIdentity, CommitRequest, PushError, PushRequest,
};
pub use retry::GitCall;
pub use secrets::{Finding, Place, SecretKind, SecretScanner};
pub use transport::{Credentials, TransportError};
