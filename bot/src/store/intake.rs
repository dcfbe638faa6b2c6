//! Group commit for webhook intake. Each request hands its delivery to one
//! writer and waits; the writer takes everything that queued up meanwhile
//! into one transaction, and a sync stage makes committed batches durable
//! while the next batch is written. One disk sync serves many deliveries,
//! and no request is answered before its delivery is on disk.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Notify};
use tracing::{debug, error, warn};

use super::{IntakeLog, NewDelivery, Recorded, Store, StoreError, StoreResult, SyncHandle};

type Reply = oneshot::Sender<StoreResult<Recorded>>;

#[derive(Clone)]
pub struct IntakeWriter {
    tx: mpsc::Sender<(NewDelivery, Reply)>,
}

impl IntakeWriter {
    /// Starts the writer thread. `jobs_ready` is notified after every sync
    /// that made a new job durable, so local workers start without polling.
    pub fn spawn(store: Arc<dyn Store>, batch_max: usize, jobs_ready: Arc<Notify>) -> Self {
        // Bounded: when the disk falls behind, requests wait here instead
        // of piling up in memory.
        let (tx, rx) = mpsc::channel(batch_max.max(1) * 4);
        // The writer gets a thread of its own and writes synchronously:
        // an async hop per statement would queue behind request handlers
        // for a worker thread, and every request in a batch waits on it.
        let log = store.intake_log();
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

/// Commits batches one after another and hands each to the sync thread,
/// which makes them durable and answers their requests while the next
/// batch is being written.
async fn write_loop(
    mut log: Box<dyn IntakeLog>,
    mut rx: mpsc::Receiver<(NewDelivery, Reply)>,
    batch_max: usize,
    jobs_ready: Arc<Notify>,
) {
    let (to_sync, synced) = std::sync::mpsc::channel::<Vec<(Reply, StoreResult<Recorded>)>>();
    let sync = log.sync_handle();
    let sync_thread = std::thread::Builder::new()
        .name("forgehand-sync".into())
        .spawn(move || sync_loop(&*sync, synced, &jobs_ready))
        .expect("the intake sync thread starts");
    let mut batch = Vec::with_capacity(batch_max);
    while rx.recv_many(&mut batch, batch_max).await > 0 {
        let (deliveries, replies): (Vec<_>, Vec<_>) =
            std::mem::take(&mut batch).into_iter().unzip();
        let started = std::time::Instant::now();
        let results = write(&mut *log, &deliveries);
        debug!(
            size = deliveries.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "intake batch written"
        );
        if to_sync
            .send(replies.into_iter().zip(results).collect())
            .is_err()
        {
            error!("the intake sync thread is gone");
            break;
        }
    }
    // The last batches are synced and answered before the writer ends.
    drop(to_sync);
    let _ = sync_thread.join();
}

/// One disk sync covers every commit before it: the sync thread takes all
/// the batches committed while it was syncing and makes them durable with
/// one sync, instead of one sync per batch.
fn sync_loop(
    sync: &dyn SyncHandle,
    batches: std::sync::mpsc::Receiver<Vec<(Reply, StoreResult<Recorded>)>>,
    jobs_ready: &Notify,
) {
    while let Ok(first) = batches.recv() {
        let mut written = first;
        while let Ok(more) = batches.try_recv() {
            written.extend(more);
        }
        sync_and_answer(sync, written, jobs_ready);
    }
}

fn write(log: &mut dyn IntakeLog, deliveries: &[NewDelivery]) -> Vec<StoreResult<Recorded>> {
    match log.write(deliveries) {
        Ok(recorded) => recorded.into_iter().map(Ok).collect(),
        Err(batch_error) if deliveries.len() > 1 => {
            // One bad delivery must not sink the others: write each on its
            // own so every request gets its own answer.
            warn!(error = %batch_error, size = deliveries.len(), "intake batch failed; writing one by one");
            deliveries
                .iter()
                .map(|d| log.write(std::slice::from_ref(d)).map(|mut r| r.remove(0)))
                .collect()
        }
        Err(error) => {
            error!(%error, "writing a delivery failed");
            vec![Err(error)]
        }
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
