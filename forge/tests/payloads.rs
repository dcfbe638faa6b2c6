//! Real webhook payloads from `shared/testdata` (see its README.md) through
//! `parse_delivery`: every file must parse, and every file is checked
//! field by field against a table whose values were read off the JSON.

use forgehand_forge::{parse_delivery, Event, ForgeKind, ParseError};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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

/// The `X-Gitea-Event` header each example goes with. The woodpecker
/// `hooks.go.txt` files only name the payloads; the header follows from
/// the name (reviews are `pull_request_approved`/`_rejected`/`_comment`,
/// tags are `create`), and comments on pull requests are `issue_comment`.
fn gitea_event(rel: &str) -> &'static str {
    let (dir, file) = rel.split_once('/').unwrap();
    let stem = file.trim_end_matches(".json");
    if dir == "drone-go-scm" {
        return match stem {
            "push" => "push",
            s if s.ends_with("_create") => "create",
            s if s.ends_with("_delete") => "delete",
            s if s.starts_with("issue_comment_") || s.starts_with("pull_request_comment_") => {
                "issue_comment"
            }
            s if s.starts_with("issues_") => "issues",
            s if s.starts_with("pull_request_") => "pull_request",
            _ => panic!("no event header known for {rel}"),
        };
    }
    match stem {
        "HookPullRequestReviewAck" => "pull_request_approved",
        "HookPullRequestReviewDeny" => "pull_request_rejected",
        "HookPullRequestReviewComment" => "pull_request_comment",
        "HookTag" => "create",
        "HookRelease" => "release",
        s if s.starts_with("HookPush") => "push",
        s if s.starts_with("HookPullRequest") => "pull_request",
        _ => panic!("no event header known for {rel}"),
    }
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

// ---- 2. field by field ----------------------------------------------------

type Strs = &'static [&'static str];

/// What is checked beyond name, repository, number and sender.
#[rustfmt::skip]
#[derive(Debug, Clone, Copy)]
enum More {
    /// `Event::Other`.
    No,
    Ping { hook_id: Option<u64> },
    Issue { is_pr: bool, label: Option<&'static str>, assignee: Option<&'static str> },
    /// `body` is a prefix of the comment's body.
    Comment { is_pr: bool, body: &'static str },
    Review { id: Option<u64>, body: &'static str },
    Line { body: &'static str, path: &'static str, line: Option<u64>, reply: Option<u64> },
    Pr { head: &'static str, base: &'static str, merged: bool },
    Install { id: u64, account: &'static str, repos: Strs },
    InstallRepos { id: u64, account: &'static str, added: Strs, removed: Strs },
}
use More::*;

struct Case {
    /// The event header.
    event: &'static str,
    file: &'static str,
    /// `Event::name()`: variant and action, or review state.
    name: &'static str,
    /// Repository full name, `""` when the event has none.
    repo: &'static str,
    /// Issue or pull request number, 0 when none.
    number: u64,
    /// Sender login, `""` when none.
    sender: &'static str,
    more: More,
}

type S = &'static str;

/// A GitHub row: the header is the file's directory.
fn c(file: S, name: S, repo: S, number: u64, sender: S, more: More) -> Case {
    let event = file.split_once('/').unwrap().0;
    g(event, file, name, repo, number, sender, more)
}
fn o(file: S, name: S) -> Case {
    c(file, name, "", 0, "", No)
}
fn g(event: S, file: S, name: S, repo: S, number: u64, sender: S, more: More) -> Case {
    Case {
        event,
        file,
        name,
        repo,
        number,
        sender,
        more,
    }
}
fn og(event: S, file: S, name: S) -> Case {
    g(event, file, name, "", 0, "", No)
}

#[rustfmt::skip]
fn github_cases() -> Vec<Case> {
    vec![
        c("installation/created.1.json", "installation.created", "", 0, "Codertocat", Install { id: 957387, account: "Codertocat", repos: &["Codertocat/Hello-World"] }),
        c("installation/created.2.json", "installation.created", "", 0, "Codertocat", Install { id: 957387, account: "Codertocat", repos: &["Codertocat/Hello-World"] }),
        c("installation/deleted.1.json", "installation.deleted", "", 0, "octocat", Install { id: 2, account: "octocat", repos: &["octocat/Hello-World"] }),
        c("installation/deleted.2.json", "installation.deleted", "", 0, "octocat", Install { id: 2, account: "octocat", repos: &["octocat/Hello-World"] }),
        c("installation/new_permissions_accepted.1.json", "installation.new_permissions_accepted", "", 0, "Codertocat", Install { id: 957387, account: "Codertocat", repos: &["Codertocat/Hello-World"] }),
        c("installation/suspend.1.json", "installation.suspended", "", 0, "Codertocat", Install { id: 16598467, account: "Codertocat", repos: &[] }),
        c("installation/unsuspend.1.json", "installation.unsuspended", "", 0, "Codertocat", Install { id: 16598467, account: "Codertocat", repos: &[] }),
        c("installation_repositories/added.1.json", "installation_repositories.added", "", 0, "Codertocat", InstallRepos { id: 957387, account: "Codertocat", added: &["Codertocat/Space"], removed: &[] }),
        c("installation_repositories/added.2.json", "installation_repositories.added", "", 0, "Codertocat", InstallRepos { id: 957387, account: "Codertocat", added: &["Codertocat/Space"], removed: &[] }),
        c("installation_repositories/removed.1.json", "installation_repositories.removed", "", 0, "octocat", InstallRepos { id: 2, account: "octocat", added: &[], removed: &["octocat/Hello-World"] }),
        c("issue_comment/created.1.json", "issue_comment.created", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/created.2.json", "issue_comment.created", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/created.3.json", "issue_comment.created", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/created.4.json", "issue_comment.created", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/created.5.json", "issue_comment.created", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/deleted.1.json", "issue_comment.deleted", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/deleted.2.json", "issue_comment.deleted", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/edited.1.json", "issue_comment.edited", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issue_comment/edited.2.json", "issue_comment.edited", "Codertocat/Hello-World", 1, "Codertocat", Comment { is_pr: false, body: "You are totally right! I" }),
        c("issues/assigned.1.json", "issues.assigned", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: Some("Codertocat") }),
        c("issues/assigned.2.json", "issues.assigned", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: Some("Codertocat") }),
        c("issues/assigned.3.json", "issues.assigned", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: Some("Codertocat") }),
        o("issues/deleted.1.json", "issues.deleted"),
        o("issues/demilestoned.1.json", "issues.demilestoned"),
        o("issues/demilestoned.2.json", "issues.demilestoned"),
        c("issues/edited.1.json", "issues.edited", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/edited.2.json", "issues.edited", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/edited.3.json", "issues.edited", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/labeled.1.json", "issues.labeled", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: Some("bug"), assignee: None }),
        c("issues/labeled.2.json", "issues.labeled", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: Some("bug"), assignee: None }),
        o("issues/locked.1.json", "issues.locked"),
        o("issues/locked.2.json", "issues.locked"),
        o("issues/milestoned.1.json", "issues.milestoned"),
        o("issues/milestoned.2.json", "issues.milestoned"),
        c("issues/opened.1.json", "issues.opened", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/opened.2.json", "issues.opened", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/opened.3.json", "issues.opened", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        c("issues/opened.4.json", "issues.opened", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        o("issues/pinned.1.json", "issues.pinned"),
        c("issues/reopened.1.json", "issues.reopened", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: None }),
        o("issues/transferred.1.json", "issues.transferred"),
        c("issues/unassigned.1.json", "issues.unassigned", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: Some("Codertocat") }),
        c("issues/unassigned.2.json", "issues.unassigned", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: None, assignee: Some("Codertocat") }),
        c("issues/unlabeled.1.json", "issues.unlabeled", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: Some("bug"), assignee: None }),
        c("issues/unlabeled.2.json", "issues.unlabeled", "Codertocat/Hello-World", 1, "Codertocat", Issue { is_pr: false, label: Some("bug"), assignee: None }),
        o("issues/unlocked.1.json", "issues.unlocked"),
        o("issues/unlocked.2.json", "issues.unlocked"),
        o("issues/unpinned.1.json", "issues.unpinned"),
        c("ping/none.1.json", "ping", "Octocoders/Hello-World", 0, "Codertocat", Ping { hook_id: Some(109948940) }),
        c("ping/none.2.json", "ping", "Octocoders/Hello-World", 0, "Codertocat", Ping { hook_id: Some(109948940) }),
        c("ping/none.3.json", "ping", "Octocoders/Hello-World", 0, "Codertocat", Ping { hook_id: Some(109948940) }),
        c("ping/none.4.json", "ping", "", 0, "Codertocat", Ping { hook_id: Some(109948940) }),
        c("pull_request/assigned.1.json", "pull_request.assigned", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/assigned.2.json", "pull_request.assigned", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/closed.1.json", "pull_request.closed", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/closed.2.json", "pull_request.closed", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        o("pull_request/converted_to_draft.1.json", "pull_request.converted_to_draft"),
        o("pull_request/converted_to_draft.2.json", "pull_request.converted_to_draft"),
        o("pull_request/converted_to_draft.3.json", "pull_request.converted_to_draft"),
        c("pull_request/labeled.1.json", "pull_request.labeled", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/labeled.2.json", "pull_request.labeled", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        o("pull_request/locked.1.json", "pull_request.locked"),
        o("pull_request/locked.2.json", "pull_request.locked"),
        c("pull_request/opened.1.json", "pull_request.opened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/opened.2.json", "pull_request.opened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/opened.3.json", "pull_request.opened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/opened.4.json", "pull_request.opened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        o("pull_request/ready_for_review.1.json", "pull_request.ready_for_review"),
        o("pull_request/ready_for_review.2.json", "pull_request.ready_for_review"),
        o("pull_request/ready_for_review.3.json", "pull_request.ready_for_review"),
        c("pull_request/reopened.1.json", "pull_request.reopened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/reopened.2.json", "pull_request.reopened", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        o("pull_request/review_request_removed.1.json", "pull_request.review_request_removed"),
        c("pull_request/review_requested.1.json", "pull_request.review_requested", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/synchronize.1.json", "pull_request.synchronize", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/unassigned.1.json", "pull_request.unassigned", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/unassigned.2.json", "pull_request.unassigned", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/unlabeled.1.json", "pull_request.unlabeled", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        c("pull_request/unlabeled.2.json", "pull_request.unlabeled", "Codertocat/Hello-World", 2, "Codertocat", Pr { head: "changes", base: "master", merged: false }),
        o("pull_request/unlocked.1.json", "pull_request.unlocked"),
        o("pull_request/unlocked.2.json", "pull_request.unlocked"),
        o("pull_request_review/dismissed.1.json", "pull_request_review.dismissed"),
        c("pull_request_review/submitted.1.json", "review.commented", "Codertocat/Hello-World", 2, "Codertocat", Review { id: Some(237895671), body: "" }),
        c("pull_request_review/submitted.2.json", "review.commented", "Codertocat/Hello-World", 2, "Codertocat", Review { id: Some(237895671), body: "" }),
        c("pull_request_review/submitted.3.json", "review.commented", "Codertocat/Hello-World", 2, "Codertocat", Review { id: Some(237895671), body: "" }),
        c("pull_request_review_comment/created.1.json", "review_comment.created", "Codertocat/Hello-World", 2, "Codertocat", Line { body: "Maybe you should use mor", path: "README.md", line: Some(1), reply: None }),
        c("pull_request_review_comment/created.2.json", "review_comment.created", "Codertocat/Hello-World", 2, "Codertocat", Line { body: "Maybe you should use mor", path: "README.md", line: Some(265), reply: None }),
        c("pull_request_review_comment/created.3.json", "review_comment.created", "Codertocat/Hello-World", 2, "Codertocat", Line { body: "Maybe you should use mor", path: "README.md", line: Some(265), reply: None }),
        c("pull_request_review_comment/deleted.1.json", "review_comment.deleted", "Codertocat/Hello-World", 2, "Codertocat", Line { body: "Maybe you should use mor", path: "README.md", line: Some(265), reply: None }),
        c("pull_request_review_comment/edited.1.json", "review_comment.edited", "Codertocat/Hello-World", 2, "Codertocat", Line { body: "Maybe you should use mor", path: "README.md", line: Some(265), reply: None }),
        o("push/none.1.json", "push"),
        o("push/none.2.json", "push"),
        o("push/none.3.json", "push"),
        o("push/none.4.json", "push"),
        o("push/none.5.json", "push"),
        o("push/none.6.json", "push"),
        o("push/none.7.json", "push"),
    ]
}

#[rustfmt::skip]
fn gitea_cases() -> Vec<Case> {
    vec![
        og("create", "drone-go-scm/branch_create.json", "create"),
        og("delete", "drone-go-scm/branch_delete.json", "delete"),
        g("issue_comment", "drone-go-scm/issue_comment_created.json", "issue_comment.created", "gogits/hello-world", 1, "unknwon", Comment { is_pr: false, body: "Got it" }),
        g("issue_comment", "drone-go-scm/issue_comment_deleted.json", "issue_comment.deleted", "gogits/hello-world", 1, "unknwon", Comment { is_pr: false, body: "Got it, chief" }),
        g("issue_comment", "drone-go-scm/issue_comment_edited.json", "issue_comment.edited", "gogits/hello-world", 1, "unknwon", Comment { is_pr: false, body: "Got it, chief" }),
        g("issues", "drone-go-scm/issues_closed.json", "issues.closed", "gogits/hello-world", 1, "unknwon", Issue { is_pr: false, label: None, assignee: None }),
        g("issues", "drone-go-scm/issues_opened.json", "issues.opened", "gogits/hello-world", 1, "unknwon", Issue { is_pr: false, label: None, assignee: None }),
        g("pull_request", "drone-go-scm/pull_request_closed.json", "pull_request.closed", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: false }),
        g("issue_comment", "drone-go-scm/pull_request_comment_created.json", "issue_comment.created", "gogits/hello-world", 2, "unknwon", Comment { is_pr: true, body: "run gofmt" }),
        g("issue_comment", "drone-go-scm/pull_request_comment_deleted.json", "issue_comment.deleted", "gogits/hello-world", 2, "unknwon", Comment { is_pr: true, body: "lgtm" }),
        g("issue_comment", "drone-go-scm/pull_request_comment_edited.json", "issue_comment.edited", "gogits/hello-world", 2, "unknwon", Comment { is_pr: true, body: "lgtm" }),
        g("pull_request", "drone-go-scm/pull_request_edited.json", "pull_request.edited", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: false }),
        g("pull_request", "drone-go-scm/pull_request_merged.json", "pull_request.merged", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: true }),
        g("pull_request", "drone-go-scm/pull_request_opened.json", "pull_request.opened", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: false }),
        g("pull_request", "drone-go-scm/pull_request_reopened.json", "pull_request.reopened", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: false }),
        g("pull_request", "drone-go-scm/pull_request_synchronized.json", "pull_request.synchronize", "jcitizen/my-repo", 1, "jcitizen", Pr { head: "feature", base: "master", merged: false }),
        og("push", "drone-go-scm/push.json", "push"),
        og("create", "drone-go-scm/tag_create.json", "create"),
        og("delete", "drone-go-scm/tag_delete.json", "delete"),
        g("pull_request", "woodpecker-forgejo/HookPullRequest.json", "pull_request.opened", "gordon/hello-world", 1, "gordon", Pr { head: "feature/changes", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestAssigneeCleared.json", "pull_request.unassigned", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestAssigneesAdded.json", "pull_request.assigned", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestClosed.json", "pull_request.closed", "anbraten/test-repo", 1, "anbraten", Pr { head: "anbraten-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestEdited.json", "pull_request.edited", "anbraten/test-repo", 1, "anbraten", Pr { head: "anbraten-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestLabelAdded.json", "pull_request.labeled", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestLabelsCleared.json", "pull_request.unlabeled", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestLabelsUpdated.json", "pull_request.labeled", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestMerged.json", "pull_request.merged", "anbraten/test-repo", 1, "anbraten", Pr { head: "anbraten-patch-1", base: "main", merged: true }),
        og("pull_request", "woodpecker-forgejo/HookPullRequestMilestoneAdded.json", "pull_request.milestoned"),
        og("pull_request", "woodpecker-forgejo/HookPullRequestMilestoneChanged.json", "pull_request.milestoned"),
        og("pull_request", "woodpecker-forgejo/HookPullRequestMilestoneCleared.json", "pull_request.demilestoned"),
        g("pull_request", "woodpecker-forgejo/HookPullRequestReopened.json", "pull_request.reopened", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-forgejo/HookPullRequestUpdated.json", "pull_request.synchronize", "Test-CI/multi-line-secrets", 2, "test", Pr { head: "test-patch-1", base: "main", merged: false }),
        og("push", "woodpecker-forgejo/HookPush.json", "push"),
        og("push", "woodpecker-forgejo/HookPushBranch.json", "push"),
        og("push", "woodpecker-forgejo/HookPushMulti.json", "push"),
        og("release", "woodpecker-forgejo/HookRelease.json", "release.published"),
        og("create", "woodpecker-forgejo/HookTag.json", "create"),
        g("pull_request", "woodpecker-gitea/HookPullRequest.json", "pull_request.opened", "gordon/hello-world", 1, "gordon", Pr { head: "feature/changes", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestAddLabel.json", "pull_request.labeled", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        og("pull_request", "woodpecker-gitea/HookPullRequestAddMile.json", "pull_request.milestoned"),
        g("pull_request", "woodpecker-gitea/HookPullRequestAddReviewRequest.json", "pull_request.review_requested", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestAssigneesAdded.json", "pull_request.assigned", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestAssigneesRemoved.json", "pull_request.unassigned", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestChangeBody.json", "pull_request.edited", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestChangeLabel.json", "pull_request.labeled", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        og("pull_request", "woodpecker-gitea/HookPullRequestChangeMile.json", "pull_request.milestoned"),
        g("pull_request", "woodpecker-gitea/HookPullRequestChangeTitle.json", "pull_request.edited", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestClosed.json", "pull_request.closed", "anbraten/test-repo", 1, "anbraten", Pr { head: "anbraten-patch-1", base: "main", merged: false }),
        g("pull_request", "woodpecker-gitea/HookPullRequestMerged.json", "pull_request.merged", "anbraten/test-repo", 1, "anbraten", Pr { head: "anbraten-patch-1", base: "main", merged: true }),
        g("pull_request", "woodpecker-gitea/HookPullRequestRemoveLabel.json", "pull_request.unlabeled", "a_nice_user/hello_world_ci", 7, "a_nice_user", Pr { head: "jony-patch-1", base: "main", merged: false }),
        og("pull_request", "woodpecker-gitea/HookPullRequestRemoveMile.json", "pull_request.demilestoned"),
        g("pull_request", "woodpecker-gitea/HookPullRequestReopened.json", "pull_request.reopened", "test_it/test_ci_thing", 1, "6543", Pr { head: "6543-patch-1", base: "main", merged: false }),
        g("pull_request_approved", "woodpecker-gitea/HookPullRequestReviewAck.json", "review.approved", "a_nice_user/hello_world_ci", 7, "a_nice_user", Review { id: None, body: "juhu thats a great idea" }),
        g("pull_request_comment", "woodpecker-gitea/HookPullRequestReviewComment.json", "review.commented", "a_nice_user/hello_world_ci", 7, "a_nice_user", Review { id: None, body: "and somethimes you have " }),
        g("pull_request_rejected", "woodpecker-gitea/HookPullRequestReviewDeny.json", "review.changes_requested", "a_nice_user/hello_world_ci", 7, "a_nice_user", Review { id: None, body: "I decided otherwhies :O" }),
        g("pull_request", "woodpecker-gitea/HookPullRequestUpdated.json", "pull_request.synchronize", "Test-CI/multi-line-secrets", 2, "test", Pr { head: "test-patch-1", base: "main", merged: false }),
        og("push", "woodpecker-gitea/HookPush.json", "push"),
        og("push", "woodpecker-gitea/HookPushBranch.json", "push"),
        og("push", "woodpecker-gitea/HookPushMulti.json", "push"),
        og("release", "woodpecker-gitea/HookRelease.json", "release.published"),
        og("create", "woodpecker-gitea/HookTag.json", "create"),
    ]
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
    // Gitea's ghost user has id -1.
    v["sender"] = json!({ "id": -1, "login": "Ghost", "username": "Ghost" });
    let e = view(gitea("issues", &bytes(&v)));
    assert_eq!(
        e["sender"],
        json!({ "login": "Ghost", "id": 0, "is_bot": false })
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
