//! The agent, in a sandbox over the working copy: the model loop runs
//! here on the host, every tool call in the sandbox, within the host's
//! budgets, into a transcript with the job's secrets redacted. Then the
//! repository's test command, run by the host in a sandbox of its own
//! over what the commit would hold and the environment (never in the
//! agent's): a failure goes back to the agent for a bounded number of
//! rounds (`environment.test_retries`). What was tested is what the host
//! saw, never what the model says.

use forgehand_gate::{GatePolicy, RepoRules, SecretScanner};
use secrecy::SecretString;

use super::copy::JobCopy;
use super::{Core, Failure, Progress, Stage};
use crate::environment::{CommitFiles, GateInputs, HostTests, Testing};
use forgehand_agent::prompts::Prompts;
use forgehand_agent::{AgentReport, Outcome, Session, Transcript};

/// What the agent is asked, and under which rules its work is judged.
pub struct AgentTask<'a> {
    /// The task, as the first user message.
    pub prompt: String,
    /// Loaded once per job: the task was rendered from the same ones.
    pub prompts: &'a Prompts,
    /// The environment's test command, run by the host once the agent
    /// finishes (none: nothing is run).
    pub test: Option<&'a str>,
    /// With no environment at all: the evidence proposes a declaration.
    pub propose: bool,
    /// The first `finish` is answered with the change for the agent to
    /// review (`agent.review_before_finish`); not for a plan, which
    /// changes nothing.
    pub review: bool,
    pub policy: GatePolicy,
    pub rules: &'a RepoRules,
    /// Every secret of the job by name: kept out of the transcript and of
    /// what the host's test runs may commit.
    pub secrets: &'a [(String, SecretString)],
    /// The transcript's name in `agent.transcript_dir`.
    pub transcript: &'a str,
}

/// What the agent did: how it ended (the last finish, when a later round
/// after failing tests stopped short of another), what it cost, and what
/// was tested.
pub struct Worked {
    pub report: AgentReport,
    pub testing: Testing,
    pub transcript: Transcript,
}

impl Worked {
    pub fn finished(&self) -> bool {
        matches!(self.report.outcome, Outcome::Finished { .. })
    }
}

impl Core<'_> {
    /// The agent's session over `copy`, then the host's test rounds when
    /// it finished and a test command is declared.
    pub async fn agent(
        &self,
        copy: &JobCopy,
        task: AgentTask<'_>,
        progress: &mut dyn Progress,
    ) -> Result<Worked, Failure> {
        progress.starting(Stage::Agent).await;
        let mut transcript = Transcript::create(
            &self.agent.transcript_dir,
            task.transcript,
            task.secrets.iter().map(|(_, s)| s.clone()).collect(),
        )
        .map_err(Failure::infra)?;
        transcript.record("task", serde_json::json!({ "task": task.prompt }));
        let session = Session {
            command_timeout: self.sandbox.limits().timeout,
            agent: self.agent,
            model: self.model.clone(),
            price: self.price,
            backend: self.backend,
            tree: copy.tree(),
            spec: copy.layered().spec(self.sandbox),
            prompts: task.prompts,
            task: task.prompt.clone(),
            gate_policy: forgehand_gate::classify::policy::for_agent(
                task.rules,
                task.policy.max_removed_share,
            ),
        };
        let mut started = session.start().await.map_err(Failure::infra)?;
        progress.done(Stage::Sandbox);
        let mut report = started.run(&mut transcript).await;
        let mut host_runs = Vec::new();
        let tests = HostTests::new(
            self.backend,
            copy.layered(),
            self.sandbox,
            copy.git_dir(),
            copy.scratch(),
            GateInputs {
                before: copy.before().clone(),
                scanner: SecretScanner::new(task.secrets.iter().cloned()),
                policy: task.policy,
                rules: task.rules.clone(),
            },
        );
        let finished = matches!(report.outcome, Outcome::Finished { .. });
        if finished && self.agent.review_before_finish && task.review {
            match started.review(&mut transcript, &tests, task.test).await {
                Ok(Some(again)) => report = last_finish(report, again),
                Ok(None) => {}
                Err(error) => {
                    started.close().await;
                    return Err(Failure::infra(error));
                }
            }
        }
        if finished {
            progress.done(Stage::Agent);
        }
        if let (Some(test), true) = (task.test, finished) {
            progress.starting(Stage::Tests).await;
            let tested = started
                .test_rounds(&mut transcript, &tests, test, self.test_retries)
                .await;
            let (runs, again) = match tested {
                Ok(tested) => tested,
                Err(error) => {
                    started.close().await;
                    return Err(Failure::infra(error));
                }
            };
            host_runs = runs;
            if let Some(again) = again {
                report = last_finish(report, again);
            }
            progress.done(Stage::Tests);
        }
        let mut testing = Testing::observed(started.commands(), task.test, &host_runs);
        started.close().await;
        if task.propose {
            testing.proposal = proposal(copy);
        }
        Ok(Worked {
            report,
            testing,
            transcript,
        })
    }
}

/// After another round: its finish, or (when it stopped short of one, a
/// budget spent) the earlier finish, with what both rounds cost.
fn last_finish(first: AgentReport, again: AgentReport) -> AgentReport {
    match again.outcome {
        Outcome::Finished { .. } => again,
        Outcome::Stopped { .. } => AgentReport {
            outcome: first.outcome,
            ..again
        },
    }
}

/// With no environment, what to declare: from the files of the commit
/// the working copy is of (a proposal, so a failure to read is none).
fn proposal(copy: &JobCopy) -> Option<String> {
    let repo = copy.repo().ok()?;
    let files = CommitFiles::new(&repo, copy.commit()).ok()?;
    forgehand_environment::spec::propose(&files).ok()
}
