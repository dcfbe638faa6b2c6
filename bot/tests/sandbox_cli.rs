//! `forgehand sandbox exec`, `forgehand doctor` and what a worker node
//! says about its sandbox in `/readyz`, through the real binary with the
//! namespace backend and the guest rootfs (tests/run.sh builds it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn rootfs() -> PathBuf {
    let path = std::env::var_os("FORGEHAND_TEST_ROOTFS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/forgehand/rootfs"));
    assert!(
        path.join("bin/sh").exists(),
        "no guest rootfs at {} (build it: images/build-rootfs; tests/run.sh does)",
        path.display()
    );
    path
}

fn forgehand(args: &[&str], env: &[(&str, &str)], dir: &Path) -> Output {
    let rootfs = rootfs();
    let mut command = Command::new(env!("CARGO_BIN_EXE_forgehand"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FORGEHAND_SANDBOX__ROOTFS", &rootfs)
        .current_dir(dir);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("the forgehand binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn sandbox_exec_streams_both_outputs_and_exits_with_the_commands_status() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("input.txt"), "from the host\n").unwrap();
    let workdir = dir.path().to_str().unwrap();
    let out = forgehand(
        &[
            "sandbox",
            "exec",
            "--backend",
            "namespace",
            "--workdir",
            workdir,
            "--",
            "sh",
            "-c",
            "cat input.txt; echo to-stderr >&2; echo made > output.txt; exit 7",
        ],
        &[],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "from the host\n");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("to-stderr\n"), "{stderr}");
    assert!(
        stderr.contains("the host's kernel is shared"),
        "the isolation is said: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("output.txt")).unwrap(),
        "made\n"
    );
}

#[test]
fn sandbox_exec_reports_truncation_and_the_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let out = forgehand(
        &[
            "sandbox",
            "exec",
            "--backend",
            "namespace",
            "--",
            "sh",
            "-c",
            "head -c 10000 /dev/zero; sleep 30",
        ],
        &[
            ("FORGEHAND_SANDBOX__OUTPUT_LIMIT_BYTES", "4096"),
            ("FORGEHAND_SANDBOX__TIMEOUT_SECS", "1"),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    // Streamed whole: the cap bounds what the sandbox keeps, not what
    // the command line prints as it comes.
    assert_eq!(out.stdout.len(), 10000);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("killed at the time limit"), "{stderr}");
}

#[test]
fn sandbox_exec_says_why_a_backend_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = forgehand(
        &["sandbox", "exec", "--backend", "microvm", "--", "true"],
        &[],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(125));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("microvm sandbox backend is not usable"),
        "{stderr}"
    );

    let out = forgehand(
        &["sandbox", "exec", "--backend", "namespace", "--", "true"],
        &[("FORGEHAND_SANDBOX__ROOTFS", "/nonexistent/rootfs")],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains("images/build-rootfs"),
        "{}",
        text(&out.stderr)
    );

    let out = forgehand(
        &["sandbox", "exec", "--backend", "docker", "--", "true"],
        &[],
        dir.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap refuses an unknown backend"
    );
    assert!(text(&out.stderr).contains("expected auto, microvm or namespace"));
}

/// A model server that answers every request 404 (reachable, knows no
/// route): what `doctor` asks of a model is that it answers.
fn answering_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    format!("http://{address}/v1")
}

#[test]
fn doctor_checks_the_model_server() {
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let out = forgehand(
        &["doctor"],
        &[("FORGEHAND_MODEL__BASE_URL", &nobody)],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("model              PROBLEM: cannot reach the model at")
            && stdout.contains("Set model.base_url"),
        "{stdout}"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no configuration file"),
        "doctor says which file it read: {stderr}"
    );
    let url = answering_server();
    let out = forgehand(
        &["doctor"],
        &[("FORGEHAND_MODEL__BASE_URL", &url)],
        dir.path(),
    );
    assert!(
        text(&out.stdout).contains(&format!("model              ok: {url} answers")),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn doctor_reports_each_backend_and_the_rootfs() {
    let dir = tempfile::tempdir().unwrap();
    let url = answering_server();
    let model = [("FORGEHAND_MODEL__BASE_URL", url.as_str())];
    let out = forgehand(&["doctor"], &model, dir.path());
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("backend microvm    NOT usable"), "{stdout}");
    assert!(
        stdout.contains("backend namespace  usable: bubblewrap namespaces"),
        "{stdout}"
    );
    assert!(stdout.contains("guest rootfs       usable"), "{stdout}");
    assert!(
        stdout.contains("jobs run in the namespace backend"),
        "{stdout}"
    );
    assert!(
        stdout.contains("WARNING: sandboxes use Linux namespaces"),
        "{stdout}"
    );

    let out = forgehand(
        &["doctor"],
        &[
            ("FORGEHAND_SANDBOX__ROOTFS", "/nonexistent/rootfs"),
            model[0],
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("guest rootfs       NOT usable: no guest rootfs at /nonexistent/rootfs: build it with images/build-rootfs"));

    let out = forgehand(
        &["doctor"],
        &[("FORGEHAND_SANDBOX__BACKEND", "microvm")],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1), "microvm fails closed");
    assert!(
        text(&out.stdout).contains("jobs cannot run"),
        "{}",
        text(&out.stdout)
    );
}

/// A worker node says which sandbox it uses, and is not ready without its
/// rootfs; `microvm` where none boots refuses to start.
#[tokio::test]
async fn readyz_shows_the_sandbox_and_microvm_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let body = ready_body(dir.path(), &[]).await;
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(body["sandbox"]["backend"], "namespace");
    assert!(body["sandbox"]["warning"]
        .as_str()
        .unwrap()
        .contains("kernel is shared"));

    let body = ready_body(
        dir.path(),
        &[("FORGEHAND_SANDBOX__ROOTFS", "/nonexistent/rootfs")],
    )
    .await;
    assert_eq!(body["ready"], false, "{body}");
    assert!(body["sandbox"]["rootfs"]
        .as_str()
        .unwrap()
        .contains("images/build-rootfs"));

    let out = forgehand(
        &["serve"],
        &[
            ("FORGEHAND_SANDBOX__BACKEND", "microvm"),
            ("FORGEHAND_SERVER__LISTEN", "127.0.0.1:0"),
            (
                "FORGEHAND_DATABASE__URL",
                &format!("sqlite://{}/m.db", dir.path().display()),
            ),
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no sandbox for the agent's tools"),
        "{}",
        text(&out.stderr)
    );
}

async fn ready_body(dir: &Path, env: &[(&str, &str)]) -> serde_json::Value {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_forgehand"));
    command
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
        .env("FORGEHAND_SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env(
            "FORGEHAND_DATABASE__URL",
            format!("sqlite://{}/r-{port}.db", dir.display()),
        )
        .env("FORGEHAND_QUEUE__WORKERS", "1")
        .env("FORGEHAND_LOG__LEVEL", "warn")
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        if let Ok(r) = client
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await
        {
            break r.json::<serde_json::Value>().await.unwrap();
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "forgehand exited during start-up"
        );
        assert!(Instant::now() < deadline, "no answer on /readyz");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    child.kill().unwrap();
    child.wait().unwrap();
    body
}

/// Ctrl-C in the middle of a command: the sandbox is destroyed (nothing
/// of it keeps running) and the directory is given back to its owner, not
/// left to the sandbox's user.
#[test]
fn an_interrupted_sandbox_exec_gives_the_directory_back() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mine.txt"), "the operator's\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_forgehand"))
        .args(["sandbox", "exec", "--backend", "namespace", "--workdir"])
        .arg(dir.path())
        .args(["--", "sh", "-c", "touch made-inside; exec sleep 8317"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.path().join("made-inside").exists() {
        assert!(Instant::now() < deadline, "the command never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for name in ["", "mine.txt", "made-inside"] {
        let meta = std::fs::metadata(dir.path().join(name)).unwrap();
        assert_eq!(meta.uid(), me, "{name:?} after the interrupt");
    }
    let left = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("8317"))
                .unwrap_or(false)
        })
        .count();
    assert_eq!(left, 0, "the sandbox's process survived");
}
