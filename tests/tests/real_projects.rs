//! Issue 26: ordinary projects from the package registries, with no
//! `.forgehand.toml`: their environment detected and set up through the
//! egress, their own tests run by the host and passing after a fix, and
//! the same environment reused, with no setup run, after a commit that
//! changes only the project's code. The projects are the registries'
//! source distributions (real code no one here wrote), fetched by the
//! host's own package managers at test time; the configuration is the
//! one the quick start writes.

use std::path::{Path, PathBuf};
use std::process::Command;

use forgehand_tests::local_run::repository;
use forgehand_tests::model_server::{ModelServer, Step};
use forgehand_tests::story::{forgehand_binary, quick_start_config};
use serde_json::{json, Value};

/// The files of the source distribution `pip download` fetches for
/// `spec` (`name==version`), unpacked into `dir`; its directory.
fn pypi_sdist(dir: &Path, spec: &str) -> PathBuf {
    let out = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--no-binary", ":all:"])
        .arg("-d")
        .arg(dir)
        .arg(spec)
        .output()
        .expect("pip runs");
    assert!(
        out.status.success(),
        "pip download {spec}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let archive = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .expect("an sdist");
    unpack(&archive, dir)
}

/// The package `npm pack` fetches for `spec`, unpacked into `dir`.
fn npm_package(dir: &Path, spec: &str) -> PathBuf {
    let out = Command::new("npm")
        .args(["pack", "--silent", spec])
        .current_dir(dir)
        .output()
        .expect("npm runs");
    assert!(
        out.status.success(),
        "npm pack {spec}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    unpack(&dir.join(name), dir)
}

fn unpack(archive: &Path, dir: &Path) -> PathBuf {
    let into = dir.join("unpacked");
    std::fs::create_dir_all(&into).unwrap();
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(&into)
        .status()
        .unwrap();
    assert!(status.success());
    let top = std::fs::read_dir(&into).unwrap().next().unwrap().unwrap();
    top.path()
}

/// A repository holding the files of `unpacked`, committed.
fn project_repository(unpacked: &Path, repo: &Path) {
    let mut files = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        for entry in std::fs::read_dir(unpacked.join(&rel)).unwrap().flatten() {
            let rel = rel.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                pending.push(rel);
            } else {
                let text =
                    String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap()).into_owned();
                files.push((rel.to_string_lossy().into_owned(), text));
            }
        }
    }
    let refs: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    repository(repo, &refs);
}

/// Commits `path` with `text` in `repo` (the user's own commit).
fn user_commit(repo: &Path, path: &str, text: &str) {
    std::fs::write(repo.join(path), text).unwrap();
    let git = git2::Repository::open(repo).unwrap();
    let mut index = git.index().unwrap();
    index.add_path(Path::new(path)).unwrap();
    index.write().unwrap();
    let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Dev", "dev@example.invalid").unwrap();
    let head = git.head().unwrap().peel_to_commit().unwrap();
    git.commit(Some("HEAD"), &sig, &sig, "code only", &tree, &[&head])
        .unwrap();
}

/// `forgehand run --json` on `repo` with the quick start's configuration.
fn run(config: &Path, home: &Path, repo: &Path, server: &ModelServer, task: &str) -> Value {
    let out = Command::new(forgehand_binary())
        .args(["run", "--json", "--task", task])
        .args([
            "--provider",
            "openai",
            "--model",
            "scripted-model",
            "--base-url",
        ])
        .arg(server.url_for("openai"))
        .current_dir(repo)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("HOME", home)
        .env("FORGEHAND_CONFIG", config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
}

/// A fix and the test that shows it, then the finish.
fn fix_script(edit: Value, test_path: &str, test: &str) -> Vec<Step> {
    vec![
        Step::call("edit_file", edit),
        Step::call("write_file", json!({"path": test_path, "content": test})),
        Step::finish("Fixed, with a test.", "A fix with its test"),
    ]
}

/// The project's environment is set up, the host runs its tests and they
/// pass; after a commit of code only, the next run reuses it.
async fn a_real_python_project(
    unpacked: PathBuf,
    edit: Value,
    test_path: &str,
    test: &str,
    code: (&str, &str),
) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("etc/forgehand.toml");
    let data = dir.path().join("var/lib/forgehand");
    let home = dir.path().join("home");
    quick_start_config(&config, &data, &home);
    let repo = dir.path().join("project");
    project_repository(&unpacked, &repo);
    assert!(!repo.join(".forgehand.toml").exists());

    let server = ModelServer::start(fix_script(edit, test_path, test))
        .await
        .unwrap();
    let report = tokio::task::block_in_place(|| run(&config, &home, &repo, &server, "Fix it"));
    assert_eq!(report["status"], "succeeded", "{report:#}");
    assert_eq!(report["environment"]["reused"], false, "{report:#}");
    assert_eq!(report["testing"]["result"], "passed", "{report:#}");
    let host: Vec<&Value> = report["testing"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["by"] == "host")
        .collect();
    assert!(
        host.last().is_some_and(|c| c["exit_code"] == 0),
        "{report:#}"
    );
    let key = report["environment"]["key"].clone();

    user_commit(&repo, code.0, code.1);
    let server = ModelServer::start(vec![Step::finish("Nothing to do.", "Nothing")])
        .await
        .unwrap();
    let again = tokio::task::block_in_place(|| run(&config, &home, &repo, &server, "Look"));
    assert_eq!(again["environment"]["key"], key, "{again:#}");
    assert_eq!(again["environment"]["reused"], true, "{again:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn humanize_from_pypi_is_set_up_tested_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let unpacked = pypi_sdist(dir.path(), "humanize==4.9.0");
    let number = std::fs::read_to_string(unpacked.join("src/humanize/number.py")).unwrap();
    a_real_python_project(
        unpacked,
        json!({
            "path": "src/humanize/number.py",
            "old_string": "Converts an integer to a string containing commas",
            "new_string": "Convert an integer to a string containing commas",
        }),
        "tests/test_forgehand.py",
        "import humanize\n\n\ndef test_intcomma():\n    assert humanize.intcomma(1000000) == \"1,000,000\"\n",
        (
            "src/humanize/number.py",
            &format!("{number}\n# a change to the code only\n"),
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn iso8601_from_pypi_is_set_up_tested_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let unpacked = pypi_sdist(dir.path(), "iso8601==2.1.0");
    let module = std::fs::read_to_string(unpacked.join("iso8601/iso8601.py")).unwrap();
    a_real_python_project(
        unpacked,
        json!({
            "path": "iso8601/iso8601.py",
            "old_string": "Parses ISO 8601 dates into datetime objects",
            "new_string": "Parse ISO 8601 dates into datetime objects",
        }),
        "iso8601/test_forgehand.py",
        "import iso8601\n\n\ndef test_utc():\n    assert iso8601.parse_date(\"2007-01-25T12:00:00Z\").tzinfo is not None\n",
        (
            "iso8601/iso8601.py",
            &format!("{module}\n# a change to the code only\n"),
        ),
    )
    .await;
}

/// minimist (tape, nyc, eslint through npm): set up with no
/// `.forgehand.toml` within the default timeout, then reused after a
/// commit of code only. (Its `npm test` ends with `aud`, which audits
/// through the network: the host's offline run cannot pass it.)
#[tokio::test(flavor = "multi_thread")]
async fn minimist_from_npm_is_set_up_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let unpacked = npm_package(dir.path(), "minimist@1.2.8");
    let config = dir.path().join("etc/forgehand.toml");
    let data = dir.path().join("var/lib/forgehand");
    let home = dir.path().join("home");
    quick_start_config(&config, &data, &home);
    let repo = dir.path().join("project");
    project_repository(&unpacked, &repo);
    let server = ModelServer::start(vec![Step::finish("Nothing to do.", "Nothing")])
        .await
        .unwrap();
    let first = tokio::task::block_in_place(|| run(&config, &home, &repo, &server, "Look"));
    assert_eq!(first["environment"]["reused"], false, "{first:#}");
    assert_eq!(first["environment"]["setup"], "npm install", "{first:#}");
    assert!(
        first["environment"]["setup_secs"].as_f64().unwrap() < 1200.0,
        "{first:#}"
    );
    let index = std::fs::read_to_string(repo.join("index.js")).unwrap();
    user_commit(
        &repo,
        "index.js",
        &format!("{index}\n// a change to the code only\n"),
    );
    let again = tokio::task::block_in_place(|| run(&config, &home, &repo, &server, "Look"));
    assert_eq!(again["environment"]["key"], first["environment"]["key"]);
    assert_eq!(again["environment"]["reused"], true, "{again:#}");
}
