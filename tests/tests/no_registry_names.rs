//! No file of the project names a package registry's host: the registries
//! an environment reaches are the operator's configuration, proposed from
//! the host's own package managers (`forgehand env hosts`), and the tests
//! take them the same way at run time. This test asks those package
//! managers which hosts they use and looks for each in every tracked file.

use std::path::{Path, PathBuf};
use std::process::Command;

use forgehand_environment::hosts;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The files git tracks (and those added but not yet committed); in a
/// tree that is not a git checkout (an exported archive), every file but
/// the build outputs .gitignore names.
fn tracked(root: &Path) -> Vec<PathBuf> {
    let out = Command::new("git")
        .args(["ls-files", "-z", "--cached"])
        .current_dir(root)
        .output();
    match out {
        Ok(out) if out.status.success() => out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| root.join(String::from_utf8_lossy(p).as_ref()))
            .collect(),
        _ => {
            let mut files = Vec::new();
            walk(root, &mut files);
            files
        }
    }
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if [".git", "target", "node_modules", "results"]
            .iter()
            .any(|skip| name == *skip)
        {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&entry.path(), files),
            Ok(t) if t.is_file() => files.push(entry.path()),
            _ => {}
        }
    }
}

/// Where `needle` (ASCII, lower-case) occurs in `text`, ignoring ASCII case:
/// 1-based line numbers.
fn lines_naming(text: &[u8], needle: &str) -> Vec<usize> {
    let needle = needle.as_bytes();
    text.split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, line)| {
            line.windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(needle))
        })
        .map(|(n, _)| n + 1)
        .collect()
}

#[test]
fn lines_naming_finds_a_host_in_any_case_and_only_there() {
    let text = b"a\nsee Registry.Example.org/x\nregistry.example.orgx\nregistry-example.org\n";
    assert_eq!(lines_naming(text, "registry.example.org"), [2, 3]);
}

#[tokio::test]
async fn no_tracked_file_names_a_registry_this_host_uses() {
    let proposal = hosts::propose().await;
    let hosts = proposal.allow_hosts();
    assert!(
        !hosts.is_empty(),
        "no package registry found in this host's pip, npm or apt configuration \
         (scripts/lib.sh installs them): {proposal}"
    );
    let root = repo_root();
    let files = tracked(&root);
    assert!(
        files.iter().any(|f| f.ends_with("Cargo.toml")),
        "git ls-files in {root:?} listed no Cargo.toml: not the project's tree"
    );
    let mut found = Vec::new();
    for file in &files {
        // A tracked file deleted in the working tree names nothing.
        let Ok(text) = std::fs::read(file) else {
            continue;
        };
        for host in &hosts {
            for line in lines_naming(&text, &host.to_ascii_lowercase()) {
                let shown = file.strip_prefix(&root).unwrap_or(file).display();
                found.push(format!("{shown}:{line}: {host}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "these files name a package registry's host (take it from the package \
         managers at run time instead):\n{}",
        found.join("\n")
    );
}
