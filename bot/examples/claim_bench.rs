//! How long claiming a job takes when many jobs wait on one issue, by the
//! number waiting. Run by `bench/claim.sh` (see bench/README.md):
//!
//!     cargo run --release -p forgehand-bot --example claim_bench [N ...]
//!
//! Two cases, each on a fresh SQLite file:
//! - blocked: N requests wait on issue #1, whose job is running; one job of
//!   issue #2, made last, is the one to claim;
//! - superseded: N requests wait on issue #1 and nothing runs; the newest
//!   is the one to claim, and it supersedes the rest.
//!
//! Every claim is followed by finishing the job as "retry now", so that the
//! next claim finds the same queue. Each figure is the median of 21 claims.

use std::time::{Duration, Instant};

use forgehand_bot::job::{Job, Task};
use forgehand_bot::store::{Finish, NewDelivery, NewJob, Outcome, SqliteStore, Store};
use forgehand_forge::{ForgeKind, Repo};

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

async fn store_with(waiting: usize, blocked: bool) -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("claim.db").display());
    let store = SqliteStore::connect(&url).await.unwrap();
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
    // As the running service does between batches: the claims then read
    // the database file, not a WAL grown by the filling.
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(store.pool())
        .await
        .unwrap();
    (store, dir)
}

/// The median of 21 claims, after one not counted.
async fn time_claims(store: &SqliteStore, expect_target: u64) -> Duration {
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
    println!("{:>8}  {:>14}  {:>14}", "waiting", "blocked", "superseded");
    for n in sizes {
        let (store, _dir) = store_with(n, true).await;
        let blocked = time_claims(&store, 2).await;
        let (store, _dir) = store_with(n, false).await;
        let superseded = time_claims(&store, 1).await;
        println!(
            "{n:>8}  {:>11.3} ms  {:>11.3} ms",
            blocked.as_secs_f64() * 1e3,
            superseded.as_secs_f64() * 1e3
        );
    }
}
