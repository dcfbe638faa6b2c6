//! `forgehand gate explain`: how the gate would classify paths of a
//! local repository, with the reason, under the repository's own
//! `[gate]` patterns (from the `.forgehand.toml` of its working tree:
//! what a maintainer is editing). Nothing is written.

use std::io::{Read, Write};
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
    let (rules, from) = rules(&tree)?;
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
    let contents = WorkingContents {
        repo: &git,
        tree: tree.clone(),
    };
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
        let verdict = classify(change, &rules, &contents);
        if matches!(verdict, Verdict::Held { .. }) {
            held += 1;
        }
        let shown = forgehand_text::printable(&change.path);
        writeln!(out, "{shown}: {verdict}")?;
    }
    Ok(held)
}

/// The working tree's `[gate]` patterns, and where they came from.
fn rules(tree: &Path) -> anyhow::Result<(RepoRules, String)> {
    let file = tree.join(".forgehand.toml");
    let meta = match std::fs::symlink_metadata(&file) {
        Ok(meta) => meta,
        Err(_) => return Ok((RepoRules::none(), "built-in (no .forgehand.toml)".into())),
    };
    anyhow::ensure!(
        meta.is_file(),
        ".forgehand.toml is not a regular file: the gate reads none"
    );
    let mut bytes = Vec::new();
    std::fs::File::open(&file)?
        .take(MAX_SETTINGS + 1)
        .read_to_end(&mut bytes)?;
    anyhow::ensure!(
        bytes.len() as u64 <= MAX_SETTINGS,
        ".forgehand.toml is larger than 1 MiB"
    );
    let rules = RepoRules::parse(&bytes)?;
    let (ordinary, held) = rules.patterns();
    let from = if ordinary.is_empty() && held.is_empty() {
        "built-in (.forgehand.toml has no [gate] patterns)".to_owned()
    } else {
        format!(
            "built-in, with .forgehand.toml's [gate] (ordinary: {}; held: {})",
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
