//! The intake log on SQLite: one dedicated connection, driven
//! synchronously from the intake writer's own thread through rusqlite, so
//! that a batch costs a few microseconds per row instead of an async round
//! trip per statement. It commits without waiting for the disk
//! (`synchronous = NORMAL`); [`WalSync`] then makes commits durable by
//! syncing the WAL file, off the writer's path.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::{params, params_from_iter, Connection};

use crate::store::{
    CompressedPayload, DuplicateOf, InstallationChange, InstallationUpdate, IntakeLog, NewDelivery,
    Outcome, PayloadDigest, Recorded, StoreError, StoreResult, SyncHandle,
};

pub(super) struct SqliteIntake {
    connection: Connection,
    max_attempts: u32,
    last_checkpoint: Instant,
}

/// How often the intake connection checkpoints the WAL while it writes.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(50);

impl SqliteIntake {
    /// Opens the intake connection on a database the pool has migrated.
    pub(super) fn open(path: &Path, max_attempts: u32) -> StoreResult<Self> {
        let connection = Connection::open(path)?;
        connection.busy_timeout(Duration::from_secs(10))?;
        // A 64 MiB page cache: the random pages of the delivery-id index
        // stay in memory instead of being read back for every batch.
        connection.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
             PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = 0; PRAGMA cache_size = -65536;",
        )?;
        Ok(SqliteIntake {
            connection,
            max_attempts,
            last_checkpoint: Instant::now(),
        })
    }

    fn add(&mut self, batch: &[NewDelivery]) -> StoreResult<Vec<Recorded>> {
        let max_attempts = self.max_attempts;
        // Whether a transaction is open is asked of SQLite, which also
        // ends one on some errors by itself.
        if self.connection.is_autocommit() {
            self.connection.prepare_cached("BEGIN")?.execute([])?;
        }
        // No savepoint (it would copy every page it touches): a failure
        // rolls back the whole open batch, which the caller writes again.
        let recorded = batch
            .iter()
            .map(|d| record_one(&self.connection, d, max_attempts))
            .collect::<StoreResult<Vec<_>>>();
        if recorded.is_err() {
            self.rollback();
        }
        recorded
    }

    fn commit(&mut self) -> StoreResult<()> {
        if !self.connection.is_autocommit() {
            self.connection.prepare_cached("COMMIT")?.execute([])?;
        }
        if self.last_checkpoint.elapsed() >= CHECKPOINT_EVERY {
            self.checkpoint();
        }
        Ok(())
    }

    fn rollback(&mut self) {
        if !self.connection.is_autocommit() {
            let _ = self.connection.execute_batch("ROLLBACK");
        }
    }

    /// Copies the WAL into the database. Done here, between two batches,
    /// because under a steady stream of commits a checkpoint running
    /// beside the writer never catches up: the WAL would grow without end.
    /// Frequent, so each copies little.
    ///
    /// PASSIVE, so that it never waits: a RESTART checkpoint waits for
    /// every reader to finish, and while it waited (an operator's open
    /// `sqlite3` session, a slow report) every webhook waited behind it.
    /// Once everything is copied, the intake's next transaction starts
    /// the WAL over by itself, unless a reader still uses it; then the WAL
    /// grows until the reader is done and a later round catches up.
    fn checkpoint(&mut self) {
        self.last_checkpoint = Instant::now();
        let done = self
            .connection
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            });
        match done {
            Ok((0, in_wal, copied)) if copied >= in_wal => {}
            Ok((_, in_wal, copied)) => tracing::debug!(
                in_wal,
                copied,
                "WAL checkpoint could not copy every frame (a reader uses them); retrying later"
            ),
            Err(error) => tracing::warn!(%error, "WAL checkpoint failed"),
        }
    }
}

fn record_one(tx: &Connection, d: &NewDelivery, max_attempts: u32) -> StoreResult<Recorded> {
    // Accepted and ignored deliveries hold their delivery id; refused ones
    // must not, or a forged request could block the genuine delivery.
    let claims_id =
        matches!(d.outcome, Outcome::Accepted | Outcome::Ignored) && d.delivery_id.is_some();
    // Row ids come from last_insert_rowid() rather than RETURNING, which
    // makes SQLite build a temporary table per statement: on this path
    // that doubled the cost of a row.
    let delivery = if claims_id {
        let mut claim = tx.prepare_cached(CLAIM_DELIVERY)?;
        let inserted = claim.execute(params_from_iter(delivery_params(d, d.outcome, None)))?;
        if inserted == 0 {
            let first: i64 = tx.query_row(
                super::FIRST_DELIVERY,
                params![d.forge, d.delivery_id],
                |r| r.get(0),
            )?;
            let delivery = insert_delivery(tx, d, Outcome::Duplicate, Some(first))?;
            return duplicate(tx, delivery, first, DuplicateOf::DeliveryId);
        }
        let delivery = tx.last_insert_rowid();
        if let Some(digest) = &d.digest {
            if let Some(first) = claim_digest(tx, digest, d, delivery)? {
                return record_replay(tx, delivery, first);
            }
        }
        delivery
    } else {
        insert_delivery(tx, d, d.outcome, None)?
    };
    let mut insert_job = tx.prepare_cached(
        "INSERT INTO jobs (delivery, kind, payload, target_key, state, max_attempts, run_at, created_at, updated_at, supersedable) \
         VALUES (?1, ?2, ?3, ?4, 'queued', ?5, ?6, ?6, ?6, ?7)",
    )?;
    let mut jobs = Vec::with_capacity(d.jobs.len());
    for job in &d.jobs {
        let supersedable = job.supersedable;
        insert_job.execute(params![
            delivery,
            job.kind,
            job.payload,
            job.target_key,
            max_attempts,
            d.received_at,
            supersedable
        ])?;
        jobs.push(tx.last_insert_rowid());
    }
    if let Some(change) = &d.installation {
        record_installation(tx, change, d.received_at)?;
    }
    Ok(Recorded::New { delivery, jobs })
}

/// Records the digest of delivery `delivery`'s body, unless the same body
/// was recorded before: then returns the row of the delivery it came with.
fn claim_digest(
    tx: &Connection,
    digest: &PayloadDigest,
    d: &NewDelivery,
    delivery: i64,
) -> StoreResult<Option<i64>> {
    let mut claim = tx.prepare_cached(
        "INSERT INTO payload_digests (signer, sha256, event, delivery, received_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (signer, sha256) DO NOTHING",
    )?;
    let inserted = claim.execute(params![
        digest.signer,
        &digest.sha256[..],
        d.event,
        delivery,
        d.received_at
    ])?;
    if inserted == 1 {
        return Ok(None);
    }
    let first = tx
        .prepare_cached(super::DIGEST_OWNER)?
        .query_row(params![digest.signer, &digest.sha256[..]], |r| r.get(0))?;
    Ok(Some(first))
}

/// A body already recorded, under a new delivery id: the row just claimed
/// becomes a duplicate, which holds no delivery id and keeps no body, and
/// nothing of the delivery (jobs, an installation's change) is applied.
fn record_replay(tx: &Connection, delivery: i64, first: i64) -> StoreResult<Recorded> {
    tx.prepare_cached(
        "UPDATE deliveries SET outcome = 'duplicate', status_code = 200, reason = ?1, \
         payload = NULL, duplicate_of = ?2 WHERE id = ?3",
    )?
    .execute(params![DuplicateOf::Payload.reason(), first, delivery])?;
    duplicate(tx, delivery, first, DuplicateOf::Payload)
}

/// The answer to a duplicate: the first delivery's jobs.
fn duplicate(tx: &Connection, delivery: i64, first: i64, of: DuplicateOf) -> StoreResult<Recorded> {
    let mut jobs = tx.prepare_cached(super::JOBS_OF_DELIVERY)?;
    let jobs = jobs
        .query_map([first], |r| r.get(0))?
        .collect::<Result<Vec<i64>, _>>()?;
    Ok(Recorded::Duplicate { delivery, jobs, of })
}

fn record_installation(tx: &Connection, change: &InstallationChange, now: i64) -> StoreResult<()> {
    // A change of repositories says nothing of the installation's state.
    let state = match change.update {
        InstallationUpdate::Deleted => Some("deleted"),
        InstallationUpdate::Suspended => Some("suspended"),
        InstallationUpdate::Installed { .. } | InstallationUpdate::Unsuspended => Some("active"),
        InstallationUpdate::Repositories { .. } => None,
    };
    let id = change.id as i64;
    tx.execute(
        "INSERT INTO installations (id, account, state, updated_at) VALUES (?1, ?2, coalesce(?3, 'active'), ?4) \
         ON CONFLICT (id) DO UPDATE SET account = ?2, state = coalesce(?3, state), updated_at = ?4",
        params![id, change.account, state, now],
    )?;
    let (added, removed): (&[String], &[String]) = match &change.update {
        InstallationUpdate::Installed { repositories } => {
            tx.execute(
                "DELETE FROM installation_repositories WHERE installation = ?1",
                [id],
            )?;
            (repositories, &[])
        }
        InstallationUpdate::Repositories { added, removed } => (added, removed),
        _ => (&[], &[]),
    };
    for repo in added {
        tx.execute(
            "INSERT OR IGNORE INTO installation_repositories (installation, repository) VALUES (?1, ?2)",
            params![id, repo],
        )?;
    }
    for repo in removed {
        tx.execute(
            "DELETE FROM installation_repositories WHERE installation = ?1 AND repository = ?2",
            params![id, repo],
        )?;
    }
    Ok(())
}

/// Inserts a delivery as `outcome`; a duplicate points at its first.
fn insert_delivery(
    tx: &Connection,
    d: &NewDelivery,
    outcome: Outcome,
    duplicate_of: Option<i64>,
) -> StoreResult<i64> {
    let mut insert = tx.prepare_cached(INSERT_DELIVERY)?;
    insert.execute(params_from_iter(delivery_params(d, outcome, duplicate_of)))?;
    Ok(tx.last_insert_rowid())
}

macro_rules! insert_delivery_sql {
    () => {
        "INSERT INTO deliveries (forge, delivery_id, event, event_name, outcome, \
         status_code, reason, repo, target, sender, detail, payload, received_at, duplicate_of) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
    };
}

const INSERT_DELIVERY: &str = insert_delivery_sql!();

/// Inserts nothing when the delivery id is already held.
const CLAIM_DELIVERY: &str = concat!(
    insert_delivery_sql!(),
    " ON CONFLICT (forge, delivery_id) WHERE outcome IN ('accepted', 'ignored') DO NOTHING"
);

fn delivery_params(
    d: &NewDelivery,
    outcome: Outcome,
    duplicate_of: Option<i64>,
) -> [Box<dyn rusqlite::ToSql + '_>; 14] {
    let (status_code, reason) = if outcome == Outcome::Duplicate {
        (200, Some(DuplicateOf::DeliveryId.reason()))
    } else {
        (d.status_code, d.reason.as_deref())
    };
    // Only an accepted delivery's body is kept: it is what its jobs came from.
    let payload = (outcome == Outcome::Accepted)
        .then_some(d.payload.as_ref().map(CompressedPayload::as_bytes))
        .flatten();
    [
        Box::new(d.forge.as_str()),
        Box::new(d.delivery_id.as_deref()),
        Box::new(d.event.as_deref()),
        Box::new(d.event_name.as_deref()),
        Box::new(outcome.as_str()),
        Box::new(status_code),
        Box::new(reason),
        Box::new(d.repo.as_deref()),
        Box::new(d.target.map(|t| t as i64)),
        Box::new(d.sender.as_deref()),
        Box::new(d.detail.as_deref()),
        Box::new(payload),
        Box::new(d.received_at),
        Box::new(duplicate_of),
    ]
}

/// Makes every commit so far durable by syncing the WAL file. A sync of
/// the file covers whatever any connection wrote to it before; the file is
/// opened afresh each time since SQLite may have removed and recreated it.
pub(super) struct WalSync {
    pub(super) db_path: PathBuf,
}

impl SyncHandle for WalSync {
    fn sync(&self) -> StoreResult<()> {
        let wal = PathBuf::from(format!("{}-wal", self.db_path.display()));
        let synced = match std::fs::File::open(&wal) {
            Ok(file) => file.sync_data(),
            // No WAL: everything is in the database file.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::File::open(&self.db_path).and_then(|f| f.sync_data())
            }
            Err(e) => Err(e),
        };
        synced.map_err(StoreError::Sync)
    }
}

/// An intake log on a connection of its own: its open transaction is
/// nobody else's.
pub(super) struct SqliteIntakeLog {
    pub(super) intake: SqliteIntake,
    pub(super) sync: Arc<WalSync>,
}

impl IntakeLog for SqliteIntakeLog {
    fn add(&mut self, batch: &[NewDelivery]) -> StoreResult<Vec<Recorded>> {
        self.intake.add(batch)
    }

    fn commit(&mut self) -> StoreResult<()> {
        self.intake.commit()
    }

    fn rollback(&mut self) {
        self.intake.rollback()
    }

    fn sync_handle(&self) -> Arc<dyn SyncHandle> {
        self.sync.clone()
    }
}
