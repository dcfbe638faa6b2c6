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
    Backend, ExecOutput, Handover, Isolation, Sandbox, SandboxError, SandboxSpec,
};

use super::prompts::Prompts;
use super::tools::{CommandRun, Files, Toolbox};
use super::{AgentReport, AgentSettings, Budgets, Conversation, Transcript};
use crate::config::AgentConfig;
use crate::testing::{By, TestCommand};
use forgehand_model::{Message, ModelClient, ModelError, ModelSettings, Price};
use forgehand_types::reason::{Reason, RefusalReason};

/// Why the host's tests could not be run.
#[derive(Debug, thiserror::Error)]
pub enum HostTestError {
    /// The gate refuses the tree: nothing would be committed to test
    /// (the publish stage says why).
    #[error("the gate refuses the working tree")]
    Refused(RefusalReason),
    #[error("the host's test run: {0}")]
    Infra(String),
}

/// The host's test runs over what the commit would hold (the job core's,
/// over the job's layers and behind the gate): the session only asks for
/// a run and reads its output.
#[async_trait::async_trait]
pub trait HostTestRunner: Sync {
    /// Runs `command` over what the commit would hold now; called only
    /// while no sandbox of the agent's is up.
    async fn run(&self, command: &str, timeout: Duration) -> Result<ExecOutput, HostTestError>;

    /// What the commit would change now, as a diff, cut at `max_chars`;
    /// called only while no sandbox of the agent's is up.
    async fn changes(&self, max_chars: usize) -> Result<String, HostTestError>;
}

/// How much of its own diff the agent is shown when it first finishes.
const REVIEW_CHARS: usize = 12_000;

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
    /// The longest one command may run (`sandbox.timeout_secs`).
    pub command_timeout: Duration,
    /// The agent's section of the configuration: its budgets.
    pub agent: &'a AgentConfig,
    /// The model's settings (`forgehand run` may override the
    /// configured ones) and its price, when it has one.
    pub model: ModelSettings,
    pub price: Option<Price>,
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
    /// What the gate will hold, told in the system prompt.
    pub gate_policy: String,
}

/// A session whose sandbox is up (between the agent's rounds, while the
/// host tests, it is down: see [`Started::test_rounds`]).
pub struct Started<'a> {
    session: Session<'a>,
    /// What the sandbox was made from, to make it again for another round.
    spec: SandboxSpec,
    sandbox: Option<Box<dyn Sandbox>>,
    files: Files,
    model: ModelClient,
    conversation: Conversation,
    ran: Vec<CommandRun>,
}

impl<'a> Session<'a> {
    pub async fn start(mut self) -> Result<Started<'a>, SessionError> {
        let spec = self.spec.clone();
        let sandbox = self.backend.create(spec.clone()).await?;
        let made = Files::open(self.tree)
            .map_err(SessionError::Files)
            .and_then(|files| Ok((files, ModelClient::new(self.model.clone())?)));
        match made {
            Ok((files, model)) => {
                let conversation = Conversation::new(vec![
                    Message::System {
                        content: self.prompts.system(&files, &self.gate_policy),
                    },
                    Message::User {
                        content: std::mem::take(&mut self.task),
                    },
                ]);
                Ok(Started {
                    session: self,
                    spec,
                    sandbox: Some(sandbox),
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
        self.session.backend.isolation()
    }

    /// The agent's sandbox, made again when it was taken down: the same
    /// layers (its files and home as it left them), no processes, a fresh
    /// `/tmp`.
    async fn ensure_sandbox(&mut self) -> Result<(), SandboxError> {
        if self.sandbox.is_none() {
            if let Handover::Prepared { give_back } = &self.spec.handover {
                // Taken back by the host when the sandbox went.
                for layer in give_back {
                    self.session.backend.prepare_for_sandbox(layer).await?;
                }
            }
            self.sandbox = Some(self.session.backend.create(self.spec.clone()).await?);
        }
        Ok(())
    }

    /// Takes the agent's sandbox down: its processes end, and nothing
    /// changes the tree until another round makes it again.
    async fn take_down(&mut self) {
        if let Some(sandbox) = self.sandbox.take() {
            if let Err(error) = sandbox.destroy().await {
                tracing::warn!(%error, "destroying the sandbox failed");
            }
        }
    }

    /// Runs the agent until it finishes (or a budget, or the model, stops
    /// it): the first round, or another after [`Started::tell`], within
    /// the same budgets. The sandbox stays up.
    pub async fn run(&mut self, transcript: &mut Transcript) -> AgentReport {
        let agent_config = self.session.agent;
        let first = self
            .conversation
            .report(super::Outcome::Stopped {
                reason: Reason::Infra,
                message: String::new(),
            })
            .turns
            == 0;
        if first {
            transcript.record(
                "start",
                serde_json::json!({
                    "provider": self.session.model.provider,
                    "model": self.session.model.name,
                    "base_url": self.session.model.base_url,
                    "isolation": format!("{:?}", self.isolation()),
                }),
            );
        }
        if let Err(error) = self.ensure_sandbox().await {
            return self.conversation.report(super::Outcome::Stopped {
                reason: Reason::Infra,
                message: format!("making the sandbox again: {error}"),
            });
        }
        let sandbox = self.sandbox.as_deref().expect("made above");
        let toolbox = Toolbox {
            files: self.files.clone(),
            sandbox,
            max_command_time: self.session.command_timeout,
            ran: Default::default(),
        };
        let price = self.session.price;
        let price = |usage| price.map(|price: Price| price.cost(usage));
        let settings = AgentSettings {
            budgets: Budgets::from_config(agent_config),
            context_tokens: agent_config.context_tokens,
            price: &price,
        };
        let outcome = self
            .conversation
            .run(&self.model, &toolbox, &settings, transcript)
            .await;
        let ran = toolbox.commands();
        self.ran.extend(ran);
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

    /// The repository's tests, run by the host after the agent finished,
    /// over what the commit would hold (`tests`: never in the agent's
    /// sandbox, which is taken down first, so that nothing of the agent's
    /// runs while the host reads the tree). While they fail and rounds are
    /// left, the agent is shown their output's end and runs another round
    /// in its sandbox made again. Returns the host's runs and the last
    /// round that finished again, if one did (a round stopped short keeps
    /// what the agent finished before: the tests say how far it got). The
    /// runs stop early when the gate refuses the tree: nothing would be
    /// committed to test.
    pub async fn test_rounds(
        &mut self,
        transcript: &mut Transcript,
        tests: &dyn HostTestRunner,
        test: &str,
        retries: u32,
    ) -> Result<(Vec<TestCommand>, Option<AgentReport>), HostTestError> {
        let timeout = self.session.command_timeout;
        let mut runs = Vec::new();
        let mut finished_again = None;
        for round in 0..=retries {
            self.take_down().await;
            let out = match tests.run(test, timeout).await {
                Ok(out) => out,
                Err(HostTestError::Refused(reason)) => {
                    transcript.record(
                        "host_test",
                        serde_json::json!({"command": test, "not_run": Reason::Gate(reason)}),
                    );
                    break;
                }
                Err(error) => return Err(error),
            };
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

    /// The agent's first `finish`, answered: its change as the host would
    /// commit it and the tests it ran as the host saw them, and another
    /// round in which it finishes again (or goes on, then finishes). The
    /// round that follows, or `None` when the gate refuses the tree (the
    /// publish stage says why; there is nothing to review).
    pub async fn review(
        &mut self,
        transcript: &mut Transcript,
        host: &dyn HostTestRunner,
        declared_test: Option<&str>,
    ) -> Result<Option<AgentReport>, HostTestError> {
        self.take_down().await;
        let diff = match host.changes(REVIEW_CHARS).await {
            Ok(diff) => diff,
            Err(HostTestError::Refused(_)) => return Ok(None),
            Err(error) => return Err(error),
        };
        transcript.record("review", serde_json::json!({"diff_chars": diff.len()}));
        self.tell(review_text(&diff, &self.ran, declared_test));
        Ok(Some(self.run(transcript).await))
    }

    /// Destroys the sandbox.
    pub async fn close(mut self) {
        self.take_down().await;
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
        "Forgehand ran the repository's tests (`{test}`) after you finished, over the changes to be committed and the environment alone (not your home, `/tmp` or what is left out of the commit), and they failed ({}). The end of their output:\n\n{}\nFix the code so that the tests pass (do not weaken or skip the tests), then call `finish` again with an updated summary. Your sandbox was started again: your files and home are as you left them; background processes and `/tmp` are gone.",
        out.status,
        forgehand_text::markdown::fenced(&shown)
    )
}

/// What the agent is told at its first `finish`.
fn review_text(diff: &str, ran: &[CommandRun], declared_test: Option<&str>) -> String {
    let tests: Vec<String> = ran
        .iter()
        .filter(|r| crate::testing::looks_like_a_test(&r.command, declared_test))
        .map(|r| {
            format!(
                "{} exited {}",
                forgehand_text::markdown::code(&r.command),
                r.exit_code
            )
        })
        .collect();
    let tests = if tests.is_empty() {
        "You ran no test. If the repository has tests, run them now.".to_owned()
    } else {
        format!(
            "The tests you ran, as Forgehand saw them: {}.",
            tests.join("; ")
        )
    };
    let change = if diff.trim().is_empty() {
        "Your change is empty: nothing would be committed.".to_owned()
    } else {
        format!(
            "Your change, as it would be committed (what git ignores and the environment's files left out):\n\n{}",
            forgehand_text::markdown::fenced(diff)
        )
    };
    format!(
        "Before this is done, review it. {change}\n{tests}\nIf the change does what the task asks and nothing else (no test deleted or weakened, nothing unrelated), call `finish` again; you may update the summary and title. If not, go on working, then call `finish`."
    )
}
