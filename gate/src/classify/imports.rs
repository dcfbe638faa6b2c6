//! What the files that instruct agents import: `CLAUDE.md`'s
//! `@docs/guide.md`, Gemini CLI's `@file.md`. An agent reads an imported
//! file as part of its instructions, so a change to it is held as the
//! importing file's would be (red-team round 2 of issue 25: an edit to a
//! README that `CLAUDE.md` imports passed as documentation).
//!
//! Read from the base tree, bounded: the files whose name instructs
//! agents, what they import, and what those import in turn (Claude Code
//! follows five levels), each read up to [`MAX_BYTES`].

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;

use git2::{ObjectType, Repository, Tree, TreeWalkMode, TreeWalkResult};

use super::known::{AGENT_INSTRUCTIONS, DOC_EXTENSIONS};
use super::names::FoldedPath;

/// Entries of the tree walked to find the files that instruct agents.
const MAX_WALKED: usize = 200_000;
/// Files read, at most.
const MAX_FILES: usize = 128;
/// Bytes read of one file.
const MAX_BYTES: usize = 256 * 1024;
/// Levels of imports followed.
const MAX_DEPTH: usize = 5;

/// The folded paths the base `tree`'s agent files import, recursively.
pub fn agent_imports(repo: &Repository, tree: &Tree<'_>) -> BTreeSet<String> {
    let mut roots = Vec::new();
    let mut walked = 0usize;
    let _ = tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
        walked += 1;
        if walked > MAX_WALKED || roots.len() >= MAX_FILES {
            return TreeWalkResult::Abort;
        }
        if entry.kind() == Some(ObjectType::Blob) {
            let path = format!("{dir}{}", String::from_utf8_lossy(entry.name_bytes()));
            let folded = FoldedPath::new(&path);
            if AGENT_INSTRUCTIONS.matches(folded.name()) {
                roots.push(path);
            }
        }
        TreeWalkResult::Ok
    });
    let mut imported = BTreeSet::new();
    let mut queue: VecDeque<(String, usize)> = roots.into_iter().map(|p| (p, 0)).collect();
    let mut read = 0usize;
    while let Some((path, depth)) = queue.pop_front() {
        if read == MAX_FILES {
            break;
        }
        read += 1;
        let Some(text) = blob_text(repo, tree, &path) else {
            continue;
        };
        let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
        for target in imports(&text) {
            let Some(target) = resolve(dir, target) else {
                continue;
            };
            let folded = FoldedPath::new(&target).joined();
            if imported.insert(folded) && depth + 1 < MAX_DEPTH {
                let is_doc = FoldedPath::new(&target)
                    .extension()
                    .is_some_and(|e| DOC_EXTENSIONS.contains(&e));
                if is_doc {
                    queue.push_back((target, depth + 1));
                }
            }
        }
    }
    imported
}

fn blob_text(repo: &Repository, tree: &Tree<'_>, path: &str) -> Option<String> {
    let entry = tree.get_path(Path::new(path)).ok()?;
    if entry.kind() != Some(ObjectType::Blob) {
        return None;
    }
    let blob = repo.find_blob(entry.id()).ok()?;
    let bytes = &blob.content()[..blob.size().min(MAX_BYTES)];
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// The paths a text imports: `@path` at the start of a word (not an
/// e-mail address), up to the next space, without trailing punctuation.
pub fn imports(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices('@') {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| !(c.is_whitespace() || "([{\"'`".contains(c))) {
            continue;
        }
        let rest = &text[at + 1..];
        let end = rest
            .find(|c: char| c.is_whitespace() || "`\"'<>()[]{}".contains(c))
            .unwrap_or(rest.len());
        let word = rest[..end].trim_end_matches(['.', ',', ';', ':', '!', '?']);
        if !word.is_empty() && !word.starts_with('@') {
            out.push(word);
        }
    }
    out
}

/// `target` relative to `dir`, as a path inside the repository; `None`
/// for an absolute path, a home-relative one or one that leaves it.
fn resolve(dir: &str, target: &str) -> Option<String> {
    if target.starts_with('/') || target.starts_with('~') || target.contains("://") {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_words_starting_with_at_not_addresses() {
        let text = "See @README.md and @docs/dev-guide.md, also (@./notes/x.md).\n\
                    Mail me: someone@example.com; @@twice; @~/private.md";
        assert_eq!(
            imports(text),
            [
                "README.md",
                "docs/dev-guide.md",
                "./notes/x.md",
                "~/private.md"
            ]
        );
        assert_eq!(resolve("pkg", "../README.md").as_deref(), Some("README.md"));
        assert_eq!(resolve("", "~/private.md"), None);
        assert_eq!(resolve("", "../../etc/passwd"), None);
    }

    #[test]
    fn what_a_claude_md_imports_and_what_that_imports_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let files = [
            (
                "CLAUDE.md",
                "Read @README.md and @docs/dev-guide.md first.\n",
            ),
            ("README.md", "# app\n"),
            ("docs/dev-guide.md", "Also @style.md\n"),
            ("docs/style.md", "tabs\n"),
            ("docs/other.md", "not imported\n"),
        ];
        let mut index = repo.index().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let found = agent_imports(&repo, &tree);
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            ["docs/dev-guide.md", "docs/style.md", "readme.md"]
        );
    }
}
