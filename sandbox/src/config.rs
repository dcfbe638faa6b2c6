//! `[sandbox]`: where the agent's tools run and within what limits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{BackendChoice, Limits, SandboxSpec};
use serde::{Deserialize, Serialize};

/// A working copy's file system by default: 10 GiB (sparse: it costs what
/// is written).
pub const DEFAULT_DISK_MIB: u64 = 10 * 1024;
/// The most CPUs a sandbox may be given.
const MAX_VCPUS: u32 = 1024;
/// The kernel's largest pid limit (PID_MAX_LIMIT on 64-bit).
const MAX_PIDS: u32 = 4_194_304;

/// Where `images/build-rootfs` puts the guest image by default.
pub const DEFAULT_ROOTFS: &str = "/var/cache/forgehand/rootfs";

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// `auto` (a microVM when one boots here, else namespaces, said
    /// loudly), `microvm` (fails closed) or `namespace`.
    pub backend: BackendChoice,
    /// The guest root file system: a directory built by
    /// `images/build-rootfs`.
    pub rootfs: PathBuf,
    pub memory_mib: u64,
    pub vcpus: u32,
    /// Processes and threads alive at once in one sandbox.
    pub max_pids: u32,
    /// The longest one command may run; its whole process tree is killed.
    pub timeout_secs: u64,
    /// Bytes kept of each of a command's stdout and stderr.
    pub output_limit_bytes: usize,
    /// Size of a sandbox's `/tmp` (its HOME), in MiB.
    pub tmp_mib: u64,
    /// Size of the file system a job's working copy lives on, in MiB: what
    /// the agent may write to `/workspace` stops there. 0: no limit.
    pub disk_mib: u64,
    /// The host user the namespace backend runs sandboxes as (a name, or
    /// `uid:gid`): never root, never the user that runs Forgehand.
    pub host_user: String,
    /// Extra environment for every command (no host variable is passed
    /// through otherwise). Never put a secret here: the agent reads it.
    pub env: BTreeMap<String, String>,
    /// microVM runtime pieces; unset means microsandbox's own lookup
    /// (MSB_PATH, MSB_LIBKRUNFW_PATH, MSB_AGENTD_PATH, MSB_HOME).
    pub msb_path: Option<PathBuf>,
    pub libkrunfw_path: Option<PathBuf>,
    pub agentd_path: Option<PathBuf>,
    pub msb_home: Option<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        let limits = Limits::default();
        SandboxConfig {
            backend: BackendChoice::Auto,
            rootfs: DEFAULT_ROOTFS.into(),
            memory_mib: limits.memory_mib,
            vcpus: limits.vcpus,
            max_pids: limits.max_pids,
            timeout_secs: limits.timeout.as_secs(),
            output_limit_bytes: limits.output_limit_bytes,
            tmp_mib: limits.tmp_mib,
            disk_mib: DEFAULT_DISK_MIB,
            host_user: crate::namespace::DEFAULT_HOST_USER.into(),
            env: BTreeMap::new(),
            msb_path: None,
            libkrunfw_path: None,
            agentd_path: None,
            msb_home: None,
        }
    }
}

impl SandboxConfig {
    pub fn limits(&self) -> Limits {
        Limits {
            memory_mib: self.memory_mib,
            vcpus: self.vcpus,
            max_pids: self.max_pids,
            timeout: Duration::from_secs(self.timeout_secs),
            output_limit_bytes: self.output_limit_bytes,
            tmp_mib: self.tmp_mib,
        }
    }

    /// A sandbox over `workspace` with this configuration.
    pub fn spec(&self, workspace: &Path) -> SandboxSpec {
        SandboxSpec {
            rootfs: self.rootfs.clone(),
            workspace: workspace.to_owned(),
            home: None,
            handover: Default::default(),
            env: crate::namespace::sandbox_env(self.env.clone()),
            limits: self.limits(),
        }
    }

    pub fn problems(&self, problems: &mut Vec<String>) {
        if self.memory_mib < 64 {
            problems.push("sandbox.memory_mib: must be at least 64".into());
        }
        if self.vcpus == 0 {
            problems.push("sandbox.vcpus: must be at least 1".into());
        }
        // The kernel's own bounds: cgroups refuse a CPU quota past about
        // a thousand CPUs' worth and a pid limit past PID_MAX_LIMIT.
        if self.vcpus > MAX_VCPUS {
            problems.push(format!("sandbox.vcpus: at most {MAX_VCPUS}"));
        }
        if self.max_pids < 16 {
            problems
                .push("sandbox.max_pids: must be at least 16 (a shell and git need a few)".into());
        }
        if self.max_pids > MAX_PIDS {
            problems.push(format!(
                "sandbox.max_pids: at most {MAX_PIDS} (the kernel's most)"
            ));
        }
        if self.timeout_secs == 0 {
            problems.push("sandbox.timeout_secs: must be at least 1".into());
        }
        if self.tmp_mib < 16 {
            problems.push("sandbox.tmp_mib: must be at least 16".into());
        }
        if self.disk_mib != 0 && self.disk_mib < 64 {
            problems.push("sandbox.disk_mib: must be 0 (no limit) or at least 64".into());
        }
        if self.host_user.trim().is_empty() {
            problems.push("sandbox.host_user: must name a user".into());
        }
        if self.output_limit_bytes < 1024 {
            problems.push("sandbox.output_limit_bytes: must be at least 1024".into());
        }
        if !self.rootfs.is_absolute() {
            problems.push(format!(
                "sandbox.rootfs: `{}` must be an absolute path",
                self.rootfs.display()
            ));
        }
        for (name, value) in &self.env {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                problems.push(format!("sandbox.env: `{name}` is not a variable name"));
            } else if value.contains('\0') {
                problems.push(format!("sandbox.env.{name}: contains a NUL byte"));
            }
        }
    }
}
