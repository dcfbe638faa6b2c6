//! The host-side model client: one conversation shape for the agent, two
//! wire dialects (OpenAI-compatible Chat Completions, which OpenAI, Ollama,
//! vLLM, llama.cpp's server and OpenRouter all speak, and Anthropic's
//! Messages API), with timeouts, retries that honour `Retry-After`, and
//! the token usage of every call.

mod anthropic;
mod http;
mod openai;
pub mod text_mode;

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

/// How the model calls tools: the API's own tool calls, or one fenced
/// block per reply ([`text_mode`]), for models without them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    #[default]
    Native,
    Text,
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
    /// Input read from the provider's prompt cache (Anthropic: a tenth of
    /// input; OpenAI: a half or a tenth, by model). Unset: priced as input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_mtok: Option<f64>,
    /// Input written to the cache (Anthropic: 1.25 times input for the
    /// five-minute cache). Unset: priced as input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
}

impl Price {
    /// What `usage` cost at this price, in dollars: each of the four
    /// counts at its own rate, as the provider bills them.
    pub fn cost(&self, usage: Usage) -> f64 {
        let per = |tokens: u64, per_mtok: f64| tokens as f64 * per_mtok / 1e6;
        per(usage.input_tokens, self.input_per_mtok)
            + per(usage.output_tokens, self.output_per_mtok)
            + per(
                usage.cache_read_tokens,
                self.cache_read_per_mtok.unwrap_or(self.input_per_mtok),
            )
            + per(
                usage.cache_write_tokens,
                self.cache_write_per_mtok.unwrap_or(self.input_per_mtok),
            )
    }
}

/// Tokens as the provider bills them: four counts, never added into one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input not read from a cache: OpenAI's `prompt_tokens` less its
    /// `cached_tokens`; Anthropic's `input_tokens`.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input written to the provider's prompt cache (Anthropic's
    /// `cache_creation_input_tokens`).
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Every token of input, cached or not: what the requests carried (and
    /// what `agent.max_input_tokens` holds a run to).
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

/// What a run used, and what that cost: `cost_usd` is `None` for a model
/// with no price (`model.prices.<name>` unset) — unpriced, never $0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    pub usage: Usage,
    pub cost_usd: Option<f64>,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
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
    pub tool_mode: ToolMode,
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
        if self.settings.tool_mode == ToolMode::Text {
            let plain = text_mode::to_plain(messages);
            let turn = messages
                .iter()
                .filter(|m| matches!(m, Message::Assistant { .. }))
                .count() as u64
                + 1;
            let reply = self.dialect(&plain, &[]).await?;
            return Ok(text_mode::read_reply(reply, turn));
        }
        self.dialect(messages, tools).await
    }

    async fn dialect(
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

#[cfg(test)]
mod price_tests {
    use super::*;

    /// A worked example at Claude Sonnet's list prices ($3 input, $15
    /// output, $0.30 a cache read, $3.75 a five-minute cache write, per
    /// million tokens).
    #[test]
    fn the_cost_is_each_count_at_its_own_rate() {
        let price = Price {
            input_per_mtok: 3.0,
            output_per_mtok: 15.0,
            cache_read_per_mtok: Some(0.30),
            cache_write_per_mtok: Some(3.75),
        };
        let usage = Usage {
            input_tokens: 1_000,       // $0.003
            output_tokens: 500,        // $0.0075
            cache_read_tokens: 20_000, // $0.006
            cache_write_tokens: 2_000, // $0.0075
        };
        assert!(
            (price.cost(usage) - 0.024).abs() < 1e-12,
            "{}",
            price.cost(usage)
        );
        // Adding the cached input into input, as before, priced it at
        // $0.0765: three times what was billed.
        let as_input = Usage {
            input_tokens: usage.prompt_tokens(),
            output_tokens: 500,
            ..Usage::default()
        };
        assert!((price.cost(as_input) - 0.0765).abs() < 1e-12);
        // No cache prices: the cache is priced as input.
        let plain = Price {
            cache_read_per_mtok: None,
            cache_write_per_mtok: None,
            ..price
        };
        assert!((plain.cost(usage) - price.cost(as_input)).abs() < 1e-12);
    }
}
