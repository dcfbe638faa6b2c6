//! Typed jobs: what a trigger asks Forgehand to do, as stored in the queue.

use forgehand_types::{ForgeKind, Repo, ReviewState, TargetKey};
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
    Command { command: Command, comment_id: u64 },
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

/// A command people give the bot in a comment: what the comment parser
/// reads (`forgehand_bot::command`) and what the job carries, one type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum Command {
    /// `/forgehand fix [instructions]` (also `@bot fix …`).
    Fix { instructions: Option<String> },
    /// `/forgehand retry`
    Retry,
    /// `/forgehand stop`
    Stop,
    /// `/forgehand plan [instructions]`
    Plan { instructions: Option<String> },
    /// `/forgehand go`
    Go,
    /// `/forgehand help`
    Help,
    /// `/forgehand allow-sensitive`: a maintainer lets the agent's changes
    /// to CI definitions, instruction files and the like be pushed.
    AllowSensitive,
    /// `/forgehand allow-destructive`: a maintainer lets a change that
    /// removes most of the repository be pushed.
    AllowDestructive,
}

impl Command {
    /// Its code in records (`allow_sensitive`); people write the word
    /// (`allow-sensitive`), which the comment parser knows.
    pub fn code(&self) -> &'static str {
        self.kind()
            .as_str()
            .strip_prefix("command.")
            .expect("a command's kind is command.<code>")
    }

    /// Its kind of job.
    pub fn kind(&self) -> JobKind {
        match self {
            Command::Fix { .. } => JobKind::Fix,
            Command::Retry => JobKind::Retry,
            Command::Stop => JobKind::Stop,
            Command::Plan { .. } => JobKind::Plan,
            Command::Go => JobKind::Go,
            Command::Help => JobKind::Help,
            Command::AllowSensitive => JobKind::AllowSensitive,
            Command::AllowDestructive => JobKind::AllowDestructive,
        }
    }
}

/// What a job is, as listings, metrics and the queue's SQL name it
/// (`labeled`, `command.retry`, …): stored in the `kind` column, bound and
/// read as this type, never as a free string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[sqlx(type_name = "TEXT")]
pub enum JobKind {
    #[serde(rename = "labeled")]
    #[sqlx(rename = "labeled")]
    Labeled,
    #[serde(rename = "assigned")]
    #[sqlx(rename = "assigned")]
    Assigned,
    #[serde(rename = "request")]
    #[sqlx(rename = "request")]
    Request,
    #[serde(rename = "command.fix")]
    #[sqlx(rename = "command.fix")]
    Fix,
    #[serde(rename = "command.retry")]
    #[sqlx(rename = "command.retry")]
    Retry,
    /// The one kind that runs beside its target's running job (the queue's
    /// SQL names it: `kind <> 'command.stop'`).
    #[serde(rename = "command.stop")]
    #[sqlx(rename = "command.stop")]
    Stop,
    #[serde(rename = "command.plan")]
    #[sqlx(rename = "command.plan")]
    Plan,
    #[serde(rename = "command.go")]
    #[sqlx(rename = "command.go")]
    Go,
    #[serde(rename = "command.help")]
    #[sqlx(rename = "command.help")]
    Help,
    #[serde(rename = "command.allow_sensitive")]
    #[sqlx(rename = "command.allow_sensitive")]
    AllowSensitive,
    #[serde(rename = "command.allow_destructive")]
    #[sqlx(rename = "command.allow_destructive")]
    AllowDestructive,
    #[serde(rename = "explain_command_error")]
    #[sqlx(rename = "explain_command_error")]
    ExplainCommandError,
    #[serde(rename = "review")]
    #[sqlx(rename = "review")]
    Review,
}

impl JobKind {
    pub const ALL: [JobKind; 13] = [
        JobKind::Labeled,
        JobKind::Assigned,
        JobKind::Request,
        JobKind::Fix,
        JobKind::Retry,
        JobKind::Stop,
        JobKind::Plan,
        JobKind::Go,
        JobKind::Help,
        JobKind::AllowSensitive,
        JobKind::AllowDestructive,
        JobKind::ExplainCommandError,
        JobKind::Review,
    ];

    /// Its name in the database, the API and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Labeled => "labeled",
            JobKind::Assigned => "assigned",
            JobKind::Request => "request",
            JobKind::Fix => "command.fix",
            JobKind::Retry => "command.retry",
            JobKind::Stop => "command.stop",
            JobKind::Plan => "command.plan",
            JobKind::Go => "command.go",
            JobKind::Help => "command.help",
            JobKind::AllowSensitive => "command.allow_sensitive",
            JobKind::AllowDestructive => "command.allow_destructive",
            JobKind::ExplainCommandError => "explain_command_error",
            JobKind::Review => "review",
        }
    }
}

impl std::fmt::Display for JobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Job {
    pub fn kind(&self) -> JobKind {
        match &self.task {
            Task::Labeled { .. } => JobKind::Labeled,
            Task::Assigned => JobKind::Assigned,
            Task::Request { .. } => JobKind::Request,
            Task::Command { command, .. } => command.kind(),
            Task::ExplainCommandError { .. } => JobKind::ExplainCommandError,
            Task::Review { .. } => JobKind::Review,
        }
    }

    /// Work on the target (an issue, a review, a plan, a retry): a newer
    /// such request supersedes it while it waits. Help, explanations and
    /// stops are not work.
    pub fn supersedable(&self) -> bool {
        !matches!(
            self.kind(),
            JobKind::Help | JobKind::Stop | JobKind::ExplainCommandError
        )
    }

    /// The repository's key: `forge:owner/name`.
    pub fn repository_key(&self) -> String {
        format!("{}:{}", self.forge, self.repo.full_name())
    }

    /// The key under which at most one job runs at a time.
    pub fn target_key(&self) -> TargetKey {
        TargetKey::new(self.forge, &self.repo, self.target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The database, the API and serde spell a kind the same way.
    #[test]
    fn a_kind_is_spelled_one_way() {
        for kind in JobKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(serde_json::from_str::<JobKind>(&json).unwrap(), kind);
        }
    }

    /// Jobs queued before one command type served parser and job alike
    /// read back the same.
    #[test]
    fn a_stored_command_job_reads_back() {
        let stored = r#"{"forge":"github","repo":{"owner":"o","name":"r","clone_url":null,"default_branch":null,"private":false},
            "target":3,"on_pull_request":false,"requested_by":"m",
            "task":{"type":"command","command":{"name":"allow_sensitive"},"comment_id":9}}"#;
        let job: Job = serde_json::from_str(stored).unwrap();
        assert_eq!(job.kind(), JobKind::AllowSensitive);
        assert!(job.supersedable());
    }
}
