//! The host's test run is evidence of what is committed, and of nothing
//! else: it runs in a sandbox of its own over the environment and the
//! tree the commit holds, never in the agent's sandbox, whose home,
//! `/tmp`, processes and copies of the environment's files the model
//! controls (red-team finding F1). And an agent's command is listed as a
//! test run only when it runs the test, not when it merely names it (F6).

use std::path::Path;

use forgehand_tests::local_run::{bash, files_on, repository, LocalRuns};
use forgehand_tests::model_server::{ModelServer, Step};
use serde_json::{json, Value};

/// A repository whose environment (made by its setup, no network) holds
/// `vendor/helper.py`, and whose test passes when `feature.value()` is 42
/// and `legacy.py` is gone.
fn project(dir: &Path) {
    repository(
        dir,
        &[
            (
                ".forgehand.toml",
                "[environment]\nsetup = \"sh setup.sh\"\ntest = \"python3 test_x.py\"\ninputs = [\"setup.sh\"]\n".into(),
            ),
            (
                "setup.sh",
                "mkdir -p vendor\ncat > vendor/helper.py <<'PY'\ndef check(value):\n    return value == 42\nPY\n".into(),
            ),
            (
                "test_x.py",
                "import os, sys\nsys.path.insert(0, \"vendor\")\nimport helper\nfrom feature import value\nif os.path.exists(\"legacy.py\"):\n    print(\"FAIL: legacy.py is still there\")\n    sys.exit(1)\nif not helper.check(value()):\n    print(\"FAIL: value() gave\", value())\n    sys.exit(1)\nprint(\"ok\")\n".into(),
            ),
            ("feature.py", "def value():\n    return 41\n".into()),
            ("legacy.py", "OLD = True\n".into()),
            ("pkg/__init__.py", String::new()),
        ],
    );
}

fn host_runs(report: &Value) -> Vec<&Value> {
    report["testing"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["by"] == "host")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_sandbox_cannot_make_the_hosts_tests_pass() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    project(&repo);
    let script = vec![
        bash("rm legacy.py"),
        // Python runs any `.pth` in the user's site directory, in the
        // agent's home: the test "passes" whatever it checks.
        bash(
            r#"d=$(python3 -m site --user-site) && mkdir -p "$d" && printf '%s\n' 'import os,sys; "test_x.py" in " ".join(sys.argv) and os._exit(0)' > "$d/zz.pth" && echo planted"#,
        ),
        // The environment's own file, changed in the agent's layer (left
        // out of the commit, as every environment file is).
        bash("printf 'def check(value):\\n    return True\\n' > vendor/helper.py"),
        bash("python3 test_x.py"),
        // Naming the test is not running it.
        bash("echo python3 test_x.py"),
        Step::finish("Done: the tests pass.", "Change value"),
        // Told that the host's run failed, it finishes again unchanged.
        Step::finish("Done: the tests pass.", "Change value"),
    ];
    let server = ModelServer::start(script).await.unwrap();
    let runs = LocalRuns {
        dir: dir.path().to_owned(),
    };
    let report = tokio::task::block_in_place(|| runs.run(&repo, &server, "localhost", "Tidy"));
    let testing = &report["testing"];
    let host = host_runs(&report);
    assert!(!host.is_empty(), "{report:#}");
    for run in &host {
        assert_eq!(
            run["exit_code"], 1,
            "the host's run saw the agent's home or its copy of the environment's file: {report:#}"
        );
    }
    assert_eq!(testing["result"], "failed", "{report:#}");
    // What is committed is the deletion, and nothing the tricks left.
    let branch = report["branch"].as_str().expect("a branch");
    let on_branch = files_on(&repo, branch);
    assert!(!on_branch.iter().any(|p| p == "legacy.py"), "{on_branch:?}");
    assert!(
        !on_branch
            .iter()
            .any(|p| p.starts_with("vendor") || p.ends_with(".pth")),
        "{on_branch:?}"
    );
    let agent: Vec<&Value> = testing["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["by"] == "agent")
        .collect();
    assert_eq!(
        agent,
        vec![&json!({"command": "python3 test_x.py", "exit_code": 0, "by": "agent"})],
        "the agent's one run of the test, which its planted files made pass; not the echo: {testing:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_tests_see_the_commit_over_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    project(&repo);
    let script = vec![
        bash("rm legacy.py && mkdir -p pkg && echo 'X = 1' > pkg/extra.py"),
        Step::call(
            "write_file",
            json!({"path": "feature.py", "content": "def value():\n    return 42\n"}),
        ),
        bash("python3 test_x.py"),
        Step::finish("value() gives 42; legacy.py is gone.", "Fix value"),
    ];
    let server = ModelServer::start(script).await.unwrap();
    let runs = LocalRuns {
        dir: dir.path().to_owned(),
    };
    let report = tokio::task::block_in_place(|| runs.run(&repo, &server, "localhost", "Fix"));
    assert_eq!(report["status"], "succeeded", "{report:#}");
    let host = host_runs(&report);
    assert_eq!(host.len(), 1, "{report:#}");
    assert_eq!(
        host[0]["exit_code"], 0,
        "the host's run sees the commit (the deletion, the new file, the fix) over the environment's files: {report:#}"
    );
    assert_eq!(report["testing"]["result"], "passed", "{report:#}");
    let on_branch = files_on(&repo, report["branch"].as_str().unwrap());
    assert!(
        on_branch.iter().any(|p| p == "pkg/extra.py"),
        "{on_branch:?}"
    );
}
