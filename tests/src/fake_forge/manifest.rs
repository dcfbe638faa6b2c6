//! GitHub's web side of the App manifest flow, on the fake: the form post
//! to `/settings/apps/new` (or an organization's) makes the App, as a
//! person pressing "Create GitHub App" would, and sends the browser back
//! to the manifest's `redirect_url` with a code and the form's `state`;
//! the App's page and its install page answer. The manifest is checked
//! against what GitHub's documentation ("Registering a GitHub App from a
//! manifest") allows; anything else is answered 422 and recorded as a
//! violation.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::hooks::{Hook, HookScope};
use super::state::{ForgeState, ManifestApp};

/// The manifest's keys GitHub documents.
const KEYS: [&str; 12] = [
    "name",
    "url",
    "hook_attributes",
    "redirect_url",
    "callback_urls",
    "setup_url",
    "description",
    "public",
    "default_events",
    "default_permissions",
    "request_oauth_on_install",
    "setup_on_update",
];

/// Repository and account permissions a manifest may ask for (GitHub's
/// "Permissions required for GitHub Apps"), each read, write or admin.
const PERMISSIONS: [&str; 24] = [
    "actions",
    "administration",
    "checks",
    "contents",
    "deployments",
    "environments",
    "issues",
    "metadata",
    "packages",
    "pages",
    "pull_requests",
    "repository_hooks",
    "repository_projects",
    "secret_scanning_alerts",
    "secrets",
    "security_events",
    "single_file",
    "statuses",
    "vulnerability_alerts",
    "workflows",
    "members",
    "organization_administration",
    "organization_hooks",
    "organization_projects",
];

/// Events an App may subscribe to, and the permission each needs.
const EVENTS: [(&str, &str); 9] = [
    ("issues", "issues"),
    ("issue_comment", "issues"),
    ("label", "metadata"),
    ("pull_request", "pull_requests"),
    ("pull_request_review", "pull_requests"),
    ("pull_request_review_comment", "pull_requests"),
    ("pull_request_review_thread", "pull_requests"),
    ("check_run", "checks"),
    ("status", "statuses"),
];

/// Whether `path` is one of GitHub's web pages the fake serves.
pub(super) fn is_web(path: &str) -> bool {
    path == "/settings/apps/new"
        || (path.starts_with("/organizations/") && path.ends_with("/settings/apps/new"))
        || (path.starts_with("/apps/") && path.ends_with("/installations/new"))
}

pub(super) fn serve(
    s: &mut ForgeState,
    method: &str,
    path: &str,
    query: &str,
    body: &[u8],
) -> Response {
    if path.starts_with("/apps/") {
        let slug = path
            .trim_start_matches("/apps/")
            .trim_end_matches("/installations/new");
        return match s.manifest_apps.iter().find(|a| a.slug == slug) {
            Some(app) => (StatusCode::OK, format!("Install {}\n", app.name)).into_response(),
            None => (StatusCode::NOT_FOUND, "no such App\n").into_response(),
        };
    }
    if method != "POST" {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            "POST the manifest form here\n",
        )
            .into_response();
    }
    let owner = match path.strip_prefix("/organizations/") {
        Some(rest) => rest.split('/').next().unwrap_or_default().to_owned(),
        None => s.web_user.clone(),
    };
    let state = url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned());
    let manifest = url::form_urlencoded::parse(body)
        .find(|(k, _)| k == "manifest")
        .map(|(_, v)| v.into_owned());
    let checked = manifest
        .ok_or_else(|| "the form has no `manifest` field".to_owned())
        .and_then(|m| check(&m));
    let manifest = match checked {
        Ok(m) => m,
        Err(problem) => {
            let problem = format!("POST {path}: {problem}");
            s.violations.push(problem.clone());
            return (StatusCode::UNPROCESSABLE_ENTITY, problem).into_response();
        }
    };
    let app = create(s, &manifest, &owner);
    let mut target = url::Url::parse(manifest["redirect_url"].as_str().unwrap_or_default())
        .expect("checked above");
    {
        let mut pairs = target.query_pairs_mut();
        pairs.append_pair("code", &app.code);
        if let Some(state) = &state {
            pairs.append_pair("state", state);
        }
    }
    (StatusCode::FOUND, [(header::LOCATION, target.to_string())]).into_response()
}

/// The manifest, if GitHub would take it.
fn check(text: &str) -> Result<Map<String, Value>, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    let m = value
        .as_object()
        .ok_or("the manifest is not an object")?
        .clone();
    if let Some(k) = m.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!(
            "the manifest has `{k}`, which GitHub does not take"
        ));
    }
    let name = m.get("name").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() || name.chars().count() > 34 {
        return Err("`name` must be 1 to 34 characters".into());
    }
    let http = |key: &str, v: Option<&Value>| -> Result<(), String> {
        let url = v
            .and_then(Value::as_str)
            .ok_or(format!("`{key}` is required"))?;
        match url::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
            _ => Err(format!("`{key}` is not an http(s) URL: {url}")),
        }
    };
    http("url", m.get("url"))?;
    http("redirect_url", m.get("redirect_url"))?;
    let hook = m
        .get("hook_attributes")
        .and_then(Value::as_object)
        .ok_or("`hook_attributes` is required")?;
    if let Some(k) = hook
        .keys()
        .find(|k| !["url", "active"].contains(&k.as_str()))
    {
        return Err(format!("`hook_attributes.{k}` is not GitHub's"));
    }
    http("hook_attributes.url", hook.get("url"))?;
    if hook.get("active").is_some_and(|a| !a.is_boolean()) {
        return Err("`hook_attributes.active` is not a boolean".into());
    }
    if m.get("public").is_some_and(|p| !p.is_boolean()) {
        return Err("`public` is not a boolean".into());
    }
    let permissions = m
        .get("default_permissions")
        .and_then(Value::as_object)
        .ok_or("`default_permissions` is required")?;
    for (k, v) in permissions {
        if !PERMISSIONS.contains(&k.as_str()) {
            return Err(format!("`default_permissions.{k}` is not a permission"));
        }
        if !matches!(v.as_str(), Some("read" | "write" | "admin")) {
            return Err(format!(
                "`default_permissions.{k}` must be read, write or admin"
            ));
        }
    }
    let events = m
        .get("default_events")
        .and_then(Value::as_array)
        .ok_or("`default_events` is required")?;
    for e in events {
        let e = e.as_str().ok_or("`default_events` holds a non-string")?;
        let (_, needs) = EVENTS
            .iter()
            .find(|(name, _)| *name == e)
            .ok_or(format!("`{e}` is not an event an App subscribes to"))?;
        if *needs != "metadata" && !permissions.contains_key(*needs) {
            return Err(format!("the event `{e}` needs the permission `{needs}`"));
        }
    }
    Ok(m)
}

/// The App GitHub makes: a key pair, a webhook secret, a code for the
/// conversion, and its webhook registered (it hears the repositories it
/// is installed on).
fn create(s: &mut ForgeState, m: &Map<String, Value>, owner: &str) -> ManifestApp {
    let name = m["name"].as_str().unwrap_or_default().to_owned();
    let slug: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let id = 900_000 + s.id();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (pem, public) = crate::github_app::key_pair(dir.path(), "app");
    let hook_url = m["hook_attributes"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let webhook_secret = format!("whsec-{}", uuid::Uuid::new_v4().simple());
    let hook = Hook {
        id: 0,
        url: hook_url,
        secret: webhook_secret.clone(),
        scope: Some(HookScope::App(id)),
        events: m["default_events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e.as_str().map(str::to_owned))
            .collect(),
        active: m["hook_attributes"]["active"].as_bool().unwrap_or(true),
        content_type: "json".into(),
    };
    s.webhooks.add(hook);
    s.apps.push((id, public));
    let app = ManifestApp {
        id,
        slug,
        name,
        owner: owner.to_owned(),
        url: m["url"].as_str().unwrap_or_default().to_owned(),
        code: uuid::Uuid::new_v4().simple().to_string(),
        converted: false,
        webhook_secret,
        pem,
        permissions: m["default_permissions"]
            .as_object()
            .cloned()
            .unwrap_or_default(),
        events: m["default_events"].clone(),
        manifest: Value::Object(m.clone()),
    };
    s.manifest_apps.push(app.clone());
    app
}
