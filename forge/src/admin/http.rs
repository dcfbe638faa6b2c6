//! The plain HTTP underneath the set-up calls: one request, its answer
//! read up to a bound, an error that names the call and what the forge
//! said (and, for GitHub, which permission the call needs).

use std::time::Duration;

use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Set-up answers are small (a repository, a page of hooks or labels, an
/// App's credentials); more than this is not a forge's answer.
const MAX_ANSWER_BYTES: usize = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The forge answered with an error status.
    #[error("{call}: {status}: {detail}{}", needs.as_ref().map(|n| format!(" (the call needs {n})")).unwrap_or_default())]
    Refused {
        call: String,
        status: u16,
        detail: String,
        /// What GitHub says the call needs (`X-Accepted-GitHub-Permissions`).
        needs: Option<String>,
    },
    #[error("{call}: {detail}")]
    Transport { call: String, detail: String },
    #[error("{call}: unexpected answer: {detail}")]
    Malformed { call: String, detail: String },
    #[error("{0}")]
    Invalid(String),
}

impl SetupError {
    /// The HTTP status, when the forge answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            SetupError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the credential may not do this (401, 403, or GitHub's 404
    /// for what a token cannot see).
    pub fn is_refusal(&self) -> bool {
        matches!(self.status(), Some(401 | 403))
    }
}

/// How a request signs in.
#[derive(Clone)]
pub(crate) enum Auth {
    None,
    /// `Authorization: token …` (Gitea, and GitHub's personal tokens).
    Token(SecretString),
    /// `Authorization: Bearer …` (a GitHub App's JWT).
    Bearer(SecretString),
}

pub(crate) struct Http {
    base: String,
    auth: Auth,
    client: reqwest::Client,
    /// Headers every request carries (GitHub's API version).
    extra: Vec<(&'static str, &'static str)>,
}

/// A successful answer.
pub(crate) struct Answer {
    pub call: String,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Answer {
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, SetupError> {
        serde_json::from_str(&self.text).map_err(|e| SetupError::Malformed {
            call: self.call.clone(),
            detail: e.to_string(),
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Http {
    pub fn new(
        base: &str,
        auth: Auth,
        extra: Vec<(&'static str, &'static str)>,
    ) -> Result<Http, SetupError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("forgehand/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SetupError::Invalid(format!("an HTTP client: {e}")))?;
        Ok(Http {
            base: base.trim_end_matches('/').to_owned(),
            auth,
            client,
            extra,
        })
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, SetupError> {
        self.send(Method::GET, path, None::<&()>).await?.json()
    }

    pub async fn send<B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Answer, SetupError> {
        let call = format!("{method} {}", path.split('?').next().unwrap_or(path));
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("Accept", "application/json");
        for (name, value) in &self.extra {
            request = request.header(*name, *value);
        }
        request = match &self.auth {
            Auth::None => request,
            Auth::Token(t) => {
                request.header("Authorization", format!("token {}", t.expose_secret()))
            }
            Auth::Bearer(t) => request.bearer_auth(t.expose_secret()),
        };
        if let Some(body) = body {
            request = request.json(body);
        }
        let transport = |e: reqwest::Error| SetupError::Transport {
            call: call.clone(),
            detail: root_cause(&e),
        };
        let mut response = request.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(SetupError::Malformed {
                    call,
                    detail: format!("larger than {} MiB", MAX_ANSWER_BYTES >> 20),
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !(200..300).contains(&status) {
            let needs = headers
                .get("x-accepted-github-permissions")
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.trim().is_empty())
                .map(str::to_owned);
            return Err(SetupError::Refused {
                call,
                status,
                detail: message_of(&text),
                needs,
            });
        }
        Ok(Answer {
            call,
            headers,
            text,
        })
    }
}

/// An error answer's `message` (both forges send one), else its start.
fn message_of(text: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Body {
        message: String,
    }
    serde_json::from_str::<Body>(text)
        .map(|b| b.message)
        .unwrap_or_else(|_| text.chars().take(200).collect())
}

/// The innermost cause: reqwest's outer messages say only "error sending
/// request".
fn root_cause(error: &dyn std::error::Error) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// A path segment, percent-encoded (an owner or label name may hold
/// anything a URL does not).
pub(crate) fn segment(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}
