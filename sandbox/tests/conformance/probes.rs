//! The probes. Each takes a fresh sandbox (see `support::Ctx`) and says,
//! when it fails, what leaked.

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

use forgehand_sandbox::{ExecRequest, ExitStatus, Limits, Stream};

use crate::support::{self, Ctx, HANG};
pub use crate::wall::*;

pub async fn only_loopback_and_no_route(ctx: &Ctx) {
    let links = ctx.ok("ip -o link show | cut -d: -f2 | tr -d ' '").await;
    assert_eq!(links.trim(), "lo", "interfaces inside: {links}");
    let routes = ctx.ok("ip route show; ip -6 route show default").await;
    assert_eq!(routes.trim(), "", "routes inside: {routes}");
    // The kernel's own view, in case ip were missing something.
    let dev = ctx
        .ok("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
        .await;
    assert_eq!(dev.trim(), "lo");
}

pub async fn host_loopback_servers_see_nothing(ctx: &Ctx) {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp6 = TcpListener::bind("[::1]:0").ok();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    for l in [Some(&tcp), tcp6.as_ref()].into_iter().flatten() {
        l.set_nonblocking(true).unwrap();
    }
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let udp_port = udp.local_addr().unwrap().port();

    let out = ctx
        .sh(&format!(
            "curl -sS --max-time 3 http://127.0.0.1:{tcp_port}/ ; echo tcp4=$?; \
             exec 3<>/dev/tcp/127.0.0.1/{tcp_port} ; echo devtcp=$?"
        ))
        .await;
    let text = out.stdout.to_text();
    assert!(
        text.contains("tcp4=7"),
        "curl to the host's TCP server: {text} {}",
        out.stderr.to_text()
    );
    assert!(
        !text.contains("devtcp=0"),
        "bash reached the host's TCP server: {text}"
    );

    if let Some(tcp6) = &tcp6 {
        let port6 = tcp6.local_addr().unwrap().port();
        let out = ctx
            .sh(&format!(
                "curl -sS -g --max-time 3 'http://[::1]:{port6}/' ; echo tcp6=$?"
            ))
            .await;
        let text = out.stdout.to_text();
        assert!(
            !text.contains("tcp6=0"),
            "curl reached the host's IPv6 server: {text}"
        );
        assert!(
            tcp6.accept().is_err(),
            "the host's IPv6 server got a connection"
        );
    }

    ctx.ok(&format!(
        "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         s.sendto(b'leak', ('127.0.0.1', {udp_port}))\" || true"
    ))
    .await;

    assert!(
        tcp.accept().is_err(),
        "the host's TCP server got a connection"
    );
    let mut buf = [0u8; 16];
    assert!(
        udp.recv_from(&mut buf).is_err(),
        "the host's UDP server got a datagram"
    );
}

pub async fn name_resolution_fails(ctx: &Ctx) {
    // A reserved name: even a leak would only ask a resolver on this
    // machine's loopback, as the guest has no nameserver configured.
    let out = ctx
        .sh("getent hosts forgehand-probe.invalid; echo getent=$?; \
             python3 -c \"import socket; socket.getaddrinfo('forgehand-probe.invalid', 80)\" 2>&1 | tail -1")
        .await;
    let text = out.stdout.to_text();
    assert!(
        text.contains("getent=2"),
        "name resolution answered: {text}"
    );
    assert!(text.contains("gaierror"), "python resolved a name: {text}");
}

pub async fn host_environment_and_files_are_invisible(ctx: &Ctx) {
    const CANARY: &str = "forgehand-canary-7f3a9c";
    // SAFETY: tests read the environment concurrently only through
    // std::env, which locks; this variable is ours alone.
    unsafe { std::env::set_var("FORGEHAND_CANARY_TOKEN", CANARY) };
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let config_dir = std::path::Path::new(&home).join(".config/forgehand");
    std::fs::create_dir_all(&config_dir).unwrap();
    let canary_file = config_dir.join("canary-token");
    std::fs::write(&canary_file, CANARY).unwrap();

    let env = ctx.ok("env; cat /proc/self/environ | tr '\\0' '\\n'").await;
    assert!(
        !env.contains(CANARY),
        "the host's environment leaked in:\n{env}"
    );
    assert!(
        !env.contains("CARGO"),
        "the host's environment leaked in:\n{env}"
    );
    let path = canary_file.display().to_string();
    let out = ctx
        .sh(&format!(
            "cat '{path}'; ls -a '{home}' 2>&1; grep -rIl {CANARY} /etc /home /root /tmp /workspace 2>/dev/null; true"
        ))
        .await;
    let text = out.stdout.to_text();
    assert!(
        !text.contains(CANARY),
        "the host's canary file is visible:\n{text}"
    );
    assert!(
        !text.contains("canary-token"),
        "the host's config dir is visible:\n{text}"
    );
    std::fs::remove_file(&canary_file).unwrap();
}

pub async fn no_host_process_is_visible(ctx: &Ctx) {
    let me = std::env::current_exe().unwrap();
    let me = me.file_name().unwrap().to_string_lossy().into_owned();
    let procs = ctx
        .ok("for p in /proc/[0-9]*; do printf '%s ' \"${p#/proc/}\"; tr '\\0' ' ' < $p/cmdline; echo; done")
        .await;
    assert!(
        !procs.contains(&me),
        "the test process is visible inside:\n{procs}"
    );
    assert!(
        !procs.contains("cargo"),
        "host processes are visible inside:\n{procs}"
    );
    // Processes with a command line: a guest kernel's threads have none.
    let count = procs
        .lines()
        .filter(|l| {
            l.split_once(' ')
                .is_some_and(|(_, cmd)| !cmd.trim().is_empty())
        })
        .count();
    assert!(
        count <= 8,
        "more processes than the sandbox's own:\n{procs}"
    );
}

pub async fn memory_hog_is_killed_and_the_sandbox_lives_on(ctx: &Ctx) {
    let small = ctx
        .another(Limits {
            // A microVM's memory includes its kernel's.
            memory_mib: 128,
            ..support::limits()
        })
        .await;
    let out = small
        .sh("python3 -c 'a = bytearray(400 * 1024 * 1024); print(len(a))'")
        .await;
    // SIGKILL, as the shell around it reports it.
    assert_eq!(
        out.status.code(),
        137,
        "a 400 MB allocation under a 128 MiB limit: {} {}",
        out.stdout.to_text(),
        out.stderr.to_text()
    );
    assert_eq!(small.ok("echo alive").await.trim(), "alive");
    small.finish().await;
}

/// Red-team round 6: with `max_pids` in the thousands each process's
/// share of the host's file table came to 64 open files, too few for the
/// sandbox to start, and every job failed as Forgehand's own fault.
pub async fn the_kernels_most_processes_still_start(ctx: &Ctx) {
    let many = ctx
        .another(Limits {
            max_pids: 4_194_304,
            ..support::limits()
        })
        .await;
    assert_eq!(many.ok("echo alive").await.trim(), "alive");
    many.finish().await;
}

pub async fn fork_bomb_is_stopped_by_the_process_limit(ctx: &Ctx) {
    let bounded = ctx
        .another(Limits {
            max_pids: 48,
            timeout: Duration::from_secs(5),
            ..support::limits()
        })
        .await;
    // Stopped: the exec ends (by the process limit or its 5 s timeout).
    // How soon is not asserted; a bomb that ran on fails after `HANG`.
    let out = tokio::time::timeout(HANG, bounded.sh("bomb() { bomb | bomb & }; bomb; wait"))
        .await
        .unwrap_or_else(|_| panic!("hung: the bomb still ran after {HANG:?}"));
    let err = out.stderr.to_text();
    assert!(
        err.contains("Resource temporarily unavailable")
            || err.contains("retry")
            || err.contains("Cannot fork"),
        "no sign of the process limit ({}): {err}",
        out.status
    );
    // The host can still start processes, and the sandbox recovers.
    assert!(std::process::Command::new("true")
        .status()
        .unwrap()
        .success());
    let after = bounded.sh("echo alive").await;
    assert_eq!(
        after.stdout.to_text().trim(),
        "alive",
        "{}",
        after.stderr.to_text()
    );
    bounded.finish().await;
}

pub async fn wall_clock_limit_kills_the_whole_tree(ctx: &Ctx) {
    let started = Instant::now();
    // The commands would run for days: only the limit ends the exec. The
    // wait is bounded by a hang detector, not timed.
    let exec =
        ctx.exec(ExecRequest::shell("sleep 654321 & sleep 1000").timeout(Duration::from_secs(2)));
    let out = tokio::time::timeout(HANG, exec)
        .await
        .unwrap_or_else(|_| panic!("hung: the exec outlived its 2 s limit by {HANG:?}"));
    let took = started.elapsed();
    assert_eq!(out.status, ExitStatus::TimedOut);
    // Not before the limit (a lower bound: a loaded machine only adds).
    assert!(took >= Duration::from_secs(2), "{took:?}");
    let left = support::wait_until_gone("654321", HANG).await;
    assert!(
        left.is_empty(),
        "the exec's background child survived the limit: {left:?}"
    );
    // The bracket keeps pgrep from matching its own shell's command line.
    let inside = ctx.ok("pgrep -f 'sleep 100[0]' || true").await;
    assert_eq!(inside.trim(), "", "sleep 1000 still runs inside");
}

pub async fn output_is_byte_exact_and_streams_apart(ctx: &Ctx) {
    let out_bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let err_bytes: Vec<u8> = (0..50_000u32).map(|i| (i * 13 % 256) as u8).collect();
    std::fs::write(ctx.workspace.path().join("out.bin"), &out_bytes).unwrap();
    std::fs::write(ctx.workspace.path().join("err.bin"), &err_bytes).unwrap();
    let out = ctx
        .sh("cat out.bin; cat err.bin >&2; printf '\\0\\r\\n\\377'")
        .await;
    assert!(out.status.success());
    let mut expected = out_bytes.clone();
    expected.extend_from_slice(b"\0\r\n\xff");
    assert_eq!(out.stdout.bytes.len(), expected.len());
    assert!(
        out.stdout.bytes == expected,
        "stdout differs from what was written"
    );
    assert!(
        out.stderr.bytes == err_bytes,
        "stderr differs from what was written"
    );
    assert!(!out.stdout.is_truncated() && !out.stderr.is_truncated());
}

/// The command prints its first line, then waits until the test has read
/// it (the test then makes `/workspace/streamed.go`): output that waited
/// for the end would never come, and the test fails after `HANG`.
pub async fn streamed_output_arrives_as_it_comes(ctx: &Ctx) {
    let mut stream = ctx
        .sandbox
        .exec_stream(
            ExecRequest::shell(
                "echo first; while [ ! -e /workspace/streamed.go ]; do sleep 0.02; done; \
                 echo second >&2; echo third",
            )
            // Longer than `HANG`: the hang detector speaks first.
            .timeout(HANG * 10),
        )
        .await
        .unwrap();
    let first = tokio::time::timeout(HANG, stream.next_chunk())
        .await
        .unwrap_or_else(|_| panic!("hung: the first line waited for the end"))
        .expect("a first chunk");
    assert_eq!(
        first.stream,
        Stream::Stdout,
        "{:?}",
        String::from_utf8_lossy(&first.bytes)
    );
    assert_eq!(first.bytes, b"first\n");
    std::fs::write(ctx.workspace.path().join("streamed.go"), "").unwrap();
    let mut rest = Vec::new();
    while let Some(chunk) = stream.next_chunk().await {
        rest.push(chunk);
    }
    assert!(rest
        .iter()
        .any(|c| c.stream == Stream::Stderr && c.bytes == b"second\n"));
    let result = stream.finish().await.unwrap();
    assert!(result.status.success());
    assert_eq!(result.stdout.bytes, b"first\nthird\n");
    assert_eq!(result.stderr.bytes, b"second\n");
}

pub async fn huge_output_is_capped_without_host_memory_growing(ctx: &Ctx) {
    const HUNDRED_MB: u64 = 100_000_000;
    let cap = support::limits().output_limit_bytes as u64;
    let before = support::vm_rss_kib();
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(before));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max(support::vm_rss_kib(), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let out = ctx
        .sh("head -c 100000000 /dev/zero; head -c 100000000 /dev/zero >&2")
        .await;
    sampler.abort();
    assert!(out.status.success(), "{}", out.status);
    assert_eq!((out.stdout.bytes.len() + out.stdout.tail.len()) as u64, cap);
    assert_eq!(out.stdout.dropped, HUNDRED_MB - cap);
    assert_eq!(out.stderr.dropped, HUNDRED_MB - cap);
    assert!(out
        .stdout
        .to_text()
        .contains("bytes of output left out here"));
    let grown_kib = peak
        .load(std::sync::atomic::Ordering::Relaxed)
        .saturating_sub(before);
    // Two capped streams plus read buffers; 100 MB would be 97 656 KiB.
    assert!(
        grown_kib < 2 * cap / 1024 + 16 * 1024,
        "host memory grew by {grown_kib} KiB"
    );
}

pub async fn workspace_files_appear_on_the_host_with_sane_ownership(ctx: &Ctx) {
    ctx.ok(
        "echo written-inside > /workspace/new.txt; mkdir -p /workspace/dir/sub; touch dir/sub/f",
    )
    .await;
    let file = ctx.workspace.path().join("new.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "written-inside\n");
    let meta = std::fs::metadata(&file).unwrap();
    // Never root, never the user that runs forgehand: the sandbox's own
    // host user (see the_agent_is_a_host_user_of_its_own).
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    assert_ne!(meta.uid(), 0, "owned by root on the host");
    assert_ne!(meta.uid(), me, "owned by the user that runs forgehand");
    let mode = meta.permissions().mode();
    assert_eq!(mode & 0o6000, 0, "no setuid/setgid bit: {mode:o}");
    assert!(ctx.workspace.path().join("dir/sub/f").exists());
}

pub async fn root_file_system_is_read_only(ctx: &Ctx) {
    let out = ctx
        .sh("touch /etc/forgehand-probe 2>&1; echo etc=$?; touch /usr/bin/probe 2>&1; echo usr=$?")
        .await;
    let text = out.stdout.to_text();
    assert!(text.contains("etc=1") && text.contains("usr=1"), "{text}");
    assert!(!super::support::rootfs()
        .join("etc/forgehand-probe")
        .exists());
}

pub async fn tmp_and_background_processes_persist_between_execs(ctx: &Ctx) {
    ctx.ok("echo kept > /tmp/marker").await;
    ctx.ok("nohup sh -c 'while :; do date +%s%N > /tmp/beat.new; mv /tmp/beat.new /tmp/beat; sleep 0.05; done' >/dev/null 2>&1 &")
        .await;
    assert_eq!(ctx.ok("cat /tmp/marker").await, "kept\n");
    // The beat changes between one exec and a later one: the process
    // still runs. Asked until it has changed (a hang detector bounds it),
    // not after a while.
    let beat = || ctx.ok("while [ ! -s /tmp/beat ]; do sleep 0.02; done; cat /tmp/beat");
    let first = beat().await;
    let deadline = Instant::now() + HANG;
    while beat().await == first {
        assert!(
            Instant::now() < deadline,
            "hung: the background process stopped between execs (its beat stayed {first:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn nothing_but_the_workspace_survives_destroy(ctx: &Ctx) {
    let other = ctx.another(support::limits()).await;
    other
        .ok("echo kept > /workspace/kept.txt; echo gone > /tmp/gone.txt; nohup sleep 543210 >/dev/null 2>&1 &")
        .await;
    if other.sandbox.isolation() == forgehand_sandbox::Isolation::SharedKernel {
        // Only a shared kernel shows the sandbox's processes to the host.
        let seen = support::wait_until_present("543210", HANG).await;
        assert!(
            !seen.is_empty(),
            "the background sleep never showed on the host"
        );
    }
    let workspace = other.workspace.path().to_owned();
    other.sandbox.destroy().await.unwrap();
    let left = support::wait_until_gone("543210", HANG).await;
    assert!(
        left.is_empty(),
        "a background process survived destroy: {left:?}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("kept.txt")).unwrap(),
        "kept\n"
    );
    let err = other
        .sandbox
        .exec(ExecRequest::new(["true"]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("destroyed"), "{err}");
    // A new sandbox on the same working copy starts with an empty /tmp.
    let again = ctx
        .backend
        .create(support::spec(&workspace, support::limits()))
        .await
        .unwrap();
    let out = again
        .exec(ExecRequest::shell("ls /tmp; cat /workspace/kept.txt"))
        .await
        .unwrap();
    assert_eq!(out.stdout.to_text(), "kept\n");
    again.destroy().await.unwrap();
}

pub async fn a_cancelled_exec_leaves_no_process(ctx: &Ctx) {
    // Cancelled (dropped) once both sleeps run: not after a while, when
    // they might not have started yet. A shared kernel shows them to the
    // host; a kernel of the sandbox's own, to a command in it.
    // Boxed, so that dropping it below drops the exec itself.
    let mut run = Box::pin(
        ctx.sandbox
            .exec(ExecRequest::shell("sleep 432101 & sleep 432101")),
    );
    let shared = ctx.sandbox.isolation() == forgehand_sandbox::Isolation::SharedKernel;
    let deadline = Instant::now() + HANG;
    loop {
        let running = async {
            if shared {
                support::host_processes_with("432101").len()
            } else {
                let count = ctx.ok("pgrep -c -f 'sleep 43210[1]' || true").await;
                count.trim().parse().unwrap_or(0)
            }
        };
        tokio::select! {
            out = &mut run => panic!(
                "the exec ended by itself: {:?}",
                out.map(|o| o.status.to_string()).map_err(|e| e.to_string())
            ),
            running = running => {
                if running >= 2 {
                    break;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "hung: the exec's two sleeps did not both start within {HANG:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(run);
    let left = support::wait_until_gone("432101", HANG).await;
    assert!(
        left.is_empty(),
        "the cancelled exec's processes survive: {left:?}"
    );
    let inside = ctx.ok("pgrep -f 'sleep 43210[1]' || true").await;
    assert_eq!(
        inside.trim(),
        "",
        "the cancelled exec's processes survive inside"
    );
}

pub async fn runs_as_an_unprivileged_user(ctx: &Ctx) {
    let out = ctx
        .ok("id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
        .await;
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("1000"));
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
}

pub async fn stdin_and_environment_reach_the_command(ctx: &Ctx) {
    let out = ctx
        .exec(
            ExecRequest::new(["sh", "-c", "cat; echo \"$GREETING\"; pwd"])
                .stdin(b"from stdin\n".to_vec())
                .env("GREETING", "hello")
                .workdir("/tmp"),
        )
        .await;
    assert_eq!(out.stdout.to_text(), "from stdin\nhello\n/tmp\n");
    let mut missing = ctx.exec(ExecRequest::new(["no-such-program"])).await;
    assert!(!missing.status.success());
    let mut err = String::new();
    missing
        .stderr
        .bytes
        .as_slice()
        .read_to_string(&mut err)
        .unwrap();
    missing.stderr.bytes.clear();
    assert_eq!(
        missing.status,
        ExitStatus::Exited(127),
        "as a shell says it"
    );
    assert!(err.contains("command not found"), "{err}");
}
