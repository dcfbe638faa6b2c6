//! GitHub's set-up calls: the App manifest and its conversion into an App,
//! the App's own identity (for `forgehand doctor`), and, for the token
//! mode, a repository's access, webhooks and labels.

use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::http::{segment, Auth, Http};
use super::{hook_for, Hook, HookSpec, Outcome, Scope, SetupError, LABEL_COLOR, LABEL_DESCRIPTION};

const API_VERSION: (&str, &str) = ("X-GitHub-Api-Version", "2022-11-28");

/// The repository permissions Forgehand's App asks for, and why
/// (docs/setup-github.md has the same table).
pub const APP_PERMISSIONS: [(&str, &str); 6] = [
    ("contents", "write"),
    ("issues", "write"),
    ("pull_requests", "write"),
    ("checks", "write"),
    ("statuses", "write"),
    ("metadata", "read"),
];

/// The events Forgehand acts on.
pub const EVENTS: [&str; 5] = [
    "issues",
    "issue_comment",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
];

/// A GitHub App manifest, as GitHub's "Registering a GitHub App from a
/// manifest" describes it.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub name: String,
    /// The App's homepage: where Forgehand is reached.
    pub url: String,
    pub hook_attributes: HookAttributes,
    /// Where GitHub sends the browser back with the code.
    pub redirect_url: String,
    pub public: bool,
    pub default_permissions: std::collections::BTreeMap<String, String>,
    pub default_events: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HookAttributes {
    pub url: String,
    pub active: bool,
}

impl Manifest {
    /// Forgehand's App: named `name`, its webhook at
    /// `{public_url}/webhooks/github`, coming back to `redirect_url`.
    pub fn forgehand(name: &str, public_url: &str, redirect_url: &str) -> Manifest {
        let public_url = public_url.trim_end_matches('/');
        Manifest {
            name: name.to_owned(),
            url: public_url.to_owned(),
            hook_attributes: HookAttributes {
                url: format!("{public_url}/webhooks/github"),
                active: true,
            },
            redirect_url: redirect_url.to_owned(),
            public: false,
            default_permissions: APP_PERMISSIONS
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            default_events: EVENTS.iter().map(|e| (*e).to_owned()).collect(),
        }
    }
}

/// What GitHub hands back once for an App made from a manifest.
pub struct CreatedApp {
    pub id: u64,
    pub slug: String,
    pub name: String,
    /// The App's page (`https://github.com/apps/<slug>`).
    pub html_url: String,
    pub owner: String,
    pub webhook_secret: Option<SecretString>,
    pub pem: SecretString,
}

impl std::fmt::Debug for CreatedApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedApp")
            .field("id", &self.id)
            .field("slug", &self.slug)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Owner {
    login: String,
}

#[derive(Deserialize)]
struct Conversion {
    id: u64,
    slug: Option<String>,
    name: String,
    html_url: String,
    owner: Option<Owner>,
    webhook_secret: Option<String>,
    pem: String,
}

/// Exchanges the code GitHub gave the browser for the App's id, key and
/// webhook secret (`POST /app-manifests/{code}/conversions`: no sign-in,
/// the code is the credential, good once and for an hour).
pub async fn convert_manifest(api_url: &str, code: &str) -> Result<CreatedApp, SetupError> {
    if code.is_empty()
        || !code
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(SetupError::Invalid(
            "the code GitHub sent back is malformed".into(),
        ));
    }
    let http = Http::new(api_url, Auth::None, vec![API_VERSION])?;
    // The code is a credential: errors name the call without it.
    let hide = |e: SetupError| match e {
        SetupError::Refused {
            status,
            detail,
            needs,
            ..
        } => SetupError::Refused {
            call: "POST /app-manifests/{code}/conversions".into(),
            status,
            detail,
            needs,
        },
        SetupError::Transport { detail, .. } => SetupError::Transport {
            call: "POST /app-manifests/{code}/conversions".into(),
            detail,
        },
        SetupError::Malformed { detail, .. } => SetupError::Malformed {
            call: "POST /app-manifests/{code}/conversions".into(),
            detail,
        },
        other => other,
    };
    let answer = http
        .send(
            Method::POST,
            &format!("/app-manifests/{}/conversions", segment(code)),
            None::<&()>,
        )
        .await
        .map_err(hide)?;
    let c: Conversion = answer.json().map_err(hide)?;
    let slug = c
        .slug
        .unwrap_or_else(|| c.name.to_lowercase().replace(' ', "-"));
    Ok(CreatedApp {
        id: c.id,
        slug,
        name: c.name,
        html_url: c.html_url,
        owner: c.owner.map(|o| o.login).unwrap_or_default(),
        webhook_secret: c
            .webhook_secret
            .filter(|s| !s.is_empty())
            .map(SecretString::from),
        pem: SecretString::from(c.pem),
    })
}

/// Who an App is, as GitHub answers its own JWT (`GET /app`).
#[derive(Debug, Clone, Deserialize)]
pub struct AppIdentity {
    pub id: u64,
    pub slug: Option<String>,
    pub name: String,
    pub html_url: String,
}

/// Signs in as the App (a JWT from its key) and asks who it is: proves
/// the id and the key belong together and GitHub knows them.
pub async fn app_identity(
    api_url: &str,
    app_id: u64,
    pem: &SecretString,
) -> Result<AppIdentity, SetupError> {
    let http = Http::new(
        api_url,
        Auth::Bearer(app_jwt(app_id, pem)?),
        vec![API_VERSION],
    )?;
    http.get("/app").await
}

/// The installation of the App on `repo`, if it is installed there, and
/// a token of it (to read what the App may read there).
pub async fn installation_token(
    api_url: &str,
    app_id: u64,
    pem: &SecretString,
    repo: &Scope,
) -> Result<Option<(u64, SecretString)>, SetupError> {
    #[derive(Deserialize)]
    struct Installation {
        id: u64,
    }
    #[derive(Deserialize)]
    struct Token {
        token: String,
    }
    let http = Http::new(
        api_url,
        Auth::Bearer(app_jwt(app_id, pem)?),
        vec![API_VERSION],
    )?;
    let found = http
        .get::<Installation>(&format!("{}/installation", repo.path()))
        .await;
    let installation = match found {
        Ok(i) => i,
        Err(e) if e.status() == Some(404) => return Ok(None),
        Err(e) => return Err(e),
    };
    let token: Token = http
        .send(
            Method::POST,
            &format!("/app/installations/{}/access_tokens", installation.id),
            None::<&()>,
        )
        .await?
        .json()?;
    Ok(Some((installation.id, SecretString::from(token.token))))
}

/// A JWT signed with the App's key, as GitHub takes it for the App's own
/// calls.
fn app_jwt(app_id: u64, pem: &SecretString) -> Result<SecretString, SetupError> {
    #[derive(Serialize)]
    struct Claims {
        iat: i64,
        exp: i64,
        iss: String,
    }
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(pem.expose_secret().as_bytes())
        .map_err(|e| SetupError::Invalid(format!("not an RSA private key in PEM ({e})")))?;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    // GitHub's advice: a minute back for clock drift, ten minutes at most.
    let claims = Claims {
        iat: now - 60,
        exp: now + 540,
        iss: app_id.to_string(),
    };
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &claims,
        &key,
    )
    .map(SecretString::from)
    .map_err(|e| SetupError::Invalid(format!("signing the App's JWT: {e}")))
}

/// A repository as the token sees it.
#[derive(Debug, Clone)]
pub struct RepoAccess {
    pub admin: bool,
    pub push: bool,
    /// A classic token's scopes (`X-OAuth-Scopes`); `None` for a
    /// fine-grained token, which GitHub does not list.
    pub scopes: Option<Vec<String>>,
}

/// GitHub with a personal access token: the token mode's set-up.
pub struct GitHubSetup {
    http: Http,
}

#[derive(Deserialize)]
struct RepoAnswer {
    permissions: Option<Permissions>,
}

#[derive(Deserialize)]
struct Permissions {
    admin: bool,
    push: bool,
}

#[derive(Deserialize)]
struct HookAnswer {
    id: u64,
    active: bool,
    events: Vec<String>,
    config: HookConfig,
}

#[derive(Deserialize)]
struct HookConfig {
    url: Option<String>,
    content_type: Option<String>,
}

impl From<HookAnswer> for Hook {
    fn from(h: HookAnswer) -> Hook {
        Hook {
            id: h.id,
            url: h.config.url.unwrap_or_default(),
            events: h.events,
            active: h.active,
            content_type: h.config.content_type,
        }
    }
}

#[derive(Serialize)]
struct NewHook<'a> {
    name: &'static str,
    active: bool,
    events: &'a [String],
    config: NewHookConfig<'a>,
}

#[derive(Serialize)]
struct EditHook<'a> {
    active: bool,
    events: &'a [String],
    config: NewHookConfig<'a>,
}

#[derive(Serialize)]
struct NewHookConfig<'a> {
    url: &'a str,
    content_type: &'static str,
    secret: &'a str,
    insecure_ssl: &'static str,
}

#[derive(Deserialize)]
struct LabelAnswer {
    name: String,
}

#[derive(Serialize)]
struct NewLabel<'a> {
    name: &'a str,
    color: &'a str,
    description: &'a str,
}

impl GitHubSetup {
    pub fn with_token(api_url: &str, token: SecretString) -> Result<Self, SetupError> {
        Ok(GitHubSetup {
            http: Http::new(api_url, Auth::Token(token), vec![API_VERSION])?,
        })
    }

    /// The token's user (`GET /user`): proves the token valid.
    pub async fn user(&self) -> Result<String, SetupError> {
        #[derive(Deserialize)]
        struct User {
            login: String,
        }
        Ok(self.http.get::<User>("/user").await?.login)
    }

    /// What the token may do on the repository.
    pub async fn repository(&self, repo: &Scope) -> Result<RepoAccess, SetupError> {
        let answer = self
            .http
            .send(Method::GET, &repo.path(), None::<&()>)
            .await?;
        let scopes = answer.header("x-oauth-scopes").map(|s| {
            s.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        });
        let body: RepoAnswer = answer.json()?;
        let permissions = body.permissions.ok_or_else(|| SetupError::Malformed {
            call: answer.call.clone(),
            detail: "no `permissions`: the token is not signed in".into(),
        })?;
        Ok(RepoAccess {
            admin: permissions.admin,
            push: permissions.push,
            scopes,
        })
    }

    pub async fn hooks(&self, scope: &Scope) -> Result<Vec<Hook>, SetupError> {
        let hooks: Vec<HookAnswer> = self
            .http
            .get(&format!("{}/hooks?per_page=100", scope.path()))
            .await?;
        Ok(hooks.into_iter().map(Hook::from).collect())
    }

    /// Makes the webhook to `spec.url` what `spec` says: created when
    /// missing, written again when there (its secret cannot be read back).
    pub async fn ensure_hook(
        &self,
        scope: &Scope,
        spec: &HookSpec,
    ) -> Result<(Hook, Outcome), SetupError> {
        let hooks = self.hooks(scope).await?;
        let config = NewHookConfig {
            url: &spec.url,
            content_type: "json",
            secret: spec.secret.expose_secret(),
            insecure_ssl: "0",
        };
        let (method, path, outcome, body) = match hook_for(&hooks, &spec.url) {
            Some(existing) => (
                Method::PATCH,
                format!("{}/hooks/{}", scope.path(), existing.id),
                Outcome::Updated,
                serde_json::to_value(EditHook {
                    active: true,
                    events: &spec.events,
                    config,
                }),
            ),
            None => (
                Method::POST,
                format!("{}/hooks", scope.path()),
                Outcome::Created,
                serde_json::to_value(NewHook {
                    name: "web",
                    active: true,
                    events: &spec.events,
                    config,
                }),
            ),
        };
        let body = body.map_err(|e| SetupError::Invalid(e.to_string()))?;
        let hook: HookAnswer = self.http.send(method, &path, Some(&body)).await?.json()?;
        Ok((hook.into(), outcome))
    }

    /// Asks GitHub to send the hook a `ping` event.
    pub async fn ping(&self, scope: &Scope, hook: u64) -> Result<(), SetupError> {
        self.http
            .send(
                Method::POST,
                &format!("{}/hooks/{hook}/pings", scope.path()),
                None::<&()>,
            )
            .await?;
        Ok(())
    }

    /// Whether the repository has the label `name` (GitHub finds a label
    /// by its name whatever its case, as Forgehand compares it).
    pub async fn label_exists(&self, scope: &Scope, name: &str) -> Result<bool, SetupError> {
        let found = self
            .http
            .get::<LabelAnswer>(&format!("{}/labels/{}", scope.path(), segment(name)))
            .await;
        match found {
            Ok(label) => Ok(label.name.eq_ignore_ascii_case(name)),
            Err(e) if e.status() == Some(404) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Creates the label `name` on the repository unless it is there.
    pub async fn ensure_label(&self, scope: &Scope, name: &str) -> Result<Outcome, SetupError> {
        if self.label_exists(scope, name).await? {
            return Ok(Outcome::Unchanged);
        }
        let body = NewLabel {
            name,
            color: LABEL_COLOR,
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
