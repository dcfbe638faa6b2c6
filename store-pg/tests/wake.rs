//! Idle workers on every host are woken by LISTEN/NOTIFY: a job queued by
//! another replica's intake, a retry (at its due time), a job released at
//! shutdown or recovered from a dead worker.

use std::sync::Arc;
use std::time::Duration;

use forgehand_store::job::{Job, Task};
use forgehand_store::{Finish, IntakeWriter, NewDelivery, Outcome, Store};
use forgehand_store_pg::{PgOptions, PgStore, Wake};
use forgehand_store_test_support::PgServer;
use forgehand_types::{ForgeKind, Repo};

fn delivery(id: &str, jobs: usize) -> NewDelivery {
    let job = Job {
        forge: ForgeKind::Github,
        repo: Repo {
            owner: "acme".into(),
            name: "widgets".into(),
            clone_url: None,
            default_branch: None,
            private: false,
        },
        target: 1,
        on_pull_request: false,
        requested_by: "m".into(),
        task: Task::Assigned,
    };
    NewDelivery {
        forge: ForgeKind::Github,
        delivery_id: Some(id.into()),
        event: Some("issues".into()),
        event_name: None,
        outcome: Outcome::Accepted,
        status_code: 202,
        reason: None,
        repo: None,
        target: None,
        sender: None,
        detail: None,
        payload: None,
        jobs: vec![(&job).into(); jobs],
        installation: None,
        digest: None,
        received_at: forgehand_store::time::now_ms(),
    }
}

async fn replicas() -> (PgStore, PgStore) {
    let url = PgServer::shared().create_database().await.unwrap();
    let a = PgStore::connect(&url, &PgOptions::default()).await.unwrap();
    let b = PgStore::connect(&url, &PgOptions::default()).await.unwrap();
    (a, b)
}

/// The listener's next wake-up; a missing one fails the test rather than
/// hang it.
async fn next(listener: &mut forgehand_store_pg::JobListener) -> Wake {
    tokio::time::timeout(Duration::from_secs(30), listener.next())
        .await
        .expect("no wake-up came")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_queued_by_another_replica_wakes_the_listener() {
    let (a, b) = replicas().await;
    let mut listener = a.listen_for_jobs().await.unwrap();
    // Nothing wakes it for a delivery without jobs: the first wake-up is
    // the second delivery's.
    b.record_deliveries(&[delivery("none", 0)]).await.unwrap();
    b.record_deliveries(&[delivery("one", 1)]).await.unwrap();
    assert_eq!(
        next(&mut listener).await,
        Wake::Queued { due_at: 0 },
        "due at once"
    );

    // The group-commit intake notifies too, once its commit is done.
    let log = {
        let b = b.clone();
        tokio::task::spawn_blocking(move || b.intake_log().unwrap())
            .await
            .unwrap()
    };
    let writer = IntakeWriter::spawn(log, 8, Arc::new(tokio::sync::Notify::new()));
    writer.record(delivery("via-writer", 1)).await.unwrap();
    assert!(matches!(next(&mut listener).await, Wake::Queued { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_releases_and_recoveries_wake_the_listener_when_due() {
    let (a, b) = replicas().await;
    b.record_deliveries(&[delivery("d", 2)]).await.unwrap();
    let mut listener = a.listen_for_jobs().await.unwrap();
    let lease = Duration::from_secs(60);

    let first = b.claim_job("w", lease).await.unwrap().unwrap();
    let run_at = forgehand_store::time::now_ms() + 60_000;
    let retry = Finish::Retry {
        error: "e".into(),
        run_at,
    };
    assert!(b.finish_job(&first, "w", retry).await.unwrap());
    assert_eq!(next(&mut listener).await, Wake::Queued { due_at: run_at });

    let second = b.claim_job("w", lease).await.unwrap().unwrap();
    assert!(b.finish_job(&second, "w", Finish::Released).await.unwrap());
    let Wake::Queued { due_at } = next(&mut listener).await else {
        panic!("not a queued job")
    };
    assert!(due_at <= forgehand_store::time::now_ms(), "due now");

    let ghost = b.claim_job("ghost", lease).await.unwrap().unwrap();
    assert!(b.heartbeat(&ghost, "ghost", Duration::ZERO).await.unwrap());
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(b.recover_expired_leases().await.unwrap().requeued, 1);
    assert!(matches!(next(&mut listener).await, Wake::Queued { .. }));
}

/// What the worker pool uses: its `jobs_ready` is woken for a job queued
/// on another host, and for a retry only once it is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wake_task_wakes_local_workers_for_jobs_queued_elsewhere() {
    let (a, b) = replicas().await;
    let jobs_ready = Arc::new(tokio::sync::Notify::new());
    let task = a.listen_for_jobs().await.unwrap().wake(jobs_ready.clone());
    let woken = jobs_ready.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    b.record_deliveries(&[delivery("elsewhere", 1)])
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), woken)
        .await
        .expect("the local workers were not woken");

    let claimed = b
        .claim_job("w", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let due = forgehand_store::time::now_ms() + 300;
    let retry = Finish::Retry {
        error: "e".into(),
        run_at: due,
    };
    let woken = jobs_ready.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    assert!(b.finish_job(&claimed, "w", retry).await.unwrap());
    tokio::time::timeout(Duration::from_secs(30), woken)
        .await
        .expect("the local workers were not woken for the retry");
    assert!(
        forgehand_store::time::now_ms() >= due,
        "woken before the retry was due"
    );
    assert!(a
        .claim_job("w2", Duration::from_secs(60))
        .await
        .unwrap()
        .is_some());
    task.stop();
}
