//! Group commit for webhook intake. Each request hands its delivery to one
//! writer and waits. The writer adds deliveries to an open transaction as
//! they arrive; the sync thread, whenever it is free, commits that
//! transaction and makes it durable with one disk sync. The deliveries
//! that arrive during a sync therefore share one commit and one sync, and
//! no request is answered before its delivery is on disk.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot, Notify};
use tracing::{debug, error, warn};

use super::{IntakeLog, NewDelivery, Recorded, StoreError, StoreResult, SyncHandle};

type Reply = oneshot::Sender<StoreResult<Recorded>>;

#[derive(Clone)]
pub struct IntakeWriter {
    tx: mpsc::Sender<(NewDelivery, Reply)>,
}

impl IntakeWriter {
    /// Starts the writer thread on `log` (from [`Store::intake_log`]).
    /// `jobs_ready` is notified after every sync that made a new job
    /// durable, so local workers start without polling.
    ///
    /// [`Store::intake_log`]: super::Store::intake_log
    pub fn spawn(log: Box<dyn IntakeLog>, batch_max: usize, jobs_ready: Arc<Notify>) -> Self {
        // Bounded: when the disk falls behind, requests wait here instead
        // of piling up in memory.
        let (tx, rx) = mpsc::channel(batch_max.max(1) * 4);
        // The writer gets a thread of its own and writes synchronously:
        // an async hop per statement would queue behind request handlers
        // for a worker thread, and every request in a batch waits on it.
        std::thread::Builder::new()
            .name("forgehand-intake".into())
            .spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the intake writer")
                    .block_on(write_loop(log, rx, batch_max.max(1), jobs_ready))
            })
            .expect("the intake writer thread starts");
        IntakeWriter { tx }
    }

    /// Records one delivery; returns once it is committed and on disk.
    pub async fn record(&self, delivery: NewDelivery) -> StoreResult<Recorded> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((delivery, reply))
            .await
            .map_err(|_| StoreError::IntakeClosed)?;
        answer.await.map_err(|_| StoreError::IntakeClosed)?
    }
}

/// What the writer and the sync thread share: the log, and the deliveries
/// on their way from the open transaction to the disk.
struct Shared {
    state: Mutex<State>,
    /// Signalled when there is something to commit or sync, or at the end.
    work: Condvar,
}

struct State {
    log: Box<dyn IntakeLog>,
    /// Written into the open transaction, not committed yet. The deliveries
    /// are kept in case the transaction is lost and they must be written
    /// again.
    open: Vec<(NewDelivery, Reply, Recorded)>,
    /// Committed (or failed), waiting for the next sync to be answered.
    committed: Vec<(Reply, StoreResult<Recorded>)>,
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn add(&mut self, incoming: Vec<(NewDelivery, Reply)>) {
        let (deliveries, replies): (Vec<_>, Vec<_>) = incoming.into_iter().unzip();
        match self.log.add(&deliveries) {
            Ok(recorded) => self.open.extend(
                deliveries
                    .into_iter()
                    .zip(replies)
                    .zip(recorded)
                    .map(|((delivery, reply), recorded)| (delivery, reply, recorded)),
            ),
            Err(error) => {
                // The open transaction is lost with the failed batch. One
                // bad delivery must not sink the others: each is written
                // again on its own, so every request gets its own answer.
                let again: Vec<_> = std::mem::take(&mut self.open)
                    .into_iter()
                    .map(|(delivery, reply, _)| (delivery, reply))
                    .chain(deliveries.into_iter().zip(replies))
                    .collect();
                warn!(%error, size = again.len(), "intake batch failed; writing one by one");
                for (delivery, reply) in again {
                    let result = self
                        .log
                        .write(std::slice::from_ref(&delivery))
                        .map(|mut recorded| recorded.remove(0));
                    if let Err(error) = &result {
                        error!(%error, "writing a delivery failed");
                    }
                    self.committed.push((reply, result));
                }
            }
        }
    }

    fn commit_open(&mut self) {
        if self.open.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        let committed = self.log.commit();
        debug!(
            size = self.open.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "intake batch committed"
        );
        let open = std::mem::take(&mut self.open);
        match committed {
            Ok(()) => self.committed.extend(
                open.into_iter()
                    .map(|(_, reply, recorded)| (reply, Ok(recorded))),
            ),
            Err(error) => {
                error!(%error, "committing deliveries failed");
                self.log.rollback();
                let message = error.to_string();
                self.committed.extend(open.into_iter().map(|(_, reply, _)| {
                    let failed = std::io::Error::other(message.clone());
                    (reply, Err(StoreError::Sync(failed)))
                }));
            }
        }
    }
}

/// Writes deliveries into the open transaction as they arrive. The sync
/// thread commits it when it is free to make it durable, so the deliveries
/// that arrive during a sync share one commit; the writer commits only a
/// full batch.
async fn write_loop(
    log: Box<dyn IntakeLog>,
    mut rx: mpsc::Receiver<(NewDelivery, Reply)>,
    batch_max: usize,
    jobs_ready: Arc<Notify>,
) {
    let sync = log.sync_handle();
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            log,
            open: Vec::with_capacity(batch_max),
            committed: Vec::new(),
            closed: false,
        }),
        work: Condvar::new(),
    });
    let sync_thread = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("forgehand-sync".into())
            .spawn(move || sync_loop(&shared, &*sync, &jobs_ready))
            .expect("the intake sync thread starts")
    };
    let mut incoming = Vec::with_capacity(batch_max);
    while rx.recv_many(&mut incoming, batch_max).await > 0 {
        let mut state = shared.lock();
        state.add(std::mem::take(&mut incoming));
        if state.open.len() >= batch_max {
            state.commit_open();
        }
        drop(state);
        shared.work.notify_one();
    }
    // The last deliveries are committed, synced and answered before the
    // writer ends.
    shared.lock().closed = true;
    shared.work.notify_one();
    let _ = sync_thread.join();
}

/// Commits what the writer wrote meanwhile and makes it durable with one
/// sync, over and over: one disk sync covers every commit before it.
fn sync_loop(shared: &Shared, sync: &dyn SyncHandle, jobs_ready: &Notify) {
    loop {
        let written = {
            let mut state = shared.lock();
            while state.open.is_empty() && state.committed.is_empty() {
                if state.closed {
                    return;
                }
                state = shared.work.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            state.commit_open();
            std::mem::take(&mut state.committed)
        };
        sync_and_answer(sync, written, jobs_ready);
    }
}

fn sync_and_answer(
    sync: &dyn SyncHandle,
    written: Vec<(Reply, StoreResult<Recorded>)>,
    jobs_ready: &Notify,
) {
    let started = std::time::Instant::now();
    let synced = sync.sync();
    debug!(
        waiting = written.len(),
        elapsed_us = started.elapsed().as_micros() as u64,
        "intake sync done"
    );
    if let Err(error) = &synced {
        // Committed but perhaps not on disk: in doubt, do not acknowledge.
        // The forge's redelivery is then answered as a duplicate.
        error!(%error, "syncing deliveries failed; answering 503");
    }
    let mut new_jobs = false;
    for (reply, result) in written {
        let result = match (&synced, result) {
            (Ok(()), result) => result,
            (Err(_), Ok(_)) => Err(StoreError::Sync(std::io::Error::other(
                "the disk sync failed",
            ))),
            (Err(_), Err(e)) => Err(e),
        };
        new_jobs |= matches!(&result, Ok(Recorded::New { jobs, .. }) if !jobs.is_empty());
        // The requester may have gone (client hung up): the delivery is
        // recorded all the same, which is what matters.
        let _ = reply.send(result);
    }
    if new_jobs {
        jobs_ready.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::Outcome;

    /// An intake log in memory whose syncs wait for the test to let them go.
    #[derive(Default)]
    struct Ledger {
        open: Vec<String>,
        committed: Vec<String>,
        /// The size of every commit, in order.
        commits: Vec<usize>,
        /// How many deliveries were committed when each sync started.
        synced_upto: Vec<usize>,
        bad_ids: HashSet<String>,
        commits_fail: bool,
    }

    struct FakeLog {
        ledger: Arc<Mutex<Ledger>>,
        sync: Arc<GatedSync>,
    }

    struct GatedSync {
        ledger: Arc<Mutex<Ledger>>,
        gate: Mutex<std::sync::mpsc::Receiver<bool>>,
        started: AtomicUsize,
    }

    impl IntakeLog for FakeLog {
        fn add(&mut self, batch: &[NewDelivery]) -> StoreResult<Vec<Recorded>> {
            let mut ledger = self.ledger.lock().unwrap();
            let mut recorded = Vec::new();
            for delivery in batch {
                let id = delivery.delivery_id.clone().unwrap();
                if ledger.bad_ids.contains(&id) {
                    // As the trait says: the whole open transaction goes.
                    ledger.open.clear();
                    return Err(StoreError::Sqlite(rusqlite::Error::InvalidQuery));
                }
                ledger.open.push(id);
                let n = (ledger.committed.len() + ledger.open.len()) as i64;
                recorded.push(Recorded::New {
                    delivery: n,
                    jobs: vec![],
                });
            }
            Ok(recorded)
        }

        fn commit(&mut self) -> StoreResult<()> {
            let mut ledger = self.ledger.lock().unwrap();
            if ledger.commits_fail {
                return Err(StoreError::Sqlite(rusqlite::Error::InvalidQuery));
            }
            let open = std::mem::take(&mut ledger.open);
            if !open.is_empty() {
                ledger.commits.push(open.len());
                ledger.committed.extend(open);
            }
            Ok(())
        }

        fn rollback(&mut self) {
            self.ledger.lock().unwrap().open.clear();
        }

        fn sync_handle(&self) -> Arc<dyn SyncHandle> {
            self.sync.clone()
        }
    }

    impl SyncHandle for GatedSync {
        fn sync(&self) -> StoreResult<()> {
            {
                let mut ledger = self.ledger.lock().unwrap();
                let done = ledger.committed.len();
                ledger.synced_upto.push(done);
            }
            self.started.fetch_add(1, Ordering::SeqCst);
            let ok = self
                .gate
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(10))
                .expect("the test lets every sync go");
            if ok {
                Ok(())
            } else {
                Err(StoreError::Sync(std::io::Error::other("disk gone")))
            }
        }
    }

    struct Harness {
        writer: IntakeWriter,
        ledger: Arc<Mutex<Ledger>>,
        sync: Arc<GatedSync>,
        /// `true` lets one sync succeed, `false` makes it fail.
        gate: std::sync::mpsc::Sender<bool>,
    }

    fn harness(adjust: impl FnOnce(&mut Ledger)) -> Harness {
        let mut ledger = Ledger::default();
        adjust(&mut ledger);
        let ledger = Arc::new(Mutex::new(ledger));
        let (gate, gate_rx) = std::sync::mpsc::channel();
        let sync = Arc::new(GatedSync {
            ledger: ledger.clone(),
            gate: Mutex::new(gate_rx),
            started: AtomicUsize::new(0),
        });
        let log = FakeLog {
            ledger: ledger.clone(),
            sync: sync.clone(),
        };
        let writer = IntakeWriter::spawn(Box::new(log), 64, Arc::new(Notify::new()));
        Harness {
            writer,
            ledger,
            sync,
            gate,
        }
    }

    impl Harness {
        fn send(&self, id: &str) -> tokio::task::JoinHandle<StoreResult<Recorded>> {
            let writer = self.writer.clone();
            let delivery = delivery(id);
            tokio::spawn(async move { writer.record(delivery).await })
        }

        fn open_gate(&self) {
            for _ in 0..100 {
                self.gate.send(true).unwrap();
            }
        }

        async fn wait_for(&self, what: &str, done: impl Fn(&Ledger, usize) -> bool) {
            for _ in 0..5000 {
                let syncs = self.sync.started.load(Ordering::SeqCst);
                if done(&self.ledger.lock().unwrap(), syncs) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            panic!("timed out waiting for {what}");
        }
    }

    fn delivery(id: &str) -> NewDelivery {
        NewDelivery {
            forge: forgehand_types::ForgeKind::Github,
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
            jobs: Vec::new(),
            installation: None,
            digest: None,
            received_at: 0,
        }
    }

    #[tokio::test]
    async fn deliveries_arriving_during_a_sync_share_one_commit_and_wait_for_their_own_sync() {
        let h = harness(|_| {});
        let first = h.send("a");
        h.wait_for("the first sync", |_, syncs| syncs == 1).await;
        let rest: Vec<_> = ["b", "c", "d"].iter().map(|id| h.send(id)).collect();
        h.wait_for("three deliveries in the open transaction", |l, _| {
            l.open.len() == 3
        })
        .await;
        assert!(!first.is_finished(), "answered before its sync finished");

        h.gate.send(true).unwrap();
        assert!(first.await.unwrap().is_ok());
        h.wait_for("the second sync", |_, syncs| syncs == 2).await;
        for pending in &rest {
            assert!(!pending.is_finished(), "answered before its sync finished");
        }
        h.gate.send(true).unwrap();
        for pending in rest {
            assert!(pending.await.unwrap().is_ok());
        }
        let ledger = h.ledger.lock().unwrap();
        assert_eq!(ledger.commits, [1, 3]);
        assert_eq!(ledger.synced_upto, [1, 4]);
        assert_eq!(ledger.committed, ["a", "b", "c", "d"]);
    }

    #[tokio::test]
    async fn a_bad_delivery_fails_alone_and_the_open_transaction_is_written_again() {
        let h = harness(|l| {
            l.bad_ids.insert("bad".into());
        });
        let first = h.send("a");
        h.wait_for("the first sync", |_, syncs| syncs == 1).await;
        let good = h.send("b");
        h.wait_for("b in the open transaction", |l, _| l.open == ["b"])
            .await;
        // Fails inside the open transaction, taking b with it.
        let bad = h.send("bad");
        let after = h.send("c");
        // From here on every sync may go, however the rest is grouped.
        h.open_gate();

        assert!(first.await.unwrap().is_ok());
        assert!(good.await.unwrap().is_ok());
        assert!(after.await.unwrap().is_ok());
        assert!(matches!(bad.await.unwrap(), Err(StoreError::Sqlite(_))));
        let ledger = h.ledger.lock().unwrap();
        let mut committed = ledger.committed.clone();
        committed.sort();
        assert_eq!(
            committed,
            ["a", "b", "c"],
            "each good delivery exactly once"
        );
    }

    #[tokio::test]
    async fn a_failed_commit_or_sync_is_never_acknowledged() {
        let h = harness(|l| l.commits_fail = true);
        h.gate.send(true).unwrap();
        let refused = h.send("a");
        assert!(matches!(refused.await.unwrap(), Err(StoreError::Sync(_))));
        assert!(h.ledger.lock().unwrap().committed.is_empty());

        h.ledger.lock().unwrap().commits_fail = false;
        let unsynced = h.send("b");
        h.wait_for("the sync", |l, _| l.committed == ["b"]).await;
        h.gate.send(false).unwrap();
        assert!(matches!(unsynced.await.unwrap(), Err(StoreError::Sync(_))));
    }
}
