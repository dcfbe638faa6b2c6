//! What every probe stands on: a usable backend, the guest rootfs, a
//! working copy in a temp dir, and a sandbox over it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use forgehand_sandbox::{
    Backend, ExecOutput, ExecRequest, Limits, Readiness, Sandbox, SandboxSpec,
};

pub struct Ctx {
    pub backend: Arc<dyn Backend>,
    pub workspace: WorkDir,
    pub sandbox: Box<dyn Sandbox>,
    _turn: Option<Turn>,
}

/// The working copy a probe's sandbox runs over: a temp dir, or a
/// size-limited file system mounted in one.
pub struct WorkDir {
    // Dropped first: unmounted before the temp dir is removed.
    sized: Option<forgehand_sandbox::disk::SizedDir>,
    dir: tempfile::TempDir,
}

impl WorkDir {
    pub fn path(&self) -> &std::path::Path {
        match &self.sized {
            Some(sized) => sized.path(),
            None => self.dir.path(),
        }
    }
}

/// Probes run side by side, except one that must run alone.
static TURNS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

#[allow(dead_code)] // held for its lifetime only
enum Turn {
    Shared(tokio::sync::RwLockReadGuard<'static, ()>),
    Alone(tokio::sync::RwLockWriteGuard<'static, ()>),
}

/// The guest rootfs: `FORGEHAND_TEST_ROOTFS`, else where
/// `images/build-rootfs` puts it by default.
pub fn rootfs() -> PathBuf {
    let path = std::env::var_os("FORGEHAND_TEST_ROOTFS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/forgehand/rootfs"));
    assert!(
        path.join("bin/sh").exists(),
        "no guest rootfs at {} (set FORGEHAND_TEST_ROOTFS, or build it: images/build-rootfs; tests/run.sh does)",
        path.display()
    );
    path
}

pub fn limits() -> Limits {
    Limits {
        memory_mib: 256,
        vcpus: 1,
        max_pids: 128,
        timeout: Duration::from_secs(30),
        output_limit_bytes: 1 << 20,
        tmp_mib: 64,
    }
}

pub fn spec(workspace: &std::path::Path, limits: Limits) -> SandboxSpec {
    SandboxSpec {
        rootfs: rootfs(),
        workspace: workspace.to_owned(),
        home: None,
        handover: Default::default(),
        env: forgehand_sandbox::namespace::sandbox_env([(
            "FORGEHAND_SANDBOX_TEST".to_owned(),
            "1".to_owned(),
        )]),
        limits,
    }
}

pub async fn require_usable(backend: &dyn Backend) {
    if let Readiness::Unusable(reason) = backend.readiness().await {
        panic!(
            "the {} backend is not usable on this machine: {reason}",
            backend.name()
        );
    }
}

impl Ctx {
    pub async fn new(backend: Arc<dyn Backend>) -> Ctx {
        let turn = Turn::Shared(TURNS.read().await);
        let mut ctx = Ctx::with_limits(backend, limits()).await;
        ctx._turn = Some(turn);
        ctx
    }

    /// While no other probe runs.
    pub async fn alone(backend: Arc<dyn Backend>) -> Ctx {
        let turn = Turn::Alone(TURNS.write().await);
        let mut ctx = Ctx::with_limits(backend, limits()).await;
        ctx._turn = Some(turn);
        ctx
    }

    /// Over a working copy on a file system of `mib` MiB.
    pub async fn sized(backend: Arc<dyn Backend>, mib: u64) -> Ctx {
        let turn = Turn::Shared(TURNS.read().await);
        let dir = tempfile::tempdir().expect("a temp dir");
        let sized = forgehand_sandbox::disk::SizedDir::create(
            &dir.path().join("ws"),
            &dir.path().join("ws.img"),
            mib,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let workspace = WorkDir {
            sized: Some(sized),
            dir,
        };
        let mut ctx = Ctx::over(backend, workspace, limits()).await;
        ctx._turn = Some(turn);
        ctx
    }

    pub async fn with_limits(backend: Arc<dyn Backend>, limits: Limits) -> Ctx {
        let workspace = WorkDir {
            sized: None,
            dir: tempfile::tempdir().expect("a temp dir"),
        };
        Ctx::over(backend, workspace, limits).await
    }

    async fn over(backend: Arc<dyn Backend>, workspace: WorkDir, limits: Limits) -> Ctx {
        require_usable(&*backend).await;
        let sandbox = backend
            .create(spec(workspace.path(), limits))
            .await
            .unwrap_or_else(|e| panic!("creating a {} sandbox: {e}", backend.name()));
        Ctx {
            backend,
            workspace,
            sandbox,
            _turn: None,
        }
    }

    /// A second sandbox of the same backend, with other limits.
    pub async fn another(&self, limits: Limits) -> Ctx {
        Ctx::with_limits(self.backend.clone(), limits).await
    }

    pub async fn sh(&self, script: &str) -> ExecOutput {
        self.exec(ExecRequest::shell(script)).await
    }

    pub async fn exec(&self, request: ExecRequest) -> ExecOutput {
        let shown = format!("{:?}", request.argv);
        self.sandbox
            .exec(request)
            .await
            .unwrap_or_else(|e| panic!("exec {shown}: {e}"))
    }

    /// Runs a script that must succeed; returns its stdout as text.
    pub async fn ok(&self, script: &str) -> String {
        let out = self.sh(script).await;
        assert!(
            out.status.success(),
            "{script:?} failed: {}\nstdout: {}\nstderr: {}",
            out.status,
            out.stdout.to_text(),
            out.stderr.to_text()
        );
        out.stdout.to_text()
    }

    pub async fn finish(self) {
        self.sandbox.destroy().await.expect("destroy");
    }
}

/// How long a probe waits for something that takes at most a second or
/// two on a loaded machine (a process to show or to go, a command to end)
/// before it fails, saying it hung: a hang detector, not a claim about
/// speed.
pub const HANG: Duration = Duration::from_secs(60);

/// Host processes whose command line contains `needle` (a marker the
/// probe put in an argument).
pub fn host_processes_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && !cmdline.contains("cargo") {
            found.push(pid);
        }
    }
    found
}

/// Waits until some host process carries `needle`. A process that was just
/// forked may be caught mid-exec, when its command line reads empty.
pub async fn wait_until_present(needle: &str, within: Duration) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let found = host_processes_with(needle);
        if !found.is_empty() || tokio::time::Instant::now() >= deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until no host process carries `needle` any more.
pub async fn wait_until_gone(needle: &str, within: Duration) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = host_processes_with(needle);
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

const CRASH_OUT: &str = "FORGEHAND_CRASH_HELPER_OUT";
const CRASH_MARK: &str = "876543";

/// Starts this test binary as a process that creates a sandbox with a
/// background process in it, kills that process with SIGKILL (no
/// destroy, no drop), and checks that `remove_leftovers` finds and
/// removes what it left.
pub async fn leftovers_of_a_killed_process_are_removed(helper: &str, backend: Arc<dyn Backend>) {
    require_usable(&*backend).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sandbox-id");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            helper,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_OUT, &out)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + HANG;
    while !out.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "hung: the helper did not make its sandbox within {HANG:?}"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the helper exited early: {status}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let id = std::fs::read_to_string(&out).unwrap();
    assert!(
        !wait_until_present(CRASH_MARK, HANG).await.is_empty(),
        "the helper's background process runs"
    );
    child.kill().unwrap();
    child.wait().unwrap();

    let removed = backend.remove_leftovers().await.unwrap();
    assert!(
        removed >= 1,
        "remove_leftovers found nothing of sandbox {id}"
    );
    let left = wait_until_gone(CRASH_MARK, HANG).await;
    assert!(
        left.is_empty(),
        "processes of the killed owner's sandbox survive: {left:?}"
    );
    assert_eq!(
        backend.remove_leftovers().await.unwrap(),
        0,
        "a second pass finds nothing"
    );
}

pub async fn crash_helper(backend: Arc<dyn Backend>) {
    let out = std::env::var_os(CRASH_OUT).expect(
        "crash_helper only runs as the helper process of leftovers_of_a_killed_process_are_removed",
    );
    let ctx = Ctx::new(backend).await;
    ctx.ok(&format!("nohup sleep {CRASH_MARK} >/dev/null 2>&1 &"))
        .await;
    std::fs::write(&out, ctx.sandbox.id()).unwrap();
    // Wait to be killed; never destroy.
    std::mem::forget(ctx);
    loop {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}

#[cfg(feature = "microvm")]
pub fn microvm_backend() -> forgehand_sandbox::microvm::MicrovmBackend {
    forgehand_sandbox::microvm::MicrovmBackend::from_env()
}
