//! Environments in jobs and in `forgehand run` (docs/environments.md):
//! what the base commit declares, the environment kept under its key (or
//! built, through the egress proxy), and the job's working copy layered
//! over the shared checkout and the environment.

pub mod files;
mod layered;
mod tested;

use std::path::{Path, PathBuf};

pub use forgehand_agent::testing::{
    looks_like_a_test, By, CommandRun, TestCommand, TestResult, Testing,
};
use forgehand_environment::build::{self, Setup, SetupError, Step};
use forgehand_environment::cache::{CacheError, EnvCache, EnvInfo, InUse};
use forgehand_environment::egress::{Policy, Summary};
use forgehand_environment::spec::{self, DeclareError, Declared, EnvKey, KeyParts, RepoFiles};
use forgehand_sandbox::{Backend, Limits};
use serde::Serialize;

pub use files::{repo_rules, CommitFiles};
pub use forgehand_agent::HostTestError;
use forgehand_environment::config::EnvironmentConfig;
use forgehand_sandbox::config::SandboxConfig;
pub use layered::{ignored_paths, write_exclusions, Layered, TestLayers, ARTEFACTS};
pub use tested::{GateInputs, HostTests};

/// What a job or a run works with: the environment's declaration, where
/// it came from, and the kept environment itself.
#[derive(Debug)]
pub struct Prepared {
    pub declared: Declared,
    pub key: EnvKey,
    pub env: Option<InUse>,
    /// Found kept, not built for this job.
    pub reused: bool,
    /// The setup's time: this job's when it built it, else the build's.
    pub setup_secs: f64,
    /// What the setup reached through the egress, when it ran now.
    pub egress: Option<Summary>,
    /// Its steps' times, when it ran now.
    pub steps: Vec<Step>,
}

/// The environment as `forgehand run --json`, the job's record and the
/// API report it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct EnvironmentReport {
    pub key: String,
    pub reused: bool,
    pub setup_secs: f64,
    /// Where the declaration came from (`.forgehand.toml`, …).
    pub source: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// The files whose contents define it (lockfiles, manifests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
}

impl EnvironmentReport {
    /// Which of `changed` define the environment (its inputs, its
    /// declaration): a change to them is not in the environment the
    /// tests ran in, which stays the base branch's.
    pub fn drift(&self, changed: &[String]) -> Vec<String> {
        const DECLARATIONS: [&str; 3] = [
            ".forgehand.toml",
            ".devcontainer/devcontainer.json",
            ".devcontainer.json",
        ];
        changed
            .iter()
            .filter(|path| self.inputs.contains(path) || DECLARATIONS.contains(&path.as_str()))
            .cloned()
            .collect()
    }
}

impl Prepared {
    pub fn report(&self) -> EnvironmentReport {
        EnvironmentReport {
            key: self.key.to_string(),
            reused: self.reused,
            setup_secs: (self.setup_secs * 10.0).round() / 10.0,
            source: self.declared.source.to_string(),
            packages: self
                .declared
                .packages
                .iter()
                .map(|p| p.as_str().to_owned())
                .collect(),
            setup: self.declared.setup.clone(),
            test: self.declared.test.clone(),
            inputs: self.declared.inputs.clone(),
        }
    }
}

/// Why a job's environment could not be had.
#[derive(Debug, thiserror::Error)]
pub enum EnvFailure {
    /// The repository's declaration is wrong (its line and what was
    /// expected).
    #[error("{0}")]
    Declaration(#[from] DeclareError),
    /// Its setup (its packages or its command) failed, or made more
    /// than an environment may hold ([`SetupError::is_too_large`]).
    #[error("{0}")]
    Setup(SetupError),
    /// Forgehand's machinery.
    #[error("{0}")]
    Infra(String),
}

impl From<SetupError> for EnvFailure {
    fn from(error: SetupError) -> Self {
        if error.is_the_repositorys() {
            EnvFailure::Setup(error)
        } else {
            EnvFailure::Infra(error.to_string())
        }
    }
}

impl From<CacheError> for EnvFailure {
    fn from(error: CacheError) -> Self {
        EnvFailure::Infra(error.to_string())
    }
}

/// Environments as this node builds and keeps them.
pub struct Environments {
    cache: EnvCache,
    policy: Policy,
    /// `environment.allow_hosts` as written: the key covers it.
    allowed: Vec<String>,
    ca_bundle: Option<Vec<u8>>,
    image: PathBuf,
    image_id: String,
    detect: bool,
    limits: Limits,
    disk_mib: u64,
    max_entries: usize,
    max_age: Option<std::time::Duration>,
}

impl Environments {
    pub fn new(env: &EnvironmentConfig, sandbox: &SandboxConfig) -> Result<Self, String> {
        forgehand_sandbox::private::dir(&env.cache_dir)
            .map_err(|e| format!("environment.cache_dir: {e}"))?;
        let cache = EnvCache::open(&env.cache_dir, env.cache_max_gib)
            .map_err(|e| e.to_string())?
            .with_max_entries(env.cache_max_entries)
            .with_max_idle_days(env.max_idle_days);
        let mut limits = sandbox.limits();
        limits.memory_mib = env.memory_mib;
        limits.timeout = env.setup_timeout();
        Ok(Environments {
            cache,
            policy: env.egress()?,
            allowed: env.allow_hosts.clone(),
            ca_bundle: env.ca_bundle()?,
            image: sandbox.rootfs.clone(),
            image_id: image_id(&sandbox.rootfs),
            detect: env.detect,
            limits,
            disk_mib: env.disk_mib,
            max_entries: env.max_entries,
            max_age: env.max_age(),
        })
    }

    pub fn cache(&self) -> &EnvCache {
        &self.cache
    }

    /// The guest image the sandboxes run.
    pub fn image(&self) -> &Path {
        &self.image
    }

    /// What `files` (the base commit's) declares for `repository`, and
    /// the key its environment is kept under; `None` when it declares and
    /// shows nothing. Reads the files here (they are git objects: nothing
    /// of them is held across a wait).
    pub fn declare(
        &self,
        files: &dyn RepoFiles,
        repository: &str,
    ) -> Result<Option<(Declared, EnvKey)>, DeclareError> {
        let Some(declared) = spec::declared(files, self.detect)? else {
            return Ok(None);
        };
        let key = spec::key(
            &KeyParts {
                image: &self.image_id,
                repository,
                declared: &declared,
                ca_bundle: self.ca_bundle.as_deref(),
                allowed: &self.allowed,
            },
            files,
        )
        .map_err(DeclareError::Files)?;
        Ok(Some((declared, key)))
    }

    /// The environment `declared` defines (kept under `key`) for
    /// `repository`, whose base commit is checked out at `base` for the
    /// sandbox user: kept, or built now.
    pub async fn prepare(
        &self,
        backend: &dyn Backend,
        repository: &str,
        declared: Declared,
        key: EnvKey,
        base: &Path,
    ) -> Result<Prepared, EnvFailure> {
        if !declared.needs_setup() {
            return Ok(Prepared {
                declared,
                key,
                env: None,
                reused: true,
                setup_secs: 0.0,
                egress: None,
                steps: Vec::new(),
            });
        }
        if let Some(env) = self.kept(key.as_str())? {
            let setup_secs = env.info.setup_secs;
            return Ok(Prepared {
                declared,
                key,
                env: Some(env),
                reused: true,
                setup_secs,
                egress: None,
                steps: Vec::new(),
            });
        }
        self.build(backend, repository, declared, key, base).await
    }

    /// The environment kept under `key`, unless it is older than
    /// `environment.max_age_hours`: then it is removed to be built again,
    /// or, while another job uses it, reused this once.
    fn kept(&self, key: &str) -> Result<Option<InUse>, CacheError> {
        let Some(env) = self.cache.get(key)? else {
            return Ok(None);
        };
        let age = unix_now_secs() - env.info.built_at as i64;
        let fresh = self
            .max_age
            .is_none_or(|max| age < 0 || (age as u64) < max.as_secs());
        if fresh {
            return Ok(Some(env));
        }
        drop(env);
        match self.cache.remove(key) {
            Ok(_) => {
                tracing::info!(key, age_secs = age, "environment past its age: built again");
                Ok(None)
            }
            Err(CacheError::InUse(_)) => self.cache.get(key),
            Err(error) => Err(error),
        }
    }

    async fn build(
        &self,
        backend: &dyn Backend,
        repository: &str,
        declared: Declared,
        key: EnvKey,
        base: &Path,
    ) -> Result<Prepared, EnvFailure> {
        let setup = Setup {
            backend,
            image: &self.image,
            base,
            declared: &declared,
            key: &key,
            repository,
            ca_bundle: self.ca_bundle.as_deref(),
            limits: self.limits.clone(),
            disk_mib: self.disk_mib,
            max_entries: self.max_entries,
            egress: &self.policy,
        };
        let built = build::build(&setup, &self.cache).await?;
        tracing::info!(key = %key, repository, secs = built.env.info.setup_secs, "environment built");
        Ok(Prepared {
            setup_secs: built.env.info.setup_secs,
            declared,
            key,
            env: Some(built.env),
            reused: false,
            egress: Some(built.egress),
            steps: built.steps,
        })
    }

    /// Every kept environment, the most recently used first.
    pub fn list(&self) -> Vec<EnvInfo> {
        self.cache.list()
    }
}

/// The guest image's id: the stamp `images/build-rootfs` writes, which
/// covers everything that decides the image's content.
fn image_id(rootfs: &Path) -> String {
    std::fs::read_to_string(rootfs.join(".forgehand-image"))
        .ok()
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_else(|| format!("unstamped:{}", rootfs.display()))
}

/// Seconds since the Unix epoch (the cache records when it built).
fn unix_now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
