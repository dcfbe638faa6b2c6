//! The microVM backend: each sandbox is a microsandbox (0.7.13) microVM
//! with its own kernel and no network device, booted from the guest rootfs
//! directory, with the working copy shared at `/workspace` and private
//! tmpfs over the image's world-writable directories. Commands run as the
//! unprivileged guest user, with no_new_privs, under `env -i`.
//!
//! Start-up: [`Backend::readiness`] checks that the runtime pieces are
//! here (KVM, `msb`, `libkrunfw`, `agentd`, the microsandbox home) and,
//! when the backend was made [`MicrovmBackend::with_trial_boot`] (as the
//! service makes it), boots one VM from the rootfs, runs `true` in it and
//! destroys it: only that shows that this host's KVM runs a guest (a
//! paravirtual KVM, for one, opens fine and boots nothing).
//!
//! Leftovers: sandboxes are ephemeral (the runtime removes their state
//! when the VM stops) and attached (the VM stops when this process dies),
//! so most leftovers clean themselves up; [`Backend::remove_leftovers`]
//! removes what remains, found by name (`crate::owner`).

mod config;
mod exec;
mod runtime;
mod sandbox;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use microsandbox::sandbox::DestroyOptions;
use microsandbox::{with_backend, Backend as MsbBackend, MicrosandboxError, Sandbox as Vm};
use tokio::sync::OnceCell;

pub use sandbox::MicrovmSandbox;

use crate::{
    Backend, ExecRequest, Isolation, Limits, Readiness, Sandbox, SandboxError, SandboxSpec,
    WORKSPACE,
};

/// How long a VM may take from create to a ready guest agent.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long stopping a VM (forcibly) may take.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The whole of [`MicrovmBackend::trial_boot`].
const TRIAL_TIMEOUT: Duration = Duration::from_secs(60);

/// Where microsandbox's runtime pieces are. `None`: microsandbox's own
/// lookup (`MSB_PATH`, `MSB_LIBKRUNFW_PATH`, `MSB_AGENTD_PATH`, `MSB_HOME`,
/// else `~/.microsandbox`). Those variables, when set, win over the paths
/// given here; readiness reports the disagreement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MicrovmRuntime {
    /// The `msb` binary (crate `microsandbox-cli`).
    pub msb: Option<PathBuf>,
    /// `libkrunfw.so.5.6.1`, the guest kernel.
    pub libkrunfw: Option<PathBuf>,
    /// The guest agent `agentd` (crate `microsandbox-agentd`, musl).
    pub agentd: Option<PathBuf>,
    /// microsandbox's home: its database, sandbox state, logs, sockets.
    pub home: Option<PathBuf>,
}

impl MicrovmRuntime {
    /// From `FORGEHAND_SANDBOX__MSB_PATH`, `FORGEHAND_SANDBOX__LIBKRUNFW_PATH`,
    /// `FORGEHAND_SANDBOX__AGENTD_PATH` and `FORGEHAND_SANDBOX__MSB_HOME`;
    /// unset or empty is `None`.
    pub fn from_env() -> Self {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        MicrovmRuntime {
            msb: var("FORGEHAND_SANDBOX__MSB_PATH"),
            libkrunfw: var("FORGEHAND_SANDBOX__LIBKRUNFW_PATH"),
            agentd: var("FORGEHAND_SANDBOX__AGENTD_PATH"),
            home: var("FORGEHAND_SANDBOX__MSB_HOME"),
        }
    }
}

/// Makes microVM sandboxes.
pub struct MicrovmBackend {
    runtime: MicrovmRuntime,
    /// microsandbox's backend over `runtime`, made on first use and kept
    /// for this backend's life (not process-wide: no ambient default is
    /// installed; every call is scoped with `with_backend`).
    local: OnceCell<Arc<dyn MsbBackend>>,
    /// When set, readiness includes a trial boot from this rootfs (once
    /// per backend): the pieces being present does not show that this
    /// host's KVM runs a guest.
    trial_rootfs: Option<PathBuf>,
    trial_verdict: OnceCell<Readiness>,
}

impl MicrovmBackend {
    pub fn new(runtime: MicrovmRuntime) -> Self {
        MicrovmBackend {
            runtime,
            local: OnceCell::new(),
            trial_rootfs: None,
            trial_verdict: OnceCell::new(),
        }
    }

    /// Makes [`Backend::readiness`] boot a trial VM from `rootfs` (once),
    /// so that `auto` picks microVMs only where one boots and `microvm`
    /// fails closed where none does.
    pub fn with_trial_boot(mut self, rootfs: impl Into<PathBuf>) -> Self {
        self.trial_rootfs = Some(rootfs.into());
        self
    }

    /// [`MicrovmRuntime::from_env`].
    pub fn from_env() -> Self {
        MicrovmBackend::new(MicrovmRuntime::from_env())
    }

    pub fn runtime(&self) -> &MicrovmRuntime {
        &self.runtime
    }

    /// Boots a small VM from `rootfs`, runs `true` in it and destroys it,
    /// all within 60 s. [`Backend::readiness`] only finds the pieces;
    /// this shows they work. The service calls it at start-up, after
    /// readiness, with its configured rootfs.
    pub async fn trial_boot(&self, rootfs: &Path) -> Readiness {
        let ready = self.pieces().await;
        if !ready.is_usable() {
            return ready;
        }
        let workspace = std::env::temp_dir().join(format!(
            "forgehand-trial-boot-{}-{:012x}",
            std::process::id(),
            rand::random::<u64>() >> 16
        ));
        if let Err(e) = std::fs::create_dir(&workspace) {
            return Readiness::Unusable(format!(
                "trial boot: creating {}: {e}",
                workspace.display()
            ));
        }
        let spec = SandboxSpec {
            rootfs: rootfs.to_owned(),
            workspace: workspace.clone(),
            home: None,
            handover: Default::default(),
            env: crate::spec::base_env(),
            limits: Limits {
                memory_mib: 256,
                vcpus: 1,
                max_pids: 64,
                timeout: Duration::from_secs(20),
                output_limit_bytes: 64 * 1024,
                tmp_mib: 64,
            },
        };
        let name = crate::owner::sandbox_name();
        let started = Instant::now();
        let trial = tokio::time::timeout(TRIAL_TIMEOUT, self.trial(&name, spec)).await;
        let verdict = match trial {
            Ok(Ok(())) => Readiness::Usable(format!(
                "{}; a trial microVM booted and ran `true` in {:.1} s",
                ready.detail(),
                started.elapsed().as_secs_f64()
            )),
            Ok(Err(e)) => Readiness::Unusable(format!("trial boot of a microVM failed: {e}")),
            Err(_) => {
                if let Ok(local) = self.local().await {
                    remove_by_name(local, &name).await;
                }
                Readiness::Unusable(format!(
                    "trial boot of a microVM did not finish within {} s (does this host's KVM run guests?)",
                    TRIAL_TIMEOUT.as_secs()
                ))
            }
        };
        let _ = std::fs::remove_dir_all(&workspace);
        verdict
    }

    async fn trial(&self, name: &str, spec: SandboxSpec) -> Result<(), SandboxError> {
        check_dirs(&spec)?;
        let local = self.local().await?;
        let vm = create_named(local, name.to_owned(), spec).await?;
        let out = vm.exec(ExecRequest::new(["true"])).await;
        let destroyed = vm.destroy().await;
        let out = out?;
        destroyed?;
        if !out.status.success() {
            return Err(SandboxError::Start(format!(
                "`true` ended with {}: {}",
                out.status,
                out.stderr.to_text().trim()
            )));
        }
        Ok(())
    }

    /// Whether the runtime pieces are here; boots nothing.
    async fn pieces(&self) -> Readiness {
        let runtime = self.runtime.clone();
        tokio::task::spawn_blocking(move || runtime::check(&runtime))
            .await
            .unwrap_or_else(|e| Readiness::Unusable(format!("the check failed: {e}")))
    }

    async fn local(&self) -> Result<Arc<dyn MsbBackend>, SandboxError> {
        let runtime = self.runtime.clone();
        self.local
            .get_or_try_init(|| async move {
                let local = tokio::task::spawn_blocking(move || runtime::local_backend(&runtime))
                    .await
                    .map_err(|e| SandboxError::Internal(e.to_string()))?
                    .map_err(unavailable)?;
                Ok::<_, SandboxError>(Arc::new(local) as Arc<dyn MsbBackend>)
            })
            .await
            .cloned()
    }
}

fn unavailable(reason: String) -> SandboxError {
    SandboxError::Unavailable {
        backend: "microvm",
        reason,
    }
}

#[async_trait]
impl Backend for MicrovmBackend {
    fn name(&self) -> &'static str {
        "microvm"
    }

    fn isolation(&self) -> Isolation {
        Isolation::MicroVm
    }

    async fn readiness(&self) -> Readiness {
        let pieces = self.pieces().await;
        match &self.trial_rootfs {
            Some(rootfs) if pieces.is_usable() => self
                .trial_verdict
                .get_or_init(|| self.trial_boot(rootfs))
                .await
                .clone(),
            _ => pieces,
        }
    }

    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        check_dirs(&spec)?;
        let local = self.local().await?;
        let vm = create_named(local, crate::owner::sandbox_name(), spec).await?;
        Ok(Box::new(vm))
    }

    async fn remove_leftovers(&self) -> Result<usize, SandboxError> {
        let local = self.local().await?;
        let home = local
            .as_local()
            .map(|l| l.config().home())
            .ok_or_else(|| SandboxError::Internal("microsandbox's backend is not local".into()))?;
        if !home.is_dir() {
            return Ok(0); // nothing ever ran here
        }
        let leftovers = with_backend(local.clone(), async {
            let mut found = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let page = Vm::list_with(|list| match cursor.take() {
                    Some(c) => list.limit(100).cursor(c),
                    None => list.limit(100),
                })
                .await?;
                found.extend(
                    page.sandboxes
                        .into_iter()
                        .filter(|h| crate::owner::owner_is_gone(h.name())),
                );
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            Ok::<_, MicrosandboxError>(found)
        })
        .await
        .map_err(|e| SandboxError::Internal(format!("listing microsandbox's sandboxes: {e}")))?;
        let mut failures = Vec::new();
        for handle in &leftovers {
            tracing::warn!(sandbox = %handle.name(), "removing a microVM left behind by a process that died");
            match handle.destroy_with(force()).await {
                Ok(()) | Err(MicrosandboxError::SandboxNotFound(_)) => {}
                Err(e) => failures.push(format!("{}: {e}", handle.name())),
            }
        }
        if failures.is_empty() {
            Ok(leftovers.len())
        } else {
            Err(SandboxError::Internal(format!(
                "removed {} of {} leftover microVMs; could not remove {}",
                leftovers.len() - failures.len(),
                leftovers.len(),
                failures.join("; ")
            )))
        }
    }
}

fn force() -> DestroyOptions {
    DestroyOptions {
        force: true,
        timeout: STOP_TIMEOUT,
    }
}

/// Boots the VM of `spec` as `name`. Fails closed: any error, a final
/// configuration that is not what was asked for, or a boot slower than
/// [`BOOT_TIMEOUT`] is an error, and what was started is removed.
async fn create_named(
    local: Arc<dyn MsbBackend>,
    name: String,
    spec: SandboxSpec,
) -> Result<MicrovmSandbox, SandboxError> {
    let builder = config::builder(&name, &spec)?;
    let vm_config = with_backend(local.clone(), builder.build())
        .await
        .map_err(|e| SandboxError::Start(format!("configuring the microVM: {e}")))?;
    config::verify(&vm_config, &spec)
        .map_err(|why| SandboxError::Start(format!("refusing to boot the microVM: {why}")))?;
    let created = tokio::time::timeout(
        BOOT_TIMEOUT,
        with_backend(local.clone(), Vm::create(vm_config)),
    )
    .await;
    let vm = match created {
        Ok(Ok(vm)) => vm,
        Ok(Err(e)) => {
            remove_by_name(local, &name).await;
            return Err(SandboxError::Start(format!(
                "booting the microVM failed: {e}"
            )));
        }
        Err(_) => {
            remove_by_name(local, &name).await;
            return Err(SandboxError::Start(format!(
                "the microVM did not boot within {} s",
                BOOT_TIMEOUT.as_secs()
            )));
        }
    };
    if let Err(why) = config::verify_isolation(vm.config(), &spec) {
        let _ = vm.destroy_with(force()).await;
        return Err(SandboxError::Start(format!(
            "the booted microVM is not what was asked for: {why}"
        )));
    }
    tracing::debug!(sandbox = %name, "microVM started");
    Ok(MicrovmSandbox::new(name, vm, spec))
}

/// Best effort: stops and removes a sandbox whose creation failed midway.
async fn remove_by_name(local: Arc<dyn MsbBackend>, name: &str) {
    let cleanup = with_backend(local, async {
        if let Ok(handle) = Vm::get(name).await {
            let _ = handle.destroy_with(force()).await;
        }
    });
    let _ = tokio::time::timeout(STOP_TIMEOUT * 2, cleanup).await;
}

/// What the guest image must have before anything boots.
fn check_dirs(spec: &SandboxSpec) -> Result<(), SandboxError> {
    let rootfs_problem = |problem: &str| SandboxError::Rootfs {
        path: spec.rootfs.clone(),
        problem: format!("{problem}; build it with images/build-rootfs"),
    };
    if !spec.rootfs.is_dir() {
        return Err(rootfs_problem("no such directory"));
    }
    if !spec.rootfs.join(WORKSPACE.trim_start_matches('/')).is_dir() {
        return Err(rootfs_problem(
            "it has no /workspace directory to mount the working copy on",
        ));
    }
    for program in ["bin/sh", config::ENV_PROGRAM.trim_start_matches('/')] {
        if !spec.rootfs.join(program).exists() {
            return Err(rootfs_problem(&format!("it has no /{program}")));
        }
    }
    if !spec.workspace.is_dir() {
        return Err(SandboxError::Workspace {
            path: spec.workspace.clone(),
            problem: "no such directory".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
