//! The token mode's set-up, on either forge: one flow (check the token,
//! the webhook, the label, a test delivery seen answered), the forges'
//! differences behind [`Wiring`].

use std::io::Write;

use async_trait::async_trait;
use forgehand_forge::admin::gitea::{self, GiteaSetup};
use forgehand_forge::admin::github::{self, GitHubSetup};
use forgehand_forge::admin::{Hook, HookSpec, Outcome, Scope, SetupError};
use secrecy::SecretString;

use super::confirm::{self, Expected};
use super::{step, Stop};
use crate::config::Config;

/// Which forge the token mode sets up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenForge {
    GitHub,
    Gitea,
}

/// What differs between the forges.
#[async_trait]
trait Wiring: Send + Sync {
    /// `github` or `gitea`: the webhook path and the configuration section.
    fn family(&self) -> &'static str;
    fn events(&self) -> Vec<String>;
    /// What the token may not do that Forgehand needs, each named; `Err`
    /// when the forge could not be asked.
    async fn missing(&self, scope: &Scope) -> Result<Vec<String>, SetupError>;
    async fn ensure_hook(
        &self,
        scope: &Scope,
        spec: &HookSpec,
    ) -> Result<(Hook, Outcome), SetupError>;
    async fn ensure_label(&self, scope: &Scope, name: &str) -> Result<Outcome, SetupError>;
    /// Asks the forge for a test delivery; the event it will carry, or
    /// `None` when the forge has none for this scope (and why).
    async fn test(
        &self,
        scope: &Scope,
        hook: u64,
    ) -> Result<Result<&'static str, String>, SetupError>;
}

pub async fn setup_token_mode(
    config: &Config,
    forge: TokenForge,
    scope: Scope,
    out: &mut impl Write,
) -> Result<(), Stop> {
    let wiring = wiring(config, forge)?;
    let family = wiring.family();
    let public_url = config.server.public_url().ok_or_else(|| {
        Stop("server.public_url is not set: the webhook needs the address the forge reaches Forgehand at".into())
    })?;
    let secrets = match forge {
        TokenForge::GitHub => &config.github.webhook_secret,
        TokenForge::Gitea => &config.gitea.webhook_secret,
    };
    // The first listed: rotation adds the new one first and drops the old
    // one later (docs/configuration.md).
    let secret: SecretString = secrets.first().cloned().ok_or_else(|| {
        Stop(format!(
            "{family}.webhook_secret is not set: the webhook must be signed with it"
        ))
    })?;

    step(out, format!("Checking what the token may do on {scope}…"));
    let missing = wiring.missing(&scope).await.map_err(explain)?;
    if !missing.is_empty() {
        let list: String = missing.iter().map(|m| format!("\n  - {m}")).collect();
        return Err(Stop(format!(
            "the token cannot do what Forgehand needs on {scope}:{list}"
        )));
    }
    step(out, "  the token has what Forgehand needs");

    let spec = HookSpec {
        url: format!("{public_url}/webhooks/{family}"),
        secret,
        events: wiring.events(),
    };
    let (hook, outcome) = wiring.ensure_hook(&scope, &spec).await.map_err(explain)?;
    step(
        out,
        format!(
            "Webhook {} → {}: {} (events: {})",
            hook.id,
            spec.url,
            outcome.as_str(),
            spec.events.join(", ")
        ),
    );

    let label = &config.bot.label;
    let outcome = wiring.ensure_label(&scope, label).await.map_err(explain)?;
    step(out, format!("Label `{label}`: {}", outcome.as_str()));

    let since = crate::time::now_ms();
    let event = match wiring.test(&scope, hook.id).await.map_err(explain)? {
        Ok(event) => event,
        Err(why) => {
            step(
                out,
                format!("No test delivery: {why}. Label an issue `{label}` to try it."),
            );
            return Ok(());
        }
    };
    step(
        out,
        format!("Test delivery (`{event}`) asked for; waiting for Forgehand's record of it…"),
    );
    let repo = match &scope {
        Scope::Repo { .. } => Some(scope.to_string()),
        Scope::Org(_) => None,
    };
    let expected = Expected {
        family,
        event,
        repo: repo.as_deref(),
        since,
    };
    let outcome = confirm::answered(config, &expected).await?;
    step(
        out,
        format!("Forgehand answered the test delivery ({outcome}). {scope} is set up."),
    );
    Ok(())
}

/// A forge's refusal, said as what the token lacks.
fn explain(error: SetupError) -> Stop {
    match &error {
        SetupError::Refused { status: 401, .. } => Stop(format!("the token is not valid: {error}")),
        SetupError::Refused { status: 403, .. } => {
            Stop(format!("the token may not do this: {error}"))
        }
        _ => Stop(error.to_string()),
    }
}

fn wiring(config: &Config, forge: TokenForge) -> Result<Box<dyn Wiring>, Stop> {
    match forge {
        TokenForge::GitHub => {
            let token = config.github.token.clone().ok_or_else(|| {
                Stop("github.token is not set: the token mode needs it (for a GitHub App, run `forgehand setup github` without --repo)".into())
            })?;
            let setup = GitHubSetup::with_token(&config.github.api_url, token)
                .map_err(|e| Stop(e.to_string()))?;
            Ok(Box::new(GitHubWiring(setup)))
        }
        TokenForge::Gitea => {
            let (Some(base), Some(token)) = (&config.gitea.base_url, &config.gitea.token) else {
                return Err(Stop("gitea.base_url and gitea.token are not set".into()));
            };
            let setup = GiteaSetup::new(base, token.clone()).map_err(|e| Stop(e.to_string()))?;
            Ok(Box::new(GiteaWiring(setup)))
        }
    }
}

struct GitHubWiring(GitHubSetup);

#[async_trait]
impl Wiring for GitHubWiring {
    fn family(&self) -> &'static str {
        "github"
    }

    fn events(&self) -> Vec<String> {
        github::EVENTS.iter().map(|e| (*e).to_owned()).collect()
    }

    async fn missing(&self, scope: &Scope) -> Result<Vec<String>, SetupError> {
        let access = match self.0.repository(scope).await {
            Ok(access) => access,
            Err(e) if e.status() == Some(404) => {
                return Ok(vec![format!(
                    "access to {scope}: GitHub says it does not exist for this token"
                )])
            }
            Err(e) => return Err(e),
        };
        let mut missing = Vec::new();
        if let Some(scopes) = &access.scopes {
            if !scopes.iter().any(|s| s == "repo") {
                missing.push(format!(
                    "the scope `repo` (this classic token has: {}): Forgehand reads and writes issues, pull requests, contents and statuses, and the webhook is the repository's",
                    if scopes.is_empty() { "none".to_owned() } else { scopes.join(", ") }
                ));
            }
        }
        if !access.admin {
            missing.push(format!(
                "admin access to {scope} (webhooks are managed by its administrators; with a fine-grained token, also the permission \"Webhooks: read and write\")"
            ));
        }
        if !access.push {
            missing.push(format!(
                "write access to {scope} (Forgehand pushes its branches there)"
            ));
        }
        Ok(missing)
    }

    async fn ensure_hook(
        &self,
        scope: &Scope,
        spec: &HookSpec,
    ) -> Result<(Hook, Outcome), SetupError> {
        self.0.ensure_hook(scope, spec).await
    }

    async fn ensure_label(&self, scope: &Scope, name: &str) -> Result<Outcome, SetupError> {
        self.0.ensure_label(scope, name).await
    }

    async fn test(
        &self,
        scope: &Scope,
        hook: u64,
    ) -> Result<Result<&'static str, String>, SetupError> {
        self.0.ping(scope, hook).await?;
        Ok(Ok("ping"))
    }
}

struct GiteaWiring(GiteaSetup);

#[async_trait]
impl Wiring for GiteaWiring {
    fn family(&self) -> &'static str {
        "gitea"
    }

    fn events(&self) -> Vec<String> {
        gitea::EVENTS.iter().map(|e| (*e).to_owned()).collect()
    }

    async fn missing(&self, scope: &Scope) -> Result<Vec<String>, SetupError> {
        let login = match self.0.user().await {
            Ok(login) => login,
            Err(e) if e.status() == Some(403) => {
                return Ok(vec![format!("the scope read:user (Gitea said: {e})")])
            }
            Err(e) => return Err(e),
        };
        let mut missing = Vec::new();
        match scope {
            Scope::Repo { .. } => match self.0.repository(scope).await {
                Ok(access) => {
                    if !access.admin {
                        missing.push(format!(
                            "admin access to {scope} for {login} (webhooks are managed by a repository's administrators; or run setup with an administrator's token in FORGEHAND_GITEA__TOKEN)"
                        ));
                    }
                    if !access.push {
                        missing.push(format!(
                            "write access to {scope} for {login} (Forgehand pushes its branches there)"
                        ));
                    }
                }
                Err(e) if e.status() == Some(404) => missing.push(format!(
                    "access to {scope}: Gitea says it does not exist for {login}"
                )),
                Err(e) if e.status() == Some(403) => {
                    missing.push(format!("read access to {scope} (Gitea said: {e})"))
                }
                Err(e) => return Err(e),
            },
            Scope::Org(org) => match self.0.hooks(scope).await {
                Ok(_) => {}
                Err(e) if matches!(e.status(), Some(403 | 404)) => missing.push(format!(
                    "ownership of the organization {org} for {login}, and the scope write:organization (Gitea said: {e})"
                )),
                Err(e) => return Err(e),
            },
        }
        Ok(missing)
    }

    async fn ensure_hook(
        &self,
        scope: &Scope,
        spec: &HookSpec,
    ) -> Result<(Hook, Outcome), SetupError> {
        self.0.ensure_hook(scope, spec).await
    }

    async fn ensure_label(&self, scope: &Scope, name: &str) -> Result<Outcome, SetupError> {
        self.0.ensure_label(scope, name).await
    }

    async fn test(
        &self,
        scope: &Scope,
        hook: u64,
    ) -> Result<Result<&'static str, String>, SetupError> {
        match scope {
            Scope::Repo { .. } => {
                self.0.test_hook(scope, hook).await?;
                Ok(Ok("push"))
            }
            Scope::Org(_) => Ok(Err(
                "Gitea has no test delivery for an organization's webhook".into(),
            )),
        }
    }
}
