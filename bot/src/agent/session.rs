//! One agent session over a working copy, assembled in one place for the
//! pipeline and `forgehand run`: the sandbox, the host-side file tools,
//! the system prompt, the model client, the toolbox, the host's budgets
//! and the transcript. Started in two steps, so that a caller can record
//! the sandbox as its own step: [`Session::start`], then
//! [`Started::run`], which destroys the sandbox whatever happened.

// No function here over 80 lines (clippy.toml): a stage is a function.
#![warn(clippy::too_many_lines)]

use std::path::Path;

use forgehand_sandbox::{Backend, Isolation, Sandbox, SandboxError};

use super::prompts::Prompts;
use super::tools::{Files, Toolbox};
use super::{run_agent, AgentReport, AgentSettings, Budgets, Transcript};
use crate::config::{Config, ModelConfig};
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
}

impl<'a> Session<'a> {
    pub async fn start(self) -> Result<Started<'a>, SessionError> {
        let sandbox = self
            .backend
            .create(self.config.sandbox.spec(self.tree))
            .await?;
        let made = Files::open(self.tree)
            .map_err(SessionError::Files)
            .and_then(|files| Ok((files, ModelClient::new(self.model.settings())?)));
        match made {
            Ok((files, model)) => Ok(Started {
                session: self,
                sandbox,
                files,
                model,
            }),
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

    /// Runs the agent to its end within the host's budgets, then destroys
    /// the sandbox.
    pub async fn run(self, transcript: &mut Transcript) -> AgentReport {
        let Started {
            session,
            sandbox,
            files,
            model,
        } = self;
        let config = session.config;
        transcript.record(
            "start",
            serde_json::json!({
                "provider": session.model.provider,
                "model": session.model.name,
                "base_url": session.model.base_url,
                "isolation": format!("{:?}", sandbox.isolation()),
            }),
        );
        let messages = vec![
            Message::System {
                content: session.prompts.system(&files),
            },
            Message::User {
                content: session.task,
            },
        ];
        let toolbox = Toolbox {
            files,
            sandbox: &*sandbox,
            max_command_time: config.sandbox.limits().timeout,
        };
        let price = |usage| session.model.cost(usage);
        let settings = AgentSettings {
            budgets: Budgets::from_config(&config.agent),
            context_tokens: config.agent.context_tokens,
            price: &price,
        };
        let report = run_agent(&model, &toolbox, &settings, messages, transcript).await;
        drop(toolbox);
        if let Err(error) = sandbox.destroy().await {
            tracing::warn!(%error, "destroying the sandbox failed");
        }
        report
    }
}
