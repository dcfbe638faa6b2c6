//! The process that holds a sandbox's namespaces open: bubblewrap running
//! `sleep infinity` as the sandbox's first process. Execs enter its
//! namespaces; when it dies, the kernel kills everything in its pid
//! namespace and the mount namespace (with its `/tmp`) goes away.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc as std_mpsc;
use std::sync::OnceLock;

use crate::{SandboxError, SandboxSpec, GUEST_GID, GUEST_UID, WORKSPACE};

pub(crate) struct Holder {
    pub(crate) child: Child,
    /// The sandbox's first process as the host sees it: execs enter the
    /// namespaces of this pid.
    pub(crate) inner_pid: i32,
}

/// The bubblewrap arguments of a sandbox. Everything is unshared (user,
/// pid, network, IPC, UTS, cgroup); only what is named here is mounted.
pub(crate) fn bwrap_args(spec: &SandboxSpec) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    let mut push = |a: &str| args.push(a.into());
    for a in [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        &GUEST_UID.to_string(),
        "--gid",
        &GUEST_GID.to_string(),
        "--hostname",
        "sandbox",
    ] {
        push(a);
    }
    args.push("--ro-bind".into());
    args.push(spec.rootfs.as_os_str().to_owned());
    args.push("/".into());
    args.push("--bind".into());
    args.push(spec.workspace.as_os_str().to_owned());
    args.push(WORKSPACE.into());
    for a in [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--info-fd",
        "3",
        "--",
        "sleep",
        "infinity",
    ] {
        args.push(a.into());
    }
    args
}

/// Starts a holder. Runs on a thread that lives as long as the process:
/// bubblewrap's `--die-with-parent` follows the *thread* that started it,
/// and a tokio blocking thread would take the sandbox with it when it
/// retires.
pub(crate) async fn start(
    bwrap: PathBuf,
    spec: SandboxSpec,
    cgroup_join_files: Vec<PathBuf>,
) -> Result<Holder, SandboxError> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    spawner()
        .send(Box::new(move || {
            let _ = reply.send(start_blocking(&bwrap, &spec, &cgroup_join_files));
        }))
        .map_err(|_| SandboxError::Internal("the sandbox spawner thread is gone".into()))?;
    answer
        .await
        .map_err(|_| SandboxError::Internal("the sandbox spawner thread is gone".into()))?
}

type Job = Box<dyn FnOnce() + Send>;

fn spawner() -> std_mpsc::Sender<Job> {
    static SPAWNER: OnceLock<std_mpsc::Sender<Job>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = std_mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("forgehand-sandbox-spawner".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .expect("the sandbox spawner thread starts");
            tx
        })
        .clone()
}

fn start_blocking(
    bwrap: &Path,
    spec: &SandboxSpec,
    cgroup_join_files: &[PathBuf],
) -> Result<Holder, SandboxError> {
    let (info_read, info_write) = pipe()?;
    let join_files: Vec<CString> = cgroup_join_files
        .iter()
        .map(|p| CString::new(p.as_os_str().as_bytes()).expect("cgroup paths hold no NUL"))
        .collect();
    let info_fd = info_write.as_raw_fd();
    let mut command = Command::new(bwrap);
    command
        .args(bwrap_args(spec))
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (open, write, close, dup2, fcntl), on data prepared before the fork.
    unsafe {
        command.pre_exec(move || {
            join_cgroups(&join_files)?;
            // The sandbox's first process should not be what the OOM
            // killer picks when a command inside hits the memory limit:
            // that would end the sandbox instead of the command. Best
            // effort: lowering it needs CAP_SYS_RESOURCE, which a
            // containerised host may lack.
            let _ = write_file(c"/proc/self/oom_score_adj", b"-1000");
            if info_fd == 3 {
                let flags = libc::fcntl(3, libc::F_GETFD);
                libc::fcntl(3, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            } else if libc::dup2(info_fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| SandboxError::Start(format!("running {}: {e}", bwrap.display())))?;
    drop(info_write);
    let mut info = String::new();
    let read = std::fs::File::from(info_read).read_to_string(&mut info);
    let inner_pid = read
        .ok()
        .and_then(|_| serde_json::from_str::<serde_json::Value>(&info).ok())
        .and_then(|v| v.get("child-pid")?.as_i64())
        .map(|pid| pid as i32);
    match inner_pid {
        Some(inner_pid) if wait_until_set_up(inner_pid, &spec.rootfs) => {
            Ok(Holder { child, inner_pid })
        }
        _ => {
            let _ = child.kill();
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut stderr);
            }
            let _ = child.wait();
            Err(SandboxError::Start(format!(
                "bubblewrap did not start the sandbox: {}",
                stderr.trim().lines().last().unwrap_or("no message")
            )))
        }
    }
}

/// bubblewrap reports the sandbox's pid before it has finished setting
/// it up: an exec entering too early would see the host's root, or a
/// user namespace in which the guest user does not exist yet (bubblewrap
/// makes a second one, mapping the guest uid, after the new root). Waits
/// until the process's root is the guest rootfs (a bind mount has the
/// same device and inode as its source) and its user namespace maps the
/// guest uid.
fn wait_until_set_up(pid: i32, rootfs: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(want) = std::fs::metadata(rootfs) else {
        return false;
    };
    let set_up = || -> Option<bool> {
        let root = std::fs::metadata(format!("/proc/{pid}/root/")).ok()?;
        let uid_map = std::fs::read_to_string(format!("/proc/{pid}/uid_map")).ok()?;
        let maps_guest = uid_map
            .lines()
            .any(|l| l.split_whitespace().next() == Some(&GUEST_UID.to_string()));
        Some(root.dev() == want.dev() && root.ino() == want.ino() && maps_guest)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        match set_up() {
            Some(true) => return true,
            Some(false) => std::thread::sleep(std::time::Duration::from_micros(200)),
            // Gone: bubblewrap failed.
            None => return false,
        }
    }
    false
}

/// Writes "0" (this process) into each `cgroup.procs`. Async-signal-safe.
pub(crate) fn join_cgroups(files: &[CString]) -> std::io::Result<()> {
    for file in files {
        write_file(file, b"0")?;
    }
    Ok(())
}

fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: plain syscalls on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        if written < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors, which we then own.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(SandboxError::io("creating a pipe")(
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: both are fresh descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_is_unshared_and_only_two_host_paths_are_mounted() {
        let spec = SandboxSpec {
            rootfs: "/images/root".into(),
            workspace: "/jobs/42".into(),
            env: Default::default(),
            limits: Default::default(),
        };
        let args: Vec<String> = bwrap_args(&spec)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let joined = args.join(" ");
        assert!(joined.starts_with(
            "--unshare-all --die-with-parent --new-session --cap-drop ALL --uid 1000 --gid 1000"
        ));
        assert!(joined.contains("--ro-bind /images/root / --bind /jobs/42 /workspace"));
        assert!(!joined.contains("--share-net"));
        let host_paths: Vec<&String> = args
            .iter()
            .filter(|a| a.starts_with("/images") || a.starts_with("/jobs"))
            .collect();
        assert_eq!(host_paths.len(), 2, "{args:?}");
        // Nothing of the host's environment is handed in: bwrap runs with
        // env_clear(), and no --setenv carries a value from here.
        assert!(!args.iter().any(|a| a == "--setenv"));
    }
}
