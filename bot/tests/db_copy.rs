//! Issue 29: `forgehand db copy` from SQLite to PostgreSQL. A SQLite
//! database with deliveries of every outcome (their replay digests and
//! refusal records), jobs of every state with their runs, and
//! installations is copied into a new PostgreSQL database (the harness
//! starts a real one); then the operator API of a server on PostgreSQL
//! shows exactly what the one on SQLite showed, the queue goes on from
//! there, and a second copy into the now non-empty database is refused.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use forgehand_bot::store::{
    Finish, InstallationChange, InstallationUpdate, IntakeWriter, NewDelivery, Outcome,
    PayloadDigest, Recorded, SqliteStore, Store,
};
use forgehand_forge::ForgeKind;
use forgehand_store_test_support::PgServer;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

fn delivery(id: &str, outcome: Outcome, targets: &[u64]) -> NewDelivery {
    NewDelivery {
        forge: ForgeKind::Github,
        delivery_id: Some(id.into()),
        event: Some("issues".into()),
        event_name: Some("issues.assigned".into()),
        outcome,
        status_code: if outcome == Outcome::Rejected {
            401
        } else {
            202
        },
        reason: (outcome == Outcome::Rejected).then(|| "bad signature".into()),
        repo: Some("acme/widgets".into()),
        target: targets.first().copied(),
        sender: Some("maintainer".into()),
        detail: None,
        payload: None,
        jobs: targets.iter().map(|&t| common::job(t)).collect(),
        installation: None,
        digest: (outcome != Outcome::Rejected)
            .then(|| PayloadDigest::of(ForgeKind::Github, id.as_bytes())),
        received_at: forgehand_store::time::now_ms(),
    }
}

const LEASE: Duration = Duration::from_secs(600);

/// A SQLite store holding every kind of row the copy moves.
async fn populated(store: &SqliteStore) {
    let mut batch: Vec<NewDelivery> = (1..=7)
        .map(|n| delivery(&format!("d-{n}"), Outcome::Accepted, &[n]))
        .collect();
    batch.push(delivery("refused", Outcome::Rejected, &[]));
    let mut installed = delivery("install", Outcome::Ignored, &[]);
    installed.installation = Some(InstallationChange {
        id: 42,
        account: "acme".into(),
        update: InstallationUpdate::Installed {
            repositories: vec!["acme/widgets".into(), "acme/gadgets".into()],
        },
    });
    batch.push(installed);
    let recorded = store.record_deliveries(&batch).await.unwrap();
    assert!(recorded.iter().all(|r| matches!(r, Recorded::New { .. })));
    // The same delivery again, and the same body under another id.
    let again = store
        .record_deliveries(&[delivery("d-1", Outcome::Accepted, &[1])])
        .await
        .unwrap();
    assert!(matches!(again[0], Recorded::Duplicate { .. }), "{again:?}");

    // Jobs 1–7, one per target: succeeded, failed, dead, retried and
    // waiting, running, cancelled, waiting.
    let claim = || async { store.claim_job("w", LEASE).await.unwrap().unwrap() };
    let finish = |job, finish| async move {
        assert!(store.finish_job(&job, "w", finish).await.unwrap());
    };
    finish(
        claim().await,
        Finish::Succeeded {
            result: serde_json::json!({"pull_request": 9}),
        },
    )
    .await;
    finish(
        claim().await,
        Finish::Failed {
            error: "the gate refused".into(),
        },
    )
    .await;
    finish(
        claim().await,
        Finish::Dead {
            error: "out of attempts".into(),
        },
    )
    .await;
    finish(
        claim().await,
        Finish::Retry {
            error: "the forge answered 502".into(),
            run_at: forgehand_store::time::now_ms() + 3_600_000,
        },
    )
    .await;
    let _running = claim().await;
    let sixth = claim().await;
    finish(
        sixth,
        Finish::Cancelled {
            reason: "stopped by @maintainer".into(),
        },
    )
    .await;
}

/// The operator API and the metrics of a server over `store`.
async fn seen(config: &forgehand_bot::config::Config, store: Arc<dyn Store>) -> Vec<Value> {
    let intake = IntakeWriter::spawn(
        store.intake_log().unwrap(),
        16,
        Arc::new(tokio::sync::Notify::new()),
    );
    let state = forgehand_bot::server::AppState::new(config, store, intake);
    let router = forgehand_bot::server::router(state);
    let get = |path: String| {
        let router = router.clone();
        async move {
            let response = router
                .oneshot(
                    Request::get(&path)
                        .header("authorization", format!("Bearer {}", common::API_TOKEN))
                        .body(Body::empty())
                        .unwrap(),
                )
                .await
                .unwrap();
            assert!(response.status().is_success(), "{path}");
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            serde_json::from_slice::<Value>(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        }
    };
    let jobs = get("/api/jobs?limit=100".into()).await;
    let mut out = vec![jobs.clone(), get("/api/deliveries?limit=100".into()).await];
    for job in jobs["jobs"].as_array().unwrap() {
        out.push(get(format!("/api/jobs/{}", job["id"])).await);
    }
    let metrics = get("/metrics".into()).await;
    let counts: Vec<String> = metrics
        .as_str()
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("forgehand_jobs{"))
        .map(str::to_owned)
        .collect();
    out.push(Value::from(counts));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_database_copied_to_postgres_is_seen_whole() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::config_for(dir.path());
    let from = config.database.url.clone();
    let sqlite = SqliteStore::connect(&from).await.unwrap();
    populated(&sqlite).await;
    let before = seen(&config, Arc::new(sqlite.clone())).await;
    let states: Vec<&str> = before[0]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["state"].as_str().unwrap())
        .collect();
    for state in [
        "queued",
        "running",
        "succeeded",
        "failed",
        "dead",
        "cancelled",
    ] {
        assert!(states.contains(&state), "no {state} job: {states:?}");
    }
    assert!(
        before.last().unwrap().as_array().unwrap().len() >= 6,
        "the metrics count every state: {:?}",
        before.last()
    );
    drop(sqlite);

    let server = PgServer::shared();
    let to = server.create_database().await.unwrap();
    let copied = forgehand_bot::cli::db::copy(&config, &from, &to)
        .await
        .unwrap();
    let rows = |table: &str| {
        copied
            .tables
            .iter()
            .find(|(t, _)| *t == table)
            .map(|(_, n)| *n)
            .unwrap()
    };
    assert_eq!(rows("deliveries"), 10, "{copied:?}");
    assert_eq!(rows("jobs"), 7, "{copied:?}");
    assert_eq!(rows("job_runs"), 6, "{copied:?}");
    assert_eq!(rows("installations"), 1, "{copied:?}");
    assert_eq!(rows("installation_repositories"), 2, "{copied:?}");
    assert_eq!(rows("payload_digests"), 8, "{copied:?}");

    let mut on_pg = config.clone();
    on_pg.database.url = to.clone();
    let opened = forgehand_bot::service::open_store(&on_pg).await.unwrap();
    let store = opened.store.clone();
    let after = seen(&on_pg, store.clone()).await;
    assert_eq!(before, after);
    let installations = store.installations().await.unwrap();
    assert_eq!(installations.len(), 1);

    // The queue goes on from the copy: new ids after the copied ones, the
    // replay digests still known, the waiting job claimed.
    let recorded = store
        .record_deliveries(&[
            delivery("d-8", Outcome::Accepted, &[8]),
            delivery("d-2", Outcome::Accepted, &[2]),
        ])
        .await
        .unwrap();
    match &recorded[0] {
        Recorded::New { jobs, .. } => assert_eq!(jobs[0].get(), 8, "{recorded:?}"),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(recorded[1], Recorded::Duplicate { .. }),
        "{recorded:?}"
    );
    let claimed = store.claim_job("w2", LEASE).await.unwrap().unwrap();
    assert_eq!(claimed.id.get(), 7, "the waiting job first");

    // A second copy into a database that is not empty is refused.
    let error = forgehand_bot::cli::db::copy(&config, &from, &to)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("is not empty"), "{error}");
    assert!(!error.contains(&to), "the URL as given: {error}");
}

/// `forgehand db migrate` makes a new PostgreSQL database's schema, for
/// deployments that run the service with `database.migrate = false`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_migrate_makes_the_schema() {
    let server = PgServer::shared();
    let url = server.create_database().await.unwrap();
    let options = forgehand_store_pg::PgOptions::default();
    let bare = forgehand_store_pg::PgStore::connect_without_migrating(&url, &options)
        .await
        .unwrap();
    assert!(bare.job_counts().await.is_err(), "no schema yet");
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_forgehand"))
        .args(["db", "migrate"])
        .current_dir(dir.path())
        .env("FORGEHAND_DATABASE__URL", &url)
        .env("FORGEHAND_DATABASE__MIGRATE", "false")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("the schema is current"), "{said}");
    bare.job_counts().await.unwrap();
}

/// `/readyz` fails while the database cannot be reached (a load balancer
/// then sends the forge's webhooks to a replica that can record them),
/// and the replica's workers keep nothing half-done: nothing to show but
/// the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_fails_while_postgres_is_gone() {
    let server = PgServer::start_private().unwrap();
    let url = server.create_database().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::config_for(dir.path());
    config.database.url = url;
    config.queue.workers = 0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(forgehand_bot::service::serve_on(
        listener,
        config,
        forgehand_bot::service::Runner::logging(),
        async move {
            let _ = stopped.await;
        },
    ));
    let ready = || async {
        reqwest::get(format!("{base}/readyz"))
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while ready().await != 200 {
        assert!(std::time::Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = ready().await;
        if status == 503 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still {status} with the database gone"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), serving).await;
}
