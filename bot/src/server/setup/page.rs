//! The set-up pages' HTML. Everything put in a page is escaped.

use forgehand_forge::admin::github::{Manifest, APP_PERMISSIONS, EVENTS};

use crate::github_app::StoredApp;

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A path segment, percent-encoded.
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn document(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{title} · Forgehand</title>\
         <style>body{{font:16px/1.5 system-ui,sans-serif;max-width:42em;margin:3em auto;padding:0 1em}}\
         code{{background:#eee;padding:0 .2em}}button{{font-size:1em;padding:.5em 1em}}</style>\
         </head><body><h1>{title}</h1>\n{body}\n</body></html>\n",
        title = escape(title)
    )
}

pub fn message(title: &str, text: &str) -> String {
    document(title, &format!("<p>{}</p>", escape(text)))
}

pub fn sign_in(token_configured: bool) -> String {
    let form = if token_configured {
        "<form method=\"post\" action=\"/setup/github\">\
         <p><label>Operator token (<code>api.token</code>): \
         <input type=\"password\" name=\"token\" autocomplete=\"off\" required></label></p>\
         <p><button type=\"submit\">Continue</button></p></form>"
    } else {
        "<p>The operator token (<code>api.token</code>) is not set, so only a one-time link opens this page.</p>"
    };
    document(
        "Create Forgehand's GitHub App",
        &format!(
            "<p>Run <code>forgehand setup github</code> (or <code>forgehand setup github --org ORG</code>) \
             on the host and open the one-time link it prints, or sign in with the operator token.</p>{form}"
        ),
    )
}

/// The form that posts the manifest to GitHub: to the person's own
/// settings or the organization's, with the state in the action as
/// GitHub's documentation shows.
pub fn manifest_form(web_url: &str, org: Option<&str>, state: &str, manifest: &Manifest) -> String {
    let settings = match org {
        Some(org) => format!("{web_url}/organizations/{}/settings/apps/new", encode(org)),
        None => format!("{web_url}/settings/apps/new"),
    };
    let action = format!("{settings}?state={state}");
    let json = serde_json::to_string(manifest).expect("a manifest serializes");
    let owner = match org {
        Some(org) => format!("the organization <strong>{}</strong>", escape(org)),
        None => "your own account".to_owned(),
    };
    let permissions: String = APP_PERMISSIONS
        .iter()
        .map(|(name, access)| format!("<li><code>{name}</code>: {access}</li>"))
        .collect();
    document(
        "Create Forgehand's GitHub App",
        &format!(
            "<p>This creates a GitHub App named <strong>{name}</strong> owned by {owner}, \
             with its webhook at <code>{hook}</code>.</p>\
             <p>Repository permissions:</p><ul>{permissions}</ul>\
             <p>Events: {events}.</p>\
             <form method=\"post\" action=\"{action}\">\
             <input type=\"hidden\" name=\"manifest\" value=\"{json}\">\
             <p><button type=\"submit\">Create the App on GitHub</button></p></form>\
             <p>GitHub asks you to confirm, then sends you back here; Forgehand stores the App's \
             key and webhook secret and uses them at once.</p>",
            name = escape(&manifest.name),
            hook = escape(&manifest.hook_attributes.url),
            events = escape(&EVENTS.join(", ")),
            action = escape(&action),
            json = escape(&json),
        ),
    )
}

pub fn created(app: &StoredApp, bot_username: &str) -> String {
    let login = app.bot_login();
    let note = if bot_username.trim_end_matches("[bot]") == app.slug {
        String::new()
    } else {
        format!(
            "<p><strong>Note:</strong> its comments are signed <code>{login}</code> but \
             <code>bot.username</code> is <code>{name}</code>: set <code>bot.username = \"{slug}\"</code> \
             so that mentions of <code>@{slug}</code> reach Forgehand, and restart it.</p>",
            login = escape(&login),
            name = escape(bot_username),
            slug = escape(&app.slug)
        )
    };
    document(
        "GitHub App created",
        &format!(
            "<p><strong>{name}</strong> (App id {id}) is stored and in use: Forgehand signs in as it \
             and checks its webhook secret from now on.</p>{note}\
             <p>Next: <a href=\"{install}\">install it on your repositories</a>, then label an issue.</p>",
            name = escape(&app.name),
            id = app.id,
            install = escape(&app.install_url()),
        ),
    )
}

pub fn already(app_id: u64, stored: Option<&StoredApp>) -> String {
    match stored.filter(|s| s.id == app_id) {
        Some(app) => document(
            "GitHub App already set up",
            &format!(
                "<p>Forgehand signs in as <strong>{name}</strong> (App id {id}). \
                 <a href=\"{install}\">Install it on more repositories</a>.</p>\
                 <p>To create another, delete <code>github.app_dir</code>'s files and restart.</p>",
                name = escape(&app.name),
                id = app.id,
                install = escape(&app.install_url()),
            ),
        ),
        None => message(
            "GitHub App already configured",
            &format!(
                "Forgehand signs in as the App {app_id} its configuration names (github.app_id)."
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_page_holds_is_escaped() {
        let manifest = Manifest::forgehand(
            "fh\"><script>x</script>",
            "https://fh.example",
            "https://fh.example/setup/github/callback",
        );
        let html = manifest_form("https://github.com", Some("a&b"), "s1", &manifest);
        assert!(!html.contains("<script>x"), "{html}");
        assert!(
            html.contains(
                "action=\"https://github.com/organizations/a%26b/settings/apps/new?state=s1\""
            ),
            "{html}"
        );
        // The manifest survives the attribute: un-escaped, it is the JSON.
        let start = html.find("name=\"manifest\" value=\"").unwrap() + 23;
        let end = start + html[start..].find('"').unwrap();
        let json = html[start..end]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#39;", "'")
            .replace("&amp;", "&");
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed["name"], "fh\"><script>x</script>");
        assert_eq!(
            parsed["hook_attributes"]["url"],
            "https://fh.example/webhooks/github"
        );
        assert_eq!(
            parsed["redirect_url"],
            "https://fh.example/setup/github/callback"
        );
        assert_eq!(parsed["default_permissions"]["pull_requests"], "write");
    }
}
