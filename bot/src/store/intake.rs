//! Group commit for webhook intake. Each request hands its delivery to one
//! writer task and waits for the commit; the writer takes everything that
//! queued up meanwhile into the same transaction, so one disk sync serves
//! many deliveries and no request is answered before its delivery is
//! durable.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Notify};
use tracing::{error, warn};

use super::{NewDelivery, Recorded, Store, StoreError, StoreResult};

type Reply = oneshot::Sender<StoreResult<Recorded>>;

#[derive(Clone)]
pub struct IntakeWriter {
    tx: mpsc::Sender<(NewDelivery, Reply)>,
}

impl IntakeWriter {
    /// Starts the writer task. `jobs_ready` is notified after every commit
    /// that created a job, so local workers start without polling.
    pub fn spawn(store: Arc<dyn Store>, batch_max: usize, jobs_ready: Arc<Notify>) -> Self {
        // Bounded: when the disk falls behind, requests wait here instead
        // of piling up in memory.
        let (tx, rx) = mpsc::channel(batch_max.max(1) * 4);
        tokio::spawn(write_loop(store, rx, batch_max.max(1), jobs_ready));
        IntakeWriter { tx }
    }

    /// Records one delivery; returns once it is committed.
    pub async fn record(&self, delivery: NewDelivery) -> StoreResult<Recorded> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((delivery, reply))
            .await
            .map_err(|_| StoreError::IntakeClosed)?;
        answer.await.map_err(|_| StoreError::IntakeClosed)?
    }
}

async fn write_loop(
    store: Arc<dyn Store>,
    mut rx: mpsc::Receiver<(NewDelivery, Reply)>,
    batch_max: usize,
    jobs_ready: Arc<Notify>,
) {
    let mut batch = Vec::with_capacity(batch_max);
    while rx.recv_many(&mut batch, batch_max).await > 0 {
        let (deliveries, replies): (Vec<_>, Vec<_>) =
            std::mem::take(&mut batch).into_iter().unzip();
        let results = match store.record_deliveries(&deliveries).await {
            Ok(recorded) => recorded.into_iter().map(Ok).collect(),
            Err(batch_error) if deliveries.len() > 1 => {
                // One bad delivery must not sink the others: write each on
                // its own so every request gets its own answer.
                warn!(error = %batch_error, size = deliveries.len(), "intake batch failed; recording one by one");
                let mut results = Vec::with_capacity(deliveries.len());
                for delivery in deliveries {
                    let one = store
                        .record_deliveries(std::slice::from_ref(&delivery))
                        .await
                        .map(|mut r| r.remove(0));
                    results.push(one);
                }
                results
            }
            Err(error) => {
                error!(%error, "recording a delivery failed");
                vec![Err(error)]
            }
        };
        let mut new_jobs = false;
        for (reply, result) in replies.into_iter().zip(results) {
            new_jobs |= matches!(&result, Ok(Recorded::New { jobs, .. }) if !jobs.is_empty());
            // The requester may have gone (client hung up): the delivery is
            // recorded all the same, which is what matters.
            let _ = reply.send(result);
        }
        if new_jobs {
            jobs_ready.notify_waiters();
        }
    }
}
