//! Why a job ended early: its reason code, one line for people, and
//! whether another attempt could end otherwise. Each cause the core meets
//! is mapped here once, so the pipeline and `forgehand run` say the same
//! reason for the same tree.

use forgehand_forge::api::ForgeError;
use forgehand_forge::git::CheckoutError;
use forgehand_gate::{self as gate, RefusalReason};

use crate::environment::EnvFailure;
use crate::held::HeldCommit;
use forgehand_types::reason::{EnvProblem, Reason};

#[derive(Debug)]
pub struct Failure {
    pub reason: Reason,
    pub message: String,
    pub retryable: bool,
    /// The change the gate held, kept for a maintainer to release.
    pub held: Option<Box<HeldCommit>>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// An error, for callers that carry errors (`run`'s set-up steps): its
/// reason is read back from the chain.
impl std::error::Error for Failure {}

impl Failure {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Failure {
            reason,
            message: message.into(),
            retryable: false,
            held: None,
        }
    }

    pub fn forge(error: ForgeError) -> Self {
        let retryable = error.is_transient();
        Failure {
            reason: Reason::ForgeError,
            message: error.to_string(),
            retryable,
            held: None,
        }
    }

    pub fn stopped(reason: &str) -> Self {
        Failure::new(Reason::Stopped, reason)
    }

    /// Forgehand's own trouble (a disk, a mount): worth another attempt.
    pub fn infra(message: impl std::fmt::Display) -> Self {
        Failure {
            reason: Reason::Infra,
            message: message.to_string(),
            retryable: true,
            held: None,
        }
    }

    /// The repository's own tree is more than the host reads: no later
    /// attempt changes it.
    fn too_large(error: impl std::fmt::Display) -> Self {
        Failure::new(
            Reason::Gate(RefusalReason::TooLarge),
            format!("the repository's own tree, before the agent ran: {error}"),
        )
    }
}

/// Why a shared checkout could not be had: a commit larger than a
/// checkout may be is the repository's; anything else (a disk, a
/// mirror's object) is Forgehand's and may pass.
pub fn checkout(error: CheckoutError) -> Failure {
    if error.is_too_large() {
        return Failure::too_large(error);
    }
    Failure::infra(error)
}

/// Why the snapshot before the agent could not be taken: a tree the host
/// will not read (more entries, watched files or depth than it walks) is
/// the repository's.
pub fn snapshot(error: gate::GateError) -> Failure {
    use gate::SnapshotError::{TooDeep, TooManyEntries, TooManyRecorded};
    match error {
        gate::GateError::Snapshot(
            e @ (TooManyEntries { .. } | TooManyRecorded { .. } | TooDeep { .. }),
        ) => Failure::too_large(e),
        other => Failure::infra(other),
    }
}

/// Why the environment could not be had.
pub fn environment(failure: EnvFailure) -> Failure {
    match failure {
        EnvFailure::Declaration(error) => Failure::new(
            Reason::Environment(EnvProblem::Declaration),
            error.to_string(),
        ),
        EnvFailure::Setup(error) if error.is_too_large() => {
            Failure::new(Reason::Environment(EnvProblem::TooLarge), error.to_string())
        }
        EnvFailure::Setup(error) => Failure::new(
            Reason::Environment(EnvProblem::Setup),
            tail(&error.to_string(), 40),
        ),
        EnvFailure::Infra(message) => Failure::infra(message),
    }
}

/// The first line and the last `lines` of a long text: what a setup
/// printed ends with why it failed.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    if all.len() <= lines + 1 {
        return text.to_owned();
    }
    let mut out = all[0].to_owned();
    out.push_str(&format!("\n… {} lines left out …", all.len() - 1 - lines));
    for line in &all[all.len() - lines..] {
        out.push('\n');
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Red-team round 3, M2: a commit too large to check out is the
    /// repository's (`too_large`), not retried.
    #[test]
    fn a_commit_too_large_to_check_out_is_the_repositorys_and_not_retried() {
        let big = checkout(CheckoutError::FileTooLarge {
            path: "setup.sh".into(),
            size: 600_000_000,
            max: 100 << 20,
        });
        assert_eq!(big.reason, Reason::Gate(RefusalReason::TooLarge));
        assert!(!big.retryable);
        assert!(
            big.message.contains("setup.sh is 600000000 bytes"),
            "{}",
            big.message
        );
        let io = checkout(CheckoutError::Io {
            path: "/x".into(),
            source: std::io::Error::other("disk full"),
        });
        assert_eq!(io.reason, Reason::Infra);
        assert!(io.retryable);
    }

    #[test]
    fn a_tree_the_host_will_not_read_is_the_repositorys_and_not_retried() {
        let deep = snapshot(gate::GateError::Snapshot(gate::SnapshotError::TooDeep {
            limit: 99,
        }));
        assert_eq!(deep.reason, Reason::Gate(RefusalReason::TooLarge));
        assert!(!deep.retryable);
        assert!(deep.message.contains("99 levels"), "{}", deep.message);
        let many = snapshot(gate::GateError::Snapshot(
            gate::SnapshotError::TooManyRecorded { limit: 20 },
        ));
        assert_eq!(many.reason, Reason::Gate(RefusalReason::TooLarge));
        let io = snapshot(gate::GateError::Bare);
        assert_eq!(io.reason, Reason::Infra);
        assert!(io.retryable);
    }
}
