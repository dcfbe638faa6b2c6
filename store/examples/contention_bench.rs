//! How long the SQLite store's writes take when something else holds the
//! database: the figures the tests no longer assert (they check the
//! behaviour, with events; see store/tests/store.rs). Run by
//! `bench/contention.sh` (see bench/README.md):
//!
//!     cargo run --release -p forgehand-store --example contention_bench [SECONDS]
//!
//! Two measurements, each on a fresh SQLite file in a temp dir:
//!
//! - reader: one delivery after another through the intake writer for
//!   SECONDS (3), first with nothing else on the database, then while a
//!   reader holds a read transaction open the whole time (an operator's
//!   `sqlite3` session). Each delivery's time from `record` to its answer.
//!   Was a test: "every write under 500 ms" while a reader held on.
//! - flood: 16 senders keep the intake busy while a worker claims a job,
//!   renews its lease and finishes it, 21 times. Each of those writes'
//!   time. Was a test: "each within 3 s" (they wait for the write lock the
//!   intake keeps).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use forgehand_store::job::{Job, Task};
use forgehand_store::{
    CompressedPayload, Finish, IntakeWriter, NewDelivery, Outcome, SqliteStore, Store,
};
use forgehand_types::{ForgeKind, Repo};

fn delivery(id: &str, target: u64, jobs: usize) -> NewDelivery {
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
        event_name: Some("issues.assigned".into()),
        outcome: Outcome::Accepted,
        status_code: 202,
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

fn writer(store: &SqliteStore) -> IntakeWriter {
    IntakeWriter::spawn(
        store.intake_log().unwrap(),
        64,
        Arc::new(tokio::sync::Notify::new()),
    )
}

/// "p50 / p99 / max (n)" of `samples`, in ms.
fn summary(samples: &mut [Duration]) -> String {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1e3
    };
    format!(
        "{:8.2} {:8.2} {:8.2} ms  (n = {})",
        at(0.5),
        at(0.99),
        at(1.0),
        samples.len()
    )
}

/// One delivery after another for `seconds`; each one's time.
async fn record_for(writer: &IntakeWriter, name: &str, seconds: f64) -> Vec<Duration> {
    let started = Instant::now();
    let mut took = Vec::new();
    while started.elapsed().as_secs_f64() < seconds {
        let id = format!("{name}-{}", took.len());
        let one = Instant::now();
        writer.record(delivery(&id, 1, 1)).await.unwrap();
        took.push(one.elapsed());
    }
    took
}

async fn reader(seconds: f64) {
    let (store, dir) = store().await;
    let writer = writer(&store);
    let mut alone = record_for(&writer, "alone", seconds).await;

    let path = dir.path().join("s.db");
    let (reading, read) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let connection = rusqlite::Connection::open(path).unwrap();
        connection.execute_batch("BEGIN").unwrap();
        let _: i64 = connection
            .query_row("SELECT count(*) FROM deliveries", [], |r| r.get(0))
            .unwrap();
        reading.send(()).unwrap();
        let _ = released.recv();
        connection.execute_batch("COMMIT").unwrap();
    });
    read.recv().unwrap();
    let mut beside = record_for(&writer, "beside", seconds).await;
    release.send(()).unwrap();
    holder.join().unwrap();

    println!("intake, one delivery at a time          p50      p99      max");
    println!("  nothing else on the database   {}", summary(&mut alone));
    println!("  a reader holds a transaction   {}", summary(&mut beside));
}

async fn flood() {
    let (store, _dir) = store().await;
    const CYCLES: u64 = 21;
    let waiting: Vec<NewDelivery> = (0..CYCLES)
        .map(|n| delivery(&format!("job-{n}"), n + 1, 1))
        .collect();
    store.record_deliveries(&waiting).await.unwrap();
    let writer = writer(&store);
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..16)
        .map(|sender| {
            let (writer, stop) = (writer.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let id = format!("flood-{sender}-{n}");
                    writer.record(delivery(&id, 1, 0)).await.unwrap();
                }
                n
            })
        })
        .collect();
    // The flood under way before the first claim.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let lease = Duration::from_secs(60);
    let (mut claims, mut heartbeats, mut finishes) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..CYCLES {
        let one = Instant::now();
        let job = store.claim_job("w", lease).await.unwrap().expect("a job");
        claims.push(one.elapsed());
        let one = Instant::now();
        assert!(store.heartbeat(&job, "w", lease).await.unwrap());
        heartbeats.push(one.elapsed());
        let one = Instant::now();
        let done = Finish::Succeeded {
            result: serde_json::json!({}),
        };
        assert!(store.finish_job(&job, "w", done).await.unwrap());
        finishes.push(one.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let mut flooded = 0;
    for sender in senders {
        flooded += sender.await.unwrap();
    }

    println!("a worker's writes, 16 senders flooding   p50      p99      max");
    println!("  claim                          {}", summary(&mut claims));
    println!(
        "  heartbeat                      {}",
        summary(&mut heartbeats)
    );
    println!(
        "  finish                         {}",
        summary(&mut finishes)
    );
    println!("  ({flooded} deliveries recorded by the flood meanwhile)");
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SECONDS is a number"))
        .unwrap_or(3.0);
    reader(seconds).await;
    println!();
    flood().await;
}
