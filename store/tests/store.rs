//! What is SQLite's own: its migrations, its plans, its write lock and
//! its WAL. The store's behaviour, the same on every backend, is the
//! conformance suite (tests/conformance.rs).

use forgehand_store::job::{Job, Task};
use forgehand_store::{CompressedPayload, NewDelivery, Outcome, Recorded, SqliteStore, Store};
use forgehand_types::{ForgeKind, JobId, Repo, TargetKey};
use sqlx::Row;

fn delivery(id: &str, outcome: Outcome, jobs: usize) -> NewDelivery {
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
        payload: Some(CompressedPayload::compress(b"{\"x\":1}")),
        jobs: vec![(&job).into(); jobs],
        installation: None,
        digest: None,
        received_at: 1,
    }
}

async fn store() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("s.db").display());
    (SqliteStore::connect(&url).await.unwrap(), dir)
}

/// A database made before 0002 keeps every row and id through it, and
/// comes out with the same rules: the CHECKs, the unique delivery id, the
/// foreign keys.
#[tokio::test]
async fn migration_0002_keeps_rows_and_rules() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("old.db").display());
    {
        let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
        let pool = sqlx::SqlitePool::connect_with(options.create_if_missing(true))
            .await
            .unwrap();
        let mut first_only = sqlx::migrate!("./migrations");
        first_only.migrations = first_only
            .migrations
            .iter()
            .filter(|m| m.version == 1)
            .cloned()
            .collect::<Vec<_>>()
            .into();
        first_only.run(&pool).await.unwrap();
        for sql in [
            "INSERT INTO deliveries (id, forge, delivery_id, outcome, status_code, received_at) \
             VALUES (7, 'github', 'old-id', 'accepted', 202, 1)",
            "INSERT INTO jobs (id, delivery, kind, payload, target_key, state, max_attempts, run_at, created_at, updated_at) \
             VALUES (11, 7, 'assigned', '{}', 'github:acme/widgets#1', 'succeeded', 3, 1, 1, 1)",
            "INSERT INTO job_runs (id, job, attempt, worker, started_at, outcome) \
             VALUES (5, 11, 1, 'w', 1, 'succeeded')",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        pool.close().await;
    }

    let store = SqliteStore::connect(&url).await.unwrap();
    let pool = store.pool();
    let ids: (i64, i64, i64) = sqlx::query_as(
        "SELECT d.id, j.id, r.id FROM deliveries d JOIN jobs j ON j.delivery = d.id \
         JOIN job_runs r ON r.job = j.id",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(ids, (7, 11, 5));
    let fk_problems: Vec<(String,)> =
        sqlx::query_as("SELECT \"table\" FROM pragma_foreign_key_check")
            .fetch_all(pool)
            .await
            .unwrap();
    assert!(fk_problems.is_empty(), "{fk_problems:?}");

    let bad_outcome = sqlx::query(
        "INSERT INTO deliveries (forge, outcome, status_code, received_at) VALUES ('github', 'maybe', 202, 1)",
    )
    .execute(pool)
    .await;
    assert!(bad_outcome.unwrap_err().to_string().contains("CHECK"));
    let bad_state = sqlx::query(
        "INSERT INTO jobs (kind, payload, target_key, state, max_attempts, run_at, created_at, updated_at) \
         VALUES ('x', '{}', 't', 'sleeping', 3, 1, 1, 1)",
    )
    .execute(pool)
    .await;
    assert!(bad_state.unwrap_err().to_string().contains("CHECK"));

    let again = store
        .record_deliveries(&[delivery("old-id", Outcome::Accepted, 1)])
        .await
        .unwrap();
    assert!(
        matches!(&again[0], Recorded::Duplicate { jobs, .. } if jobs == &[11]),
        "{again:?}"
    );
}

/// What 0002 is for: no insert on the intake path makes SQLite build a
/// temporary b-tree (a CHECK with an IN list of more than two values did,
/// for every row).
#[tokio::test]
async fn intake_inserts_build_no_temporary_btree() {
    let (store, _dir) = store().await;
    for sql in [
        "INSERT INTO deliveries (forge, delivery_id, event, event_name, outcome, status_code, reason, \
         repo, target, sender, detail, payload, received_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) \
         ON CONFLICT (forge, delivery_id) WHERE outcome IN ('accepted', 'ignored') DO NOTHING",
        "INSERT INTO jobs (delivery, kind, payload, target_key, state, max_attempts, run_at, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, 'queued', ?5, ?6, ?6, ?6)",
    ] {
        let plan: Vec<String> = sqlx::query(&format!("EXPLAIN {sql}"))
            .fetch_all(store.pool())
            .await
            .unwrap()
            .iter()
            .map(|row| row.get("opcode"))
            .collect();
        assert!(plan.iter().any(|o| o == "Insert"), "{plan:?}");
        assert!(!plan.iter().any(|o| o == "OpenEphemeral"), "{sql}\n{plan:?}");
    }
}

/// The intake keeps a transaction open while its sync runs and opens the
/// next one as soon as a delivery comes, so under a steady stream of
/// webhooks the database's write lock is rarely free. A worker's writes
/// (claiming a job, extending its lease, finishing it) must still get
/// their turn while the stream goes on, not fail with SQLite's busy
/// timeout (10 s): a worker starved of the lock gets that error, and the
/// `unwrap`s below fail the test. How soon the turn comes is a matter of
/// speed, not of behaviour: measured by `bench/contention.sh`, not
/// asserted here; the bound below only turns a hang into a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_still_write_while_webhooks_keep_the_intake_busy() {
    use forgehand_store::{Finish, IntakeWriter};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    let (store, _dir) = store().await;
    store
        .record_deliveries(&[delivery("first", Outcome::Accepted, 1)])
        .await
        .unwrap();
    let writer = IntakeWriter::spawn(
        store.intake_log().unwrap(),
        64,
        Arc::new(tokio::sync::Notify::new()),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let recorded = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = (0..16)
        .map(|sender| {
            let (writer, stop, recorded) = (writer.clone(), stop.clone(), recorded.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let id = format!("flood-{sender}-{n}");
                    writer
                        .record(delivery(&id, Outcome::Accepted, 0))
                        .await
                        .unwrap();
                    recorded.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    not_hung("the flood's first 500 deliveries", async {
        while recorded.load(Ordering::Relaxed) < 500 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;

    let lease = Duration::from_secs(60);
    let job = not_hung("claiming a job", store.claim_job("w1", lease))
        .await
        .unwrap()
        .expect("the first delivery's job is waiting");
    let kept = not_hung("a heartbeat", store.heartbeat(&job, "w1", lease)).await;
    assert!(kept.unwrap());
    let done = Finish::Succeeded {
        result: serde_json::json!({}),
    };
    let finished = not_hung("finishing the job", store.finish_job(&job, "w1", done)).await;
    assert!(finished.unwrap());
    // Made while the flood went on: it stops only now.
    stop.store(true, Ordering::Relaxed);
    for sender in senders {
        sender.await.unwrap();
    }
    assert!(recorded.load(Ordering::Relaxed) > 500);
}

/// `what`, or a failed test once it has taken `HANG`: a hang detector, far
/// above what any of these waits takes on a loaded machine (milliseconds
/// to a second or two), not a claim about speed.
async fn not_hung<T>(what: &str, work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(HANG, work)
        .await
        .unwrap_or_else(|_| panic!("hung: {what} did not end within {HANG:?}"))
}

const HANG: std::time::Duration = std::time::Duration::from_secs(60);

/// A reader that keeps a transaction open (an operator's `sqlite3`
/// session, a slow report) must not hold up webhooks: the intake's
/// checkpoint copies what it can and does not wait for the reader. It
/// used to wait, under the intake's lock, for as long as the reader read
/// (up to SQLite's 10 s busy timeout), with every webhook waiting behind.
///
/// The reader here holds its transaction until the test lets it go, which
/// it does only once every write is answered: the writes must all be
/// answered while it is held. Each of them comes after the intake's 50 ms
/// between two checkpoints, so each commit runs a checkpoint beside the
/// reader. A checkpoint that waited for the reader would wait out the
/// busy timeout every time (20 × 10 s), past the hang detector (60 s),
/// where these writes take about a second. How long each takes beside a
/// reader is measured by `bench/contention.sh`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_holding_a_transaction_does_not_hold_up_webhooks() {
    use forgehand_store::IntakeWriter;
    use std::sync::Arc;
    use std::time::Duration;

    let (store, dir) = store().await;
    let writer = IntakeWriter::spawn(
        store.intake_log().unwrap(),
        64,
        Arc::new(tokio::sync::Notify::new()),
    );
    for n in 0..20 {
        let id = format!("before-{n}");
        writer
            .record(delivery(&id, Outcome::Accepted, 1))
            .await
            .unwrap();
    }
    let path = dir.path().join("s.db");
    let (reading, read) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let connection = rusqlite::Connection::open(path).unwrap();
        connection.execute_batch("BEGIN").unwrap();
        let seen: i64 = connection
            .query_row("SELECT count(*) FROM deliveries", [], |r| r.get(0))
            .unwrap();
        reading.send(()).unwrap();
        // Held until the test is done writing (or gone).
        let _ = released.recv();
        connection.execute_batch("COMMIT").unwrap();
        seen
    });
    read.recv().unwrap();

    not_hung(
        "recording deliveries while a reader holds a transaction",
        async {
            for n in 0..20 {
                // At least the intake's 50 ms between two checkpoints (a
                // lower bound: a loaded machine only waits longer), so that
                // this delivery's commit checkpoints beside the reader.
                tokio::time::sleep(Duration::from_millis(60)).await;
                let id = format!("during-{n}");
                writer
                    .record(delivery(&id, Outcome::Accepted, 1))
                    .await
                    .unwrap();
            }
        },
    )
    .await;
    assert!(
        !reader.is_finished(),
        "the reader let go before the test did"
    );
    release.send(()).unwrap();
    assert_eq!(reader.join().unwrap(), 20, "the reader's snapshot");
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(total, 40);
}

/// A database from before migration 0007 had the cause of a cancelled
/// job only in its error text: the migration fills the column in from it.
/// (That the cause is kept is in the conformance suite.)
#[tokio::test]
async fn migration_0007_fills_in_the_cause_from_the_error_text() {
    use forgehand_store::{CancelCause, JobLedger};
    let (store, _dir) = store().await;
    let recorded = store
        .record_deliveries(&[delivery("x", Outcome::Accepted, 3)])
        .await
        .unwrap();
    let Recorded::New { jobs, .. } = &recorded[0] else {
        panic!("{recorded:?}")
    };
    let target = &TargetKey::from_stored("github:acme/widgets#1".into());
    store.supersede_waiting(target, jobs[1]).await.unwrap();
    store
        .request_stop(target, JobId(jobs[2].get() + 1), "stopped by @m")
        .await
        .unwrap();

    let pool = store.pool();
    sqlx::query("UPDATE jobs SET cancel_cause = NULL")
        .execute(pool)
        .await
        .unwrap();
    let backfill = include_str!("../migrations/0007_cancel_cause.sql");
    let backfill = backfill.split_once(";\n").unwrap().1;
    sqlx::raw_sql(backfill).execute(pool).await.unwrap();
    let history = store.target_history(target, 10).await.unwrap();
    let cause = |id: JobId| history.iter().find(|j| j.id == id).unwrap().cancel_cause;
    assert_eq!(cause(jobs[0]), Some(CancelCause::Superseded));
    assert_eq!(cause(jobs[1]), Some(CancelCause::Stopped));
    assert_eq!(cause(jobs[2]), Some(CancelCause::Stopped));
}
