//! `forgehand setup github [--org ORG]`: a one-time link to the set-up
//! page of the running `forgehand serve`, then waiting until the App it
//! makes is stored.

use std::io::Write;
use std::time::Duration;

use crate::config::Config;
use crate::github_app::{self, links};

use super::{step, Stop};

pub struct AppArgs {
    pub org: Option<String>,
    /// The App's name (default: `bot.username`).
    pub name: Option<String>,
    /// Print the link and return, without waiting for the App.
    pub no_wait: bool,
}

/// GitHub's longest App name.
const MAX_NAME: usize = 34;

pub async fn setup_github_app(
    config: &Config,
    args: AppArgs,
    out: &mut impl Write,
) -> Result<(), Stop> {
    let github = &config.github;
    if github.token.is_some() {
        return Err(Stop(
            "github.token is set: that is the token mode (`forgehand setup github --repo OWNER/NAME` wires a repository's webhook); remove github.token to create a GitHub App instead".into(),
        ));
    }
    if let Some(app_id) = github.app_id {
        match github_app::load(&github.app_dir).ok().flatten().filter(|a| a.id == app_id) {
            Some(app) => {
                step(out, format!("Forgehand already signs in as the GitHub App {} (id {app_id}), stored in {}.", app.name, github.app_dir.display()));
                step(out, format!("Install it on more repositories: {}", app.install_url()));
            }
            None => step(out, format!("Forgehand already signs in as the GitHub App {app_id} (github.app_id); nothing to do.")),
        }
        return Ok(());
    }
    let public_url = config.server.public_url().ok_or_else(|| {
        Stop("server.public_url is not set: GitHub must know the address it reaches Forgehand at (its webhook, and where to send you back)".into())
    })?;
    let name = args.name.unwrap_or_else(|| config.bot.username.clone());
    if name.trim().is_empty() || name.chars().count() > MAX_NAME {
        return Err(Stop(format!(
            "the App's name must be 1 to {MAX_NAME} characters (GitHub's rule): `{name}`"
        )));
    }
    let now = crate::time::now_ms() / 1000;
    let token = links::create(&github.app_dir, &name, args.org.as_deref(), now).map_err(|e| {
        Stop(format!(
            "cannot write the set-up link into {}: {e}",
            github.app_dir.display()
        ))
    })?;
    let owner = match &args.org {
        Some(org) => format!("the organization {org}"),
        None => "your own GitHub account".into(),
    };
    step(
        out,
        format!("Open this link in a browser to create the GitHub App {name} for {owner}"),
    );
    step(
        out,
        format!(
            "(it works once, for {} minutes):",
            links::LINK_TTL.as_secs() / 60
        ),
    );
    step(out, "");
    step(out, format!("  {public_url}/setup/github?link={token}"));
    step(out, "");
    let dir = std::path::absolute(&github.app_dir).unwrap_or_else(|_| github.app_dir.clone());
    step(
        out,
        format!(
            "forgehand serve must be running at {public_url} with the same github.app_dir ({}).",
            dir.display()
        ),
    );
    if args.no_wait {
        return Ok(());
    }
    step(out, "Waiting for the App…");
    let deadline = tokio::time::Instant::now() + links::LINK_TTL;
    loop {
        match github_app::load(&github.app_dir) {
            Ok(Some(app)) => {
                step(
                    out,
                    format!(
                        "Created the GitHub App {} (id {}); forgehand serve uses it now.",
                        app.name, app.id
                    ),
                );
                step(
                    out,
                    format!("Install it on your repositories: {}", app.install_url()),
                );
                return Ok(());
            }
            Ok(None) => {}
            Err(problem) => return Err(Stop(problem)),
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Stop(
                "the link expired before an App was created; run `forgehand setup github` again"
                    .into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
