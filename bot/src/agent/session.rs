//! One agent session over a working copy, assembled in one place for the
//! pipeline and `forgehand run`: the sandbox, the host-side file tools,
//! the system prompt, the model client, the toolbox, the host's budgets
//! and the transcript. Started in two steps, so that a caller can record
//! the sandbox as its own step: [`Session::start`], then
//! [`Started::run`]; the sandbox stays up (the host runs the tests in it,
//! and the agent may get another round) until [`Started::close`].

// No function here over 80 lines (clippy.toml): a stage is a function.
#![warn(clippy::too_many_lines)]

use std::path::Path;

use std::time::Duration;

use forgehand_sandbox::{
    Backend, ExecOutput, ExecRequest, Isolation, Sandbox, SandboxError, SandboxSpec,
};

use super::prompts::Prompts;
use super::tools::{CommandRun, Files, Toolbox};
use super::{AgentReport, AgentSettings, Budgets, Conversation, Transcript};
use crate::config::{Config, ModelConfig};
use crate::environment::{By, TestCommand};
use crate::model::{Message, ModelClient, ModelError};

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("creating the sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    #[error("opening the working copy's files: {0}")]
    Files(std::io::Error),
    #[error("the model client: {0}")]
    Model(#[from] ModelError),
}

/// What a session is made of.
pub struct Session<'a> {
    pub config: &'a Config,
    /// The model's settings (`forgehand run` may override the
    /// configured ones).
    pub model: &'a ModelConfig,
    pub backend: &'a dyn Backend,
    /// The working copy the sandbox mounts and the file tools act in.
    pub tree: &'a Path,
    /// The sandbox over it: its root, the working copy, a home.
    pub spec: SandboxSpec,
    /// Loaded once per job: the task was rendered from the same ones, and
    /// the system prompt must name the same forge-data tag.
    pub prompts: &'a Prompts,
    /// The task, as the first user message.
    pub task: String,
}

/// A session whose sandbox is up.
pub struct Started<'a> {
    session: Session<'a>,
    sandbox: Box<dyn Sandbox>,
    files: Files,
    model: ModelClient,
    conversation: Conversation,
    ran: Vec<CommandRun>,
}

impl<'a> Session<'a> {
    pub async fn start(mut self) -> Result<Started<'a>, SessionError> {
        let spec = std::mem::replace(&mut self.spec, self.config.sandbox.spec(self.tree));
        let sandbox = self.backend.create(spec).await?;
        let made = Files::open(self.tree)
            .map_err(SessionError::Files)
            .and_then(|files| Ok((files, ModelClient::new(self.model.settings())?)));
        match made {
            Ok((files, model)) => {
                let conversation = Conversation::new(vec![
                    Message::System {
                        content: self.prompts.system(&files),
                    },
                    Message::User {
                        content: std::mem::take(&mut self.task),
                    },
                ]);
                Ok(Started {
                    session: self,
                    sandbox,
                    files,
                    model,
                    conversation,
                    ran: Vec::new(),
                })
            }
            Err(error) => {
                let _ = sandbox.destroy().await;
                Err(error)
            }
        }
    }
}

impl Started<'_> {
    pub fn isolation(&self) -> Isolation {
        self.sandbox.isolation()
    }

    /// Runs the agent until it finishes (or a budget, or the model, stops
    /// it): the first round, or another after [`Started::tell`], within
    /// the same budgets. The sandbox stays up.
    pub async fn run(&mut self, transcript: &mut Transcript) -> AgentReport {
        let config = self.session.config;
        if self
            .conversation
            .report(super::Outcome::Stopped {
                reason: crate::reason::Reason::Infra,
                message: String::new(),
            })
            .turns
            == 0
        {
            transcript.record(
                "start",
                serde_json::json!({
                    "provider": self.session.model.provider,
                    "model": self.session.model.name,
                    "base_url": self.session.model.base_url,
                    "isolation": format!("{:?}", self.sandbox.isolation()),
                }),
            );
        }
        let toolbox = Toolbox {
            files: self.files.clone(),
            sandbox: &*self.sandbox,
            max_command_time: config.sandbox.limits().timeout,
            ran: Default::default(),
        };
        let model = self.session.model;
        let price = |usage| model.cost(usage);
        let settings = AgentSettings {
            budgets: Budgets::from_config(&config.agent),
            context_tokens: config.agent.context_tokens,
            price: &price,
        };
        let outcome = self
            .conversation
            .run(&self.model, &toolbox, &settings, transcript)
            .await;
        self.ran.extend(toolbox.commands());
        self.conversation.report(outcome)
    }

    /// What the host says to the agent before its next round.
    pub fn tell(&mut self, text: String) {
        self.conversation.tell(text);
    }

    /// Every command the agent ran, with its exit status.
    pub fn commands(&self) -> &[CommandRun] {
        &self.ran
    }

    /// A command the host runs in the sandbox (in `/workspace`), such as
    /// the repository's test command.
    pub async fn exec(&self, command: &str, timeout: Duration) -> Result<ExecOutput, SandboxError> {
        self.sandbox
            .exec(ExecRequest::new(["bash", "-c", command]).timeout(timeout))
            .await
    }

    /// The repository's tests, run by the host in the sandbox after the
    /// agent finished: while they fail and rounds are left, the agent is
    /// shown their output's end and runs another round. Returns the host's
    /// runs and the last round that finished again, if one did (a round
    /// stopped short keeps what the agent finished before: the tests say
    /// how far it got).
    pub async fn test_rounds(
        &mut self,
        transcript: &mut Transcript,
        test: &str,
        retries: u32,
    ) -> Result<(Vec<TestCommand>, Option<AgentReport>), SandboxError> {
        let timeout = self.session.config.sandbox.limits().timeout;
        let mut runs = Vec::new();
        let mut finished_again = None;
        for round in 0..=retries {
            let out = self.exec(test, timeout).await?;
            runs.push(TestCommand {
                command: test.to_owned(),
                exit_code: out.status.code(),
                by: By::Host,
            });
            transcript.record(
                "host_test",
                serde_json::json!({"command": test, "exit_code": out.status.code()}),
            );
            if out.status.success() || round == retries {
                break;
            }
            self.tell(failing_tests(test, &out));
            let report = self.run(transcript).await;
            if matches!(report.outcome, super::Outcome::Finished { .. }) {
                finished_again = Some(report);
            }
        }
        Ok((runs, finished_again))
    }

    /// Destroys the sandbox.
    pub async fn close(self) {
        if let Err(error) = self.sandbox.destroy().await {
            tracing::warn!(%error, "destroying the sandbox failed");
        }
    }
}

/// How much of a failing test run's output the agent is shown: its end,
/// where test runners print their failures and summary.
const TEST_OUTPUT_CHARS: usize = 12_000;

/// What the agent is told when the host's test run fails.
fn failing_tests(test: &str, out: &ExecOutput) -> String {
    let mut text = out.stdout.to_text();
    text.push_str(&out.stderr.to_text());
    let total = text.chars().count();
    let shown: String = if total > TEST_OUTPUT_CHARS {
        let tail: String = text.chars().skip(total - TEST_OUTPUT_CHARS).collect();
        format!(
            "[… {} characters left out …]\n{tail}",
            total - TEST_OUTPUT_CHARS
        )
    } else {
        text
    };
    format!(
        "Forgehand ran the repository's tests (`{test}`) after you finished, and they failed ({}). The end of their output:\n\n```\n{shown}\n```\n\nFix the code so that the tests pass (do not weaken or skip the tests), then call `finish` again with an updated summary.",
        out.status
    )
}
