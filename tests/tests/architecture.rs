//! docs/architecture.md says what each crate may stand on; `cargo
//! metadata` says what it does. A crate that gains a dependency the
//! table does not allow, or a table row the manifests no longer need,
//! fails here (issue 27). And the bottom of the graph stays light: the
//! store and the shared types compile no forge client, git or sandbox.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn metadata() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--no-deps",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The table between the `dependencies` markers.
fn allowed() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let start = doc
        .find("<!-- dependencies: start -->")
        .expect("the start marker");
    let end = doc
        .find("<!-- dependencies: end -->")
        .expect("the end marker");
    let mut table = BTreeMap::new();
    for line in doc[start..end]
        .lines()
        .filter(|l| l.starts_with("| forgehand-"))
    {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let deps = if cells[1] == "nothing of the workspace" {
            BTreeSet::new()
        } else {
            cells[1].split(", ").map(str::to_owned).collect()
        };
        table.insert(cells[0].to_owned(), deps);
    }
    table
}

#[test]
fn each_crate_stands_on_what_the_architecture_allows() {
    let meta = metadata();
    let mut actual = BTreeMap::new();
    for package in meta["packages"].as_array().unwrap() {
        let deps: BTreeSet<String> = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null() || d["kind"] == "build")
            .filter_map(|d| d["name"].as_str())
            .filter(|name| name.starts_with("forgehand-"))
            .map(str::to_owned)
            .collect();
        actual.insert(package["name"].as_str().unwrap().to_owned(), deps);
    }
    assert_eq!(
        actual,
        allowed(),
        "cargo metadata (left) and docs/architecture.md's table (right) differ"
    );
}

#[test]
fn the_bottom_of_the_graph_compiles_no_forge_client_git_or_sandbox() {
    // The store, the queue and the types: no forge client, git, gate or
    // sandbox. The model clients and the agent: no forge client, git, gate
    // or store (the agent stands on the sandbox; the model on nothing of
    // the workspace).
    let light = [
        "octocrab",
        "git2",
        "libgit2-sys",
        "forgehand-forge",
        "forgehand-gate",
        "forgehand-sandbox",
    ];
    let agent = [
        "octocrab",
        "git2",
        "libgit2-sys",
        "forgehand-forge",
        "forgehand-gate",
        "forgehand-store",
        "forgehand-environment",
    ];
    for (krate, heavy) in [
        ("forgehand-store", &light[..]),
        ("forgehand-types", &light[..]),
        ("forgehand-queue", &light[..]),
        ("forgehand-model", &light[..]),
        ("forgehand-agent", &agent[..]),
    ] {
        let names = tree(krate);
        for heavy in heavy {
            assert!(!names.contains(*heavy), "{krate} compiles {heavy}");
        }
    }
}

/// The packages `krate` compiles: the host's platform only, normal and
/// build dependencies, each package once.
fn tree(krate: &str) -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    {
        // The host's platform only, normal and build dependencies, each
        // package once.
        let out = Command::new(&cargo)
            .args([
                "tree",
                "--offline",
                "-e",
                "normal,build",
                "--prefix",
                "none",
                "-p",
                krate,
            ])
            .current_dir(root)
            .output()
            .expect("cargo tree runs");
        assert!(
            out.status.success(),
            "cargo tree: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let names: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .map(str::to_owned)
            .collect();
        assert!(names.contains(krate), "{names:?}");
        names
    }
}

/// No cycle among the modules of any folder of any crate
/// (`scripts/module_cycles.py` resolves the `crate::`, `super::` and
/// `self::` paths outside tests and comments): before issue 27, three
/// among the bot's top-level modules (config and github_app, agent and
/// environment, live and server) and, once folders were read too, five
/// more: the pipeline's files (six in one circle through the stage type,
/// the plan step and the stages' sequence), its stages (the changed
/// files), the server's webhook and intake, git's retry and transport,
/// and the fake forge's state and webhooks.
#[test]
fn no_crate_has_a_cycle_among_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new("python3")
        .arg(root.join("scripts/module_cycles.py"))
        .current_dir(root)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
