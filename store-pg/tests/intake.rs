//! The intake on PostgreSQL: a webhook is answered only once its
//! delivery's commit is durable; and retention prunes what SQLite's does,
//! step for step.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection;

use forgehand_store::job::{Job, Task};
use forgehand_store::{
    DeliveryQuery, Finish, IntakeWriter, JobQuery, NewDelivery, Outcome, PayloadDigest, Recorded,
    Retention, SqliteStore, Store,
};
use forgehand_store_pg::{PgOptions, PgStore};
use forgehand_store_test_support::PgServer;
use forgehand_types::{ForgeKind, Repo};

const DAY: i64 = 24 * 60 * 60 * 1000;

fn delivery(id: &str, outcome: Outcome, at: i64, target: u64, jobs: usize) -> NewDelivery {
    let job = Job {
        forge: ForgeKind::Github,
        repo: Repo {
            owner: "acme".into(),
            name: "widgets".into(),
            clone_url: None,
            default_branch: None,
            private: false,
        },
        target,
        on_pull_request: false,
        requested_by: "m".into(),
        task: Task::Assigned,
    };
    NewDelivery {
        forge: ForgeKind::Github,
        delivery_id: Some(id.into()),
        event: Some("issues".into()),
        event_name: None,
        outcome,
        status_code: if outcome == Outcome::Rejected {
            401
        } else {
            202
        },
        reason: None,
        repo: None,
        target: Some(target),
        sender: None,
        detail: None,
        payload: None,
        jobs: vec![(&job).into(); jobs],
        installation: None,
        digest: (outcome != Outcome::Rejected)
            .then(|| PayloadDigest::of(ForgeKind::Github, id.as_bytes())),
        received_at: at,
    }
}

/// A commit that cannot become durable (it waits for a synchronous
/// standby that never comes) holds the answer back: the intake writer
/// answers only when the commit returns, and what it wrote is seen by
/// nobody before. Once the standby is no longer required, the commit
/// returns and the answer goes out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_intake_answers_only_after_its_commit_is_durable() {
    // The standby setting is the whole server's: a server of its own.
    let server = PgServer::start_private().unwrap();
    let url = server.create_database().await.unwrap();
    let store = PgStore::connect(&url, &PgOptions::default()).await.unwrap();
    let writer = |store: PgStore| async move {
        let log = tokio::task::spawn_blocking(move || store.intake_log().unwrap())
            .await
            .unwrap();
        IntakeWriter::spawn(log, 8, Arc::new(tokio::sync::Notify::new()))
    };
    writer(store.clone())
        .await
        .record(delivery("before", Outcome::Accepted, 1, 1, 1))
        .await
        .unwrap();

    let standby = |names: &'static str| {
        let server = &server;
        async move {
            server
                .execute(
                    "postgres",
                    &format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'"),
                )
                .await
                .unwrap();
            server
                .execute("postgres", "SELECT pg_reload_conf()")
                .await
                .unwrap();
        }
    };
    standby("a_standby_that_never_comes").await;
    // The reload reaches running backends when it reaches them (a flake
    // under load: the held commits went through before their backend saw
    // the standby). A connection opened once the server has the setting
    // is forked with it: the held deliveries go through such a one.
    let mut applied = false;
    for _ in 0..3000 {
        let mut fresh = sqlx::PgConnection::connect(&url).await.unwrap();
        let names: String = sqlx::query_scalar("SHOW synchronous_standby_names")
            .fetch_one(&mut fresh)
            .await
            .unwrap();
        fresh.close().await.unwrap();
        if names == "a_standby_that_never_comes" {
            applied = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(applied, "the server never took the standby setting");
    let writer = writer(store.clone()).await;
    let pending: Vec<_> = ["held-1", "held-2"]
        .into_iter()
        .map(|id| {
            let writer = writer.clone();
            tokio::spawn(async move {
                writer
                    .record(delivery(id, Outcome::Accepted, 1, 1, 1))
                    .await
            })
        })
        .collect();
    // The commit is waiting for the standby: the server says so.
    let mut waiting = false;
    for _ in 0..3000 {
        let waits: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        if waits > 0 {
            waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(waiting, "the intake's commit never waited for the standby");
    for answer in &pending {
        assert!(!answer.is_finished(), "answered before the commit returned");
    }
    let listed = |store: PgStore| async move {
        store
            .list_deliveries(&DeliveryQuery {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_iter()
            .filter_map(|d| d.delivery_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        listed(store.clone()).await,
        ["before"],
        "seen before it is durable"
    );

    standby("").await;
    for answer in pending {
        let recorded = tokio::time::timeout(Duration::from_secs(30), answer)
            .await
            .expect("the commit never returned")
            .unwrap()
            .unwrap();
        assert!(matches!(recorded, Recorded::New { ref jobs, .. } if jobs.len() == 1));
    }
    let mut seen = listed(store.clone()).await;
    seen.sort();
    assert_eq!(seen, ["before", "held-1", "held-2"]);
    store.close().await;
}

/// One script of deliveries, claims, ends and prunes, run against SQLite
/// and PostgreSQL: each prune deletes the same, and the same is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_deletes_what_sqlite_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite_url = format!("sqlite://{}", dir.path().join("r.db").display());
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::connect(&sqlite_url).await.unwrap());
    let pg_url = PgServer::shared().create_database().await.unwrap();
    let pg: Arc<dyn Store> = Arc::new(
        PgStore::connect(&pg_url, &PgOptions::default())
            .await
            .unwrap(),
    );
    let now = forgehand_store::time::now_ms();
    let mut outcomes = Vec::new();
    for store in [&sqlite, &pg] {
        outcomes.push(script(store.as_ref(), now).await);
    }
    assert_eq!(outcomes[0], outcomes[1], "SQLite, then PostgreSQL");
    let deleted = |line: &String| !line.contains("deliveries: 0, refused: 0, jobs: 0, digests: 0");
    assert!(
        outcomes[0].iter().take(4).filter(|l| deleted(l)).count() >= 3,
        "the script prunes something at most steps: {:#?}",
        &outcomes[0][..4]
    );
}

/// What the script saw: each prune's counts, then the deliveries and the
/// jobs' states left.
async fn script(store: &dyn Store, now: i64) -> Vec<String> {
    let mut seen = Vec::new();
    let mut batch = Vec::new();
    for n in 0..40u64 {
        let outcome = [Outcome::Accepted, Outcome::Ignored, Outcome::Rejected][n as usize % 3];
        let age = (n as i64 % 8) * 10 * DAY;
        let jobs = usize::from(outcome == Outcome::Accepted) * (1 + n as usize % 2);
        batch.push(delivery(&format!("d{n}"), outcome, now - age, n % 7, jobs));
        if n % 5 == 0 {
            // A redelivery, as old as the first.
            batch.push(delivery(&format!("d{n}"), outcome, now - age, n % 7, jobs));
        }
    }
    store.record_deliveries(&batch).await.unwrap();
    // Finish some: succeeded, failed, dead; others keep running or waiting.
    for n in 0..6 {
        let claimed = store
            .claim_job("w", Duration::from_secs(600))
            .await
            .unwrap()
            .unwrap();
        let finish = match n % 4 {
            0 => Finish::Succeeded {
                result: serde_json::json!({"n": n}),
            },
            1 => Finish::Failed { error: "e".into() },
            2 => Finish::Dead { error: "e".into() },
            _ => continue,
        };
        assert!(store.finish_job(&claimed, "w", finish).await.unwrap());
    }
    for (days, jobs_before) in [
        (30, now - DAY),
        (20, now + DAY),
        (5, now + DAY),
        (0, now + DAY),
    ] {
        let pruned = store
            .prune(&Retention {
                deliveries_before: now - days * DAY,
                refused_before: now - days * DAY / 2,
                jobs_before,
                digests_before: now - 2 * days * DAY,
            })
            .await
            .unwrap();
        seen.push(format!("{days} days: {pruned:?}"));
    }
    let deliveries = store
        .list_deliveries(&DeliveryQuery {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    for d in deliveries {
        seen.push(format!(
            "{:?} {:?} {:?}",
            d.delivery_id,
            d.outcome,
            d.jobs.len()
        ));
    }
    let jobs = store
        .list_jobs(&JobQuery {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    for j in jobs {
        seen.push(format!("{} {:?} {}", j.target_key, j.state, j.attempts));
    }
    seen
}
