//! The namespace backend: bubblewrap makes fresh user, pid, network, IPC,
//! UTS, cgroup and mount namespaces around a read-only guest root, with
//! the working copy read-write at `/workspace`, a private `/tmp` and no
//! network but `lo`. Each exec enters those namespaces (as `nsenter`
//! would, see `enter`) as
//! the unprivileged guest user, inside a cgroup that holds the limits.
//! The kernel is the host's: that is weaker isolation than a microVM, and
//! Forgehand says so wherever it is used.

mod cgroup;
mod enter;
mod holder;
mod host_tables;
pub mod identity;
mod landlock;
pub(crate) mod open_files;
pub mod seccomp;

pub use holder::{MASKED_DIRS, MASKED_FILES, MAX_ACCEPT_BACKLOG, MAX_PTYS, READ_ONLY, TCP_RMEM};
pub use host_tables::host_warnings;
pub use identity::{HostIdentity, DEFAULT_HOST_USER};

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, watch};

use crate::output::pump;
use crate::spec::{base_env, Handover, GUEST_HOME};
use crate::{
    Backend, ExecOutput, ExecRequest, ExecStream, ExitStatus, Isolation, OutputChunk, Readiness,
    Sandbox, SandboxError, SandboxSpec, Stream, OUTPUT_GRACE, WORKSPACE,
};
use cgroup::{ExecCgroup, Hierarchy, SandboxCgroup};

#[derive(Debug, Clone)]
pub struct NamespaceBackend {
    bwrap: PathBuf,
    /// The host user sandboxes run as: a name or `uid:gid`.
    host_user: String,
}

impl Default for NamespaceBackend {
    fn default() -> Self {
        NamespaceBackend::new("bwrap")
    }
}

impl NamespaceBackend {
    pub fn new(bwrap: impl Into<PathBuf>) -> Self {
        NamespaceBackend {
            bwrap: bwrap.into(),
            host_user: DEFAULT_HOST_USER.into(),
        }
    }

    /// Sandboxes run as this host user (a name, or `uid:gid`).
    pub fn with_host_user(mut self, user: impl Into<String>) -> Self {
        self.host_user = user.into();
        self
    }

    fn identity(&self) -> Result<HostIdentity, SandboxError> {
        HostIdentity::resolve(&self.host_user).map_err(Self::unavailable)
    }

    fn unavailable(reason: impl Into<String>) -> SandboxError {
        SandboxError::Unavailable {
            backend: "namespace",
            reason: reason.into(),
        }
    }

    fn hierarchy() -> Result<Hierarchy, SandboxError> {
        Hierarchy::detect().map_err(Self::unavailable)
    }
}

#[async_trait]
impl Backend for NamespaceBackend {
    fn name(&self) -> &'static str {
        "namespace"
    }

    fn isolation(&self) -> Isolation {
        Isolation::SharedKernel
    }

    async fn readiness(&self) -> Readiness {
        let (bwrap, user) = (self.bwrap.clone(), self.host_user.clone());
        tokio::task::spawn_blocking(move || check_tools(&bwrap, &user))
            .await
            .unwrap_or_else(|e| Readiness::Unusable(format!("the check failed: {e}")))
    }

    async fn create(&self, mut spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        check_dirs(&spec)?;
        if spec.home.is_some() {
            spec.env.insert("HOME".into(), GUEST_HOME.into());
        }
        let identity = self.identity()?;
        let hierarchy = Self::hierarchy()?;
        let id = crate::owner::sandbox_name();
        let limits = spec.limits.clone();
        let (group, workspace, home, give_back) = {
            let (hierarchy, id, spec) = (hierarchy.clone(), id.clone(), spec.clone());
            tokio::task::spawn_blocking(move || {
                let group = hierarchy.create(&id, &limits)?;
                match hand_over(&spec, identity) {
                    Ok((workspace, home, give_back)) => Ok((group, workspace, home, give_back)),
                    Err(error) => {
                        group.remove();
                        Err(error)
                    }
                }
            })
            .await
            .map_err(|e| SandboxError::Internal(e.to_string()))??
        };
        let give_back_all = |group: SandboxCgroup| {
            group.remove();
            take_back(&give_back);
        };
        let nofile = open_files::rlimit(spec.limits.max_pids);
        let started = holder::start(holder::Start {
            bwrap: self.bwrap.clone(),
            spec: spec.clone(),
            cgroup_join_files: group.join_files(),
            identity,
            workspace: workspace
                .try_clone()
                .map_err(SandboxError::io("the working copy"))?,
            home: home
                .as_ref()
                .map(File::try_clone)
                .transpose()
                .map_err(SandboxError::io("the home"))?,
            open_files: nofile,
        })
        .await;
        let holder = match started {
            Ok(holder) => holder,
            Err(error) => {
                give_back_all(group);
                return Err(error);
            }
        };
        let places = landlock::Places {
            rootfs: &spec.rootfs,
            workspace: &workspace,
            home: home.as_ref(),
            inner_root: &PathBuf::from(format!("/proc/{}/root", holder.inner_pid)),
        };
        let ruleset = match landlock::ruleset(&places) {
            Ok(ruleset) => ruleset,
            Err(problem) => {
                let mut child = holder.child;
                let _ = child.kill();
                let _ = child.wait();
                give_back_all(group);
                return Err(SandboxError::Start(problem));
            }
        };
        let enter_cgroup_ns = differs_from_ours(holder.inner_pid, "cgroup");
        tracing::debug!(sandbox = %id, pid = holder.inner_pid, uid = identity.uid, "sandbox started");
        Ok(Box::new(NamespaceSandbox {
            inner: Arc::new(Inner {
                id,
                spec,
                inner_pid: holder.inner_pid,
                enter_cgroup_ns,
                holder: Mutex::new(Some(holder.child)),
                group: Arc::new(group),
                give_back,
                landlock: ruleset,
                open_files: nofile,
                execs: AtomicU64::new(0),
                destroyed: AtomicBool::new(false),
            }),
        }))
    }

    async fn prepare_for_sandbox(&self, dir: &Path) -> Result<(), SandboxError> {
        let identity = self.identity()?;
        let dir = dir.to_owned();
        tokio::task::spawn_blocking(move || {
            identity::give(&dir, identity).map_err(|e| SandboxError::Workspace {
                path: dir.clone(),
                problem: format!("cannot give it to the sandbox user: {e}"),
            })
        })
        .await
        .map_err(|e| SandboxError::Internal(e.to_string()))?
    }

    async fn remove_leftovers(&self) -> Result<usize, SandboxError> {
        let hierarchy = Self::hierarchy()?;
        tokio::task::spawn_blocking(move || {
            let leftovers = hierarchy.leftovers();
            for group in &leftovers {
                tracing::warn!(sandbox = %group.name(), "removing a sandbox left behind by a process that died");
                group.remove();
            }
            leftovers.len()
        })
        .await
        .map_err(|e| SandboxError::Internal(e.to_string()))
    }
}

/// A live sandbox; destroyed when dropped.
pub struct NamespaceSandbox {
    inner: Arc<Inner>,
}

/// What a sandbox's tasks share. Destroying is the [`NamespaceSandbox`]'s
/// business; a spawned exec only holds this.
struct Inner {
    id: String,
    spec: SandboxSpec,
    inner_pid: i32,
    enter_cgroup_ns: bool,
    holder: Mutex<Option<std::process::Child>>,
    group: Arc<SandboxCgroup>,
    /// What goes back to whom once the sandbox is gone: the working copy
    /// (and home) to their owners, or the prepared writable layers to
    /// Forgehand's user.
    give_back: Vec<(PathBuf, identity::Owner)>,
    /// Enforced on every exec; `None` on a kernel without Landlock.
    landlock: Option<OwnedFd>,
    /// Each process's `RLIMIT_NOFILE` (see the open_files module).
    open_files: libc::rlimit,
    execs: AtomicU64,
    destroyed: AtomicBool,
}

/// Kills an exec's process tree if the exec is abandoned midway (its
/// future dropped: the job was cancelled).
struct ExecGuard {
    group: Option<ExecCgroup>,
}

impl Drop for ExecGuard {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            group.kill_all();
            group.remove_if_empty();
        }
    }
}

impl Inner {
    async fn run(
        self: Arc<Self>,
        request: ExecRequest,
        chunks: Option<mpsc::Sender<OutputChunk>>,
    ) -> Result<ExecOutput, SandboxError> {
        let workdir = request.validate()?.to_owned();
        if self.destroyed.load(Ordering::SeqCst) {
            return Err(SandboxError::Destroyed);
        }
        let limits = &self.spec.limits;
        let timeout = request
            .timeout
            .unwrap_or(limits.timeout)
            .min(limits.timeout);
        let n = self.execs.fetch_add(1, Ordering::SeqCst);
        let group = self.group.exec_group(&format!("exec-{n}"))?;
        let join_files = enter::c_paths(&group.join_files);
        let mut guard = ExecGuard { group: Some(group) };
        let limit_hits_before = self.group.limit_hits();

        let mut env = self.spec.env.clone();
        env.extend(request.env.clone());
        let entry = enter::Entry::open(
            self.inner_pid,
            self.enter_cgroup_ns,
            &workdir,
            &request.argv[0],
            env.get("PATH").map_or("", String::as_str),
            join_files,
            enter::Confinement {
                landlock: self.landlock.as_ref().map(|fd| fd.as_raw_fd()),
                open_files: self.open_files,
            },
        )
        .map_err(|e| {
            if self.destroyed.load(Ordering::SeqCst) {
                SandboxError::Destroyed
            } else {
                SandboxError::io("entering the sandbox")(e)
            }
        })?;
        let mut command = tokio::process::Command::new(&request.argv[0]);
        command
            .args(&request.argv[1..])
            .env_clear()
            .envs(&env)
            .stdin(if request.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // SAFETY: `enter` makes only async-signal-safe system calls on
        // what `Entry::open` prepared (see the enter module).
        unsafe {
            command.pre_exec(move || entry.enter());
        }
        let started = Instant::now();
        let mut child = command
            .spawn()
            .map_err(SandboxError::io("starting the command in the sandbox"))?;
        if let (Some(bytes), Some(mut stdin)) = (request.stdin, child.stdin.take()) {
            tokio::spawn(async move {
                let _ = stdin.write_all(&bytes).await;
            });
        }
        let (stop_tx, stop) = watch::channel(false);
        let cap = limits.output_limit_bytes;
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let out = tokio::spawn(pump(
            stdout,
            Stream::Stdout,
            cap,
            chunks.clone(),
            stop.clone(),
        ));
        let err = tokio::spawn(pump(stderr, Stream::Stderr, cap, chunks, stop));

        let status = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(Ok(status)) => match (status.code(), status.signal()) {
                (Some(code), _) => ExitStatus::Exited(code),
                (None, Some(signal)) => ExitStatus::Signaled(signal),
                (None, None) => ExitStatus::Exited(-1),
            },
            Ok(Err(error)) => return Err(SandboxError::io("waiting for the command")(error)),
            Err(_) => {
                let group = guard.group.take().expect("the guard holds the group");
                let group = tokio::task::spawn_blocking(move || {
                    group.kill_all();
                    group
                })
                .await
                .map_err(|e| SandboxError::Internal(e.to_string()))?;
                // Our child is in the group: reaped here, or
                // the group would never be released.
                let _ = child.wait().await;
                tokio::task::spawn_blocking(move || {
                    if !group.wait_until_released(Duration::from_secs(5)) {
                        tracing::warn!("killed processes still count against the process limit");
                    }
                    group.remove_if_empty();
                })
                .await
                .map_err(|e| SandboxError::Internal(e.to_string()))?;
                ExitStatus::TimedOut
            }
        };
        let duration = started.elapsed();
        let pumps = async { (out.await, err.await) };
        tokio::pin!(pumps);
        let (stdout, stderr) = tokio::select! {
            done = &mut pumps => done,
            _ = tokio::time::sleep(OUTPUT_GRACE) => {
                let _ = stop_tx.send(true);
                pumps.await
            }
        };
        let internal = |e: tokio::task::JoinError| SandboxError::Internal(e.to_string());
        let mut stderr = stderr.map_err(internal)?;
        if let Some(group) = guard.group.take() {
            if group.is_empty() {
                group.remove_if_empty();
            } else if group.limit_hits() > 0 || self.group.limit_hits() > limit_hits_before {
                // What a command leaves running usually keeps running (a
                // dev server); what a command that hit the process limit
                // leaves is a fork bomb, which would leave the sandbox
                // unable to start anything else.
                tokio::task::spawn_blocking(move || {
                    group.kill_all();
                    group.wait_until_released(Duration::from_secs(5));
                    group.remove_if_empty();
                })
                .await
                .map_err(internal)?;
                stderr.append_note(
                    b"\n[forgehand: the process limit was reached; the processes this command left running were killed]\n",
                );
            }
            // Otherwise background processes keep running, and the group
            // stays for them.
        }
        Ok(ExecOutput {
            status,
            stdout: stdout.map_err(internal)?,
            stderr,
            duration,
        })
    }

    fn destroy_blocking(&self) {
        if self.destroyed.swap(true, Ordering::SeqCst) {
            return;
        }
        // The holder's death ends the pid namespace: the kernel kills
        // every process in it. Then the groups catch anything else.
        if let Some(mut child) = self.holder.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.group.remove();
        // Every process is gone: the trees are the host's again.
        take_back(&self.give_back);
        tracing::debug!(sandbox = %self.id, "sandbox destroyed");
    }
}

#[async_trait]
impl Sandbox for NamespaceSandbox {
    fn id(&self) -> &str {
        &self.inner.id
    }

    fn isolation(&self) -> Isolation {
        Isolation::SharedKernel
    }

    async fn exec(&self, request: ExecRequest) -> Result<ExecOutput, SandboxError> {
        self.inner.clone().run(request, None).await
    }

    async fn exec_stream(&self, request: ExecRequest) -> Result<ExecStream, SandboxError> {
        // Refused before anything starts, like `exec`.
        request.validate()?;
        let inner = self.inner.clone();
        Ok(ExecStream::spawn(|tx| inner.run(request, Some(tx))))
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.destroy_blocking())
            .await
            .map_err(|e| SandboxError::Internal(e.to_string()))
    }

    async fn listen_inside(&self, port: u16) -> Result<std::net::TcpListener, SandboxError> {
        if self.inner.destroyed.load(Ordering::SeqCst) {
            return Err(SandboxError::Destroyed);
        }
        let pid = self.inner.inner_pid;
        tokio::task::spawn_blocking(move || listen_in_netns(pid, port))
            .await
            .map_err(|e| SandboxError::Internal(e.to_string()))?
            .map_err(SandboxError::io("opening a door into the sandbox"))
    }
}

/// Binds `127.0.0.1:port` in the network namespace of process `pid`, from
/// a thread of its own that enters that namespace and then ends: a socket
/// stays in the namespace it was made in, and no other thread of
/// Forgehand ever leaves the host's.
fn listen_in_netns(pid: i32, port: u16) -> std::io::Result<std::net::TcpListener> {
    let netns = File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::Builder::new()
        .name("forgehand-netns-door".into())
        .spawn(move || {
            // SAFETY: setns on a descriptor we hold; it changes this
            // thread's namespace only, and the thread ends right after.
            if unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
            listener.set_nonblocking(true)?;
            Ok(listener)
        })?
        .join()
        .map_err(|_| std::io::Error::other("the door thread panicked"))?
}

impl Drop for NamespaceSandbox {
    fn drop(&mut self) {
        self.inner.destroy_blocking();
    }
}

/// Tools and kernel features the backend needs, checked by running them.
fn check_tools(bwrap: &Path, host_user: &str) -> Readiness {
    let identity = match HostIdentity::resolve(host_user) {
        Ok(identity) => identity,
        Err(reason) => return Readiness::Unusable(reason),
    };
    let runs = |program: &Path, args: &[&str]| {
        std::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
    };
    match runs(bwrap, &["--version"]) {
        Ok(out) if out.status.success() => {}
        _ => {
            return Readiness::Unusable(format!(
                "bubblewrap ({}) is not installed: apt-get install bubblewrap",
                bwrap.display()
            ))
        }
    }
    // Namespaces can be forbidden (a container without user namespaces,
    // kernel.unprivileged_userns_clone=0, an AppArmor rule): try one.
    match runs(
        bwrap,
        &["--unshare-all", "--ro-bind", "/", "/", "--", "true"],
    ) {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            return Readiness::Unusable(format!(
                "bubblewrap cannot create namespaces here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
        Err(e) => return Readiness::Unusable(format!("running bubblewrap: {e}")),
    }
    let hierarchy = match Hierarchy::detect() {
        Ok(h) => h,
        Err(reason) => {
            return Readiness::Unusable(format!("no usable cgroups for limits: {reason}"))
        }
    };
    if let Err(error) = hierarchy.prepare() {
        return Readiness::Unusable(format!(
            "cannot create cgroups for limits ({error}); run as root, or under systemd with Delegate=yes"
        ));
    }
    let landlock = match landlock::kernel_abi() {
        0 => "no Landlock (this kernel lacks it)".to_owned(),
        abi => format!("Landlock ABI {abi}"),
    };
    Readiness::Usable(format!(
        "bubblewrap namespaces as host user {host_user} (uid {} gid {}), seccomp filter, {landlock}, limits through {}",
        identity.uid,
        identity.gid,
        hierarchy.describe()
    ))
}

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
    if !spec.rootfs.join("bin/sh").exists() {
        return Err(rootfs_problem("it has no /bin/sh"));
    }
    for dir in std::iter::once(&spec.workspace).chain(spec.home.as_ref()) {
        if !dir.is_dir() {
            return Err(SandboxError::Workspace {
                path: dir.clone(),
                problem: "no such directory".into(),
            });
        }
    }
    if spec.home.is_some()
        && !spec
            .rootfs
            .join(GUEST_HOME.trim_start_matches('/'))
            .is_dir()
    {
        return Err(rootfs_problem(
            "it has no /home/agent directory to mount the sandbox's home on",
        ));
    }
    Ok(())
}

/// Makes what the sandbox writes to its user's: with
/// [`Handover::Chown`], the working copy and the home (every file); with
/// [`Handover::Prepared`], nothing (the caller did). Returns the
/// directories opened for the sandbox, and what goes back to whom after.
fn hand_over(spec: &SandboxSpec, identity: HostIdentity) -> Result<Handed, SandboxError> {
    let open = |path: &Path| {
        holder::open_dir(path).map_err(|e| SandboxError::Workspace {
            path: path.to_owned(),
            problem: e.to_string(),
        })
    };
    let workspace = open(&spec.workspace)?;
    let home = spec.home.as_deref().map(open).transpose()?;
    let mut give_back = Vec::new();
    match &spec.handover {
        Handover::Chown => {
            for dir in std::iter::once(&spec.workspace).chain(spec.home.as_ref()) {
                match identity::hand_over(dir, identity) {
                    Ok(owner) => give_back.push((dir.clone(), owner)),
                    Err(problem) => {
                        take_back(&give_back);
                        return Err(SandboxError::Workspace {
                            path: dir.clone(),
                            problem: format!("cannot hand it to the sandbox user: {problem}"),
                        });
                    }
                }
            }
        }
        Handover::Prepared { give_back: dirs } => {
            give_back.extend(dirs.iter().map(|d| (d.clone(), identity::ours())));
        }
    }
    Ok((workspace, home, give_back))
}

type Handed = (File, Option<File>, Vec<(PathBuf, identity::Owner)>);

/// Gives each tree back; runs once every process of the sandbox is dead.
/// `chown` also clears any setuid and setgid bit.
fn take_back(give_back: &[(PathBuf, identity::Owner)]) {
    for (dir, owner) in give_back {
        if let Err(error) = identity::take_back(dir, *owner) {
            tracing::warn!(dir = %dir.display(), %error, "giving a directory back failed");
        }
    }
}

/// Whether a process is in another namespace of this kind than we are.
fn differs_from_ours(pid: i32, kind: &str) -> bool {
    let theirs = std::fs::metadata(format!("/proc/{pid}/ns/{kind}")).map(|m| m.ino());
    let ours = std::fs::metadata(format!("/proc/self/ns/{kind}")).map(|m| m.ino());
    matches!((theirs, ours), (Ok(a), Ok(b)) if a != b)
}

/// The environment a sandbox of this spec starts with.
pub fn sandbox_env(
    extra: impl IntoIterator<Item = (String, String)>,
) -> std::collections::BTreeMap<String, String> {
    let mut env = base_env();
    env.extend(extra);
    env
}
