//! What the files that instruct agents bring into an agent's
//! instructions: `CLAUDE.md`'s `@docs/guide.md`, Gemini CLI's `@file.md`,
//! `opencode.json`'s `instructions` globs, a Cursor rule's `@file`,
//! Copilot's `#file:` and links, Amp's `@docs/*.md`. An agent reads such a
//! file as part of its instructions, so a change to it is held as the
//! importing file's would be (red-team round 2 of issue 25: an edit to a
//! README that `CLAUDE.md` imports passed as documentation).
//!
//! Round 3 found one syntax after another (`instructions` arrays, `#file:`,
//! globs, rules in dot-directories), so no syntax is parsed: every word of
//! an agent file that names a document (a documentation extension, or a
//! glob of them) counts, relative to the file and to the root. The agent
//! files are those whose name, or the name of a directory they are in
//! (`.cursor/rules/`, `.claude/commands/`, `.github/instructions/`),
//! instructs agents. A word that names no such document costs nothing;
//! a document that is merely mentioned is held with the ones imported.
//!
//! Read from the base tree, bounded: the agent files, what they name, and
//! what those name in turn (Claude Code follows five levels), each read up
//! to [`MAX_BYTES`].

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;

use git2::{ObjectType, Repository, Tree, TreeWalkMode, TreeWalkResult};

use super::known::{AGENT_INSTRUCTIONS, DOC_EXTENSIONS};
use super::names::FoldedPath;
use crate::integrity::glob::Glob;

/// Entries of the tree walked to find the files that instruct agents.
const MAX_WALKED: usize = 200_000;
/// Files read, at most.
const MAX_FILES: usize = 128;
/// Bytes read of one file.
const MAX_BYTES: usize = 256 * 1024;
/// Levels of imports followed.
const MAX_DEPTH: usize = 5;

/// Kinds an agent file is written in (text an agent or its tool reads):
/// documentation, Cursor's rules, JSON, TOML and YAML settings, and none.
const AGENT_FILE_EXTENSIONS: &[&str] = &["mdc", "json", "jsonc", "toml", "yaml", "yml"];

/// The documents the base tree's agent files name, recursively: paths,
/// and globs (a new file matching one is named too).
#[derive(Default)]
pub struct Imported {
    paths: BTreeSet<String>,
    globs: Vec<Glob>,
    /// Named directories: the documents beneath (an agent reads what a
    /// directory holds; its code is reviewed as code).
    dirs: Vec<Glob>,
}

impl Imported {
    /// Whether `path` (folded and joined) is named.
    pub fn contains(&self, path: &str) -> bool {
        let document = FoldedPath::new(path)
            .extension()
            .is_none_or(|e| DOC_EXTENSIONS.contains(&e));
        self.paths.contains(path)
            || self.globs.iter().any(|g| g.matches(path))
            || (document && self.dirs.iter().any(|g| g.matches(path)))
    }

    /// The named paths, folded (not the globs).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.paths.iter().map(String::as_str)
    }
}

/// Whether `path` is an agent file: its name, or a directory it is in
/// (a leading dot aside), instructs agents, and it is text of a kind
/// agents read.
fn is_agent_file(path: &str) -> bool {
    let folded = FoldedPath::new(path);
    let kind = match folded.extension() {
        None => true,
        Some(ext) => DOC_EXTENSIONS.contains(&ext) || AGENT_FILE_EXTENSIONS.contains(&ext),
    };
    kind && (AGENT_INSTRUCTIONS.matches(folded.name().trim_start_matches('.'))
        || folded
            .dirs()
            .iter()
            .any(|d| AGENT_INSTRUCTIONS.matches(d.trim_start_matches('.'))))
}

/// The documents the base `tree`'s agent files name, recursively.
pub fn agent_imports(repo: &Repository, tree: &Tree<'_>) -> Imported {
    let (mut by_name, mut by_dir) = (Vec::new(), Vec::new());
    let mut walked = 0usize;
    let _ = tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
        walked += 1;
        if walked > MAX_WALKED || by_name.len() >= MAX_FILES {
            return TreeWalkResult::Abort;
        }
        if entry.kind() == Some(ObjectType::Blob) {
            let path = format!("{dir}{}", String::from_utf8_lossy(entry.name_bytes()));
            if !is_agent_file(&path) {
            } else if AGENT_INSTRUCTIONS
                .matches(FoldedPath::new(&path).name().trim_start_matches('.'))
            {
                by_name.push(path);
            } else {
                by_dir.push(path);
            }
        }
        TreeWalkResult::Ok
    });
    // Files named as agent files first: a directory of many rules does
    // not crowd them out of what is read.
    let roots = by_name.into_iter().chain(by_dir);
    let mut imported = Imported::default();
    let mut queue: VecDeque<(String, usize)> = roots.map(|p| (p, 0)).collect();
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
        // A settings file (`.aider.conf.yml`'s `read:`, `.crush.json`'s
        // `context_paths`, `opencode.json`'s `instructions`) names what
        // the agent loads, whatever its kind.
        let settings = FoldedPath::new(&path)
            .extension()
            .is_some_and(|e| AGENT_FILE_EXTENSIONS.contains(&e) && e != "mdc");
        for (word, marked) in references(&text) {
            let marked = marked || settings;
            // Relative to the file (`@./x.md`, a Markdown link) and to
            // the root (`instructions`, `#file:`): both count.
            for base in [dir, ""] {
                let Some(target) = resolve(base, &word) else {
                    continue;
                };
                let folded = FoldedPath::new(&target);
                let joined = folded.joined();
                let document = folded
                    .extension()
                    .is_some_and(|e| DOC_EXTENSIONS.contains(&e));
                if joined.contains('*') {
                    // A marked glob names what it matches; another, the
                    // documents it matches (`**/package.json` in a
                    // workflow named `*rules*` is no instruction).
                    if marked {
                        imported.globs.push(Glob::new(&joined));
                    } else if document || folded.extension().is_none() {
                        imported.dirs.push(Glob::new(&joined));
                    }
                    continue;
                }
                let kind = tree
                    .get_path(Path::new(&target))
                    .ok()
                    .and_then(|e| e.kind());
                let named = if kind == Some(ObjectType::Tree) {
                    // A directory: its documents are what an agent reads
                    // when it is imported (`@docs/ai`), nothing when it is
                    // mentioned.
                    if marked {
                        imported.dirs.push(Glob::new(&format!("{joined}/**")));
                    }
                    false
                } else if marked || document {
                    true
                } else {
                    // `docs/NOTICE`: a document without an extension.
                    folded.extension().is_none() && kind.is_some()
                };
                if named && imported.paths.insert(joined) && depth + 1 < MAX_DEPTH && document {
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

/// The words of a text that may name files, each with whether it is
/// marked as an import (`@path`, `#file:path`: an agent loads such a file
/// whatever its kind). Split where paths end in any syntax (spaces,
/// quotes, brackets, commas); the marks, an anchor (`#setup`), a query
/// (`?plain`), a line (`:12`, `:3-9`), percent-encoding and punctuation
/// on either side (an ellipsis too) taken off.
pub fn references(text: &str) -> Vec<(String, bool)> {
    text.split(|c: char| c.is_whitespace() || "\"'`()[]<>{},;|=".contains(c))
        .filter_map(|word| {
            let marked = word.starts_with('@') || word.starts_with("#file:");
            let word = word.trim_start_matches('@');
            let word = word
                .strip_prefix("#file:")
                .or_else(|| word.strip_prefix("file:"))
                .unwrap_or(word);
            if word.contains("://") || word.contains('@') {
                return None;
            }
            let word = word.split(['#', '?']).next().unwrap_or(word);
            // `docs\guide.md`, `/docs/guide.md` (from the root),
            // `${workspaceFolder}/docs/guide.md`, `docs/my\_guide.md`.
            let word = word.replace("\\_", "_").replace('\\', "/");
            let word = match word.find("}/") {
                Some(at) if word.starts_with("${") => word[at + 2..].to_owned(),
                _ => word,
            };
            let word = word.trim_start_matches('/');
            let word = decoded(word);
            let word = word.trim_matches(|c: char| !(c.is_alphanumeric() || "/._-*~".contains(c)));
            let word = strip_line(word).trim_end_matches('.');
            let pathlike = word.contains('/') || word.contains('.');
            (pathlike && word.len() > 1).then(|| (word.to_owned(), marked))
        })
        .collect()
}

/// `%20` and the like decoded (a link's path as the file's name).
fn decoded(word: &str) -> String {
    let bytes = word.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A path with a `:12` or `:3-9` line reference taken off.
fn strip_line(word: &str) -> &str {
    match word.rsplit_once(':') {
        Some((path, line))
            if !line.is_empty() && line.chars().all(|c| c.is_ascii_digit() || c == '-') =>
        {
            path
        }
        _ => word,
    }
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

    /// What the agent files of a tree holding `files` (path, text) name.
    fn imports_of(files: &[(&str, &str)]) -> Imported {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let mut index = repo.index().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        agent_imports(&repo, &tree)
    }

    #[test]
    fn references_are_words_naming_paths_in_any_syntax() {
        let text = "See @README.md and @docs/dev-guide.md, also (@./notes/x.md).\n\
                    Mail me: someone@example.com; @~/private.md\n\
                    \"instructions\": [\"docs/oc/*.md\", \"CONTRIBUTING.md\"]\n\
                    #file:docs/hash-guide.md [guide](../docs/link-guide.md#setup) \
                    https://example.com/x.md docs/p5.md?plain @docs/colon.md:12 \
                    [x](docs/my%20guide.md) docs/p9.md\u{2026} @src/pkg/m1.py and/or %\u{e9}x/%";
        let words: Vec<(String, bool)> = references(text);
        let words: Vec<(&str, bool)> = words.iter().map(|(w, m)| (w.as_str(), *m)).collect();
        assert_eq!(
            words,
            [
                ("README.md", true),
                ("docs/dev-guide.md", true),
                ("./notes/x.md", true),
                ("~/private.md", true),
                ("docs/oc/*.md", false),
                ("CONTRIBUTING.md", false),
                ("docs/hash-guide.md", true),
                ("../docs/link-guide.md", false),
                ("docs/p5.md", false),
                ("docs/colon.md", true),
                ("docs/my guide.md", false),
                ("docs/p9.md", false),
                ("src/pkg/m1.py", true),
                ("and/or", false),
                ("\u{e9}x/", false),
            ]
        );
        assert_eq!(resolve("pkg", "../README.md").as_deref(), Some("README.md"));
        assert_eq!(resolve("", "~/private.md"), None);
        assert_eq!(resolve("", "../../etc/passwd"), None);
    }

    #[test]
    fn what_a_claude_md_imports_and_what_that_imports_is_found() {
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
        let found = imports_of(&files);
        assert_eq!(
            found.paths().collect::<Vec<_>>(),
            [
                "docs/dev-guide.md",
                "docs/style.md",
                "readme.md",
                "style.md"
            ]
        );
    }

    /// Red-team round 3, H3: `opencode.json`'s `instructions` (a glob
    /// too), a Cursor rule's `@file`, a Claude command's `@file`,
    /// Copilot's `#file:` and links, Amp's `@docs/guides/*.md`.
    #[test]
    fn what_other_agent_files_name_is_found_whatever_the_syntax() {
        let files = [
            (
                "opencode.json",
                "{\"instructions\": [\"docs/oc/*.md\", \"CONTRIBUTING.md\"]}\n",
            ),
            (
                ".cursor/rules/x.mdc",
                "---\nalwaysApply: true\n---\nUse @docs/neutral-ref.md\n",
            ),
            (".claude/commands/go.md", "Do @docs/cmd-ref.md\n"),
            (
                ".github/copilot-instructions.md",
                "[guide](../docs/link-guide.md) and #file:docs/hash-guide.md\n",
            ),
            ("AGENTS.md", "See @docs/guides/*.md\n"),
            ("docs/oc/a.md", "x\n"),
            (
                ".aider.conf.yml",
                "read: [docs/aider-read.md, src/conventions.py]\n",
            ),
            (
                ".crush.json",
                "{\"options\":{\"context_paths\":[\"docs/crush.md\"]}}\n",
            ),
            (
                "CLAUDE.md",
                "@docs/NOTICE @src/pkg/m1.py @docs/ai/ [a](docs/anchor.md#setup) see crates/x \
                 /docs/rooted.md docs\\back.md ${workspaceFolder}/docs/ws.md\n",
            ),
            ("crates/x/README.md", "x\n"),
            ("docs/NOTICE", "x\n"),
            ("docs/ai/one.txt", "x\n"),
            (
                "crates/lint/src/rules/mod.rs",
                "// see docs/not-an-agent-file.md\n",
            ),
        ];
        let found = imports_of(&files);
        for named in [
            "docs/oc/a.md",
            "docs/oc/b.md",
            "contributing.md",
            "docs/neutral-ref.md",
            "docs/cmd-ref.md",
            "docs/link-guide.md",
            "docs/hash-guide.md",
            "docs/guides/two.md",
            "docs/aider-read.md",
            "docs/crush.md",
            "docs/notice",
            "src/pkg/m1.py",
            "docs/ai/one.txt",
            "docs/ai/new.md",
            "docs/anchor.md",
            "src/conventions.py",
            "docs/rooted.md",
            "docs/back.md",
            "docs/ws.md",
        ] {
            assert!(found.contains(named), "{named} is not found named");
        }
        assert!(!found.contains("docs/not-an-agent-file.md"));
        // An imported directory names the documents beneath, not its
        // code; a mentioned one names nothing.
        assert!(!found.contains("docs/ai/tool.py"));
        assert!(!found.contains("crates/x/readme.md"));
        assert!(!found.contains("docs/other.md"));
    }
}
