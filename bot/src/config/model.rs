//! `[model]` and `[agent]`: the user's model, what it costs, and the
//! budgets the host holds every run to.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use crate::model::{ModelSettings, Provider, RetryPolicy, Usage};

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
    /// Dollars per million tokens, by model name.
    pub prices: BTreeMap<String, Price>,
    /// Where `base_url` was set when not here: `forgehand run
    /// --base-url` names its flag in what it says.
    #[serde(skip)]
    pub base_url_named: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    pub max_turns: u32,
    pub max_tool_calls: u32,
    /// The whole run's wall-clock time, model calls and tools together.
    pub max_seconds: u64,
    pub max_input_tokens: u64,
    pub max_output_tokens: u64,
    pub max_dollars: f64,
    /// When the conversation grows past this many tokens (estimated),
    /// the oldest tool outputs are shortened.
    pub context_tokens: u64,
    /// One JSONL transcript per run.
    pub transcript_dir: PathBuf,
    /// Prompt templates to use instead of the built-in ones (files named
    /// as in `prompts/`).
    pub prompts_dir: Option<PathBuf>,
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
            prices: BTreeMap::new(),
            base_url_named: None,
        }
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_turns: 60,
            max_tool_calls: 200,
            max_seconds: 1800,
            max_input_tokens: 3_000_000,
            max_output_tokens: 200_000,
            max_dollars: 5.0,
            context_tokens: 100_000,
            transcript_dir: "forgehand-data/transcripts".into(),
            prompts_dir: None,
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
        }
    }

    /// What `usage` cost, or `None` when the model has no price.
    pub fn cost(&self, usage: Usage) -> Option<f64> {
        let price = self.prices.get(&self.name)?;
        Some(
            usage.input_tokens as f64 * price.input_per_mtok / 1e6
                + usage.output_tokens as f64 * price.output_per_mtok / 1e6,
        )
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
            if [price.input_per_mtok, price.output_per_mtok]
                .iter()
                .any(|p| p.is_nan() || *p < 0.0)
            {
                problems.push(format!("model.prices.{name}: prices must be 0 or more"));
            }
        }
    }
}

impl AgentConfig {
    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        for (key, value) in [
            ("agent.max_turns", u64::from(self.max_turns)),
            ("agent.max_tool_calls", u64::from(self.max_tool_calls)),
            ("agent.max_seconds", self.max_seconds),
            ("agent.max_input_tokens", self.max_input_tokens),
            ("agent.max_output_tokens", self.max_output_tokens),
        ] {
            if value == 0 {
                problems.push(format!("{key}: must be at least 1"));
            }
        }
        if self.max_dollars.is_nan() || self.max_dollars < 0.0 {
            problems.push("agent.max_dollars: must be 0 or more".into());
        }
        if self.context_tokens < 4096 {
            problems.push("agent.context_tokens: must be at least 4096".into());
        }
    }
}
