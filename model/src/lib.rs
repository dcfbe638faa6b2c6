//! The host-side model client: one conversation shape for the agent, two
//! wire dialects (OpenAI-compatible Chat Completions, which OpenAI, Ollama,
//! vLLM, llama.cpp's server and OpenRouter all speak, and Anthropic's
//! Messages API), with timeouts, retries that honour `Retry-After`, and
//! the token usage of every call.

mod anthropic;
mod http;
mod openai;

use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use http::RetryPolicy;

impl std::str::FromStr for Provider {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "openai" => Ok(Provider::OpenAi),
            "anthropic" => Ok(Provider::Anthropic),
            other => Err(format!(
                "`{other}` is not a provider: use openai (any OpenAI-compatible server: OpenAI, Ollama, vLLM, llama.cpp, OpenRouter) or anthropic"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Chat Completions with tool calls.
    #[serde(rename = "openai")]
    OpenAi,
    Anthropic,
}

/// A tool the model may call: its JSON schema is what the arguments are
/// validated against before anything runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: JSON, or not.
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        call_id: String,
        name: String,
        content: String,
    },
}

/// Dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl Price {
    /// What `usage` cost at this price, in dollars.
    pub fn cost(&self, usage: Usage) -> f64 {
        usage.input_tokens as f64 * self.input_per_mtok / 1e6
            + usage.output_tokens as f64 * self.output_per_mtok / 1e6
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone)]
pub struct ModelReply {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// Tries it took (1 when the first answered).
    pub attempts: u32,
    /// The bodies as sent and received, for the transcript.
    pub request_body: Value,
    pub response_body: Value,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot reach the model at {url}: {detail}. Is the server running? Set {named} to where it listens, e.g. http://127.0.0.1:11434/v1 for Ollama")]
    Unreachable {
        url: String,
        detail: String,
        /// Where the address came from, for the user to change it there.
        named: String,
    },
    #[error("the model server at {url} refused the key ({status}): set model.api_key (FORGEHAND_MODEL__API_KEY) to a key it takes")]
    Refused { url: String, status: u16 },
    #[error("the model server at {url} answered {status}: {detail}")]
    Status {
        url: String,
        status: u16,
        detail: String,
    },
    #[error("the model server kept failing ({attempts} tries); the last: {last}")]
    Exhausted {
        attempts: u32,
        last: Box<ModelError>,
    },
    #[error("the model server's answer could not be read: {0}")]
    Malformed(String),
}

/// Where the model is and how to talk to it.
#[derive(Debug, Clone)]
pub struct ModelSettings {
    pub provider: Provider,
    pub base_url: String,
    /// Where `base_url` was set, as the user would change it
    /// (`--base-url`, or `model.base_url (FORGEHAND_MODEL__BASE_URL)`).
    pub base_url_named: String,
    pub api_key: Option<SecretString>,
    pub name: String,
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub max_output_tokens: u32,
}

pub struct ModelClient {
    settings: ModelSettings,
    http: reqwest::Client,
}

impl ModelClient {
    pub fn new(settings: ModelSettings) -> Result<Self, ModelError> {
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ModelError::Malformed(format!("cannot build the HTTP client: {e}")))?;
        Ok(ModelClient { settings, http })
    }

    pub fn settings(&self) -> &ModelSettings {
        &self.settings
    }

    /// Whether the model server answers at all, before anything costly
    /// is done for a run: any HTTP answer to its model list (`GET
    /// …/models`) will do but a refused key; no model is called, nothing
    /// is billed. Not retried: a server that is not there is said at once.
    pub async fn probe(&self) -> Result<(), ModelError> {
        let path = match self.settings.provider {
            Provider::OpenAi => "models",
            Provider::Anthropic => "v1/models",
        };
        let url = endpoint(&self.settings.base_url, path);
        let headers = match self.settings.provider {
            Provider::OpenAi => openai::headers(&self.settings)?,
            Provider::Anthropic => anthropic::headers(&self.settings)?,
        };
        match self.http.get(&url).headers(headers).send().await {
            Ok(answer) if matches!(answer.status().as_u16(), 401 | 403) => {
                Err(ModelError::Refused {
                    url,
                    status: answer.status().as_u16(),
                })
            }
            Ok(_) => Ok(()),
            Err(e) => Err(ModelError::Unreachable {
                url,
                detail: http::root_cause(&e),
                named: self.settings.base_url_named.clone(),
            }),
        }
    }

    /// One model call: the conversation so far and the tools; retried
    /// on 429, 5xx and timeouts.
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<ModelReply, ModelError> {
        match self.settings.provider {
            Provider::OpenAi => openai::complete(&self.http, &self.settings, messages, tools).await,
            Provider::Anthropic => {
                anthropic::complete(&self.http, &self.settings, messages, tools).await
            }
        }
    }
}

/// `base` and `path` joined with exactly one slash.
fn endpoint(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}
