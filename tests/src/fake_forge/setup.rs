//! What setting Forgehand up asks of the fake forges: a repository as the
//! token sees it (its permissions; a classic GitHub token's scopes),
//! webhooks made through the API (which then receive the fake's
//! deliveries), pings and Gitea's test deliveries, labels, Gitea's token
//! scopes, and GitHub's App manifest conversion and `GET /app`.

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::hooks::{Change, Hook, HookScope};
use super::state::{FakeLabel, ForgeState};
use super::{user_json, Answer, Kind, Request};

fn not_found() -> (StatusCode, String) {
    (StatusCode::NOT_FOUND, "Not Found".to_owned())
}

/// The login's permission on `key` (a repository `owner/name`, or an
/// organization's name for its owners).
fn level(s: &ForgeState, key: &str, login: &str) -> String {
    s.permissions
        .get(&(key.to_owned(), login.to_owned()))
        .cloned()
        .unwrap_or_else(|| "none".into())
}

fn is_admin(level: &str) -> bool {
    matches!(level, "admin" | "owner")
}

fn can_push(level: &str) -> bool {
    matches!(level, "write" | "admin" | "owner")
}

/// GitHub's setup routes; `None` when `t` is not one.
pub(super) fn github(
    s: &mut ForgeState,
    method: &str,
    template: &str,
    r: &Request<'_>,
) -> Option<Answer> {
    let t = template.strip_prefix("/repos/{owner}/{repo}");
    let repo = r.repo.to_owned();
    let scope = HookScope::Repo(repo.clone());
    let answer = match (method, t, template) {
        ("POST", _, "/app-manifests/{code}/conversions") => convert(s, &r.arg("code")),
        ("GET", _, "/user") => Ok((StatusCode::OK, user_json(Kind::GitHub, r.user))),
        ("GET", _, "/app") => {
            let id: u64 = r.user.strip_prefix("app:")?.parse().ok()?;
            let app = s.manifest_apps.iter().find(|a| a.id == id);
            Ok((
                StatusCode::OK,
                match app {
                    Some(a) => integration(&s.web_base, a),
                    None => {
                        json!({"id": id, "slug": "forgehand", "name": "forgehand", "html_url": format!("{}/apps/forgehand", s.web_base)})
                    }
                },
            ))
        }
        ("GET", Some(""), _) => {
            let level = level(s, &repo, r.user);
            if level == "none" {
                return Some(Err(not_found()));
            }
            if let Some(scopes) = s.token_scopes.get(r.token) {
                s.extra_headers
                    .push(("x-oauth-scopes".into(), scopes.join(", ")));
            }
            let (owner, name) = repo.split_once('/').unwrap_or_default();
            Ok((
                StatusCode::OK,
                json!({
                    "id": 1, "name": name, "full_name": repo, "private": false,
                    "owner": user_json(Kind::GitHub, owner), "default_branch": "main",
                    "html_url": format!("{}/{repo}", s.web_base),
                    "permissions": {
                        "admin": is_admin(&level), "maintain": is_admin(&level),
                        "push": can_push(&level), "triage": can_push(&level), "pull": true,
                    },
                }),
            ))
        }
        (_, Some(t), _) if t.starts_with("/hooks") => {
            if !is_admin(&level(s, &repo, r.user)) {
                let access = if method == "GET" { "read" } else { "write" };
                s.extra_headers.push((
                    "x-accepted-github-permissions".into(),
                    format!("webhooks={access}"),
                ));
                return Some(Err(not_found()));
            }
            github_hooks(s, method, t, r, scope)
        }
        ("GET", Some("/labels/{name}"), _) => {
            let name = r.arg("name");
            let label = s
                .labels
                .iter()
                .find(|l| l.scope == scope && l.name.eq_ignore_ascii_case(&name));
            match label {
                Some(l) => Ok((StatusCode::OK, label_json(Kind::GitHub, l))),
                None => Err(not_found()),
            }
        }
        ("POST", Some("/labels"), _) => {
            if !can_push(&level(s, &repo, r.user)) {
                return Some(Err(not_found()));
            }
            add_label(s, Kind::GitHub, scope, r.body)
        }
        _ => return None,
    };
    Some(answer)
}

fn github_hooks(
    s: &mut ForgeState,
    method: &str,
    t: &str,
    r: &Request<'_>,
    scope: HookScope,
) -> Answer {
    match (method, t) {
        ("GET", "/hooks") => {
            let hooks: Vec<Value> = s
                .webhooks
                .of(&scope)
                .into_iter()
                .map(|h| github_hook(h, r.repo))
                .collect();
            Ok((StatusCode::OK, Value::Array(hooks)))
        }
        ("POST", "/hooks") => {
            let url = r.body["config"]["url"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if url.is_empty() {
                return Err((
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Validation Failed: url is missing".into(),
                ));
            }
            if s.webhooks.of(&scope).iter().any(|h| h.url == url) {
                return Err((
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Validation Failed: Hook already exists on this repository".into(),
                ));
            }
            let id = s.webhooks.add(hook_from(r.body, scope, url));
            let hook = s
                .webhooks
                .get_mut(id)
                .map(|h| github_hook(h, r.repo))
                .unwrap_or_default();
            Ok((StatusCode::CREATED, hook))
        }
        ("PATCH", "/hooks/{hook_id}") => {
            let hook = s
                .webhooks
                .get_mut(r.num("hook_id"))
                .filter(|h| h.scope.as_ref() == Some(&scope))
                .ok_or_else(not_found)?;
            edit_hook(hook, r.body);
            Ok((StatusCode::OK, github_hook(hook, r.repo)))
        }
        ("POST", "/hooks/{hook_id}/pings") => {
            let id = r.num("hook_id");
            if !s.webhooks.of(&scope).iter().any(|h| h.id == id) {
                return Err(not_found());
            }
            s.notify(Kind::GitHub, r.repo, r.user, Change::Ping { hook: id });
            Ok((StatusCode::NO_CONTENT, Value::Null))
        }
        _ => Err((
            StatusCode::NOT_IMPLEMENTED,
            format!("the fake GitHub does not do {method} {t} yet"),
        )),
    }
}

fn hook_from(body: &Value, scope: HookScope, url: String) -> Hook {
    let config = &body["config"];
    Hook {
        id: 0,
        url,
        secret: config["secret"].as_str().unwrap_or_default().to_owned(),
        scope: Some(scope),
        events: strings(&body["events"]),
        active: body["active"].as_bool().unwrap_or(true),
        content_type: config["content_type"].as_str().unwrap_or("form").to_owned(),
    }
}

fn edit_hook(hook: &mut Hook, body: &Value) {
    let config = &body["config"];
    if let Some(url) = config["url"].as_str() {
        hook.url = url.to_owned();
    }
    if let Some(secret) = config["secret"].as_str() {
        hook.secret = secret.to_owned();
    }
    if let Some(kind) = config["content_type"].as_str() {
        hook.content_type = kind.to_owned();
    }
    if body.get("events").is_some() {
        hook.events = strings(&body["events"]);
    }
    if let Some(active) = body["active"].as_bool() {
        hook.active = active;
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_owned))
        .collect()
}

fn github_hook(h: &Hook, repo: &str) -> Value {
    let base = format!("https://api.github.invalid/repos/{repo}/hooks/{}", h.id);
    json!({
        "type": "Repository", "id": h.id, "name": "web", "active": h.active, "events": h.events,
        "config": {"content_type": h.content_type, "insecure_ssl": "0", "url": h.url, "secret": "********"},
        "updated_at": "2026-01-01T00:00:00Z", "created_at": "2026-01-01T00:00:00Z",
        "url": base, "test_url": format!("{base}/test"), "ping_url": format!("{base}/pings"),
        "deliveries_url": format!("{base}/deliveries"),
        "last_response": {"code": null, "status": "unused", "message": null},
    })
}

fn label_json(kind: Kind, l: &FakeLabel) -> Value {
    match kind {
        Kind::GitHub => json!({
            "id": l.id, "node_id": format!("LA_{}", l.id), "url": "https://api.github.invalid/labels",
            "name": l.name, "color": l.color, "description": l.description, "default": false,
        }),
        Kind::Gitea => json!({
            "id": l.id, "name": l.name, "color": l.color, "description": l.description,
            "exclusive": false, "is_archived": false, "url": "http://gitea.invalid/labels",
        }),
    }
}

fn add_label(s: &mut ForgeState, kind: Kind, scope: HookScope, body: &Value) -> Answer {
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    let taken = s
        .labels
        .iter()
        .any(|l| l.scope == scope && l.name.eq_ignore_ascii_case(&name));
    // GitHub refuses a second label of a name; Gitea keeps both, which
    // is why a client must look before it creates.
    if taken && kind == Kind::GitHub {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            "Validation Failed: already_exists".into(),
        ));
    }
    let id = s.id();
    let label = FakeLabel {
        id,
        scope,
        name,
        color: body["color"]
            .as_str()
            .unwrap_or_default()
            .trim_start_matches('#')
            .to_owned(),
        description: body["description"].as_str().unwrap_or_default().to_owned(),
    };
    let answer = label_json(kind, &label);
    s.labels.push(label);
    Ok((StatusCode::CREATED, answer))
}

/// Gitea's setup routes; `None` when `template` is not one.
pub(super) fn gitea(
    s: &mut ForgeState,
    method: &str,
    template: &str,
    r: &Request<'_>,
) -> Option<Answer> {
    let repo = r.repo.to_owned();
    let answer = match (method, template) {
        ("GET", "/user") => Ok((StatusCode::OK, user_json(Kind::Gitea, r.user))),
        ("GET", "/repos/{owner}/{repo}") => {
            let level = level(s, &repo, r.user);
            if level == "none" {
                return Some(Err((
                    StatusCode::NOT_FOUND,
                    "The target couldn't be found.".into(),
                )));
            }
            let (owner, name) = repo.split_once('/').unwrap_or_default();
            Ok((
                StatusCode::OK,
                json!({
                    "id": 1, "name": name, "full_name": repo, "private": false,
                    "owner": user_json(Kind::Gitea, owner), "default_branch": "main",
                    "permissions": {"admin": is_admin(&level), "push": can_push(&level), "pull": true},
                }),
            ))
        }
        (_, t) if t.starts_with("/repos/{owner}/{repo}/hooks") => {
            if !is_admin(&level(s, &repo, r.user)) {
                return Some(Err((
                    StatusCode::FORBIDDEN,
                    "user should be an owner or a collaborator with admin write of a repository"
                        .into(),
                )));
            }
            let t = t.trim_start_matches("/repos/{owner}/{repo}");
            gitea_hooks(s, method, t, r, HookScope::Repo(repo))
        }
        (_, t) if t.starts_with("/orgs/{org}/hooks") => {
            let org = r.arg("org");
            if !is_admin(&level(s, &org, r.user)) {
                return Some(Err((
                    StatusCode::FORBIDDEN,
                    "Must be an organization owner".into(),
                )));
            }
            let t = t.trim_start_matches("/orgs/{org}");
            gitea_hooks(s, method, t, r, HookScope::Org(org))
        }
        ("GET", "/repos/{owner}/{repo}/labels") => {
            Ok(labels(s, Kind::Gitea, &HookScope::Repo(repo)))
        }
        ("GET", "/orgs/{org}/labels") => Ok(labels(s, Kind::Gitea, &HookScope::Org(r.arg("org")))),
        ("POST", "/repos/{owner}/{repo}/labels") => {
            if !can_push(&level(s, &repo, r.user)) {
                return Some(Err((
                    StatusCode::FORBIDDEN,
                    "write access to issues is required".into(),
                )));
            }
            add_label(s, Kind::Gitea, HookScope::Repo(repo), r.body)
        }
        ("POST", "/orgs/{org}/labels") => {
            let org = r.arg("org");
            if !is_admin(&level(s, &org, r.user)) {
                return Some(Err((
                    StatusCode::FORBIDDEN,
                    "Must be an organization owner".into(),
                )));
            }
            add_label(s, Kind::Gitea, HookScope::Org(org), r.body)
        }
        _ => return None,
    };
    Some(answer)
}

fn labels(s: &ForgeState, kind: Kind, scope: &HookScope) -> (StatusCode, Value) {
    let list = s
        .labels
        .iter()
        .filter(|l| &l.scope == scope)
        .map(|l| label_json(kind, l))
        .collect();
    (StatusCode::OK, Value::Array(list))
}

fn gitea_hooks(
    s: &mut ForgeState,
    method: &str,
    t: &str,
    r: &Request<'_>,
    scope: HookScope,
) -> Answer {
    match (method, t) {
        ("GET", "/hooks") => Ok((
            StatusCode::OK,
            Value::Array(s.webhooks.of(&scope).into_iter().map(gitea_hook).collect()),
        )),
        ("POST", "/hooks") => {
            let url = r.body["config"]["url"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if url.is_empty() || r.body["config"]["content_type"].as_str().is_none() {
                return Err((
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Missing config option: url, content_type".into(),
                ));
            }
            // Gitea keeps a second hook to the same address.
            let id = s.webhooks.add(hook_from(r.body, scope, url));
            let hook = s
                .webhooks
                .get_mut(id)
                .map(|h| gitea_hook(h))
                .unwrap_or_default();
            Ok((StatusCode::CREATED, hook))
        }
        ("PATCH", "/hooks/{id}") => {
            let hook = s
                .webhooks
                .get_mut(r.num("id"))
                .filter(|h| h.scope.as_ref() == Some(&scope))
                .ok_or_else(not_found)?;
            edit_hook(hook, r.body);
            Ok((StatusCode::OK, gitea_hook(hook)))
        }
        ("POST", "/hooks/{id}/tests") => {
            let id = r.num("id");
            if !s.webhooks.of(&scope).iter().any(|h| h.id == id) {
                return Err(not_found());
            }
            s.notify(Kind::Gitea, r.repo, r.user, Change::TestPush { hook: id });
            Ok((StatusCode::NO_CONTENT, Value::Null))
        }
        _ => Err((
            StatusCode::NOT_IMPLEMENTED,
            format!("the fake Gitea does not do {method} {t} yet"),
        )),
    }
}

fn gitea_hook(h: &Hook) -> Value {
    // Gitea never shows the secret.
    json!({
        "id": h.id, "type": "gitea", "active": h.active, "events": h.events, "branch_filter": "*",
        "config": {"url": h.url, "content_type": h.content_type, "http_method": "post"},
        "authorization_header": "", "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
    })
}

/// The scope a Gitea token needs for a call, as Gitea's API routes ask
/// it: the category by the path (issues and labels are `issue`,
/// organizations `organization`, `/user` `user`, the rest of a
/// repository `repository`), `read:` for GET, `write:` otherwise.
pub(super) fn gitea_scope(method: &str, template: &str) -> String {
    let category = if template == "/user" || template.starts_with("/user/") {
        "user"
    } else if template.starts_with("/orgs/") {
        "organization"
    } else if template.contains("/issues") || template.contains("/labels") {
        "issue"
    } else {
        "repository"
    };
    let access = if method == "GET" { "read" } else { "write" };
    format!("{access}:{category}")
}

/// Whether `granted` (a token's scopes) covers `needed`: `all`, the scope
/// itself, or `write:` for a `read:`.
pub(super) fn covers(granted: &[String], needed: &str) -> bool {
    let write = needed.replacen("read:", "write:", 1);
    granted
        .iter()
        .any(|g| g == "all" || g == needed || *g == write)
}

/// The App made from a manifest, once GitHub hands over its credentials.
fn convert(s: &mut ForgeState, code: &str) -> Answer {
    let web_base = s.web_base.clone();
    let app = s
        .manifest_apps
        .iter_mut()
        .find(|a| a.code == code && !a.converted)
        .ok_or_else(not_found)?;
    app.converted = true;
    let mut answer = integration(&web_base, app);
    answer["client_id"] = json!(format!("Iv1.{:016x}", app.id));
    answer["client_secret"] = json!(format!("{:040x}", app.id));
    answer["webhook_secret"] = json!(app.webhook_secret);
    answer["pem"] = json!(app.pem);
    Ok((StatusCode::CREATED, answer))
}

fn integration(web_base: &str, a: &super::state::ManifestApp) -> Value {
    let owner = user_json(Kind::GitHub, &a.owner);
    let permissions: serde_json::Map<String, Value> = a.permissions.clone();
    json!({
        "id": a.id, "slug": a.slug, "node_id": format!("A_{}", a.id), "client_id": format!("Iv1.{:016x}", a.id),
        "owner": owner, "name": a.name, "description": null, "external_url": a.url,
        "html_url": format!("{web_base}/apps/{}", a.slug),
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
        "permissions": permissions, "events": a.events, "installations_count": 0,
    })
}
