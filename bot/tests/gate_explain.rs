//! `forgehand gate explain`: each path's verdict and reason, the
//! repository's own `[gate]` patterns applied, the working tree's
//! changes when no path is named, and bad input refused clearly.

use std::path::Path;
use std::process::{Command, Output};

fn forgehand(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_forgehand"))
        .args(args)
        .env_clear()
        .env("HOME", dir)
        .current_dir(dir)
        .output()
        .expect("the forgehand binary runs")
}

/// A repository with one commit of `files` (path, text).
fn repository(dir: &Path, files: &[(&str, &str)]) -> git2::Repository {
    let repo = git2::Repository::init(dir).unwrap();
    for (path, text) in files {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("M", "m@example.invalid").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "start", &tree, &[])
        .unwrap();
    drop(tree);
    repo
}

fn lines(out: &Output) -> Vec<String> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn each_named_path_gets_its_verdict_and_reason() {
    let root = tempfile::tempdir().unwrap();
    let repo = root.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    repository(
        &repo,
        &[
            ("src/calc.py", "def add(a, b):\n    return a - b\n"),
            (
                "Cargo.toml",
                "[package]\nname = \"x\"\nversion = \"0.1.0\"\n\n[dependencies]\n",
            ),
            (
                ".forgehand.toml",
                "[gate]\nordinary = [\"config/*.yaml\"]\nheld = [\"migrations/**\"]\n",
            ),
        ],
    );
    // A version bump is describing; a new dependency is not.
    std::fs::write(
        repo.join("Cargo.toml"),
        "[package]\nname = \"x\"\nversion = \"0.2.0\"\n\n[dependencies]\n",
    )
    .unwrap();
    let out = forgehand(
        &[
            "gate",
            "explain",
            "--repo",
            repo.to_str().unwrap(),
            "src/calc.py",
            "tests/fixtures/data.yaml",
            "docs/usage.md",
            "Cargo.toml",
            ".github/workflows/ci.yml",
            "config/app.yaml",
            "migrations/0001_init.py",
            "tools/deploy",
            "conftest.py",
            "AGENTS.override.md",
            ".v\u{17f}code/tasks.json",
            "MaKefile",
            "src",
        ],
        root.path(),
    );
    assert_eq!(
        lines(&out),
        [
            "rules: built-in, with HEAD's .forgehand.toml [gate] (ordinary: config/*.yaml; held: migrations/**)",
            "src/calc.py: ordinary: source of a known language",
            // A new YAML file beside none of its kind: tools find their
            // configuration in YAML by name.
            "tests/fixtures/data.yaml: held: a new file where the base tree has none of its kind in that directory (a new directory, the root, or the first of its kind there; a test's name or directory is no exception), where tools look for entry points by name",
            "docs/usage.md: ordinary: documentation",
            "Cargo.toml: ordinary: a manifest whose changed keys only describe",
            ".github/workflows/ci.yml: held: a dot-file or in a dot-directory: configuration tools find by name (GitHub Actions workflows: runs in CI with the repository's secrets)",
            "config/app.yaml: ordinary: the repository allows `config/*.yaml` ([gate] ordinary)",
            "migrations/0001_init.py: held: the repository holds `migrations/**` ([gate] held)",
            "tools/deploy: held: a file without an extension, not one the gate knows to be ordinary",
            "conftest.py: held: a file tools run: pytest imports it before any test (pytest configuration code: pytest imports it before any test)",
            "AGENTS.override.md: held: a name agents read as instructions",
            ".v\u{17f}code/tasks.json: held: a dot-file or in a dot-directory: configuration tools find by name",
            "MaKefile: held: a file a tool runs or reads (makefiles, anywhere: a build entry point: runs on every build)",
            "src: a directory: name the files in it",
        ]
    );
}

#[test]
fn without_paths_it_explains_the_working_trees_changes() {
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path(), &[("calc.sh", "add() { echo $(($1 - $2)); }\n")]);
    let out = forgehand(&["gate", "explain"], dir.path());
    assert_eq!(
        lines(&out),
        [
            "rules: built-in (HEAD has no .forgehand.toml)",
            "nothing changed against HEAD: name the paths to explain",
            "destructive: no (the change deletes 0, empties 0 and rewrites 0 of the 1 tracked files (0%) and removes 0 of their 29 bytes (0%); at the default gate.max_removed_share of 0.5)",
        ]
    );
    std::fs::write(dir.path().join("calc.sh"), "add() { echo $(($1 + $2)); }\n").unwrap();
    std::fs::write(dir.path().join("Makefile"), "test:\n\tsh test.sh\n").unwrap();
    std::os::unix::fs::symlink("calc.sh", dir.path().join("link.sh")).unwrap();
    let out = forgehand(&["gate", "explain"], dir.path());
    let mut got = lines(&out);
    got.sort();
    assert_eq!(
        got,
        [
            "Makefile: held: a file a tool runs or reads (makefiles, anywhere: a build entry point: runs on every build)",
            "calc.sh: ordinary: source of a known language",
            "destructive: no (the change deletes 0, empties 0 and rewrites 0 of the 1 tracked files (0%) and removes 29 of their 29 bytes (100%); at the default gate.max_removed_share of 0.5)",
            "link.sh: held: a symlink",
            "rules: built-in (HEAD has no .forgehand.toml)",
        ]
    );
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = forgehand(&["gate", "explain"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a git repository"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    repository(dir.path(), &[(".forgehand.toml", "[gate]\nordinry = []\n")]);
    let out = forgehand(&["gate", "explain", "a.py"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(".forgehand.toml, [gate]: unknown key `ordinry`"),
        "{stderr}"
    );
    // The rules are HEAD's, not the working tree's: an agent's edit of
    // the file changes nothing here.
    std::fs::write(dir.path().join(".forgehand.toml"), "").unwrap();
    let out = forgehand(&["gate", "explain", "a.py"], dir.path());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown key `ordinry`"));
    let clean = tempfile::tempdir().unwrap();
    repository(clean.path(), &[("a.py", "")]);
    let out = forgehand(&["gate", "explain", "../outside.py"], clean.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("name a path inside the repository"));
}
