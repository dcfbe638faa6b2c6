//! The real `forgehand` binary, killed with SIGKILL and started again:
//! nothing it answered 202 for is lost, and every job runs exactly once.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use forgehand_forge::webhook::signature::sign_hex;
use serde_json::Value;

const SECRET: &str = "crash-test-secret";
/// A hang detector for the waits below (a start, 50 deliveries, a few
/// hundred dry-run jobs): far above what they take on a loaded machine,
/// not a claim about speed.
const HANG: Duration = Duration::from_secs(180);
const TOKEN: &str = "crash-test-token";

struct Server {
    child: Child,
    base: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(dir: &Path, workers: usize) -> Server {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_forgehand"))
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FORGEHAND_SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env(
            "FORGEHAND_DATABASE__URL",
            format!("sqlite://{}", dir.join("forgehand.db").display()),
        )
        .env("FORGEHAND_GITHUB__WEBHOOK_SECRET", SECRET)
        .env("FORGEHAND_API__TOKEN", TOKEN)
        .env("FORGEHAND_QUEUE__WORKERS", workers.to_string())
        // The queue's durability is under test here, not the pipeline.
        .env("FORGEHAND_BOT__DRY_RUN", "true")
        .env("FORGEHAND_QUEUE__POLL_INTERVAL_MS", "50")
        .env("FORGEHAND_LOG__LEVEL", "warn")
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the forgehand binary starts");
    Server {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

impl Server {
    async fn wait_ready(&mut self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + HANG;
        while Instant::now() < deadline {
            if let Ok(r) = client.get(format!("{}/readyz", self.base)).send().await {
                if r.status() == 200 {
                    return;
                }
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("forgehand exited during start-up: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("hung: forgehand did not become ready within {HANG:?}");
    }

    async fn api(&self, path: &str) -> Value {
        reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    fn kill(mut self) {
        self.child.kill().unwrap(); // SIGKILL: no shutdown code runs
        self.child.wait().unwrap();
    }

    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        self.child.wait().unwrap()
    }
}

fn labeled_issue(number: u64) -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/testdata/github/webhook-examples/issues/labeled.1.json"
    );
    let raw = std::fs::read(path)
        .unwrap_or_else(|e| panic!("the shared test data is needed at {path}: {e}"));
    let mut value: Value = serde_json::from_slice(&raw).unwrap();
    value["label"]["name"] = "forgehand".into();
    value["issue"]["number"] = number.into();
    // Sent now: a body as old as the example is refused as a replay.
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    value["issue"]["updated_at"] = now.into();
    serde_json::to_vec(&value).unwrap()
}

async fn deliver(
    client: &reqwest::Client,
    base: &str,
    delivery: &str,
    number: u64,
) -> Result<u16, reqwest::Error> {
    let body = labeled_issue(number);
    let signature = format!("sha256={}", sign_hex(SECRET.as_bytes(), &body));
    let response = client
        .post(format!("{base}/webhooks/github"))
        .header("content-type", "application/json")
        .header("x-github-event", "issues")
        .header("x-github-delivery", delivery)
        .header("x-hub-signature-256", signature)
        .body(body)
        .send()
        .await?;
    Ok(response.status().as_u16())
}

async fn all_jobs(server: &Server) -> Vec<Value> {
    server.api("/api/jobs?limit=500").await["jobs"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_accepted_delivery_and_every_job_runs_exactly_once() {
    let dir = tempfile::tempdir().unwrap();

    // An intake-only node takes deliveries from 8 concurrent senders and
    // is killed while they are still sending.
    let mut first = start(dir.path(), 0);
    first.wait_ready().await;
    let base = first.base.clone();
    let answered_202 = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut senders = Vec::new();
    for sender in 0..8u64 {
        let (base, answered_202) = (base.clone(), answered_202.clone());
        senders.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut accepted = Vec::new();
            for n in 0..1000u64 {
                let id = format!("crash-{sender}-{n}");
                match deliver(&client, &base, &id, sender * 1000 + n).await {
                    Ok(202) => {
                        accepted.push(id);
                        answered_202.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    Ok(other) => panic!("unexpected answer {other} for {id}"),
                    Err(_) => break, // the server is gone
                }
            }
            accepted
        }));
    }
    // Once 50 deliveries were answered 202, pull the plug mid-stream.
    let deadline = Instant::now() + HANG;
    while answered_202.load(std::sync::atomic::Ordering::SeqCst) < 50 {
        assert!(
            Instant::now() < deadline,
            "hung: 50 deliveries were not answered within {HANG:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill();
    let mut accepted = BTreeSet::new();
    for sender in senders {
        accepted.extend(sender.await.unwrap());
    }
    assert!(
        accepted.len() >= 50,
        "only {} deliveries were accepted before the kill",
        accepted.len()
    );
    eprintln!("{} deliveries answered 202 before SIGKILL", accepted.len());

    // A node with workers starts on the same database.
    let mut second = start(dir.path(), 2);
    second.wait_ready().await;

    let recorded: BTreeSet<String> = {
        let mut ids = BTreeSet::new();
        let mut before: Option<i64> = None;
        loop {
            let path = match before {
                Some(b) => format!("/api/deliveries?limit=500&before={b}"),
                None => "/api/deliveries?limit=500".to_owned(),
            };
            let page = second.api(&path).await["deliveries"]
                .as_array()
                .unwrap()
                .clone();
            let Some(last) = page.last() else { break };
            before = last["id"].as_i64();
            for d in &page {
                assert_eq!(d["outcome"], "accepted", "{d}");
                assert_eq!(d["jobs"].as_array().unwrap().len(), 1, "{d}");
                ids.insert(d["delivery_id"].as_str().unwrap().to_owned());
            }
        }
        ids
    };
    let lost: Vec<_> = accepted.difference(&recorded).collect();
    assert!(
        lost.is_empty(),
        "answered 202 but lost by the crash: {lost:?}"
    );

    // Every job runs, once. Waits until they all succeeded (a hang
    // detector bounds it); the counts are checked after.
    let deadline = Instant::now() + HANG;
    let expected = recorded.len();
    let (done, seen) = loop {
        let counts = reqwest::get(format!("{}/metrics", second.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let done = metric(&counts, r#"forgehand_jobs{state="succeeded"}"#);
        let seen: usize = [
            "queued",
            "running",
            "succeeded",
            "failed",
            "dead",
            "cancelled",
        ]
        .iter()
        .map(|s| metric(&counts, &format!("forgehand_jobs{{state=\"{s}\"}}")))
        .sum();
        if done >= expected {
            break (done, seen);
        }
        assert!(
            Instant::now() < deadline,
            "hung: {done} of {expected} jobs succeeded within {HANG:?} ({seen} jobs)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(seen, expected, "one job per recorded delivery");
    assert_eq!(done, expected, "every job succeeded");
    let mut checked = 0;
    let mut before: Option<i64> = None;
    loop {
        let path = match before {
            Some(b) => format!("/api/jobs?limit=500&before={b}"),
            None => "/api/jobs?limit=500".to_owned(),
        };
        let page = second.api(&path).await["jobs"].as_array().unwrap().clone();
        let Some(last) = page.last() else { break };
        before = last["id"].as_i64();
        for job in page.iter().take(40) {
            let detail = second.api(&format!("/api/jobs/{}", job["id"])).await;
            let runs = detail["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 1, "job {} ran {} times", job["id"], runs.len());
            assert_eq!(runs[0]["outcome"], "succeeded");
            checked += 1;
        }
        for job in &page {
            assert_eq!(job["attempts"], 1, "{job}");
        }
    }
    assert!(checked >= 40);

    // A redelivery of an id recorded before the crash makes no new job.
    let again = accepted.iter().next().unwrap().clone();
    let status = deliver(&reqwest::Client::new(), &second.base, &again, 1)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(all_jobs(&second).await.len(), expected.min(500));

    let status = second.terminate();
    assert!(status.success(), "SIGTERM ends forgehand cleanly: {status}");
}

fn metric(text: &str, name: &str) -> usize {
    text.lines()
        .find_map(|l| l.strip_prefix(name).map(|v| v.trim().parse().unwrap()))
        .unwrap_or_else(|| panic!("no {name} in metrics"))
}
