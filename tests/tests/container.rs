//! The container image, built and run here with podman (and runc), with
//! no container registry: `deploy/image.sh base` imports a debootstrapped
//! base (cached under /var/cache/forgehand), `deploy/image.sh build
//! --offline` builds the Containerfile's runtime stage around the binary
//! these tests run. Inside it, with the flags `deploy/image.sh flags`
//! prints, `forgehand doctor` finds a usable sandbox and `forgehand
//! serve` answers a signed webhook 202, reads its mounted configuration
//! and logs plain text; without them it refuses to start and names them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use forgehand_tests::fake_forge::{FakeForge, Kind};
use forgehand_tests::harness::github_headers;
use forgehand_tests::project::TOKEN;
use forgehand_tests::story::forgehand_binary;

const TAG: &str = "localhost/forgehand:dev";
const SECRET: &str = "container-webhook-secret";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .args(args)
        .output()
        .expect("podman (Debian packages podman and runc): scripts/lib.sh container_packages installs them, tests/run.sh calls that")
}

fn image_sh(args: &[&str]) -> Output {
    Command::new("bash")
        .arg("deploy/image.sh")
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

/// Removes the test's container however the test ends.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rm", "--force", "--volumes", "--time", "5", &self.0])
            .output();
    }
}

/// `podman run` arguments every run here shares: runc (crun cannot run
/// the sandbox's nested namespaces here), the host's network, and limits
/// a root without CAP_SYS_RESOURCE may set (podman's default of 1048576
/// open files is refused on such hosts, this one among them).
fn common(port: u16, data: &Path, config: &Path) -> Vec<String> {
    let rootfs = forgehand_tests::rootfs();
    [
        "--runtime=runc".to_owned(),
        "--network=host".to_owned(),
        "--ulimit=nofile=16384:16384".to_owned(),
        "--ulimit=nproc=16384:16384".to_owned(),
        "--health-interval=disable".to_owned(),
        format!(
            "--volume={}:/var/cache/forgehand/rootfs:ro",
            rootfs.display()
        ),
        format!("--volume={}:/var/lib/forgehand", data.display()),
        format!(
            "--volume={}:/etc/forgehand/forgehand.toml:ro",
            config.display()
        ),
        format!("--env=FORGEHAND_SERVER__LISTEN=127.0.0.1:{port}"),
        // The rootfs is mounted, not built on first start.
        "--env=FORGEHAND_BUILD_ROOTFS=0".to_owned(),
    ]
    .into()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_image_runs_a_usable_sandbox_and_answers_a_signed_webhook() {
    let started = Instant::now();
    let out = image_sh(&["base"]);
    assert!(out.status.success(), "deploy/image.sh base: {}", text(&out));
    let binary = forgehand_binary();
    let out = image_sh(&["build", "--offline", "--binary", binary.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "deploy/image.sh build --offline: {}",
        text(&out)
    );
    let built_in = started.elapsed();
    let size: u64 = String::from_utf8_lossy(
        &podman(&["image", "inspect", "--format", "{{.Size}}", TAG]).stdout,
    )
    .trim()
    .parse()
    .unwrap();
    eprintln!(
        "image {TAG}: {} MB, base and build in {:.1} s (binary {})",
        size / 1_000_000,
        built_in.as_secs_f64(),
        binary.display()
    );
    assert!(size < 600_000_000, "the image grew to {size} bytes");
    let health = text(&podman(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config.Healthcheck}}",
        TAG,
    ]));
    assert!(
        health.contains("/usr/local/lib/forgehand/healthcheck"),
        "{health}"
    );

    let flags: Vec<String> = String::from_utf8_lossy(&image_sh(&["flags"]).stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(flags.contains(&"--privileged".to_owned()), "{flags:?}");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    // A (fake) GitHub on this host, which the container reaches too.
    let github = FakeForge::start(Kind::GitHub).await.unwrap();
    github.with(|s| s.tokens.insert(TOKEN.into(), "forgehand".into()));
    // And the model server doctor asks (the scripted one, on this host).
    let model = forgehand_tests::model_server::ModelServer::start(vec![])
        .await
        .unwrap();
    let config = dir.path().join("forgehand.toml");
    std::fs::write(
        &config,
        format!(
            "[github]\napi_url = \"{}\"\ntoken = \"{TOKEN}\"\nwebhook_secret = [\"{SECRET}\"]\n\n[queue]\nworkers = 1\n\n[model]\nbase_url = \"{}\"\n",
            github.base_url,
            model.url_for("openai")
        ),
    )
    .unwrap();
    let port = free_port();
    let base: Vec<String> = common(port, &data, &config);

    // doctor, in the container, with the flags: a usable sandbox.
    let mut args: Vec<String> = vec!["run".into(), "--rm".into()];
    args.extend(base.iter().cloned());
    args.extend(flags.iter().cloned());
    args.extend([TAG.to_owned(), "doctor".to_owned()]);
    let out = podman(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let report = text(&out);
    assert!(out.status.success(), "doctor in the container:\n{report}");
    assert!(
        report.contains(
            "backend namespace  usable: bubblewrap namespaces as host user forgehand-sandbox"
        ),
        "{report}"
    );
    assert!(
        report.contains("sandbox.backend = \"namespace\": jobs run in the namespace backend"),
        "{report}"
    );
    // As official images do: `forgehand doctor` runs the same, and a
    // command that is not forgehand's runs as itself (issue 24: the
    // entrypoint put `forgehand` before everything).
    let mut args: Vec<String> = vec!["run".into(), "--rm".into()];
    args.extend(base.iter().cloned());
    args.extend(flags.iter().cloned());
    args.extend([TAG.to_owned(), "forgehand".to_owned(), "doctor".to_owned()]);
    let out = podman(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "forgehand doctor in the container:\n{}",
        text(&out)
    );
    assert!(
        text(&out).contains("model              ok: "),
        "{}",
        text(&out)
    );
    let mut args: Vec<String> = vec!["run".into(), "--rm".into()];
    args.extend(base.iter().cloned());
    args.extend([
        TAG.to_owned(),
        "sh".to_owned(),
        "-c".to_owned(),
        "echo from a shell in $PWD".to_owned(),
    ]);
    let out = podman(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("from a shell in /var/lib/forgehand"),
        "{}",
        text(&out)
    );

    // Without them, serve refuses to start, and says which flags.
    let mut args: Vec<String> = vec!["run".into(), "--rm".into()];
    args.extend(base.iter().cloned());
    args.extend([
        "--env=FORGEHAND_SANDBOX__BACKEND=namespace".to_owned(),
        TAG.to_owned(),
    ]);
    let out = podman(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let refusal = text(&out);
    assert!(
        !out.status.success(),
        "serve started without the flags:\n{refusal}"
    );
    assert!(
        refusal.contains("no sandbox for the agent's tools"),
        "{refusal}"
    );
    assert!(
        refusal.contains("bash deploy/image.sh flags --backend namespace"),
        "{refusal}"
    );
    assert!(refusal.contains("--privileged"), "{refusal}");

    // serve, with them: healthy, ready, and a signed webhook answered 202.
    let name = format!("forgehand-test-{}", std::process::id());
    let _container = Container(name.clone());
    let mut args: Vec<String> = vec!["run".into(), "--detach".into(), format!("--name={name}")];
    args.extend(base.iter().cloned());
    args.extend(flags.iter().cloned());
    args.push(TAG.to_owned());
    let out = podman(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", text(&out));
    let url = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = client.get(format!("{url}/readyz")).send().await {
            if r.status() == 200 {
                break;
            }
        }
        let logs = text(&podman(&["logs", &name]));
        assert!(Instant::now() < deadline, "not ready within 60 s:\n{logs}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let ready: serde_json::Value = client
        .get(format!("{url}/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["sandbox"]["backend"], "namespace", "{ready}");
    assert_eq!(ready["sandbox"]["rootfs_ready"], true, "{ready}");
    let check = podman(&["healthcheck", "run", &name]);
    assert!(
        check.status.success(),
        "the image's health check: {}",
        text(&check)
    );

    let body = forgehand_tests::testdata::read("github/webhook-examples/ping/none.1.json");
    let mut request = client
        .post(format!("{url}/webhooks/github"))
        .body(body.clone());
    for (k, v) in github_headers(SECRET, "ping", "container-ping-1", &body) {
        request = request.header(k, v);
    }
    let answer = request
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 202, "{}", answer.text().await.unwrap());
    // Signed with another secret: refused.
    let mut forged = client
        .post(format!("{url}/webhooks/github"))
        .body(body.clone());
    for (k, v) in github_headers("not-the-secret", "ping", "container-ping-2", &body) {
        forged = forged.header(k, v);
    }
    assert_eq!(forged.send().await.unwrap().status(), 401);

    let logs = text(&podman(&["logs", &name]));
    assert!(
        logs.contains("configuration from /etc/forgehand/forgehand.toml"),
        "{logs}"
    );
    assert!(logs.contains("forgehand is serving"), "{logs}");
    assert!(
        !logs.contains('\u{1b}'),
        "colour codes in the container's log:\n{logs:?}"
    );
    // The database is in the data volume.
    assert!(data.join("forgehand.db").exists());

    // An intake-only node needs no sandbox: it runs as the image's
    // unprivileged user, with no extra rights.
    let intake_port = free_port();
    let intake_name = format!("forgehand-test-intake-{}", std::process::id());
    let _intake = Container(intake_name.clone());
    let mut args: Vec<String> = vec![
        "run".into(),
        "--detach".into(),
        format!("--name={intake_name}"),
        "--user=forgehand".into(),
    ];
    let intake_flags: Vec<String> =
        String::from_utf8_lossy(&image_sh(&["flags", "--backend", "intake"]).stdout)
            .lines()
            .map(str::to_owned)
            .collect();
    args.extend(
        common(intake_port, &dir.path().join("intake-data"), &config)
            .into_iter()
            .filter(|a| !a.contains("/var/lib/forgehand")),
    );
    args.extend(intake_flags);
    args.push(TAG.to_owned());
    let out = podman(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", text(&out));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = client
            .get(format!("http://127.0.0.1:{intake_port}/readyz"))
            .send()
            .await;
        if ready.is_ok_and(|r| r.status() == 200) {
            break;
        }
        let logs = text(&podman(&["logs", &intake_name]));
        assert!(
            Instant::now() < deadline,
            "the intake node was not ready within 60 s:\n{logs}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let uid = text(&podman(&["exec", &intake_name, "id", "-u"]));
    assert_ne!(uid.trim(), "0", "the intake node runs as root");
}
