//! Real webhook payloads from `shared/testdata` (see its README.md) through
//! `parse_delivery`: every file must parse, and every file is checked
//! field by field against a table whose values were read off the JSON.

use forgehand_forge::{parse_delivery, Event, ForgeKind, ParseError};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[path = "../../../tests/src/gitea_events.rs"]
mod gitea_events;
mod tables;

use gitea_events::gitea_event;
use tables::*;

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/testdata");
const GITHUB_DIR: &str = "github/webhook-examples";
const GITEA_DIR: &str = "gitea/webhook-examples";

fn testdata(rel: &str) -> PathBuf {
    let root = Path::new(TESTDATA);
    assert!(
        root.is_dir(),
        "the shared testdata folder is missing: expected it at {} (`<clone>/../shared/testdata`)",
        root.display()
    );
    root.join(rel)
}

fn read(rel: &str) -> Vec<u8> {
    let path = testdata(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A GitHub example body, by its path under `webhook-examples/`.
fn gh(rel: &str) -> Vec<u8> {
    read(&format!("{GITHUB_DIR}/{rel}"))
}

/// A Gitea/Forgejo example body, by its path under `webhook-examples/`.
fn gt(rel: &str) -> Vec<u8> {
    read(&format!("{GITEA_DIR}/{rel}"))
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap()
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// Every `*.json` under `dir` (relative to the testdata root), as paths
/// relative to `dir`, sorted.
fn json_files(dir: &str) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                let rel = path.strip_prefix(root).unwrap();
                out.push(rel.to_str().unwrap().replace('\\', "/"));
            }
        }
    }
    let root = testdata(dir);
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out.sort();
    out
}

fn github(event: &str, body: &[u8]) -> Result<Event, ParseError> {
    parse_delivery(ForgeKind::Github, event, body)
}

fn gitea(event: &str, body: &[u8]) -> Result<Event, ParseError> {
    parse_delivery(ForgeKind::Gitea, event, body)
}

/// The parsed event as JSON (its serde form), for compact field checks.
fn view(parsed: Result<Event, ParseError>) -> Value {
    serde_json::to_value(parsed.expect("parses")).unwrap()
}

fn gitea_kind(rel: &str) -> ForgeKind {
    if rel.starts_with("woodpecker-forgejo/") {
        ForgeKind::Forgejo
    } else {
        ForgeKind::Gitea
    }
}

// ---- 1. every file parses -------------------------------------------------

#[test]
fn every_github_example_parses() {
    let files = json_files(GITHUB_DIR);
    for rel in &files {
        let (event, _) = rel.split_once('/').expect("<event>/<action>.<n>.json");
        if let Err(e) = github(event, &gh(rel)) {
            panic!("github {rel} (X-GitHub-Event: {event}) does not parse: {e}");
        }
    }
    assert_eq!(files.len(), 97, "GitHub examples visited: {files:?}");
}

#[test]
fn every_gitea_example_parses() {
    let files = json_files(GITEA_DIR);
    for rel in &files {
        let event = gitea_event(rel);
        if let Err(e) = parse_delivery(gitea_kind(rel), event, &gt(rel)) {
            panic!("gitea {rel} (X-Gitea-Event: {event}) does not parse: {e}");
        }
        let (dir, file) = rel.split_once('/').unwrap();
        if dir.starts_with("woodpecker-") {
            let hooks = String::from_utf8(gt(&format!("{dir}/hooks.go.txt"))).unwrap();
            let embed = format!("//go:embed {file}");
            assert!(hooks.contains(&embed), "{rel} is not in hooks.go.txt");
        }
    }
    assert_eq!(files.len(), 62, "Gitea/Forgejo examples visited: {files:?}");
}

fn check(kind: ForgeKind, case: &Case, body: &[u8]) {
    let ctx = format!("{} ({})", case.file, case.event);
    let event = parse_delivery(kind, case.event, body).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    assert_eq!(event.name(), case.name, "{ctx}");
    let repo = event.repo().map(|r| r.full_name()).unwrap_or_default();
    let sender = event.sender().map(|s| s.login.clone()).unwrap_or_default();
    let v = serde_json::to_value(&event).unwrap();
    let number = v["issue"]["number"]
        .as_u64()
        .or(v["pull_request"]["number"].as_u64());
    let got = (repo.as_str(), number.unwrap_or(0), sender.as_str());
    assert_eq!(
        got,
        (case.repo, case.number, case.sender),
        "{ctx}: repo, number, sender"
    );
    let (want, prefixes) = expectations(case.more);
    assert_has(&v, &want, &ctx);
    for (ptr, want) in prefixes {
        let got = v.pointer(ptr).and_then(Value::as_str).unwrap_or_default();
        assert!(
            got.starts_with(want),
            "{ctx}: {ptr} is {got:?}, want {want:?}…"
        );
    }
    if let Pr { .. } = case.more {
        let sha = v["pull_request"]["head_sha"].as_str().unwrap_or_default();
        let hex = sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit());
        assert!(hex, "{ctx}: head sha {sha:?}");
        if case.name.ends_with(".merged") || case.name.ends_with(".closed") {
            assert_eq!(v["pull_request"]["state"], "closed", "{ctx}: state");
        }
    }
}

/// Asserts that `got` holds everything in `want`: objects key by key,
/// recursively, anything else by equality.
fn assert_has(got: &Value, want: &Value, at: &str) {
    match want.as_object() {
        Some(want) => {
            for (key, want) in want {
                assert_has(&got[key.as_str()], want, &format!("{at}/{key}"));
            }
        }
        None => assert_eq!(got, want, "{at}"),
    }
}

type Prefixes = Vec<(&'static str, &'static str)>;

/// What the event's serde form must hold, and the JSON pointers whose
/// string must start with a prefix.
#[rustfmt::skip]
fn expectations(more: More) -> (Value, Prefixes) {
    let login = |l: Option<&str>| l.map(|l| json!({ "login": l }));
    match more {
        No => (json!({ "kind": "other" }), vec![]),
        Ping { hook_id } => (json!({ "kind": "ping", "hook_id": hook_id }), vec![("/zen", "")]),
        Issue { is_pr, label, assignee } => (json!({
            "issue": { "is_pull_request": is_pr }, "label": label, "assignee": login(assignee),
        }), vec![]),
        Comment { is_pr, body } => {
            (json!({ "issue": { "is_pull_request": is_pr } }), vec![("/comment/body", body)])
        }
        Review { id, body } => (json!({ "review_id": id }), vec![("/body", body)]),
        Line { body, path, line, reply } => (
            json!({ "path": path, "line": line, "in_reply_to": reply }),
            vec![("/comment/body", body)],
        ),
        Pr { head, base, merged } => (json!({
            "pull_request": { "head_ref": head, "base_ref": base, "merged": merged },
        }), vec![]),
        Install { id, account, repos } => (json!({
            "installation_id": id, "account": account, "repositories": repos,
        }), vec![]),
        InstallRepos { id, account, added, removed } => (json!({
            "installation_id": id, "account": account, "added": added, "removed": removed,
        }), vec![]),
    }
}

/// The tables name every example file exactly once.
fn assert_covers(cases: &[Case], files: &[String]) {
    let named: BTreeSet<&str> = cases.iter().map(|c| c.file).collect();
    assert_eq!(named.len(), cases.len(), "a file is named twice");
    let files: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    assert_eq!(named, files, "the table and the example files differ");
}

#[test]
fn github_examples_field_by_field() {
    let cases = github_cases();
    assert_covers(&cases, &json_files(GITHUB_DIR));
    for case in &cases {
        check(ForgeKind::Github, case, &gh(case.file));
    }
}

#[test]
fn gitea_examples_field_by_field() {
    let cases = gitea_cases();
    assert_covers(&cases, &json_files(GITEA_DIR));
    for case in &cases {
        assert_eq!(case.event, gitea_event(case.file), "{}", case.file);
        check(gitea_kind(case.file), case, &gt(case.file));
    }
}

// ---- 3. GitHub cases the examples lack --------------------------------------

#[test]
fn github_comment_on_a_pull_request() {
    let mut v = json_of(&gh("issue_comment/created.1.json"));
    assert!(v["issue"].get("pull_request").is_none());
    let url = "https://api.github.com/repos/Codertocat/Hello-World/pulls/1";
    v["issue"]["pull_request"] = json!({ "url": url });
    let Event::IssueComment { issue, comment, .. } = github("issue_comment", &bytes(&v)).unwrap()
    else {
        panic!("not an issue comment");
    };
    assert!(issue.is_pull_request);
    assert_eq!((issue.number, comment.id), (1, 492700400));
}

#[test]
fn github_repo_actor_and_issue_fields() {
    let codertocat = json!({ "login": "Codertocat", "id": 21031067, "is_bot": false });
    let want = json!({
        "repo": {
            "owner": "Codertocat", "name": "Hello-World", "private": false,
            "default_branch": "master", "clone_url": "https://github.com/Codertocat/Hello-World.git",
        },
        "sender": codertocat,
        "issue": {
            "title": "Spelling error in the README file", "author": codertocat, "state": "open",
            "labels": ["bug"], "assignees": ["Codertocat"],
        },
    });
    let e = view(github("issues", &gh("issues/opened.1.json")));
    assert_has(&e, &want, "issue");
    let want = json!({ "pull_request": {
        "title": "Update the README with new information.",
        "head_sha": "ec26c3e57ca3a959ca5aad62de7213c562f8c821", "state": "open",
    }});
    let e = view(github("pull_request", &gh("pull_request/opened.1.json")));
    assert_has(&e, &want, "pr");
}

#[test]
fn github_null_bodies_are_empty() {
    let e = view(github("issues", &gh("issues/opened.2.json")));
    assert_eq!(e["issue"]["body"], "");
    let review = gh("pull_request_review/submitted.1.json");
    assert_eq!(json_of(&review)["review"]["body"], Value::Null);
    assert_eq!(view(github("pull_request_review", &review))["body"], "");
}

#[test]
fn github_review_states_in_either_case() {
    let mut v = json_of(&gh("pull_request_review/submitted.1.json"));
    v["review"]["body"] = json!("Looks good");
    for (state, want) in [
        ("APPROVED", "approved"),
        ("approved", "approved"),
        ("CHANGES_REQUESTED", "changes_requested"),
        ("changes_requested", "changes_requested"),
        ("COMMENTED", "commented"),
    ] {
        v["review"]["state"] = json!(state);
        let e = view(github("pull_request_review", &bytes(&v)));
        let expected = json!({ "kind": "review_submitted", "state": want, "body": "Looks good" });
        assert_has(&e, &expected, state);
        assert_eq!(e["pull_request"]["number"], 2);
    }
    v["review"]["state"] = json!("PENDING");
    let e = github("pull_request_review", &bytes(&v)).unwrap();
    assert_eq!(e.name(), "pull_request_review.submitted");
}

#[test]
fn github_merged_pull_request_and_bot_sender() {
    let mut v = json_of(&gh("pull_request/closed.1.json"));
    v["pull_request"]["merged"] = json!(true);
    v["sender"]["type"] = json!("Bot");
    v["sender"]["login"] = json!("forgehand[bot]");
    let want = json!({
        "action": "merged",
        "pull_request": { "merged": true, "state": "closed" },
        "sender": { "login": "forgehand[bot]", "is_bot": true },
    });
    assert_has(&view(github("pull_request", &bytes(&v))), &want, "merged");
}

#[test]
fn github_review_comment_reply_and_line_fallback() {
    let mut v = json_of(&gh("pull_request_review_comment/created.2.json"));
    v["comment"]["in_reply_to_id"] = json!(284312629u64);
    v["comment"]["line"] = Value::Null;
    v["comment"]["original_line"] = json!(7);
    let e = view(github("pull_request_review_comment", &bytes(&v)));
    assert_has(
        &e,
        &json!({ "in_reply_to": 284312629u64, "line": 7 }),
        "reply",
    );
}

// ---- Gitea cases the examples lack -----------------------------------------

#[rustfmt::skip]
const FINE_GRAINED: [(&str, &str, &str); 9] = [
    ("pull_request_comment", "drone-go-scm/pull_request_comment_created.json", "issue_comment.created"),
    ("pull_request_review_approved", "woodpecker-gitea/HookPullRequestReviewAck.json", "review.approved"),
    ("pull_request_review_rejected", "woodpecker-gitea/HookPullRequestReviewDeny.json", "review.changes_requested"),
    ("pull_request_review_comment", "woodpecker-gitea/HookPullRequestReviewComment.json", "review.commented"),
    ("pull_request_sync", "woodpecker-gitea/HookPullRequestUpdated.json", "pull_request.synchronize"),
    ("pull_request_label", "woodpecker-gitea/HookPullRequestAddLabel.json", "pull_request.labeled"),
    ("pull_request_assign", "woodpecker-gitea/HookPullRequestAssigneesAdded.json", "pull_request.assigned"),
    ("pull_request_review_request", "woodpecker-gitea/HookPullRequestAddReviewRequest.json", "pull_request.review_requested"),
    ("pull_request_milestone", "woodpecker-gitea/HookPullRequestAddMile.json", "pull_request_milestone.milestoned"),
];

#[test]
fn gitea_fine_grained_event_names() {
    for (event, file, name) in FINE_GRAINED {
        let parsed = parse_delivery(ForgeKind::Forgejo, event, &gt(file)).unwrap();
        assert_eq!(parsed.name(), name, "{event}");
    }
    let body = gt("drone-go-scm/pull_request_comment_created.json");
    let want = json!({ "issue": { "is_pull_request": true }, "comment": { "body": "run gofmt" } });
    assert_has(
        &view(gitea("pull_request_comment", &body)),
        &want,
        "pr comment",
    );
}

#[test]
fn gitea_issue_label_actions_and_is_pull() {
    let mut v = json_of(&gt("drone-go-scm/issues_opened.json"));
    v["issue"]["labels"] = json!([{ "id": 1, "name": "forgehand", "color": "ee0701" }]);
    for (action, event, name) in [
        ("label_updated", "issues", "issues.labeled"),
        ("label_cleared", "issue_label", "issues.unlabeled"),
        ("assigned", "issue_assign", "issues.assigned"),
    ] {
        v["action"] = json!(action);
        let e = gitea(event, &bytes(&v)).unwrap();
        assert_eq!(e.name(), name);
        // Gitea does not say which label or assignee: the issue has the set.
        let want = json!({
            "label": null, "assignee": null,
            "issue": { "labels": ["forgehand"], "is_pull_request": false },
        });
        assert_has(&serde_json::to_value(&e).unwrap(), &want, action);
    }
    v["action"] = json!("milestoned");
    let e = gitea("issue_milestone", &bytes(&v)).unwrap();
    assert_eq!(e.name(), "issue_milestone.milestoned");
    let mut v = json_of(&gt("drone-go-scm/issue_comment_created.json"));
    v["is_pull"] = json!(true);
    let e = view(gitea("issue_comment", &bytes(&v)));
    assert_eq!(
        e["issue"]["is_pull_request"], true,
        "is_pull alone marks a PR"
    );
}

#[test]
fn gitea_users_by_login_or_username() {
    let mut v = json_of(&gt("drone-go-scm/issues_opened.json"));
    for drop in ["login", "username"] {
        let mut v = v.clone();
        for user in ["/sender", "/issue/user", "/repository/owner"] {
            let user = v.pointer_mut(user).and_then(Value::as_object_mut).unwrap();
            user.remove(drop);
        }
        let unknwon = json!({ "login": "unknwon", "id": 1, "is_bot": false });
        let want = json!({ "sender": unknwon, "issue": { "author": unknwon } });
        let e = view(gitea("issues", &bytes(&v)));
        assert_has(&e, &want, drop);
        assert_eq!(e["repo"]["owner"], "gogits", "without {drop}");
    }
    // Gitea's ghost user has id -1, and keeps it: not a made-up 0.
    v["sender"] = json!({ "id": -1, "login": "Ghost", "username": "Ghost" });
    let e = view(gitea("issues", &bytes(&v)));
    assert_eq!(
        e["sender"],
        json!({ "login": "Ghost", "id": -1, "is_bot": false })
    );
}

#[test]
fn gitea_repo_and_pull_request_fields() {
    let body = gt("drone-go-scm/pull_request_opened.json");
    let want = json!({
        "repo": {
            "owner": "jcitizen", "name": "my-repo", "private": false, "default_branch": "master",
            "clone_url": "https://try.gitea.io/jcitizen/my-repo.git",
        },
        "sender": { "login": "jcitizen", "id": 6641, "is_bot": false },
        "pull_request": {
            "title": "Add License File", "author": { "login": "jcitizen" }, "state": "open",
            "head_sha": "2eba238e33607c1fa49253182e9fff42baafa1eb",
        },
    });
    assert_has(&view(gitea("pull_request", &body)), &want, "pr");
    // Older Gitea names the branches `head_branch`/`base_branch`.
    let mut v = json_of(&body);
    let pr = v["pull_request"].as_object_mut().unwrap();
    pr.remove("head");
    pr.remove("base");
    pr.insert("head_branch".into(), json!("feature"));
    pr.insert("base_branch".into(), json!("master"));
    let want = json!({ "head_ref": "feature", "base_ref": "master", "head_sha": null });
    let e = view(gitea("pull_request", &bytes(&v)));
    assert_has(&e["pull_request"], &want, "branches");
}

// ---- 4. negative cases -------------------------------------------------------

fn is_json_error(parsed: Result<Event, ParseError>) -> bool {
    matches!(parsed, Err(ParseError::Json(_)))
}

#[test]
fn bodies_that_are_not_json_are_refused() {
    let bodies: [&[u8]; 4] = [b"not json", b"", b"{\"action\": \"opened\"", b"\xff\xfe"];
    for body in bodies {
        for event in ["issues", "push", "ping", "whatever"] {
            assert!(is_json_error(github(event, body)), "github {event}");
            assert!(is_json_error(gitea(event, body)), "gitea {event}");
        }
    }
}

#[rustfmt::skip]
const GITHUB_KNOWN: [&str; 7] = [
    "issues", "issue_comment", "pull_request", "pull_request_review",
    "pull_request_review_comment", "installation", "installation_repositories",
];
#[rustfmt::skip]
const GITEA_KNOWN: [&str; 7] = [
    "issues", "issue_comment", "pull_request", "pull_request_approved",
    "pull_request_rejected", "pull_request_comment", "pull_request_review_approved",
];

#[test]
fn known_events_missing_their_payload_are_refused() {
    for event in GITHUB_KNOWN {
        assert!(github(event, b"{}").is_err(), "github {event} {{}}");
    }
    for event in GITEA_KNOWN {
        assert!(gitea(event, b"{}").is_err(), "gitea {event} {{}}");
    }
    let opened = br#"{"action": "opened"}"#;
    assert!(matches!(
        github("issues", b"{}"),
        Err(ParseError::Missing("action"))
    ));
    assert!(
        is_json_error(github("issues", opened)),
        "issues without issue"
    );
    assert!(
        is_json_error(gitea("issues", opened)),
        "issues without issue"
    );
    let bare_repo = br#"{"action": "closed", "repository": {}}"#;
    assert!(github("pull_request", bare_repo).is_err());
}

#[test]
fn unknown_events_are_other() {
    let other = |event: &str, action: Option<&str>| Event::Other {
        event: event.into(),
        action: action.map(Into::into),
    };
    let created = br#"{"action": "created", "secret": "x"}"#;
    assert_eq!(
        github("star", created).unwrap(),
        other("star", Some("created"))
    );
    assert_eq!(github("fork", b"{}").unwrap(), other("fork", None));
    assert_eq!(
        gitea("wiki", created).unwrap(),
        other("wiki", Some("created"))
    );
    assert_eq!(gitea("ping", b"{}").unwrap(), other("ping", None));
    let push = gt("drone-go-scm/push.json");
    assert_eq!(gitea("push", &push).unwrap(), other("push", None));
}
