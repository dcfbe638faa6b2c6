//! The cases: every real example in the shared test data, and the built
//! cases the examples lack.

use forgehand_tests::testdata;
use serde_json::{json, Value};

use super::expect::{
    gitea_event, gitea_expect, gitea_forge, github_expect, job_base, login, text, with_task, Expect,
};
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
            let (event, _) = rel.split_once('/').expect("<event>/<action>.<n>.json");
            let body = testdata::github_example(rel);
            let v: Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{rel}: {e}"));
            Planned {
                ctx: format!("github {rel}"),
                via: Via::Github,
                expect: github_expect(event, &v),
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
            let v: Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let ctx = format!("{forge} {rel} ({event})");
            let mut expect = gitea_expect(forge, event, &v);
            expect.replay_of = first_with_body.get(&body).cloned();
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

// ---- cases the examples lack ------------------------------------------------------

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
    e.reason = Some(why);
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
    let e = github_expect("issues", &v);
    assert!(e.job.is_some(), "assigned to the bot");
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
    let e = gitea_expect("gitea", "issues", &v);
    assert!(e.job.is_some(), "labeled with the bot's label");
    cases.push(plan(
        "gitea issue labeled with the bot's label",
        Via::Gitea,
        &v,
        e,
    ));

    let mut v = gitea_example_json("drone-go-scm/issues_opened.json");
    v["action"] = json!("assigned");
    v["issue"]["assignees"] = json!([{ "id": 9, "login": BOT, "username": BOT }]);
    let e = gitea_expect("gitea", "issues", &v);
    assert!(e.job.is_some(), "assigned to the bot");
    cases.push(plan("gitea issue assigned to the bot", Via::Gitea, &v, e));

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
