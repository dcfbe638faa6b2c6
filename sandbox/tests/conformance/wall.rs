//! Probes of the wall between the agent and the host kernel: the host
//! identity sandboxes run as, what `/proc` hides, the system-call filter,
//! Landlock, and the size limits. Every probe only opens, asks and reads:
//! a write that would change host state is never made, even where it
//! would succeed (a file under `/proc/sys` is opened for writing, never
//! written; a system call is given arguments it would refuse anyway).

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use forgehand_sandbox::namespace::HostIdentity;

use crate::support::{self, Ctx};

/// The host user sandboxes run as on this machine.
fn sandbox_user() -> HostIdentity {
    HostIdentity::resolve(forgehand_sandbox::namespace::DEFAULT_HOST_USER)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs a Python script inside; it prints `name=value` lines.
async fn python(ctx: &Ctx, script: &str) -> String {
    let out = ctx
        .exec(forgehand_sandbox::ExecRequest::new([
            "python3", "-c", script,
        ]))
        .await;
    assert!(
        out.status.success(),
        "the probe script failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        out.stdout.to_text(),
        out.stderr.to_text()
    );
    out.stdout.to_text()
}

fn value<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in the report:\n{report}"))
}

/// The libc calls the probes make, with errno as text.
const PRELUDE: &str = r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    rc = libc.syscall(ctypes.c_long(nr), *args)
    return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
"#;

pub async fn the_agent_is_a_host_user_of_its_own(ctx: &Ctx) {
    let user = sandbox_user();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    assert_ne!(user.uid, 0);
    assert_ne!(user.uid, me);

    // A file the host (root) puts in the working copy, readable by its
    // owner only: the agent must not read it, as it would as root.
    let private = ctx.workspace.path().join("hosts-own");
    std::fs::write(&private, "the host's own\n").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = ctx.sh("cat /workspace/hosts-own").await;
    assert!(
        !out.status.success() && !out.stdout.to_text().contains("host's own"),
        "the agent read a file only its host owner may read: {}",
        out.stdout.to_text()
    );

    // What the agent writes belongs to the sandbox user on the host.
    ctx.ok("echo made-inside > /workspace/made-inside").await;
    let meta = std::fs::metadata(ctx.workspace.path().join("made-inside")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (user.uid, user.gid),
        "owner on the host of a file the agent wrote"
    );

    // And the host sees every process of the sandbox as that user.
    ctx.ok("nohup sleep 4271 >/dev/null 2>&1 &").await;
    let pids = support::wait_until_present("4271", support::HANG).await;
    assert!(!pids.is_empty(), "the background process runs");
    for pid in pids {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        for field in ["Uid:", "Gid:"] {
            let ids: Vec<u32> = status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .unwrap()
                .split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect();
            let want = if field == "Uid:" { user.uid } else { user.gid };
            assert!(
                ids.iter().all(|&id| id == want),
                "{field} of sandbox process {pid} on the host: {ids:?}"
            );
        }
        let groups = status.lines().find(|l| l.starts_with("Groups:")).unwrap();
        assert_eq!(
            groups.trim(),
            "Groups:",
            "no supplementary group of the host's"
        );
    }
}

/// After destroy, the working copy is its owner's again.
pub async fn the_working_copy_is_given_back(ctx: &Ctx) {
    let other = ctx.another(support::limits()).await;
    other
        .ok("mkdir -p /workspace/d/e && echo x > /workspace/d/e/f && ln -s d /workspace/link")
        .await;
    let root = other.workspace.path().to_owned();
    // The temp dir's maker: this process.
    // SAFETY: geteuid has no preconditions.
    let owner = unsafe { libc::geteuid() };
    assert_ne!(
        std::fs::metadata(&root).unwrap().uid(),
        owner,
        "the sandbox's while it lives"
    );
    other.sandbox.destroy().await.unwrap();
    for path in ["d", "d/e", "d/e/f", "link"] {
        let meta = std::fs::symlink_metadata(root.join(path)).unwrap();
        assert_eq!(meta.uid(), owner, "{path} after destroy");
    }
    assert_eq!(std::fs::metadata(&root).unwrap().uid(), owner);
    other.finish().await;
}

pub async fn proc_shows_nothing_of_the_hosts_kernel(ctx: &Ctx) {
    let script = format!(
        "{PRELUDE}{}",
        r#"
for path in ["/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
             "/proc/sys/vm/drop_caches", "/proc/sys/kernel/hostname",
             "/proc/sysrq-trigger", "/proc/self/oom_score_adj"]:
    # Opened for writing, never written.
    try:
        fd = os.open(path, os.O_WRONLY)
        os.close(fd)
        print(f"write {path}=open")
    except OSError as e:
        print(f"write {path}={errno.errorcode[e.errno]}")
for path in ["/proc/keys", "/proc/key-users", "/proc/timer_list", "/proc/slabinfo",
             "/proc/kallsyms", "/proc/kmsg", "/proc/vmallocinfo", "/proc/pagetypeinfo",
             "/proc/kcore", "/proc/sched_debug", "/proc/kpageflags"]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            data = os.read(fd, 4096)
        except OSError as e:
            data = b""
        os.close(fd)
        print(f"read {path}={'content' if data else 'empty'}")
    except OSError as e:
        print(f"read {path}={errno.errorcode[e.errno]}")
print("sys=" + ",".join(sorted(os.listdir("/sys"))))
print("acpi=" + ",".join(sorted(os.listdir("/proc/acpi"))) if os.path.exists("/proc/acpi") else "acpi=")
"#
    );
    let report = python(ctx, &script).await;
    for line in report.lines().filter(|l| l.starts_with("write ")) {
        let (what, result) = line.split_once('=').unwrap();
        assert!(
            ["EROFS", "EACCES", "EPERM", "ENOENT"].contains(&result),
            "{what}: {result} (the agent can write a kernel setting)\n{report}"
        );
    }
    for line in report.lines().filter(|l| l.starts_with("read ")) {
        let (what, result) = line.split_once('=').unwrap();
        assert_ne!(
            result, "content",
            "{what}: the agent reads the host kernel's state\n{report}"
        );
    }
    assert_eq!(value(&report, "sys"), "", "/sys holds something:\n{report}");
    assert_eq!(value(&report, "acpi"), "", "/proc/acpi:\n{report}");
}

pub async fn kernel_interfaces_are_filtered(ctx: &Ctx) {
    let script = format!(
        "{PRELUDE}{}",
        r#"
SYS = dict(keyctl=250, add_key=248, request_key=249, bpf=321, perf_event_open=298,
           userfaultfd=323, unshare=272, mount=165, io_uring_setup=425,
           open_by_handle_at=304, kexec_load=246, init_module=175, setns=308,
           personality=135, clone=56, clone3=435, openat2=437, fsopen=430,
           pivot_root=155, swapon=167, chroot=161, acct=163, socket=41, io_setup=206)
# Arguments the kernel would refuse (NULL pointers, bad descriptors), so that
# even an allowed call changes nothing: EPERM or ENOSYS is the filter's answer.
print("keyctl=" + call(SYS["keyctl"], 0, -3, 0))
print("add_key=" + call(SYS["add_key"], 0, 0, 0, 0, -3))
print("request_key=" + call(SYS["request_key"], 0, 0, 0, 0))
print("bpf=" + call(SYS["bpf"], 5, 0, 0))
print("perf_event_open=" + call(SYS["perf_event_open"], 0, 0, -1, -1, 0))
print("userfaultfd=" + call(SYS["userfaultfd"], 0o4000000))
print("unshare=" + call(SYS["unshare"], 0x10000000))
print("mount=" + call(SYS["mount"], 0, 0, 0, 0, 0))
print("fsopen=" + call(SYS["fsopen"], 0, 0))
print("pivot_root=" + call(SYS["pivot_root"], 0, 0))
print("io_uring_setup=" + call(SYS["io_uring_setup"], 1, 0))
# A NULL context pointer: were it allowed, EFAULT, and no slot of the
# host's AIO pool taken.
print("io_setup=" + call(SYS["io_setup"], 1, 0))
print("open_by_handle_at=" + call(SYS["open_by_handle_at"], -1, 0, 0))
print("kexec_load=" + call(SYS["kexec_load"], 0, 0, 0, 0))
print("init_module=" + call(SYS["init_module"], 0, 0, 0))
print("swapon=" + call(SYS["swapon"], 0, 0))
print("acct=" + call(SYS["acct"], 0))
print("setns=" + call(SYS["setns"], -1, 0))
print("chroot=" + call(SYS["chroot"], 0))
print("personality=" + call(SYS["personality"], 0x0040000))
print("personality_query=" + call(SYS["personality"], 0xffffffff))
print("vsock=" + call(SYS["socket"], 40, 1, 0))
print("clone3=" + call(SYS["clone3"], 0, 0))
print("openat2=" + call(SYS["openat2"], -100, 0, 0, 0))
# clone with a namespace flag: EPERM; were it allowed, the child leaves at once.
rc = libc.syscall(ctypes.c_long(SYS["clone"]), ctypes.c_long(0x10000000 | 17), ctypes.c_long(0),
                  ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
if rc == 0:
    os._exit(0)
print("clone_newuser=" + ("ok" if rc > 0 else errno.errorcode[ctypes.get_errno()]))
if rc > 0:
    os.waitpid(rc, 0)
# The setuid and setgid bits.
open("/workspace/tool", "w").close()
for mode in (0o4755, 0o2755):
    try:
        os.chmod("/workspace/tool", mode)
        print(f"chmod_{mode:o}=ok")
    except OSError as e:
        print(f"chmod_{mode:o}={errno.errorcode[e.errno]}")
try:
    os.close(os.open("/workspace/made-setuid", os.O_CREAT | os.O_WRONLY, 0o4755))
    print("create_setuid=ok")
except OSError as e:
    print(f"create_setuid={errno.errorcode[e.errno]}")
status = open("/proc/self/status").read()
print("seccomp=" + [l for l in status.splitlines() if l.startswith("Seccomp:")][0].split()[1])
print("chmod_plain=" + ("ok" if os.chmod("/workspace/tool", 0o755) is None else "?"))
"#
    );
    let report = python(ctx, &script).await;
    for name in [
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "unshare",
        "mount",
        "fsopen",
        "pivot_root",
        "io_uring_setup",
        "io_setup",
        "open_by_handle_at",
        "kexec_load",
        "init_module",
        "swapon",
        "acct",
        "setns",
        "chroot",
        "personality",
        "vsock",
        "clone_newuser",
        "chmod_4755",
        "chmod_2755",
        "create_setuid",
    ] {
        assert_eq!(value(&report, name), "EPERM", "{name}:\n{report}");
    }
    for name in ["clone3", "openat2"] {
        assert_eq!(value(&report, name), "ENOSYS", "{name}:\n{report}");
    }
    // What must keep working.
    assert_eq!(value(&report, "personality_query"), "ok", "{report}");
    assert_eq!(value(&report, "chmod_plain"), "ok", "{report}");
    assert_eq!(value(&report, "seccomp"), "2", "{report}");
    let mode = std::fs::metadata(ctx.workspace.path().join("tool"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o6000,
        0,
        "a setuid or setgid bit on the host: {mode:o}"
    );
    assert!(!ctx.workspace.path().join("made-setuid").exists());
}

pub async fn every_process_is_confined(ctx: &Ctx) {
    // One started in an earlier exec, still running.
    ctx.ok("nohup sleep 5613 >/dev/null 2>&1 &").await;
    let script = r#"
import os
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    try:
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        continue
    fields = dict(l.split(":", 1) for l in status.splitlines() if ":" in l)
    name = fields["Name"].strip()
    print(f"{pid} {name} uid={fields['Uid'].split()[1]} seccomp={fields['Seccomp'].strip()} "
          f"capeff={fields['CapEff'].strip()} nnp={fields['NoNewPrivs'].strip()}")
"#;
    let report = python(ctx, script).await;
    let names: Vec<&str> = report
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(names.contains(&"sleep"), "{report}");
    assert!(
        report.lines().count() >= 4,
        "the holder, the background process and this one:\n{report}"
    );
    for line in report.lines() {
        assert!(
            line.contains("uid=1000")
                && line.contains("seccomp=2")
                && line.contains("capeff=0000000000000000"),
            "an unconfined process in the sandbox: {line}\n{report}"
        );
    }
    // Every exec's process (not the sandbox's first one, which bubblewrap
    // starts) also has no_new_privs.
    let mine: Vec<&str> = report.lines().filter(|l| l.contains("python3")).collect();
    assert!(mine.iter().all(|l| l.contains("nnp=1")), "{report}");
}

pub async fn landlock_confines_each_command(ctx: &Ctx) {
    let script = format!(
        "{PRELUDE}{}",
        r#"
def attempt(name, fn):
    try:
        fn()
        print(f"{name}=ok")
    except OSError as e:
        print(f"{name}={errno.errorcode[e.errno]}")
def write(path, text):
    def go():
        with open(path, "w") as f:
            f.write(text)
    return go
# Allowed by the file modes, refused by Landlock: /proc is read-only to it.
attempt("oom_score_adj", write("/proc/self/oom_score_adj", "500"))
attempt("comm", write("/proc/self/comm", "renamed"))
# Where writing is the point.
attempt("workspace", write("/workspace/ll-ok", "x"))
attempt("tmp", write("/tmp/ll-ok", "x"))
attempt("dev_null", write("/dev/null", "x"))
# The sandbox's first process is outside this command's domain: not even
# its root can be looked at, and it cannot be traced.
holder = None
for p in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    try:
        if open(f"/proc/{p}/cmdline", "rb").read() == b"sleep\0infinity\0":
            holder = p
    except OSError:
        pass
print(f"holder={'found' if holder else 'none'}")
attempt("holder_root", lambda: os.readlink(f"/proc/{holder}/root"))
PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
rc = libc.ptrace(ctypes.c_long(PTRACE_SEIZE), ctypes.c_long(holder), None, None)
print("ptrace=" + ("ok" if rc == 0 else errno.errorcode[ctypes.get_errno()]))
if rc == 0:
    libc.ptrace(ctypes.c_long(PTRACE_DETACH), ctypes.c_long(holder), None, None)
"#
    );
    let report = python(ctx, &script).await;
    assert_eq!(value(&report, "oom_score_adj"), "EACCES", "{report}");
    assert_eq!(value(&report, "comm"), "EACCES", "{report}");
    assert_eq!(value(&report, "workspace"), "ok", "{report}");
    assert_eq!(value(&report, "tmp"), "ok", "{report}");
    assert_eq!(value(&report, "dev_null"), "ok", "{report}");
    assert_eq!(value(&report, "holder"), "found", "{report}");
    assert_eq!(value(&report, "holder_root"), "EACCES", "{report}");
    assert_eq!(value(&report, "ptrace"), "EPERM", "{report}");
}

pub async fn writes_stop_at_the_size_limits(ctx: &Ctx) {
    // The test's limits: /tmp holds 64 MiB; the working copy's file
    // system (made by `Ctx::sized`) 64 MiB.
    let out = ctx
        .sh(
            "dd if=/dev/zero of=/workspace/fill bs=1M count=200 2>&1; echo ws=$?; \
             dd if=/dev/zero of=/tmp/fill bs=1M count=200 2>&1; echo tmp=$?; \
             ls -l /workspace/fill /tmp/fill",
        )
        .await;
    let text = out.stdout.to_text();
    assert!(
        !text.contains("ws=0"),
        "200 MiB written to /workspace:\n{text}"
    );
    assert!(!text.contains("tmp=0"), "200 MiB written to /tmp:\n{text}");
    assert_eq!(text.matches("No space left on device").count(), 2, "{text}");
    let written = std::fs::metadata(ctx.workspace.path().join("fill"))
        .unwrap()
        .len();
    assert!(written <= 64 << 20, "{written} bytes on the host");
}

pub async fn socket_buffers_count_against_the_memory_limit(ctx: &Ctx) {
    // Loopback TCP queues that nobody reads: kernel memory the sandbox
    // pins. The test's sandboxes have 256 MiB.
    let script = r#"
import socket, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(4096)
port = srv.getsockname()[1]
conns, total, idle, chunk = [], 0, 0, b"x" * 65536
deadline = time.time() + 15
while total < (600 << 20) and idle < 50 and time.time() < deadline:
    c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    try:
        c.connect(("127.0.0.1", port)); s, _ = srv.accept()
    except OSError:
        break
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    c.setblocking(False); n = 0
    try:
        while True:
            n += c.send(chunk)
    except (BlockingIOError, OSError):
        pass
    idle = idle + 1 if n == 0 else 0
    total += n; conns.append((c, s))
print(f"queued_mib={total >> 20}")
"#;
    let out = ctx
        .exec(forgehand_sandbox::ExecRequest::new([
            "python3", "-c", script,
        ]))
        .await;
    let text = out.stdout.to_text();
    // Killed by the memory limit is fine too: what matters is that the
    // queues never outgrow the sandbox's memory.
    if let Some(mib) = text
        .lines()
        .find_map(|l| l.strip_prefix("queued_mib="))
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        assert!(
            mib <= support::limits().memory_mib,
            "{mib} MiB of socket buffers held by a sandbox of {} MiB",
            support::limits().memory_mib
        );
    } else {
        assert!(
            !out.status.success(),
            "no report: {text} {}",
            out.stderr.to_text()
        );
    }
}

pub async fn open_files_stop_at_a_share_of_the_hosts_file_table(ctx: &Ctx) {
    // All the processes a sandbox may run, each holding all it may open,
    // stay within a quarter of the host's file table; and the guest
    // cannot raise its limit (asking for more is refused, nothing is
    // changed on the host).
    let script = r#"
import os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
print(f"soft={soft}"); print(f"hard={hard}")
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard + 1, hard + 1)); print("raise=ok")
except (ValueError, OSError) as e:
    print("raise=refused")
fds = []
try:
    while len(fds) < hard + 10:
        fds.append(os.open("/dev/null", os.O_RDONLY))
    print("opened=all")
except OSError as e:
    print(f"opened={len(fds)}")
"#;
    let report = python(ctx, script).await;
    let file_max: u64 = std::fs::read_to_string("/proc/sys/fs/file-max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let hard: u64 = value(&report, "hard").parse().unwrap();
    assert_eq!(value(&report, "soft"), value(&report, "hard"), "{report}");
    assert_eq!(value(&report, "raise"), "refused", "{report}");
    let max_pids = u64::from(support::limits().max_pids);
    assert!(
        hard * max_pids <= file_max / 4 || hard == 256,
        "{max_pids} processes of {hard} open files each could take {} of the host's {file_max}",
        hard * max_pids
    );
    let opened: u64 = value(&report, "opened")
        .parse()
        .unwrap_or_else(|_| panic!("opened past the limit: {report}"));
    assert!(opened < hard, "{report}");
}

pub async fn terminals_stop_at_the_sandboxs_own_maximum(ctx: &Ctx) {
    // Each pseudo-terminal opened is the sandbox's own devpts instance's;
    // past its maximum, ENOSPC, while the host's count never moves by
    // more than that.
    let script = r#"
import os, errno
fds = []
try:
    while len(fds) < 1000:
        fds.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
    print("opened=1000")
except OSError as e:
    print(f"opened={len(fds)}"); print("error=" + errno.errorcode[e.errno])
"#;
    let report = python(ctx, script).await;
    let opened: u32 = value(&report, "opened").parse().unwrap();
    assert_eq!(opened, forgehand_sandbox::namespace::MAX_PTYS, "{report}");
    assert_eq!(value(&report, "error"), "ENOSPC", "{report}");
}

pub async fn accept_queues_stop_at_the_sandboxs_own_maximum(ctx: &Ctx) {
    // Connections nobody accepts are charged to no cgroup: the sandbox's
    // network namespace caps each listener's queue, whatever it asks.
    let script = r#"
import socket, select, errno
print("somaxconn=" + open("/proc/sys/net/core/somaxconn").read().strip())
print("tcp_rmem=" + " ".join(open("/proc/sys/net/ipv4/tcp_rmem").read().split()))
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(4096)
port = srv.getsockname()[1]
clients = []
for _ in range(300):
    c = socket.socket(); c.setblocking(False)
    c.connect_ex(("127.0.0.1", port)); clients.append(c)
_, ready, _ = select.select([], clients, [], 2)
done = sum(1 for c in ready if c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0)
print(f"queued={done}")
"#;
    let report = python(ctx, script).await;
    let cap = forgehand_sandbox::namespace::MAX_ACCEPT_BACKLOG;
    assert_eq!(value(&report, "somaxconn"), cap.to_string(), "{report}");
    assert_eq!(
        value(&report, "tcp_rmem"),
        forgehand_sandbox::namespace::TCP_RMEM,
        "{report}"
    );
    let queued: u32 = value(&report, "queued").parse().unwrap();
    // The kernel lets one past the backlog in.
    assert!(queued <= cap + 1, "{queued} connections queued: {report}");
}
