//! Recording deliveries and the jobs they make: the same rules as the
//! SQLite intake (`forgehand_store`'s `sqlite/record.rs`), as async
//! statements on one connection, used two ways: by the group-commit
//! intake writer through [`PgIntakeLog`], and by
//! [`Store::record_deliveries`](forgehand_store::Store::record_deliveries)
//! in one transaction of the pool.

use std::sync::{mpsc as std_mpsc, Arc};

use forgehand_store::{
    CompressedPayload, DuplicateOf, InstallationChange, InstallationUpdate, IntakeLog, JobId,
    NewDelivery, Outcome, PayloadDigest, Recorded, StoreError, StoreResult, SyncHandle,
};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};
use tokio::sync::mpsc;

/// Records `batch` in one transaction of the pool, committed (and so
/// durable) on return.
pub(crate) async fn record_deliveries(
    pool: &PgPool,
    batch: &[NewDelivery],
    max_attempts: u32,
) -> StoreResult<Vec<Recorded>> {
    let mut tx = pool.begin().await?;
    let mut recorded = Vec::with_capacity(batch.len());
    let mut jobs = false;
    for delivery in batch {
        let one = record_one(&mut tx, delivery, max_attempts).await?;
        jobs |= matches!(&one, Recorded::New { jobs, .. } if !jobs.is_empty());
        recorded.push(one);
    }
    if jobs {
        notify_jobs(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(recorded)
}

/// Wakes the listening workers when the transaction commits: the jobs
/// are due at once (0, not this host's clock: the listener's may differ).
async fn notify_jobs(tx: &mut PgConnection) -> StoreResult<()> {
    sqlx::query_file!("queries/claim/notify.sql", 0_i64)
        .execute(tx)
        .await?;
    Ok(())
}

async fn record_one(
    tx: &mut PgConnection,
    d: &NewDelivery,
    max_attempts: u32,
) -> StoreResult<Recorded> {
    // Accepted and ignored deliveries hold their delivery id; refused ones
    // must not, or a forged request could block the genuine delivery.
    let claims_id =
        matches!(d.outcome, Outcome::Accepted | Outcome::Ignored) && d.delivery_id.is_some();
    let delivery = if claims_id {
        let row = Row::of(d, d.outcome, None);
        let claimed = sqlx::query_file_scalar!(
            "queries/intake/claim_delivery.sql",
            row.forge,
            row.delivery_id,
            row.event,
            row.event_name,
            row.outcome,
            row.status_code,
            row.reason,
            row.repo,
            row.target,
            row.sender,
            row.detail,
            row.payload,
            row.received_at,
            row.duplicate_of
        )
        .fetch_optional(&mut *tx)
        .await?;
        let Some(delivery) = claimed else {
            let first = sqlx::query_file_scalar!(
                "queries/intake/first_delivery.sql",
                d.forge.as_str(),
                d.delivery_id
            )
            .fetch_one(&mut *tx)
            .await?;
            let delivery = insert_delivery(tx, d, Outcome::Duplicate, Some(first)).await?;
            return duplicate(tx, delivery, first, DuplicateOf::DeliveryId).await;
        };
        if let Some(digest) = &d.digest {
            if let Some(first) = claim_digest(tx, digest, d, delivery).await? {
                return record_replay(tx, delivery, first).await;
            }
        }
        delivery
    } else {
        insert_delivery(tx, d, d.outcome, None).await?
    };
    let mut jobs = Vec::with_capacity(d.jobs.len());
    for job in &d.jobs {
        let id = sqlx::query_file_scalar!(
            "queries/intake/insert_job.sql",
            delivery,
            job.kind.as_str(),
            job.payload,
            job.target_key.as_str(),
            i64::from(max_attempts),
            d.received_at,
            job.supersedable
        )
        .fetch_one(&mut *tx)
        .await?;
        jobs.push(JobId(id));
    }
    if let Some(change) = &d.installation {
        record_installation(tx, change, d.received_at).await?;
    }
    Ok(Recorded::New { delivery, jobs })
}

/// Records the digest of delivery `delivery`'s body, unless the same body
/// was recorded before: then returns the row of the delivery it came with.
async fn claim_digest(
    tx: &mut PgConnection,
    digest: &PayloadDigest,
    d: &NewDelivery,
    delivery: i64,
) -> StoreResult<Option<i64>> {
    let claimed = sqlx::query_file_scalar!(
        "queries/intake/claim_digest.sql",
        digest.signer,
        &digest.sha256[..],
        d.event,
        delivery,
        d.received_at
    )
    .fetch_optional(&mut *tx)
    .await?;
    if claimed.is_some() {
        return Ok(None);
    }
    let first = sqlx::query_file_scalar!(
        "queries/intake/digest_owner.sql",
        digest.signer,
        &digest.sha256[..]
    )
    .fetch_one(&mut *tx)
    .await?;
    Ok(Some(first))
}

/// A body already recorded, under a new delivery id: the row just claimed
/// becomes a duplicate, which holds no delivery id and keeps no body, and
/// nothing of the delivery (jobs, an installation's change) is applied.
async fn record_replay(tx: &mut PgConnection, delivery: i64, first: i64) -> StoreResult<Recorded> {
    sqlx::query_file!(
        "queries/intake/mark_replay.sql",
        DuplicateOf::Payload.reason(),
        first,
        delivery
    )
    .execute(&mut *tx)
    .await?;
    duplicate(tx, delivery, first, DuplicateOf::Payload).await
}

/// The answer to a duplicate: the first delivery's jobs.
async fn duplicate(
    tx: &mut PgConnection,
    delivery: i64,
    first: i64,
    of: DuplicateOf,
) -> StoreResult<Recorded> {
    let jobs = sqlx::query_file_scalar!("queries/deliveries/jobs.sql", first)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(JobId)
        .collect();
    Ok(Recorded::Duplicate { delivery, jobs, of })
}

async fn record_installation(
    tx: &mut PgConnection,
    change: &InstallationChange,
    now: i64,
) -> StoreResult<()> {
    // A change of repositories says nothing of the installation's state.
    let state = match change.update {
        InstallationUpdate::Deleted => Some("deleted"),
        InstallationUpdate::Suspended => Some("suspended"),
        InstallationUpdate::Installed { .. } | InstallationUpdate::Unsuspended => Some("active"),
        InstallationUpdate::Repositories { .. } => None,
    };
    let id = change.id as i64;
    sqlx::query_file!(
        "queries/intake/upsert_installation.sql",
        id,
        change.account,
        state,
        now
    )
    .execute(&mut *tx)
    .await?;
    let (added, removed): (&[String], &[String]) = match &change.update {
        InstallationUpdate::Installed { repositories } => {
            sqlx::query_file!("queries/intake/clear_installation_repositories.sql", id)
                .execute(&mut *tx)
                .await?;
            (repositories, &[])
        }
        InstallationUpdate::Repositories { added, removed } => (added, removed),
        _ => (&[], &[]),
    };
    for repo in added {
        sqlx::query_file!("queries/intake/add_installation_repository.sql", id, repo)
            .execute(&mut *tx)
            .await?;
    }
    for repo in removed {
        sqlx::query_file!(
            "queries/intake/remove_installation_repository.sql",
            id,
            repo
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// Inserts a delivery as `outcome`; a duplicate points at its first.
async fn insert_delivery(
    tx: &mut PgConnection,
    d: &NewDelivery,
    outcome: Outcome,
    duplicate_of: Option<i64>,
) -> StoreResult<i64> {
    let row = Row::of(d, outcome, duplicate_of);
    Ok(sqlx::query_file_scalar!(
        "queries/intake/insert_delivery.sql",
        row.forge,
        row.delivery_id,
        row.event,
        row.event_name,
        row.outcome,
        row.status_code,
        row.reason,
        row.repo,
        row.target,
        row.sender,
        row.detail,
        row.payload,
        row.received_at,
        row.duplicate_of
    )
    .fetch_one(&mut *tx)
    .await?)
}

/// A delivery's row as both inserts bind it.
struct Row<'a> {
    forge: &'static str,
    delivery_id: Option<&'a str>,
    event: Option<&'a str>,
    event_name: Option<&'a str>,
    outcome: &'static str,
    status_code: i64,
    reason: Option<&'a str>,
    repo: Option<&'a str>,
    target: Option<i64>,
    sender: Option<&'a str>,
    detail: Option<&'a str>,
    payload: Option<&'a [u8]>,
    received_at: i64,
    duplicate_of: Option<i64>,
}

impl<'a> Row<'a> {
    fn of(d: &'a NewDelivery, outcome: Outcome, duplicate_of: Option<i64>) -> Self {
        let (status_code, reason) = if outcome == Outcome::Duplicate {
            (200, Some(DuplicateOf::DeliveryId.reason()))
        } else {
            (d.status_code, d.reason.as_deref())
        };
        // Only an accepted delivery's body is kept: it is what its jobs came from.
        let payload = (outcome == Outcome::Accepted)
            .then_some(d.payload.as_ref().map(CompressedPayload::as_bytes))
            .flatten();
        Row {
            forge: d.forge.as_str(),
            delivery_id: d.delivery_id.as_deref(),
            event: d.event.as_deref(),
            event_name: d.event_name.as_deref(),
            outcome: outcome.as_str(),
            status_code: i64::from(status_code),
            reason,
            repo: d.repo.as_deref(),
            target: d.target.map(|t| t as i64),
            sender: d.sender.as_deref(),
            detail: d.detail.as_deref(),
            payload,
            received_at: d.received_at,
            duplicate_of,
        }
    }
}

/// What the intake writer asks of its connection.
enum Op {
    Add(
        Vec<NewDelivery>,
        std_mpsc::SyncSender<StoreResult<Vec<Recorded>>>,
    ),
    Commit(std_mpsc::SyncSender<StoreResult<()>>),
    Rollback(std_mpsc::SyncSender<()>),
}

/// The intake log on PostgreSQL: a connection of its own, whose open
/// transaction is nobody else's, driven from a thread of its own. The
/// intake writer calls the log synchronously from inside its own
/// single-threaded runtime, where no other runtime can be entered; the
/// connection's thread runs one and answers over a channel.
pub(crate) struct PgIntakeLog {
    ops: mpsc::UnboundedSender<Op>,
}

impl PgIntakeLog {
    pub(crate) fn open(connect: PgConnectOptions, max_attempts: u32) -> StoreResult<Self> {
        let (ops, incoming) = mpsc::unbounded_channel();
        let (ready, opened) = std_mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("forgehand-pg-intake".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = ready.send(Err(StoreError::Sync(error)));
                        return;
                    }
                };
                runtime.block_on(serve(connect, max_attempts, incoming, ready));
            })
            .map_err(StoreError::Sync)?;
        // Connected before the log is handed out: a database the intake
        // cannot reach is an error at start-up, not at the first webhook.
        opened.recv().map_err(|_| StoreError::IntakeClosed)??;
        Ok(PgIntakeLog { ops })
    }

    fn ask<T>(&self, op: impl FnOnce(std_mpsc::SyncSender<T>) -> Op) -> Option<T> {
        let (reply, answer) = std_mpsc::sync_channel(1);
        self.ops.send(op(reply)).ok()?;
        answer.recv().ok()
    }
}

/// The connection's side: one transaction open at a time.
async fn serve(
    connect: PgConnectOptions,
    max_attempts: u32,
    mut incoming: mpsc::UnboundedReceiver<Op>,
    ready: std_mpsc::SyncSender<StoreResult<()>>,
) {
    // A pool of one, so that a broken connection is replaced by itself.
    let pool = match PgPoolOptions::new()
        .max_connections(1)
        .connect_with(connect)
        .await
    {
        Ok(pool) => pool,
        Err(error) => {
            let _ = ready.send(Err(error.into()));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let mut open: Option<(Transaction<'static, Postgres>, bool)> = None;
    while let Some(op) = incoming.recv().await {
        match op {
            Op::Add(batch, reply) => {
                let added = add(&pool, &mut open, &batch, max_attempts).await;
                if added.is_err() {
                    // As the trait says: the whole open transaction goes.
                    open = None;
                }
                let _ = reply.send(added);
            }
            Op::Commit(reply) => {
                let committed = match open.take() {
                    None => Ok(()),
                    // On an error the transaction is dropped: rolled back.
                    Some((mut tx, jobs)) => match commit(&mut tx, jobs).await {
                        Ok(()) => tx.commit().await.map_err(StoreError::from),
                        Err(error) => Err(error),
                    },
                };
                let _ = reply.send(committed);
            }
            Op::Rollback(reply) => {
                // Dropping the transaction rolls it back.
                open = None;
                let _ = reply.send(());
            }
        }
    }
}

async fn add(
    pool: &PgPool,
    open: &mut Option<(Transaction<'static, Postgres>, bool)>,
    batch: &[NewDelivery],
    max_attempts: u32,
) -> StoreResult<Vec<Recorded>> {
    if open.is_none() {
        *open = Some((pool.begin().await?, false));
    }
    let (tx, jobs) = open.as_mut().expect("opened above");
    let mut recorded = Vec::with_capacity(batch.len());
    for delivery in batch {
        let one = record_one(tx, delivery, max_attempts).await?;
        *jobs |= matches!(&one, Recorded::New { jobs, .. } if !jobs.is_empty());
        recorded.push(one);
    }
    Ok(recorded)
}

async fn commit(tx: &mut PgConnection, jobs: bool) -> StoreResult<()> {
    if jobs {
        notify_jobs(tx).await?;
    }
    Ok(())
}

impl IntakeLog for PgIntakeLog {
    fn add(&mut self, batch: &[NewDelivery]) -> StoreResult<Vec<Recorded>> {
        self.ask(|reply| Op::Add(batch.to_vec(), reply))
            .unwrap_or(Err(StoreError::IntakeClosed))
    }

    fn commit(&mut self) -> StoreResult<()> {
        self.ask(Op::Commit)
            .unwrap_or(Err(StoreError::IntakeClosed))
    }

    fn rollback(&mut self) {
        let _ = self.ask(Op::Rollback);
    }

    fn sync_handle(&self) -> Arc<dyn SyncHandle> {
        Arc::new(CommitIsDurable)
    }
}

/// PostgreSQL's `COMMIT` returns once the commit is durable
/// (`synchronous_commit = on`, the default; with synchronous standbys
/// named, once they have it too): after it there is nothing left to sync.
/// The deliveries that arrive while a commit waits for the disk share the
/// next commit, so the intake still commits in groups.
struct CommitIsDurable;

impl SyncHandle for CommitIsDurable {
    fn sync(&self) -> StoreResult<()> {
        Ok(())
    }
}
