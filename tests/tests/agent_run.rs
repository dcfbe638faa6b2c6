//! `forgehand run` end to end: the real binary, a real git repository, the
//! namespace sandbox, and the scripted model server playing the model in
//! both API dialects.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use forgehand_tests::model_server::{ModelServer, Step};
use forgehand_tests::project::good_script;
use forgehand_tests::rootfs;
use forgehand_tests::story::forgehand_binary;
use serde_json::{json, Value};

#[path = "agent_run/budgets.rs"]
mod budgets;
#[path = "agent_run/hostile.rs"]
mod hostile;
#[path = "agent_run/requests.rs"]
mod requests;

const API_KEY: &str = "sk-scripted-key-0123456789abcdef";

/// The repository the agent works on: a shell "library" with a bug and
/// its own tests.
struct Project {
    root: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::write(repo.join("calc.sh"), "add() {\n  echo $(($1 - $2))\n}\n").unwrap();
        std::fs::write(
            repo.join("test.sh"),
            ". ./calc.sh\n[ \"$(add 2 3)\" = 5 ] && echo 'ok: add' || { echo 'FAIL: add 2 3 gave' \"$(add 2 3)\"; exit 1; }\n",
        )
        .unwrap();
        std::fs::write(
            repo.join("AGENTS.md"),
            "Run `sh test.sh` before you finish.\n",
        )
        .unwrap();
        let git = git2::Repository::init_opts(
            &repo,
            git2::RepositoryInitOptions::new().initial_head("main"),
        )
        .unwrap();
        let mut index = git.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        // As `git add` leaves it: a repository whose index was never
        // written shows every file untracked, and `run` refuses it.
        index.write().unwrap();
        let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("Dev", "dev@example.invalid").unwrap();
        git.commit(Some("HEAD"), &sig, &sig, "start", &tree, &[])
            .unwrap();
        Project { root }
    }

    fn repo(&self) -> PathBuf {
        self.root.path().join("repo")
    }

    /// Commits `path` with `text` on the repository's branch.
    fn commit(&self, path: &str, text: &str) {
        let repo = self.repo();
        std::fs::write(repo.join(path), text).unwrap();
        let git = git2::Repository::open(&repo).unwrap();
        let mut index = git.index().unwrap();
        index.add_path(Path::new(path)).unwrap();
        index.write().unwrap();
        let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
        let parent = git.head().unwrap().peel_to_commit().unwrap();
        let sig = git2::Signature::now("Dev", "dev@example.invalid").unwrap();
        git.commit(Some("HEAD"), &sig, &sig, path, &tree, &[&parent])
            .unwrap();
    }

    /// Runs `forgehand run --json` with `dialect` against `server`, with
    /// `config` as its `--config` file; returns the exit code and the report.
    fn run(&self, server: &ModelServer, dialect: &str, config: &str) -> (i32, Value) {
        let cwd = self.root.path();
        std::fs::write(cwd.join("forgehand.toml"), config).unwrap();
        // A run that hangs (a host-side tool blocked on what the agent
        // planted) fails the test instead of hanging it.
        let out = Command::new("timeout")
            .arg("180")
            .arg(forgehand_binary())
            .args(["run", "--json", "--backend", "namespace", "--task"])
            .arg("Fix add in calc.sh")
            .arg("--config")
            .arg(cwd.join("forgehand.toml"))
            .arg("--repo")
            .arg(self.repo())
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
            .env("FORGEHAND_MODEL__PROVIDER", dialect)
            .env("FORGEHAND_MODEL__BASE_URL", server.url_for(dialect))
            .env("FORGEHAND_MODEL__NAME", "scripted-model")
            .env("FORGEHAND_MODEL__API_KEY", API_KEY)
            .env("FORGEHAND_GIT__WORK_DIR", cwd.join("jobs"))
            .env("FORGEHAND_AGENT__TRANSCRIPT_DIR", cwd.join("transcripts"))
            .output()
            .expect("the forgehand binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "forgehand run --json printed no JSON ({e}):\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), report)
    }

    fn file_on_branch(&self, branch: &str, path: &str) -> String {
        let git = git2::Repository::open(self.repo()).unwrap();
        let tree = git
            .find_branch(branch, git2::BranchType::Local)
            .unwrap()
            .get()
            .peel_to_tree()
            .unwrap();
        let blob = tree
            .get_path(Path::new(path))
            .unwrap()
            .to_object(&git)
            .unwrap()
            .peel_to_blob()
            .unwrap();
        String::from_utf8(blob.content().to_vec()).unwrap()
    }
}

/// The transcript's events as JSON values.
fn transcript(report: &Value) -> Vec<Value> {
    let path = report["transcript"].as_str().expect("a transcript path");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn tool_events(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["event"] == "tool").collect()
}

const QUICK_RETRIES: &str = "[model]\nretry_base_ms = 50\nmax_retries = 2\n";

async fn the_agent_reads_edits_tests_and_finishes(dialect: &str) {
    let project = Project::new();
    let server = ModelServer::start(good_script()).await.unwrap();
    let (code, report) =
        tokio::task::block_in_place(|| project.run(&server, dialect, QUICK_RETRIES));
    assert_eq!(report["status"], "untested", "{report:#}");
    assert_eq!(code, 0);
    assert_eq!(report["config"]["origin"], "flag", "{report:#}");
    assert!(report["config"]["path"]
        .as_str()
        .unwrap()
        .ends_with("forgehand.toml"));
    // Four turns, and the review turn (issue 28, 6): the first `finish`
    // answered with the change, the agent finishing again.
    assert_eq!(report["turns"], 5);
    assert_eq!(report["tool_calls"], 5);
    assert!(
        report["cost_usd"].is_null(),
        "no price is configured: unpriced, not $0: {report:#}"
    );
    assert!(report["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        report["diff_stat"],
        "1 files changed, 1 insertions(+), 1 deletions(-)"
    );
    let branch = report["branch"].as_str().unwrap();
    assert!(
        branch.starts_with("forgehand/run-fix-add-in-calc-sh"),
        "{branch}"
    );
    assert_eq!(
        project.file_on_branch(branch, "calc.sh"),
        "add() {\n  echo $(($1 + $2))\n}\n"
    );
    assert_eq!(
        project.file_on_branch("main", "calc.sh"),
        "add() {\n  echo $(($1 - $2))\n}\n",
        "the starting branch is untouched"
    );

    let events = transcript(&report);
    let tools: Vec<&Value> = tool_events(&events);
    let names: Vec<&str> = tools.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["read_file", "edit_file", "bash", "finish", "finish"]
    );
    assert!(tools[0]["result"]
        .as_str()
        .unwrap()
        .contains("echo $(($1 - $2))"));
    let bash = tools[2]["result"].as_str().unwrap();
    assert!(
        bash.starts_with("exit status 0") && bash.contains("ok: add"),
        "the repository's own test ran in the sandbox: {bash}"
    );
    assert_eq!(
        events.iter().filter(|e| e["event"] == "model_call").count(),
        5
    );
    let raw = std::fs::read_to_string(report["transcript"].as_str().unwrap()).unwrap();
    assert!(!raw.contains(API_KEY), "the API key is redacted");

    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    // The review turn as the model saw it: its own diff, as the host
    // would commit it, and the test it ran, as the host saw it.
    let review = requests[4].body.to_string();
    for seen in [
        "Before this is done, review it.",
        "-  echo $(($1 - $2))",
        "+  echo $(($1 + $2))",
        "The tests you ran, as Forgehand saw them: `sh test.sh` exited 0.",
        "call `finish` again",
    ] {
        assert!(
            review.contains(&seen.replace('\n', "\\n")),
            "{seen}: {review}"
        );
    }
    assert!(requests.iter().all(|r| r.status == 200));
    let auth = requests[0].authorization.as_deref().unwrap();
    assert!(
        auth.contains(API_KEY),
        "the key is sent to the model: {auth}"
    );
    let first = requests[0].body.to_string();
    assert!(
        first.contains("Run `sh test.sh` before you finish."),
        "AGENTS.md is in the system prompt"
    );
    assert!(first.contains("Fix add in calc.sh"));
    let second = requests[1].body.to_string();
    assert!(
        second.contains("echo $(($1 - $2))"),
        "the tool result went back"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_dialect_reads_edits_tests_and_finishes() {
    the_agent_reads_edits_tests_and_finishes("openai").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_dialect_reads_edits_tests_and_finishes() {
    the_agent_reads_edits_tests_and_finishes("anthropic").await;
}

/// Runs `steps` with `config` and returns the report; the run must fail
/// with `reason`.
async fn stops_with(reason: &str, steps: Vec<Step>, config: &str) -> (Project, Value) {
    let project = Project::new();
    let server = ModelServer::start(steps).await.unwrap();
    let (code, report) = tokio::task::block_in_place(|| project.run(&server, "openai", config));
    assert_eq!(report["status"], "failed", "{report:#}");
    assert_eq!(report["reason"], reason, "{report:#}");
    assert_eq!(code, 1);
    (project, report)
}

fn edit_step() -> Step {
    Step::call(
        "edit_file",
        json!({"path": "calc.sh", "old_string": "$(($1 - $2))", "new_string": "$(($1 + $2))"}),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_429_with_retry_after_is_retried_and_succeeds() {
    let project = Project::new();
    let mut steps = vec![Step::Fail {
        status: 429,
        retry_after: Some("1".into()),
    }];
    steps.extend(good_script());
    let server = ModelServer::start(steps).await.unwrap();
    // The backoff alone would wait 60 s.
    let (code, report) = tokio::task::block_in_place(|| {
        project.run(
            &server,
            "anthropic",
            "[model]\nretry_base_ms = 60000\nretry_max_ms = 60000\n",
        )
    });
    assert_eq!(report["status"], "untested", "{report:#}");
    assert_eq!(code, 0);
    let requests = server.requests();
    let statuses: Vec<u16> = requests.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 200, 200, 200, 200, 200]);
    // Measured by the server, from the 429's answer to the next request:
    // at least the second Retry-After asked for (the client's wait, and
    // only more on a loaded machine). The upper bound is no speed claim:
    // it tells Retry-After's one second from the backoff's sixty.
    let waited = requests[1].received.duration_since(requests[0].answered);
    assert!(
        waited >= Duration::from_secs(1),
        "Retry-After: 1 not waited out: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(60),
        "the backoff was waited, not Retry-After: {waited:?}"
    );
    let events = transcript(&report);
    let first_call = events.iter().find(|e| e["event"] == "model_call").unwrap();
    assert_eq!(first_call["attempts"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_storm_of_500s_ends_with_model_error_and_a_clear_message() {
    let project = Project::new();
    let server = ModelServer::start(vec![]).await.unwrap();
    server.then_always(Step::Fail {
        status: 500,
        retry_after: None,
    });
    let (code, report) =
        tokio::task::block_in_place(|| project.run(&server, "openai", QUICK_RETRIES));
    assert_eq!(report["status"], "failed");
    assert_eq!(report["reason"], "model_error");
    assert_eq!(code, 1);
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains("kept failing (3 tries)") && message.contains("answered 500"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_tool_arguments_get_a_validation_error_the_model_corrects() {
    for dialect in ["openai", "anthropic"] {
        let project = Project::new();
        let mut steps = vec![
            Step::raw_call("read_file", "{\"path\": \"calc.sh\""),
            Step::call("read_file", json!({"path": "calc.sh", "start_line": 0})),
        ];
        steps.extend(good_script());
        let server = ModelServer::start(steps).await.unwrap();
        let (code, report) =
            tokio::task::block_in_place(|| project.run(&server, dialect, QUICK_RETRIES));
        assert_eq!(report["status"], "untested", "{dialect}: {report:#}");
        assert_eq!(code, 0);
        let events = transcript(&report);
        let tools = tool_events(&events);
        assert_eq!(tools[0]["is_error"], true);
        assert!(
            tools[0]["result"]
                .as_str()
                .unwrap()
                .contains("not valid JSON"),
            "{}",
            tools[0]
        );
        assert_eq!(tools[1]["is_error"], true);
        assert!(
            tools[1]["result"].as_str().unwrap().contains("start_line"),
            "{}",
            tools[1]
        );
        assert_eq!(tools[2]["is_error"], false);
        let second = server.requests()[1].body.to_string();
        assert!(
            second.contains("not valid JSON"),
            "{dialect}: the error went back to the model"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_model_is_named_with_what_to_configure() {
    let project = Project::new();
    let server = ModelServer::start(vec![]).await.unwrap();
    // A port nothing listens on: the server's, after it is gone.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let cwd = project.root.path();
    let out = Command::new(forgehand_binary())
        .args([
            "run",
            "--backend",
            "namespace",
            "--task",
            "anything",
            "--repo",
        ])
        .arg(project.repo())
        .args([
            "--provider",
            "openai",
            "--model",
            "qwen2.5-coder:7b",
            "--base-url",
        ])
        .arg(format!("http://127.0.0.1:{port}/v1"))
        .current_dir(cwd)
        .env("HOME", cwd.join("home"))
        .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
        .env("FORGEHAND_GIT__WORK_DIR", cwd.join("jobs"))
        .env("FORGEHAND_AGENT__TRANSCRIPT_DIR", cwd.join("transcripts"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    // Asked first (its model list, nothing billed), and named by the flag
    // that set it (issue 24: it said model.base_url, after the
    // environment was built).
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!(
            "failed (model_error): cannot reach the model at http://127.0.0.1:{port}/v1/models"
        )) && first.contains("Set --base-url to where it listens"),
        "{stdout}"
    );
    assert!(
        !cwd.join("home/.local/state/forgehand/environments")
            .exists()
            && !cwd.join("jobs/checkouts").exists(),
        "nothing was made before the model answered"
    );
    assert!(server.requests().is_empty());
}
