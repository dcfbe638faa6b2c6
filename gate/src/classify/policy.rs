//! The classification in words, made from the same lists it decides by:
//! for the agent before it starts (so that it does not hold its own work
//! for nothing), and for people in docs/security.md (a test keeps the two
//! equal).

use super::known::{
    AGENT_INSTRUCTIONS, BUILD_DIRS, CHANGELOG_DIRS, DOC_EXTENSIONS, DOC_NAMES, ENTRY_POINTS,
    LOCKFILES, MANIFESTS, SOURCE_EXTENSIONS, TEST_DATA_EXTENSIONS, TEST_DIRS,
};
use super::RepoRules;

/// What the agent is told of the gate, with the repository's own `[gate]`
/// patterns and the operator's destructive-change limit.
pub fn for_agent(rules: &RepoRules, max_removed_share: f64) -> String {
    let mut out = String::from(
        "What you change is pushed without a maintainer only when every changed file is ordinary work:\n",
    );
    out.push_str(&format!(
        "- source and test files of known languages ({});\n",
        dotted(SOURCE_EXTENSIONS)
    ));
    out.push_str(&format!(
        "- documentation ({}, and files named like README or CHANGELOG), unless its name instructs agents, an agent file names it, or a line you add outside code is one a documentation builder runs (a brace, import or export, a script element in Markdown; a directive other than notes, code blocks, images and tables in reStructuredText);\n",
        dotted(DOC_EXTENSIONS)
    ));
    out.push_str(&format!(
        "- any file under a test or fixture directory ({}/) or a changelog-fragment directory ({}/);\n",
        TEST_DIRS.join("/, "),
        CHANGELOG_DIRS.join("/, ")
    ));
    out.push_str(
        "A new file of those kinds is ordinary only in a directory that already holds files of its kind, or in the project's own test directory (at the root of the repository or of a package); a new JSON, YAML or XML file only beside files of its kind.\n",
    );
    let manifests: Vec<&str> = MANIFESTS.iter().map(|m| m.name).collect();
    out.push_str(&format!(
        "- {} when only describing keys change (version, description, lint settings), and lockfiles resolving from the sources they already did.\n",
        manifests.join(", ")
    ));
    out.push_str(
        "Everything else is held for a maintainer and not pushed until one allows it: CI definitions, \
         dot-files and dot-directories, build and test entry points (",
    );
    let entry: Vec<&str> = ENTRY_POINTS.iter().map(|(name, _)| *name).collect();
    out.push_str(&entry.join(", "));
    out.push_str(
        ", Makefiles), configuration files (YAML, TOML, JSON, INI, XML) outside test directories, \
         files with an unknown extension or none, symlinks, executable-bit changes, files whose \
         names instruct agents (AGENTS.md, CLAUDE.md, *instructions*, *rules*, *.prompt.md) and \
         .forgehand.toml",
    );
    out.push_str(&format!(
        "; and a change that removes more than {:.0}% of the repository's files or bytes.\n",
        max_removed_share * 100.0
    ));
    let (ordinary, held) = rules.patterns();
    if !ordinary.is_empty() {
        out.push_str(&format!(
            "This repository also counts as ordinary: {}.\n",
            quoted(&ordinary)
        ));
    }
    if !held.is_empty() {
        out.push_str(&format!(
            "This repository holds, whatever their kind: {}.\n",
            quoted(&held)
        ));
    }
    out.push_str(
        "Change held files only when the task cannot be done without them, and then say in your summary which and why.",
    );
    out
}

/// The built-in lists as docs/security.md shows them, between its
/// `ordinary` markers.
pub fn lists_markdown() -> String {
    let code = |items: &[&str]| {
        items
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::from("| List | Names |\n| --- | --- |\n");
    let mut row = |name: &str, items: String| out.push_str(&format!("| {name} | {items} |\n"));
    let exts: Vec<String> = SOURCE_EXTENSIONS.iter().map(|e| format!(".{e}")).collect();
    row(
        "Source and test extensions (ordinary; a new one is held at the root, and elsewhere where the base tree has no file of its kind in its directory, but in a project's own test directory)",
        code(&exts.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    let docs: Vec<String> = DOC_EXTENSIONS.iter().map(|e| format!(".{e}")).collect();
    row(
        "Documentation extensions (ordinary beneath the root; at the root under a documentation name only)",
        code(&docs.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    row(
        "Documentation names, with a documentation extension or none (ordinary anywhere)",
        code(DOC_NAMES),
    );
    row(
        "Test and fixture directories: source, documentation and test data beneath, that the catalogue does not name (ordinary)",
        code(TEST_DIRS),
    );
    let data: Vec<String> = TEST_DATA_EXTENSIONS
        .iter()
        .map(|e| format!(".{e}"))
        .collect();
    row(
        "Test data extensions",
        code(&data.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    row(
        "Changelog-fragment directories: documentation and test data beneath (ordinary)",
        code(CHANGELOG_DIRS),
    );
    for manifest in MANIFESTS {
        row(
            &format!(
                "`{}`: keys that only describe (ordinary when only these change; a new manifest is held)",
                manifest.name
            ),
            code(manifest.describing),
        );
    }
    row("Lockfiles (held)", code(LOCKFILES));
    let entry: Vec<&str> = ENTRY_POINTS.iter().map(|(name, _)| *name).collect();
    row(
        "Entry points (held, whatever their extension)",
        code(&entry),
    );
    let build: Vec<&str> = BUILD_DIRS.iter().map(|(name, _)| *name).collect();
    row("Build directories: every file beneath (held)", code(&build));
    row(
        "Names that instruct agents, by prefix (held)",
        code(AGENT_INSTRUCTIONS.prefixes),
    );
    row(
        "Names that instruct agents, by part (held)",
        code(AGENT_INSTRUCTIONS.parts),
    );
    row(
        "Names that instruct agents, by ending (held)",
        code(AGENT_INSTRUCTIONS.suffixes),
    );
    out
}

fn dotted(exts: &[&str]) -> String {
    exts.iter()
        .map(|e| format!(".{e}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn quoted(patterns: &[&str]) -> String {
    patterns
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_is_told_the_lists_and_the_repositorys_own_patterns() {
        let rules = RepoRules::parse(
            b"[gate]\nordinary = [\"config/*.yaml\"]\nheld = [\"migrations/**\"]\n",
        )
        .unwrap();
        let text = for_agent(&rules, 0.5);
        for expected in [
            ".rs",
            ".py",
            "tests/",
            "newsfragments/",
            "conftest.py",
            "build.rs",
            "package.json",
            "more than 50% of the repository's files or bytes",
            "This repository also counts as ordinary: `config/*.yaml`.",
            "This repository holds, whatever their kind: `migrations/**`.",
        ] {
            assert!(text.contains(expected), "{expected}: {text}");
        }
        let plain = for_agent(&RepoRules::none(), 0.8);
        assert!(!plain.contains("This repository"), "{plain}");
        assert!(plain.contains("more than 80%"), "{plain}");
    }

    /// docs/security.md shows the lists the gate decides by.
    #[test]
    fn the_docs_show_the_lists() {
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md"))
                .unwrap();
        let (start, end) = ("<!-- ordinary: start -->\n", "<!-- ordinary: end -->");
        let from = docs.find(start).expect("the start marker") + start.len();
        let to = docs.find(end).expect("the end marker");
        assert_eq!(
            &docs[from..to],
            lists_markdown(),
            "docs/security.md holds the lists between its markers:\n{}",
            lists_markdown()
        );
    }
}
