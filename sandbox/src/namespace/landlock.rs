//! Landlock's file-system rules for every exec, a layer beneath the
//! mounts: even a path the mounts got wrong is only readable, and only
//! `/workspace`, `/tmp`, `/dev` and the sandbox's own home are writable. Landlock also keeps a
//! command from tracing a process outside its domain (the sandbox's first
//! process, or another exec's), so no process escapes the filter and the
//! rules by being taken over.
//!
//! The ruleset is built once per sandbox on the host, from descriptors of
//! the sandbox's own directories (Landlock ties rules to inodes, whatever
//! path reaches them), and enforced by each exec's process once it is in
//! the sandbox, just before it runs the program.

use std::fs::File;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use landlock::{
    Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetError, ABI,
};

/// The newest ABI this code was written for; older kernels get what they
/// support (best effort), and doctor says which.
const ABI_WANTED: ABI = ABI::V10;

/// What the ruleset is built from: directories as the host opened them.
pub(crate) struct Places<'a> {
    pub rootfs: &'a Path,
    pub workspace: &'a File,
    /// The sandbox's own home, when it has one.
    pub home: Option<&'a File>,
    /// The sandbox's `/tmp`, `/dev` and `/proc`, through
    /// `/proc/<pid>/root` of its first process.
    pub inner_root: &'a Path,
}

/// The ruleset's descriptor, `None` when this kernel has no Landlock.
pub(crate) fn ruleset(places: &Places<'_>) -> Result<Option<OwnedFd>, String> {
    build(places).map_err(|e| format!("building the Landlock ruleset: {e}"))
}

fn build(places: &Places<'_>) -> Result<Option<OwnedFd>, BuildError> {
    let all = AccessFs::from_all(ABI_WANTED);
    let read_exec: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute;
    let read: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::ReadDir;
    let devices = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let open = |path: &Path| -> Result<File, BuildError> {
        File::options()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| BuildError::Open(path.display().to_string(), e))
    };
    let mut rules = vec![
        (open(places.rootfs)?, read_exec),
        (places.workspace.try_clone().map_err(BuildError::Dup)?, all),
        (open(&places.inner_root.join("tmp"))?, all),
        (open(&places.inner_root.join("dev"))?, devices),
        (open(&places.inner_root.join("proc"))?, read),
    ];
    if let Some(home) = places.home {
        rules.push((home.try_clone().map_err(BuildError::Dup)?, all));
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .create()?;
    for (dir, access) in rules {
        ruleset = ruleset.add_rule(PathBeneath::new(dir, access))?;
    }
    Ok(ruleset.into())
}

#[derive(Debug, thiserror::Error)]
enum BuildError {
    #[error("opening {0}: {1}")]
    Open(String, #[source] io::Error),
    #[error("duplicating the workspace's descriptor: {0}")]
    Dup(#[source] io::Error),
    #[error(transparent)]
    Ruleset(#[from] RulesetError),
}

/// Enforces the ruleset on the calling thread. Async-signal-safe: for
/// the time between fork and exec. `no_new_privs` must be set already.
pub(crate) fn restrict_self_raw(ruleset: RawFd) -> io::Result<()> {
    // SAFETY: a plain system call on a descriptor the caller holds.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The Landlock ABI this kernel speaks (0: none), for doctor.
pub(crate) fn kernel_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: the version query takes no pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    rc.max(0)
}
