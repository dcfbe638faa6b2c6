//! `[github]` and `[gitea]`: where the forges' APIs are and how Forgehand
//! signs in to them. With these pointed at any server, Forgehand works
//! against it: GitHub Enterprise, a self-hosted Gitea or Forgejo, or the
//! tests' fake forges.

use std::path::PathBuf;

use forgehand_forge::api::gitea::GiteaClient;
use forgehand_forge::api::github::{GitHubAuth, GitHubClient};
use forgehand_forge::api::ForgeError;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct GitHubConfig {
    /// Webhook secrets; any one verifies a delivery, so a new secret can
    /// be added before the old one is removed.
    #[serde(
        deserialize_with = "super::secret_list",
        serialize_with = "super::redact_list"
    )]
    pub webhook_secret: Vec<SecretString>,
    /// `https://api.github.com`, or an Enterprise server's
    /// `https://host/api/v3`.
    pub api_url: String,
    /// GitHub's web pages: `https://github.com`, or an Enterprise
    /// server's `https://host`. The App manifest is posted there.
    pub web_url: String,
    /// Where `forgehand setup github` keeps the App it created (its id,
    /// private key and webhook secret, owner-only) and its one-time
    /// set-up links. Read at start when no other credential is set.
    pub app_dir: PathBuf,
    /// As a GitHub App: its id and the path of its private key (PEM).
    pub app_id: Option<u64>,
    pub private_key_path: Option<PathBuf>,
    /// Or a personal access token instead of an App.
    #[serde(
        deserialize_with = "super::optional_secret",
        serialize_with = "super::redact_option"
    )]
    pub token: Option<SecretString>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct GiteaConfig {
    #[serde(
        deserialize_with = "super::secret_list",
        serialize_with = "super::redact_list"
    )]
    pub webhook_secret: Vec<SecretString>,
    /// The server, e.g. `https://codeberg.org` (not its `/api/v1`).
    pub base_url: Option<String>,
    /// The bot user's token.
    #[serde(
        deserialize_with = "super::optional_secret",
        serialize_with = "super::redact_option"
    )]
    pub token: Option<SecretString>,
}

impl Default for GitHubConfig {
    fn default() -> Self {
        GitHubConfig {
            webhook_secret: Vec::new(),
            api_url: "https://api.github.com".into(),
            web_url: "https://github.com".into(),
            app_dir: PathBuf::from("forgehand-data/github-app"),
            app_id: None,
            private_key_path: None,
            token: None,
        }
    }
}

impl GitHubConfig {
    /// The API client, when credentials are configured. Call it inside
    /// the tokio runtime: octocrab starts a task of its own.
    pub fn client(&self) -> Option<Result<GitHubClient, ForgeError>> {
        let auth = match (&self.token, self.app_id, &self.private_key_path) {
            (Some(token), _, _) => GitHubAuth::Token(token.clone()),
            (None, Some(app_id), Some(path)) => match std::fs::read_to_string(path) {
                Ok(pem) => GitHubAuth::App {
                    app_id,
                    private_key: SecretString::from(pem),
                },
                Err(e) => {
                    return Some(Err(ForgeError::Other(format!(
                        "github.private_key_path: cannot read {}: {e}",
                        path.display()
                    ))))
                }
            },
            _ => return None,
        };
        Some(GitHubClient::new(&self.api_url, auth))
    }

    /// `github.web_url` without its trailing slash.
    pub fn web_url(&self) -> &str {
        self.web_url.trim_end_matches('/')
    }

    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        if !self.api_url.starts_with("http://") && !self.api_url.starts_with("https://") {
            problems.push(format!(
                "github.api_url: `{}` is not an http(s) URL",
                self.api_url
            ));
        }
        if let Err(problem) = super::base_url_problem(&self.web_url) {
            problems.push(format!("github.web_url: `{}` {problem}", self.web_url));
        }
        if self.app_id.is_some() != self.private_key_path.is_some() {
            problems.push(
                "github.private_key_path: a GitHub App needs both github.app_id and github.private_key_path".into(),
            );
        }
        if self.token.is_some() && self.app_id.is_some() {
            problems.push(
                "github.token: set either a token or a GitHub App (github.app_id), not both".into(),
            );
        }
        if self
            .webhook_secret
            .iter()
            .any(|s| s.expose_secret().trim().is_empty())
        {
            problems.push("github.webhook_secret: contains an empty secret".into());
        }
    }

    /// The domain of the server's no-reply addresses. GitHub credits a
    /// commit naming `login@users.noreply.github.com` to that account; an
    /// Enterprise server uses `users.noreply.` and its own host.
    pub fn noreply_domain(&self) -> String {
        match host_of(&self.api_url).as_deref() {
            None | Some("api.github.com" | "github.com") => "users.noreply.github.com".into(),
            Some(host) => format!("users.noreply.{host}"),
        }
    }
}

impl GiteaConfig {
    /// Gitea's and Forgejo's no-reply domain as they set it unless told
    /// otherwise (`NO_REPLY_ADDRESS`: `noreply.` and the server's host); a
    /// commit naming `login@` it is credited to that user.
    pub fn noreply_domain(&self) -> String {
        let host = self.base_url.as_deref().and_then(host_of);
        format!("noreply.{}", host.as_deref().unwrap_or("localhost"))
    }

    pub fn client(&self) -> Option<Result<GiteaClient, ForgeError>> {
        match (&self.base_url, &self.token) {
            (Some(url), Some(token)) => Some(GiteaClient::new(url, token.clone())),
            _ => None,
        }
    }

    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        if let Some(url) = &self.base_url {
            if !url.starts_with("http://") && !url.starts_with("https://") {
                problems.push(format!("gitea.base_url: `{url}` is not an http(s) URL"));
            } else if url.trim_end_matches('/').ends_with("/api/v1") {
                problems.push(format!(
                    "gitea.base_url: `{url}` is the API; give the server, without /api/v1"
                ));
            }
        }
        if self.base_url.is_some() != self.token.is_some() {
            problems.push(
                "gitea.token: the Gitea API needs both gitea.base_url and gitea.token".into(),
            );
        }
        if self
            .webhook_secret
            .iter()
            .any(|s| s.expose_secret().trim().is_empty())
        {
            problems.push("gitea.webhook_secret: contains an empty secret".into());
        }
    }
}

fn host_of(url: &str) -> Option<String> {
    reqwest::Url::parse(url).ok()?.host_str().map(str::to_owned)
}
