//! Gitea's and Forgejo's set-up calls, with the bot's token: who it is,
//! what it may do, a repository's or organization's webhook and the
//! trigger label, and a test delivery.

use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::http::{Auth, Http};
use super::{hook_for, Hook, HookSpec, Outcome, Scope, SetupError, LABEL_COLOR, LABEL_DESCRIPTION};

/// The events Forgehand acts on, as Gitea's hook API names them: `issues`
/// and `pull_request` stand for all their kinds (labels, assignment,
/// comments); the review and comment kinds are named too, as Gitea's own
/// settings page lists them.
pub const EVENTS: [&str; 7] = [
    "issues",
    "issue_comment",
    "pull_request",
    "pull_request_comment",
    "pull_request_review_approved",
    "pull_request_review_rejected",
    "pull_request_review_comment",
];

/// Items asked for per page: Gitea's default `MAX_RESPONSE_ITEMS`.
const PAGE: usize = 50;
/// Lists stop here (2,500 hooks or labels).
const MAX_PAGES: usize = 50;

pub struct GiteaSetup {
    http: Http,
}

/// A repository as the token sees it.
#[derive(Debug, Clone)]
pub struct RepoAccess {
    pub admin: bool,
    pub push: bool,
}

#[derive(Deserialize)]
struct User {
    login: String,
}

#[derive(Deserialize)]
struct RepoAnswer {
    permissions: Option<Permissions>,
}

#[derive(Deserialize)]
struct Permissions {
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    push: bool,
}

#[derive(Deserialize)]
struct HookAnswer {
    id: u64,
    #[serde(default)]
    active: bool,
    #[serde(default)]
    events: Vec<String>,
    #[serde(default)]
    config: std::collections::HashMap<String, String>,
}

impl From<HookAnswer> for Hook {
    fn from(mut h: HookAnswer) -> Hook {
        Hook {
            id: h.id,
            url: h.config.remove("url").unwrap_or_default(),
            events: h.events,
            active: h.active,
            content_type: h.config.remove("content_type"),
        }
    }
}

#[derive(Serialize)]
struct NewHook<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    active: bool,
    branch_filter: &'static str,
    events: &'a [String],
    config: HookConfig<'a>,
}

#[derive(Serialize)]
struct EditHook<'a> {
    active: bool,
    branch_filter: &'static str,
    events: &'a [String],
    config: HookConfig<'a>,
}

#[derive(Serialize)]
struct HookConfig<'a> {
    url: &'a str,
    content_type: &'static str,
    http_method: &'static str,
    secret: &'a str,
}

#[derive(Deserialize)]
struct LabelAnswer {
    name: String,
}

#[derive(Serialize)]
struct NewLabel<'a> {
    name: &'a str,
    color: String,
    description: &'a str,
}

impl GiteaSetup {
    /// `base_url` is the server, not its `/api/v1`.
    pub fn new(base_url: &str, token: SecretString) -> Result<Self, SetupError> {
        let api = format!("{}/api/v1", base_url.trim_end_matches('/'));
        Ok(GiteaSetup {
            http: Http::new(&api, Auth::Token(token), Vec::new())?,
        })
    }

    /// The token's user (needs the `read:user` scope).
    pub async fn user(&self) -> Result<String, SetupError> {
        Ok(self.http.get::<User>("/user").await?.login)
    }

    pub async fn repository(&self, repo: &Scope) -> Result<RepoAccess, SetupError> {
        let answer: RepoAnswer = self.http.get(&repo.path()).await?;
        let p = answer.permissions.unwrap_or(Permissions {
            admin: false,
            push: false,
        });
        Ok(RepoAccess {
            admin: p.admin,
            push: p.push,
        })
    }

    /// Every item of a list Gitea pages.
    async fn list<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>, SetupError> {
        let mut items = Vec::new();
        for page in 1..=MAX_PAGES {
            let answer = self
                .http
                .send(
                    Method::GET,
                    &format!("{path}?page={page}&limit={PAGE}"),
                    None::<&()>,
                )
                .await?;
            let total: Option<usize> = answer
                .header("x-total-count")
                .and_then(|v| v.trim().parse().ok());
            let got: Vec<T> = answer.json()?;
            let short = got.is_empty();
            items.extend(got);
            if short || total.is_some_and(|t| items.len() >= t) {
                break;
            }
        }
        Ok(items)
    }

    pub async fn hooks(&self, scope: &Scope) -> Result<Vec<Hook>, SetupError> {
        let hooks: Vec<HookAnswer> = self.list(&format!("{}/hooks", scope.path())).await?;
        Ok(hooks.into_iter().map(Hook::from).collect())
    }

    /// Makes the webhook to `spec.url` what `spec` says: created when
    /// missing, written again when there (Gitea never shows a secret, so
    /// it cannot be compared).
    pub async fn ensure_hook(
        &self,
        scope: &Scope,
        spec: &HookSpec,
    ) -> Result<(Hook, Outcome), SetupError> {
        let hooks = self.hooks(scope).await?;
        let config = HookConfig {
            url: &spec.url,
            content_type: "json",
            http_method: "post",
            secret: spec.secret.expose_secret(),
        };
        let answer = match hook_for(&hooks, &spec.url) {
            Some(existing) => {
                let body = EditHook {
                    active: true,
                    branch_filter: "*",
                    events: &spec.events,
                    config,
                };
                let path = format!("{}/hooks/{}", scope.path(), existing.id);
                (
                    self.http.send(Method::PATCH, &path, Some(&body)).await?,
                    Outcome::Updated,
                )
            }
            None => {
                let body = NewHook {
                    kind: "gitea",
                    active: true,
                    branch_filter: "*",
                    events: &spec.events,
                    config,
                };
                let path = format!("{}/hooks", scope.path());
                (
                    self.http.send(Method::POST, &path, Some(&body)).await?,
                    Outcome::Created,
                )
            }
        };
        let hook: HookAnswer = answer.0.json()?;
        Ok((hook.into(), answer.1))
    }

    /// Asks Gitea to send the repository's hook a test delivery (a `push`
    /// of the default branch's last commit). Gitea has no such call for
    /// an organization's hooks.
    pub async fn test_hook(&self, repo: &Scope, hook: u64) -> Result<(), SetupError> {
        if matches!(repo, Scope::Org(_)) {
            return Err(SetupError::Invalid(
                "Gitea cannot send a test delivery to an organization's webhook".into(),
            ));
        }
        self.http
            .send(
                Method::POST,
                &format!("{}/hooks/{hook}/tests", repo.path()),
                None::<&()>,
            )
            .await?;
        Ok(())
    }

    /// Whether a label `name` is there, whatever its case.
    pub async fn label_exists(&self, scope: &Scope, name: &str) -> Result<bool, SetupError> {
        let labels: Vec<LabelAnswer> = self.list(&format!("{}/labels", scope.path())).await?;
        Ok(labels.iter().any(|l| l.name.eq_ignore_ascii_case(name)))
    }

    /// Creates the label `name` (on the repository, or the organization's
    /// label every repository in it can use) unless one of that name is
    /// there, whatever its case.
    pub async fn ensure_label(&self, scope: &Scope, name: &str) -> Result<Outcome, SetupError> {
        if self.label_exists(scope, name).await? {
            return Ok(Outcome::Unchanged);
        }
        let body = NewLabel {
            name,
            color: format!("#{LABEL_COLOR}"),
            description: LABEL_DESCRIPTION,
        };
        self.http
            .send(
                Method::POST,
                &format!("{}/labels", scope.path()),
                Some(&body),
            )
            .await?;
        Ok(Outcome::Created)
    }
}
