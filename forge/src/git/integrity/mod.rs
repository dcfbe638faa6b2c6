//! The integrity snapshot: before the agent runs, a SHA-256 of every file
//! that can make the host or the forge run something or trust someone
//! (git's own files, CI definitions, instruction files, build entry
//! points, CODEOWNERS) and every symlink with its target; after, the
//! differences, each classed:
//!
//! - **tamper**: git internals (config, hooks, info, alternates), and any
//!   `.git` planted in the tree. Never pushed: the host's own git must not
//!   be steered by the agent.
//! - **sensitive**: CI definitions, instruction files, CODEOWNERS, submodule
//!   URLs, build entry points, symlinks that leave the tree. Pushed only
//!   when allowed, and always listed in the pull request.
//!
//! Anything else the agent changes is its work, and not reported here.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

/// Paths in the working tree, relative to its root: `dir/**` is the
/// directory and everything under it; `**/name` is that name anywhere;
/// anything else is one exact path.
pub const SENSITIVE_PATHS: &[&str] = &[
    ".gitattributes",
    ".gitmodules",
    ".github/workflows/**",
    ".gitea/workflows/**",
    ".forgejo/workflows/**",
    ".gitlab-ci.yml",
    "AGENTS.md",
    "CLAUDE.md",
    ".github/copilot-instructions.md",
    ".forgehand.toml",
    "**/Makefile",
    "**/build.rs",
    "**/package.json",
    "CODEOWNERS",
    ".github/CODEOWNERS",
    ".gitea/CODEOWNERS",
    "docs/CODEOWNERS",
];

/// Paths in the git directory.
pub const GIT_INTERNAL_PATHS: &[&str] = &[
    "config",
    "hooks/**",
    "info/**",
    "objects/info/alternates",
    "objects/info/http-alternates",
    "commondir",
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File { sha256: [u8; 32], executable: bool },
    Symlink { target: PathBuf },
}

/// What was watched, as it was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// `worktree/<path>` or `git/<path>`.
    entries: BTreeMap<String, Entry>,
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrityFinding {
    /// `.git/<path>` for git internals, the tree path otherwise.
    pub path: String,
    pub change: Change,
    pub class: Class,
    pub reason: &'static str,
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

/// Takes the snapshot of a working tree and its git directory.
pub fn snapshot(worktree: &Path, git_dir: &Path) -> io::Result<Snapshot> {
    let mut entries = BTreeMap::new();
    let git_in_tree = git_dir.strip_prefix(worktree).ok().map(Path::to_owned);
    walk(
        worktree,
        worktree,
        git_in_tree.as_deref(),
        &mut |rel, path, meta| {
            if meta.file_type().is_symlink()
                || matches_any(rel, SENSITIVE_PATHS)
                || planted_git(rel)
            {
                entries.insert(format!("worktree/{rel}"), entry(path, meta)?);
            }
            Ok(())
        },
    )?;
    if git_dir.is_dir() {
        walk(git_dir, git_dir, None, &mut |rel, path, meta| {
            if matches_any(rel, GIT_INTERNAL_PATHS) {
                entries.insert(format!("git/{rel}"), entry(path, meta)?);
            }
            Ok(())
        })?;
    }
    Ok(Snapshot { entries })
}

/// What changed between two snapshots of the same tree, most serious
/// first.
pub fn compare(before: &Snapshot, after: &Snapshot) -> Vec<IntegrityFinding> {
    let mut findings = Vec::new();
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
        if let Some(rel) = key.strip_prefix("git/") {
            findings.push(IntegrityFinding {
                path: format!(".git/{rel}"),
                change,
                class: Class::Tamper,
                reason: git_reason(rel),
            });
            continue;
        }
        let rel = key.strip_prefix("worktree/").unwrap_or(key);
        if planted_git(rel) {
            findings.push(IntegrityFinding {
                path: rel.to_owned(),
                change,
                class: Class::Tamper,
                reason: "git's own files planted in the working tree",
            });
            continue;
        }
        let sensitive_path = matches_any(rel, SENSITIVE_PATHS);
        let leaving_link = match new {
            Some(Entry::Symlink { target }) => leaves_tree(rel, target),
            _ => false,
        };
        if sensitive_path {
            findings.push(IntegrityFinding {
                path: rel.to_owned(),
                change,
                class: Class::Sensitive,
                reason: tree_reason(rel),
            });
        } else if leaving_link {
            findings.push(IntegrityFinding {
                path: rel.to_owned(),
                change,
                class: Class::Sensitive,
                reason: "a symlink that points outside the working tree",
            });
        }
    }
    findings.sort_by(|a, b| b.class.cmp(&a.class).then_with(|| a.path.cmp(&b.path)));
    findings
}

/// A `.git` directory or file anywhere in the tree: the host's git
/// directory lives outside it, so any `.git` there is the agent's.
fn planted_git(rel: &str) -> bool {
    rel.split('/').any(|part| part == ".git")
}

fn git_reason(rel: &str) -> &'static str {
    if rel.starts_with("hooks/") {
        "a git hook: code git runs"
    } else if rel == "config" {
        "git configuration: can name programs git runs and where it fetches"
    } else if rel.contains("alternates") || rel == "commondir" {
        "points git at objects outside this repository"
    } else {
        "git's own files"
    }
}

fn tree_reason(rel: &str) -> &'static str {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if rel.contains("/workflows/") || rel == ".gitlab-ci.yml" {
        "a CI definition: runs with the repository's secrets"
    } else if name == "CODEOWNERS" {
        "decides who must review"
    } else if rel == ".gitmodules" {
        "submodule URLs: where clones fetch from"
    } else if rel == ".gitattributes" {
        "can name filter and diff drivers"
    } else if [
        "AGENTS.md",
        "CLAUDE.md",
        "copilot-instructions.md",
        ".forgehand.toml",
    ]
    .contains(&name)
    {
        "instructions to AI agents, this one included"
    } else {
        "a build entry point: runs on every build"
    }
}

/// Whether a symlink at `rel` (in the tree) resolves outside it.
fn leaves_tree(rel: &str, target: &Path) -> bool {
    if target.is_absolute() {
        return true;
    }
    let mut depth: i64 = Path::new(rel).components().count() as i64 - 1;
    for part in target.components() {
        match part {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

fn matches_any(rel: &str, patterns: &[&str]) -> bool {
    patterns.iter().any(|p| {
        if let Some(dir) = p.strip_suffix("/**") {
            rel.strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
        } else if let Some(name) = p.strip_prefix("**/") {
            rel == name || rel.ends_with(&format!("/{name}"))
        } else {
            rel == *p
        }
    })
}

/// Only what is watched is read and hashed.
fn entry(path: &Path, meta: &std::fs::Metadata) -> io::Result<Entry> {
    if meta.file_type().is_symlink() {
        return Ok(Entry::Symlink {
            target: std::fs::read_link(path)?,
        });
    }
    Ok(Entry::File {
        sha256: Sha256::digest(std::fs::read(path)?).into(),
        executable: meta.permissions().mode() & 0o111 != 0,
    })
}

type Visit<'a> = dyn FnMut(&str, &Path, &std::fs::Metadata) -> io::Result<()> + 'a;

/// Visits every file and symlink under `dir` (not following symlinks),
/// skipping the git directory when it lies inside the tree.
fn walk(root: &Path, dir: &Path, skip: Option<&Path>, visit: &mut Visit<'_>) -> io::Result<()> {
    for item in std::fs::read_dir(dir)? {
        let item = item?;
        let path = item.path();
        let rel_path = path.strip_prefix(root).expect("under the root");
        if skip == Some(rel_path) {
            continue;
        }
        let rel = rel_path.to_string_lossy().into_owned();
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.is_dir() {
            walk(root, &path, skip, visit)?;
        } else if meta.file_type().is_symlink() || meta.is_file() {
            visit(&rel, &path, &meta)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
