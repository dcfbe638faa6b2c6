//! GitHub's deliveries: `X-GitHub-*` headers signed `sha256=`, bodies
//! from `@octokit/webhooks-examples`.

use forgehand_forge::ReviewState;
use serde_json::{json, Value};

use super::payload::{review_state, stable_id, text_or_null, user, Payload, Site};
use crate::fake_forge::hooks::Change;
use crate::fake_forge::state::{FakeIssue, ForgeState};

/// GitHub's web pages, as the fake's API answers name them.
pub(super) const WEB: &str = "https://github.invalid";

/// Hookshot names its build, a short commit hash.
const USER_AGENT: &str = "GitHub-Hookshot/5f52bc7";

pub(super) fn headers(
    hook_id: u64,
    secret: &str,
    p: &Payload,
    delivery_id: &str,
    body: &[u8],
) -> Vec<(String, String)> {
    let mut headers = crate::harness::github_headers(secret, &p.event, delivery_id, body);
    for (name, value) in &mut headers {
        match name.as_str() {
            "user-agent" => *value = USER_AGENT.into(),
            "x-github-hook-id" => *value = hook_id.to_string(),
            _ => {}
        }
    }
    let target = p.body["repository"]["id"].to_string();
    headers.extend([
        ("content-type".into(), "application/json".into()),
        (
            "x-github-hook-installation-target-type".into(),
            "repository".into(),
        ),
        ("x-github-hook-installation-target-id".into(), target),
    ]);
    headers
}

/// `None` when GitHub sends nothing for the change (a pending review).
pub(super) fn payload(
    s: &ForgeState,
    site: &Site,
    sender: &str,
    change: &Change,
) -> Option<Payload> {
    let on_issue = |number: u64, action: &str| {
        let issue = site.issue(s, number)?;
        let event = if issue.pull.is_some() {
            "pull_request"
        } else {
            "issues"
        };
        Some(start(
            site,
            issue,
            event,
            &format!("{action}.1.json"),
            sender,
        ))
    };
    let p = match change {
        Change::Labeled { number, label } => {
            let mut p = on_issue(*number, "labeled")?;
            p.body["label"] = label_json(site, label);
            p
        }
        Change::Assigned { number, assignee } => {
            let mut p = on_issue(*number, "assigned")?;
            p.body["assignee"] = user(&p.body["sender"], assignee);
            p
        }
        Change::Commented { comment } | Change::CommentEdited { comment, .. } => {
            let c = site.comment(s, *comment)?;
            let issue = site.issue(s, c.issue)?;
            let file = match change {
                Change::CommentEdited { .. } => "edited.1.json",
                _ => "created.3.json",
            };
            let mut p = start(site, issue, "issue_comment", file, sender);
            let v = &mut p.body["comment"];
            let old = v["id"].to_string();
            super::payload::rewrite(v, &old, &c.id.to_string());
            v["id"] = json!(c.id);
            v["body"] = json!(c.body);
            v["user"] = user(&v["user"], &c.user);
            let page = if issue.pull.is_some() {
                "pull"
            } else {
                "issues"
            };
            v["html_url"] = json!(format!(
                "{WEB}/{}/{page}/{}#issuecomment-{}",
                site.full, issue.number, c.id
            ));
            if let Change::CommentEdited { from, .. } = change {
                p.body["changes"] = json!({"body": {"from": from}});
            }
            p
        }
        Change::PullOpened { number } => start(
            site,
            site.issue(s, *number)?,
            "pull_request",
            "opened.2.json",
            sender,
        ),
        Change::PullEdited {
            number,
            title_from,
            body_from,
        } => {
            // The examples have no `edited`: it is `opened`'s shape with
            // what changed in `changes`.
            let mut p = start(
                site,
                site.issue(s, *number)?,
                "pull_request",
                "opened.2.json",
                sender,
            );
            p.action = Some("edited".into());
            p.body["action"] = json!("edited");
            p.body["changes"] = super::changes(title_from, body_from);
            p
        }
        Change::ReviewRequested { number, reviewer } => {
            let issue = site.issue(s, *number)?;
            let file = "review_requested.1.json";
            let mut p = start(site, issue, "pull_request", file, sender);
            p.body["requested_reviewer"] = user(&p.body["sender"], reviewer);
            p
        }
        Change::Reviewed { review } => {
            let r = site.review(s, *review)?;
            let state = review_state(&r.state)?;
            let issue = site.issue(s, r.pr)?;
            let file = "submitted.2.json";
            let mut p = start(site, issue, "pull_request_review", file, sender);
            let v = &mut p.body["review"];
            let old = v["id"].to_string();
            super::payload::rewrite(v, &old, &r.id.to_string());
            v["id"] = json!(r.id);
            v["user"] = user(&v["user"], &r.user);
            v["body"] = text_or_null(&r.body);
            v["state"] = json!(match state {
                ReviewState::Approved => "approved",
                ReviewState::ChangesRequested => "changes_requested",
                ReviewState::Commented => "commented",
            });
            p
        }
        Change::Ping { hook } => {
            let h = s.webhooks.hooks.iter().find(|h| h.id == *hook)?;
            let rel = format!("{}/ping/none.1.json", crate::testdata::GITHUB_EXAMPLES);
            let mut body = crate::testdata::json(&rel);
            body["hook_id"] = json!(hook);
            let v = &mut body["hook"];
            v["id"] = json!(hook);
            v["active"] = json!(h.active);
            v["events"] = json!(h.events);
            v["config"] =
                json!({"content_type": h.content_type, "insecure_ssl": "0", "url": h.url});
            for key in ["url", "test_url", "ping_url"] {
                if let Some(url) = v[key].as_str() {
                    let tail = url.rsplit_once("/hooks/").map_or("", |(_, t)| t);
                    let tail = tail.split_once('/').map_or("", |(_, t)| t);
                    let end = if tail.is_empty() {
                        String::new()
                    } else {
                        format!("/{tail}")
                    };
                    v[key] = json!(format!(
                        "{}/repos/{}/hooks/{hook}{end}",
                        site.api, site.full
                    ));
                }
            }
            body["repository"] = site.repository(&body["repository"]);
            body["sender"] = user(&body["sender"], sender);
            return Some(Payload {
                event: "ping".into(),
                action: None,
                body,
            });
        }
        Change::TestPush { .. } => return None,
        Change::ReviewReply { comment } => {
            let c = site.review_comment(s, *comment)?;
            let pr = site.review(s, c.review_id)?.pr;
            let issue = site.issue(s, pr)?;
            let file = "created.2.json";
            let mut p = start(site, issue, "pull_request_review_comment", file, sender);
            let v = &mut p.body["comment"];
            let old = v["id"].to_string();
            super::payload::rewrite(v, &old, &c.id.to_string());
            v["id"] = json!(c.id);
            v["pull_request_review_id"] = json!(c.review_id);
            v["user"] = user(&v["user"], &c.user);
            v["body"] = json!(c.body);
            v["path"] = json!(c.path);
            for key in ["position", "original_position", "line", "original_line"] {
                v[key] = json!(c.position);
            }
            v["commit_id"] = json!(c.commit_id);
            v["original_commit_id"] = json!(c.commit_id);
            if let Some(parent) = c.in_reply_to {
                v["in_reply_to_id"] = json!(parent);
            }
            p
        }
    };
    Some(p)
}

/// The example `<event>/<file>` about `issue`, from `sender`: repository,
/// sender and the issue or pull request filled in.
fn start(site: &Site, issue: &FakeIssue, event: &str, file: &str, sender: &str) -> Payload {
    let rel = format!("{}/{event}/{file}", crate::testdata::GITHUB_EXAMPLES);
    let hosts = [
        ("https://api.github.com", site.api.as_str()),
        ("https://github.com", WEB),
    ];
    let mut body = site.load(&rel, &hosts, issue.number);
    let repository = site.repository(&body["repository"]);
    let people = body["sender"].clone();
    let person = |login: &str| user(&people, login);
    body["sender"] = user(&people, sender);
    if body.get("issue").is_some() {
        fill_issue(&mut body["issue"], site, issue, &person);
    }
    if body.get("pull_request").is_some() {
        fill_pull(&mut body["pull_request"], site, issue, &person, &repository);
        body["number"] = json!(issue.number);
    }
    body["repository"] = repository;
    let body_map = body.as_object_mut().expect("an object");
    // The examples' organization and App are not this repository's.
    body_map.remove("organization");
    match site.installation {
        Some(id) => {
            body_map.insert(
                "installation".into(),
                json!({"id": id, "node_id": format!("MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u{id}")}),
            );
        }
        None => {
            body_map.remove("installation");
        }
    }
    Payload {
        event: event.into(),
        action: body["action"].as_str().map(str::to_owned),
        body,
    }
}

fn fill_common(v: &mut Value, site: &Site, i: &FakeIssue, person: &dyn Fn(&str) -> Value) {
    v["id"] = json!(stable_id(&format!("{}#{}", site.full, i.number)));
    v["number"] = json!(i.number);
    v["title"] = json!(i.title);
    v["body"] = text_or_null(&i.body);
    v["user"] = person(&i.user);
    v["state"] = json!(if i.open { "open" } else { "closed" });
    v["labels"] = i.labels.iter().map(|l| label_json(site, l)).collect();
    let assignees: Vec<Value> = i.assignees.iter().map(|a| person(a)).collect();
    v["assignee"] = assignees.first().cloned().unwrap_or(Value::Null);
    v["assignees"] = json!(assignees);
}

fn fill_issue(v: &mut Value, site: &Site, i: &FakeIssue, person: &dyn Fn(&str) -> Value) {
    fill_common(v, site, i, person);
    let (full, n, api) = (&site.full, i.number, &site.api);
    v["url"] = json!(format!("{api}/repos/{full}/issues/{n}"));
    if i.pull.is_some() {
        v["html_url"] = json!(format!("{WEB}/{full}/pull/{n}"));
        v["pull_request"] = json!({
            "url": format!("{api}/repos/{full}/pulls/{n}"),
            "html_url": format!("{WEB}/{full}/pull/{n}"),
            "diff_url": format!("{WEB}/{full}/pull/{n}.diff"),
            "patch_url": format!("{WEB}/{full}/pull/{n}.patch"),
            "merged_at": null,
        });
    } else {
        v["html_url"] = json!(format!("{WEB}/{full}/issues/{n}"));
        if let Some(issue) = v.as_object_mut() {
            issue.remove("pull_request");
        }
    }
}

fn fill_pull(
    v: &mut Value,
    site: &Site,
    i: &FakeIssue,
    person: &dyn Fn(&str) -> Value,
    repository: &Value,
) {
    fill_common(v, site, i, person);
    let (full, n) = (&site.full, i.number);
    v["url"] = json!(format!("{}/repos/{full}/pulls/{n}", site.api));
    v["html_url"] = json!(format!("{WEB}/{full}/pull/{n}"));
    let reviewers: Vec<Value> = site.reviewers(n).into_iter().map(person).collect();
    v["requested_reviewers"] = json!(reviewers);
    let (head, base) = i.pull.clone().unwrap_or_default();
    for (side, branch) in [("head", head), ("base", base)] {
        let end = &mut v[side];
        end["ref"] = json!(branch);
        end["label"] = json!(format!("{}:{branch}", site.owner));
        end["user"] = person(&site.owner);
        end["repo"] = repository.clone();
    }
    // Review payloads carry a shorter pull request, without `merged`.
    if v.get("merged").is_some() {
        v["merged"] = json!(false);
    }
    v["merged_at"] = Value::Null;
    if i.open {
        v["closed_at"] = Value::Null;
    }
}

fn label_json(site: &Site, name: &str) -> Value {
    let id = stable_id(&format!("{}:{name}", site.full));
    json!({
        "id": id,
        "node_id": format!("LA_kwDO{id}"),
        "url": format!("{}/repos/{}/labels/{name}", site.api, site.full),
        "name": name,
        "color": "ededed",
        "default": false,
        "description": null,
    })
}
