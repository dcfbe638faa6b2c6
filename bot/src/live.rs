//! What changes while `forgehand serve` runs: the set-up page creates a
//! GitHub App, and from then on the node signs in as it and checks its
//! webhook secret, without a restart. Jobs already running finish with
//! the handler they started with.

use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;

use crate::config::Config;
use crate::github_app::StoredApp;
use crate::job::JobResult;
use crate::queue::{JobContext, JobError, JobHandler};
use crate::store::ClaimedJob;
use crate::webhook_secrets::SecretSet;

/// Makes a node's job handler from a configuration.
pub type Rebuild = Arc<dyn Fn(&Config) -> anyhow::Result<Arc<JobHandler>> + Send + Sync>;

/// The handler the workers call, which can be replaced.
pub struct SwappableHandler {
    current: RwLock<Arc<JobHandler>>,
}

impl SwappableHandler {
    pub fn new(handler: Arc<JobHandler>) -> Self {
        SwappableHandler {
            current: RwLock::new(handler),
        }
    }

    fn current(&self) -> Arc<JobHandler> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn replace(&self, handler: Arc<JobHandler>) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = handler;
    }
}

#[async_trait]
impl forgehand_queue::JobHandler for SwappableHandler {
    type Output = JobResult;

    async fn run(&self, job: &ClaimedJob, cx: JobContext) -> Result<JobResult, JobError> {
        self.current().run(job, cx).await
    }

    async fn dead_lettered(&self, job: &ClaimedJob, error: &str) {
        self.current().dead_lettered(job, error).await
    }
}

/// A serving node's configuration, and what must follow when it changes.
pub struct Live {
    config: Mutex<Config>,
    github_secrets: SecretSet,
    handler: Arc<SwappableHandler>,
    /// `None` for a node whose handler does not use the forges (a dry
    /// run, an intake-only node): only the secrets follow.
    rebuild: Option<Rebuild>,
}

impl Live {
    pub fn new(
        config: Config,
        github_secrets: SecretSet,
        handler: Arc<SwappableHandler>,
        rebuild: Option<Rebuild>,
    ) -> Self {
        Live {
            config: Mutex::new(config),
            github_secrets,
            handler,
            rebuild,
        }
    }

    /// The configuration now.
    pub fn config(&self) -> Config {
        self.config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// From now on, GitHub as `app`: its webhook secret verifies
    /// deliveries, and new jobs sign in with its key.
    pub fn use_app(&self, app: &StoredApp) -> anyhow::Result<()> {
        let mut config = self.config();
        crate::github_app::apply(&mut config.github, app);
        config.validate()?;
        // The handler first: a delivery the new secret lets in makes a job
        // that must find the App's credentials.
        if let Some(rebuild) = &self.rebuild {
            self.handler.replace(rebuild(&config)?);
        }
        if let Some(secret) = &app.webhook_secret {
            self.github_secrets.add(secret.clone());
        }
        *self.config.lock().unwrap_or_else(|e| e.into_inner()) = config;
        Ok(())
    }
}
