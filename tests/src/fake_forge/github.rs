//! GitHub's side of the fake forge: its routes, its answers' shapes, and a
//! GitHub App's authentication (an RS256 JWT signed with the App's key
//! for the App's own calls, then installation tokens).

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::hooks::Change;
use super::state::{EditRefused, FakeComment, FakeIssue, ForgeState};
use super::{user_json, Answer, Kind, Request};
use crate::api_spec::Matched;

/// The login installation tokens act as.
pub const APP_BOT: &str = "forgehand[bot]";

/// `app:<id>` when `jwt` is an App's JWT, signed by its key, not expired.
pub(super) fn app_from_jwt(state: &ForgeState, jwt: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Claims {
        iss: Value,
    }
    let header = jsonwebtoken::decode_header(jwt).ok()?;
    if header.alg != jsonwebtoken::Algorithm::RS256 {
        return None;
    }
    state.apps.iter().find_map(|(id, public_pem)| {
        let key = jsonwebtoken::DecodingKey::from_rsa_pem(public_pem.as_bytes()).ok()?;
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        // GitHub takes the App id as a number in `iss`, which the
        // library's own issuer check would not; it is compared below.
        validation.set_required_spec_claims(&["exp"]);
        let claims = jsonwebtoken::decode::<Claims>(jwt, &key, &validation)
            .ok()?
            .claims;
        let iss = match &claims.iss {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        (iss == id.to_string()).then(|| format!("app:{id}"))
    })
}

/// Commit statuses are not in the REST subset the tests have; the body is
/// checked against the recorded real exchange
/// (`octokit-fixtures/create-status.json`) instead.
pub(super) fn outside_the_subset(
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Option<Matched> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if method == "POST" && parts.len() == 4 && parts[0] == "repos" && parts[3] == "check-runs" {
        return check_run_is_valid(body?).then(|| Matched {
            method: method.into(),
            template: "/repos/{owner}/{repo}/check-runs".into(),
            query: Vec::new(),
        });
    }
    if method != "POST" || parts.len() != 5 || parts[0] != "repos" || parts[3] != "statuses" {
        return None;
    }
    let body = body?.as_object()?;
    let known = ["state", "target_url", "description", "context"];
    let states = ["error", "failure", "pending", "success"];
    let valid = body.keys().all(|k| known.contains(&k.as_str()))
        && body
            .get("state")
            .and_then(Value::as_str)
            .is_some_and(|s| states.contains(&s))
        && body.get("context").is_none_or(Value::is_string)
        && body.get("description").is_none_or(Value::is_string);
    valid.then(|| Matched {
        method: method.into(),
        template: "/repos/{owner}/{repo}/statuses/{sha}".into(),
        query: Vec::new(),
    })
}

/// `POST /repos/{owner}/{repo}/check-runs` is not in the REST subset
/// either; its body is checked against GitHub's documented parameters
/// ("Create a check run", REST API 2022-11-28): `name` and `head_sha`
/// required, `status` and `conclusion` from their lists, a conclusion
/// required once completed, an `output` with a title and a summary.
fn check_run_is_valid(body: &Value) -> bool {
    let Some(body) = body.as_object() else {
        return false;
    };
    let known = [
        "name",
        "head_sha",
        "details_url",
        "external_id",
        "status",
        "started_at",
        "conclusion",
        "completed_at",
        "output",
        "actions",
    ];
    let statuses = [
        "queued",
        "in_progress",
        "completed",
        "waiting",
        "requested",
        "pending",
    ];
    let conclusions = [
        "action_required",
        "cancelled",
        "failure",
        "neutral",
        "success",
        "skipped",
        "stale",
        "timed_out",
    ];
    let string = |k: &str| body.get(k).and_then(Value::as_str);
    let output_ok = body.get("output").is_none_or(|o| {
        o.get("title").is_some_and(Value::is_string)
            && o.get("summary").is_some_and(Value::is_string)
            && o.as_object().is_some_and(|o| {
                o.keys().all(|k| {
                    ["title", "summary", "text", "annotations", "images"].contains(&k.as_str())
                })
            })
    });
    body.keys().all(|k| known.contains(&k.as_str()))
        && string("name").is_some()
        && string("head_sha").is_some()
        && body
            .get("status")
            .is_none_or(|v| v.as_str().is_some_and(|v| statuses.contains(&v)))
        && body
            .get("conclusion")
            .is_none_or(|v| v.as_str().is_some_and(|v| conclusions.contains(&v)))
        && (string("status") != Some("completed") || string("conclusion").is_some())
        && output_ok
}

pub(super) fn route(s: &mut ForgeState, method: &str, template: &str, r: &Request<'_>) -> Answer {
    let (repo, user, body) = (r.repo, r.user, r.body);
    let not_found = || (StatusCode::NOT_FOUND, "Not Found".to_owned());
    let t = template
        .strip_prefix("/repos/{owner}/{repo}")
        .unwrap_or(template);
    match (method, t) {
        ("GET", "/installation") => {
            let id = *s.installations.get(repo).ok_or_else(not_found)?;
            Ok((
                StatusCode::OK,
                json!({"id": id, "account": {"login": repo.split('/').next()}}),
            ))
        }
        ("POST", "/app/installations/{installation_id}/access_tokens") => {
            let id = r.num("installation_id");
            if !s.installations.values().any(|i| *i == id) {
                return Err(not_found());
            }
            let token = match &s.installation_token {
                Some(fixed) => fixed.clone(),
                None => format!("ghs_fake{:032}", s.id()),
            };
            s.tokens.insert(token.clone(), APP_BOT.into());
            s.issued_tokens.push(id);
            let ttl = s.token_ttl_secs.unwrap_or(3600);
            let expires = time::OffsetDateTime::now_utc() + time::Duration::seconds(ttl);
            let expires = expires
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap();
            Ok((
                StatusCode::CREATED,
                json!({"token": token, "expires_at": expires}),
            ))
        }
        ("GET", "/issues/{issue_number}") => {
            let issue = s.issue(repo, r.num("issue_number")).ok_or_else(not_found)?;
            Ok((StatusCode::OK, issue_json(issue)))
        }
        ("GET", "/issues/{issue_number}/comments") => {
            let list = s.comments_on(repo, r.num("issue_number")).map(comment_json);
            Ok((StatusCode::OK, Value::Array(list.collect())))
        }
        ("POST", "/issues/{issue_number}/comments") => {
            let text = body["body"].as_str().unwrap_or_default();
            let comment = s
                .comment_announced(Kind::GitHub, repo, r.num("issue_number"), user, text)
                .ok_or_else(not_found)?;
            Ok((StatusCode::CREATED, comment_json(comment)))
        }
        ("PATCH", "/issues/comments/{comment_id}") => {
            let text = body["body"].as_str().unwrap_or_default();
            let comment = s
                .edit_comment_announced(Kind::GitHub, repo, r.num("comment_id"), user, text)
                .map_err(|e| match e {
                    EditRefused::NoSuchComment => not_found(),
                    EditRefused::NotTheAuthors => (
                        StatusCode::FORBIDDEN,
                        "Must have admin rights to Repository.".into(),
                    ),
                })?;
            Ok((StatusCode::OK, comment_json(&comment)))
        }
        ("POST", "/issues/{issue_number}/reactions")
        | ("POST", "/issues/comments/{comment_id}/reactions") => {
            let target = if t.contains("comments") {
                format!("comment:{}", r.num("comment_id"))
            } else {
                format!("issue:{}", r.num("issue_number"))
            };
            let content = body["content"].as_str().unwrap_or_default().to_owned();
            // The same reaction by the same user again is the one made
            // before: 200, not a second one.
            let status = if s.react(repo, target, user, &content) {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let id = s.id();
            Ok((
                status,
                json!({"id": id, "content": content, "user": user_json(Kind::GitHub, user)}),
            ))
        }
        ("GET", "/collaborators/{username}/permission") => {
            let login = r.arg("username");
            let permission = s
                .permissions
                .get(&(repo.to_owned(), login.clone()))
                .cloned()
                .unwrap_or_else(|| "none".into());
            Ok((
                StatusCode::OK,
                json!({"permission": permission, "role_name": permission, "user": user_json(Kind::GitHub, &login)}),
            ))
        }
        ("GET", "/pulls") => {
            // GitHub's default state is `open`.
            let state = r.param("state").unwrap_or("open");
            // `head` is `user:ref-name`: branches of that user's (or
            // organization's) repositories.
            let head = r.param("head").map(|h| match h.split_once(':') {
                Some((owner, branch)) => (Some(owner.to_owned()), branch.to_owned()),
                None => (None, h.to_owned()),
            });
            let mut list: Vec<&FakeIssue> = s
                .issues
                .iter()
                .filter(|i| i.repo == repo && i.pull.is_some())
                .filter(|i| match state {
                    "open" => i.open,
                    "closed" => !i.open,
                    _ => true,
                })
                .filter(|i| match (&i.pull, &head) {
                    (Some((h, _)), Some((owner, want))) => {
                        h == want
                            && owner
                                .as_deref()
                                .is_none_or(|o| i.head_repo().split('/').next() == Some(o))
                    }
                    _ => true,
                })
                .collect();
            // Newest first: GitHub's default order (`sort=created`, `desc`).
            list.sort_by_key(|i| std::cmp::Reverse(i.number));
            Ok((
                StatusCode::OK,
                Value::Array(list.into_iter().map(pull_json).collect()),
            ))
        }
        ("POST", "/pulls") => match s.open_pull_announced(Kind::GitHub, repo, user, body) {
            Some(pr) => Ok((StatusCode::CREATED, pull_json(&pr))),
            None => Err((
                StatusCode::UNPROCESSABLE_ENTITY,
                "A pull request already exists for this head.".into(),
            )),
        },
        ("GET", "/pulls/{pull_number}") => {
            let pr = s.pull(repo, r.num("pull_number")).ok_or_else(not_found)?;
            Ok((StatusCode::OK, pull_json(pr)))
        }
        ("PATCH", "/pulls/{pull_number}") => {
            let pr = s
                .edit_pull_announced(Kind::GitHub, repo, user, r.num("pull_number"), body)
                .ok_or_else(not_found)?;
            Ok((StatusCode::OK, pull_json(&pr)))
        }
        ("POST", "/pulls/{pull_number}/requested_reviewers") => {
            let number = r.num("pull_number");
            let answer = pull_json(
                s.issues
                    .iter()
                    .find(|i| i.repo == repo && i.number == number)
                    .ok_or_else(not_found)?,
            );
            for reviewer in body["reviewers"].as_array().into_iter().flatten() {
                let reviewer = reviewer.as_str().unwrap_or_default().to_owned();
                s.review_requests
                    .push((repo.into(), number, reviewer.clone()));
                s.notify(
                    Kind::GitHub,
                    repo,
                    user,
                    Change::ReviewRequested { number, reviewer },
                );
            }
            Ok((StatusCode::CREATED, answer))
        }
        ("GET", "/pulls/{pull_number}/reviews") => {
            let list: Vec<Value> = s
                .reviews
                .iter()
                .filter(|review| review.repo == repo && review.pr == r.num("pull_number"))
                .map(|review| json!({"id": review.id, "user": user_json(Kind::GitHub, &review.user), "state": review.state, "body": review.body}))
                .collect();
            Ok((StatusCode::OK, Value::Array(list)))
        }
        ("GET", "/pulls/{pull_number}/comments") => {
            let number = r.num("pull_number");
            let reviews: Vec<u64> = s
                .reviews
                .iter()
                .filter(|review| review.repo == repo && review.pr == number)
                .map(|review| review.id)
                .collect();
            let list: Vec<Value> = s
                .review_comments
                .iter()
                .filter(|c| reviews.contains(&c.review_id))
                .map(|c| {
                    json!({"id": c.id, "pull_request_review_id": c.review_id, "user": user_json(Kind::GitHub, &c.user),
                           "path": c.path, "line": c.position, "body": c.body, "commit_id": c.commit_id,
                           "in_reply_to_id": c.in_reply_to})
                })
                .collect();
            Ok((StatusCode::OK, Value::Array(list)))
        }
        ("POST", "/pulls/{pull_number}/comments") => {
            let Some(parent) = body["in_reply_to"].as_u64() else {
                return Err((
                    StatusCode::NOT_IMPLEMENTED,
                    "the fake GitHub only takes replies here".into(),
                ));
            };
            let original = s
                .review_comments
                .iter()
                .find(|c| c.id == parent)
                .cloned()
                .ok_or_else(not_found)?;
            // GitHub files a reply under a review of the replier's own
            // (a comment-only one), not under the review it answers.
            let review_id = s.id();
            s.reviews.push(super::state::FakeReview {
                repo: repo.into(),
                pr: r.num("pull_number"),
                id: review_id,
                user: user.into(),
                state: "COMMENTED".into(),
                body: String::new(),
            });
            let id = s.id();
            s.review_comments.push(super::state::FakeReviewComment {
                review_id,
                id,
                user: user.into(),
                path: original.path.clone(),
                position: original.position,
                body: body["body"].as_str().unwrap_or_default().into(),
                commit_id: original.commit_id.clone(),
                in_reply_to: Some(parent),
            });
            s.notify(
                Kind::GitHub,
                repo,
                user,
                Change::ReviewReply { comment: id },
            );
            Ok((
                StatusCode::CREATED,
                json!({"id": id, "in_reply_to_id": parent, "body": body["body"]}),
            ))
        }
        ("POST", "/check-runs") => {
            // GitHub: "OAuth apps and authenticated users are not able to
            // create a check run"; only an App's installation can.
            if user != APP_BOT {
                return Err((
                    StatusCode::FORBIDDEN,
                    "Resource not accessible by personal access token".into(),
                ));
            }
            let state = match (body["status"].as_str(), body["conclusion"].as_str()) {
                (Some("completed"), Some(conclusion)) => conclusion.to_owned(),
                (status, _) => status.unwrap_or("queued").to_owned(),
            };
            s.statuses.push((
                repo.into(),
                body["head_sha"].as_str().unwrap_or_default().into(),
                state,
                body["name"].as_str().unwrap_or_default().into(),
                body["output"]["title"].as_str().unwrap_or_default().into(),
            ));
            let id = s.id();
            Ok((
                StatusCode::CREATED,
                json!({"id": id, "name": body["name"], "head_sha": body["head_sha"], "status": body["status"], "conclusion": body["conclusion"]}),
            ))
        }
        ("POST", "/statuses/{sha}") => {
            s.statuses.push((
                repo.into(),
                r.arg("sha"),
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
            format!("the fake GitHub does not do {method} {template} yet"),
        )),
    }
}

fn issue_json(i: &FakeIssue) -> Value {
    let mut v = json!({
        "id": i.number, "number": i.number, "title": i.title, "body": i.body,
        "user": user_json(Kind::GitHub, &i.user), "state": if i.open { "open" } else { "closed" },
        "labels": i.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
        "assignees": i.assignees.iter().map(|a| user_json(Kind::GitHub, a)).collect::<Vec<_>>(),
    });
    if i.pull.is_some() {
        v["pull_request"] = json!({"url": format!("https://api.github.invalid/repos/{}/pulls/{}", i.repo, i.number)});
    }
    v
}

fn comment_json(c: &FakeComment) -> Value {
    json!({"id": c.id, "body": c.body, "user": user_json(Kind::GitHub, &c.user)})
}

fn pull_json(i: &FakeIssue) -> Value {
    let (head, base) = i.pull.clone().unwrap_or_default();
    let branch = |repo: &str, name: &str| {
        let owner = repo.split('/').next().unwrap_or_default();
        json!({"ref": name, "label": format!("{owner}:{name}"), "repo": {"full_name": repo}})
    };
    json!({
        "id": i.number, "number": i.number, "title": i.title, "body": i.body,
        "state": if i.open { "open" } else { "closed" },
        "html_url": format!("https://github.invalid/{}/pull/{}", i.repo, i.number),
        "head": branch(i.head_repo(), &head), "base": branch(&i.repo, &base),
        "user": user_json(Kind::GitHub, &i.user), "merged_at": null,
    })
}
