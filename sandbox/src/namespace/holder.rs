//! The process that holds a sandbox's namespaces open: bubblewrap running
//! `sleep infinity` as the sandbox's first process. Execs enter its
//! namespaces; when it dies, the kernel kills everything in its pid
//! namespace and the mount namespace (with its `/tmp`) goes away.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc as std_mpsc;
use std::sync::OnceLock;

use super::identity::HostIdentity;
use super::seccomp;
use crate::spec::GUEST_HOME;
use crate::{SandboxError, SandboxSpec, GUEST_GID, GUEST_UID, WORKSPACE};

pub(crate) struct Holder {
    pub(crate) child: Child,
    /// The sandbox's first process as the host sees it: execs enter the
    /// namespaces of this pid.
    pub(crate) inner_pid: i32,
}

/// Descriptors bubblewrap finds open: its info pipe and the two seccomp
/// programs.
const INFO_FD: i32 = 3;
const SECCOMP_FDS: [i32; 2] = [4, 5];

/// Where bubblewrap finds the guest rootfs and the working copy. It runs
/// as the sandbox user and resolves its sources by path, so it needs a
/// path it may walk; the job directory is Forgehand's alone. So, in a
/// mount namespace of its own, before it drops root, bubblewrap's process
/// binds both (from descriptors Forgehand opened) onto a fresh tmpfs at
/// `/tmp`. Nobody else sees those mounts.
const STAGE: &str = "/tmp";
const STAGED_ROOTFS: &str = "/tmp/rootfs";
const STAGED_WORKSPACE: &str = "/tmp/workspace";
const STAGED_HOME: &str = "/tmp/home";

/// Kernel interfaces under `/proc` that container runtimes hide: files
/// (covered by an unreadable node), directories (covered by an empty,
/// read-only tmpfs) and what is bound read-only. Only those this kernel
/// has are covered: a mount needs something to cover.
pub const MASKED_FILES: &[&str] = &[
    "kcore",
    "keys",
    "key-users",
    "timer_list",
    "timer_stats",
    "sched_debug",
    "latency_stats",
    "slabinfo",
    "kallsyms",
    "kmsg",
    "vmallocinfo",
    "pagetypeinfo",
    "kpagecount",
    "kpageflags",
    "kpagecgroup",
    "sysrq-trigger",
];
pub const MASKED_DIRS: &[&str] = &["acpi", "scsi", "asound"];
pub const READ_ONLY: &[&str] = &["sys", "bus", "fs", "irq"];

/// The bubblewrap arguments of a sandbox. Everything is unshared (user,
/// pid, network, IPC, UTS, cgroup); only what is named here is mounted.
pub(crate) fn bwrap_args(spec: &SandboxSpec) -> Vec<std::ffi::OsString> {
    let exists = |name: &str| Path::new("/proc").join(name).exists();
    let mut args: Vec<String> = [
        "--unshare-all",
        // --unshare-all only tries the user namespace; it is required.
        "--unshare-user",
        // No further user namespace inside (a kernel-level limit, besides
        // the seccomp filter).
        "--disable-userns",
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
        "--ro-bind",
        STAGED_ROOTFS,
        "/",
        "--bind",
        STAGED_WORKSPACE,
        WORKSPACE,
        "--proc",
        "/proc",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if spec.home.is_some() {
        args.extend(["--bind".into(), STAGED_HOME.into(), GUEST_HOME.into()]);
    }
    for name in READ_ONLY.iter().filter(|n| exists(n)) {
        let path = format!("/proc/{name}");
        args.extend(["--ro-bind".into(), path.clone(), path]);
    }
    for name in MASKED_FILES.iter().filter(|n| exists(n)) {
        args.extend([
            "--ro-bind".into(),
            "/dev/null".into(),
            format!("/proc/{name}"),
        ]);
    }
    for name in MASKED_DIRS.iter().filter(|n| exists(n)) {
        let path = format!("/proc/{name}");
        args.extend(["--tmpfs".into(), path.clone(), "--remount-ro".into(), path]);
    }
    args.extend(["--dev".into(), "/dev".into()]);
    // /tmp (and HOME, which is /tmp) holds at most this much; its pages
    // count against the sandbox's memory limit as well.
    args.extend([
        "--size".into(),
        spec.limits.tmp_mib.saturating_mul(1 << 20).to_string(),
        "--tmpfs".into(),
        "/tmp".into(),
    ]);
    for fd in SECCOMP_FDS {
        args.extend(["--add-seccomp-fd".into(), fd.to_string()]);
    }
    args.extend([
        "--info-fd".into(),
        INFO_FD.to_string(),
        "--".into(),
        "sleep".into(),
        "infinity".into(),
    ]);
    args.into_iter().map(Into::into).collect()
}

/// Starts a holder. Runs on a thread that lives as long as the process:
/// bubblewrap's `--die-with-parent` follows the *thread* that started it,
/// and a tokio blocking thread would take the sandbox with it when it
/// retires.
pub(crate) async fn start(start: Start) -> Result<Holder, SandboxError> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    spawner()
        .send(Box::new(move || {
            let _ = reply.send(start_blocking(&start));
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

/// What a holder is started with.
pub(crate) struct Start {
    pub bwrap: PathBuf,
    pub spec: SandboxSpec,
    pub cgroup_join_files: Vec<PathBuf>,
    /// Whom bubblewrap runs as on the host (and so the guest user is).
    pub identity: HostIdentity,
    /// The working copy, opened by Forgehand.
    pub workspace: File,
    /// The home, when the sandbox has one of its own.
    pub home: Option<File>,
    /// `RLIMIT_NOFILE` for bubblewrap and the sandbox's first process.
    pub open_files: libc::rlimit,
}

fn start_blocking(start: &Start) -> Result<Holder, SandboxError> {
    let (info_read, info_write) = pipe()?;
    let join_files: Vec<CString> = start
        .cgroup_join_files
        .iter()
        .map(|p| CString::new(p.as_os_str().as_bytes()).expect("cgroup paths hold no NUL"))
        .collect();
    let seccomp = seccomp::memfds().map_err(SandboxError::io("loading the seccomp filter"))?;
    let rootfs = open_dir(&start.spec.rootfs).map_err(|e| SandboxError::Rootfs {
        path: start.spec.rootfs.clone(),
        problem: e.to_string(),
    })?;
    // Where each descriptor must be when bubblewrap starts.
    let moves = [
        (info_write.as_raw_fd(), INFO_FD),
        (seccomp[0].as_raw_fd(), SECCOMP_FDS[0]),
        (seccomp[1].as_raw_fd(), SECCOMP_FDS[1]),
    ];
    let stage = Stage::new(&rootfs, &start.workspace, start.home.as_ref()).map_err(
        SandboxError::io("copying the rootfs and working-copy mounts"),
    )?;
    let HostIdentity { uid, gid } = start.identity;
    let open_files = start.open_files;
    let mut command = Command::new(&start.bwrap);
    command
        .args(bwrap_args(&start.spec))
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (open, write, close, fcntl, dup2, set*id), on data prepared before
    // the fork.
    unsafe {
        command.pre_exec(move || {
            join_cgroups(&join_files)?;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &open_files) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The sandbox's first process should not be what the OOM
            // killer picks when a command inside hits the memory limit:
            // that would end the sandbox instead of the command. Best
            // effort: lowering it needs CAP_SYS_RESOURCE, which a
            // containerised host may lack.
            let _ = write_file(c"/proc/self/oom_score_adj", b"-1000");
            stage.mount()?;
            move_fds(&moves)?;
            become_user(uid, gid)
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| SandboxError::Start(format!("running {}: {e}", start.bwrap.display())))?;
    drop(info_write);
    let mut info = String::new();
    let read = std::fs::File::from(info_read).read_to_string(&mut info);
    let inner_pid = read
        .ok()
        .and_then(|_| serde_json::from_str::<serde_json::Value>(&info).ok())
        .and_then(|v| v.get("child-pid")?.as_i64())
        .map(|pid| pid as i32);
    match inner_pid {
        Some(inner_pid) if wait_until_set_up(inner_pid, &start.spec.rootfs) => {
            if let Err(problem) = limit_ptys(inner_pid).and_then(|()| limit_backlog(inner_pid)) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SandboxError::Start(format!(
                    "limiting the sandbox's terminals and accept queues: {problem}"
                )));
            }
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

/// The staging mounts (see [`STAGE`]): detached copies of the rootfs
/// and working-copy mounts, made before the fork (a bind from the host's
/// mount namespace into another is refused; a detached copy can be moved
/// into one).
struct Stage {
    rootfs: OwnedFd,
    workspace: OwnedFd,
    home: Option<OwnedFd>,
}

impl Stage {
    fn new(rootfs: &File, workspace: &File, home: Option<&File>) -> std::io::Result<Stage> {
        Ok(Stage {
            rootfs: detached_copy(rootfs)?,
            workspace: detached_copy(workspace)?,
            home: home.map(detached_copy).transpose()?,
        })
    }

    /// Async-signal-safe: system calls on descriptors and constants.
    fn mount(&self) -> std::io::Result<()> {
        let check = |rc: libc::c_long| {
            if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        };
        const MOVE_MOUNT_F_EMPTY_PATH: libc::c_long = 0x4;
        let stage = c"/tmp";
        debug_assert_eq!(stage.to_str(), Ok(STAGE));
        // SAFETY: plain system calls on NUL-terminated strings and
        // descriptors we hold.
        unsafe {
            check(libc::unshare(libc::CLONE_NEWNS).into())?;
            check(
                libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                )
                .into(),
            )?;
            check(
                libc::mount(
                    c"tmpfs".as_ptr(),
                    stage.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"mode=0755,size=64k".as_ptr().cast(),
                )
                .into(),
            )?;
            let trees = [
                (Some(&self.rootfs), c"/tmp/rootfs"),
                (Some(&self.workspace), c"/tmp/workspace"),
                (self.home.as_ref(), c"/tmp/home"),
            ];
            for (tree, target) in trees {
                let Some(tree) = tree else { continue };
                check(libc::mkdir(target.as_ptr(), 0o755).into())?;
                check(libc::syscall(
                    libc::SYS_move_mount,
                    tree.as_raw_fd(),
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    target.as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                ))?;
            }
        }
        Ok(())
    }
}

/// A detached copy of the mount at `dir` (`open_tree` with
/// `OPEN_TREE_CLONE`), gone when the descriptor is closed.
fn detached_copy(dir: &File) -> std::io::Result<OwnedFd> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    // SAFETY: a plain system call; the descriptor it returns is ours.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            dir.as_raw_fd(),
            c"".as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A directory as an `O_PATH` descriptor.
pub(crate) fn open_dir(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    File::options()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
}

/// Puts each descriptor at its place, without close-on-exec, whatever
/// the numbers were: first all of them out of the way, then into place.
/// Async-signal-safe.
fn move_fds(moves: &[(i32, i32)]) -> std::io::Result<()> {
    let mut parked = [0i32; 8];
    assert!(moves.len() <= parked.len());
    for (slot, &(from, _)) in parked.iter_mut().zip(moves) {
        // SAFETY: fcntl on a descriptor we hold.
        *slot = unsafe { libc::fcntl(from, libc::F_DUPFD_CLOEXEC, 64) };
        if *slot < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    for (&parked, &(_, to)) in parked.iter().zip(moves) {
        // SAFETY: dup2 onto a number we chose; the copy has no CLOEXEC.
        if unsafe { libc::dup2(parked, to) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Drops every privilege of root for `uid`/`gid`, no supplementary group
/// kept. Async-signal-safe.
pub(crate) fn become_user(uid: u32, gid: u32) -> std::io::Result<()> {
    // SAFETY: plain system calls.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(gid, gid, gid) != 0
            || libc::setresuid(uid, uid, uid) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
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

/// Pseudo-terminals one sandbox may hold. Its `/dev/pts` is an instance
/// of its own, but every instance draws on the host's `kernel.pty.max`
/// beyond the host's reserve: without a maximum of its own one sandbox
/// could take the terminals that other sandboxes and containers share.
pub const MAX_PTYS: u32 = 64;

/// Gives the sandbox's devpts instance (bubblewrap's `--dev`, mounted
/// `ptmxmode=0666,mode=620`) a maximum of [`MAX_PTYS`]: remounted from a
/// child that joins the sandbox's mount namespace (root on the host may
/// change mounts of a namespace it owns). Before the sandbox is handed
/// out, so no command of the agent's runs without it.
pub(crate) fn limit_ptys(pid: i32) -> std::io::Result<()> {
    let ns = File::open(format!("/proc/{pid}/ns/mnt"))?;
    let data = CString::new(format!("ptmxmode=0666,mode=620,max={MAX_PTYS}"))
        .expect("no NUL in the options");
    in_child(|| unsafe {
        if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNS) != 0 {
            return 1;
        }
        let rc = libc::mount(
            c"devpts".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_REMOUNT | libc::MS_NOSUID | libc::MS_NOEXEC,
            data.as_ptr().cast(),
        );
        if rc == 0 {
            0
        } else {
            2
        }
    })
    .map_err(|code| {
        std::io::Error::other(match code {
            1 => "joining the sandbox's mount namespace failed",
            _ => "remounting the sandbox's /dev/pts with a maximum failed",
        })
    })
}

/// The longest accept queue a listener in the sandbox may have
/// (`net.core.somaxconn` of its network namespace; the host's default is
/// 4,096). A connection waiting to be accepted is charged to no cgroup
/// until it is: a sandbox that listens and never accepts pinned 415 MiB
/// of host kernel memory with 25 listeners. The product with the open
/// files a sandbox may have still bounds it only loosely (see
/// docs/security.md).
pub const MAX_ACCEPT_BACKLOG: u32 = 16;

/// `net.ipv4.tcp_rmem` in the sandbox's network namespace: what a new
/// connection's receive buffer starts at (16 KiB, the host's being 128
/// KiB) is what a connection waiting to be accepted can hold of what its
/// client sent, uncharged; autotuning still grows an accepted one's up
/// to the maximum as it is read.
pub const TCP_RMEM: &str = "4096 16384 4194304";

/// `net.ipv4.tcp_wmem` likewise: a client that sends and closes leaves
/// an orphaned socket holding what it could not deliver.
pub const TCP_WMEM: &str = "4096 16384 4194304";

/// Sets `net.core.somaxconn` in the sandbox's network namespace to
/// [`MAX_ACCEPT_BACKLOG`], from a child that joins it (root on the host
/// may change a namespace's settings it owns; `/proc/sys/net` is the
/// namespace of whoever opens it). Before the sandbox is handed out.
pub(crate) fn limit_backlog(pid: i32) -> std::io::Result<()> {
    let ns = File::open(format!("/proc/{pid}/ns/net"))?;
    let settings: [(&std::ffi::CStr, String); 3] = [
        (
            c"/proc/sys/net/core/somaxconn",
            format!("{MAX_ACCEPT_BACKLOG}\n"),
        ),
        (c"/proc/sys/net/ipv4/tcp_rmem", format!("{TCP_RMEM}\n")),
        (c"/proc/sys/net/ipv4/tcp_wmem", format!("{TCP_WMEM}\n")),
    ];
    in_child(|| unsafe {
        if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
            return 1;
        }
        for (n, (path, value)) in settings.iter().enumerate() {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return 2 + n as i32;
            }
            let written = libc::write(fd, value.as_ptr().cast(), value.len());
            libc::close(fd);
            if written != value.len() as isize {
                return 2 + n as i32;
            }
        }
        0
    })
    .map_err(|code| {
        std::io::Error::other(match code {
            1 => "joining the sandbox's network namespace failed".to_owned(),
            2 => "setting net.core.somaxconn in the sandbox's network namespace failed".to_owned(),
            _ => "setting net.ipv4.tcp_rmem or tcp_wmem in the sandbox's network namespace failed"
                .to_owned(),
        })
    })
}

/// Runs `step` in a forked child and returns its exit code when not 0.
/// `step` must make only async-signal-safe calls on memory prepared
/// before the fork.
fn in_child(step: impl FnOnce() -> i32) -> Result<(), i32> {
    // SAFETY: the child runs `step` (async-signal-safe calls only, as
    // its callers promise) and leaves with _exit.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(-1);
    }
    if child == 0 {
        let code = step();
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    while unsafe { libc::waitpid(child, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err(-1);
        }
    }
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(()),
        Some(code) => Err(code),
        None => Err(-1),
    }
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

    fn args_of(spec: &SandboxSpec) -> Vec<String> {
        bwrap_args(spec)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn everything_is_unshared_and_only_the_two_given_directories_are_mounted() {
        let mut spec = SandboxSpec {
            rootfs: "/images/root".into(),
            workspace: "/jobs/42".into(),
            home: None,
            handover: Default::default(),
            env: Default::default(),
            limits: Default::default(),
        };
        assert!(!args_of(&spec).join(" ").contains("/home/agent"));
        spec.home = Some("/envs/k/home".into());
        let args = args_of(&spec);
        let joined = args.join(" ");
        assert!(joined.starts_with(
            "--unshare-all --unshare-user --disable-userns --die-with-parent --new-session --cap-drop ALL --uid 1000 --gid 1000"
        ));
        // All from the staging mounts: the sandbox user needs no path
        // to any.
        assert!(joined
            .contains("--ro-bind /tmp/rootfs / --bind /tmp/workspace /workspace --proc /proc"));
        assert!(joined.contains("--bind /tmp/home /home/agent"), "{joined}");
        assert!(!joined.contains("--share-net"));
        assert!(
            !args.iter().any(|a| a.starts_with("/images")
                || a.starts_with("/jobs")
                || a.starts_with("/envs")),
            "{args:?}"
        );
        // What else is mounted comes from /dev and /proc only: masks.
        for (i, a) in args.iter().enumerate() {
            if matches!(a.as_str(), "--ro-bind" | "--bind" | "--dev-bind") {
                let source = &args[i + 1];
                assert!(
                    source == "/dev/null"
                        || source.starts_with("/proc/")
                        || [STAGED_ROOTFS, STAGED_WORKSPACE, STAGED_HOME]
                            .contains(&source.as_str()),
                    "{a} {source}"
                );
            }
        }
        assert!(joined.contains("--ro-bind /proc/sys /proc/sys"), "{joined}");
        assert!(
            joined.contains("--ro-bind /dev/null /proc/keys"),
            "{joined}"
        );
        assert!(joined.contains(&format!("--size {} --tmpfs /tmp", 1024u64 << 20)));
        assert!(joined.contains("--add-seccomp-fd 4 --add-seccomp-fd 5"));
        // Nothing of the host's environment is handed in: bwrap runs with
        // env_clear(), and no --setenv carries a value from here.
        assert!(!args.iter().any(|a| a == "--setenv"));
    }
}
