//! Each tool's JSON schema, with bounds, and validation against it.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::{json, Value};

use forgehand_model::ToolSpec;

/// Longest file the agent may write at once, and the longest text it
/// may pass to a tool.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

pub fn specs() -> Vec<ToolSpec> {
    let path = json!({"type": "string", "minLength": 1, "maxLength": 4096,
        "description": "relative to the repository root"});
    vec![
        ToolSpec {
            name: "read_file",
            description: "Read a text file of the repository, with line numbers. Optionally only lines start_line..=end_line (1-based).",
            parameters: json!({"type": "object", "additionalProperties": false,
                "required": ["path"],
                "properties": {
                    "path": path,
                    "start_line": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1}
                }}),
        },
        ToolSpec {
            name: "write_file",
            description: "Create or overwrite a file with the given content (parent directories are created). Answers with the changed lines, numbered; a Python file that compiled and would not after the change is left as it was, and the error is shown.",
            parameters: json!({"type": "object", "additionalProperties": false,
                "required": ["path", "content"],
                "properties": {
                    "path": path,
                    "content": {"type": "string", "maxLength": MAX_FILE_BYTES}
                }}),
        },
        ToolSpec {
            name: "edit_file",
            description: "Replace old_string with new_string in a file. old_string must occur exactly once: include enough surrounding text to make it unique. Answers with the changed lines, numbered; a Python file that compiled and would not after the edit is left as it was, and the error is shown.",
            parameters: json!({"type": "object", "additionalProperties": false,
                "required": ["path", "old_string", "new_string"],
                "properties": {
                    "path": path,
                    "old_string": {"type": "string", "minLength": 1, "maxLength": MAX_FILE_BYTES},
                    "new_string": {"type": "string", "maxLength": MAX_FILE_BYTES}
                }}),
        },
        ToolSpec {
            name: "list_files",
            description: "List files and directories under a directory of the repository (default: the root), to a depth.",
            parameters: json!({"type": "object", "additionalProperties": false,
                "properties": {
                    "path": path,
                    "max_depth": {"type": "integer", "minimum": 1, "maximum": 10}
                }}),
        },
        ToolSpec {
            name: "glob",
            description: "Find files whose path matches a glob such as src/**/*.rs.",
            parameters: json!({"type": "object", "additionalProperties": false,
                "required": ["pattern"],
                "properties": {"pattern": {"type": "string", "minLength": 1, "maxLength": 1024}}}),
        },
        ToolSpec {
            name: "grep",
            description: "Search file contents with a regular expression (ripgrep); prints path:line:text.",
            parameters: json!({"type": "object", "additionalProperties": false,
                "required": ["pattern"],
                "properties": {
                    "pattern": {"type": "string", "minLength": 1, "maxLength": 1024},
                    "path": path,
                    "ignore_case": {"type": "boolean"}
                }}),
        },
        ToolSpec {
            name: "bash",
            description: "Run a shell command in the repository (/workspace) inside the sandbox: no network. Prints the exit status, stdout and stderr.",
            parameters: json!({"type": "object", "additionalProperties": false,
                "required": ["command"],
                "properties": {
                    "command": {"type": "string", "minLength": 1, "maxLength": 16384},
                    "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 3600}
                }}),
        },
        ToolSpec {
            name: "finish",
            description: "Say you are done: a summary of what you changed and why, and a pull-request title. When answering review threads, add one reply per thread: its number, whether you changed the code for it, and a short note (what you did, or why not).",
            parameters: json!({"type": "object", "additionalProperties": false,
                "required": ["summary", "title"],
                "properties": {
                    "summary": {"type": "string", "minLength": 1, "maxLength": 20000},
                    "title": {"type": "string", "minLength": 1, "maxLength": 120},
                    "replies": {"type": "array", "maxItems": 100, "items": {
                        "type": "object", "additionalProperties": false,
                        "required": ["thread", "changed", "note"],
                        "properties": {
                            "thread": {"type": "integer", "minimum": 1, "maximum": 1000},
                            "changed": {"type": "boolean"},
                            "note": {"type": "string", "maxLength": 2000}
                        }}}
                }}),
        },
    ]
}

static VALIDATORS: LazyLock<HashMap<&'static str, jsonschema::Validator>> = LazyLock::new(|| {
    super::specs()
        .iter()
        .map(|spec| {
            let validator =
                jsonschema::validator_for(&spec.parameters).expect("the tool schemas are valid");
            (spec.name, validator)
        })
        .collect()
});

/// The arguments as JSON, or a message for the model saying what is wrong.
pub fn validate(tool: &str, arguments: &str) -> Result<Value, String> {
    let Some(validator) = VALIDATORS.get(tool) else {
        let names: Vec<&str> = super::specs().iter().map(|s| s.name).collect();
        return Err(format!(
            "there is no tool named `{tool}`; the tools are {}",
            names.join(", ")
        ));
    };
    let raw = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    let value: Value = serde_json::from_str(raw).map_err(|e| {
        format!("the arguments of `{tool}` are not valid JSON ({e}); send one JSON object that matches the tool's schema")
    })?;
    let problems: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(format!(
            "the arguments of `{tool}` do not match its schema: {}",
            problems.join("; ")
        ))
    }
}

#[derive(Deserialize)]
pub struct ReadArgs {
    pub path: String,
    pub start_line: Option<usize>,
    pub end_line: Option<usize>,
}

#[derive(Deserialize)]
pub struct WriteArgs {
    pub path: String,
    pub content: String,
}

#[derive(Deserialize)]
pub struct EditArgs {
    pub path: String,
    pub old_string: String,
    pub new_string: String,
}

#[derive(Deserialize)]
pub struct ListArgs {
    pub path: Option<String>,
    pub max_depth: Option<usize>,
}

#[derive(Deserialize)]
pub struct GlobArgs {
    pub pattern: String,
}

#[derive(Deserialize)]
pub struct GrepArgs {
    pub pattern: String,
    pub path: Option<String>,
    pub ignore_case: Option<bool>,
}

#[derive(Deserialize)]
pub struct BashArgs {
    pub command: String,
    pub timeout_secs: Option<u64>,
}

#[derive(Deserialize)]
pub struct FinishArgs {
    pub summary: String,
    pub title: String,
    #[serde(default)]
    pub replies: Vec<ThreadReply>,
}

/// The agent's answer to one review thread, numbered as the task lists them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ThreadReply {
    pub thread: usize,
    /// Whether the code was changed for it.
    pub changed: bool,
    /// What was done, or why nothing was.
    pub note: String,
}
