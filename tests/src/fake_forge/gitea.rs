//! Gitea's side of the fake forge: its routes and its answers' shapes.

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::hooks::Change;
use super::state::{EditRefused, FakeComment, FakeIssue, ForgeState};
use super::{user_json, Answer, Kind, Request};

pub(super) fn route(s: &mut ForgeState, method: &str, template: &str, r: &Request<'_>) -> Answer {
    let (repo, user, body) = (r.repo, r.user, r.body);
    let not_found = || (StatusCode::NOT_FOUND, "not found".to_owned());
    let t = template
        .strip_prefix("/repos/{owner}/{repo}")
        .unwrap_or(template);
    match (method, t) {
        ("GET", "/issues/{index}") => {
            let issue = s.issue(repo, r.num("index")).ok_or_else(not_found)?;
            Ok((StatusCode::OK, issue_json(issue)))
        }
        ("GET", "/issues/{index}/comments") => {
            let list = s.comments_on(repo, r.num("index")).map(comment_json);
            Ok((StatusCode::OK, Value::Array(list.collect())))
        }
        ("POST", "/issues/{index}/comments") => {
            let text = body["body"].as_str().unwrap_or_default();
            let comment = s
                .comment_announced(Kind::Gitea, repo, r.num("index"), user, text)
                .ok_or_else(not_found)?;
            Ok((StatusCode::CREATED, comment_json(comment)))
        }
        ("PATCH", "/issues/comments/{id}") => {
            let text = body["body"].as_str().unwrap_or_default();
            let comment = s
                .edit_comment_announced(Kind::Gitea, repo, r.num("id"), user, text)
                .map_err(|e| match e {
                    EditRefused::NoSuchComment => not_found(),
                    EditRefused::NotTheAuthors => {
                        (StatusCode::FORBIDDEN, "not your comment".into())
                    }
                })?;
            Ok((StatusCode::OK, comment_json(&comment)))
        }
        ("POST", "/issues/{index}/reactions") | ("POST", "/issues/comments/{id}/reactions") => {
            let target = if t.contains("comments") {
                format!("comment:{}", r.num("id"))
            } else {
                format!("issue:{}", r.num("index"))
            };
            let content = body["content"].as_str().unwrap_or_default().to_owned();
            let known = [
                "+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes",
            ];
            if !known.contains(&content.as_str()) {
                return Err((
                    StatusCode::FORBIDDEN,
                    format!("'{content}' is not an allowed reaction"),
                ));
            }
            // The same reaction by the same user again is the one made
            // before: 200, not a second one.
            let status = if s.react(repo, target, user, &content) {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok((
                status,
                json!({"user": user_json(Kind::Gitea, user), "content": content}),
            ))
        }
        ("GET", "/collaborators/{collaborator}/permission") => {
            let login = r.arg("collaborator");
            match s.permissions.get(&(repo.to_owned(), login.clone())) {
                Some(p) => Ok((
                    StatusCode::OK,
                    json!({"permission": p, "role_name": p, "user": user_json(Kind::Gitea, &login)}),
                )),
                None => Err((
                    StatusCode::FORBIDDEN,
                    format!("{login} is not a collaborator"),
                )),
            }
        }
        ("GET", "/pulls") => {
            // Gitea's default state is `open`.
            let state = r.param("state").unwrap_or("open");
            let mut list: Vec<&FakeIssue> = s
                .issues
                .iter()
                .filter(|i| i.repo == repo && i.pull.is_some())
                .filter(|i| match state {
                    "open" => i.open,
                    "closed" => !i.open,
                    _ => true,
                })
                .collect();
            // Newest first: Gitea's default sort (`issue.created_unix`
            // descending).
            list.sort_by_key(|i| std::cmp::Reverse(i.number));
            Ok((
                StatusCode::OK,
                Value::Array(list.into_iter().map(pull_json).collect()),
            ))
        }
        ("GET", "/pulls/{base}/{head}") => {
            // `head` is a branch of this repository, or `owner:branch` /
            // `owner/name:branch` of another. The first pull request with
            // that base and head, whatever its state, as Gitea's
            // `GetPullRequestByBaseHeadInfo` answers.
            let (base, head) = (r.arg("base"), r.arg("head"));
            let name = repo.split('/').nth(1).unwrap_or_default();
            let (head_repo, branch) = match head.split_once(':') {
                Some((owner, branch)) if owner.contains('/') => (owner.to_owned(), branch),
                Some((owner, branch)) => (format!("{owner}/{name}"), branch),
                None => (repo.to_owned(), head.as_str()),
            };
            let pr = s
                .issues
                .iter()
                .filter(|i| i.repo == repo && i.head_repo() == head_repo)
                .filter(|i| {
                    i.pull
                        .as_ref()
                        .is_some_and(|(h, b)| h == branch && *b == base)
                })
                .min_by_key(|i| i.number)
                .ok_or_else(not_found)?;
            Ok((StatusCode::OK, pull_json(pr)))
        }
        ("POST", "/pulls") => match s.open_pull_announced(Kind::Gitea, repo, user, body) {
            Some(pr) => Ok((StatusCode::CREATED, pull_json(&pr))),
            None => Err((
                StatusCode::CONFLICT,
                "pull request already exists for these targets".into(),
            )),
        },
        ("GET", "/pulls/{index}") => {
            let pr = s.pull(repo, r.num("index")).ok_or_else(not_found)?;
            Ok((StatusCode::OK, pull_json(pr)))
        }
        ("PATCH", "/pulls/{index}") => {
            let pr = s
                .edit_pull_announced(Kind::Gitea, repo, user, r.num("index"), body)
                .ok_or_else(not_found)?;
            Ok((StatusCode::CREATED, pull_json(&pr)))
        }
        ("POST", "/pulls/{index}/requested_reviewers") => {
            let number = r.num("index");
            for reviewer in body["reviewers"].as_array().into_iter().flatten() {
                let reviewer = reviewer.as_str().unwrap_or_default().to_owned();
                s.review_requests
                    .push((repo.into(), number, reviewer.clone()));
                s.notify(
                    Kind::Gitea,
                    repo,
                    user,
                    Change::ReviewRequested { number, reviewer },
                );
            }
            Ok((StatusCode::CREATED, json!([])))
        }
        ("GET", "/pulls/{index}/reviews") => {
            let list: Vec<Value> = s
                .reviews
                .iter()
                .filter(|review| review.repo == repo && review.pr == r.num("index"))
                .map(|review| json!({"id": review.id, "user": user_json(Kind::Gitea, &review.user), "state": review.state, "body": review.body}))
                .collect();
            Ok((StatusCode::OK, Value::Array(list)))
        }
        ("GET", "/pulls/{index}/reviews/{id}/comments") => {
            // Gitea answers 404 for a review of another pull request.
            let id = r.num("id");
            if !s
                .reviews
                .iter()
                .any(|review| review.repo == repo && review.pr == r.num("index") && review.id == id)
            {
                return Err(not_found());
            }
            let list: Vec<Value> = s
                .review_comments
                .iter()
                .filter(|c| c.review_id == id)
                .map(|c| json!({"id": c.id, "pull_request_review_id": c.review_id, "user": user_json(Kind::Gitea, &c.user),
                               "path": c.path, "position": c.position, "body": c.body, "commit_id": c.commit_id}))
                .collect();
            Ok((StatusCode::OK, Value::Array(list)))
        }
        ("POST", "/pulls/{index}/reviews") => {
            let comments: Vec<(String, u64, String)> = body["comments"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    (
                        c["path"].as_str().unwrap_or_default().to_owned(),
                        c["new_position"].as_u64().unwrap_or_default(),
                        c["body"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect();
            let borrowed: Vec<(&str, u64, &str)> = comments
                .iter()
                .map(|(p, l, b)| (p.as_str(), *l, b.as_str()))
                .collect();
            let state = match body["event"].as_str().unwrap_or("COMMENT") {
                "APPROVED" => "APPROVED",
                "REQUEST_CHANGES" => "REQUEST_CHANGES",
                _ => "COMMENT",
            };
            let id = s.add_review(
                repo,
                r.num("index"),
                user,
                state,
                body["body"].as_str().unwrap_or_default(),
                &borrowed,
            );
            s.notify(Kind::Gitea, repo, user, Change::Reviewed { review: id });
            Ok((
                StatusCode::OK,
                json!({"id": id, "user": user_json(Kind::Gitea, user), "state": state}),
            ))
        }
        ("POST", "/statuses/{sha}") => {
            let sha = r.arg("sha");
            s.statuses.push((
                repo.into(),
                sha.clone(),
                body["state"].as_str().unwrap_or_default().into(),
                body["context"].as_str().unwrap_or_default().into(),
                body["description"].as_str().unwrap_or_default().into(),
            ));
            Ok((
                StatusCode::CREATED,
                json!({"state": body["state"], "context": body["context"]}),
            ))
        }
        _ => Err((
            StatusCode::NOT_IMPLEMENTED,
            format!("the fake Gitea does not do {method} {template} yet"),
        )),
    }
}

fn issue_json(i: &FakeIssue) -> Value {
    // Gitea sends `assignees: null` when there are none.
    let assignees = (!i.assignees.is_empty()).then(|| {
        i.assignees
            .iter()
            .map(|a| user_json(Kind::Gitea, a))
            .collect::<Vec<_>>()
    });
    json!({
        "id": i.number, "number": i.number, "title": i.title, "body": i.body,
        "user": user_json(Kind::Gitea, &i.user), "state": if i.open { "open" } else { "closed" },
        "labels": i.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
        "assignees": assignees,
        "pull_request": i.pull.as_ref().map(|_| json!({"merged": false})),
    })
}

fn comment_json(c: &FakeComment) -> Value {
    json!({"id": c.id, "body": c.body, "user": user_json(Kind::Gitea, &c.user)})
}

fn pull_json(i: &FakeIssue) -> Value {
    let (head, base) = i.pull.clone().unwrap_or_default();
    let branch = |repo: &str, name: &str| json!({"label": name, "ref": name, "repo": {"full_name": repo, "name": repo.split('/').nth(1)}});
    json!({
        "id": i.number, "number": i.number, "title": i.title, "body": i.body,
        "state": if i.open { "open" } else { "closed" },
        "html_url": format!("http://gitea.invalid/{}/pulls/{}", i.repo, i.number),
        "head": branch(i.head_repo(), &head), "base": branch(&i.repo, &base),
        "user": user_json(Kind::Gitea, &i.user), "merged": false, "merged_at": null,
    })
}
