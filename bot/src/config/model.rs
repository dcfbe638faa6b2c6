//! `[model]`: the user's model and what it costs (`[agent]`, the budgets
//! the host holds every run to, is the agent crate's).

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use forgehand_model::{ModelSettings, Price, Provider, RetryPolicy, ToolMode, Usage};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// `openai` (any OpenAI-compatible Chat Completions server) or
    /// `anthropic`.
    pub provider: Provider,
    /// OpenAI: up to `/v1` (`https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1` for Ollama). Anthropic:
    /// `https://api.anthropic.com`.
    pub base_url: String,
    #[serde(
        deserialize_with = "super::optional_secret",
        serialize_with = "super::redact_option"
    )]
    pub api_key: Option<SecretString>,
    pub name: String,
    /// How long one call may take.
    pub timeout_secs: u64,
    /// Tries after the first, on 429, 5xx and timeouts.
    pub max_retries: u32,
    /// The first wait between tries (doubled each time) unless the
    /// server's `Retry-After` says otherwise.
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
    /// Most tokens the model may write in one answer (Anthropic requires it).
    pub max_output_tokens: u32,
    /// `native` (the API's tool calls) or `text` (one fenced block per
    /// reply, for models without tool calls).
    pub tool_mode: ToolMode,
    /// Dollars per million tokens, by model name.
    pub prices: BTreeMap<String, Price>,
    /// Where `base_url` was set when not here: `forgehand run
    /// --base-url` names its flag in what it says.
    #[serde(skip)]
    pub base_url_named: Option<String>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            provider: Provider::OpenAi,
            base_url: "http://127.0.0.1:11434/v1".into(),
            api_key: None,
            name: "qwen2.5-coder:7b".into(),
            timeout_secs: 300,
            max_retries: 5,
            retry_base_ms: 1000,
            retry_max_ms: 60_000,
            max_output_tokens: 8192,
            tool_mode: ToolMode::Native,
            prices: BTreeMap::new(),
            base_url_named: None,
        }
    }
}

impl ModelConfig {
    pub fn settings(&self) -> ModelSettings {
        ModelSettings {
            provider: self.provider,
            base_url: self.base_url.clone(),
            base_url_named: self
                .base_url_named
                .clone()
                .unwrap_or_else(|| "model.base_url (FORGEHAND_MODEL__BASE_URL)".into()),
            api_key: self.api_key.clone(),
            name: self.name.clone(),
            timeout: Duration::from_secs(self.timeout_secs),
            retry: RetryPolicy {
                max_retries: self.max_retries,
                base_delay: Duration::from_millis(self.retry_base_ms),
                max_delay: Duration::from_millis(self.retry_max_ms),
            },
            max_output_tokens: self.max_output_tokens,
            tool_mode: self.tool_mode,
        }
    }

    /// The configured model's price, if it has one.
    pub fn price(&self) -> Option<Price> {
        self.prices.get(&self.name).copied()
    }

    /// What `usage` cost, or `None` when the model has no price.
    pub fn cost(&self, usage: Usage) -> Option<f64> {
        Some(self.price()?.cost(usage))
    }

    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        let url_ok = (self.base_url.starts_with("http://")
            || self.base_url.starts_with("https://"))
            && reqwest::Url::parse(&self.base_url).is_ok();
        if !url_ok {
            problems.push(format!(
                "model.base_url: `{}` is not an http(s) URL",
                super::redact_url(&self.base_url)
            ));
        } else if self.base_url.contains('@') {
            problems.push(
                "model.base_url: put the key in model.api_key, not in the URL (URLs end up in logs)"
                    .into(),
            );
        }
        if self.name.trim().is_empty() {
            problems
                .push("model.name: must name the model, e.g. gpt-4o or qwen2.5-coder:7b".into());
        }
        if self.timeout_secs == 0 {
            problems.push("model.timeout_secs: must be at least 1".into());
        }
        if self.retry_base_ms > self.retry_max_ms {
            problems.push("model.retry_base_ms: must not exceed model.retry_max_ms".into());
        }
        if self.max_output_tokens == 0 {
            problems.push("model.max_output_tokens: must be at least 1".into());
        }
        for (name, price) in &self.prices {
            let cached = [price.cache_read_per_mtok, price.cache_write_per_mtok];
            if [price.input_per_mtok, price.output_per_mtok]
                .into_iter()
                .chain(cached.into_iter().flatten())
                .any(|p| p.is_nan() || p < 0.0)
            {
                problems.push(format!("model.prices.{name}: prices must be 0 or more"));
            }
        }
    }
}
