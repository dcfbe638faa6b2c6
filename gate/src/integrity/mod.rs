//! The integrity snapshot: before the agent runs, what can make the host,
//! CI, a build, a hook or an editor run something or trust someone: a
//! SHA-256 of every file in the [catalogue] (or, for its content-aware
//! rows, of the keys that matter), of git's own files, of each git control
//! file (`.gitignore`, `.gitattributes`, `.gitmodules`), and every symlink
//! with its target and where it really resolves; after, the differences,
//! each classed:
//!
//! - **tamper**: git internals (config, hooks, info, alternates), any
//!   `.git` planted in the tree, and a git control file made a symlink
//!   (git reads what it points to). Never pushed: the host's own git must
//!   not be steered by the agent.
//! - **sensitive**: a catalogue path, a symlink at one or in place of a
//!   directory on the way to one, a symlink that resolves outside the
//!   tree. Pushed only when allowed, and always listed in the pull
//!   request.
//!
//! Anything else the agent changes is its work, and not reported here.
//! Reading is bounded whatever the tree holds (see [`walk`] and
//! [`TreeLimits`]).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

mod alias;
pub mod audit;
pub mod catalogue;
pub mod count;
pub(crate) mod glob;
mod keys;
mod resolve;
mod walk;

pub use audit::{audit, Audit, LeftOut};
pub use catalogue::{catalogue_holds, markdown_table, rule_for, Rule, Watch, CATALOGUE};
pub use walk::{Ignores, NoIgnores, Special};

use catalogue::{git_reason, rule_through};
use keys::Keys;
use resolve::Resolution;
use walk::{Budget, Item, Kind, Opened};

/// GitHub refuses files above 100 MiB; so does the gate, by default.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 100 << 20;

/// How much of a tree the host reads. The snapshot before the agent runs
/// carries them, so the gate after applies the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeLimits {
    /// A regular file larger than this is not read (and not pushed).
    pub max_file_bytes: u64,
    /// Directory entries one walk of the tree may visit (symlink lookups
    /// count too).
    pub max_entries: usize,
    /// Watched files and symlinks one snapshot may record.
    pub max_recorded: usize,
    /// What the tree's regular files may add up to as the host reads them
    /// (their length, holes included): sparse files cost the sandbox's
    /// disk nothing, but the host's diff and commit read every byte.
    pub max_total_bytes: u64,
    /// How much the agent may add to that total (new files, longer ones,
    /// hard links: each counts): what the host reads beyond the checkout.
    pub max_added_bytes: u64,
    /// How deep directories may nest in the tree git walks.
    pub max_depth: usize,
}

/// libgit2's working-directory iterator fails on a hundredth level of
/// directories ("directory nesting too deep"), so the host's diff and
/// commit could not read a deeper tree; the walk refuses it first, by
/// name, before asking git what is ignored at each level (a question
/// that walks up every level again).
pub const DEFAULT_MAX_DEPTH: usize = 99;

/// 10 GiB: what a job's working copy may hold by default
/// (`sandbox.disk_mib`).
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 10 << 30;

/// 1 GiB: what the agent may add to the tree by default
/// (`git.max_added_mib`).
pub const DEFAULT_MAX_ADDED_BYTES: u64 = 1 << 30;

impl Default for TreeLimits {
    fn default() -> Self {
        TreeLimits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_entries: 500_000,
            max_recorded: 50_000,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            max_added_bytes: DEFAULT_MAX_ADDED_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("the working tree holds more than {limit} entries")]
    TooManyEntries { limit: usize },
    #[error("the working tree holds more than {limit} watched files and symlinks")]
    TooManyRecorded { limit: usize },
    #[error("the working tree nests directories more than {limit} levels deep")]
    TooDeep { limit: usize },
}

impl SnapshotError {
    pub(crate) fn io(path: &Path, source: io::Error) -> SnapshotError {
        SnapshotError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File {
        sha256: [u8; 32],
        executable: bool,
    },
    /// A content-aware row's file: its watched keys, and its bytes for
    /// when it does not parse.
    Manifest {
        keys: Keys,
        sha256: [u8; 32],
    },
    /// Larger than the limit: not read.
    Oversize {
        bytes: u64,
    },
    Symlink {
        target: PathBuf,
        resolution: Resolution,
    },
    /// A directory at a watched path (a planted `.git`, a git directory's
    /// `hooks`): replaced by a link or a file, it shows.
    Dir,
    Special(Special),
}

/// What was watched, as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `worktree/<path>` or `git/<path>`, paths as [`shown`] writes them.
    entries: BTreeMap<String, Entry>,
    limits: TreeLimits,
    /// The working tree's regular files' lengths added up, when taken,
    /// less the large ones git never commits ([`count`]).
    tree_bytes: u64,
}

impl Snapshot {
    pub fn limits(&self) -> TreeLimits {
        self.limits
    }

    /// What the working tree's regular files added up to (their length,
    /// holes included) when the snapshot was taken.
    pub fn tree_bytes(&self) -> u64 {
        self.tree_bytes
    }

    /// Only what was recorded of the git directory.
    pub fn git_only(&self) -> Snapshot {
        Snapshot {
            entries: self
                .entries
                .iter()
                .filter(|(key, _)| key.starts_with("git/"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            limits: self.limits,
            tree_bytes: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    Sensitive,
    Tamper,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Modified,
    Removed,
}

/// Why a change was classed as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// In the git directory.
    GitInternal(&'static str),
    PlantedGit,
    /// `.gitignore`, `.gitattributes` or `.gitmodules` made a symlink.
    ControlFileLink,
    Catalogue(&'static Rule),
    /// A symlink at a catalogue path.
    LinkAt(&'static Rule),
    /// A symlink in place of a directory on the way to a catalogue path.
    LinkThrough(&'static Rule),
    LeavingLink,
    /// A file a symlink at a catalogue path leads to.
    Through(&'static Rule),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::GitInternal(why) => f.write_str(why),
            Reason::PlantedGit => f.write_str("git's own files planted in the working tree"),
            Reason::ControlFileLink => {
                f.write_str("a git control file made a symlink: git reads what it points to")
            }
            Reason::Catalogue(rule) => write!(f, "{}: {}", rule.what, rule.why),
            Reason::LinkAt(rule) => write!(f, "a symlink in place of {}", rule.what),
            Reason::LinkThrough(rule) => {
                write!(
                    f,
                    "a symlink in place of a directory that holds {}",
                    rule.what
                )
            }
            Reason::LeavingLink => f.write_str("a symlink that points outside the working tree"),
            Reason::Through(rule) => {
                write!(f, "{}, reached through a symlink: {}", rule.what, rule.why)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrityFinding {
    /// `.git/<path>` for git internals, the tree path otherwise.
    pub path: String,
    pub change: Change,
    pub class: Class,
    pub reason: Reason,
}

impl fmt::Display for IntegrityFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let change = match self.change {
            Change::Added => "added",
            Change::Modified => "modified",
            Change::Removed => "removed",
        };
        let class = match self.class {
            Class::Tamper => "tamper",
            Class::Sensitive => "sensitive",
        };
        write!(f, "{class}: {} {change} ({})", self.path, self.reason)
    }
}

/// A path as the host writes it in keys, findings and comments: the
/// agent chose its bytes, so control characters and bytes that are not
/// UTF-8 are escaped (`\n`, `\u{1b}`, `\xff`), and so is `\` itself: no
/// two paths look alike, and none breaks a line of a report.
pub fn shown(rel: &Path) -> String {
    forgehand_text::shown_path(rel)
}

/// Whether a change at `rel` in the tree would be reported: a catalogue
/// path or a git control file.
pub fn is_watched(rel: &str) -> bool {
    rule_for(rel).is_some() || is_control(rel)
}

/// Files libgit2 itself reads from the tree to diff and commit.
fn is_control(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == ".gitignore" || name == ".gitattributes" || rel == ".gitmodules"
}

/// A `.git` directory or file anywhere in the tree: the host's git
/// directory lives outside it, so any `.git` there is the agent's. Spelled
/// the ways a checkout on another system reads as `.git` too (`.GIT`,
/// `.git.` and `git~1` on Windows).
pub(crate) fn planted_git(rel: &str) -> bool {
    rel.split('/').any(|part| {
        let lower = part.to_ascii_lowercase();
        let trimmed = lower.trim_end_matches([' ', '.']);
        trimmed == ".git" || trimmed == "git~1"
    })
}

/// Git directory paths checked one by one; the directories below are
/// walked whole.
const GIT_FILES: &[&str] = &[
    "config",
    "commondir",
    "HEAD",
    "index",
    "objects",
    "objects/info",
    "objects/info/alternates",
    "objects/info/http-alternates",
];
const GIT_DIRS: &[&str] = &["hooks", "info"];

struct Recorder {
    entries: BTreeMap<String, Entry>,
    room: usize,
    limit: usize,
}

impl Recorder {
    fn new(limit: usize) -> Recorder {
        Recorder {
            entries: BTreeMap::new(),
            room: limit,
            limit,
        }
    }

    fn insert(&mut self, key: String, entry: Entry) -> Result<(), SnapshotError> {
        if self.room == 0 {
            return Err(SnapshotError::TooManyRecorded { limit: self.limit });
        }
        self.room -= 1;
        self.entries.insert(key, entry);
        Ok(())
    }
}

/// Takes the snapshot of a working tree and its git directory, leaving
/// out nothing.
pub fn snapshot(
    worktree: &Path,
    git_dir: &Path,
    limits: TreeLimits,
) -> Result<Snapshot, SnapshotError> {
    snapshot_with(worktree, git_dir, limits, &NoIgnores)
}

/// The same, leaving out the directories `ignores` says git never enters.
pub fn snapshot_with(
    worktree: &Path,
    git_dir: &Path,
    limits: TreeLimits,
    ignores: &dyn Ignores,
) -> Result<Snapshot, SnapshotError> {
    let mut budget = Budget::for_tree(&limits);
    let mut recorder = Recorder::new(limits.max_recorded);
    // Symlink lookups have a budget of their own: the walk's is lent out.
    let mut lookups = Budget::new(limits.max_entries);
    let mut aliases = Vec::new();
    let git_in_tree = git_dir.strip_prefix(worktree).ok().map(Path::to_owned);
    let mut tree_bytes = count::TreeBytes::new();
    walk::walk(
        worktree,
        Path::new(""),
        git_in_tree.as_deref(),
        ignores,
        &mut budget,
        &mut |item| {
            tree_bytes.add(item);
            let rel = shown(item.rel);
            let entry = match item.kind {
                Kind::Symlink => {
                    let target = std::fs::read_link(item.path)
                        .map_err(|e| SnapshotError::io(item.path, e))?;
                    let resolution = resolve::resolve(worktree, item.rel, &mut lookups)?;
                    if let Resolution::Inside(to) = &resolution {
                        if rule_for(&rel).is_some() || rule_through(&rel).is_some() {
                            aliases.push(alias::Alias {
                                link: item.rel.to_owned(),
                                target: to.clone(),
                            });
                        }
                    }
                    Entry::Symlink { target, resolution }
                }
                Kind::Dir if planted_git(&rel) => Entry::Dir,
                Kind::Dir => return Ok(()),
                _ => {
                    let rule = rule_for(&rel);
                    if rule.is_none() && !is_control(&rel) && !planted_git(&rel) {
                        return Ok(());
                    }
                    read_entry(item, rule, limits)?
                }
            };
            recorder.insert(format!("worktree/{rel}"), entry)
        },
    )?;
    alias::record(
        worktree,
        &aliases,
        ignores,
        limits,
        &mut budget,
        &mut recorder,
    )?;
    snapshot_git_dir(git_dir, limits, &mut budget, &mut recorder)?;
    Ok(Snapshot {
        entries: recorder.entries,
        limits,
        tree_bytes: tree_bytes.total(ignores),
    })
}

/// Takes the snapshot of the git directory alone: libgit2 reads some of
/// it (`info/exclude`, `config`) as soon as it is asked what is ignored,
/// so it is checked before anything asks.
pub fn snapshot_git(git_dir: &Path, limits: TreeLimits) -> Result<Snapshot, SnapshotError> {
    let mut budget = Budget::for_tree(&limits);
    let mut recorder = Recorder::new(limits.max_recorded);
    snapshot_git_dir(git_dir, limits, &mut budget, &mut recorder)?;
    Ok(Snapshot {
        entries: recorder.entries,
        limits,
        tree_bytes: 0,
    })
}

fn snapshot_git_dir(
    git_dir: &Path,
    limits: TreeLimits,
    budget: &mut Budget,
    recorder: &mut Recorder,
) -> Result<(), SnapshotError> {
    for rel in GIT_FILES.iter().chain(GIT_DIRS) {
        let path = git_dir.join(rel);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(SnapshotError::io(&path, e)),
        };
        budget.take()?;
        let item = Item {
            rel: Path::new(rel),
            path: &path,
            meta: &meta,
            kind: walk::kind_of(&meta),
        };
        recorder.insert(format!("git/{rel}"), read_entry(&item, None, limits)?)?;
        if item.kind == Kind::Dir && GIT_DIRS.contains(rel) {
            walk::walk(
                git_dir,
                Path::new(rel),
                None,
                &NoIgnores,
                budget,
                &mut |item| {
                    let entry = read_entry(item, None, limits)?;
                    recorder.insert(format!("git/{}", shown(item.rel)), entry)
                },
            )?;
        }
    }
    Ok(())
}

/// Reads what is watched of one entry (a symlink's target only; a file
/// through [`walk::open_nofollow`], bounded by the limit).
fn read_entry(
    item: &Item<'_>,
    rule: Option<&Rule>,
    limits: TreeLimits,
) -> Result<Entry, SnapshotError> {
    let io_error = |e| SnapshotError::io(item.path, e);
    match item.kind {
        Kind::Dir => return Ok(Entry::Dir),
        Kind::Special(special) => return Ok(Entry::Special(special)),
        Kind::Symlink => {
            return Ok(Entry::Symlink {
                target: std::fs::read_link(item.path).map_err(io_error)?,
                resolution: Resolution::Leaves,
            })
        }
        Kind::File => {}
    }
    let (mut file, meta) = match walk::open_nofollow(item.path).map_err(io_error)? {
        Opened::File { file, meta } => (file, meta),
        Opened::Other(Kind::Special(special)) => return Ok(Entry::Special(special)),
        Opened::Other(_) => return Ok(Entry::Dir),
    };
    let bytes = meta.len();
    if bytes > limits.max_file_bytes {
        return Ok(Entry::Oversize { bytes });
    }
    let mut bounded = (&mut file).take(limits.max_file_bytes);
    match rule.map(|r| &r.watch) {
        Some(Watch::Keys(selectors)) => {
            if bytes > keys::MAX_TOML_BYTES as u64 {
                return Ok(Entry::Manifest {
                    keys: Keys::Unparsable,
                    sha256: walk::hash(&mut bounded).map_err(io_error)?,
                });
            }
            let text =
                walk::read_capped(&mut bounded, keys::MAX_TOML_BYTES + 1).map_err(io_error)?;
            Ok(Entry::Manifest {
                keys: keys::select(&text, selectors),
                sha256: walk::hash(&mut text.as_slice()).map_err(io_error)?,
            })
        }
        _ => Ok(Entry::File {
            sha256: walk::hash(&mut bounded).map_err(io_error)?,
            executable: walk::is_executable(&meta),
        }),
    }
}

/// What changed between two snapshots of the same tree, most serious
/// first.
pub fn compare(before: &Snapshot, after: &Snapshot) -> Vec<IntegrityFinding> {
    let mut findings: Vec<(bool, IntegrityFinding)> = Vec::new();
    let keys: std::collections::BTreeSet<&String> =
        before.entries.keys().chain(after.entries.keys()).collect();
    for key in keys {
        let (old, new) = (before.entries.get(key), after.entries.get(key));
        let change = match (old, new) {
            (None, Some(_)) => Change::Added,
            (Some(_), None) => Change::Removed,
            (Some(a), Some(b)) if a != b => Change::Modified,
            _ => continue,
        };
        if let Some(rest) = key.strip_prefix("alias/") {
            let (read_as, real) = rest.split_once('\n').unwrap_or((rest, rest));
            if let Some(rule) = rule_for(read_as) {
                let changed = match rule.watch {
                    Watch::WholeFile => true,
                    Watch::Keys(_) => keys_changed(old, new),
                };
                if changed {
                    findings.push((
                        false,
                        IntegrityFinding {
                            path: format!("{real} (as {read_as})"),
                            change,
                            class: Class::Sensitive,
                            reason: Reason::Through(rule),
                        },
                    ));
                }
            }
            continue;
        }
        let (path, verdict) = match key.strip_prefix("git/") {
            Some(rel) => (
                format!(".git/{rel}"),
                Some((
                    Class::Tamper,
                    Reason::GitInternal(git_reason(rel).unwrap_or("git's own files")),
                )),
            ),
            None => {
                let rel = key.strip_prefix("worktree/").unwrap_or(key);
                (rel.to_owned(), classify(rel, old, new))
            }
        };
        if let Some((class, reason)) = verdict {
            let dir_only = [old, new]
                .iter()
                .all(|e| matches!(e, None | Some(Entry::Dir)));
            findings.push((
                dir_only,
                IntegrityFinding {
                    path,
                    change,
                    class,
                    reason,
                },
            ));
        }
    }
    // A directory that came or went is reported through what it holds,
    // when that is reported.
    let paths: std::collections::BTreeSet<&str> =
        findings.iter().map(|(_, f)| f.path.as_str()).collect();
    let holds_findings = |dir: &str| {
        let prefix = format!("{dir}/");
        paths
            .range(prefix.as_str()..)
            .next()
            .is_some_and(|p| p.starts_with(&prefix))
    };
    let keep: Vec<bool> = findings
        .iter()
        .map(|(dir_only, f)| !dir_only || !holds_findings(&f.path))
        .collect();
    let mut findings: Vec<IntegrityFinding> = findings
        .into_iter()
        .zip(keep)
        .filter_map(|((_, f), keep)| keep.then_some(f))
        .collect();
    findings.sort_by(|a, b| b.class.cmp(&a.class).then_with(|| a.path.cmp(&b.path)));
    findings
}

fn classify(rel: &str, old: Option<&Entry>, new: Option<&Entry>) -> Option<(Class, Reason)> {
    let is_link = |e: Option<&Entry>| matches!(e, Some(Entry::Symlink { .. }));
    if planted_git(rel) {
        return Some((Class::Tamper, Reason::PlantedGit));
    }
    if is_control(rel) && is_link(new) {
        return Some((Class::Tamper, Reason::ControlFileLink));
    }
    let link = is_link(old) || is_link(new);
    if let Some(rule) = rule_for(rel) {
        if link {
            return Some((Class::Sensitive, Reason::LinkAt(rule)));
        }
        let changed = match rule.watch {
            Watch::WholeFile => true,
            Watch::Keys(_) => keys_changed(old, new),
        };
        return changed.then_some((Class::Sensitive, Reason::Catalogue(rule)));
    }
    if !link {
        return None;
    }
    if let Some(rule) = rule_through(rel) {
        return Some((Class::Sensitive, Reason::LinkThrough(rule)));
    }
    matches!(
        new,
        Some(Entry::Symlink {
            resolution: Resolution::Leaves,
            ..
        })
    )
    .then_some((Class::Sensitive, Reason::LeavingLink))
}

/// For a content-aware row: whether what runs code changed. A file that
/// appears or goes is judged by whether it holds any watched key; one
/// that does not parse counts whenever its bytes change.
fn keys_changed(old: Option<&Entry>, new: Option<&Entry>) -> bool {
    let manifest = |e: Option<&Entry>| match e {
        None => Some((Keys::Absent, None)),
        Some(Entry::Manifest { keys, sha256 }) => Some((*keys, Some(*sha256))),
        _ => None,
    };
    let (Some((old_keys, old_sha)), Some((new_keys, new_sha))) = (manifest(old), manifest(new))
    else {
        // A manifest that became something else, or is too large to read.
        return true;
    };
    old_keys != new_keys || (new_keys == Keys::Unparsable && old_sha != new_sha)
}

#[cfg(test)]
mod tests;
