//! The gate between the agent's work and a push: the tree audit, the
//! integrity comparison and the secret scan, decided together. Nothing is
//! committed or pushed unless [`check`] clears it:
//!
//! - a **tamper** finding refuses the push (reason code `tamper`): the
//!   host will not commit or push from a git directory the agent changed;
//! - a file above the size limit, or a tree with more entries than the
//!   host reads, refuses it (`too_large`), naming path and size;
//! - a **secret** refuses it (`secret`), by place only (file and line, a
//!   file's name, a line of the commit message);
//! - a **sensitive** finding refuses it (`sensitive`) unless the policy
//!   allows sensitive changes (the repository's configuration, or a
//!   maintainer's `/forgehand allow-sensitive`); when allowed it is pushed
//!   and listed in the pull request.
//!
//! Pipes, sockets and devices in the tree are removed before anything
//! reads it, and listed as left out.

use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{Diff, DiffOptions, Index, Repository};

use crate::classify::{classify, Held, RepoRules, Status, Verdict};
use crate::destructive::{self, Removal};
use crate::integrity::audit::MAX_LISTED;
use crate::integrity::{
    self, Audit, Class, Ignores, IntegrityFinding, LeftOut, Snapshot, SnapshotError, TreeLimits,
};
use crate::markdown;
use crate::secrets::{Finding, Place, ScanError, SecretKind, SecretScanner};

/// What the operator and the maintainers allow for this job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GatePolicy {
    /// Push changes to the catalogue's paths (CI definitions, instruction
    /// files, CODEOWNERS, build entry points, ...) and symlinks that leave
    /// the tree.
    pub allow_sensitive: bool,
    /// Push a change that removes more than `max_removed_share` of the
    /// tracked files or bytes, or every file.
    pub allow_destructive: bool,
    /// The share (0 to 1) of the tracked files, or of their bytes, a
    /// change may delete or empty before it is `destructive`.
    pub max_removed_share: f64,
}

/// The share of the tracked files or bytes a change may remove, unless
/// the operator says otherwise (`gate.max_removed_share`).
pub const DEFAULT_MAX_REMOVED_SHARE: f64 = 0.5;

impl Default for GatePolicy {
    fn default() -> Self {
        GatePolicy {
            allow_sensitive: false,
            allow_destructive: false,
            max_removed_share: DEFAULT_MAX_REMOVED_SHARE,
        }
    }
}

/// What the gate checks against.
pub struct Checks<'a> {
    /// Taken before the agent ran; its limits bound the reads after.
    pub before: &'a Snapshot,
    pub scanner: &'a SecretScanner,
    pub policy: GatePolicy,
    /// The repository's own `[gate]` rules, from its base commit.
    pub rules: &'a RepoRules,
}

/// A changed path the classification holds ([`crate::classify`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldPath {
    /// As [`integrity::shown`] writes it.
    pub path: String,
    pub change: integrity::Change,
    pub why: Held,
    /// The catalogue row that explains it, when one names it.
    pub explained: Option<&'static integrity::Rule>,
}

impl fmt::Display for HeldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let change = match self.change {
            integrity::Change::Added => "added",
            integrity::Change::Modified => "modified",
            integrity::Change::Removed => "removed",
        };
        write!(f, "held: {} {change} ({}", self.path, self.why)?;
        if let Some(rule) = self.explained {
            write!(f, "; {}: {}", rule.what, rule.why)?;
        }
        f.write_str(")")
    }
}

/// What was too large to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Oversize {
    File {
        path: String,
        bytes: u64,
        limit: u64,
    },
    /// `more` files beyond those listed.
    MoreFiles {
        more: usize,
    },
    Entries {
        limit: usize,
    },
    /// Directories nested deeper than the host's git reads.
    Depth {
        limit: usize,
    },
    Recorded {
        limit: usize,
    },
    /// The files together, as the host would read them.
    Total {
        bytes: u64,
        limit: u64,
    },
    /// What the agent added to the files' total since the snapshot.
    Added {
        bytes: u64,
        limit: u64,
    },
}

impl fmt::Display for Oversize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Oversize::File { path, bytes, limit } => {
                write!(f, "{path}: {bytes} bytes, above the limit of {limit} bytes")
            }
            Oversize::MoreFiles { more } => write!(f, "and {more} more files above the limit"),
            Oversize::Entries { limit } => {
                write!(f, "the working tree holds more than {limit} entries")
            }
            Oversize::Depth { limit } => write!(
                f,
                "the working tree nests directories more than {limit} levels deep, deeper than git reads"
            ),
            Oversize::Recorded { limit } => write!(
                f,
                "the working tree holds more than {limit} watched files and symlinks"
            ),
            Oversize::Added { bytes, limit } => write!(
                f,
                "the agent added {bytes} bytes to the working tree's files as the host reads them (holes in sparse files and each hard link included), above the limit of {limit} bytes"
            ),
            Oversize::Total { bytes, limit } => write!(
                f,
                "the working tree's files add up to {bytes} bytes as the host reads them (holes in sparse files included), above the limit of {limit} bytes"
            ),
        }
    }
}

/// Everything the gate found, for the status comment and the pull request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateReport {
    pub integrity: Vec<IntegrityFinding>,
    pub secrets: Vec<Finding>,
    pub too_large: Vec<Oversize>,
    /// Special files removed from the tree (at most
    /// [`integrity::audit::MAX_LISTED`]; `left_out_more` counts the rest).
    pub left_out: Vec<LeftOut>,
    pub left_out_more: usize,
    /// What the change removes, when that is more than the policy's
    /// share (refused, or pushed because a maintainer allowed it).
    pub removal: Option<Removal>,
    /// The changed paths that are not ordinary work (refused, or pushed
    /// because a maintainer allowed them).
    pub held: Vec<HeldPath>,
}

/// Lines of a list beyond this are counted, not shown: a pull request
/// body has a size limit, and the agent chooses how many files it makes.
const MAX_LINES: usize = 100;

impl GateReport {
    pub fn tamper(&self) -> impl Iterator<Item = &IntegrityFinding> {
        self.integrity.iter().filter(|f| f.class == Class::Tamper)
    }

    pub fn sensitive(&self) -> impl Iterator<Item = &IntegrityFinding> {
        self.integrity
            .iter()
            .filter(|f| f.class == Class::Sensitive)
    }

    /// Whether anything is held for a maintainer: a changed path that is
    /// not ordinary, or a link the snapshot found sensitive.
    pub fn holds(&self) -> bool {
        !self.held.is_empty() || self.sensitive().next().is_some()
    }

    /// A Markdown list of the findings (no secret values: findings hold
    /// none), empty when there are none.
    /// Every path is code: the agent chose it.
    pub fn to_markdown(&self) -> String {
        let code = |path: &str| markdown::code(path);
        let lines = self
            .integrity
            .iter()
            .map(|f| {
                IntegrityFinding {
                    path: code(&f.path),
                    ..f.clone()
                }
                .to_string()
            })
            .chain(self.too_large.iter().map(|o| {
                let o = match o {
                    Oversize::File { path, bytes, limit } => Oversize::File {
                        path: code(path),
                        bytes: *bytes,
                        limit: *limit,
                    },
                    other => other.clone(),
                };
                format!("too large: {o}")
            }))
            .chain(self.secrets.iter().map(|s| {
                let place = match &s.place {
                    Place::Line { file, line } => Place::Line {
                        file: code(file),
                        line: *line,
                    },
                    Place::FileName { file } => Place::FileName { file: code(file) },
                    Place::Archive { file, member } => Place::Archive {
                        file: code(file),
                        member: if member.is_empty() {
                            String::new()
                        } else {
                            code(member)
                        },
                    },
                    other => other.clone(),
                };
                let finding = Finding {
                    place,
                    kind: s.kind.clone(),
                };
                format!("secret: {finding}")
            }))
            .chain(self.held.iter().map(|h| {
                HeldPath {
                    path: code(&h.path),
                    ..h.clone()
                }
                .to_string()
            }))
            .chain(self.removal.iter().map(|r| format!("destructive: {r}")));
        markdown_list(lines)
    }

    /// A Markdown list of what was left out, empty when nothing was.
    pub fn left_out_markdown(&self) -> String {
        let mut out = markdown_list(self.left_out.iter().map(|l| {
            LeftOut {
                path: markdown::code(&l.path),
                kind: l.kind,
            }
            .to_string()
        }));
        if self.left_out_more > 0 {
            out.push_str(&format!("- and {} more\n", self.left_out_more));
        }
        out
    }
}

fn markdown_list(lines: impl Iterator<Item = String>) -> String {
    let mut out = String::new();
    let mut more = 0;
    for (n, line) in lines.enumerate() {
        if n < MAX_LINES {
            out.push_str(&format!("- {line}\n"));
        } else {
            more += 1;
        }
    }
    if more > 0 {
        out.push_str(&format!("- and {more} more\n"));
    }
    out
}

pub use forgehand_types::reason::RefusalReason;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: RefusalReason,
    /// What a maintainer can allow to push the change as it is, every
    /// one of them needed; empty when nobody can (tampering, a secret, a
    /// tree too large: those are refused, not held).
    pub needs: Vec<RefusalReason>,
    pub report: GateReport,
}

impl Refusal {
    /// Whether a maintainer can release the change: it is held, not
    /// refused.
    pub fn is_held(&self) -> bool {
        !self.needs.is_empty()
    }

    /// The commands that release it (`/forgehand allow-sensitive`, …).
    pub fn commands(&self) -> Vec<&'static str> {
        self.needs.iter().filter_map(|n| n.command()).collect()
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = self.reason.what();
        if !self.is_held() {
            return write!(f, "not pushed: {what}\n{}", self.report.to_markdown());
        }
        let commands: Vec<String> = self
            .commands()
            .iter()
            .map(|c| format!("`/forgehand {c}`"))
            .collect();
        write!(
            f,
            "held, not pushed: {what}; a maintainer can say {} to push it as it is\n{}",
            commands.join(" and "),
            self.report.to_markdown()
        )
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
    Snapshot(#[from] SnapshotError),
    #[error("cannot diff the working copy: {0}")]
    Git(#[from] git2::Error),
    #[error("cannot scan the changes: {0}")]
    Scan(#[from] ScanError),
    #[error("the repository has no working tree")]
    Bare,
}

/// Where the host keeps a working copy: the tree the sandbox sees and the
/// git directory only the host sees.
pub fn locations(repo: &Repository) -> Result<(PathBuf, PathBuf), GateError> {
    let tree = repo.workdir().ok_or(GateError::Bare)?.to_owned();
    Ok((tree, repo.path().to_owned()))
}

/// The snapshot to take before the agent runs, with the limits the gate
/// will apply after.
pub fn before(repo: &Repository, limits: TreeLimits) -> Result<Snapshot, GateError> {
    let (tree, git_dir) = locations(repo)?;
    let ignores = GitIgnores::new(repo)?;
    Ok(integrity::snapshot_with(&tree, &git_dir, limits, &ignores)?)
}

/// Audits the working copy, compares it with `checks.before`, scans what
/// the agent added and the commit `message`, and decides.
pub fn check(
    repo: &Repository,
    checks: &Checks<'_>,
    message: &str,
) -> Result<Result<Cleared, Refusal>, GateError> {
    let mut report = GateReport::default();
    let reason = decide(repo, checks, message, &mut report)?;
    // The agent chose the paths: one that holds a secret is not shown
    // whole, whatever the verdict.
    mask_paths(&mut report, checks.scanner);
    Ok(match reason {
        Some(reason) => {
            let needs = match reason {
                RefusalReason::Destructive | RefusalReason::Sensitive => {
                    needs(&report, checks.policy)
                }
                _ => Vec::new(),
            };
            Err(Refusal {
                reason,
                needs,
                report,
            })
        }
        None => Ok(Cleared { report }),
    })
}

/// The steps of [`check`], in order; the first refusal ends them.
fn decide(
    repo: &Repository,
    checks: &Checks<'_>,
    message: &str,
    report: &mut GateReport,
) -> Result<Option<RefusalReason>, GateError> {
    let (tree, git_dir) = locations(repo)?;
    let limits = checks.before.limits();
    // The git directory first: asking libgit2 what is ignored reads it.
    let git_now = integrity::snapshot_git(&git_dir, limits)?;
    report.integrity = integrity::compare(&checks.before.git_only(), &git_now);
    if !report.integrity.is_empty() {
        return Ok(Some(RefusalReason::Tamper));
    }
    let ignores = GitIgnores::new(repo)?;
    let mut audit = integrity::audit(&tree, &git_dir, limits, &ignores)?;
    audit.left_out.sort_by(|a, b| a.path.cmp(&b.path));
    report.left_out = std::mem::take(&mut audit.left_out);
    report.left_out_more = audit.left_out_more;
    if let Some(limit) = audit.too_many_entries {
        report.too_large.push(Oversize::Entries { limit });
        return Ok(Some(RefusalReason::TooLarge));
    }
    if let Some(limit) = audit.too_deep {
        report.too_large.push(Oversize::Depth { limit });
        return Ok(Some(RefusalReason::TooLarge));
    }
    let after = match integrity::snapshot_with(&tree, &git_dir, limits, &ignores) {
        Ok(after) => after,
        Err(SnapshotError::TooManyEntries { limit }) => {
            report.too_large.push(Oversize::Entries { limit });
            return Ok(Some(RefusalReason::TooLarge));
        }
        Err(SnapshotError::TooManyRecorded { limit }) => {
            report.too_large.push(Oversize::Recorded { limit });
            return Ok(Some(RefusalReason::TooLarge));
        }
        Err(SnapshotError::TooDeep { limit }) => {
            report.too_large.push(Oversize::Depth { limit });
            return Ok(Some(RefusalReason::TooLarge));
        }
        Err(other) => return Err(other.into()),
    };
    // The snapshot's catalogue rows are the diff's to judge now (below):
    // what stays of it is git's own files and links.
    report.integrity = integrity::compare(checks.before, &after)
        .into_iter()
        .filter(|f| {
            f.class == Class::Tamper || !matches!(f.reason, integrity::Reason::Catalogue(_))
        })
        .collect();
    // A tampered git directory is not read any further, not even to diff.
    if report.tamper().next().is_some() {
        return Ok(Some(RefusalReason::Tamper));
    }
    report.too_large = large_files(&ignores, &audit, limits);
    if !report.too_large.is_empty() {
        return Ok(Some(RefusalReason::TooLarge));
    }
    // Before libgit2 reads the files: what they add up to, as it would
    // read them.
    if audit.total_bytes > limits.max_total_bytes {
        report.too_large.push(Oversize::Total {
            bytes: audit.total_bytes,
            limit: limits.max_total_bytes,
        });
        return Ok(Some(RefusalReason::TooLarge));
    }
    let added = audit.total_bytes.saturating_sub(checks.before.tree_bytes());
    if added > limits.max_added_bytes {
        report.too_large.push(Oversize::Added {
            bytes: added,
            limit: limits.max_added_bytes,
        });
        return Ok(Some(RefusalReason::TooLarge));
    }
    // Listed whatever else refuses: a held path is named even when a
    // secret stops the push first. After the sizes: the diff reads every
    // changed file.
    report.held = held_paths(repo, &tree, checks.rules)?;
    report
        .held
        .retain(|h| !report.integrity.iter().any(|f| f.path == h.path));
    let diff = working_diff(repo, limits)?;
    report.secrets = checks.scanner.scan_diff(&diff)?;
    report
        .secrets
        .extend(archives(&tree, &diff, checks.scanner)?);
    report.secrets.extend(checks.scanner.scan_message(message));
    if !report.secrets.is_empty() {
        return Ok(Some(RefusalReason::Secret));
    }
    let removal = destructive::measure(repo)?;
    if removal.is_destructive(checks.policy.max_removed_share) {
        report.removal = Some(removal);
    }
    // Both measured whatever the other says: a held change is released
    // only once everything it needs is allowed.
    Ok(needs(report, checks.policy).first().copied())
}

/// What a maintainer must allow before the change may be pushed: the
/// last two steps of the gate, the only ones a person can lift.
fn needs(report: &GateReport, policy: GatePolicy) -> Vec<RefusalReason> {
    let mut needs = Vec::new();
    if report.removal.is_some() && !policy.allow_destructive {
        needs.push(RefusalReason::Destructive);
    }
    if report.holds() && !policy.allow_sensitive {
        needs.push(RefusalReason::Sensitive);
    }
    needs
}

fn mask_paths(report: &mut GateReport, scanner: &SecretScanner) {
    let mask = |path: &mut String| {
        if let Some(masked) = scanner.masked(path) {
            *path = masked;
        }
    };
    report.integrity.iter_mut().for_each(|f| mask(&mut f.path));
    report.left_out.iter_mut().for_each(|l| mask(&mut l.path));
    report.held.iter_mut().for_each(|h| mask(&mut h.path));
    for oversize in &mut report.too_large {
        if let Oversize::File { path, .. } = oversize {
            mask(path);
        }
    }
}

/// Every changed path the classification holds, in path order.
fn held_paths(
    repo: &Repository,
    tree: &Path,
    rules: &RepoRules,
) -> Result<Vec<HeldPath>, GateError> {
    let contents = crate::classify::changes::WorkingContents::new(repo, tree.to_owned());
    let mut held = Vec::new();
    for change in crate::classify::changes::working_changes(repo)? {
        if let Verdict::Held { why, explained } = classify(&change, rules, &contents) {
            held.push(HeldPath {
                path: integrity::shown(Path::new(&change.path)),
                change: match change.status {
                    Status::Added => integrity::Change::Added,
                    Status::Modified => integrity::Change::Modified,
                    Status::Deleted => integrity::Change::Removed,
                },
                why,
                explained,
            });
        }
    }
    held.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(held)
}

/// The host's secrets inside the archives the change adds or changes
/// (gzip, zip, tar: `secrets::archive`), and the archives that cannot be
/// scanned. Only regular files are opened (a link is not followed), and
/// none larger than the audit let through.
fn archives(
    tree: &Path,
    diff: &Diff<'_>,
    scanner: &SecretScanner,
) -> Result<Vec<Finding>, GateError> {
    use crate::secrets::archive::{is_archive, ArchiveBudget, ArchiveProblem};
    use std::io::Read;
    let mut findings = Vec::new();
    for delta in diff.deltas() {
        if !matches!(
            delta.status(),
            git2::Delta::Added
                | git2::Delta::Modified
                | git2::Delta::Untracked
                | git2::Delta::Typechange
        ) {
            continue;
        }
        let Some(rel) = delta.new_file().path() else {
            continue;
        };
        let path = tree.join(rel);
        let is_file = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
        if !is_file {
            continue;
        }
        let Ok(mut file) = std::fs::File::open(&path) else {
            continue;
        };
        let mut head = [0u8; 512];
        let mut read = 0;
        while read < head.len() {
            match file.read(&mut head[read..]) {
                Ok(0) => break,
                Ok(n) => read += n,
                Err(_) => break,
            }
        }
        if !is_archive(&head[..read]) {
            continue;
        }
        let mut bytes = head[..read].to_vec();
        file.read_to_end(&mut bytes)
            .map_err(|e| GateError::Snapshot(SnapshotError::io(&path, e)))?;
        let shown = integrity::shown(rel);
        for found in scanner.scan_archive(&bytes, ArchiveBudget::default()) {
            let kind = match found.what {
                ArchiveProblem::Secret(kind) => kind,
                other => SecretKind::Unscannable(other.to_string()),
            };
            findings.push(Finding {
                place: Place::Archive {
                    file: shown.clone(),
                    member: found.member,
                },
                kind,
            });
        }
    }
    Ok(findings)
}

/// Of the files above the limit, those git would read: not one it
/// ignores and does not track, nor one it tracks at that very size (what
/// the repository already held, unless at a watched path).
fn large_files(ignores: &GitIgnores<'_>, audit: &Audit, limits: TreeLimits) -> Vec<Oversize> {
    let mut found: Vec<Oversize> = audit
        .large
        .iter()
        .filter(|file| {
            let rel = integrity::shown(&file.rel);
            match ignores.index.get_path(&file.rel, 0) {
                Some(entry) => {
                    integrity::is_watched(&rel)
                        || file.bytes > u64::from(u32::MAX)
                        || u64::from(entry.file_size) != file.bytes
                }
                None => {
                    let ignored = audit.ignores_trusted
                        && ignores.repo.is_path_ignored(&file.rel).unwrap_or(false);
                    !ignored
                }
            }
        })
        .map(|file| Oversize::File {
            path: integrity::shown(&file.rel),
            bytes: file.bytes,
            limit: limits.max_file_bytes,
        })
        .collect();
    found.sort_by_key(ToString::to_string);
    // Past those listed, and those not looked at one by one: counted, and
    // refused.
    let more = found.len().saturating_sub(MAX_LISTED) + audit.large_more;
    found.truncate(MAX_LISTED);
    if more > 0 {
        found.push(Oversize::MoreFiles { more });
    }
    found
}

/// What git never looks into: a directory it ignores that holds nothing
/// it tracks. Build output (`target/`, `node_modules/`) is not walked,
/// counted or listed, as it is not committed.
struct GitIgnores<'r> {
    repo: &'r Repository,
    index: Index,
}

impl<'r> GitIgnores<'r> {
    fn new(repo: &'r Repository) -> Result<Self, git2::Error> {
        Ok(GitIgnores {
            repo,
            index: repo.index()?,
        })
    }
}

impl Ignores for GitIgnores<'_> {
    fn skip_dir(&self, rel: &Path) -> bool {
        let mut prefix = rel.as_os_str().as_bytes().to_vec();
        prefix.push(b'/');
        if self.index.find_prefix(prefix).is_ok() {
            return false;
        }
        self.repo.is_path_ignored(rel).unwrap_or(false)
    }

    fn never_committed(&self, rel: &Path) -> bool {
        self.index.get_path(rel, 0).is_none() && self.repo.is_path_ignored(rel).unwrap_or(false)
    }
}

/// The agent's changes: the committed tree against the working tree, new
/// files included. Always text: a `.gitattributes` the agent wrote cannot
/// hide a file from the scan by calling it binary, and no file is binary
/// for its size (the audit bounds the size).
pub fn working_diff(repo: &Repository, limits: TreeLimits) -> Result<Diff<'_>, git2::Error> {
    let head = repo.head().ok().and_then(|h| h.peel_to_tree().ok());
    let mut options = DiffOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true)
        .include_typechange(true)
        .force_text(true)
        .max_size(
            i64::try_from(limits.max_file_bytes)
                .unwrap_or(i64::MAX)
                .saturating_add(1),
        );
    repo.diff_tree_to_workdir_with_index(head.as_ref(), Some(&mut options))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrity::{Change, Class, Reason};
    use crate::secrets::SecretKind;

    /// The agent chose the paths: in the status comment and the pull
    /// request they are code, so no path can close what holds it, show an
    /// image, link, or mention anyone.
    #[test]
    fn paths_in_the_reports_markdown_are_code() {
        let path = "x` ![i](https://example.invalid/p.png) @maintainers `y";
        let report = GateReport {
            integrity: vec![IntegrityFinding {
                path: path.into(),
                change: Change::Added,
                class: Class::Sensitive,
                reason: Reason::PlantedGit,
            }],
            secrets: vec![Finding {
                place: Place::Line {
                    file: path.into(),
                    line: 3,
                },
                kind: SecretKind::HostCredential("gitea.token".into()),
            }],
            too_large: vec![Oversize::File {
                path: path.into(),
                bytes: 10,
                limit: 1,
            }],
            left_out: vec![LeftOut {
                path: path.into(),
                kind: crate::integrity::Special::Fifo,
            }],
            ..GateReport::default()
        };
        let quoted = "`` x` ![i](https://example.invalid/p.png) @maintainers `y ``";
        for (what, md) in [
            ("findings", report.to_markdown()),
            ("left out", report.left_out_markdown()),
        ] {
            for line in md.lines() {
                assert!(line.contains(quoted), "{what}: {line}");
                let outside = line.replace(quoted, "");
                assert!(!outside.contains('`'), "{what}: {line}");
                assert!(!outside.contains("!["), "{what}: {line}");
            }
        }
        assert_eq!(report.to_markdown().lines().count(), 3);
    }
}
