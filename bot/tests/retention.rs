//! Retention on the real SQLite store: old deliveries and finished jobs
//! go, waiting and running jobs (and the deliveries they came from) stay,
//! refused deliveries go sooner, digests later; and `forgehand serve`
//! prunes by itself, periodically.

mod common;

use std::time::{Duration, Instant};

use forgehand_bot::store::{
    Finish, NewDelivery, Outcome, PayloadDigest, Retention, SqliteStore, Store,
};
use forgehand_forge::ForgeKind;
use tokio::net::TcpListener;

const DAY: i64 = 24 * 60 * 60 * 1000;

/// A delivery received at `at`, with `jobs` jobs on target `target`.
fn delivery(id: &str, outcome: Outcome, at: i64, target: u64, jobs: usize) -> NewDelivery {
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
        reason: None,
        repo: None,
        target: None,
        sender: None,
        detail: None,
        payload: None,
        jobs: (0..jobs).map(|_| common::job(target)).collect(),
        installation: None,
        digest: (outcome != Outcome::Rejected)
            .then(|| PayloadDigest::of(ForgeKind::Github, id.as_bytes())),
        received_at: at,
    }
}

async fn store() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("r.db").display());
    (SqliteStore::connect(&url).await.unwrap(), dir)
}

async fn ids(store: &SqliteStore, sql: &str) -> Vec<String> {
    sqlx::query_scalar(sql)
        .fetch_all(store.pool())
        .await
        .unwrap()
}

async fn claim(store: &SqliteStore) -> forgehand_bot::store::ClaimedJob {
    store
        .claim_job("w", Duration::from_secs(600))
        .await
        .unwrap()
        .expect("a job waits")
}

#[tokio::test]
async fn old_deliveries_and_finished_jobs_go_and_waiting_or_running_work_stays() {
    let (store, _dir) = store().await;
    let now = forgehand_bot::time::now_ms();
    let old = now - 40 * DAY;
    store
        .record_deliveries(&[
            delivery("old-finished", Outcome::Accepted, old, 1, 1),
            delivery("old-running", Outcome::Accepted, old, 2, 1),
            delivery("old-waiting", Outcome::Accepted, old, 3, 1),
            delivery("old-ignored", Outcome::Ignored, old, 4, 0),
            delivery("old-refused", Outcome::Rejected, old, 5, 0),
            delivery("recent-refused", Outcome::Rejected, now - 10 * DAY, 6, 0),
            delivery("recent", Outcome::Accepted, now - DAY, 7, 0),
        ])
        .await
        .unwrap();
    // A redelivery of an old one: a duplicate, as old as the rest.
    let mut again = delivery("old-ignored", Outcome::Ignored, old, 4, 0);
    again.digest = None;
    store.record_deliveries(&[again]).await.unwrap();

    // Target 1's job finishes, target 2's runs; target 3's waits.
    for _ in 0..2 {
        let claimed = claim(&store).await;
        if claimed.job.target == 1 {
            let done = Finish::Succeeded {
                result: serde_json::json!({}),
            };
            assert!(store.finish_job(&claimed, "w", done).await.unwrap());
        }
    }
    // Finished long ago, as far as retention can tell.
    sqlx::query("UPDATE jobs SET finished_at = ?1 WHERE state = 'succeeded'")
        .bind(old)
        .execute(store.pool())
        .await
        .unwrap();
    let runs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_runs")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(runs, 2);

    let config = forgehand_bot::config::DatabaseConfig {
        retention_days: 30,
        refused_retention_days: 7,
        digest_retention_days: 90,
        ..Default::default()
    };
    let pruned = store.prune(&config.retention(now)).await.unwrap();
    assert_eq!(pruned.jobs, 1);
    assert_eq!(
        pruned.deliveries, 3,
        "old-finished, old-ignored, its duplicate"
    );
    assert_eq!(pruned.refused, 2);
    assert_eq!(pruned.digests, 0);

    let kept = ids(
        &store,
        "SELECT delivery_id FROM deliveries ORDER BY delivery_id",
    )
    .await;
    assert_eq!(kept, ["old-running", "old-waiting", "recent"]);
    let states = ids(&store, "SELECT state FROM jobs ORDER BY id").await;
    assert_eq!(states, ["running", "queued"]);
    let runs: Vec<i64> = sqlx::query_scalar("SELECT job FROM job_runs")
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(runs.len(), 1, "the finished job's run went with it");
    let fk_problems: Vec<(String,)> =
        sqlx::query_as("SELECT \"table\" FROM pragma_foreign_key_check")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert!(fk_problems.is_empty(), "{fk_problems:?}");

    // The digests outlive the deliveries, and go in their own time.
    let digests = |store: &SqliteStore| {
        let pool = store.pool().clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM payload_digests")
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(digests(&store).await, 5, "one per accepted or ignored body");
    let pruned = store
        .prune(&config.retention(now + 60 * DAY))
        .await
        .unwrap();
    assert_eq!(pruned.digests, 4, "all but the most recent one");
    assert_eq!(digests(&store).await, 1);

    // Nothing left to do is nothing done.
    let again = store
        .prune(&config.retention(now + 60 * DAY))
        .await
        .unwrap();
    assert_eq!(
        again.deliveries + again.jobs + again.refused + again.digests,
        0
    );
}

#[tokio::test]
async fn pruning_goes_batch_by_batch_through_a_backlog() {
    let (store, _dir) = store().await;
    let old = forgehand_bot::time::now_ms() - 400 * DAY;
    let batch: Vec<NewDelivery> = (0..1300)
        .map(|n| delivery(&format!("b-{n}"), Outcome::Ignored, old, 1, 0))
        .collect();
    store.record_deliveries(&batch).await.unwrap();
    let later = old + DAY;
    let pruned = store
        .prune(&Retention {
            deliveries_before: later,
            refused_before: later,
            jobs_before: later,
            digests_before: later,
        })
        .await
        .unwrap();
    assert_eq!((pruned.deliveries, pruned.digests), (1300, 1300));
}

/// `forgehand serve` prunes at start and then every
/// `database.prune_interval_secs`, by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_prunes_periodically() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::config_for(dir.path());
    config.queue.workers = 0;
    config.database.prune_interval_secs = 1;
    config.validate().unwrap();
    let store = SqliteStore::connect(&config.database.url).await.unwrap();
    let old = forgehand_bot::time::now_ms() - 400 * DAY;
    store
        .record_deliveries(&[delivery("before-start", Outcome::Ignored, old, 1, 0)])
        .await
        .unwrap();

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(forgehand_bot::service::serve_on(
        listener,
        config,
        forgehand_bot::service::Runner::logging(),
        async move {
            let _ = stopped.await;
        },
    ));
    let count = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM deliveries")
            .fetch_one(store.pool())
            .await
            .unwrap()
    };
    let wait_for_none = |what: &'static str| async move {
        let deadline = Instant::now() + Duration::from_secs(30);
        while count().await > 0 {
            assert!(Instant::now() < deadline, "{what} was never pruned");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    wait_for_none("the delivery recorded before the start").await;
    // And again later, without a restart.
    store
        .record_deliveries(&[delivery("while-serving", Outcome::Ignored, old, 1, 0)])
        .await
        .unwrap();
    assert_eq!(count().await, 1);
    wait_for_none("the delivery recorded while serving").await;

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
