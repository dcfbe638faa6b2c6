//! What the namespace backend cannot bound per sandbox, and says so: two
//! kernel resources are one for the whole host, and whether a sandbox
//! can take too much of them depends on the host's settings.
//!
//! - Open files held by memory mappings: a file mapped and then closed
//!   stays open without a descriptor, so `RLIMIT_NOFILE` does not count
//!   it; only the memory limit does (each costs kernel memory charged to
//!   the sandbox: about 2,400 files per MiB, measured). Past
//!   `fs.file-max`, every unprivileged process on the host fails to open
//!   files. systemd raises `fs.file-max` to its maximum at boot; a host
//!   without it keeps the kernel's default (about one per 10 KiB of RAM).
//! - Socket buffers on cgroup v1: the kernel charges each socket a
//!   minimum it never refuses, outside the memory limit and past
//!   `memory.kmem.tcp.limit_in_bytes` (measured: a 256 MiB sandbox held
//!   750 MB of TCP buffers). On cgroup v2 those charges count against the
//!   sandbox's memory.

use super::cgroup::Hierarchy;

/// Open files a sandbox's memory can hold through mappings, per MiB (the
/// measured ~2,400, rounded up).
pub const FILES_PER_MIB: u64 = 2_500;

/// Warnings for the host Forgehand runs on, for sandboxes of
/// `memory_mib`: empty when neither resource can be exhausted.
pub fn host_warnings(memory_mib: u64) -> Vec<String> {
    let mut warnings = Vec::new();
    let file_max = std::fs::read_to_string("/proc/sys/fs/file-max")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok());
    if let Some(warning) = file_table_warning(file_max, memory_mib) {
        warnings.push(warning);
    }
    if matches!(Hierarchy::detect(), Ok(Hierarchy::V1 { .. })) {
        warnings.push(
            "cgroup v1: each socket's minimum buffer charge escapes the sandbox's memory limit (a 256 MiB sandbox held 750 MB of TCP buffers); boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1), where it counts against memory".into(),
        );
    }
    warnings
}

fn file_table_warning(file_max: Option<u64>, memory_mib: u64) -> Option<String> {
    let file_max = file_max?;
    let holdable = memory_mib.saturating_mul(FILES_PER_MIB);
    (holdable > file_max / 4).then(|| {
        format!(
            "fs.file-max is {file_max}: a sandbox of {memory_mib} MiB can hold about {holdable} open files through memory mappings (no descriptor limit counts them), more than a quarter of the host's table; raise it (sysctl -w fs.file-max=9223372036854775807, what systemd sets at boot)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_a_sandbox_could_fill_is_named() {
        // This machine's: the kernel's default for 24 GiB.
        let warning = file_table_warning(Some(2_466_165), 2048).unwrap();
        assert!(
            warning.starts_with(
                "fs.file-max is 2466165: a sandbox of 2048 MiB can hold about 5120000"
            ),
            "{warning}"
        );
        // What systemd sets.
        assert_eq!(file_table_warning(Some(i64::MAX as u64), 2048), None);
        assert_eq!(file_table_warning(None, 2048), None);
    }
}
