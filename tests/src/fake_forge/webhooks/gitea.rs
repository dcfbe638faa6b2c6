//! Gitea's deliveries: its own headers, Gogs' and GitHub's, all from one
//! HMAC-SHA256; bodies from the Gitea examples (drone-go-scm's issues and
//! comments, woodpecker's pull requests and reviews).

use forgehand_forge::ReviewState;
use serde_json::{json, Value};

use super::payload::{review_state, stable_id, user, Payload, Site};
use crate::fake_forge::hooks::Change;
use crate::fake_forge::state::{FakeIssue, ForgeState};

pub(super) fn headers(
    secret: &str,
    p: &Payload,
    delivery_id: &str,
    body: &[u8],
) -> Vec<(String, String)> {
    let mut headers = crate::harness::gitea_headers(secret, &p.event, delivery_id, body);
    headers.push(("content-type".into(), "application/json".into()));
    headers
}

/// `None` when Gitea sends nothing for the change (a pending review).
pub(super) fn payload(
    s: &ForgeState,
    site: &Site,
    sender: &str,
    change: &Change,
) -> Option<Payload> {
    // Gitea has issue examples only from drone-go-scm, pull request ones
    // only from woodpecker; each change is sent in the newest shape there is.
    let on_issue = |number: u64, action: &str, pull_file: &str| {
        let issue = site.issue(s, number)?;
        let (event, file) = match issue.pull {
            Some(_) => ("pull_request", format!("woodpecker-gitea/{pull_file}")),
            None => ("issues", "drone-go-scm/issues_opened.json".to_owned()),
        };
        let mut p = start(site, issue, event, &file, sender);
        p.action = Some(action.into());
        p.body["action"] = json!(action);
        Some(p)
    };
    if let Change::TestPush { .. } = change {
        // Gitea's test delivery: a push of the default branch's last commit.
        let rel = format!(
            "{}/woodpecker-gitea/HookPush.json",
            crate::testdata::GITEA_EXAMPLES
        );
        let mut body = crate::testdata::json(&rel);
        body["repository"] = site.repository(&body["repository"]);
        body["pusher"] = user(&body["pusher"], sender);
        body["sender"] = user(&body["sender"], sender);
        return Some(Payload {
            event: "push".into(),
            action: None,
            body,
        });
    }
    let p = match change {
        // Gitea says only that the label set changed: `label_updated`
        // with the new set in the issue, no `label`.
        Change::Labeled { number, .. } => {
            on_issue(*number, "label_updated", "HookPullRequestAddLabel.json")?
        }
        // Likewise the new assignees are in the issue.
        Change::Assigned { number, .. } => {
            on_issue(*number, "assigned", "HookPullRequestAssigneesAdded.json")?
        }
        Change::Commented { comment } | Change::CommentEdited { comment, .. } => {
            let c = site.comment(s, *comment)?;
            let issue = site.issue(s, c.issue)?;
            let kind = if issue.pull.is_some() {
                "pull_request_comment"
            } else {
                "issue_comment"
            };
            let action = match change {
                Change::CommentEdited { .. } => "edited",
                _ => "created",
            };
            let file = format!("drone-go-scm/{kind}_{action}.json");
            let mut p = start(site, issue, "issue_comment", &file, sender);
            let v = &mut p.body["comment"];
            v["id"] = json!(c.id);
            v["body"] = json!(c.body);
            v["user"] = user(&v["user"], &c.user);
            let page = if issue.pull.is_some() {
                "pulls"
            } else {
                "issues"
            };
            v["html_url"] = json!(format!(
                "{}/{}/{page}/{}#issuecomment-{}",
                site.web, site.full, issue.number, c.id
            ));
            // Gitea since 1.12 says whether the issue is a pull request.
            p.body["is_pull"] = json!(issue.pull.is_some());
            if let Change::CommentEdited { from, .. } = change {
                p.body["changes"] = json!({"body": {"from": from}});
            }
            p
        }
        Change::PullOpened { number } => {
            on_issue(*number, "opened", "HookPullRequestAssigneesAdded.json")?
        }
        Change::PullEdited {
            number,
            title_from,
            body_from,
        } => {
            let mut p = on_issue(*number, "edited", "HookPullRequestChangeBody.json")?;
            p.body["changes"] = super::changes(title_from, body_from);
            p
        }
        Change::ReviewRequested { number, reviewer } => {
            let file = "HookPullRequestAddReviewRequest.json";
            let mut p = on_issue(*number, "review_requested", file)?;
            p.body["requested_reviewer"] = user(&p.body["sender"], reviewer);
            p
        }
        Change::Reviewed { review } => {
            let r = site.review(s, *review)?;
            let (event, kind, file) = match review_state(&r.state)? {
                ReviewState::Approved => ("pull_request_approved", "approved", "Ack"),
                ReviewState::ChangesRequested => ("pull_request_rejected", "rejected", "Deny"),
                ReviewState::Commented => ("pull_request_comment", "comment", "Comment"),
            };
            let file = format!("woodpecker-gitea/HookPullRequestReview{file}.json");
            let mut p = start(site, site.issue(s, r.pr)?, event, &file, sender);
            p.body["review"] = json!({
                "type": format!("pull_request_review_{kind}"),
                "content": r.body,
            });
            p
        }
        // Gitea has no reply endpoint; a reply is part of a review.
        Change::ReviewReply { .. } | Change::Ping { .. } | Change::TestPush { .. } => return None,
    };
    Some(p)
}

/// The example `file` about `issue` sent as `event` by `sender`, with the
/// repository, sender and issue or pull request filled in.
fn start(site: &Site, issue: &FakeIssue, event: &str, file: &str, sender: &str) -> Payload {
    let rel = format!("{}/{file}", crate::testdata::GITEA_EXAMPLES);
    let template = crate::testdata::json(&rel);
    let old_full = template["repository"]["full_name"].as_str().unwrap_or("-");
    let old_web = template["repository"]["html_url"]
        .as_str()
        .and_then(|u| u.strip_suffix(old_full))
        .unwrap_or("-")
        .trim_end_matches('/')
        .to_owned();
    // A Gitea serves its pages and its API (`/api/v1`) on one host.
    let mut body = site.load(&rel, &[(old_web.as_str(), site.web.as_str())], issue.number);
    let repository = site.repository(&body["repository"]);
    let people = body["sender"].clone();
    let person = |login: &str| user(&people, login);
    body["sender"] = user(&people, sender);
    if body["issue"].is_object() {
        fill_issue(&mut body["issue"], site, issue, &person);
    }
    if body["pull_request"].is_object() {
        fill_pull(&mut body["pull_request"], site, issue, &person, &repository);
    }
    if body.get("number").is_some() {
        body["number"] = json!(issue.number);
    }
    body["repository"] = repository;
    Payload {
        event: event.into(),
        action: body["action"].as_str().map(str::to_owned),
        body,
    }
}

fn fill_common(v: &mut Value, site: &Site, i: &FakeIssue, person: &dyn Fn(&str) -> Value) {
    v["id"] = json!(stable_id(&format!("{}#{}", site.full, i.number)));
    let page = if i.pull.is_some() { "pulls" } else { "issues" };
    v["number"] = json!(i.number);
    v["title"] = json!(i.title);
    v["body"] = json!(i.body);
    v["user"] = person(&i.user);
    v["state"] = json!(if i.open { "open" } else { "closed" });
    v["labels"] = i.labels.iter().map(|l| label_json(site, l)).collect();
    let assignees: Vec<Value> = i.assignees.iter().map(|a| person(a)).collect();
    v["assignee"] = assignees.first().cloned().unwrap_or(Value::Null);
    v["assignees"] = if assignees.is_empty() {
        Value::Null
    } else {
        json!(assignees)
    };
    v["html_url"] = json!(format!("{}/{}/{page}/{}", site.web, site.full, i.number));
}

fn fill_issue(v: &mut Value, site: &Site, i: &FakeIssue, person: &dyn Fn(&str) -> Value) {
    fill_common(v, site, i, person);
    v["pull_request"] = match &i.pull {
        Some(_) => json!({
            "merged": false,
            "merged_at": null,
            "html_url": format!("{}/{}/pulls/{}", site.web, site.full, i.number),
        }),
        None => Value::Null,
    };
}

fn fill_pull(
    v: &mut Value,
    site: &Site,
    i: &FakeIssue,
    person: &dyn Fn(&str) -> Value,
    repository: &Value,
) {
    fill_common(v, site, i, person);
    let html = format!("{}/{}/pulls/{}", site.web, site.full, i.number);
    v["url"] = json!(html);
    v["diff_url"] = json!(format!("{html}.diff"));
    v["patch_url"] = json!(format!("{html}.patch"));
    if v.get("requested_reviewers").is_some() {
        let reviewers: Vec<Value> = site.reviewers(i.number).into_iter().map(person).collect();
        v["requested_reviewers"] = json!(reviewers);
    }
    let (head, base) = i.pull.clone().unwrap_or_default();
    for (side, branch) in [("head", head), ("base", base)] {
        let end = &mut v[side];
        end["ref"] = json!(branch);
        end["label"] = json!(branch);
        if end.get("repo").is_some() {
            end["repo"] = repository.clone();
            end["repo_id"] = repository["id"].clone();
        }
    }
    if v.get("merged").is_some() {
        v["merged"] = json!(false);
        v["merged_at"] = Value::Null;
    }
}

fn label_json(site: &Site, name: &str) -> Value {
    let id = stable_id(&format!("{}:{name}", site.full)) % 100_000;
    json!({
        "id": id,
        "name": name,
        "exclusive": false,
        "is_archived": false,
        "color": "ededed",
        "description": "",
        "url": format!("{}/api/v1/repos/{}/labels/{id}", site.web, site.full),
    })
}
