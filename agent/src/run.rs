//! The loop: ask the model, run the tools it calls, answer, until it
//! calls `finish`, a budget runs out or the model fails.

use serde_json::json;

use super::budget::{Budgets, Spent};
use super::tools::{self, ThreadReply, ToolOutcome, Toolbox};
use super::transcript::Transcript;
use forgehand_model::{Message, ModelClient, Spend, Usage};
use forgehand_types::reason::{Budget, Reason};

/// Longest tool result put into the conversation; the sandbox already
/// caps each stream, this caps what the model must read.
const MAX_TOOL_RESULT_CHARS: usize = 30_000;

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Finished {
        summary: String,
        title: String,
        /// Answers to review threads, when the task listed some.
        replies: Vec<ThreadReply>,
    },
    Stopped {
        reason: Reason,
        message: String,
    },
}

#[derive(Debug, Clone)]
pub struct AgentReport {
    pub outcome: Outcome,
    pub turns: u32,
    pub tool_calls: u32,
    /// Tokens as billed, and dollars when the model has a price.
    pub spend: Spend,
    /// Tool outputs shortened to keep within the context budget.
    pub shortened: u32,
}

pub struct AgentSettings<'a> {
    pub budgets: Budgets,
    /// The conversation is kept under this many (estimated) tokens.
    pub context_tokens: u64,
    /// Dollars for a call's usage; `None` when the model has no price.
    pub price: &'a (dyn Fn(Usage) -> Option<f64> + Sync),
}

/// A conversation with the model, run in rounds: until `finish`, a budget
/// or a failure, then (when the host has more to say, such as a failing
/// test run) on again from where it stopped, within the same budgets.
pub struct Conversation {
    messages: Vec<Message>,
    spent: Spent,
    shortened: u32,
    /// The model has no price: what it cost is not known.
    unpriced: bool,
}

/// [`Conversation::run`] once: the whole agent run of a task.
pub async fn run_agent(
    model: &ModelClient,
    toolbox: &Toolbox<'_>,
    settings: &AgentSettings<'_>,
    messages: Vec<Message>,
    transcript: &mut Transcript,
) -> AgentReport {
    let mut conversation = Conversation::new(messages);
    let outcome = conversation.run(model, toolbox, settings, transcript).await;
    conversation.report(outcome)
}

impl Conversation {
    pub fn new(messages: Vec<Message>) -> Self {
        Conversation {
            messages,
            spent: Spent::new(),
            shortened: 0,
            unpriced: false,
        }
    }

    /// Model calls made so far.
    pub fn turns(&self) -> u32 {
        self.spent.turns
    }

    /// What the host says next (after the agent finished), as a user turn.
    pub fn tell(&mut self, text: String) {
        self.messages.push(Message::User { content: text });
    }

    /// What the run cost so far, with how it ended.
    pub fn report(&self, outcome: Outcome) -> AgentReport {
        AgentReport {
            outcome,
            turns: self.spent.turns,
            tool_calls: self.spent.tool_calls,
            spend: Spend {
                usage: self.spent.usage,
                cost_usd: (!self.unpriced).then_some(self.spent.dollars),
            },
            shortened: self.shortened,
        }
    }

    /// Asks the model, runs the tools it calls, answers, until it calls
    /// `finish`, a budget runs out or the model fails.
    pub async fn run(
        &mut self,
        model: &ModelClient,
        toolbox: &Toolbox<'_>,
        settings: &AgentSettings<'_>,
        transcript: &mut Transcript,
    ) -> Outcome {
        self.unpriced = (settings.price)(Usage::default()).is_none();
        let outcome = loop {
            if let Some(code) = self.spent.exhausted(&settings.budgets) {
                break stop(Reason::Budget(code), code.explain());
            }
            self.shortened += compact(&mut self.messages, settings.context_tokens, transcript);
            let reply = match self.ask(model, settings, transcript).await {
                Ok(reply) => reply,
                Err(outcome) => break outcome,
            };
            if reply.tool_calls.is_empty() {
                // A model that only talks is reminded how to act or stop.
                self.messages.push(Message::User {
                    content: match model.settings().tool_mode {
                        forgehand_model::ToolMode::Text => forgehand_model::text_mode::REMINDER.into(),
                        forgehand_model::ToolMode::Native => "Use the tools to do the work, and call `finish` with a summary and a title when you are done.".into(),
                    },
                });
                continue;
            }
            if let Some(outcome) = self
                .call_tools(&reply.tool_calls, toolbox, settings, transcript)
                .await
            {
                break outcome;
            }
        };
        transcript.record("stop", json!({ "outcome": format!("{outcome:?}") }));
        outcome
    }

    /// One model call within the budgets, recorded.
    async fn ask(
        &mut self,
        model: &ModelClient,
        settings: &AgentSettings<'_>,
        transcript: &mut Transcript,
    ) -> Result<forgehand_model::ModelReply, Outcome> {
        let spent = &mut self.spent;
        let call = model.complete(&self.messages, tools::specs());
        let reply = match tokio::time::timeout(spent.time_left(&settings.budgets), call).await {
            Err(_) => return Err(stop(Reason::Budget(Budget::Time), Budget::Time.explain())),
            Ok(Err(error)) => {
                transcript.record("model_error", json!({ "message": error.to_string() }));
                return Err(stop(Reason::ModelError, &error.to_string()));
            }
            Ok(Ok(reply)) => reply,
        };
        spent.turns += 1;
        spent.usage += reply.usage;
        spent.dollars += (settings.price)(reply.usage).unwrap_or(0.0);
        transcript.record(
            "model_call",
            json!({
                "turn": spent.turns,
                "attempts": reply.attempts,
                "usage": reply.usage,
                "request": reply.request_body,
                "response": reply.response_body,
            }),
        );
        self.messages.push(Message::Assistant {
            text: reply.text.clone(),
            tool_calls: reply.tool_calls.clone(),
        });
        Ok(reply)
    }

    /// Runs the calls of one turn within the budgets; the outcome when the
    /// agent finished or ran out of calls.
    async fn call_tools(
        &mut self,
        calls: &[forgehand_model::ToolCall],
        toolbox: &Toolbox<'_>,
        settings: &AgentSettings<'_>,
        transcript: &mut Transcript,
    ) -> Option<Outcome> {
        let mut finished = None;
        let mut out_of_calls = false;
        for call in calls {
            let outcome = if self.spent.tool_calls >= settings.budgets.max_tool_calls {
                out_of_calls = true;
                ToolOutcome::Error("not run: the tool-call budget is used up".into())
            } else {
                self.spent.tool_calls += 1;
                let left = self.spent.time_left(&settings.budgets);
                match tokio::time::timeout(left, toolbox.call(call)).await {
                    Ok(outcome) => outcome,
                    Err(_) => ToolOutcome::Error("not finished: the run's time is up".into()),
                }
            };
            let text = clip(outcome.text());
            transcript.record(
                "tool",
                json!({
                    "id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "is_error": outcome.is_error(),
                    "result": text,
                }),
            );
            if let ToolOutcome::Finish {
                summary,
                title,
                replies,
            } = &outcome
            {
                finished = Some(Outcome::Finished {
                    summary: summary.clone(),
                    title: title.clone(),
                    replies: replies.clone(),
                });
            }
            self.messages.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: text,
            });
        }
        if finished.is_some() {
            return finished;
        }
        out_of_calls.then(|| {
            stop(
                Reason::Budget(Budget::ToolCalls),
                Budget::ToolCalls.explain(),
            )
        })
    }
}

fn stop(reason: Reason, message: &str) -> Outcome {
    Outcome::Stopped {
        reason,
        message: message.into(),
    }
}

/// A result longer than the model should read, cut in the middle: its
/// first and last halves kept (a test run prints its failures and its
/// summary at the end), with the count of what was left out.
fn clip(text: String) -> String {
    let total = text.chars().count();
    if total <= MAX_TOOL_RESULT_CHARS {
        return text;
    }
    let head = MAX_TOOL_RESULT_CHARS / 2;
    let tail = MAX_TOOL_RESULT_CHARS - head;
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total - tail)
        .map_or(text.len(), |(i, _)| i);
    format!(
        "{}\n[forgehand: {} characters of this result left out here; its head and its tail are kept]\n{}",
        &text[..head_end],
        total - head - tail,
        &text[tail_start..]
    )
}

/// About four characters a token: what matters is the order of magnitude.
pub fn estimate_tokens(messages: &[Message]) -> u64 {
    let chars: usize = messages
        .iter()
        .map(|m| match m {
            Message::System { content } | Message::User { content } => content.len(),
            Message::Assistant { text, tool_calls } => {
                text.as_ref().map_or(0, String::len)
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.len())
                        .sum::<usize>()
            }
            Message::Tool { content, .. } => content.len(),
        })
        .sum();
    (chars / 4) as u64 + 8 * messages.len() as u64
}

/// Tool outputs kept whole when the history is cleared: the latest few,
/// which the model is working from (as many as fit in half the budget).
const KEPT_OUTPUTS: usize = 3;

/// When the conversation passes its budget, clears the tool outputs in
/// one batch: all but the latest few ([`KEPT_OUTPUTS`]) become a one-line note
/// of what they were. In one batch, not one output a turn, so that
/// between clearings each request extends the one before it byte for
/// byte and the provider's prompt cache keeps serving the prefix (an
/// output shortened every turn changed the prefix every turn). Returns
/// how many outputs it cleared.
fn compact(messages: &mut [Message], budget: u64, transcript: &mut Transcript) -> u32 {
    let before = estimate_tokens(messages);
    if before <= budget {
        return 0;
    }
    let outputs: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(
            |(_, m)| matches!(m, Message::Tool { content, .. } if !content.starts_with(CLEARED)),
        )
        .map(|(i, _)| i)
        .collect();
    // The latest outputs stay whole: up to KEPT_OUTPUTS of them, within
    // half the budget, and the latest one whatever its size.
    let (mut kept, mut kept_tokens) = (0, 0);
    for &index in outputs.iter().rev() {
        let tokens = match &messages[index] {
            Message::Tool { content, .. } => content.len() as u64 / 4,
            _ => 0,
        };
        if kept == KEPT_OUTPUTS || (kept > 0 && kept_tokens + tokens > budget / 2) {
            break;
        }
        kept += 1;
        kept_tokens += tokens;
    }
    let clear = outputs.len() - kept;
    for &index in &outputs[..clear] {
        if let Message::Tool { name, content, .. } = &mut messages[index] {
            *content = cleared(name, content);
        }
    }
    let cleared = clear as u32;
    if cleared > 0 {
        transcript.record(
            "compacted",
            json!({
                "cleared": cleared,
                "tokens_before": before,
                "tokens_after": estimate_tokens(messages),
            }),
        );
    }
    cleared
}

/// How a cleared output begins.
const CLEARED: &str = "[cleared";

/// The one line a cleared output becomes: what it was and how it began.
fn cleared(name: &str, content: &str) -> String {
    let first: String = content
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(200)
        .collect();
    format!(
        "{CLEARED} to keep the conversation within its context budget: the {name} result was {} characters; it began: {first}]",
        content.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(n: usize, size: usize) -> Message {
        Message::Tool {
            call_id: format!("call_{n}"),
            name: "bash".into(),
            content: format!("output {n}\n{}", "x".repeat(size)),
        }
    }

    fn conversation(outputs: usize, size: usize) -> Vec<Message> {
        let mut messages = vec![
            Message::System {
                content: "system".into(),
            },
            Message::User {
                content: "task".into(),
            },
        ];
        for n in 0..outputs {
            messages.push(Message::Assistant {
                text: None,
                tool_calls: vec![forgehand_model::ToolCall {
                    id: format!("call_{n}"),
                    name: "bash".into(),
                    arguments: "{}".into(),
                }],
            });
            messages.push(tool(n, size));
        }
        messages
    }

    #[test]
    fn the_history_is_cleared_in_one_batch_and_then_grows_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let mut transcript = Transcript::create(dir.path(), "t", Vec::new()).unwrap();
        let budget = 10_000;
        // Under the budget: nothing changes.
        let mut messages = conversation(4, 4_000);
        assert_eq!(compact(&mut messages, budget, &mut transcript), 0);
        // Over it: every output but the latest three is cleared at once.
        let mut messages = conversation(12, 4_000);
        assert_eq!(compact(&mut messages, budget, &mut transcript), 9);
        let kept: Vec<bool> = messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { content, .. } => Some(!content.starts_with(CLEARED)),
                _ => None,
            })
            .collect();
        assert_eq!(kept, [[false; 9].as_slice(), &[true; 3]].concat());
        assert!(matches!(&messages[3], Message::Tool { content, .. }
            if content.starts_with("[cleared to keep the conversation within its context budget: the bash result was 4009 characters; it began: output 0]")));
        // The next turns add to it and change nothing before them, until
        // the budget is passed again.
        let mut turns = 0;
        loop {
            let before = messages.clone();
            messages.push(Message::Assistant {
                text: None,
                tool_calls: vec![],
            });
            messages.push(tool(100 + turns, 4_000));
            if compact(&mut messages, budget, &mut transcript) > 0 {
                break;
            }
            assert_eq!(
                messages[..before.len()],
                before[..],
                "turn {turns} changed the prefix"
            );
            turns += 1;
        }
        assert!(turns >= 1, "a clearing makes room for more than one turn");
    }

    #[test]
    fn a_long_result_keeps_its_head_and_its_tail() {
        let short = "all 3 tests passed\n".to_owned();
        assert_eq!(clip(short.clone()), short);
        let mut long: String = "é".repeat(40_000);
        long.push_str("\n1 failed, 2 passed");
        let clipped = clip(long);
        assert!(clipped.starts_with("éé"));
        assert!(
            clipped.ends_with("\n1 failed, 2 passed"),
            "the summary is kept"
        );
        assert!(clipped.contains("[forgehand: 10019 characters of this result left out here"));
        assert!(clipped.chars().count() < MAX_TOOL_RESULT_CHARS + 200);
    }
}
