//! The gate between the agent's work and a push: the integrity comparison
//! and the secret scan, decided together. Nothing is committed or pushed
//! unless [`check`] clears it:
//!
//! - a **tamper** finding refuses the push (reason code `tamper`): the
//!   host will not commit or push from a git directory the agent changed;
//! - a **secret** refuses it (`secret`), naming file and line only;
//! - a **sensitive** finding refuses it (`sensitive`) unless the policy
//!   allows sensitive changes (the repository's configuration, or a
//!   maintainer's `/forgehand allow-sensitive`); when allowed it is pushed
//!   and listed in the pull request.

use std::fmt;
use std::path::PathBuf;

use git2::{DiffFormat, DiffOptions, Repository};

use super::integrity::{self, Class, IntegrityFinding, Snapshot};
use super::secrets::{Finding, SecretScanner};

/// What the operator and the maintainers allow for this job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GatePolicy {
    /// Push changes to CI definitions, instruction files, CODEOWNERS,
    /// submodule URLs, build entry points and symlinks that leave the tree.
    pub allow_sensitive: bool,
}

/// Everything the gate found, for the status comment and the pull request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateReport {
    pub integrity: Vec<IntegrityFinding>,
    pub secrets: Vec<Finding>,
}

impl GateReport {
    pub fn tamper(&self) -> impl Iterator<Item = &IntegrityFinding> {
        self.integrity.iter().filter(|f| f.class == Class::Tamper)
    }

    pub fn sensitive(&self) -> impl Iterator<Item = &IntegrityFinding> {
        self.integrity
            .iter()
            .filter(|f| f.class == Class::Sensitive)
    }

    /// A Markdown list of the findings (no secret values: findings hold
    /// none), empty when there are none.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        for finding in &self.integrity {
            out.push_str(&format!("- {finding}\n"));
        }
        for finding in &self.secrets {
            out.push_str(&format!("- secret: {finding}\n"));
        }
        out
    }
}

/// Why the gate refused, most serious first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    Tamper,
    Secret,
    Sensitive,
}

impl RefusalReason {
    /// The job's reason code.
    pub fn code(self) -> &'static str {
        match self {
            RefusalReason::Tamper => "tamper",
            RefusalReason::Secret => "secret",
            RefusalReason::Sensitive => "sensitive",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: RefusalReason,
    pub report: GateReport,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headline = match self.reason {
            RefusalReason::Tamper => {
                "not pushed: the agent changed git's own files (hooks, config, info or alternates)"
            }
            RefusalReason::Secret => "not pushed: the changes contain what looks like a secret",
            RefusalReason::Sensitive => {
                "not pushed: the changes touch sensitive files; a maintainer can say \
                 `/forgehand allow-sensitive` to push them"
            }
        };
        write!(f, "{headline}\n{}", self.report.to_markdown())
    }
}

/// The gate's leave to commit and push, with what must be listed in the
/// pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleared {
    pub report: GateReport,
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("cannot read the working copy for the integrity check: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot diff the working copy: {0}")]
    Git(#[from] git2::Error),
    #[error("the repository has no working tree")]
    Bare,
}

/// Where the host keeps a working copy: the tree the sandbox sees and the
/// git directory only the host sees.
pub fn locations(repo: &Repository) -> Result<(PathBuf, PathBuf), GateError> {
    let tree = repo.workdir().ok_or(GateError::Bare)?.to_owned();
    Ok((tree, repo.path().to_owned()))
}

/// The snapshot to take before the agent runs.
pub fn before(repo: &Repository) -> Result<Snapshot, GateError> {
    let (tree, git_dir) = locations(repo)?;
    Ok(integrity::snapshot(&tree, &git_dir)?)
}

/// Compares the working copy with `before`, scans what the agent added,
/// and decides.
pub fn check(
    repo: &Repository,
    before: &Snapshot,
    scanner: &SecretScanner,
    policy: GatePolicy,
) -> Result<Result<Cleared, Refusal>, GateError> {
    let (tree, git_dir) = locations(repo)?;
    let after = integrity::snapshot(&tree, &git_dir)?;
    let integrity = integrity::compare(before, &after);
    // A tampered git directory is not read any further, not even to diff.
    let secrets = if integrity.iter().any(|f| f.class == Class::Tamper) {
        Vec::new()
    } else {
        scanner.scan_diff(&working_diff(repo)?)
    };
    let report = GateReport { integrity, secrets };
    let reason = if report.tamper().next().is_some() {
        Some(RefusalReason::Tamper)
    } else if !report.secrets.is_empty() {
        Some(RefusalReason::Secret)
    } else if report.sensitive().next().is_some() && !policy.allow_sensitive {
        Some(RefusalReason::Sensitive)
    } else {
        None
    };
    Ok(match reason {
        Some(reason) => Err(Refusal { reason, report }),
        None => Ok(Cleared { report }),
    })
}

/// The agent's changes as a unified diff: the committed tree against the
/// working tree, new files included. Always text: a `.gitattributes` the
/// agent wrote cannot hide a file from the scan by calling it binary.
pub fn working_diff(repo: &Repository) -> Result<String, git2::Error> {
    let head = repo.head().ok().and_then(|h| h.peel_to_tree().ok());
    let mut options = DiffOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true)
        .include_typechange(true)
        .force_text(true);
    let diff = repo.diff_tree_to_workdir_with_index(head.as_ref(), Some(&mut options))?;
    let mut out = String::new();
    diff.print(DiffFormat::Patch, |_, _, line| {
        let origin = line.origin();
        if matches!(origin, '+' | '-' | ' ') {
            out.push(origin);
        }
        out.push_str(&String::from_utf8_lossy(line.content()));
        true
    })?;
    Ok(out)
}
