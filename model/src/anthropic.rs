//! Anthropic's Messages API: `POST {base_url}/v1/messages` with tool use.
//! The request and response types are written here: the part of the API
//! used is small, and the Rust crates for it each bring their own HTTP
//! client and retry policy, where Forgehand needs its own (Retry-After,
//! usage per try, one error type across dialects).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    endpoint, http, Message, ModelError, ModelReply, ModelSettings, ToolCall, ToolSpec, Usage,
};

const API_VERSION: &str = "2023-06-01";

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<SystemBlock>,
    messages: Vec<WireMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
}

/// A prompt-cache breakpoint: the provider caches the request up to and
/// including the block that carries it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
enum CacheControl {
    Ephemeral,
}

/// At most this many breakpoints in one request (the API refuses more).
const MAX_BREAKPOINTS: usize = 4;

#[derive(Serialize)]
struct SystemBlock {
    r#type: &'static str,
    text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct WireMessage {
    role: &'static str,
    content: Vec<Block>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    #[serde(other)]
    Other,
}

impl Block {
    fn mark(&mut self) {
        match self {
            Block::Text { cache_control, .. }
            | Block::ToolUse { cache_control, .. }
            | Block::ToolResult { cache_control, .. } => {
                *cache_control = Some(CacheControl::Ephemeral)
            }
            Block::Other => {}
        }
    }
}

#[derive(Deserialize)]
struct Response {
    content: Vec<Block>,
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
}

pub(super) async fn complete(
    client: &reqwest::Client,
    settings: &ModelSettings,
    messages: &[Message],
    tools: &[ToolSpec],
) -> Result<ModelReply, ModelError> {
    let body = request_body(settings, messages, tools)?;
    let headers = headers(settings)?;
    let url = endpoint(&settings.base_url, "v1/messages");
    let (response_body, attempts) = http::post_json(
        client,
        &url,
        headers,
        &body,
        settings.retry,
        &settings.base_url_named,
    )
    .await?;
    let response: Response = serde_json::from_value(response_body.clone())
        .map_err(|e| ModelError::Malformed(format!("not a Messages API answer: {e}")))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in response.content {
        match block {
            Block::Text { text: t, .. } => text.push_str(&t),
            Block::ToolUse {
                id, name, input, ..
            } => tool_calls.push(ToolCall {
                id,
                name,
                // A string here is what a confused server sent as the
                // arguments: passed on as written, so the validation
                // error tells the model.
                arguments: match input {
                    Value::String(raw) => raw,
                    other => other.to_string(),
                },
            }),
            Block::ToolResult { .. } | Block::Other => {}
        }
    }
    let u = response.usage;
    Ok(ModelReply {
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        usage: Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_input_tokens,
            cache_write_tokens: u.cache_creation_input_tokens,
        },
        attempts,
        request_body: body,
        response_body,
    })
}

/// The request, with its prompt-cache breakpoints where Anthropic's
/// documentation puts them: the last tool (the tools come first in the
/// prompt and never change), the system prompt, and the last block of
/// each of the two latest messages — the newest so the next turn reads
/// all of this one from the cache, the one before it so a turn whose
/// newest write was lost (evicted, expired during a slow tool) still
/// finds a cached prefix. Four, the most the API takes.
fn request_body(
    settings: &ModelSettings,
    messages: &[Message],
    tools: &[ToolSpec],
) -> Result<Value, ModelError> {
    let mut tools: Vec<WireTool<'_>> = tools
        .iter()
        .map(|t| WireTool {
            name: t.name,
            description: t.description,
            input_schema: &t.parameters,
            cache_control: None,
        })
        .collect();
    let mut system: Vec<SystemBlock> = system_prompt(messages)
        .into_iter()
        .map(|text| SystemBlock {
            r#type: "text",
            text,
            cache_control: None,
        })
        .collect();
    let mut wire = to_wire(messages);
    let mut marks = 0;
    if let Some(tool) = tools.last_mut() {
        tool.cache_control = Some(CacheControl::Ephemeral);
        marks += 1;
    }
    if let Some(block) = system.last_mut() {
        block.cache_control = Some(CacheControl::Ephemeral);
        marks += 1;
    }
    for message in wire.iter_mut().rev().take(MAX_BREAKPOINTS - marks) {
        if let Some(block) = message.content.last_mut() {
            block.mark();
        }
    }
    let request = Request {
        model: &settings.name,
        max_tokens: settings.max_output_tokens,
        system,
        messages: wire,
        tools,
    };
    serde_json::to_value(&request)
        .map_err(|e| ModelError::Malformed(format!("cannot encode the request: {e}")))
}

fn system_prompt(messages: &[Message]) -> Option<String> {
    let parts: Vec<&str> = messages
        .iter()
        .filter_map(|m| match m {
            Message::System { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// Anthropic wants user and assistant turns to alternate, and tool
/// results as blocks of the next user turn: consecutive messages of one
/// role are merged.
fn to_wire(messages: &[Message]) -> Vec<WireMessage> {
    let mut out: Vec<WireMessage> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::System { .. } => continue,
            Message::User { content } => (
                "user",
                vec![Block::Text {
                    text: content.clone(),
                    cache_control: None,
                }],
            ),
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if let Some(text) = text.as_ref().filter(|t| !t.is_empty()) {
                    blocks.push(Block::Text {
                        text: text.clone(),
                        cache_control: None,
                    });
                }
                for call in tool_calls {
                    blocks.push(Block::ToolUse {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        // The API takes an object; arguments that were not
                        // one are kept as a string in one.
                        input: match serde_json::from_str::<Value>(&call.arguments) {
                            Ok(v @ Value::Object(_)) => v,
                            _ => serde_json::json!({ "_unparsed": call.arguments }),
                        },
                        cache_control: None,
                    });
                }
                ("assistant", blocks)
            }
            Message::Tool {
                call_id, content, ..
            } => (
                "user",
                vec![Block::ToolResult {
                    tool_use_id: call_id.clone(),
                    content: content.clone(),
                    cache_control: None,
                }],
            ),
        };
        match out.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => out.push(WireMessage {
                role,
                content: blocks,
            }),
        }
    }
    out
}

/// The API version, and the key when there is one.
pub(super) fn headers(settings: &ModelSettings) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    headers.insert(
        HeaderName::from_static("anthropic-version"),
        HeaderValue::from_static(API_VERSION),
    );
    if let Some(key) = &settings.api_key {
        let mut value = HeaderValue::from_str(key.expose_secret()).map_err(|_| {
            ModelError::Malformed("model.api_key is not a valid header value".into())
        })?;
        value.set_sensitive(true);
        headers.insert(HeaderName::from_static("x-api-key"), value);
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RetryPolicy;
    use std::time::Duration;

    fn settings() -> ModelSettings {
        ModelSettings {
            provider: crate::Provider::Anthropic,
            base_url: "http://127.0.0.1:9".into(),
            base_url_named: "model.base_url".into(),
            api_key: None,
            name: "claude".into(),
            timeout: Duration::from_secs(1),
            retry: RetryPolicy {
                max_retries: 0,
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(1),
            },
            max_output_tokens: 100,
            tool_mode: crate::ToolMode::Native,
        }
    }

    fn tool(name: &'static str) -> ToolSpec {
        ToolSpec {
            name,
            description: "a tool",
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    /// Every block of the request that carries a breakpoint, by where it is.
    fn breakpoints(body: &Value) -> Vec<String> {
        let mut found = Vec::new();
        let marked =
            |v: &Value| v.get("cache_control") == Some(&serde_json::json!({"type": "ephemeral"}));
        for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
            if marked(t) {
                found.push(format!("tools[{i}]"));
            }
        }
        for (i, b) in body["system"].as_array().into_iter().flatten().enumerate() {
            if marked(b) {
                found.push(format!("system[{i}]"));
            }
        }
        for (m, message) in body["messages"].as_array().unwrap().iter().enumerate() {
            for (b, block) in message["content"].as_array().unwrap().iter().enumerate() {
                if marked(block) {
                    found.push(format!("messages[{m}].content[{b}]"));
                }
            }
        }
        found
    }

    fn conversation(turns: usize) -> Vec<Message> {
        let mut messages = vec![
            Message::System {
                content: "You are Forgehand's agent.".into(),
            },
            Message::User {
                content: "Fix add.".into(),
            },
        ];
        for n in 0..turns {
            messages.push(Message::Assistant {
                text: Some("Looking.".into()),
                tool_calls: vec![ToolCall {
                    id: format!("call_{n}"),
                    name: "bash".into(),
                    arguments: r#"{"command":"ls"}"#.into(),
                }],
            });
            messages.push(Message::Tool {
                call_id: format!("call_{n}"),
                name: "bash".into(),
                content: format!("output {n}"),
            });
        }
        messages
    }

    #[test]
    fn breakpoints_sit_on_the_tools_the_system_prompt_and_the_two_latest_messages() {
        let tools = [tool("bash"), tool("read_file"), tool("finish")];
        let body = request_body(&settings(), &conversation(3), &tools).unwrap();
        assert_eq!(
            breakpoints(&body),
            [
                "tools[2]",
                "system[0]",
                // The assistant's last tool call, then the tool's answer
                // (a user turn): the last block of each.
                "messages[5].content[1]",
                "messages[6].content[0]",
            ]
        );
        assert_eq!(body["system"][0]["text"], "You are Forgehand's agent.");
        // The first turn: the task is the only message.
        let first = request_body(&settings(), &conversation(0), &tools).unwrap();
        assert_eq!(
            breakpoints(&first),
            ["tools[2]", "system[0]", "messages[0].content[0]"]
        );
        // Never more than the API takes, whatever the conversation.
        for turns in 0..6 {
            let body = request_body(&settings(), &conversation(turns), &tools).unwrap();
            assert!(breakpoints(&body).len() <= MAX_BREAKPOINTS);
        }
    }

    #[test]
    fn the_next_turn_extends_this_one_but_for_where_the_breakpoints_sit() {
        // What the cache keys on is the content; a breakpoint moving on is
        // how the documentation keeps the cached prefix growing.
        let tools = [tool("bash")];
        let strip = |mut v: Value| {
            fn walk(v: &mut Value) {
                match v {
                    Value::Object(map) => {
                        map.remove("cache_control");
                        map.values_mut().for_each(walk);
                    }
                    Value::Array(items) => items.iter_mut().for_each(walk),
                    _ => {}
                }
            }
            walk(&mut v);
            v
        };
        let this = strip(request_body(&settings(), &conversation(2), &tools).unwrap());
        let next = strip(request_body(&settings(), &conversation(3), &tools).unwrap());
        let (a, b) = (
            this["messages"].as_array().unwrap(),
            next["messages"].as_array().unwrap(),
        );
        assert_eq!(a[..], b[..a.len()]);
        assert_eq!(
            (this["tools"].clone(), this["system"].clone()),
            (next["tools"].clone(), next["system"].clone())
        );
    }

    #[test]
    fn the_four_counts_are_read_apart() {
        let answer: Response = serde_json::from_value(serde_json::json!({
            "content": [{"type": "text", "text": "ok"}],
            "usage": {
                "input_tokens": 21,
                "output_tokens": 393,
                "cache_creation_input_tokens": 188_086,
                "cache_read_input_tokens": 0
            }
        }))
        .unwrap();
        let u = answer.usage;
        assert_eq!(
            (
                u.input_tokens,
                u.output_tokens,
                u.cache_creation_input_tokens,
                u.cache_read_input_tokens
            ),
            (21, 393, 188_086, 0)
        );
    }
}
