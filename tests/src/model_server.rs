//! A scripted model server: OpenAI-compatible (`POST /v1/chat/completions`)
//! and Anthropic-compatible (`POST /v1/messages`) endpoints that play back
//! a script of answers (text and tool calls) in order, record every
//! request, and can inject faults: 429 with `Retry-After`, 500s, slow
//! answers, malformed tool-call arguments.
//!
//! It also refuses what the real APIs refuse in the parts Forgehand uses
//! (a tool result that answers no call, Anthropic turns that do not
//! alternate, a missing `max_tokens`), so a client bug fails the test.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// The tokens a scripted answer reports: input not read from a cache,
/// output, and what was read from and written to the prompt cache.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptUsage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// One answer of the script.
#[derive(Debug, Clone)]
pub enum Step {
    /// Text and tool calls (name, raw arguments as the model writes them).
    Reply {
        text: Option<String>,
        calls: Vec<(String, String)>,
        /// Tokens to report; `None` estimates input from the request's
        /// size and reports no cache.
        usage: Option<ScriptUsage>,
    },
    /// An error answer.
    Fail {
        status: u16,
        retry_after: Option<String>,
    },
    /// Waits, then plays the step.
    Slow { delay: Duration, then: Box<Step> },
}

impl Step {
    pub fn call(name: &str, args: Value) -> Step {
        Step::Reply {
            text: None,
            calls: vec![(name.into(), args.to_string())],
            usage: None,
        }
    }

    /// A tool call whose arguments are written as given, valid or not.
    pub fn raw_call(name: &str, raw: &str) -> Step {
        Step::Reply {
            text: None,
            calls: vec![(name.into(), raw.into())],
            usage: None,
        }
    }

    pub fn finish(summary: &str, title: &str) -> Step {
        Step::call("finish", json!({"summary": summary, "title": title}))
    }

    pub fn text(text: &str) -> Step {
        Step::Reply {
            text: Some(text.into()),
            calls: vec![],
            usage: None,
        }
    }

    pub fn with_usage(self, input: u64, output: u64) -> Step {
        match self {
            Step::Reply { text, calls, .. } => Step::Reply {
                text,
                calls,
                usage: Some(ScriptUsage {
                    input,
                    output,
                    ..ScriptUsage::default()
                }),
            },
            other => other,
        }
    }

    /// Reports `read` input tokens read from the provider's prompt cache
    /// and `write` written to it, beside the input of
    /// [`Step::with_usage`] (OpenAI's dialect counts the read ones inside
    /// `prompt_tokens` and reports no writes; Anthropic's apart).
    pub fn with_cache(self, read: u64, write: u64) -> Step {
        match self {
            Step::Reply { text, calls, usage } => {
                let usage = usage.unwrap_or_default();
                Step::Reply {
                    text,
                    calls,
                    usage: Some(ScriptUsage {
                        cache_read: read,
                        cache_write: write,
                        ..usage
                    }),
                }
            }
            other => other,
        }
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `openai` or `anthropic`.
    pub dialect: &'static str,
    pub body: Value,
    pub authorization: Option<String>,
    /// What the server answered.
    pub status: u16,
    /// When the request came in, and when its answer was ready (after a
    /// [`Step::Slow`] delay): what a test measures a client's waits by.
    pub received: Instant,
    pub answered: Instant,
}

#[derive(Default)]
struct Script {
    steps: VecDeque<Step>,
    /// Played when the script is over (none: answer 500 "script over").
    repeat: Option<Step>,
    requests: Vec<Recorded>,
    served: u64,
    /// A context window, in characters of the request body.
    max_chars: Option<usize>,
    /// The review Forgehand asks for at the agent's first `finish` is
    /// answered by finishing again, as a model that stands by its work
    /// does, without a step of the script (see [`ModelServer::script_reviews`]).
    script_reviews: bool,
    /// The last `finish` played, to play again at a review.
    last_finish: Option<Step>,
    /// Scripts chosen by the conversation's task (see
    /// [`ModelServer::routed`]).
    routes: Vec<(String, Vec<Step>)>,
}

/// The step of the routed script whose text is in the conversation's
/// first user message: the one at the conversation's turn (how many
/// answers it holds), the script's last once past its end (a review or
/// another round after failing tests is answered by finishing again).
fn routed_step(routes: &[(String, Vec<Step>)], body: &Value) -> Option<Step> {
    let messages = body["messages"].as_array()?;
    let task = match &messages.iter().find(|m| m["role"] == "user")?["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let (_, steps) = routes
        .iter()
        .find(|(needle, _)| task.contains(needle.as_str()))?;
    let turn = messages.iter().filter(|m| m["role"] == "assistant").count();
    steps.get(turn).or(steps.last()).cloned()
}

pub struct ModelServer {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    script: Arc<Mutex<Script>>,
    _server: crate::local_server::LocalServer,
}

impl ModelServer {
    pub async fn start(steps: Vec<Step>) -> anyhow::Result<ModelServer> {
        let script = Arc::new(Mutex::new(Script {
            steps: steps.into(),
            ..Default::default()
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(script.clone());
        let server = crate::local_server::LocalServer::start(app).await?;
        Ok(ModelServer {
            base_url: server.base_url.clone(),
            script,
            _server: server,
        })
    }

    /// A server with a script per task, for conversations that run at
    /// once or in any order (`forgehand eval --jobs`): a request plays
    /// the script whose `needle` its first user message holds, at the
    /// conversation's own turn, so the same task can be run again.
    pub async fn routed(routes: Vec<(&str, Vec<Step>)>) -> anyhow::Result<ModelServer> {
        let server = ModelServer::start(Vec::new()).await?;
        server.script.lock().unwrap().routes = routes
            .into_iter()
            .map(|(needle, steps)| (needle.to_owned(), steps))
            .collect();
        Ok(server)
    }

    /// From now on every conversation plays `steps` at its own turn,
    /// whatever others run at the same time (several workers sharing one
    /// script in order would take each other's steps).
    pub fn per_conversation(&self, steps: Vec<Step>) {
        self.script.lock().unwrap().routes = vec![(String::new(), steps)];
    }

    /// The review turn is the script's to answer, like any other turn
    /// (by default it is answered by finishing again).
    pub fn script_reviews(&self) {
        self.script.lock().unwrap().script_reviews = true;
    }

    /// Once the script is over, play `step` for every further request.
    pub fn then_always(&self, step: Step) {
        self.script.lock().unwrap().repeat = Some(step);
    }

    /// Refuses requests longer than `chars` (as a model refuses a
    /// conversation longer than its context window).
    pub fn limit_context(&self, chars: usize) {
        self.script.lock().unwrap().max_chars = Some(chars);
    }

    /// The base URL for `model.base_url` in `dialect`.
    pub fn url_for(&self, dialect: &str) -> String {
        match dialect {
            "openai" => format!("{}/v1", self.base_url),
            _ => self.base_url.clone(),
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.script.lock().unwrap().requests.clone()
    }

    /// Steps not yet played.
    pub fn left(&self) -> usize {
        self.script.lock().unwrap().steps.len()
    }
}

type Shared = Arc<Mutex<Script>>;

async fn openai(
    State(script): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    serve("openai", script, headers, body).await
}

async fn anthropic(
    State(script): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    serve("anthropic", script, headers, body).await
}

async fn serve(dialect: &'static str, script: Shared, headers: HeaderMap, body: Value) -> Response {
    let received = Instant::now();
    let authorization = headers
        .get("authorization")
        .or_else(|| headers.get("x-api-key"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let problem = if dialect == "openai" {
        check_openai(&body)
    } else {
        check_anthropic(&headers, &body)
    };
    let (step, n, problem) = {
        let mut s = script.lock().unwrap();
        s.served += 1;
        let size = body.to_string().len();
        let problem = problem.or_else(|| {
            s.max_chars.filter(|max| size > *max).map(|max| {
                format!(
                    "context_length_exceeded: the request is {size} characters; the limit is {max}"
                )
            })
        });
        let step = if problem.is_some() {
            None
        } else if !s.routes.is_empty() {
            routed_step(&s.routes, &body)
        } else if !s.script_reviews && is_review(&body) && s.last_finish.is_some() {
            s.last_finish.clone()
        } else {
            s.steps.pop_front().or_else(|| s.repeat.clone())
        };
        if let Some(Step::Reply { calls, text, .. }) = &step {
            // A finish: a tool call, or (text mode) a finish block.
            let text_finish = text.as_deref().is_some_and(|t| t.contains("```finish"));
            if text_finish || calls.iter().any(|(name, _)| name == "finish") {
                s.last_finish = step.clone();
            }
        }
        (step, s.served, problem)
    };
    let (mut step, mut status) = (step, 200u16);
    let response = loop {
        match step {
            _ if problem.is_some() => {
                status = 400;
                break (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"error": {"message": problem.clone().unwrap()}})),
                )
                    .into_response();
            }
            None => {
                status = 500;
                break (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Json(json!({"error": {"message": "the script is over"}})),
                )
                    .into_response();
            }
            Some(Step::Slow { delay, then }) => {
                tokio::time::sleep(delay).await;
                step = Some(*then);
            }
            Some(Step::Fail {
                status: code,
                retry_after,
            }) => {
                status = code;
                let mut response = (
                    StatusCode::from_u16(code).unwrap(),
                    Json(json!({"error": {"message": "injected fault", "type": "scripted"}})),
                )
                    .into_response();
                if let Some(after) = retry_after {
                    response
                        .headers_mut()
                        .insert("retry-after", after.parse().unwrap());
                }
                break response;
            }
            Some(Step::Reply { text, calls, usage }) => {
                let usage = usage.unwrap_or(ScriptUsage {
                    input: (body.to_string().len() / 4) as u64,
                    output: 50,
                    ..ScriptUsage::default()
                });
                let answer = if dialect == "openai" {
                    openai_answer(n, text, calls, usage)
                } else {
                    anthropic_answer(n, text, calls, usage)
                };
                break Json(answer).into_response();
            }
        }
    };
    script.lock().unwrap().requests.push(Recorded {
        dialect,
        body,
        authorization,
        status,
        received,
        answered: Instant::now(),
    });
    response
}

fn openai_answer(
    n: u64,
    text: Option<String>,
    calls: Vec<(String, String)>,
    usage: ScriptUsage,
) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{n}_{i}"), "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    json!({
        "id": format!("chatcmpl-{n}"),
        "object": "chat.completion",
        "created": 1_700_000_000u64 + n,
        "model": "scripted",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": usage.input + usage.cache_read,
                  "completion_tokens": usage.output,
                  "total_tokens": usage.input + usage.cache_read + usage.output,
                  "prompt_tokens_details": {"cached_tokens": usage.cache_read}}
    })
}

fn anthropic_answer(
    n: u64,
    text: Option<String>,
    calls: Vec<(String, String)>,
    usage: ScriptUsage,
) -> Value {
    let mut content = Vec::new();
    if let Some(text) = text {
        content.push(json!({"type": "text", "text": text}));
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        // Malformed arguments arrive as the string the model wrote.
        let input = match serde_json::from_str::<Value>(args) {
            Ok(v @ Value::Object(_)) => v,
            _ => Value::String(args.clone()),
        };
        content.push(json!({"type": "tool_use", "id": format!("toolu_{n}_{i}"), "name": name, "input": input}));
    }
    json!({
        "id": format!("msg_{n}"),
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": content,
        "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
        "usage": {"input_tokens": usage.input, "output_tokens": usage.output,
                  "cache_read_input_tokens": usage.cache_read,
                  "cache_creation_input_tokens": usage.cache_write}
    })
}

fn check_openai(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    if body["model"].as_str().is_none_or(str::is_empty) {
        return Some("model is required".into());
    }
    let mut open_calls = HashSet::new();
    for m in messages {
        match m["role"].as_str() {
            Some("assistant") => {
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    open_calls.insert(call["id"].as_str().unwrap_or_default().to_owned());
                }
            }
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or_default();
                if !open_calls.remove(id) {
                    return Some(format!("tool message {id:?} answers no tool call"));
                }
            }
            Some("system" | "user") => {}
            other => return Some(format!("unknown role {other:?}")),
        }
    }
    None
}

/// How many objects in `value` have `key`.
fn count_key(value: &Value, key: &str) -> usize {
    match value {
        Value::Object(map) => {
            usize::from(map.contains_key(key))
                + map.values().map(|v| count_key(v, key)).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(|v| count_key(v, key)).sum(),
        _ => 0,
    }
}

fn check_anthropic(headers: &HeaderMap, body: &Value) -> Option<String> {
    if headers.get("anthropic-version").is_none() {
        return Some("anthropic-version header is required".into());
    }
    if body["max_tokens"].as_u64().is_none() {
        return Some("max_tokens: Field required".into());
    }
    // As the API answers a request with more breakpoints than it takes.
    let breakpoints = count_key(body, "cache_control");
    if breakpoints > 4 {
        return Some(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    match &body["system"] {
        Value::Null | Value::String(_) => {}
        Value::Array(blocks)
            if blocks
                .iter()
                .all(|b| b["type"] == "text" && b["text"].is_string()) => {}
        _ => return Some("system: a string or a list of text blocks".into()),
    }
    let messages = body["messages"].as_array()?;
    let mut expected = "user";
    let mut tool_uses = HashSet::new();
    for m in messages {
        let role = m["role"].as_str().unwrap_or_default();
        if role != expected {
            return Some(format!("messages: roles must alternate, starting with user; got {role} where {expected} was due"));
        }
        for block in m["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("tool_use") => {
                    if !block["input"].is_object() {
                        return Some("tool_use.input: must be an object".into());
                    }
                    tool_uses.insert(block["id"].as_str().unwrap_or_default().to_owned());
                }
                Some("tool_result") => {
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    if !tool_uses.contains(id) {
                        return Some(format!("tool_result {id:?} answers no tool_use"));
                    }
                }
                _ => {}
            }
        }
        expected = if expected == "user" {
            "assistant"
        } else {
            "user"
        };
    }
    None
}

/// Whether the request's newest message is the review Forgehand asks for
/// at the agent's first `finish` (in either dialect's shape).
fn is_review(body: &Value) -> bool {
    let Some(last) = body["messages"].as_array().and_then(|m| m.last()) else {
        return false;
    };
    let text = match &last["content"] {
        Value::String(text) => text.as_str(),
        Value::Array(blocks) => blocks
            .last()
            .and_then(|b| b["text"].as_str())
            .unwrap_or_default(),
        _ => "",
    };
    // In text mode the review follows the finish's output in one turn.
    last["role"] == "user" && text.contains(REVIEW_PROMPT)
}

/// How Forgehand's review turn begins.
pub const REVIEW_PROMPT: &str = "Before this is done, review it.";
