//! The agent's tools. Every one acts on the job's working copy only: the
//! shell tools run inside the sandbox; the file tools go through a
//! directory handle (cap-std) that cannot leave the working copy, so no
//! `..`, absolute path or planted symlink reaches a host file.
//!
//! Arguments are validated against each tool's JSON schema (with bounds)
//! before anything runs; every error goes back to the model as a tool
//! result it can act on.

mod check;
mod files;
mod schema;
mod shell;

use std::sync::LazyLock;
use std::time::Duration;

use forgehand_sandbox::Sandbox;
use serde::de::DeserializeOwned;
use serde_json::Value;

use forgehand_model::{ToolCall, ToolSpec};

pub use files::{Files, ReadLimit};
pub use schema::ThreadReply;

/// What a tool call came to.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// Sent back to the model.
    Output(String),
    /// Sent back to the model, marked as an error it should act on.
    Error(String),
    /// The agent is done.
    Finish {
        summary: String,
        title: String,
        replies: Vec<schema::ThreadReply>,
    },
}

impl ToolOutcome {
    pub fn text(&self) -> String {
        match self {
            ToolOutcome::Output(text) => text.clone(),
            ToolOutcome::Error(text) => format!("error: {text}"),
            ToolOutcome::Finish { summary, .. } => format!("finished: {summary}"),
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, ToolOutcome::Error(_))
    }
}

pub struct Toolbox<'a> {
    pub files: Files,
    pub sandbox: &'a dyn Sandbox,
    /// The longest one `bash` call may run (the sandbox's own limit).
    pub max_command_time: Duration,
    /// Every command the agent ran and how it ended, as the host saw it
    /// (the pull request's evidence of testing comes from here, never
    /// from what the model says).
    pub ran: std::sync::Mutex<Vec<CommandRun>>,
}

// The record of a command the agent ran is the testing evidence's: the
// environment's module reads it and must not stand on the agent.
pub use crate::testing::CommandRun;

/// At most this many commands are kept, each cut at this many characters.
const MAX_RAN: usize = 500;
const MAX_COMMAND_CHARS: usize = 500;

/// Every tool the model is offered.
pub fn specs() -> &'static [ToolSpec] {
    static SPECS: LazyLock<Vec<ToolSpec>> = LazyLock::new(schema::specs);
    &SPECS
}

impl Toolbox<'_> {
    pub async fn call(&self, call: &ToolCall) -> ToolOutcome {
        let args = match schema::validate(&call.name, &call.arguments) {
            Ok(args) => args,
            Err(message) => return ToolOutcome::Error(message),
        };
        let result = match call.name.as_str() {
            "read_file" => self.on_files(args, Files::read).await,
            "write_file" => self.changed(args, Files::write).await,
            "edit_file" => self.changed(args, Files::edit).await,
            "list_files" => self.on_files(args, Files::list).await,
            "glob" => self.on_files(args, Files::glob).await,
            "grep" => match parse(args) {
                Ok(a) => shell::grep(self.sandbox, a).await,
                Err(e) => Err(e),
            },
            "bash" => match parse::<schema::BashArgs>(args) {
                Ok(a) => {
                    let command: String = a.command.chars().take(MAX_COMMAND_CHARS).collect();
                    let ran = shell::bash(self.sandbox, a, self.max_command_time).await;
                    ran.map(|(text, status)| {
                        self.record(command, status.code());
                        text
                    })
                }
                Err(e) => Err(e),
            },
            "finish" => {
                return match parse::<schema::FinishArgs>(args) {
                    Ok(a) => ToolOutcome::Finish {
                        summary: a.summary,
                        title: a.title,
                        replies: a.replies,
                    },
                    Err(e) => ToolOutcome::Error(e),
                }
            }
            other => Err(format!("there is no tool named `{other}`")),
        };
        match result {
            Ok(text) => ToolOutcome::Output(text),
            Err(message) => ToolOutcome::Error(message),
        }
    }
}

impl Toolbox<'_> {
    fn record(&self, command: String, exit_code: i32) {
        let mut ran = self.ran.lock().unwrap_or_else(|p| p.into_inner());
        if ran.len() < MAX_RAN {
            ran.push(CommandRun { command, exit_code });
        }
    }

    /// The commands run so far.
    pub fn commands(&self) -> Vec<CommandRun> {
        self.ran.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A file tool, on a blocking thread: the run's time budget (the
    /// caller's timeout) can then stop waiting for it, and the async
    /// workers never wait on the file system.
    async fn on_files<A>(
        &self,
        args: Value,
        tool: fn(&Files, A) -> Result<String, String>,
    ) -> Result<String, String>
    where
        A: DeserializeOwned + Send + 'static,
    {
        let args: A = parse(args)?;
        let files = self.files.clone();
        tokio::task::spawn_blocking(move || tool(&files, args))
            .await
            .map_err(|e| format!("the file tool failed: {e}"))?
    }
}

impl Toolbox<'_> {
    /// `write_file` or `edit_file`, checked: a file that compiled before
    /// and would not after is put back, and the agent told why.
    async fn changed<A>(
        &self,
        args: Value,
        tool: fn(&Files, A) -> Result<String, String>,
    ) -> Result<String, String>
    where
        A: DeserializeOwned + Send + 'static,
    {
        let path = args["path"].as_str().unwrap_or_default().to_owned();
        let checked = path.ends_with(".py");
        let before = if checked {
            self.on_text(&path, Files::current).await
        } else {
            None
        };
        let answer = self.on_files(args, tool).await?;
        if !checked {
            return Ok(answer);
        }
        let Some(after) = self.on_text(&path, Files::current).await else {
            return Ok(answer);
        };
        let check::Checked::Fails { line, message } =
            check::check(self.sandbox, &path, &after).await
        else {
            return Ok(answer);
        };
        let parsed_before = match &before {
            Some(old) => check::check(self.sandbox, &path, old).await == check::Checked::Parses,
            None => false,
        };
        if !parsed_before {
            return Ok(format!(
                "{answer}note: {path} does not compile as Python: {message} (line {line})\n"
            ));
        }
        let files = self.files.clone();
        let (undo, old) = (path.clone(), before);
        tokio::task::spawn_blocking(move || files.restore(&undo, old.as_deref()))
            .await
            .map_err(|e| format!("the file tool failed: {e}"))??;
        Err(check::refusal(&path, &after, line, &message))
    }

    /// A read of the tree by path, on a blocking thread.
    async fn on_text(
        &self,
        path: &str,
        read: fn(&Files, &str) -> Option<String>,
    ) -> Option<String> {
        let (files, path) = (self.files.clone(), path.to_owned());
        tokio::task::spawn_blocking(move || read(&files, &path))
            .await
            .ok()
            .flatten()
    }
}

fn parse<T: DeserializeOwned>(args: Value) -> Result<T, String> {
    serde_json::from_value(args).map_err(|e| format!("invalid arguments: {e}"))
}

#[cfg(test)]
mod tests;
