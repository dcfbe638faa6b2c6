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
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<WireMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
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
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
    },
    #[serde(other)]
    Other,
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
    let request = Request {
        model: &settings.name,
        max_tokens: settings.max_output_tokens,
        system: system_prompt(messages),
        messages: to_wire(messages),
        tools: tools
            .iter()
            .map(|t| WireTool {
                name: t.name,
                description: t.description,
                input_schema: &t.parameters,
            })
            .collect(),
    };
    let body = serde_json::to_value(&request)
        .map_err(|e| ModelError::Malformed(format!("cannot encode the request: {e}")))?;
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
            Block::Text { text: t } => text.push_str(&t),
            Block::ToolUse { id, name, input } => tool_calls.push(ToolCall {
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
            input_tokens: u.input_tokens
                + u.cache_creation_input_tokens
                + u.cache_read_input_tokens,
            output_tokens: u.output_tokens,
        },
        attempts,
        request_body: body,
        response_body,
    })
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
                }],
            ),
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if let Some(text) = text.as_ref().filter(|t| !t.is_empty()) {
                    blocks.push(Block::Text { text: text.clone() });
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
