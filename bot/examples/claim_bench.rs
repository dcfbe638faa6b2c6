//! How long claiming a job takes when many jobs wait on one issue, by the
//! number waiting. Run by `bench/claim.sh` (see bench/README.md):
//!
//!     cargo run --release -p forgehand-bot --example claim_bench [N ...]
//!
//! Two cases, each on a fresh database of each store — a SQLite file,
//! and a PostgreSQL database on a server the harness starts (Debian's
//! package, `initdb` in a temporary directory, as the store's tests do):
//! - blocked: N requests wait on issue #1, whose job is running; one job of
//!   issue #2, made last, is the one to claim;
//! - superseded: N requests wait on issue #1 and nothing runs; the newest
//!   is the one to claim, and it supersedes the rest.
//!
//! Every claim is followed by finishing the job as "retry now", so that the
//! next claim finds the same queue. Each figure is the median of 21 claims.

use std::sync::Arc;
use std::time::{Duration, Instant};

use forgehand_bot::job::{Job, Task};
use forgehand_bot::store::{Finish, NewDelivery, NewJob, Outcome, SqliteStore, Store};
use forgehand_forge::{ForgeKind, Repo};
use forgehand_store_pg::{PgOptions, PgStore};
use forgehand_store_test_support::PgServer;

fn job(target: u64) -> Job {
    Job {
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
        requested_by: "someone".into(),
        task: Task::Assigned,
    }
}

fn delivery(id: String, target: u64) -> NewDelivery {
    NewDelivery {
        forge: ForgeKind::Github,
        delivery_id: Some(id),
        event: Some("issues".into()),
        event_name: Some("issues.assigned".into()),
        outcome: Outcome::Accepted,
        status_code: 202,
        reason: None,
        repo: Some("acme/widgets".into()),
        target: Some(target),
        sender: Some("someone".into()),
        detail: None,
        payload: None,
        jobs: vec![NewJob::from(&job(target))],
        installation: None,
        digest: None,
        received_at: 0,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sqlite,
    Postgres,
}

/// A fresh store of `kind` (and what keeps it: the SQLite file's
/// directory).
async fn open(kind: Kind) -> (Arc<dyn Store>, Option<tempfile::TempDir>, Tidy) {
    match kind {
        Kind::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}", dir.path().join("claim.db").display());
            let store = SqliteStore::connect(&url).await.unwrap();
            (Arc::new(store.clone()), Some(dir), Tidy::Sqlite(store))
        }
        Kind::Postgres => {
            let url = PgServer::shared().create_database().await.unwrap();
            let store = PgStore::connect(&url, &PgOptions::default()).await.unwrap();
            (
                Arc::new(store.clone()),
                None,
                Tidy::Postgres(Box::new(store)),
            )
        }
    }
}

/// What each store does between the filling and the claims, as a running
/// service's would have done by then: SQLite checkpoints its WAL into the
/// file; PostgreSQL's autovacuum analyses the grown table.
enum Tidy {
    Sqlite(SqliteStore),
    Postgres(Box<PgStore>),
}

impl Tidy {
    async fn run(&self) {
        match self {
            Tidy::Sqlite(store) => {
                sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
            Tidy::Postgres(store) => {
                sqlx::query("VACUUM ANALYZE jobs")
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
        }
    }
}

async fn store_with(
    kind: Kind,
    waiting: usize,
    blocked: bool,
) -> (Arc<dyn Store>, Option<tempfile::TempDir>) {
    let (store, dir, tidy) = open(kind).await;
    if blocked {
        store
            .record_deliveries(&[delivery("running".into(), 1)])
            .await
            .unwrap();
        store
            .claim_job("runner", Duration::from_secs(3600))
            .await
            .unwrap()
            .expect("the running job");
    }
    let ids: Vec<_> = (0..waiting)
        .map(|n| delivery(format!("waiting-{n}"), 1))
        .collect();
    for batch in ids.chunks(1000) {
        store.record_deliveries(batch).await.unwrap();
    }
    if blocked {
        store
            .record_deliveries(&[delivery("other".into(), 2)])
            .await
            .unwrap();
    }
    tidy.run().await;
    (store, dir)
}

/// The median of 21 claims, after one not counted.
async fn time_claims(store: &dyn Store, expect_target: u64) -> Duration {
    let mut spent = Vec::new();
    for round in 0..22 {
        let started = Instant::now();
        let claimed = store
            .claim_job("bench", Duration::from_secs(60))
            .await
            .unwrap()
            .expect("a job to claim");
        if round > 0 {
            spent.push(started.elapsed());
        }
        assert_eq!(claimed.job.target, expect_target);
        let again = Finish::Retry {
            error: "bench".into(),
            run_at: 0,
        };
        assert!(store.finish_job(&claimed, "bench", again).await.unwrap());
    }
    spent.sort();
    spent[spent.len() / 2]
}

#[tokio::main]
async fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|n| n.parse().expect("N: a number of waiting jobs"))
        .collect();
    let sizes = if sizes.is_empty() {
        vec![100, 1_000, 10_000, 50_000]
    } else {
        sizes
    };
    println!(
        "{:>8}  {:>14}  {:>14}  {:>14}  {:>14}",
        "waiting", "sqlite blocked", "superseded", "pg blocked", "superseded"
    );
    for n in sizes {
        let mut line = format!("{n:>8}");
        for kind in [Kind::Sqlite, Kind::Postgres] {
            let (store, _dir) = store_with(kind, n, true).await;
            let blocked = time_claims(&*store, 2).await;
            let (store, _dir) = store_with(kind, n, false).await;
            let superseded = time_claims(&*store, 1).await;
            line.push_str(&format!(
                "  {:>11.3} ms  {:>11.3} ms",
                blocked.as_secs_f64() * 1e3,
                superseded.as_secs_f64() * 1e3
            ));
        }
        println!("{line}");
    }
}
