//! Environments built for real: a repository's declared (or detected)
//! setup run in the setup sandbox through the egress proxy against the
//! package registries this machine reaches, whose hosts come from the
//! host's own package managers (`forgehand env hosts`), never from a file
//! of the project. Then kept, and found again without running setup.

use std::path::Path;

use forgehand_bot::config::Config;
use forgehand_bot::environment::{CommitFiles, Environments};
use forgehand_environment::hosts;
use forgehand_forge::git::Checkouts;
use forgehand_sandbox::namespace::NamespaceBackend;
use forgehand_sandbox::Backend;
use forgehand_tests::rootfs;

/// A repository with these files, committed; returns it and the commit.
fn repository(dir: &Path, files: &[(&str, &str)]) -> (git2::Repository, git2::Oid) {
    let repo = git2::Repository::init(dir).unwrap();
    let mut index = repo.index().unwrap();
    for (path, text) in files {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, text).unwrap();
        index.add_path(Path::new(path)).unwrap();
    }
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
    let commit = repo
        .commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
        .unwrap();
    drop(tree);
    (repo, commit)
}

/// The configuration of these tests: the allow-list proposed from this
/// host's package managers, the host's CA bundle (the registries here are
/// behind a gateway whose certificates a fresh guest does not trust).
async fn config(dir: &Path) -> Config {
    let proposal = hosts::propose().await;
    let hosts = proposal.allow_hosts();
    assert!(
        !hosts.is_empty(),
        "no package registry found in this host's pip, npm or apt configuration: {proposal}"
    );
    let env = [
        ("FORGEHAND_SANDBOX__BACKEND", "namespace".to_owned()),
        ("FORGEHAND_SANDBOX__ROOTFS", rootfs().display().to_string()),
        ("FORGEHAND_ENVIRONMENT__ALLOW_HOSTS", hosts.join(",")),
        (
            "FORGEHAND_ENVIRONMENT__CA_BUNDLE",
            "/etc/ssl/certs/ca-certificates.crt".to_owned(),
        ),
        (
            "FORGEHAND_ENVIRONMENT__CACHE_DIR",
            dir.join("envs").display().to_string(),
        ),
        (
            "FORGEHAND_ENVIRONMENT__SETUP_TIMEOUT_SECS",
            "900".to_owned(),
        ),
    ];
    let file = dir.join("forgehand.toml");
    std::fs::write(&file, "").unwrap();
    Config::load_from(
        Some(&file),
        env.iter().map(|(k, v)| (k.to_string(), v.clone())),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_environment_is_built_through_the_egress_and_then_reused() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, commit) = repository(
        &dir.path().join("repo"),
        &[
            ("requirements.txt", "iniconfig==2.0.0\n"),
            ("calc.py", "def add(a, b):\n    return a + b\n"),
        ],
    );
    let config = config(dir.path()).await;
    let environments = Environments::new(&config).unwrap();
    let backend = NamespaceBackend::default();
    let files = CommitFiles::new(&repo, commit).unwrap();
    let (declared, key) = environments
        .declare(&files, "test:acme/calc")
        .unwrap()
        .expect("requirements.txt is detected");
    assert!(declared
        .setup
        .as_deref()
        .unwrap()
        .contains("install -r requirements.txt"));
    let checkouts = Checkouts::new(dir.path().join("checkouts"));
    let checkout = checkouts
        .ensure("local/acme/calc", &repo, commit, &|tree: &Path| {
            futures::executor::block_on(backend.prepare_for_sandbox(tree))
                .map_err(std::io::Error::other)
        })
        .unwrap();
    let built = environments
        .prepare(
            &backend,
            "test:acme/calc",
            declared.clone(),
            key.clone(),
            &checkout.tree,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!built.reused);
    let env = built.env.as_ref().unwrap();
    let venv = env.home().join(".venv/lib");
    let installed = walk_names(&venv);
    assert!(
        installed.iter().any(|n| n.starts_with("iniconfig")),
        "iniconfig is in the environment's venv: {installed:?}"
    );
    let egress = built.egress.as_ref().unwrap();
    assert!(
        egress.records.iter().any(|r| r.connections > 0),
        "{egress:?}"
    );
    assert!(
        egress.refused().next().is_none(),
        "nothing refused: {egress:?}"
    );
    // The base commit is untouched: setup writes above it.
    assert!(!checkout.tree.join(".venv").exists());
    drop(built);

    let again = environments
        .prepare(&backend, "test:acme/calc", declared, key, &checkout.tree)
        .await
        .unwrap();
    assert!(again.reused, "the second job finds it kept");
    assert!(again.egress.is_none(), "and runs no setup");
}

fn walk_names(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            names.push(entry.file_name().to_string_lossy().into_owned());
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) && names.len() < 10_000 {
                pending.push(entry.path());
            }
        }
    }
    names
}
