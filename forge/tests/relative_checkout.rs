//! Issue 24: with the default configuration's relative `git.work_dir`,
//! the shared checkout's files landed inside its git directory (libgit2
//! resolves a relative work tree against the git directory), the tree
//! the agent saw was empty, and its commit deleted every file. A binary
//! of its own: it changes the process's working directory.

use std::path::Path;

use forgehand_forge::git::Checkouts;

#[test]
fn a_checkout_under_a_relative_root_holds_the_commits_files() {
    let dir = tempfile::tempdir().unwrap();
    let repo = git2::Repository::init(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new("calc.py")).unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
    let commit = repo
        .commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
        .unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let checkouts = Checkouts::new("forgehand-data/jobs/checkouts");
    let noop = |_: &Path| Ok(());
    let held = checkouts.ensure("local/x", &repo, commit, &noop).unwrap();
    let file = dir
        .path()
        .join("forgehand-data/jobs/checkouts/local/x")
        .join(commit.to_string())
        .join("tree/calc.py");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "def add(a, b):\n    return a - b\n",
        "the file is in the tree the job sees"
    );
    assert!(held.tree.join("calc.py").exists());
    assert!(!dir
        .path()
        .join("forgehand-data/jobs/checkouts/local/x")
        .join(commit.to_string())
        .join("repo.git/forgehand-data")
        .exists());
}
