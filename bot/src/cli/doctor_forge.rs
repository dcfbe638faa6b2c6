//! `forgehand doctor`'s forge half: the configured credentials are valid
//! (a token's user, a GitHub App's identity), `server.public_url`
//! answers, and, for `--repo OWNER/NAME`, the App is installed there, the
//! webhook is registered and the trigger label exists. It only reads.

use std::time::Duration;

use forgehand_forge::admin::gitea::GiteaSetup;
use forgehand_forge::admin::github::{self, GitHubSetup};
use forgehand_forge::admin::{hook_for, Hook, Scope, SetupError};
use secrecy::SecretString;

use crate::config::Config;

/// One line of the report.
pub struct Line {
    pub what: &'static str,
    pub verdict: Verdict,
}

pub enum Verdict {
    Ok(String),
    /// Jobs would fail, or deliveries not arrive.
    Problem(String),
    /// Worth knowing; not a failure.
    Note(String),
}

fn line(what: &'static str, verdict: Verdict) -> Line {
    Line { what, verdict }
}

/// Every forge check; `repo` adds the per-repository ones.
pub async fn checks(config: &Config, repo: Option<&str>) -> Vec<Line> {
    let mut lines = Vec::new();
    let scope = match repo.map(Scope::repo).transpose() {
        Ok(scope) => scope,
        Err(e) => {
            lines.push(line("repository", Verdict::Problem(e.to_string())));
            None
        }
    };
    let github = config.github.token.is_some() || config.github.app_id.is_some();
    let gitea = config.gitea.base_url.is_some();
    if !github && !gitea {
        let hint = if config.github.webhook_secret.is_empty()
            && config.gitea.webhook_secret.is_empty()
        {
            Verdict::Note(
                "none configured (forgehand setup github, or gitea.base_url and gitea.token)"
                    .into(),
            )
        } else {
            // `forgehand run` needs no forge: only `serve`'s jobs would fail.
            Verdict::Note("a webhook secret is set but no forge credential yet: `forgehand run` needs none, `serve`'s jobs would fail until one is set (forgehand setup github, or github.token, github.app_id, gitea.token)".into())
        };
        lines.push(line("forge", hint));
        return lines;
    }
    if github {
        lines.extend(github_checks(config, scope.as_ref()).await);
    }
    if gitea {
        lines.extend(gitea_checks(config, scope.as_ref()).await);
    }
    lines.push(public_url(config).await);
    lines
}

async fn public_url(config: &Config) -> Line {
    let Some(base) = config.server.public_url() else {
        return line(
            "public url",
            Verdict::Note(
                "server.public_url is not set: the forge's webhooks cannot be checked from here"
                    .into(),
            ),
        );
    };
    let answer = match reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
    {
        Ok(http) => http.get(format!("{base}/healthz")).send().await,
        Err(e) => return line("public url", Verdict::Problem(e.to_string())),
    };
    match answer {
        Ok(r) if r.status().is_success() => line("public url", Verdict::Ok(format!("{base}/healthz answers"))),
        Ok(r) => line("public url", Verdict::Problem(format!("{base}/healthz answered {}", r.status()))),
        Err(e) => line(
            "public url",
            Verdict::Problem(format!("{base} does not answer ({e}): is forgehand serve running there, and is it the address the forge reaches?")),
        ),
    }
}

async fn github_checks(config: &Config, scope: Option<&Scope>) -> Vec<Line> {
    let g = &config.github;
    let mut lines = Vec::new();
    let client = if let Some(token) = &g.token {
        match GitHubSetup::with_token(&g.api_url, token.clone()) {
            Ok(client) => match client.user().await {
                Ok(login) => {
                    lines.push(line("github", Verdict::Ok(format!("a token of {login}"))));
                    Some(client)
                }
                Err(e) => {
                    lines.push(line(
                        "github",
                        Verdict::Problem(format!("the token is refused: {e}")),
                    ));
                    return lines;
                }
            },
            Err(e) => {
                lines.push(line("github", Verdict::Problem(e.to_string())));
                return lines;
            }
        }
    } else {
        let (Some(app_id), Some(path)) = (g.app_id, &g.private_key_path) else {
            return lines;
        };
        let pem = match std::fs::read_to_string(path) {
            Ok(pem) => SecretString::from(pem),
            Err(e) => {
                lines.push(line(
                    "github",
                    Verdict::Problem(format!("cannot read {}: {e}", path.display())),
                ));
                return lines;
            }
        };
        match github::app_identity(&g.api_url, app_id, &pem).await {
            Ok(app) => {
                let slug = app.slug.clone().unwrap_or_else(|| app.name.clone());
                lines.push(line(
                    "github",
                    Verdict::Ok(format!("the App {slug} (id {app_id})")),
                ));
                if config.bot.username.trim_end_matches("[bot]") != slug {
                    lines.push(line(
                        "github bot",
                        Verdict::Note(format!("bot.username is {} but the App's comments are signed {slug}[bot]: set bot.username = \"{slug}\"", config.bot.username)),
                    ));
                }
            }
            Err(e) => {
                lines.push(line(
                    "github",
                    Verdict::Problem(format!(
                        "GitHub refuses the App {app_id} with this key: {e}"
                    )),
                ));
                return lines;
            }
        }
        let Some(scope) = scope else { return lines };
        match github::installation_token(&g.api_url, app_id, &pem, scope).await {
            Ok(Some((id, token))) => {
                lines.push(line(
                    "github install",
                    Verdict::Ok(format!("installed on {scope} (installation {id})")),
                ));
                lines.push(line(
                    "github webhook",
                    Verdict::Note("an App's webhook is its own (set by its manifest)".into()),
                ));
                match GitHubSetup::with_token(&g.api_url, token) {
                    Ok(client) => lines.push(label(
                        client.label_exists(scope, &config.bot.label).await,
                        scope,
                        &config.bot.label,
                        "github label",
                    )),
                    Err(e) => lines.push(line("github label", Verdict::Problem(e.to_string()))),
                }
            }
            Ok(None) => lines.push(line(
                "github install",
                Verdict::Problem(format!("the App is not installed on {scope}")),
            )),
            Err(e) => lines.push(line("github install", Verdict::Problem(e.to_string()))),
        }
        return lines;
    };
    let (Some(client), Some(scope)) = (client, scope) else {
        return lines;
    };
    let url = config
        .server
        .public_url()
        .map(|u| format!("{u}/webhooks/github"));
    lines.push(webhook(
        client.hooks(scope).await,
        url.as_deref(),
        scope,
        "github webhook",
    ));
    lines.push(label(
        client.label_exists(scope, &config.bot.label).await,
        scope,
        &config.bot.label,
        "github label",
    ));
    lines
}

async fn gitea_checks(config: &Config, scope: Option<&Scope>) -> Vec<Line> {
    let (Some(base), Some(token)) = (&config.gitea.base_url, &config.gitea.token) else {
        return Vec::new();
    };
    let client = match GiteaSetup::new(base, token.clone()) {
        Ok(client) => client,
        Err(e) => return vec![line("gitea", Verdict::Problem(e.to_string()))],
    };
    let mut lines = match client.user().await {
        Ok(login) => vec![line(
            "gitea",
            Verdict::Ok(format!("a token of {login} at {base}")),
        )],
        Err(e) => {
            return vec![line(
                "gitea",
                Verdict::Problem(format!("the token is refused: {e}")),
            )]
        }
    };
    let Some(scope @ Scope::Repo { owner, .. }) = scope else {
        return lines;
    };
    let url = config
        .server
        .public_url()
        .map(|u| format!("{u}/webhooks/gitea"));
    // The repository's hooks, else its organization's.
    let org = Scope::Org(owner.clone());
    let hooks = match client.hooks(scope).await {
        Ok(mut hooks) => {
            hooks.extend(client.hooks(&org).await.unwrap_or_default());
            Ok(hooks)
        }
        Err(e) => Err(e),
    };
    lines.push(webhook(hooks, url.as_deref(), scope, "gitea webhook"));
    let labelled = match client.label_exists(scope, &config.bot.label).await {
        Ok(false) => Ok(client
            .label_exists(&org, &config.bot.label)
            .await
            .unwrap_or(false)),
        other => other,
    };
    lines.push(label(labelled, scope, &config.bot.label, "gitea label"));
    lines
}

fn webhook(
    hooks: Result<Vec<Hook>, SetupError>,
    url: Option<&str>,
    scope: &Scope,
    what: &'static str,
) -> Line {
    let Some(url) = url else {
        return line(
            what,
            Verdict::Note(
                "server.public_url is not set: which webhook is Forgehand's is unknown".into(),
            ),
        );
    };
    match hooks {
        Ok(hooks) => match hook_for(&hooks, url) {
            Some(h) if h.active => line(
                what,
                Verdict::Ok(format!("{url} is registered on {scope} (hook {})", h.id)),
            ),
            Some(h) => line(
                what,
                Verdict::Problem(format!("hook {} to {url} is inactive", h.id)),
            ),
            None => line(
                what,
                Verdict::Problem(format!(
                    "no webhook to {url} on {scope}: run forgehand setup"
                )),
            ),
        },
        Err(e) if e.is_refusal() || e.status() == Some(404) => line(
            what,
            Verdict::Note(format!(
                "cannot list {scope}'s webhooks with this token (only administrators can): {e}"
            )),
        ),
        Err(e) => line(what, Verdict::Problem(e.to_string())),
    }
}

fn label(found: Result<bool, SetupError>, scope: &Scope, name: &str, what: &'static str) -> Line {
    match found {
        Ok(true) => line(what, Verdict::Ok(format!("`{name}` exists on {scope}"))),
        Ok(false) => line(
            what,
            Verdict::Problem(format!(
                "no label `{name}` on {scope}: run forgehand setup, or create it"
            )),
        ),
        Err(e) => line(what, Verdict::Problem(e.to_string())),
    }
}
