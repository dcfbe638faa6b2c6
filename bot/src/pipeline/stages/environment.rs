//! Stage 2: the repository's environment, as its base commit declares it
//! (never the bot's branch or the agent's tree): kept from an earlier job,
//! or built now in the setup phase, whose only way out is the egress
//! proxy. A declaration with a mistake, or a setup that fails, ends the
//! job saying where and why.

use super::super::run::JobRun;
use super::super::{Failure, Pipeline};
use super::working_copy::Source;
use forgehand_jobcore::environment::{EnvFailure, Prepared};
use forgehand_jobcore::failure::environment as failure;
use forgehand_jobcore::Stage;

impl Pipeline {
    pub(in crate::pipeline) async fn environment(
        &self,
        run: &mut JobRun<'_>,
        source: &mut Source,
    ) -> Result<Option<Prepared>, Failure> {
        let declared = std::mem::replace(&mut source.declared, Ok(None));
        let declared = declared.map_err(|e| failure(EnvFailure::Declaration(e)))?;
        let Some((declared, key)) = declared else {
            run.steps.done(Stage::Environment);
            return Ok(None);
        };
        run.progress(Stage::Environment).await;
        let prepared = self
            .environments
            .prepare(
                &*self.backend,
                &run.job().repository_key(),
                declared,
                key,
                source.base_tree(),
            )
            .await
            .map_err(failure)?;
        run.steps.done(Stage::Environment);
        Ok(Some(prepared))
    }
}
