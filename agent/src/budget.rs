//! Budgets the host holds a run to, whatever the model says.

use std::time::{Duration, Instant};

use crate::config::AgentConfig;
use forgehand_model::Usage;
use forgehand_types::reason::Budget;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budgets {
    pub max_turns: u32,
    pub max_tool_calls: u32,
    pub max_time: Duration,
    pub max_input_tokens: u64,
    pub max_output_tokens: u64,
    pub max_dollars: f64,
}

impl Budgets {
    pub fn from_config(config: &AgentConfig) -> Self {
        Budgets {
            max_turns: config.max_turns,
            max_tool_calls: config.max_tool_calls,
            max_time: Duration::from_secs(config.max_seconds),
            max_input_tokens: config.max_input_tokens,
            max_output_tokens: config.max_output_tokens,
            max_dollars: config.max_dollars,
        }
    }
}

/// What a run has used so far.
#[derive(Debug, Clone, Copy)]
pub struct Spent {
    pub started: Instant,
    pub turns: u32,
    pub tool_calls: u32,
    pub usage: Usage,
    pub dollars: f64,
}

impl Spent {
    pub fn new() -> Self {
        Spent {
            started: Instant::now(),
            turns: 0,
            tool_calls: 0,
            usage: Usage::default(),
            dollars: 0.0,
        }
    }

    /// The first budget used up.
    pub fn exhausted(&self, budgets: &Budgets) -> Option<Budget> {
        if self.turns >= budgets.max_turns {
            Some(Budget::Turns)
        } else if self.tool_calls >= budgets.max_tool_calls {
            Some(Budget::ToolCalls)
        } else if self.started.elapsed() >= budgets.max_time {
            Some(Budget::Time)
        } else if self.usage.prompt_tokens() >= budgets.max_input_tokens {
            Some(Budget::InputTokens)
        } else if self.usage.output_tokens >= budgets.max_output_tokens {
            Some(Budget::OutputTokens)
        } else if self.dollars >= budgets.max_dollars {
            Some(Budget::Dollars)
        } else {
            None
        }
    }

    pub fn time_left(&self, budgets: &Budgets) -> Duration {
        budgets.max_time.saturating_sub(self.started.elapsed())
    }
}

impl Default for Spent {
    fn default() -> Self {
        Self::new()
    }
}
