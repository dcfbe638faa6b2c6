//! `forgehand run` on real projects: a Python repository whose tests
//! import a package from PyPI and a Node repository whose tests need an
//! npm package. Their environments are set up through the egress proxy
//! against the registries this machine reaches (the allow-list taken from
//! the host's own package managers at test time, never from a file of the
//! project), the scripted agent fixes the bug and runs the tests, the host
//! runs them again, and the branch holds the fix and nothing of the
//! environment or the toolchains' artefacts. The second run reuses the
//! environment without running setup again. The agent itself reaches no
//! registry.

use std::path::Path;
use std::process::Command;

use forgehand_environment::hosts;
use forgehand_tests::local_run::{bash, files_on, repository, tool_results, LocalRuns};
use forgehand_tests::model_server::{ModelServer, Step};
use serde_json::{json, Value};

/// The registries this machine's package managers use.
fn allow_hosts() -> String {
    let proposal = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(hosts::propose());
    let hosts = proposal.allow_hosts();
    assert!(
        !hosts.is_empty(),
        "no registry found in this host's pip, npm or apt configuration (install them): {proposal}"
    );
    hosts.join(",")
}

/// npm's registry as this host's npm has it (for the agent's probe).
fn npm_registry() -> String {
    let out = Command::new("npm")
        .args(["config", "get", "registry"])
        .output()
        .expect("npm is installed (apt-get install npm)");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The agent runs the failing tests, fixes the code, runs them again,
/// probes the registry (it must not reach it) and finishes.
fn script(test: &str, fix: (&str, &str), registry: &str) -> Vec<Step> {
    vec![
        bash(test),
        Step::call("write_file", json!({ "path": fix.0, "content": fix.1 })),
        bash(test),
        bash(&format!(
            "curl -sS --max-time 5 -o /dev/null {registry} && echo REACHED || echo UNREACHABLE"
        )),
        Step::finish("Fixed add: it subtracted.", "Fix add"),
    ]
}

fn check_first_run(report: &Value, repo: &Path, fixed: &str) {
    assert_eq!(report["status"], "succeeded", "{report:#}");
    let environment = &report["environment"];
    assert_eq!(environment["reused"], false, "{report:#}");
    assert!(
        environment["setup_secs"].as_f64().unwrap() > 0.0,
        "{report:#}"
    );
    assert_eq!(environment["key"].as_str().unwrap().len(), 64);
    let testing = &report["testing"];
    assert_eq!(testing["result"], "passed", "{report:#}");
    let commands = testing["commands"].as_array().unwrap();
    let by = |who: &str| commands.iter().filter(|c| c["by"] == who).count();
    assert!(by("agent") >= 2, "the agent's two test runs: {testing:#}");
    assert_eq!(by("host"), 1, "{testing:#}");
    assert_ne!(
        commands[0]["exit_code"], 0,
        "the bug made the first run fail: {testing:#}"
    );
    assert_eq!(commands.last().unwrap()["exit_code"], 0);
    // The branch holds the fix, and nothing of the environment or the
    // toolchains' artefacts.
    let branch = report["branch"].as_str().unwrap();
    let on_branch = files_on(repo, branch);
    for artefact in [
        "node_modules",
        "__pycache__",
        ".pytest_cache",
        ".venv",
        ".npm",
    ] {
        assert!(
            !on_branch.iter().any(|p| p.contains(artefact)),
            "{artefact} committed: {on_branch:?}"
        );
    }
    assert!(on_branch.iter().any(|p| p == fixed), "{on_branch:?}");
    let results = tool_results(report);
    assert!(
        results.iter().any(|r| r.contains("UNREACHABLE")),
        "the agent reached the registry: {results:?}"
    );
}

fn check_second_run(report: &Value, first: &Value) {
    assert_eq!(report["status"], "succeeded", "{report:#}");
    assert_eq!(report["environment"]["reused"], true, "{report:#}");
    assert_eq!(report["environment"]["key"], first["environment"]["key"]);
    assert_eq!(report["testing"]["result"], "passed", "{report:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_project_gets_its_pypi_dependencies_and_a_tested_fix() {
    let hosts = tokio::task::spawn_blocking(allow_hosts).await.unwrap();
    let registry = npm_registry();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("calc");
    repository(
        &repo,
        &[
            ("requirements.txt", "iniconfig==2.0.0\npytest==8.3.3\n".into()),
            ("calc.py", "def add(a, b):\n    return a - b\n".into()),
            (
                "test_calc.py",
                "import iniconfig\n\nfrom calc import add\n\n\ndef test_add():\n    assert iniconfig.__name__ == \"iniconfig\"\n    assert add(2, 3) == 5\n".into(),
            ),
        ],
    );
    let test = "$HOME/.venv/bin/python -m pytest -q";
    let fixed = "def add(a, b):\n    return a + b\n";
    let run = LocalRuns {
        dir: dir.path().to_owned(),
    };
    let server = ModelServer::start(script(test, ("calc.py", fixed), &registry))
        .await
        .unwrap();
    let first = tokio::task::block_in_place(|| run.run(&repo, &server, &hosts, "Fix add"));
    check_first_run(&first, &repo, "calc.py");
    let left_out = first["left_out"].as_array().unwrap();
    assert!(
        left_out
            .iter()
            .any(|p| p.as_str().unwrap().contains("__pycache__")),
        "the artefacts are listed as left out: {first:#}"
    );

    let again = ModelServer::start(script(test, ("calc.py", fixed), &registry))
        .await
        .unwrap();
    let second = tokio::task::block_in_place(|| run.run(&repo, &again, &hosts, "Fix add again"));
    check_second_run(&second, &first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_project_gets_its_npm_dependencies_and_a_tested_fix() {
    let hosts = tokio::task::spawn_blocking(allow_hosts).await.unwrap();
    let registry = npm_registry();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("calc");
    let package = json!({
        "name": "calc",
        "version": "1.0.0",
        "private": true,
        "scripts": { "test": "node test.js" },
        "dependencies": { "is-number": "7.0.0" }
    });
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("package.json"), package.to_string()).unwrap();
    // The lockfile as this host's npm writes it (its registry, its
    // configuration), made at test time.
    let locked = Command::new("npm")
        .args([
            "install",
            "--package-lock-only",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
        ])
        .current_dir(&repo)
        .output()
        .expect("npm is installed (apt-get install npm)");
    assert!(
        locked.status.success(),
        "npm could not lock the dependencies: {}",
        String::from_utf8_lossy(&locked.stderr)
    );
    let lock = std::fs::read_to_string(repo.join("package-lock.json")).unwrap();
    repository(
        &repo,
        &[
            ("package.json", package.to_string()),
            ("package-lock.json", lock),
            ("calc.js", "exports.add = (a, b) => a - b;\n".into()),
            (
                "test.js",
                "const isNumber = require('is-number');\nconst { add } = require('./calc');\nif (!isNumber(add(2, 3)) || add(2, 3) !== 5) {\n  console.error('FAIL: add(2, 3) gave ' + add(2, 3));\n  process.exit(1);\n}\nconsole.log('ok: add');\n".into(),
            ),
        ],
    );
    let test = "npm test";
    let fixed = "exports.add = (a, b) => a + b;\n";
    let run = LocalRuns {
        dir: dir.path().to_owned(),
    };
    let server = ModelServer::start(script(test, ("calc.js", fixed), &registry))
        .await
        .unwrap();
    let first = tokio::task::block_in_place(|| run.run(&repo, &server, &hosts, "Fix add"));
    check_first_run(&first, &repo, "calc.js");
    assert!(
        first["left_out"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().contains("node_modules")),
        "the environment's node_modules is listed as left out: {first:#}"
    );
    let again = ModelServer::start(script(test, ("calc.js", fixed), &registry))
        .await
        .unwrap();
    let second = tokio::task::block_in_place(|| run.run(&repo, &again, &hosts, "Fix add again"));
    check_second_run(&second, &first);
}
