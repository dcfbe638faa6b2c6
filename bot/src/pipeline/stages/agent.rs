//! Stage 4: the agent, in a sandbox over the working copy: the model
//! loop runs here on the host, every tool call in the sandbox, within the
//! host's budgets, into a transcript with the job's secrets redacted.
//! Then the repository's test command, run by the host in a sandbox of
//! its own over what the commit would hold and the environment (never in
//! the agent's): a failure goes back to the agent for a bounded number of
//! rounds (`environment.test_retries`). What was tested is what the host
//! saw, never what the model says.

use super::super::run::JobRun;
use super::super::work::Work;
use super::super::{Failure, Pipeline};
use super::working_copy::WorkingCopy;
use super::Stage;
use crate::agent::session::Started;
use crate::agent::tools::ThreadReply;
use crate::agent::{AgentReport, Outcome, Session, Transcript};
use crate::environment::{GateInputs, HostTests, Prepared, Testing};
use forgehand_gate::SecretScanner;

/// What the agent said when it called `finish`, what it cost, and what
/// was tested.
pub(in crate::pipeline) struct Finished {
    pub title: String,
    pub summary: String,
    pub replies: Vec<ThreadReply>,
    pub cost_usd: f64,
    pub turns: u32,
    pub testing: Testing,
}

impl Pipeline {
    pub(in crate::pipeline) async fn agent(
        &self,
        run: &mut JobRun<'_>,
        copy: &WorkingCopy,
        work: &Work,
        environment: Option<&Prepared>,
    ) -> Result<Finished, Failure> {
        run.progress(Stage::Agent).await;
        let claimed = run.claimed;
        let mut transcript = Transcript::create(
            &self.config.agent.transcript_dir,
            &format!("job-{}-{}", claimed.id, claimed.run),
            run.secret_values(),
        )
        .map_err(Failure::infra)?;
        run.steps.transcript = Some(transcript.path().display().to_string());
        // The session holds what it borrows for as long as it lives; the
        // stage goes on recording its steps meanwhile.
        let prompts = run.prompts.clone();
        let session = Session {
            config: &self.config,
            model: &self.config.model,
            backend: &*self.backend,
            tree: copy.layered.tree(),
            spec: copy.layered.spec(&self.config.sandbox),
            prompts: &prompts,
            task: work.prompt.clone(),
            gate_policy: forgehand_gate::classify::policy::for_agent(
                &copy.rules,
                self.policy(work, run.job()).max_removed_share,
            ),
        };
        let mut started = session.start().await.map_err(Failure::infra)?;
        run.steps.done(Stage::Sandbox);
        // A plan changes nothing: nothing to test.
        let test = environment
            .and_then(|e| e.declared.test.as_deref())
            .filter(|_| !work.plan_only);
        let tests = self.host_tests(run, copy, work);
        let finished = self
            .rounds(
                run,
                &mut started,
                &mut transcript,
                test.map(|t| (t, &tests)),
            )
            .await;
        started.close().await;
        let mut finished = finished?;
        if environment.is_none() && !work.plan_only {
            finished.testing.proposal = proposal(copy);
        }
        Ok(finished)
    }

    /// Where the host runs the tests: over what the commit would hold,
    /// checked by the gate as the publish stage will check it.
    fn host_tests<'a>(
        &'a self,
        run: &JobRun<'_>,
        copy: &'a WorkingCopy,
        work: &Work,
    ) -> HostTests<'a> {
        let policy = self.policy(work, &run.claimed.job);
        HostTests::new(
            &*self.backend,
            &copy.layered,
            &self.config.sandbox,
            copy.job_dir.git_dir(),
            copy.job_dir.layers().join("tests"),
            GateInputs {
                before: copy.before.clone(),
                scanner: SecretScanner::new(run.secrets.iter().cloned()),
                policy,
                rules: copy.rules.clone(),
            },
        )
    }

    /// The agent's first round, then the tests (`test_rounds`: another
    /// round each while they fail and rounds are left).
    async fn rounds(
        &self,
        run: &mut JobRun<'_>,
        started: &mut Started<'_>,
        transcript: &mut Transcript,
        test: Option<(&str, &HostTests<'_>)>,
    ) -> Result<Finished, Failure> {
        let report = started.run(transcript).await;
        let mut finished =
            finished(report).map_err(|(reason, message)| Failure::new(reason, message))?;
        run.steps.done(Stage::Agent);
        let mut host_runs = Vec::new();
        if let Some((test, tests)) = test {
            run.progress(Stage::Tests).await;
            let retries = self.config.environment.test_retries;
            let (runs, again) = started
                .test_rounds(transcript, tests, test, retries)
                .await
                .map_err(Failure::infra)?;
            host_runs = runs;
            if let Some(Ok(again)) = again.map(self::finished) {
                finished = again;
            }
            run.steps.done(Stage::Tests);
        }
        finished.testing = Testing::observed(started.commands(), test.map(|(t, _)| t), &host_runs);
        Ok(finished)
    }
}

/// With no environment, what to declare: from the files of the commit
/// the working copy is of (a proposal, so a failure to read is none).
fn proposal(copy: &WorkingCopy) -> Option<String> {
    let repo = git2::Repository::open(copy.job_dir.git_dir()).ok()?;
    let files = crate::environment::CommitFiles::new(&repo, copy.layered.commit()).ok()?;
    forgehand_environment::spec::propose(&files).ok()
}

/// What the agent finished with, or why it stopped.
fn finished(report: AgentReport) -> Result<Finished, (crate::reason::Reason, String)> {
    match report.outcome {
        Outcome::Finished {
            summary,
            title,
            replies,
        } => Ok(Finished {
            title,
            summary,
            replies,
            cost_usd: report.cost_usd,
            turns: report.turns,
            testing: Testing::observed(&[], None, &[]),
        }),
        Outcome::Stopped { reason, message } => Err((reason, message)),
    }
}
