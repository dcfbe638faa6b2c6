//! `model.tool_mode = "text"`, for models without native tool calls
//! (many local ones), as mini-SWE-agent drives them: each reply holds
//! exactly one fenced block — ```` ```bash ```` with a command, or
//! ```` ```finish ```` with the summary (its first line the title) — and
//! each command's output comes back as the next user turn. The agent's
//! loop is the same in both modes: here the conversation is put into
//! plain turns on the way out, and a reply's block read back into the
//! one tool call it stands for.

use serde_json::json;

use super::{Message, ModelReply, ToolCall};

/// What the system prompt gains in text mode.
pub const INSTRUCTIONS: &str = "\n\nYou act by replying with exactly one fenced code block per reply, and nothing else counts:\n- ```bash with one shell command (run in the repository's working copy, /workspace; edit files with shell tools such as sed, cat <<'EOF' > file, or python3);\n- ```finish when you are done: its first line is the pull request's title, the rest the summary of what you changed and how you checked it.\nThe command's output comes back as the next message. Reply with exactly one block each time.";

/// The conversation as plain turns: the system prompt told the format,
/// tool calls as the text that made them, tool outputs as user turns.
pub fn to_plain(messages: &[Message]) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        let plain = match message {
            Message::System { content } => Message::System {
                content: format!("{content}{INSTRUCTIONS}"),
            },
            Message::Assistant { text, .. } => Message::Assistant {
                text: text.clone(),
                tool_calls: Vec::new(),
            },
            Message::Tool { content, .. } => Message::User {
                content: format!("Output:\n{content}"),
            },
            other => other.clone(),
        };
        // Two user turns in a row (a tool's output, then the host's
        // word) are one turn: some servers want turns to alternate.
        match (out.last_mut(), &plain) {
            (Some(Message::User { content: last }), Message::User { content }) => {
                last.push_str("\n\n");
                last.push_str(content);
            }
            _ => out.push(plain),
        }
    }
    out
}

/// The reply's one block, as the tool call it stands for; the reply is
/// left without a call (and the agent reminded of the format) when it
/// holds none or several.
pub fn read_reply(mut reply: ModelReply, turn: u64) -> ModelReply {
    reply.tool_calls.clear();
    let Some(text) = reply.text.as_deref() else {
        return reply;
    };
    let blocks = fenced_blocks(text);
    if let [(lang, body)] = blocks.as_slice() {
        let call = match lang.as_str() {
            "bash" | "sh" | "shell" => Some(("bash", json!({ "command": body }))),
            "finish" => {
                let (title, summary) = body.split_once('\n').unwrap_or((body, ""));
                let summary = if summary.trim().is_empty() {
                    title
                } else {
                    summary
                };
                Some((
                    "finish",
                    json!({ "title": title.trim(), "summary": summary.trim() }),
                ))
            }
            _ => None,
        };
        if let Some((name, arguments)) = call {
            reply.tool_calls.push(ToolCall {
                id: format!("text_{turn}"),
                name: name.into(),
                arguments: arguments.to_string(),
            });
        }
    }
    reply
}

/// What the agent is told when a reply holds no block or several.
pub const REMINDER: &str = "Reply with exactly one fenced block: ```bash with one command, or ```finish with the title on its first line and the summary after it.";

/// Every fenced block of `text`: its language and its body.
fn fenced_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(lang) = trimmed.strip_prefix("```") {
                    open = Some((lang.trim().to_ascii_lowercase(), Vec::new()));
                }
            }
            Some((lang, body)) => {
                if trimmed.trim_end() == "```" {
                    blocks.push((std::mem::take(lang), body.join("\n")));
                    open = None;
                } else {
                    body.push(line);
                }
            }
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Usage;

    fn reply(text: &str) -> ModelReply {
        ModelReply {
            text: Some(text.into()),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            attempts: 1,
            request_body: json!({}),
            response_body: json!({}),
        }
    }

    #[test]
    fn one_block_is_one_call_and_anything_else_is_none() {
        let bash = read_reply(
            reply("I will look.\n```bash\nls -la\ncat calc.sh\n```\n"),
            3,
        );
        assert_eq!(bash.tool_calls.len(), 1);
        assert_eq!(bash.tool_calls[0].name, "bash");
        assert_eq!(bash.tool_calls[0].id, "text_3");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&bash.tool_calls[0].arguments).unwrap(),
            json!({"command": "ls -la\ncat calc.sh"})
        );
        let finish = read_reply(
            reply("```finish\nFix add\nadd now adds; sh test.sh passes.\n```"),
            4,
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&finish.tool_calls[0].arguments).unwrap(),
            json!({"title": "Fix add", "summary": "add now adds; sh test.sh passes."})
        );
        for text in [
            "no block at all",
            "```bash\nls\n```\n```bash\npwd\n```",
            "```python\nprint(1)\n```",
            "```bash\nnever closed",
        ] {
            assert!(read_reply(reply(text), 1).tool_calls.is_empty(), "{text}");
        }
    }

    #[test]
    fn the_conversation_goes_out_as_plain_turns() {
        let plain = to_plain(&[
            Message::System {
                content: "Be good.".into(),
            },
            Message::User {
                content: "Fix add.".into(),
            },
            Message::Assistant {
                text: Some("```bash\nls\n```".into()),
                tool_calls: vec![ToolCall {
                    id: "text_1".into(),
                    name: "bash".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::Tool {
                call_id: "text_1".into(),
                name: "bash".into(),
                content: "calc.sh".into(),
            },
            Message::User {
                content: "Tests failed.".into(),
            },
        ]);
        assert_eq!(plain.len(), 4);
        assert!(
            matches!(&plain[0], Message::System { content } if content.ends_with(INSTRUCTIONS))
        );
        assert!(
            matches!(&plain[2], Message::Assistant { tool_calls, .. } if tool_calls.is_empty())
        );
        assert!(
            matches!(&plain[3], Message::User { content } if content == "Output:\ncalc.sh\n\nTests failed.")
        );
    }
}
