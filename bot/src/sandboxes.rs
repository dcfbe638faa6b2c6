//! The sandbox backends as the configuration describes them: which one
//! runs jobs, what `forgehand doctor` reports, and the start-up sweep of
//! sandboxes a crashed process left behind.

use std::path::Path;
use std::sync::Arc;

use forgehand_sandbox::namespace::NamespaceBackend;
use forgehand_sandbox::{Backend, BackendChoice, Chosen, Readiness, SandboxError};

use crate::config::SandboxConfig;

/// The microVM backend, when this build has it.
pub fn microvm_backend(config: &SandboxConfig) -> Option<Arc<dyn Backend>> {
    #[cfg(feature = "microvm")]
    {
        use forgehand_sandbox::microvm::{MicrovmBackend, MicrovmRuntime};
        Some(Arc::new(
            MicrovmBackend::new(MicrovmRuntime {
                msb: config.msb_path.clone(),
                libkrunfw: config.libkrunfw_path.clone(),
                agentd: config.agentd_path.clone(),
                home: config.msb_home.clone(),
            })
            .with_trial_boot(&config.rootfs),
        ))
    }
    #[cfg(not(feature = "microvm"))]
    {
        let _ = config;
        None
    }
}

pub fn namespace_backend(config: &SandboxConfig) -> Arc<dyn Backend> {
    Arc::new(NamespaceBackend::default().with_host_user(config.host_user.clone()))
}

/// The backends this build has, made once: the microVM backend's trial
/// boot is remembered per instance, and must happen once per start.
pub struct Backends {
    pub microvm: Option<Arc<dyn Backend>>,
    pub namespace: Arc<dyn Backend>,
}

impl Backends {
    pub fn new(config: &SandboxConfig) -> Self {
        Backends {
            microvm: microvm_backend(config),
            namespace: namespace_backend(config),
        }
    }

    /// The backend `choice` selects, with the warning operators must see
    /// when isolation is a shared kernel.
    pub async fn choose(&self, choice: BackendChoice) -> Result<Chosen, SandboxError> {
        forgehand_sandbox::choose(choice, self.microvm.clone(), self.namespace.clone()).await
    }

    /// Removes sandboxes whose owning process is gone, on every backend
    /// this build has. Errors are reported, not fatal: a backend that is
    /// not usable here has nothing to sweep.
    pub async fn remove_leftovers(&self) -> usize {
        let mut removed = 0;
        for backend in self.microvm.iter().chain([&self.namespace]) {
            if !backend.readiness().await.is_usable() {
                continue;
            }
            match backend.remove_leftovers().await {
                Ok(n) => removed += n,
                Err(error) => {
                    tracing::warn!(backend = backend.name(), %error, "could not sweep leftover sandboxes")
                }
            }
        }
        removed
    }
}

/// The backend `choice` (or the configured one) selects.
pub async fn choose(
    config: &SandboxConfig,
    choice: Option<BackendChoice>,
) -> Result<Chosen, SandboxError> {
    Backends::new(config)
        .choose(choice.unwrap_or(config.backend))
        .await
}

/// Whether the guest rootfs is there, and built by `images/build-rootfs`.
pub fn rootfs_status(rootfs: &Path) -> Readiness {
    if !rootfs.join("bin/sh").exists() {
        return Readiness::Unusable(format!(
            "no guest rootfs at {}: build it with images/build-rootfs {} (or set sandbox.rootfs)",
            rootfs.display(),
            rootfs.display()
        ));
    }
    if !rootfs.join("workspace").is_dir() {
        return Readiness::Unusable(format!(
            "{} has no /workspace directory: rebuild it with images/build-rootfs --force {}",
            rootfs.display(),
            rootfs.display()
        ));
    }
    match std::fs::read_to_string(rootfs.join(".forgehand-image")) {
        Ok(stamp) => Readiness::Usable(format!(
            "{} (image {})",
            rootfs.display(),
            stamp.trim().chars().take(12).collect::<String>()
        )),
        Err(_) => Readiness::Usable(format!(
            "{} (not built by images/build-rootfs: no stamp)",
            rootfs.display()
        )),
    }
}

/// One line of `forgehand doctor`.
pub struct Check {
    pub what: String,
    pub readiness: Readiness,
}

/// Everything `forgehand doctor` checks, and whether the configured
/// backend can run jobs.
pub async fn doctor(config: &SandboxConfig) -> (Vec<Check>, Result<Chosen, SandboxError>) {
    let backends = Backends::new(config);
    let mut checks = Vec::new();
    let microvm = match &backends.microvm {
        Some(backend) => backend.readiness().await,
        None => Readiness::Unusable("this forgehand was built without the microvm feature".into()),
    };
    checks.push(Check {
        what: "backend microvm".into(),
        readiness: microvm,
    });
    checks.push(Check {
        what: "backend namespace".into(),
        readiness: backends.namespace.readiness().await,
    });
    checks.push(Check {
        what: "guest rootfs".into(),
        readiness: rootfs_status(&config.rootfs),
    });
    let chosen = backends.choose(config.backend).await;
    (checks, chosen)
}

/// The sandbox side of a node that runs jobs, settled at start-up.
#[derive(Clone)]
pub struct SandboxStatus {
    pub backend: Arc<dyn Backend>,
    /// Said at start-up, in `/readyz` and in every pull request's footer.
    pub warning: Option<String>,
    pub rootfs: Readiness,
}

impl SandboxStatus {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "backend": self.backend.name(),
            "isolation": self.backend.isolation().describe(),
            "warning": self.warning,
            "rootfs": self.rootfs.detail(),
            "rootfs_ready": self.rootfs.is_usable(),
        })
    }
}

/// Sweeps leftovers and picks the backend. Fails when the configured
/// backend cannot run (`microvm` fails closed; `auto` fails only when
/// nothing can); a missing rootfs is reported, not fatal, so that an
/// operator can build it while the node takes webhooks.
pub async fn prepare(config: &SandboxConfig) -> Result<SandboxStatus, SandboxError> {
    let backends = Backends::new(config);
    let removed = backends.remove_leftovers().await;
    if removed > 0 {
        tracing::warn!(
            removed,
            "removed sandboxes left behind by a process that died"
        );
    }
    let chosen = backends.choose(config.backend).await?;
    let rootfs = rootfs_status(&config.rootfs);
    if let Some(warning) = &chosen.warning {
        tracing::warn!("{warning}");
    }
    if chosen.backend.name() == "namespace" {
        for warning in forgehand_sandbox::namespace::host_warnings(config.memory_mib) {
            tracing::warn!("{warning}");
        }
    }
    if let Readiness::Unusable(problem) = &rootfs {
        tracing::error!("jobs will fail until this is fixed: {problem}");
    }
    tracing::info!(backend = chosen.backend.name(), "sandbox backend chosen");
    Ok(SandboxStatus {
        backend: chosen.backend,
        warning: chosen.warning,
        rootfs,
    })
}
