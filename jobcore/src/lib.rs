//! The one job core: a base commit's checkout, a task and an environment
//! become a gated commit and its evidence. The pipeline's stages and
//! `forgehand run` call it (the evaluation harness and CI follow-ups
//! will); nothing else assembles a job.
//!
//! - [`copy`]: the job's working copy layered over the shared checkout
//!   and the environment, in a job directory that owns its mounts, and
//!   the integrity snapshot;
//! - [`agent`]: the agent's session in the sandbox, then the host's test
//!   rounds, into a transcript;
//! - [`deliver`]: the gate and the bot's commit, and the caller's push;
//! - [`failure`]: why a job ended early, one reason for one cause
//!   whichever entry point met it.
//!
//! The core reads the sections of the configuration it needs, never the
//! whole; what the caller does between the steps (a status comment, a
//! job's recorded times) it hears through [`Progress`].

pub mod agent;
pub mod config;
pub mod copy;
pub mod deliver;
pub mod environment;
pub mod failure;
pub mod held;
pub mod jobdir;
mod stage;

use async_trait::async_trait;
use forgehand_sandbox::Backend;

use forgehand_agent::config::AgentConfig;
use forgehand_model::{ModelSettings, Price};
use forgehand_sandbox::config::SandboxConfig;

use crate::config::GitConfig;

pub use agent::{AgentTask, Worked};
pub use copy::JobCopy;
pub use failure::Failure;
pub use stage::Stage;

/// What every job is done with: the sandbox backend and the sections of
/// the configuration the core reads.
#[derive(Clone)]
pub struct Core<'a> {
    pub backend: &'a dyn Backend,
    pub sandbox: &'a SandboxConfig,
    pub git: &'a GitConfig,
    pub agent: &'a AgentConfig,
    /// The model's settings (`forgehand run` may override the configured
    /// ones) and its price, when it has one.
    pub model: ModelSettings,
    pub price: Option<Price>,
    /// `environment.test_retries`: rounds the agent gets back after the
    /// host's tests fail.
    pub test_retries: u32,
}

/// What the caller hears as the job goes: a stage about to start (the
/// status comment's checklist moves), a stage done (its time recorded).
#[async_trait]
pub trait Progress: Send {
    async fn starting(&mut self, _stage: Stage) {}
    fn done(&mut self, _stage: Stage) {}
}

/// A caller that follows nothing (`forgehand run`).
pub struct Quiet;

impl Progress for Quiet {}
