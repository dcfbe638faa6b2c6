//! `forgehand gate explain`: how the gate would classify paths of a
//! local repository, with the reason, under the repository's own
//! `[gate]` patterns as a job reads them: from `HEAD`'s `.forgehand.toml`
//! (the base branch's), never the working tree's, which is what an agent
//! would edit. Without paths, the working tree's changes and the
//! destructive-change measure. Nothing is written.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use forgehand_gate::classify::changes::{change_of, working_changes, WorkingContents};
use forgehand_gate::classify::{classify, PathChange, Verdict};
use forgehand_gate::RepoRules;

/// Most bytes of `.forgehand.toml` read.
const MAX_SETTINGS: u64 = 1 << 20;

/// Prints one line per path: `PATH: ordinary: …` or `PATH: held: …`.
/// Without paths, the working tree's changes against `HEAD`. Returns
/// how many were held.
pub fn explain(repo: &Path, paths: &[String], out: &mut dyn Write) -> anyhow::Result<usize> {
    let git = git2::Repository::open(repo)
        .with_context(|| format!("{} is not a git repository", repo.display()))?;
    let tree = git
        .workdir()
        .context("the repository has no working tree")?
        .to_owned();
    let (rules, from) = rules(&git)?;
    writeln!(out, "rules: {from}")?;
    // Each path in the order given; a directory has no verdict of its own.
    let changes: Vec<Result<PathChange, String>> = if paths.is_empty() {
        let changes = working_changes(&git)?;
        if changes.is_empty() {
            writeln!(
                out,
                "nothing changed against HEAD: name the paths to explain"
            )?;
        }
        changes.into_iter().map(Ok).collect()
    } else {
        let mut changes = Vec::new();
        for path in paths {
            let relative = relative(&tree, path)?;
            changes.push(change_of(&git, &tree, &relative).ok_or(relative));
        }
        changes
    };
    let contents = WorkingContents::new(&git, tree.clone());
    let mut held = 0;
    for change in &changes {
        let change = match change {
            Ok(change) => change,
            Err(directory) => {
                let shown = forgehand_text::printable(directory);
                writeln!(out, "{shown}: a directory: name the files in it")?;
                continue;
            }
        };
        // A named path that is not in the working tree is judged by its
        // name: an empty file of that name (what it would hold is not
        // known).
        let verdict = classify(change, &rules, &ByName(&contents));
        if matches!(verdict, Verdict::Held { .. }) {
            held += 1;
        }
        let shown = forgehand_text::printable(&change.path);
        writeln!(out, "{shown}: {verdict}")?;
    }
    if paths.is_empty() {
        let removal = forgehand_gate::destructive::measure(&git)?;
        let max = forgehand_gate::DEFAULT_MAX_REMOVED_SHARE;
        let destructive = removal.is_destructive(max);
        writeln!(
            out,
            "destructive: {} ({removal}; at the default gate.max_removed_share of {max})",
            if destructive { "held" } else { "no" }
        )?;
        held += usize::from(destructive);
    }
    Ok(held)
}

/// The working tree's contents, a missing file read as empty.
struct ByName<'a>(&'a WorkingContents<'a>);

impl forgehand_gate::classify::Contents for ByName<'_> {
    fn before(&self, path: &str) -> Option<Vec<u8>> {
        self.0.before(path)
    }
    fn after(&self, path: &str) -> Option<Vec<u8>> {
        match self.0.after(path) {
            Some(bytes) => Some(bytes),
            None if std::fs::symlink_metadata(self.0.tree.join(path)).is_err() => Some(Vec::new()),
            None => None,
        }
    }
    fn had_kind(&self, dir: &str, ext: &str) -> bool {
        self.0.had_kind(dir, ext)
    }
    fn imported_by_agents(&self, path: &str) -> bool {
        self.0.imported_by_agents(path)
    }
    fn is_project_root(&self, dir: &str) -> bool {
        self.0.is_project_root(dir)
    }
}

/// `HEAD`'s `[gate]` patterns, and where they came from.
fn rules(git: &git2::Repository) -> anyhow::Result<(RepoRules, String)> {
    let Some(tree) = git.head().ok().and_then(|h| h.peel_to_tree().ok()) else {
        return Ok((RepoRules::none(), "built-in (no commit yet)".into()));
    };
    let Ok(entry) = tree.get_path(Path::new(".forgehand.toml")) else {
        return Ok((
            RepoRules::none(),
            "built-in (HEAD has no .forgehand.toml)".into(),
        ));
    };
    anyhow::ensure!(
        entry.filemode() == 0o100644 || entry.filemode() == 0o100755,
        "HEAD's .forgehand.toml is not a regular file: the gate reads none"
    );
    let (size, _) = git.odb()?.read_header(entry.id())?;
    anyhow::ensure!(
        size as u64 <= MAX_SETTINGS,
        "HEAD's .forgehand.toml is larger than 1 MiB"
    );
    let bytes = git.find_blob(entry.id())?.content().to_vec();
    let rules = RepoRules::parse(&bytes)?;
    let (ordinary, held) = rules.patterns();
    let from = if ordinary.is_empty() && held.is_empty() {
        "built-in (HEAD's .forgehand.toml has no [gate] patterns)".to_owned()
    } else {
        format!(
            "built-in, with HEAD's .forgehand.toml [gate] (ordinary: {}; held: {})",
            list(&ordinary),
            list(&held)
        )
    };
    Ok((rules, from))
}

fn list(patterns: &[&str]) -> String {
    if patterns.is_empty() {
        "none".into()
    } else {
        patterns.join(", ")
    }
}

/// `path` relative to the tree's root: as given, or stripped of the
/// tree's own absolute path.
fn relative(tree: &Path, path: &str) -> anyhow::Result<String> {
    let given = PathBuf::from(path);
    let relative = if given.is_absolute() {
        let tree = tree.canonicalize().unwrap_or_else(|_| tree.to_owned());
        given
            .strip_prefix(&tree)
            .with_context(|| format!("{path} is not inside {}", tree.display()))?
            .to_owned()
    } else {
        given
    };
    let text = relative
        .to_string_lossy()
        .trim_start_matches("./")
        .to_owned();
    anyhow::ensure!(
        !text.is_empty()
            && !relative
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir)),
        "{path}: name a path inside the repository, relative to its root"
    );
    Ok(text)
}
