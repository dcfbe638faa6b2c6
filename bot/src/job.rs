//! Typed jobs: what a trigger asks Forgehand to do, as stored in the queue.

use forgehand_forge::{ForgeKind, Repo, ReviewState};
use serde::{Deserialize, Serialize};

/// One unit of work about one issue or pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub forge: ForgeKind,
    pub repo: Repo,
    /// The issue or pull request number.
    pub target: u64,
    pub on_pull_request: bool,
    /// Who asked: the label's or comment's author, the reviewer.
    pub requested_by: String,
    pub task: Task,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Task {
    /// The issue was labeled with the bot's label: work on it.
    Labeled { label: String },
    /// The issue was assigned to the bot: work on it.
    Assigned,
    /// `@bot <free text>` in a comment.
    Request { text: String, comment_id: u64 },
    /// `/forgehand <command>` (or `@bot <command>`) in a comment.
    Command {
        command: JobCommand,
        comment_id: u64,
    },
    /// A comment addressed to the bot that could not be understood: the
    /// job answers with the explanation.
    ExplainCommandError { message: String, comment_id: u64 },
    /// A review on a pull request the bot opened.
    Review {
        review_id: Option<u64>,
        state: ReviewState,
        body: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum JobCommand {
    Fix { instructions: Option<String> },
    Retry,
    Stop,
    Plan { instructions: Option<String> },
    Go,
    Help,
    AllowSensitive,
}

impl Job {
    /// A short kind for listings and metrics: `labeled`, `command.retry`, …
    pub fn kind(&self) -> String {
        match &self.task {
            Task::Labeled { .. } => "labeled".into(),
            Task::Assigned => "assigned".into(),
            Task::Request { .. } => "request".into(),
            Task::Command { command, .. } => format!("command.{}", command.name()),
            Task::ExplainCommandError { .. } => "explain_command_error".into(),
            Task::Review { .. } => "review".into(),
        }
    }

    /// Work on the target (an issue, a review, a plan, a retry): a newer
    /// such request supersedes it while it waits. Help, explanations and
    /// stops are not work.
    pub fn supersedable(&self) -> bool {
        !matches!(
            self.task,
            Task::Command {
                command: JobCommand::Help | JobCommand::Stop,
                ..
            } | Task::ExplainCommandError { .. }
        )
    }

    /// The key under which at most one job runs at a time.
    pub fn target_key(&self) -> String {
        format!("{}:{}#{}", self.forge, self.repo.full_name(), self.target)
    }
}

impl JobCommand {
    pub fn name(&self) -> &'static str {
        match self {
            JobCommand::Fix { .. } => "fix",
            JobCommand::Retry => "retry",
            JobCommand::Stop => "stop",
            JobCommand::Plan { .. } => "plan",
            JobCommand::Go => "go",
            JobCommand::Help => "help",
            JobCommand::AllowSensitive => "allow_sensitive",
        }
    }
}
