//! `[agent]`: the budgets the host holds every run to, where transcripts
//! go and which prompts are used. Read by the agent alone; the service's
//! configuration holds it as one section.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
    /// all but the latest few tool outputs are cleared, in one batch.
    pub context_tokens: u64,
    /// The first `finish` is answered with the agent's own change (as it
    /// would be committed) and the tests it ran, and the agent asked to
    /// finish again or go on: one more turn, within `max_turns`.
    pub review_before_finish: bool,
    /// One JSONL transcript per run.
    pub transcript_dir: PathBuf,
    /// Prompt templates to use instead of the built-in ones (files named
    /// as in `prompts/`).
    pub prompts_dir: Option<PathBuf>,
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
            review_before_finish: true,
            transcript_dir: "forgehand-data/transcripts".into(),
            prompts_dir: None,
        }
    }
}

impl AgentConfig {
    pub fn problems(&self, problems: &mut Vec<String>) {
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
