//! What a sandbox's microVM is made of, and what each exec asks of it:
//! built here, checked here, so that the unit tests can look at exactly
//! what would boot.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use microsandbox::sandbox::{
    DeploymentProfile, ExecOptionsBuilder, HostPermissions, RlimitResource, RootfsSource,
    SandboxBuilder, SecurityProfile, VolumeMount,
};
use microsandbox::{Sandbox as Vm, SandboxConfig};

use crate::{ExecRequest, Limits, SandboxError, SandboxSpec, GUEST_GID, GUEST_UID, WORKSPACE};

/// The guest's hostname, as in the namespace backend.
pub(super) const HOSTNAME: &str = "sandbox";

/// Every world-writable directory of the guest image (`images/build-rootfs`
/// makes exactly these). microsandbox 0.7.13 shares a directory rootfs
/// read-write with the guest (its `RootfsSource::Bind` has no read-only
/// flag), so each gets a private tmpfs: otherwise what one sandbox wrote
/// there would land in the shared image and outlive it.
pub(super) const TMPFS_DIRS: [&str; 3] = ["/tmp", "/var/tmp", "/run/lock"];

/// Runs every command, with `-i`: the command's environment is exactly
/// the spec's plus the request's. agentd would otherwise pass its own
/// environment on (it does not clear it before exec).
pub(super) const ENV_PROGRAM: &str = "/usr/bin/env";

/// `uid:gid` of the unprivileged guest user.
pub(super) fn guest_user() -> String {
    format!("{GUEST_UID}:{GUEST_GID}")
}

/// The microsandbox configuration of a sandbox named `name`. Nothing boots
/// until `create`; `build()` on the result gives the final configuration.
pub(super) fn builder(name: &str, spec: &SandboxSpec) -> Result<SandboxBuilder, SandboxError> {
    let invalid = |what: String| SandboxError::InvalidRequest(what);
    let cpus = u8::try_from(spec.limits.vcpus)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| invalid(format!("vcpus must be 1 to 255, got {}", spec.limits.vcpus)))?;
    let memory = u32::try_from(spec.limits.memory_mib)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            invalid(format!(
                "memory_mib {} is out of range",
                spec.limits.memory_mib
            ))
        })?;
    if spec.home.is_some() || spec.handover != crate::Handover::Chown {
        // Not built yet: a second volume for the home, and layers the
        // guest user owns. Said plainly rather than run without them.
        return Err(SandboxError::Unavailable {
            backend: "microvm",
            reason: "environments (a sandbox's own home, layered working copies) need the namespace backend for now".into(),
        });
    }
    let rootfs = absolute(&spec.rootfs)?;
    let workspace = absolute(&spec.workspace)?;
    let mut builder = Vm::builder(name)
        .image_with(|image| image.bind(rootfs))
        .cpus(cpus)
        .memory(memory)
        // Always: SandboxSpec has no way to ask for a network. With it no
        // network device is attached at all.
        .disable_network()
        .hostname(HOSTNAME)
        .user(guest_user())
        .workdir(WORKSPACE)
        // no_new_privs and no CAP_SYS_ADMIN for every exec.
        .security(SecurityProfile::Restricted)
        .deployment_profile(DeploymentProfile::MultiTenant)
        // The runtime removes the sandbox's state when the VM stops, also
        // when this process dies and the VM stops with it.
        .ephemeral(true)
        .envs(spec.env.iter())
        .volume(WORKSPACE, |mount| {
            mount
                .bind(workspace)
                // Files of the working copy (written on the host) belong
                // to the guest user, so the agent can edit them.
                .owner(GUEST_UID, GUEST_GID)
                // chmod +x inside reaches the host's files (and git).
                .host_permissions(HostPermissions::Mirror)
                .nosuid()
                .nodev()
        });
    for dir in TMPFS_DIRS {
        builder = builder.volume(dir, |mount| mount.tmpfs().nosuid().nodev());
    }
    Ok(builder)
}

fn absolute(path: &Path) -> Result<PathBuf, SandboxError> {
    std::path::absolute(path).map_err(SandboxError::io(format!("resolving {}", path.display())))
}

/// Checks a final configuration (after microsandbox's defaults and any
/// operator policy were applied) against the spec, exactly. Boot only
/// what passes.
pub(super) fn verify(config: &SandboxConfig, spec: &SandboxSpec) -> Result<(), String> {
    verify_isolation(config, spec)?;
    let s = &config.spec;
    let workspace = std::path::absolute(&spec.workspace).map_err(|e| e.to_string())?;
    let mut workspace_seen = false;
    let mut tmpfs_seen = Vec::new();
    for mount in &s.mounts {
        match mount {
            VolumeMount::Bind {
                host,
                guest,
                options,
                ..
            } if guest == WORKSPACE && *host == workspace && !options.readonly => {
                workspace_seen = true;
            }
            VolumeMount::Tmpfs { guest, .. } if TMPFS_DIRS.contains(&guest.as_str()) => {
                tmpfs_seen.push(guest.as_str());
            }
            other => return Err(format!("unexpected mount {other:?}")),
        }
    }
    if !workspace_seen {
        return Err(format!(
            "{} is not mounted at {WORKSPACE}",
            workspace.display()
        ));
    }
    if let Some(missing) = TMPFS_DIRS.iter().find(|d| !tmpfs_seen.contains(d)) {
        return Err(format!("{missing} has no private tmpfs"));
    }
    if u64::from(s.resources.memory_mib) != spec.limits.memory_mib
        || u32::from(s.resources.cpus) != spec.limits.vcpus
    {
        return Err(format!(
            "the VM gets {} MiB and {} vCPUs, the limits say {} MiB and {}",
            s.resources.memory_mib, s.resources.cpus, spec.limits.memory_mib, spec.limits.vcpus
        ));
    }
    Ok(())
}

/// What must hold of a sandbox's configuration also once it runs (when
/// microsandbox may have added its own private mounts): no network, no
/// host service, the spec's rootfs, no host directory but the working
/// copy, the unprivileged user, the restricted profile.
pub(super) fn verify_isolation(config: &SandboxConfig, spec: &SandboxSpec) -> Result<(), String> {
    let s = &config.spec;
    if s.network.enabled {
        return Err("the configuration has a network device".into());
    }
    if !s.network.ports.is_empty() {
        return Err("the configuration publishes ports".into());
    }
    if !s.vsock.is_empty() {
        return Err("the configuration exposes host services through vsock".into());
    }
    let same = |a: &Path, b: &Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    };
    match &s.image {
        RootfsSource::Bind { path, .. } if same(path, &spec.rootfs) => {}
        other => {
            return Err(format!(
                "the root file system is {other:?}, not {}",
                spec.rootfs.display()
            ))
        }
    }
    for mount in &s.mounts {
        if let VolumeMount::Bind { host, guest, .. } = mount {
            if guest != WORKSPACE || !same(host, &spec.workspace) {
                return Err(format!(
                    "the host's {} is mounted at {guest}",
                    host.display()
                ));
            }
        }
    }
    if s.runtime.user.as_deref() != Some(guest_user().as_str()) {
        return Err(format!("commands would run as {:?}", s.runtime.user));
    }
    if s.security_profile != SecurityProfile::Restricted {
        return Err(format!(
            "the guest security profile is {:?}",
            s.security_profile
        ));
    }
    Ok(())
}

/// The program and arguments microsandbox runs for `request`: the request's
/// command under `env -i`, with exactly `base` + the request's variables.
pub(super) fn command_line(
    base: &BTreeMap<String, String>,
    request: &ExecRequest,
) -> Result<(String, Vec<String>), SandboxError> {
    let program = request.argv.first().map(String::as_str).unwrap_or_default();
    if program.contains('=') {
        // env(1) would take it for a variable.
        return Err(SandboxError::InvalidRequest(format!(
            "the microvm backend cannot run a program whose name contains '=': {program:?}"
        )));
    }
    let mut env = base.clone();
    env.extend(request.env.clone());
    let mut args = vec!["-i".to_owned(), "--".to_owned()];
    args.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    args.extend(request.argv.iter().cloned());
    Ok((ENV_PROGRAM.to_owned(), args))
}

/// The options of one exec.
///
/// The process limit: microsandbox 0.7.13 has no pids cgroup for the
/// guest, but it sets rlimits in the child before exec. RLIMIT_NPROC
/// counts every process and thread of the command's real uid, and in the
/// guest everything that uid runs is this sandbox's (agentd runs as root),
/// so it bounds the sandbox as a whole; no `ulimit -u` wrapper is needed.
pub(super) fn exec_options(
    options: ExecOptionsBuilder,
    args: Vec<String>,
    workdir: &str,
    limits: &Limits,
    stdin: Option<Vec<u8>>,
) -> ExecOptionsBuilder {
    let options = options
        .args(args)
        .cwd(workdir)
        .user(guest_user())
        .rlimit(RlimitResource::Nproc, u64::from(limits.max_pids))
        // The same share as the namespace backend's: the guest's table is
        // its own, but a limit that differs by backend surprises builds.
        .rlimit(
            RlimitResource::Nofile,
            crate::namespace::open_files::rlimit(limits.max_pids).rlim_max,
        )
        .tty(false);
    match stdin {
        Some(bytes) => options.stdin_bytes(bytes),
        None => options.stdin_null(),
    }
}
