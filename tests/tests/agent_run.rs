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

/// Issue 28 (5): an edit answers with the lines it changed, numbered; an
/// edit that would leave a Python file that compiled unable to compile is
/// refused in the sandbox's Python, the file left as it was, and the
/// error shown with the lines it points at.
#[tokio::test(flavor = "multi_thread")]
async fn a_syntax_breaking_edit_is_refused_with_the_error_shown() {
    let project = Project::new();
    let good = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n";
    let steps = vec![
        Step::call("write_file", json!({"path": "util.py", "content": good})),
        Step::call(
            "edit_file",
            json!({"path": "util.py", "old_string": "return a + b", "new_string": "return (a + b"}),
        ),
        Step::call(
            "edit_file",
            json!({"path": "util.py", "old_string": "return a - b", "new_string": "return b - a"}),
        ),
        edit_step(),
        Step::finish("fixed add; util.py swaps sub", "Fix add"),
    ];
    let server = ModelServer::start(steps).await.unwrap();
    let (code, report) = tokio::task::block_in_place(|| project.run(&server, "openai", ""));
    // A new Python file at the root is held by the gate (none there
    // before): the commit is kept for a person, and holds what went in.
    assert_eq!(
        (code, report["reason"].as_str()),
        (1, Some("sensitive")),
        "{report:#}"
    );
    let events = transcript(&report);
    let tools = tool_events(&events);
    assert_eq!(tools[0]["is_error"], false);
    assert_eq!(
        tools[0]["result"],
        "wrote util.py (66 bytes, 6 lines):\n     1\tdef add(a, b):\n     2\t    return a + b\n     3\t\n     4\t\n     5\tdef sub(a, b):\n     6\t    return a - b\n"
    );
    assert_eq!(tools[1]["is_error"], true, "{:#}", tools[1]);
    let refused = tools[1]["result"].as_str().unwrap();
    assert!(
        refused.starts_with("error: refused: util.py compiled as Python before this change and would not after it: '(' was never closed (line 2). The file is as it was."),
        "{refused}"
    );
    assert!(refused.contains("     2\t    return (a + b\n"), "{refused}");
    assert_eq!(tools[2]["is_error"], false);
    assert_eq!(
        tools[2]["result"],
        "edited util.py at line 6:\n     3\t\n     4\t\n     5\tdef sub(a, b):\n     6\t    return b - a\n"
    );
    let git = git2::Repository::open(project.repo()).unwrap();
    let commit = git2::Oid::from_str(report["commit"].as_str().unwrap()).unwrap();
    let tree = git.find_commit(commit).unwrap().tree().unwrap();
    let blob = tree
        .get_path(Path::new("util.py"))
        .unwrap()
        .to_object(&git)
        .unwrap();
    assert_eq!(
        std::str::from_utf8(blob.peel_to_blob().unwrap().content()).unwrap(),
        good.replace("return a - b", "return b - a"),
        "the refused edit left nothing behind, the next one went in"
    );
}

/// Issue 28 (8): a model without tool calls, driven in text mode (one
/// fenced block a reply), reads, fixes through bash, tests and finishes;
/// no tools are sent, the system prompt says the format, and a reply
/// without one block is answered with the format.
#[tokio::test(flavor = "multi_thread")]
async fn text_mode_drives_a_model_without_tool_calls_to_a_fix() {
    let project = Project::new();
    let steps = vec![
        Step::text("Let me look.\n```bash\ncat calc.sh\n```"),
        Step::text("I think I see it."),
        Step::text("```bash\nsed -i 's/- \\$2/+ $2/' calc.sh && sh test.sh\n```"),
        Step::text("```finish\nFix add in calc.sh\n`add` subtracted; now it adds, and `sh test.sh` passes.\n```"),
    ];
    let server = ModelServer::start(steps).await.unwrap();
    let (code, report) = tokio::task::block_in_place(|| {
        project.run(&server, "openai", "[model]\ntool_mode = \"text\"\n")
    });
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["title"], "Fix add in calc.sh");
    let branch = report["branch"].as_str().unwrap();
    assert_eq!(
        project.file_on_branch(branch, "calc.sh"),
        "add() {\n  echo $(($1 + $2))\n}\n"
    );
    let events = transcript(&report);
    let names: Vec<&str> = tool_events(&events)
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    // The finish again is the review turn's.
    assert_eq!(names, ["bash", "bash", "finish", "finish"]);
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.body.get("tools").is_none()));
    let first = requests[0].body.to_string();
    assert!(first.contains("exactly one fenced code block"), "{first}");
    let second = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(second["role"], "user");
    assert!(
        second["content"]
            .as_str()
            .unwrap()
            .starts_with("Output:\nexit status 0"),
        "{second}"
    );
    let third = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        third["content"]
            .as_str()
            .unwrap()
            .contains("Reply with exactly one fenced block"),
        "{third}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_turn_budget_stops_the_run_and_keeps_the_work() {
    let mut steps = vec![edit_step()];
    steps.extend((0..5).map(|_| Step::call("list_files", json!({}))));
    let (project, report) = stops_with("budget:turns", steps, "[agent]\nmax_turns = 3\n").await;
    assert_eq!(report["turns"], 3);
    let branch = report["branch"]
        .as_str()
        .expect("the work so far is on a branch");
    assert!(project
        .file_on_branch(branch, "calc.sh")
        .contains("$1 + $2"));
    assert!(report["message"]
        .as_str()
        .unwrap()
        .contains("agent.max_turns"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tool_call_budget_stops_the_run() {
    let two_calls = Step::Reply {
        text: None,
        calls: vec![
            ("list_files".into(), "{}".into()),
            ("list_files".into(), "{}".into()),
        ],
        usage: None,
    };
    let (_project, report) = stops_with(
        "budget:tool_calls",
        vec![edit_step(), two_calls],
        "[agent]\nmax_tool_calls = 2\n",
    )
    .await;
    assert_eq!(report["tool_calls"], 2);
    let events = transcript(&report);
    let last = tool_events(&events).pop().unwrap().clone();
    assert!(
        last["result"]
            .as_str()
            .unwrap()
            .contains("budget is used up"),
        "{last}"
    );
}

/// The model's second answer would come ten minutes later, after the
/// run's own 180 s limit (`Project::run`): only the 2 s budget can end the
/// run with a report, and the report says it did. How long the run took
/// is not asserted: a loaded machine may take longer over the rest.
#[tokio::test(flavor = "multi_thread")]
async fn the_time_budget_stops_a_slow_model() {
    let slow = Step::Slow {
        delay: Duration::from_secs(600),
        then: Box::new(Step::finish("late", "late")),
    };
    let project = Project::new();
    let server = ModelServer::start(vec![edit_step(), slow]).await.unwrap();
    let (code, report) = tokio::task::block_in_place(|| {
        project.run(&server, "openai", "[agent]\nmax_seconds = 2\n")
    });
    assert_eq!(report["status"], "failed", "{report:#}");
    assert_eq!(report["reason"], "budget:time", "{report:#}");
    assert_eq!(code, 1);
    assert_eq!(report["turns"], 1);
    assert_eq!(server.left(), 0, "the slow answer was asked for");
    assert_eq!(
        server.requests().len(),
        1,
        "the run ended while the slow answer was still to come"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_input_token_budget_stops_the_run() {
    let (_, report) = stops_with(
        "budget:input_tokens",
        vec![edit_step().with_usage(600, 10), Step::finish("x", "x")],
        "[agent]\nmax_input_tokens = 500\n",
    )
    .await;
    assert_eq!(report["turns"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_output_token_budget_stops_the_run() {
    let (_, report) = stops_with(
        "budget:output_tokens",
        vec![edit_step().with_usage(10, 700), Step::finish("x", "x")],
        "[agent]\nmax_output_tokens = 500\n",
    )
    .await;
    assert_eq!(report["turns"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dollar_budget_stops_the_run_and_the_cost_is_reported() {
    let config = "[agent]\nmax_dollars = 0.5\n\n[model.prices.scripted-model]\ninput_per_mtok = 100.0\noutput_per_mtok = 400.0\n";
    let (_, report) = stops_with(
        "budget:dollars",
        vec![edit_step().with_usage(4000, 500), Step::finish("x", "x")],
        config,
    )
    .await;
    // 4000 × $100/M + 500 × $400/M = $0.40 + $0.20
    let cost = report["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.6).abs() < 1e-9, "{cost}");
}

/// Issue 28: the four counts as each dialect bills them, summed over the
/// run and priced each at its own rate; Anthropic's requests carry their
/// cache breakpoints where its documentation puts them.
#[tokio::test(flavor = "multi_thread")]
async fn the_four_counts_are_reported_and_priced_as_billed() {
    let config = "[model.prices.scripted-model]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\ncache_read_per_mtok = 0.30\ncache_write_per_mtok = 3.75\n";
    for dialect in ["openai", "anthropic"] {
        let project = Project::new();
        let steps = good_script()
            .into_iter()
            .map(|step| step.with_usage(1_000, 100).with_cache(20_000, 2_000))
            .collect();
        let server = ModelServer::start(steps).await.unwrap();
        let (code, report) = tokio::task::block_in_place(|| project.run(&server, dialect, config));
        assert_eq!(code, 0, "{report:#}");
        // Five answers (the finish again at the review), each with the
        // same counts. OpenAI writes its cache at no charge: no writes.
        let written = if dialect == "anthropic" { 10_000 } else { 0 };
        assert_eq!(
            report["usage"],
            json!({
                "input_tokens": 5_000,
                "output_tokens": 500,
                "cache_read_tokens": 100_000,
                "cache_write_tokens": written,
            }),
            "{dialect}"
        );
        // 5,000 × $3 + 500 × $15 + 100,000 × $0.30 + writes × $3.75, per
        // million: $0.015 + $0.0075 + $0.030 (+ $0.0375).
        let expected = if dialect == "anthropic" { 0.09 } else { 0.0525 };
        let cost = report["cost_usd"].as_f64().unwrap();
        assert!((cost - expected).abs() < 1e-9, "{dialect}: {cost}");
        if dialect == "anthropic" {
            for (n, request) in server.requests().iter().enumerate() {
                let body = &request.body;
                let marked = |v: &Value| v["cache_control"] == json!({"type": "ephemeral"});
                let tools = body["tools"].as_array().unwrap();
                assert!(marked(tools.last().unwrap()), "request {n}: the tools");
                assert_eq!(tools.iter().filter(|t| marked(t)).count(), 1);
                assert!(marked(&body["system"][0]), "request {n}: the system prompt");
                let messages = body["messages"].as_array().unwrap();
                let last_blocks: Vec<bool> = messages
                    .iter()
                    .map(|m| m["content"].as_array().unwrap().iter().any(marked))
                    .collect();
                let tail = messages.len().min(2);
                assert!(
                    last_blocks[messages.len() - tail..].iter().all(|m| *m)
                        && last_blocks[..messages.len() - tail].iter().all(|m| !m),
                    "request {n}: the two latest messages, and no other: {last_blocks:?}"
                );
                let all = body.to_string().matches("\"cache_control\"").count();
                assert!(all <= 4, "request {n}: {all} breakpoints");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_overflowing_context_is_shortened_and_the_run_goes_on() {
    let project = Project::new();
    let big = "head -c 16000 /dev/zero | tr '\\0' x; echo";
    let mut steps: Vec<Step> = (0..4)
        .map(|_| Step::call("bash", json!({"command": big})))
        .collect();
    steps.push(edit_step());
    steps.push(Step::finish("fixed after a lot of output", "Fix add"));
    let server = ModelServer::start(steps).await.unwrap();
    // A model whose window holds about two of those outputs.
    server.limit_context(40_000);
    let (code, report) = tokio::task::block_in_place(|| {
        project.run(&server, "openai", "[agent]\ncontext_tokens = 6000\n")
    });
    assert_eq!(report["status"], "untested", "{report:#}");
    assert_eq!(code, 0);
    let events = transcript(&report);
    assert!(
        events.iter().any(|e| e["event"] == "compacted"),
        "the history was cleared"
    );
    let last = server.requests().pop().unwrap().body.to_string();
    assert!(last.contains("[cleared to keep the conversation within its context budget"));
    assert!(server.requests().iter().all(|r| r.status == 200));
}

/// Issue 28 (3, 4): against an OpenAI-compatible server, each request of
/// a long run extends the one before it unchanged — the same tools, the
/// same messages, one turn more — until a clearing, which turns old
/// outputs into notes in one batch; then the requests extend again.
#[tokio::test(flavor = "multi_thread")]
async fn each_request_extends_the_last_until_a_batch_clearing() {
    let project = Project::new();
    let big = "head -c 12000 /dev/zero | tr '\\0' y; echo";
    let mut steps: Vec<Step> = (0..40)
        .map(|_| Step::call("bash", json!({"command": big})))
        .collect();
    steps.push(edit_step());
    steps.push(Step::finish("fixed after a lot of output", "Fix add"));
    let server = ModelServer::start(steps).await.unwrap();
    let (code, report) = tokio::task::block_in_place(|| {
        project.run(
            &server,
            "openai",
            "[agent]\ncontext_tokens = 20000\nmax_turns = 60\n",
        )
    });
    assert_eq!(code, 0, "{report:#}");
    let requests = server.requests();
    // And the review turn.
    assert_eq!(requests.len(), 43);
    let mut clearings = Vec::new();
    for (n, pair) in requests.windows(2).enumerate() {
        let (this, next) = (&pair[0].body, &pair[1].body);
        assert_eq!(
            this["tools"], next["tools"],
            "request {n}: the tools changed"
        );
        assert_eq!(this["model"], next["model"]);
        let (a, b) = (
            this["messages"].as_array().unwrap(),
            next["messages"].as_array().unwrap(),
        );
        assert!(b.len() > a.len(), "request {n}: no turn added");
        if b[..a.len()] == a[..] {
            continue;
        }
        // A clearing: what changed are tool outputs, each now a note.
        for (old, new) in a.iter().zip(b) {
            if old != new {
                assert_eq!(old["role"], "tool", "request {n}: {old} changed");
                assert!(new["content"]
                    .as_str()
                    .unwrap()
                    .starts_with("[cleared to keep the conversation"));
            }
        }
        clearings.push(n + 1);
    }
    let compacted = transcript(&report)
        .iter()
        .filter(|e| e["event"] == "compacted")
        .count();
    assert_eq!(compacted, clearings.len(), "{clearings:?}");
    // 40 outputs of about 3,000 tokens in a 20,000-token budget: cleared
    // every few turns, not every turn.
    assert!(
        (2..=12).contains(&clearings.len()),
        "cleared before requests {clearings:?}"
    );
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
async fn no_file_tool_reaches_a_host_file() {
    let project = Project::new();
    let host = project.root.path().join("host-secret.txt");
    std::fs::write(&host, "HOST SECRET\n").unwrap();
    // Planted in the repository: a link to the host file and to its directory.
    let repo = project.repo();
    std::os::unix::fs::symlink(&host, repo.join("planted")).unwrap();
    std::os::unix::fs::symlink(project.root.path(), repo.join("planted-dir")).unwrap();
    {
        let git = git2::Repository::open(&repo).unwrap();
        let mut index = git.index().unwrap();
        index.add_path(Path::new("planted")).unwrap();
        index.add_path(Path::new("planted-dir")).unwrap();
        index.write().unwrap();
        let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("Dev", "dev@example.invalid").unwrap();
        let parent = git.head().unwrap().peel_to_commit().unwrap();
        git.commit(Some("HEAD"), &sig, &sig, "links", &tree, &[&parent])
            .unwrap();
    }
    let attempts = [
        ("read_file", json!({"path": "planted"})),
        ("read_file", json!({"path": "../host-secret.txt"})),
        ("read_file", json!({"path": host.to_str().unwrap()})),
        ("read_file", json!({"path": "planted-dir/host-secret.txt"})),
        ("write_file", json!({"path": "planted", "content": "pwned"})),
        (
            "write_file",
            json!({"path": "planted-dir/new.txt", "content": "pwned"}),
        ),
        (
            "edit_file",
            json!({"path": "planted", "old_string": "HOST", "new_string": "PWNED"}),
        ),
        (
            "edit_file",
            json!({"path": "../host-secret.txt", "old_string": "HOST", "new_string": "PWNED"}),
        ),
        ("list_files", json!({"path": "planted-dir"})),
        ("list_files", json!({"path": "/etc"})),
        ("glob", json!({"pattern": "planted-dir/*"})),
    ];
    let mut steps: Vec<Step> = attempts
        .iter()
        .map(|(t, a)| Step::call(t, a.clone()))
        .collect();
    steps.push(Step::finish("nothing", "nothing"));
    let server = ModelServer::start(steps).await.unwrap();
    let (_, report) = tokio::task::block_in_place(|| project.run(&server, "openai", QUICK_RETRIES));
    assert_eq!(report["reason"], "no_changes", "{report:#}");
    let events = transcript(&report);
    let tools = tool_events(&events);
    for (event, (tool, args)) in tools.iter().zip(&attempts) {
        let result = event["result"].as_str().unwrap();
        if *tool == "glob" {
            assert!(
                result.starts_with("no file matches"),
                "glob follows no link: {result}"
            );
        } else {
            assert_eq!(event["is_error"], true, "{tool} {args}: {result}");
            assert!(result.contains("refused"), "{tool} {args}: {result}");
        }
    }
    assert_eq!(std::fs::read_to_string(&host).unwrap(), "HOST SECRET\n");
    assert!(!project.root.path().join("new.txt").exists());
    let raw = std::fs::read_to_string(report["transcript"].as_str().unwrap()).unwrap();
    assert!(
        !raw.contains("HOST SECRET"),
        "no host file content reached the model"
    );
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

#[tokio::test(flavor = "multi_thread")]
async fn run_goes_through_the_gate_before_it_commits() {
    let project = Project::new();
    let steps = vec![
        Step::call(
            "write_file",
            json!({"path": ".github/workflows/ci.yml", "content": "on: push\n"}),
        ),
        Step::finish("added CI", "Add CI"),
    ];
    let server = ModelServer::start(steps).await.unwrap();
    let (code, report) =
        tokio::task::block_in_place(|| project.run(&server, "openai", QUICK_RETRIES));
    assert_eq!(code, 1);
    assert_eq!(report["reason"], "sensitive", "{report:#}");
    let message = report["message"].as_str().unwrap();
    assert!(message.contains(".github/workflows/ci.yml"), "{message}");
    // Held, not lost: committed at a ref of its own, on no branch, and
    // the report says how to take it.
    assert!(report["branch"].is_null(), "no branch holds it: {report:#}");
    let held = report["held"]
        .as_str()
        .unwrap_or_else(|| panic!("the held change's ref: {report:#}"));
    assert!(
        held.starts_with("refs/forgehand/held/forgehand/run-"),
        "{held}"
    );
    assert!(
        message.contains(&format!("`git branch <name> {held}` takes it as it is"))
            && message.contains("--allow-sensitive commits it on a branch next time"),
        "{message}"
    );
    let repo = git2::Repository::open(project.repo()).unwrap();
    let kept = repo.find_reference(held).unwrap().peel_to_commit().unwrap();
    assert_eq!(kept.id().to_string(), report["commit"].as_str().unwrap());
    assert!(kept
        .tree()
        .unwrap()
        .get_path(Path::new(".github/workflows/ci.yml"))
        .is_ok());
    let branches: Vec<String> = repo
        .branches(Some(git2::BranchType::Local))
        .unwrap()
        .map(|b| b.unwrap().0.name().unwrap().unwrap().to_owned())
        .collect();
    assert_eq!(branches, ["main"], "no branch was made");
    let server = ModelServer::start(vec![
        Step::call("write_file", json!({"path": "notes.txt", "content": "token = \"ghp_0123456789abcdefghijklmnopqrstuvwxyzAB\"\n"})),
        Step::finish("notes", "Notes"),
    ])
    .await
    .unwrap();
    let (_, report) = tokio::task::block_in_place(|| project.run(&server, "openai", QUICK_RETRIES));
    assert_eq!(report["reason"], "secret", "{report:#}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains("`notes.txt`:1") && !message.contains("ghp_"),
        "{message}"
    );
}

/// A TCP listener on 127.0.0.1 that counts the connections made to it and
/// closes each at once.
struct Canary {
    url: String,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Canary {
    fn start() -> Canary {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(stream);
            }
        });
        Canary { url, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forgehand_toml_in_the_repository_does_not_configure_the_run() {
    let project = Project::new();
    let canary = Canary::start();
    let planted = project.root.path().join("transcripts-the-repository-chose");
    // The repository, not the operator, wrote this file; `forgehand run`
    // is started inside the repository.
    project.commit(
        "forgehand.toml",
        &format!(
            "[model]\nbase_url = \"{}/v1\"\n[agent]\ntranscript_dir = \"{}\"\n",
            canary.url,
            planted.display()
        ),
    );
    let cwd = project.root.path();
    let out = tokio::task::block_in_place(|| {
        Command::new(forgehand_binary())
            .args(["run", "--json", "--backend", "namespace", "--repo", "."])
            .args(["--task", "Fix add in calc.sh"])
            .current_dir(project.repo())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
            .env("FORGEHAND_MODEL__API_KEY", API_KEY)
            .env("FORGEHAND_MODEL__MAX_RETRIES", "0")
            .env("HOME", cwd.join("home"))
            .env("FORGEHAND_GIT__WORK_DIR", cwd.join("jobs"))
            .env("FORGEHAND_AGENT__TRANSCRIPT_DIR", cwd.join("transcripts"))
            .output()
            .expect("the forgehand binary runs")
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(
        canary.hits(),
        0,
        "the repository's model server was contacted: {report:#}"
    );
    assert!(
        !planted.exists(),
        "the transcript went where the repository said"
    );
    assert!(
        report["config"].is_null(),
        "no configuration file was read: {report:#}"
    );
    // Named by the operator, the same file is read, and the report says so.
    let out = tokio::task::block_in_place(|| {
        Command::new(forgehand_binary())
            .args(["run", "--backend", "namespace", "--repo", "."])
            .args(["--task", "Fix add in calc.sh", "--config", "forgehand.toml"])
            .current_dir(project.repo())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
            .env("FORGEHAND_MODEL__MAX_RETRIES", "0")
            .env("FORGEHAND_GIT__WORK_DIR", cwd.join("jobs"))
            .env("FORGEHAND_SERVER__DATA_DIR", cwd.join("data"))
            .output()
            .expect("the forgehand binary runs")
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("configuration from forgehand.toml (--config)"),
        "{stderr}"
    );
    assert!(canary.hits() > 0, "the file named with --config is read");
}

/// A prompt-injected agent turns on the host: a FIFO fed from inside the
/// sandbox for the host's read_file and write_file, and the disk filled
/// from inside. The run goes on (each tool call answers at once), the
/// writes stop at the working copy's file system, and nothing of it is
/// committed.
#[tokio::test(flavor = "multi_thread")]
async fn the_host_is_not_held_by_a_fifo_nor_filled_by_the_agent() {
    let project = Project::new();
    let steps = vec![
        // A process inside keeps a FIFO fed, for ever.
        Step::call(
            "bash",
            json!({"command": "mkfifo feed && (nohup sh -c 'yes >feed' >/dev/null 2>&1 &) && echo started"}),
        ),
        Step::call("read_file", json!({"path": "feed"})),
        Step::call("write_file", json!({"path": "feed", "content": "x"})),
        Step::call(
            "edit_file",
            json!({"path": "feed", "old_string": "y", "new_string": "n"}),
        ),
        Step::call(
            "bash",
            json!({"command": "dd if=/dev/zero of=/workspace/fill bs=1M count=300 2>&1 | grep -E 'No space|copied'; dd if=/dev/zero of=/tmp/fill bs=1M count=300 2>&1 | grep -E 'No space|copied'; rm -f /workspace/fill"}),
        ),
        Step::finish("nothing", "nothing"),
    ];
    let server = ModelServer::start(steps).await.unwrap();
    let config = format!("{QUICK_RETRIES}\n[sandbox]\ndisk_mib = 64\ntmp_mib = 64\n");
    let (_, report) = tokio::task::block_in_place(|| project.run(&server, "openai", &config));
    let events = transcript(&report);
    let tools = tool_events(&events);
    // And the finish again at the review: the review read the tree with
    // the FIFO in it, and nothing hung.
    assert_eq!(tools.len(), 7, "every call answered: {report:#}");
    for event in &tools[1..4] {
        let result = event["result"].as_str().unwrap();
        assert_eq!(event["is_error"], true, "{result}");
        assert!(result.contains("not a regular file"), "{result}");
    }
    let filled = tools[4]["result"].as_str().unwrap();
    assert_eq!(
        filled.matches("No space left on device").count(),
        2,
        "/workspace and /tmp stop at their sizes: {filled}"
    );
    // The FIFO cannot be committed; the gate leaves it out.
    assert_eq!(report["reason"], "no_changes", "{report:#}");
}
