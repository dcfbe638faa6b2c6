//! The cases: every real example in the shared test data, and the built
//! cases the examples lack.

use forgehand_tests::testdata;
use serde_json::{json, Value};

use super::expect::{gitea_event, gitea_forge, job_base, login, text, with_task, Expect};
use super::send::{Planned, Via};
use super::{BOT, GITEA_FILES, GITHUB_FILES, LABEL};

// ---- the real examples -----------------------------------------------------------

pub(crate) fn github_examples() -> Vec<Planned> {
    let files = testdata::github_examples();
    assert_eq!(
        files.len(),
        GITHUB_FILES,
        "GitHub examples found: {files:?}"
    );
    files
        .iter()
        .map(|rel| {
            let body = testdata::github_example(rel);
            serde_json::from_slice::<Value>(&body).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let ctx = format!("github {rel}");
            Planned {
                expect: stated(&ctx),
                ctx,
                via: Via::Github,
                body,
            }
        })
        .collect()
}

pub(crate) fn gitea_examples() -> Vec<Planned> {
    let files = testdata::gitea_examples();
    assert_eq!(
        files.len(),
        GITEA_FILES,
        "Gitea/Forgejo examples found: {files:?}"
    );
    // Some woodpecker-gitea and woodpecker-forgejo examples are the same
    // file. Gitea and Forgejo share their secrets, so the second one sent
    // is the first one's signed body again: a replay.
    let mut first_with_body = std::collections::HashMap::new();
    files
        .iter()
        .map(|rel| {
            let event = gitea_event(rel);
            let forge = gitea_forge(rel);
            let body = testdata::gitea_example(rel);
            serde_json::from_slice::<Value>(&body).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let ctx = format!("{forge} {rel} ({event})");
            let expect = stated(&ctx);
            // The data says which are replays; the bytes must agree.
            assert_eq!(
                expect.replay_of,
                first_with_body.get(&body).cloned(),
                "{ctx}: expected.jsonl's replay_of"
            );
            first_with_body.entry(body.clone()).or_insert(ctx.clone());
            Planned {
                ctx,
                via: if forge == "forgejo" {
                    Via::Forgejo
                } else {
                    Via::Gitea
                },
                expect,
                body,
            }
        })
        .collect()
}

/// What `payload` (as a case names it) must become, as
/// `expected.jsonl` states it: one line per real example, written by
/// reading the forges' documentation against the payload, never worked
/// out by rules here (a copy of the trigger's rules would agree with the
/// trigger's mistakes).
fn stated(payload: &str) -> Expect {
    static STATED: std::sync::LazyLock<std::collections::HashMap<String, Expect>> =
        std::sync::LazyLock::new(|| {
            #[derive(serde::Deserialize)]
            struct Line {
                payload: String,
                expect: Expect,
            }
            include_str!("expected.jsonl")
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    let line: Line = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                    (line.payload, line.expect)
                })
                .collect()
        });
    STATED.get(payload).cloned().unwrap_or_else(|| {
        panic!("{payload}: no outcome stated in tests/tests/payloads_over_http/expected.jsonl")
    })
}

// ---- cases the examples lack ------------------------------------------------------

/// An issue event (`issues`) that must start a job of `kind` with `task`.
#[allow(clippy::too_many_arguments)]
fn issue_job(
    forge: &'static str,
    event_name: &str,
    v: &Value,
    by: &str,
    task: Value,
    kind: &str,
    names: Option<String>,
    detail: Option<String>,
) -> Expect {
    let number = v["issue"]["number"].as_u64().expect("an issue number");
    let mut e = Expect::typed(
        forge,
        "issues",
        event_name.to_owned(),
        v,
        Some(by.to_owned()),
    );
    e.names = names.or_else(|| detail.clone());
    e.detail = detail;
    e.job = Some((
        with_task(job_base(forge, v, number, false, by), task),
        kind.into(),
    ));
    e
}

/// Every real created comment of the examples, its text kept and
/// `/forgehand fix` written on a line after it: each starts a `fix` on
/// its issue or pull request, asked by the comment's sender.
fn commands_in_real_comments() -> Vec<Planned> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let github: Vec<String> = testdata::github_examples()
        .into_iter()
        .filter(|rel| rel.starts_with("issue_comment/created."))
        .collect();
    for rel in &github {
        let mut v = github_example_json(rel);
        let real = v["comment"]["body"].as_str().unwrap_or_default().to_owned();
        v["comment"]["body"] = json!(format!("{real}\n\n/forgehand fix"));
        if !seen.insert(bytes(&v)) {
            continue;
        }
        let on_pr = v["issue"].get("pull_request").is_some();
        let task = json!({ "type": "command", "command": { "name": "fix", "instructions": null } });
        let e = commanded("github", &v, on_pr, task, "command.fix", "command:fix");
        out.push(plan(
            &format!("github {rel}, with `/forgehand fix` after its text"),
            Via::Github,
            &v,
            e,
        ));
    }
    for (file, on_pr) in [
        ("issue_comment_created.json", false),
        ("pull_request_comment_created.json", true),
    ] {
        let mut v = gitea_example_json(&format!("drone-go-scm/{file}"));
        let real = v["comment"]["body"].as_str().unwrap_or_default().to_owned();
        v["comment"]["body"] = json!(format!("{real}\n\n/forgehand fix"));
        let task = json!({ "type": "command", "command": { "name": "fix", "instructions": null } });
        let e = commanded("gitea", &v, on_pr, task, "command.fix", "command:fix");
        out.push(plan(
            &format!("gitea drone-go-scm/{file}, with `/forgehand fix` after its text"),
            Via::Gitea,
            &v,
            e,
        ));
    }
    assert!(
        out.len() >= 3,
        "real comments with a command: {}",
        out.len()
    );
    out
}

fn github_example_json(rel: &str) -> Value {
    testdata::json(&format!("{}/{rel}", testdata::GITHUB_EXAMPLES))
}

fn gitea_example_json(rel: &str) -> Value {
    testdata::json(&format!("{}/{rel}", testdata::GITEA_EXAMPLES))
}

fn github_comment(body: &str, on_pull_request: bool) -> Value {
    let mut v = github_example_json("issue_comment/created.1.json");
    assert!(
        v["issue"].get("pull_request").is_none(),
        "the example is an issue comment"
    );
    if on_pull_request {
        v["issue"]["pull_request"] = json!({
            "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1",
            "html_url": "https://github.com/Codertocat/Hello-World/pull/1",
            "diff_url": "https://github.com/Codertocat/Hello-World/pull/1.diff",
            "patch_url": "https://github.com/Codertocat/Hello-World/pull/1.patch",
        });
    }
    v["comment"]["body"] = json!(body);
    v
}

fn gitea_comment(file: &str, body: &str) -> Value {
    let mut v = gitea_example_json(&format!("drone-go-scm/{file}"));
    v["comment"]["body"] = json!(body);
    v
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("serialisable")
}

/// The expectation for a created comment, from the raw payload as above,
/// before saying what it asks the bot.
fn comment_expect(forge: &'static str, v: &Value) -> Expect {
    let sender = if forge == "github" {
        text(v, "/sender/login")
    } else {
        login(v, "/sender")
    };
    Expect::typed(
        forge,
        "issue_comment",
        "issue_comment.created".into(),
        v,
        sender,
    )
}

/// A comment that gives the bot `task`, whose job is `kind` and whose
/// delivery's detail is `detail`.
fn commanded(
    forge: &'static str,
    v: &Value,
    on_pr: bool,
    task: Value,
    kind: &str,
    detail: &str,
) -> Expect {
    let mut e = comment_expect(forge, v);
    let number = e.target.expect("a comment is on an issue");
    let by = e.sender.clone().expect("a sender");
    let mut task = task;
    task["comment_id"] = v["comment"]["id"].clone();
    e.job = Some((
        with_task(job_base(forge, v, number, on_pr, &by), task),
        kind.to_owned(),
    ));
    e.detail = Some(detail.to_owned());
    e
}

/// A comment that must be ignored, with a reason saying `why`.
fn ignored_comment(forge: &'static str, v: &Value, why: &'static str) -> Expect {
    let mut e = comment_expect(forge, v);
    e.reason = Some(why.into());
    e
}

fn plan(ctx: &str, via: Via, v: &Value, expect: Expect) -> Planned {
    Planned {
        ctx: ctx.to_owned(),
        via,
        body: bytes(v),
        expect,
    }
}

pub(crate) fn built_cases() -> Vec<Planned> {
    let mut cases = Vec::new();

    // A comment on a pull request: GitHub sends it as `issue_comment`
    // with `issue.pull_request` set.
    let v = github_comment("/forgehand retry", true);
    let task = json!({ "type": "command", "command": { "name": "retry" } });
    let e = commanded("github", &v, true, task, "command.retry", "command:retry");
    cases.push(plan(
        "github PR comment `/forgehand retry`",
        Via::Github,
        &v,
        e,
    ));

    // A request in plain words, on an issue.
    let v = github_comment(&format!("@{BOT} please add tests"), false);
    let task = json!({ "type": "request", "text": "please add tests" });
    let e = commanded("github", &v, false, task, "request", "mention");
    cases.push(plan(
        "github issue comment `@bot please add tests`",
        Via::Github,
        &v,
        e,
    ));

    // A command inside a longer comment, its instructions on the next line.
    let v = github_comment(
        "Thanks!\n\n/forgehand fix\nkeep the public API\n\nCheers",
        false,
    );
    let task = json!({ "type": "command", "command": { "name": "fix", "instructions": "keep the public API" } });
    let e = commanded("github", &v, false, task, "command.fix", "command:fix");
    cases.push(plan(
        "github issue comment `/forgehand fix` + instructions",
        Via::Github,
        &v,
        e,
    ));

    // An issue assigned to the bot.
    let mut v = github_example_json("issues/assigned.1.json");
    v["assignee"]["login"] = json!(BOT);
    v["issue"]["assignee"]["login"] = json!(BOT);
    v["issue"]["assignees"] = json!([v["assignee"].clone()]);
    let e = issue_job(
        "github",
        "issues.assigned",
        &v,
        &text(&v, "/sender/login").unwrap(),
        json!({ "type": "assigned" }),
        "assigned",
        Some(format!("assignee:{BOT}")),
        None,
    );
    cases.push(plan("github issue assigned to the bot", Via::Github, &v, e));

    // Gitea: `/forgehand fix` on an issue, and on a pull request.
    let v = gitea_comment("issue_comment_created.json", "/forgehand fix");
    let task = json!({ "type": "command", "command": { "name": "fix", "instructions": null } });
    let e = commanded("gitea", &v, false, task, "command.fix", "command:fix");
    cases.push(plan(
        "gitea issue comment `/forgehand fix`",
        Via::Gitea,
        &v,
        e,
    ));

    let v = gitea_comment(
        "pull_request_comment_created.json",
        "/forgehand fix keep it small",
    );
    let task =
        json!({ "type": "command", "command": { "name": "fix", "instructions": "keep it small" } });
    let e = commanded("gitea", &v, true, task, "command.fix", "command:fix");
    cases.push(plan(
        "gitea PR comment `/forgehand fix keep it small`",
        Via::Gitea,
        &v,
        e,
    ));

    // Gitea says only that an issue's labels changed; the new set has the
    // bot's label. And an issue whose assignees now include the bot.
    let mut v = gitea_example_json("drone-go-scm/issues_opened.json");
    v["action"] = json!("label_updated");
    v["issue"]["labels"] = json!([{ "id": 1, "name": LABEL, "color": "ee0701" }]);
    let e = issue_job(
        "gitea",
        "issues.labeled",
        &v,
        &login(&v, "/sender").unwrap(),
        json!({ "type": "labeled", "label": LABEL }),
        "labeled",
        None,
        Some(format!("label:{LABEL}")),
    );
    cases.push(plan(
        "gitea issue labeled with the bot's label",
        Via::Gitea,
        &v,
        e,
    ));

    let mut v = gitea_example_json("drone-go-scm/issues_opened.json");
    v["action"] = json!("assigned");
    v["issue"]["assignees"] = json!([{ "id": 9, "login": BOT, "username": BOT }]);
    let e = issue_job(
        "gitea",
        "issues.assigned",
        &v,
        &login(&v, "/sender").unwrap(),
        json!({ "type": "assigned" }),
        "assigned",
        None,
        None,
    );
    cases.push(plan("gitea issue assigned to the bot", Via::Gitea, &v, e));

    // Commands inside real comments: each real comment example as the
    // forge sent it (its own text kept, its issue or pull request, its
    // sender), with a command on a line of its own after the text.
    cases.extend(commands_in_real_comments());

    // Forgejo: the delivery and its job are Forgejo's.
    let v = gitea_comment(
        "issue_comment_created.json",
        &format!("@{BOT} plan split the parser"),
    );
    let task = json!({ "type": "command", "command": { "name": "plan", "instructions": "split the parser" } });
    let e = commanded("forgejo", &v, false, task, "command.plan", "command:plan");
    cases.push(plan(
        "forgejo issue comment `@bot plan …`",
        Via::Forgejo,
        &v,
        e,
    ));

    // The bot's own comments never start work, whatever they say: no loops.
    for (ctx, handle, kind) in [
        (
            "github PR comment by the bot itself",
            BOT.to_owned(),
            "User",
        ),
        (
            "github PR comment by the bot's App",
            format!("{BOT}[bot]"),
            "Bot",
        ),
    ] {
        let mut v = github_comment(&format!("/forgehand fix\n\n@{BOT} please add tests"), true);
        for user in ["/sender", "/comment/user"] {
            let user = v.pointer_mut(user).expect("a user");
            user["login"] = json!(handle);
            user["type"] = json!(kind);
        }
        let e = ignored_comment("github", &v, "bot itself");
        cases.push(plan(ctx, Via::Github, &v, e));
    }
    let mut v = gitea_comment("issue_comment_created.json", "/forgehand fix");
    for user in ["/sender", "/comment/user"] {
        let user = v.pointer_mut(user).expect("a user");
        user["login"] = json!(BOT);
        user["username"] = json!(BOT);
    }
    let e = ignored_comment("gitea", &v, "bot itself");
    cases.push(plan("gitea comment by the bot itself", Via::Gitea, &v, e));

    cases
}
