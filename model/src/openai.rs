//! The OpenAI-compatible dialect: `POST {base_url}/chat/completions` with
//! tool calls, in async-openai's request and response types.

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionTool, ChatCompletionTools,
    CreateChatCompletionRequest, CreateChatCompletionResponse, FunctionCall, FunctionObject,
};
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use secrecy::ExposeSecret;

use super::{
    endpoint, http, Message, ModelError, ModelReply, ModelSettings, ToolCall, ToolSpec, Usage,
};

pub(super) async fn complete(
    client: &reqwest::Client,
    settings: &ModelSettings,
    messages: &[Message],
    tools: &[ToolSpec],
) -> Result<ModelReply, ModelError> {
    let request = CreateChatCompletionRequest {
        model: settings.name.clone(),
        messages: messages.iter().map(to_wire).collect(),
        tools: (!tools.is_empty()).then(|| {
            tools
                .iter()
                .map(|t| {
                    ChatCompletionTools::Function(ChatCompletionTool {
                        function: FunctionObject {
                            name: t.name.into(),
                            description: Some(t.description.into()),
                            parameters: Some(t.parameters.clone()),
                            strict: None,
                        },
                    })
                })
                .collect()
        }),
        ..Default::default()
    };
    let body = serde_json::to_value(&request)
        .map_err(|e| ModelError::Malformed(format!("cannot encode the request: {e}")))?;
    let headers = headers(settings)?;
    let url = endpoint(&settings.base_url, "chat/completions");
    let (response_body, attempts) = http::post_json(
        client,
        &url,
        headers,
        &body,
        settings.retry,
        &settings.base_url_named,
    )
    .await?;
    let response: CreateChatCompletionResponse = serde_json::from_value(response_body.clone())
        .map_err(|e| ModelError::Malformed(format!("not a chat completion: {e}")))?;
    let choice = response
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ModelError::Malformed("the completion has no choices".into()))?;
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .filter_map(|call| match call {
            ChatCompletionMessageToolCalls::Function(call) => Some(ToolCall {
                id: call.id,
                name: call.function.name,
                arguments: call.function.arguments,
            }),
            ChatCompletionMessageToolCalls::Custom(_) => None,
        })
        .collect();
    let usage = response.usage.map(|u| billed(&u)).unwrap_or_default();
    Ok(ModelReply {
        text: choice.message.content.filter(|t| !t.is_empty()),
        tool_calls,
        usage,
        attempts,
        request_body: body,
        response_body,
    })
}

fn to_wire(message: &Message) -> ChatCompletionRequestMessage {
    match message {
        Message::System { content } => {
            ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
                content: ChatCompletionRequestSystemMessageContent::Text(content.clone()),
                name: None,
            })
        }
        Message::User { content } => {
            ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                content: ChatCompletionRequestUserMessageContent::Text(content.clone()),
                name: None,
            })
        }
        Message::Assistant { text, tool_calls } => {
            #[allow(deprecated)]
            let assistant = ChatCompletionRequestAssistantMessage {
                content: text
                    .clone()
                    .map(ChatCompletionRequestAssistantMessageContent::Text),
                tool_calls: (!tool_calls.is_empty()).then(|| {
                    tool_calls
                        .iter()
                        .map(|c| {
                            ChatCompletionMessageToolCalls::Function(
                                ChatCompletionMessageToolCall {
                                    id: c.id.clone(),
                                    function: FunctionCall {
                                        name: c.name.clone(),
                                        arguments: c.arguments.clone(),
                                    },
                                },
                            )
                        })
                        .collect()
                }),
                ..Default::default()
            };
            ChatCompletionRequestMessage::Assistant(assistant)
        }
        Message::Tool {
            call_id, content, ..
        } => ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
            content: ChatCompletionRequestToolMessageContent::Text(content.clone()),
            tool_call_id: call_id.clone(),
        }),
    }
}

/// The key, as a bearer token, when there is one.
pub(super) fn headers(settings: &ModelSettings) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    if let Some(key) = &settings.api_key {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {}", key.expose_secret())).map_err(|_| {
                ModelError::Malformed("model.api_key is not a valid header value".into())
            })?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    Ok(headers)
}

/// The four counts from Chat Completions' usage: what the prompt read
/// from the provider's cache is apart from the rest of the input (OpenAI
/// writes its cache at no charge).
fn billed(u: &async_openai::types::chat::CompletionUsage) -> Usage {
    let cached = u
        .prompt_tokens_details
        .as_ref()
        .and_then(|d| d.cached_tokens)
        .unwrap_or(0);
    Usage {
        input_tokens: u.prompt_tokens.saturating_sub(cached).into(),
        output_tokens: u.completion_tokens.into(),
        cache_read_tokens: cached.into(),
        cache_write_tokens: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_prompt_tokens_are_apart_from_the_rest_of_the_input() {
        let u: async_openai::types::chat::CompletionUsage =
            serde_json::from_value(serde_json::json!({
                "prompt_tokens": 2006,
                "completion_tokens": 300,
                "total_tokens": 2306,
                "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0}
            }))
            .unwrap();
        let usage = billed(&u);
        assert_eq!(
            usage,
            Usage {
                input_tokens: 86,
                output_tokens: 300,
                cache_read_tokens: 1920,
                cache_write_tokens: 0,
            }
        );
        assert_eq!(usage.prompt_tokens(), 2006);
        // A server that says nothing of a cache (Ollama, llama.cpp).
        let plain: async_openai::types::chat::CompletionUsage = serde_json::from_value(
            serde_json::json!({"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}),
        )
        .unwrap();
        assert_eq!(billed(&plain).input_tokens, 10);
    }
}
