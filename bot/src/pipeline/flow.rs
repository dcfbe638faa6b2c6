//! The sequence of an authorized job's stages (`stages/`): the one place
//! that knows their order.

use forgehand_jobcore::environment::Prepared;
use forgehand_jobcore::Stage;

use super::orders::{Allowed, Order};
use super::run::JobRun;
use super::stages::answer::Answer;
use super::work::Done;
use super::{Failure, Pipeline};
use crate::job::HeldCommit;

impl Pipeline {
    /// The stages of an authorized job, in order (see [`super::stages`]);
    /// the status comment's checklist moves with them. A new stage is one
    /// function in `stages/` and one line here.
    pub(super) async fn work(
        &self,
        run: &mut JobRun<'_>,
        order: &Order,
        allowed: Allowed,
    ) -> Result<Done, Failure> {
        let mut work = self.task(run, order).await?;
        work.allowed = allowed;
        let mut source = self.fetch(run, &work).await?;
        if let Some(resumed) = source.resumed.take() {
            // An earlier attempt pushed this job's commit: the agent's
            // and the gate's work is done; answer it.
            run.steps.done(Stage::Resumed);
            return self.answer(run, Answer::resumed(work, resumed)).await;
        }
        let mut environment = self.environment(run, &mut source).await?;
        let environment_report = environment.as_ref().map(Prepared::report);
        let copy = self
            .working_copy(run, &work, source, environment.as_mut())
            .await?;
        let finished = self.agent(run, &copy, &work, environment.as_ref()).await?;
        if work.plan_only {
            // A plan changes nothing: what the agent wrote is thrown away.
            return Ok(Done::Planned {
                plan: finished.summary,
            });
        }
        let published = self.publish(run, &work, copy, &finished).await?;
        let answer = Answer {
            work,
            finished,
            published,
            resumed: false,
            environment: environment_report,
        };
        self.answer(run, answer).await
    }

    /// A held change released: the order's work read again (its branch
    /// and base as they were when the change was held), the kept commit
    /// pushed, and the answer the job would have given then.
    pub(super) async fn work_released(
        &self,
        run: &mut JobRun<'_>,
        order: &Order,
        held: HeldCommit,
    ) -> Result<Done, Failure> {
        let mut work = self.task(run, order).await?;
        work.branch = held.branch.clone();
        work.base = held.base.clone();
        self.release(run, &held).await?;
        run.steps.done(Stage::Released);
        self.answer(run, Answer::released(work, held)).await
    }
}
