//! Forgehand inside a container: what the sandbox backends need from the
//! container runtime, and, when it is missing, which run flags give it
//! (the same `bash deploy/image.sh flags` prints). `forgehand serve`
//! refuses to start rather than fall back to weaker isolation, and says
//! this.

use std::ffi::CString;
use std::path::Path;

use forgehand_sandbox::BackendChoice;

use crate::config::SandboxConfig;

/// The flags of `deploy/image.sh flags --backend namespace`.
pub const NAMESPACE_FLAGS: &str = "--privileged --cgroupns=private";
/// The flags of `deploy/image.sh flags --backend microvm`.
pub const MICROVM_FLAGS: &str = "--device=/dev/kvm";

/// Whether this process runs in a container (podman's and docker's marks,
/// or the `container` variable systemd-style runtimes set).
pub fn inside() -> bool {
    Path::new("/run/.containerenv").exists()
        || Path::new("/.dockerenv").exists()
        || std::env::var_os("container").is_some()
}

/// What the configured backend lacks here and which flags give it; empty
/// outside a container, or when nothing is missing.
pub fn hints(config: &SandboxConfig) -> Vec<String> {
    if !inside() {
        return Vec::new();
    }
    let mut hints = Vec::new();
    let namespace = matches!(
        config.backend,
        BackendChoice::Namespace | BackendChoice::Auto
    );
    if namespace {
        let missing = namespace_missing(config.disk_mib > 0);
        if !missing.is_empty() {
            hints.push(format!(
                "inside a container, the namespace backend needs the run flags `bash deploy/image.sh flags --backend namespace` prints ({NAMESPACE_FLAGS}); missing here: {}",
                missing.join("; ")
            ));
        }
    }
    let microvm = matches!(config.backend, BackendChoice::Microvm | BackendChoice::Auto);
    if microvm && !Path::new("/dev/kvm").exists() {
        hints.push(format!(
            "inside a container, the microvm backend needs {MICROVM_FLAGS} (`bash deploy/image.sh flags --backend microvm`)"
        ));
    }
    hints
}

fn namespace_missing(loop_devices: bool) -> Vec<String> {
    let mut missing = Vec::new();
    let cgroup = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "/sys/fs/cgroup"
    } else {
        "/sys/fs/cgroup/memory"
    };
    if !writable(cgroup) {
        missing.push(format!("a writable cgroup tree ({cgroup} is read-only)"));
    }
    let masked = masked_proc();
    if !masked.is_empty() {
        missing.push(format!(
            "an unmasked /proc (the runtime covers {}: the kernel then refuses the sandbox its own /proc)",
            masked.join(", ")
        ));
    }
    if loop_devices && !Path::new("/dev/loop-control").exists() {
        missing.push("loop devices for the working copies' file systems (/dev/loop-control; or sandbox.disk_mib = 0 for no size limit)".into());
    }
    missing
}

fn writable(path: &str) -> bool {
    let Ok(c) = CString::new(path) else {
        return false;
    };
    // SAFETY: a NUL-terminated path; access(2) only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Mount points beneath /proc: how runtimes mask parts of it.
fn masked_proc() -> Vec<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut masked: Vec<String> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with("/proc/"))
        .map(str::to_owned)
        .collect();
    masked.sort();
    masked.dedup();
    if masked.len() > 3 {
        let more = masked.len() - 3;
        masked.truncate(3);
        masked.push(format!("{more} more"));
    }
    masked
}
