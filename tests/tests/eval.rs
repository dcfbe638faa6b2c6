//! Issue 28: `forgehand eval` on a dataset of real projects (source
//! distributions from the package registries, each with a bug planted in
//! its first and only commit, a gold patch and a regression test): the
//! controls (`--patch gold` resolves every instance, `--patch empty`
//! none), a scripted model that deletes the tests (none) and one that
//! makes the fix (all), an evaluation killed half-way and resumed, and
//! `--max-dollars` stopping one. The configuration is the quick start's;
//! one directory is shared so the environments are built once.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use forgehand_tests::eval_dataset::{self, EvalInstance};
use forgehand_tests::model_server::{ModelServer, Step};
use forgehand_tests::story::{forgehand_binary, quick_start_config};
use serde_json::{json, Value};

struct Eval {
    dir: PathBuf,
    config: PathBuf,
    home: PathBuf,
    dataset: PathBuf,
}

impl Eval {
    fn command(&self, out: &str, args: &[&str], server: Option<&ModelServer>) -> Command {
        let mut command = Command::new(forgehand_binary());
        command
            .args(["eval", "--dataset"])
            .arg(&self.dataset)
            .arg("--out")
            .arg(self.dir.join(out))
            .args(args)
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", &self.home)
            .env("FORGEHAND_CONFIG", &self.config);
        if let Some(server) = server {
            command.args([
                "--provider",
                "openai",
                "--model",
                "scripted-model",
                "--base-url",
                &server.url_for("openai"),
            ]);
        }
        command
    }

    fn run(&self, out: &str, args: &[&str], server: Option<&ModelServer>) -> Output {
        tokio::task::block_in_place(|| self.command(out, args, server).output().unwrap())
    }

    fn summary(&self, out: &str) -> Value {
        let text = std::fs::read_to_string(self.dir.join(out).join("summary.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn results(&self, out: &str) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join(out).join("results.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn said(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The scripted model that fixes each instance with the edit the gold
/// patch makes, and the one that deletes the project's tests instead.
fn fixer(instances: &[EvalInstance]) -> Vec<(&str, Vec<Step>)> {
    instances
        .iter()
        .map(|i| {
            let (path, old, new) = &i.fix;
            (
                i.problem_statement.lines().next().unwrap(),
                vec![
                    Step::call(
                        "edit_file",
                        json!({"path": path, "old_string": old, "new_string": new}),
                    ),
                    Step::finish("Fixed the bug.", "Fix the bug"),
                ],
            )
        })
        .collect()
}

/// The first instance's deleter takes every Python file with the tests:
/// a change the gate holds.
fn deleter(instances: &[EvalInstance]) -> Vec<(&str, Vec<Step>)> {
    instances
        .iter()
        .enumerate()
        .map(|(n, i)| {
            let command = if n == 0 {
                "find . -name '*.py' -delete"
            } else {
                i.delete_tests.as_str()
            };
            (
                i.problem_statement.lines().next().unwrap(),
                vec![
                    Step::call("bash", json!({"command": command})),
                    Step::finish("The failing tests are gone.", "Remove failing tests"),
                ],
            )
        })
        .collect()
}

fn set_up(dir: &Path) -> (Eval, Vec<EvalInstance>) {
    let config = dir.join("etc/forgehand.toml");
    let home = dir.join("home");
    quick_start_config(&config, &dir.join("var/lib/forgehand"), &home);
    // A price, so that dollars are counted and --max-dollars can hold.
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(
        "\n[model.prices.scripted-model]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\n",
    );
    std::fs::write(&config, text).unwrap();
    let instances = eval_dataset::build(&dir.join("repos"));
    assert!(instances.len() >= 5, "{} instances", instances.len());
    let dataset = dir.join("dataset.jsonl");
    eval_dataset::write_jsonl(&instances, &dataset);
    let eval = Eval {
        dir: dir.to_owned(),
        config,
        home,
        dataset,
    };
    (eval, instances)
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_on_real_projects_scores_the_controls_and_the_models() {
    let dir = tempfile::tempdir().unwrap();
    let (eval, instances) = set_up(dir.path());
    let n = instances.len();

    // The controls: the dataset is sound before any model is paid.
    let gold = eval.run("gold", &["--patch", "gold", "--jobs", "2"], None);
    assert!(gold.status.success(), "{}", said(&gold));
    let summary = eval.summary("gold");
    assert_eq!(summary["resolved"], n, "{summary:#}\n{}", said(&gold));
    assert_eq!(summary["done"], n);
    assert_eq!(summary["interval"][1], 1.0, "{summary:#}");
    let stdout = String::from_utf8_lossy(&gold.stdout);
    assert!(
        stdout.contains(&format!("resolved {n} of {n} (100.0%")),
        "{stdout}"
    );

    // What pytest said is kept for each run: the tests really ran.
    for result in eval.results("gold") {
        let log = std::fs::read_to_string(result["test_log"].as_str().unwrap()).unwrap();
        assert!(log.contains(" passed") && !log.contains(" failed"), "{log}");
    }

    let empty = eval.run("empty", &["--patch", "empty", "--jobs", "2"], None);
    assert!(empty.status.success(), "{}", said(&empty));
    let summary = eval.summary("empty");
    assert_eq!(summary["resolved"], 0, "{summary:#}");
    assert_eq!(summary["reasons"]["tests_failed"], n, "{summary:#}");
    assert_eq!(summary["interval"][0], 0.0, "{summary:#}");
    for result in eval.results("empty") {
        let log = std::fs::read_to_string(result["test_log"].as_str().unwrap()).unwrap();
        assert!(log.contains(" failed"), "{log}");
    }

    // A model that deletes the tests it should make pass resolves none:
    // the tests are scored as the base and the test patch have them; a
    // change the gate holds is not scored at all.
    let server = ModelServer::routed(deleter(&instances)).await.unwrap();
    let cheat = eval.run("deleter", &["--jobs", "2"], Some(&server));
    assert!(cheat.status.success(), "{}", said(&cheat));
    let summary = eval.summary("deleter");
    assert_eq!(summary["resolved"], 0, "{summary:#}\n{}", said(&cheat));
    assert_eq!(summary["done"], n, "{summary:#}");
    for result in eval.results("deleter") {
        assert_eq!(result["resolved"], false, "{result:#}");
        if result["instance_id"] == instances[0].instance_id.as_str() {
            assert_eq!(result["reason"], "destructive", "{result:#}");
            assert!(result["test_log"].is_null(), "{result:#}");
            continue;
        }
        assert_eq!(result["reason"], "tests_failed", "{result:#}");
        assert!(result["turns"].as_u64().unwrap() >= 2, "{result:#}");
        let log = std::fs::read_to_string(result["test_log"].as_str().unwrap()).unwrap();
        assert!(log.contains("not found"), "{log}");
    }

    // A model that makes the fix resolves all, and what it cost is
    // counted from the four token counts.
    let server = ModelServer::routed(fixer(&instances)).await.unwrap();
    let fixed = eval.run("fixer", &["--jobs", "2"], Some(&server));
    assert!(fixed.status.success(), "{}", said(&fixed));
    let summary = eval.summary("fixer");
    assert_eq!(summary["resolved"], n, "{summary:#}\n{}", said(&fixed));
    assert!(summary["input_tokens"].as_u64().unwrap() > 0, "{summary:#}");
    assert!(summary["cost_usd"].as_f64().unwrap() > 0.0, "{summary:#}");
    let results = eval.results("fixer");
    assert_eq!(results.len(), n);
    let cost: f64 = results
        .iter()
        .map(|r| r["cost_usd"].as_f64().unwrap())
        .sum();
    assert!((cost - summary["cost_usd"].as_f64().unwrap()).abs() < 1e-9);
    for result in &results {
        let input = result["input_tokens"].as_f64().unwrap();
        let output = result["output_tokens"].as_f64().unwrap();
        let priced = (input * 3.0 + output * 15.0) / 1e6;
        let cost = result["cost_usd"].as_f64().unwrap();
        assert!((cost - priced).abs() < 1e-9, "{result:#}");
        assert!(Path::new(result["transcript"].as_str().unwrap()).exists());
    }

    // What was scored is not kept: of each repository's shared
    // checkouts only the start commit's stays (red-team round 2: one per
    // scored commit piled up).
    let local = dir.path().join("var/lib/forgehand/jobs/checkouts/local");
    for root in std::fs::read_dir(&local).unwrap().flatten() {
        let trees = std::fs::read_dir(root.path())
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_dir())
            .count();
        assert_eq!(trees, 1, "{}", root.path().display());
    }

    // Killed half-way, then run again with the same --out: the finished
    // runs are kept, the rest are done, none twice.
    let server = ModelServer::routed(fixer(&instances)).await.unwrap();
    let mut child = eval
        .command("resumed", &["--jobs", "1"], Some(&server))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    while eval.results("resumed").len() < 2 {
        assert!(std::time::Instant::now() < deadline, "no two results");
        assert!(
            child.try_wait().unwrap().is_none(),
            "it ended before the kill"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = eval.results("resumed").len();
    assert!(before < n, "killed after {before} of {n}");
    let again = eval.run("resumed", &["--jobs", "2"], Some(&server));
    assert!(again.status.success(), "{}", said(&again));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        stdout.contains(&format!("resuming: {before} of {n} instance-runs done")),
        "{stdout}"
    );
    let results = eval.results("resumed");
    let mut ids: Vec<&str> = results
        .iter()
        .map(|r| r["instance_id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!((results.len(), ids.len()), (n, n), "{results:#?}");
    assert_eq!(eval.summary("resumed")["resolved"], n);

    // A resumed evaluation is the same one: another scoring is refused.
    let other = eval.run("resumed", &["--patch", "gold"], None);
    assert_eq!(other.status.code(), Some(1), "{}", said(&other));
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("holds another evaluation"),
        "{}",
        said(&other)
    );

    // --max-dollars: once it is spent no further run starts, the summary
    // says why, and the exit status is 3.
    let capped = eval.run(
        "capped",
        &["--jobs", "1", "--max-dollars", "0.000001"],
        Some(&server),
    );
    assert_eq!(capped.status.code(), Some(3), "{}", said(&capped));
    let summary = eval.summary("capped");
    assert_eq!(summary["done"], 1, "{summary:#}");
    assert!(
        summary["stopped"]
            .as_str()
            .unwrap()
            .starts_with("--max-dollars"),
        "{summary:#}"
    );
    assert!(
        String::from_utf8_lossy(&capped.stdout).contains("run again with a higher --max-dollars"),
        "{}",
        said(&capped)
    );
}

/// What cannot be counted is refused before anything runs: a dataset
/// with a bad line, and --max-dollars for a model with no price.
#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("etc/forgehand.toml");
    let home = dir.path().join("home");
    quick_start_config(&config, &dir.path().join("var/lib/forgehand"), &home);
    let dataset = dir.path().join("dataset.jsonl");
    std::fs::write(
        &dataset,
        "{\"instance_id\":\"a\",\"repo\":\"r\",\"base_commit\":\"main\",\"problem_statement\":\"p\",\"test_patch\":\"x\",\"FAIL_TO_PASS\":[\"t\"]}\n",
    )
    .unwrap();
    let eval = Eval {
        dir: dir.path().to_owned(),
        config,
        home,
        dataset,
    };
    let out = eval.run("bad", &["--patch", "gold"], None);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("dataset.jsonl, line 1: a: base_commit `main` is not a commit id"),
        "{}",
        said(&out)
    );
    assert!(!dir.path().join("bad").exists());

    let server = ModelServer::start(vec![]).await.unwrap();
    std::fs::write(
        &eval.dataset,
        format!(
            "{{\"instance_id\":\"a\",\"repo\":\"r\",\"base_commit\":\"{}\",\"problem_statement\":\"p\",\"test_patch\":\"x\",\"FAIL_TO_PASS\":[\"t\"]}}\n",
            "a".repeat(40)
        ),
    )
    .unwrap();
    let out = eval.run("unpriced", &["--max-dollars", "1"], Some(&server));
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no price (model.prices.scripted-model)"),
        "{}",
        said(&out)
    );
    assert!(server.requests().is_empty());
}

/// One small instance of our own (a shell-free Python project whose
/// tests run with the guest's `python3 -m unittest`, no environment):
/// for what does not need a real project.
fn small_dataset(dir: &Path) -> PathBuf {
    let repo = dir.join("calc");
    forgehand_tests::local_run::repository(
        &repo,
        &[
            ("calc.py", "def add(a, b):\n    return a - b\n".into()),
            (
                "test_calc.py",
                "import unittest\nimport calc\n\nclass T(unittest.TestCase):\n    def test_zero(self):\n        self.assertEqual(calc.add(0, 0), 0)\n".into(),
            ),
        ],
    );
    let base = git2::Repository::open(&repo)
        .unwrap()
        .head()
        .unwrap()
        .target()
        .unwrap();
    let row = json!({
        "instance_id": "calc-1",
        "repo": "calc",
        "base_commit": base.to_string(),
        "problem_statement": "calc.add(2, 2) is 0, not 4",
        "patch": "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n",
        "test_patch": "diff --git a/test_add.py b/test_add.py\nnew file mode 100644\n--- /dev/null\n+++ b/test_add.py\n@@ -0,0 +1,5 @@\n+import unittest\n+import calc\n+\n+class R(unittest.TestCase):\n+    def test_add(self): self.assertEqual(calc.add(2, 2), 4)\n",
        "FAIL_TO_PASS": ["test_add.R.test_add"],
        "PASS_TO_PASS": ["test_calc.T.test_zero"],
        "test_command": "python3 -m unittest {tests}",
    });
    let dataset = dir.join("small.jsonl");
    std::fs::write(&dataset, format!("{row}\n")).unwrap();
    dataset
}

/// A repository whose checkout differs from its blobs (a
/// `working-tree-encoding` in `.gitattributes`) is run on and scored
/// like any other. Red-team round 2: the run was scored `input` while the
/// gold control passed; the fix of that round left it not recorded,
/// which CI then saw depend on the second the clone was checked out in
/// (libgit2, blind to the attribute, read the files as changed only when
/// their timestamps sent it to the contents). The run's status is now
/// git's own.
#[tokio::test(flavor = "multi_thread")]
async fn a_repository_whose_checkout_differs_from_its_blobs_is_scored() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("etc/forgehand.toml");
    let home = dir.path().join("home");
    quick_start_config(&config, &dir.path().join("var/lib/forgehand"), &home);
    let dataset = small_dataset(dir.path());
    let repo = dir.path().join("calc");
    std::fs::write(
        repo.join(".gitattributes"),
        "*.py working-tree-encoding=UTF-16LE\n",
    )
    .unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=d", "-c", "user.email=d@example.invalid"])
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    git(&["add", ".gitattributes"]);
    git(&["commit", "-qm", "attributes"]);
    let head = git(&["rev-parse", "HEAD"]);
    let text = std::fs::read_to_string(&dataset).unwrap();
    let mut row: Value = serde_json::from_str(text.trim()).unwrap();
    row["base_commit"] = Value::from(head);
    std::fs::write(&dataset, format!("{row}\n")).unwrap();
    let eval = Eval {
        dir: dir.path().to_owned(),
        dataset,
        config,
        home,
    };
    let server = ModelServer::routed(vec![("calc.add(2, 2)", vec![Step::finish("x", "x")])])
        .await
        .unwrap();
    let out = eval.run("out", &[], Some(&server));
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let results = eval.results("out");
    assert_eq!(results.len(), 1, "{}", said(&out));
    assert_eq!(results[0]["reason"], "no_changes", "{}", said(&out));
    let out = eval.run("gold", &["--patch", "gold"], None);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(eval.summary("gold")["resolved"], 1, "{}", said(&out));
}

/// A model that cannot be reached measures the model's API, not the
/// agent: the run is not recorded, the evaluation says so and exits 1,
/// and the same command does it again once the model answers.
/// (Red-team round 1: an outage was scored `model_error` for good.) Also:
/// one evaluation at a time in a directory, and a spending limit that is
/// a number.
#[tokio::test(flavor = "multi_thread")]
async fn a_model_outage_is_not_scored_and_the_run_is_done_again() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("etc/forgehand.toml");
    let home = dir.path().join("home");
    quick_start_config(&config, &dir.path().join("var/lib/forgehand"), &home);
    let eval = Eval {
        dir: dir.path().to_owned(),
        dataset: small_dataset(dir.path()),
        config,
        home,
    };
    let down = ModelServer::routed(vec![("no such task", vec![])])
        .await
        .unwrap();
    let out = tokio::task::block_in_place(|| {
        eval.command("out", &[], Some(&down))
            .env("FORGEHAND_MODEL__MAX_RETRIES", "1")
            .env("FORGEHAND_MODEL__RETRY_BASE_MS", "50")
            .output()
            .unwrap()
    });
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("calc-1 run 1: not recorded, to be run again: model_error"),
        "{}",
        said(&out)
    );
    assert!(eval.results("out").is_empty());

    let up = ModelServer::routed(vec![(
        "calc.add(2, 2)",
        vec![
            Step::call(
                "edit_file",
                json!({"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}),
            ),
            Step::finish("add adds.", "Fix add"),
        ],
    )])
    .await
    .unwrap();
    let out = eval.run("out", &[], Some(&up));
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(eval.summary("out")["resolved"], 1, "{}", said(&out));

    for bad in ["nan", "inf", "-1", "0"] {
        let out = eval.run("other", &[&format!("--max-dollars={bad}")], Some(&up));
        assert_eq!(out.status.code(), Some(1), "{bad}: {}", said(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("must be a number of dollars above 0"),
            "{}",
            said(&out)
        );
    }

    // A second evaluation in a directory one is writing to is refused
    // (the first waits on its model meanwhile).
    let slow = ModelServer::routed(vec![(
        "calc.add(2, 2)",
        vec![Step::Slow {
            delay: std::time::Duration::from_secs(5),
            then: Box::new(Step::finish("Nothing.", "Nothing")),
        }],
    )])
    .await
    .unwrap();
    let mut first = eval
        .command("busy", &[], Some(&slow))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let setup = dir.path().join("busy/eval.json");
    while !setup.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let second = eval.run("busy", &[], Some(&slow));
    assert!(first.try_wait().unwrap().is_none(), "the first ended first");
    assert_eq!(second.status.code(), Some(1), "{}", said(&second));
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("another forgehand eval is writing to"),
        "{}",
        said(&second)
    );
    first.wait().unwrap();
}
