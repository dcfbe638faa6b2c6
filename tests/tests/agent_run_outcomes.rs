//! What `forgehand run` says of how a run ended, as a person reads it:
//! its first line and its exit status tell tested, untested, failing
//! and refused changes apart (issue 24, findings 2, 4, 5 and 6).

use std::path::PathBuf;
use std::process::{Command, Output};

use forgehand_tests::local_run::{files_on, repository};
use forgehand_tests::model_server::{ModelServer, Step};
use forgehand_tests::rootfs;
use forgehand_tests::story::forgehand_binary;
use serde_json::{json, Value};

const MODEL_KEY: &str = "sk-outcomes-model-key-0123456789";

const CALC: &str = "add() {\n  echo $(($1 - $2))\n}\n";
const TEST: &str =
    ". ./calc.sh\n[ \"$(add 2 3)\" = 5 ] && echo 'ok: add' || { echo 'FAIL: add'; exit 1; }\n";

struct Place {
    root: tempfile::TempDir,
}

impl Place {
    /// A repository with the shell project and, when `test` is given, a
    /// `.forgehand.toml` that declares it as its test command.
    fn new(test: Option<&str>) -> Place {
        let root = tempfile::tempdir().unwrap();
        let mut files = vec![
            ("calc.sh", CALC.to_owned()),
            ("test.sh", TEST.to_owned()),
            ("README.md", "# calc\n\nAdds numbers.\n".to_owned()),
        ];
        if let Some(test) = test {
            files.push((
                ".forgehand.toml",
                format!("[environment]\ntest = \"{test}\"\n"),
            ));
        }
        repository(&root.path().join("repo"), &files);
        Place { root }
    }

    fn repo(&self) -> PathBuf {
        self.root.path().join("repo")
    }

    /// `forgehand run` with `args`, no configuration file, a home of its
    /// own (its data goes to the state directory there), the model given
    /// by its flags.
    fn run(&self, server: &ModelServer, args: &[&str]) -> Output {
        Command::new("timeout")
            .arg("300")
            .arg(forgehand_binary())
            .args([
                "run",
                "--task",
                "Fix add in calc.sh",
                "--provider",
                "openai",
            ])
            .args(["--model", "scripted-model", "--base-url"])
            .arg(server.url_for("openai"))
            .args(args)
            .current_dir(self.repo())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", self.root.path().join("home"))
            .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
            .env("FORGEHAND_MODEL__API_KEY", MODEL_KEY)
            .output()
            .expect("the forgehand binary runs")
    }
}

fn first_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn json_of(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn wrong_fix() -> Vec<Step> {
    vec![
        Step::call(
            "edit_file",
            json!({"path": "calc.sh", "old_string": "$(($1 - $2))", "new_string": "$(($1 * $2))"}),
        ),
        Step::finish("Multiplied instead.", "Fix add in calc.sh"),
    ]
}

fn good_fix() -> Vec<Step> {
    vec![
        Step::call(
            "edit_file",
            json!({"path": "calc.sh", "old_string": "$(($1 - $2))", "new_string": "$(($1 + $2))"}),
        ),
        Step::finish("Adds now.", "Fix add in calc.sh"),
    ]
}

/// Finding 4: the host's `sh test.sh` failed twice and the run said
/// `succeeded: …`, exit 0.
#[tokio::test(flavor = "multi_thread")]
async fn a_change_whose_tests_fail_says_so_first_and_exits_non_zero() {
    let place = Place::new(Some("sh test.sh"));
    // The wrong fix, then (after the failing run is shown) the same again.
    let mut script = wrong_fix();
    script.push(Step::finish("Still multiplied.", "Fix add in calc.sh"));
    let server = ModelServer::start(script).await.unwrap();
    let out = tokio::task::block_in_place(|| place.run(&server, &[]));
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let first = first_line(&out);
    assert!(
        first.starts_with("tests failed: Fix add in calc.sh (the committed change fails `sh test.sh` as the host ran it)"),
        "{first}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("tested:     sh test.sh (host): exit 1"),
        "{stdout}"
    );
    // The old behaviour, asked for.
    let server = ModelServer::start({
        let mut s = wrong_fix();
        s.push(Step::finish("Still multiplied.", "Fix add in calc.sh"));
        s
    })
    .await
    .unwrap();
    let out = tokio::task::block_in_place(|| place.run(&server, &["--allow-failing-tests"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(first_line(&out).starts_with("tests failed: "));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tested_change_succeeds_and_an_untested_one_says_it_is_untested() {
    let place = Place::new(Some("sh test.sh"));
    let server = ModelServer::start(good_fix()).await.unwrap();
    let out = tokio::task::block_in_place(|| place.run(&server, &[]));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        first_line(&out),
        "succeeded: Fix add in calc.sh (the host ran `sh test.sh`: passed)"
    );

    let place = Place::new(None);
    let server = ModelServer::start(good_fix()).await.unwrap();
    let out = tokio::task::block_in_place(|| place.run(&server, &[]));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        first_line(&out),
        "untested: Fix add in calc.sh (no environment: the tests were not run — declare one in .forgehand.toml)"
    );
    // The branch holds the repository's files with the one change.
    let branch = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("branch:     "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    assert_eq!(
        files_on(&place.repo(), &branch),
        ["README.md", "calc.sh", "test.sh"]
    );
    // Its data went to the state directory, none into the repository.
    assert!(place
        .root
        .path()
        .join("home/.local/state/forgehand/jobs")
        .is_dir());
    assert!(!place.repo().join("forgehand-data").exists());
}

/// Finding 5: an uncommitted edit was silently not used.
#[tokio::test(flavor = "multi_thread")]
async fn a_dirty_tree_is_refused_or_taken_in_and_said() {
    let place = Place::new(None);
    std::fs::write(place.repo().join("NOTES.md"), "the bug is in add\n").unwrap();
    let server = ModelServer::start(good_fix()).await.unwrap();
    let out = tokio::task::block_in_place(|| place.run(&server, &[]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        first_line(&out),
        "failed (input): the working tree has uncommitted changes the agent would not see (?? NOTES.md): commit or stash them, or run with --include-uncommitted to work on them too"
    );
    assert!(server.requests().is_empty(), "the model was not asked");

    let out = tokio::task::block_in_place(|| place.run(&server, &["--include-uncommitted"]));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("included:   1 uncommitted change(s) of the working tree (?? NOTES.md)"),
        "{stdout}"
    );
    let branch = stdout
        .lines()
        .find_map(|l| l.strip_prefix("branch:     "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    assert!(files_on(&place.repo(), &branch).contains(&"NOTES.md".to_owned()));
}

/// Finding 2: a change removing every file went through as an ordinary
/// one; finding 6: the host's model key in the agent's title reached
/// `run --json`.
#[tokio::test(flavor = "multi_thread")]
async fn a_change_emptying_the_repository_is_refused_and_the_hosts_key_never_printed() {
    let place = Place::new(None);
    let deletes = || {
        vec![
            Step::call(
                "bash",
                json!({"command": "rm -f calc.sh test.sh README.md"}),
            ),
            Step::finish(
                &format!("Removed it all, key {MODEL_KEY}"),
                &format!("Clean up {MODEL_KEY}"),
            ),
        ]
    };
    let server = ModelServer::start(deletes()).await.unwrap();
    let out = tokio::task::block_in_place(|| place.run(&server, &["--json"]));
    let report = json_of(&out);
    assert_eq!(report["reason"], "destructive", "{report:#}");
    assert!(
        report["message"].as_str().unwrap().contains(
            "the change deletes 3, empties 0 and rewrites 0 of the 3 tracked files (100%)"
        ),
        "{report:#}"
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(!printed.contains(MODEL_KEY), "{printed}");
    assert!(
        printed.contains("[redacted: the host's own credential model.api_key]"),
        "{printed}"
    );

    let server = ModelServer::start(deletes()).await.unwrap();
    let out =
        tokio::task::block_in_place(|| place.run(&server, &["--json", "--allow-destructive"]));
    let report = json_of(&out);
    assert!(report["commit"].is_string(), "{report:#}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(MODEL_KEY));
    let branch = report["branch"].as_str().unwrap();
    assert!(files_on(&place.repo(), branch).is_empty());
    // The commit message was redacted too.
    let git = git2::Repository::open(place.repo()).unwrap();
    let tip = git
        .find_branch(branch, git2::BranchType::Local)
        .unwrap()
        .get()
        .peel_to_commit()
        .unwrap();
    assert!(!tip.message().unwrap().contains(MODEL_KEY));
}

/// Finding 6: the key base64-, hex- or gzip-encoded in a file was
/// committed.
#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_key_encoded_or_compressed_is_not_committed() {
    for (name, command) in [
        (
            "base64",
            format!("printf %s '{MODEL_KEY}' | base64 > notes.txt"),
        ),
        (
            "hex",
            format!("printf %s '{MODEL_KEY}' | od -An -tx1 | tr -d ' \\n' > notes.txt"),
        ),
        (
            "url-safe base64 inside text",
            format!("printf 'KEY=%s' '{MODEL_KEY}' | base64 | tr '+/' '-_' > notes.txt"),
        ),
        (
            "gzip",
            format!("printf 'KEY=%s' '{MODEL_KEY}' | gzip > notes.gz"),
        ),
        (
            "tar.gz",
            format!("printf 'KEY=%s' '{MODEL_KEY}' > k.env && tar czf notes.tgz k.env && rm k.env"),
        ),
    ] {
        let place = Place::new(None);
        let script = vec![
            Step::call("bash", json!({"command": command})),
            Step::finish("Notes.", "Add notes"),
        ];
        let server = ModelServer::start(script).await.unwrap();
        let out = tokio::task::block_in_place(|| place.run(&server, &["--json"]));
        let report = json_of(&out);
        assert_eq!(report["reason"], "secret", "{name}: {report:#}");
        assert!(report["commit"].is_null(), "{name}: {report:#}");
    }
}

/// Finding 7: a missing rootfs was said twice, after the environment.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_rootfs_is_said_once_before_anything_is_made() {
    let place = Place::new(None);
    let server = ModelServer::start(good_fix()).await.unwrap();
    let out = tokio::task::block_in_place(|| {
        Command::new(forgehand_binary())
            .args([
                "run",
                "--task",
                "Fix add",
                "--provider",
                "openai",
                "--base-url",
            ])
            .arg(server.url_for("openai"))
            .current_dir(place.repo())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", place.root.path().join("home"))
            .env("FORGEHAND_SANDBOX__ROOTFS", "/nonexistent/rootfs")
            .output()
            .unwrap()
    });
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        first_line(&out),
        "failed (infra): no guest rootfs at /nonexistent/rootfs: build it with images/build-rootfs /nonexistent/rootfs (or set sandbox.rootfs)"
    );
    assert_eq!(stdout.matches("no guest rootfs").count(), 1, "{stdout}");
    assert!(!place
        .root
        .path()
        .join("home/.local/state/forgehand/jobs/checkouts")
        .exists());
}
