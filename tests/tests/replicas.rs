//! Issue 29: several hosts, one queue. Three `forgehand serve` replicas
//! on one PostgreSQL (started by the harness), each with data
//! directories of its own as separate hosts would have, behind a
//! round-robin balancer the forge's webhooks go through. Twenty labelled
//! issues on three repositories; one replica is SIGKILLed while it holds
//! running jobs. Every issue ends with exactly one pull request and one
//! status comment, every delivery answered 202 is in the database, and
//! no job's agent stage completes twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use forgehand_store_test_support::PgServer;
use forgehand_tests::fake_forge::{FakeForge, Kind};
use forgehand_tests::model_server::{ModelServer, Step};
use forgehand_tests::project::{good_script, ServedProject, TOKEN};
use forgehand_tests::story::{forgehand_binary, BOT, MAINTAINER, STATUS_MARKER};
use serde_json::Value;

const SECRET: &str = "replica-webhook-secret";
const API_TOKEN: &str = "replica-operator-token";
const REPOS: [&str; 3] = ["acme/one", "acme/two", "acme/three"];

/// Round-robin to the replicas that answer, as a load balancer with
/// health checks would; records what each delivery was answered.
#[derive(Clone)]
struct Balancer {
    replicas: Arc<Vec<String>>,
    next: Arc<AtomicUsize>,
    client: reqwest::Client,
    /// (delivery id, status, replica index)
    answered: Arc<Mutex<Vec<(String, u16, usize)>>>,
}

async fn balance(
    State(b): State<Balancer>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let start = b.next.fetch_add(1, Ordering::Relaxed);
    let delivery = headers
        .get("x-github-delivery")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    for i in 0..b.replicas.len() {
        let n = (start + i) % b.replicas.len();
        let mut request = b
            .client
            .post(format!("{}/webhooks/github", b.replicas[n]))
            .body(body.clone());
        for (name, value) in &headers {
            if name != "host" && name != "content-length" {
                request = request.header(name, value);
            }
        }
        if let Ok(answer) = request.send().await {
            let status = answer.status().as_u16();
            b.answered
                .lock()
                .unwrap()
                .push((delivery.clone(), status, n));
            let text = answer.text().await.unwrap_or_default();
            return (StatusCode::from_u16(status).unwrap(), text);
        }
    }
    (StatusCode::BAD_GATEWAY, "no replica answered".into())
}

struct Replica {
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

/// A replica outlives no test, a failing one included.
impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `forgehand serve` as host `n`: its own data, mirrors, jobs,
/// transcripts and environments; the shared database.
fn start_replica(
    n: usize,
    dir: &Path,
    database: &str,
    forge: &FakeForge,
    model: &ModelServer,
) -> Replica {
    let host = dir.join(format!("host-{n}"));
    std::fs::create_dir_all(&host).unwrap();
    let port = free_port();
    let log = host.join("forgehand.log");
    let path = |p: &str| host.join(p).display().to_string();
    let child = Command::new(forgehand_binary())
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FORGEHAND_SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env("FORGEHAND_SERVER__DATA_DIR", path("data"))
        .env("FORGEHAND_DATABASE__URL", database)
        .env("FORGEHAND_DATABASE__POOL_SIZE", "4")
        .env("FORGEHAND_GITHUB__API_URL", &forge.base_url)
        .env("FORGEHAND_GITHUB__TOKEN", TOKEN)
        .env("FORGEHAND_GITHUB__WEBHOOK_SECRET", SECRET)
        .env("FORGEHAND_API__TOKEN", API_TOKEN)
        .env("FORGEHAND_BOT__USERNAME", BOT)
        .env("FORGEHAND_QUEUE__WORKERS", "2")
        .env("FORGEHAND_QUEUE__LEASE_SECS", "3")
        .env("FORGEHAND_QUEUE__POLL_INTERVAL_MS", "200")
        .env("FORGEHAND_QUEUE__RETRY_BASE_SECS", "1")
        .env("FORGEHAND_MODEL__PROVIDER", "openai")
        .env("FORGEHAND_MODEL__BASE_URL", model.url_for("openai"))
        .env("FORGEHAND_MODEL__NAME", "scripted-model")
        .env("FORGEHAND_MODEL__RETRY_BASE_MS", "20")
        .env("FORGEHAND_SANDBOX__BACKEND", "namespace")
        .env(
            "FORGEHAND_SANDBOX__ROOTFS",
            forgehand_tests::rootfs().display().to_string(),
        )
        .env("FORGEHAND_GIT__MIRROR_DIR", path("mirrors"))
        .env("FORGEHAND_GIT__WORK_DIR", path("jobs"))
        .env("FORGEHAND_AGENT__TRANSCRIPT_DIR", path("transcripts"))
        .env("FORGEHAND_ENVIRONMENT__CACHE_DIR", path("environments"))
        .current_dir(&host)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Replica {
        port,
        child: Some(child),
        log,
    }
}

async fn wait_ready(replica: &mut Replica) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = reqwest::get(format!("http://127.0.0.1:{}/readyz", replica.port))
            .await
            .is_ok_and(|r| r.status() == 200);
        if ready {
            return;
        }
        if let Some(status) = replica.child.as_mut().unwrap().try_wait().unwrap() {
            panic!(
                "a replica exited at start ({status}):\n{}",
                std::fs::read_to_string(&replica.log).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "a replica was not ready in 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The case an issue's task names (`case R-N`), from a request's first
/// user message.
fn case_of(body: &Value) -> Option<String> {
    let first = body["messages"]
        .as_array()?
        .iter()
        .find(|m| m["role"] == "user")?;
    let text = first["content"].as_str()?.to_owned();
    let at = text.find("case ")?;
    let rest = &text[at + 5..];
    Some(
        rest.split_whitespace()
            .next()?
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_share_the_work_and_survive_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let database = PgServer::shared().create_database().await.unwrap();
    let forge = FakeForge::start(Kind::GitHub).await.unwrap();
    let mut projects = Vec::new();
    for (r, repo) in REPOS.iter().enumerate() {
        let project =
            ServedProject::start(Kind::GitHub, &dir.path().join(format!("repo-{r}"))).await;
        forge.with(|s| {
            s.bot_token(Kind::GitHub, repo, TOKEN, BOT);
            s.permissions
                .insert(((*repo).into(), MAINTAINER.into()), "write".into());
        });
        forge.set_clone_url(repo, &project.clone_url);
        forge.set_git_dir(repo, &dir.path().join(format!("repo-{r}/served/demo.git")));
        projects.push(project);
    }
    // Twenty issues over the three repositories; `case R-N` names each.
    let mut issues = Vec::new();
    for i in 0..20 {
        let r = i % REPOS.len();
        let number = forge.with(|s| {
            s.add_issue(
                REPOS[r],
                MAINTAINER,
                &format!("Fix add (case {r}-{i})"),
                &format!("add() subtracts: case {r}-{i}."),
            )
        });
        issues.push((r, number, format!("{r}-{i}")));
    }
    // Every job's model holds its first answer a while, so that each
    // replica is running jobs when one is killed.
    let mut script = good_script();
    script[0] = Step::Slow {
        delay: Duration::from_millis(2500),
        then: Box::new(script[0].clone()),
    };
    let model = ModelServer::routed(vec![("", script)]).await.unwrap();

    let mut replicas: Vec<Replica> = (0..3)
        .map(|n| start_replica(n, dir.path(), &database, &forge, &model))
        .collect();
    for replica in &mut replicas {
        wait_ready(replica).await;
    }
    let balancer = Balancer {
        replicas: Arc::new(
            replicas
                .iter()
                .map(|r| format!("http://127.0.0.1:{}", r.port))
                .collect(),
        ),
        next: Arc::new(AtomicUsize::new(0)),
        client: reqwest::Client::new(),
        answered: Arc::new(Mutex::new(Vec::new())),
    };
    let app = Router::new()
        .route("/webhooks/github", post(balance))
        .with_state(balancer.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let balancer_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    forge.add_webhook(&format!("{balancer_url}/webhooks/github"), SECRET);
    // Only the bot's pushes count from here (not the seeding's).
    for project in &projects {
        project.git.forget_seen();
    }

    for (r, number, _) in &issues {
        forge.label_issue(REPOS[*r], *number, "forgehand", MAINTAINER);
    }
    forge.settle().await;
    {
        let answered = balancer.answered.lock().unwrap();
        let by_replica: Vec<usize> = (0..3)
            .map(|n| answered.iter().filter(|a| a.2 == n).count())
            .collect();
        assert!(by_replica.iter().all(|&c| c >= 6), "{by_replica:?}");
    }

    // Each replica's two workers hold a job: then replica 0 dies.
    let pool = sqlx::PgPool::connect(&database).await.unwrap();
    let running = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM jobs WHERE state = 'running'")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while running().await < 6 {
        assert!(Instant::now() < deadline, "never six running jobs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut killed = replicas[0].child.take().unwrap();
    killed.kill().unwrap();
    killed.wait().unwrap();

    // Everything settles on the two replicas left.
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let (done, waiting): (i64, i64) = sqlx::query_as(
            "SELECT COUNT(*) FILTER (WHERE state IN ('succeeded', 'failed', 'dead', 'cancelled')), \
                    COUNT(*) FILTER (WHERE state IN ('queued', 'running')) FROM jobs",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        if waiting == 0 && done >= 20 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not settled: {done} done, {waiting} waiting\n{}",
            std::fs::read_to_string(&replicas[1].log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    forge.settle().await;

    let jobs: Vec<(String, String, i64)> =
        sqlx::query_as("SELECT kind, state, attempts FROM jobs WHERE kind = 'labeled'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(jobs.len(), 20, "{jobs:?}");
    assert!(jobs.iter().all(|j| j.1 == "succeeded"), "{jobs:?}");
    let retried = jobs.iter().filter(|j| j.2 > 1).count();
    assert!(
        retried >= 2,
        "the killed replica's jobs ran again: {jobs:?}"
    );

    // One pull request and one status comment, in its final form, each.
    let (pulls, comments) = forge.with(|s| (s.issues.clone(), s.comments.clone()));
    for (r, number, case) in &issues {
        let closing = pulls
            .iter()
            .filter(|p| p.repo == REPOS[*r] && p.pull.is_some())
            .filter(|p| p.body.contains(&format!("Closes #{number}\n")))
            .count();
        assert_eq!(closing, 1, "case {case}: {closing} pull requests");
        let statuses: Vec<&str> = comments
            .iter()
            .filter(|c| c.repo == REPOS[*r] && c.issue == *number && c.user == BOT)
            .filter(|c| c.body.contains(STATUS_MARKER))
            .map(|c| c.body.as_str())
            .collect();
        assert_eq!(statuses.len(), 1, "case {case}: {statuses:#?}");
        assert!(
            statuses[0].starts_with("✅ Opened #"),
            "case {case}: {}",
            statuses[0]
        );
    }
    assert_eq!(
        pulls.iter().filter(|p| p.pull.is_some()).count(),
        20,
        "no other pull request"
    );

    // Every delivery answered 202 is in the database.
    let recorded: Vec<Option<String>> =
        sqlx::query_scalar("SELECT delivery_id FROM deliveries WHERE status_code = 202")
            .fetch_all(&pool)
            .await
            .unwrap();
    let answered = balancer.answered.lock().unwrap().clone();
    for (delivery, status, _) in answered.iter().filter(|a| a.1 == 202) {
        assert!(
            recorded.contains(&Some(delivery.clone())),
            "delivery {delivery} was answered {status} and is not in the database"
        );
    }

    // No agent stage completed twice: per case, one conversation reached
    // its finish (a killed one stopped before), and each branch was
    // pushed once.
    let mut finished: BTreeMap<String, usize> = BTreeMap::new();
    let last = good_script().len() - 1;
    for request in model.requests() {
        let turns = request.body["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
        if turns == last {
            if let Some(case) = case_of(&request.body) {
                *finished.entry(case).or_default() += 1;
            }
        }
    }
    for (_, _, case) in &issues {
        assert_eq!(finished.get(case), Some(&1), "case {case}: {finished:?}");
    }
    for (r, project) in projects.iter().enumerate() {
        let on_repo = issues.iter().filter(|i| i.0 == r).count();
        let pushes = project
            .git
            .count(forgehand_tests::git_http::GitRequest::PushPack, 200);
        if pushes != on_repo {
            // What ran twice and why, for the failure's reader.
            let runs: Vec<String> = sqlx::query_scalar(
                "SELECT concat_ws(' ', job, attempt, worker, outcome, error) \
                 FROM job_runs ORDER BY job, attempt",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            let seen: Vec<String> = project
                .git
                .seen()
                .iter()
                .map(|s| format!("{} {} {}", s.method, s.path, s.status))
                .collect();
            panic!(
                "{}: {pushes} pushes for {on_repo} issues\nruns: {runs:#?}\ngit: {seen:#?}\nlog 1:\n{}",
                REPOS[r],
                std::fs::read_to_string(&replicas[1].log).unwrap_or_default()
            );
        }
    }
    assert_eq!(forge.violations(), Vec::<String>::new());

    // The killed host comes back, as a rebooted one would: what its jobs
    // left mounted is swept before it serves (and the suite's machine
    // keeps no loop device or overlay per run of this test: it did).
    let mounted = || -> Vec<String> {
        let root = dir.path().display().to_string();
        std::fs::read_to_string("/proc/self/mounts")
            .unwrap()
            .lines()
            .filter_map(|line| line.split(' ').nth(1))
            .filter(|point| point.starts_with(&root))
            .map(str::to_owned)
            .collect()
    };
    // (Whether it had mounted anything yet depends on where its jobs
    // were when it was killed: not asserted.)
    replicas[0] = start_replica(0, dir.path(), &database, &forge, &model);
    wait_ready(&mut replicas[0]).await;
    assert_eq!(mounted(), Vec::<String>::new());
    // The replicas stop as they are dropped.
}
