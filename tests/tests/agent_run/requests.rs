//! What the model is sent and what it costs (issue 28): the four counts
//! as billed, requests that extend each other between batch clearings,
//! edits checked as they are made, and the text tool mode.

use super::*;

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
