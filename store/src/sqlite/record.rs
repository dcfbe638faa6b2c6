//! The intake log on SQLite: one dedicated connection, driven
//! synchronously from the intake writer's own thread through rusqlite, so
//! that a batch costs a few microseconds per row instead of an async round
//! trip per statement. It commits without waiting for the disk
//! (`synchronous = NORMAL`); [`WalSync`] then makes commits durable by
//! syncing the WAL file, off the writer's path.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::{params, params_from_iter, CachedStatement, Connection};

use crate::{
    CompressedPayload, DuplicateOf, InstallationChange, InstallationUpdate, IntakeLog, JobId,
    NewDelivery, Outcome, PayloadDigest, Recorded, StoreError, StoreResult, SyncHandle,
};

/// Every statement the intake runs (`queries/intake/`), prepared once
/// when its connection opens (so that one the schema does not fit is an
/// error at start-up) and kept in the connection's statement cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sql {
    Begin,
    Commit,
    Checkpoint,
    InsertDelivery,
    ClaimDelivery,
    FirstDelivery,
    InsertJob,
    ClaimDigest,
    DigestOwner,
    MarkReplay,
    JobsOfDelivery,
    UpsertInstallation,
    ClearInstallationRepositories,
    AddInstallationRepository,
    RemoveInstallationRepository,
}

impl Sql {
    pub(super) const ALL: [Sql; 15] = [
        Sql::Begin,
        Sql::Commit,
        Sql::Checkpoint,
        Sql::InsertDelivery,
        Sql::ClaimDelivery,
        Sql::FirstDelivery,
        Sql::InsertJob,
        Sql::ClaimDigest,
        Sql::DigestOwner,
        Sql::MarkReplay,
        Sql::JobsOfDelivery,
        Sql::UpsertInstallation,
        Sql::ClearInstallationRepositories,
        Sql::AddInstallationRepository,
        Sql::RemoveInstallationRepository,
    ];

    pub(super) fn text(self) -> &'static str {
        match self {
            Sql::Begin => "BEGIN",
            Sql::Commit => "COMMIT",
            Sql::Checkpoint => "PRAGMA wal_checkpoint(PASSIVE)",
            Sql::InsertDelivery => include_str!("../../queries/intake/insert_delivery.sql"),
            Sql::ClaimDelivery => include_str!("../../queries/intake/claim_delivery.sql"),
            Sql::FirstDelivery => include_str!("../../queries/intake/first_delivery.sql"),
            Sql::InsertJob => include_str!("../../queries/intake/insert_job.sql"),
            Sql::ClaimDigest => include_str!("../../queries/intake/claim_digest.sql"),
            Sql::DigestOwner => include_str!("../../queries/intake/digest_owner.sql"),
            Sql::MarkReplay => include_str!("../../queries/intake/mark_replay.sql"),
            Sql::JobsOfDelivery => include_str!("../../queries/deliveries/jobs.sql"),
            Sql::UpsertInstallation => include_str!("../../queries/intake/upsert_installation.sql"),
            Sql::ClearInstallationRepositories => {
                include_str!("../../queries/intake/clear_installation_repositories.sql")
            }
            Sql::AddInstallationRepository => {
                include_str!("../../queries/intake/add_installation_repository.sql")
            }
            Sql::RemoveInstallationRepository => {
                include_str!("../../queries/intake/remove_installation_repository.sql")
            }
        }
    }
}

/// The prepared statement for `sql`.
fn stmt(connection: &Connection, sql: Sql) -> rusqlite::Result<CachedStatement<'_>> {
    connection.prepare_cached(sql.text())
}

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
        connection.set_prepared_statement_cache_capacity(2 * Sql::ALL.len());
        for sql in Sql::ALL {
            stmt(&connection, sql)?;
        }
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
            stmt(&self.connection, Sql::Begin)?.execute([])?;
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
            stmt(&self.connection, Sql::Commit)?.execute([])?;
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
        let done = stmt(&self.connection, Sql::Checkpoint).and_then(|mut checkpoint| {
            checkpoint.query_row([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
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
        let mut claim = stmt(tx, Sql::ClaimDelivery)?;
        let inserted = claim.execute(params_from_iter(delivery_params(d, d.outcome, None)))?;
        if inserted == 0 {
            let first: i64 = stmt(tx, Sql::FirstDelivery)?
                .query_row(params![d.forge.as_str(), d.delivery_id], |r| r.get(0))?;
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
    let mut insert_job = stmt(tx, Sql::InsertJob)?;
    let mut jobs = Vec::with_capacity(d.jobs.len());
    for job in &d.jobs {
        let supersedable = job.supersedable;
        insert_job.execute(params![
            delivery,
            job.kind.as_str(),
            job.payload,
            job.target_key.as_str(),
            max_attempts,
            d.received_at,
            supersedable
        ])?;
        jobs.push(JobId(tx.last_insert_rowid()));
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
    let mut claim = stmt(tx, Sql::ClaimDigest)?;
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
    let first = stmt(tx, Sql::DigestOwner)?
        .query_row(params![digest.signer, &digest.sha256[..]], |r| r.get(0))?;
    Ok(Some(first))
}

/// A body already recorded, under a new delivery id: the row just claimed
/// becomes a duplicate, which holds no delivery id and keeps no body, and
/// nothing of the delivery (jobs, an installation's change) is applied.
fn record_replay(tx: &Connection, delivery: i64, first: i64) -> StoreResult<Recorded> {
    stmt(tx, Sql::MarkReplay)?.execute(params![DuplicateOf::Payload.reason(), first, delivery])?;
    duplicate(tx, delivery, first, DuplicateOf::Payload)
}

/// The answer to a duplicate: the first delivery's jobs.
fn duplicate(tx: &Connection, delivery: i64, first: i64, of: DuplicateOf) -> StoreResult<Recorded> {
    let mut jobs = stmt(tx, Sql::JobsOfDelivery)?;
    let jobs = jobs
        .query_map([first], |r| r.get(0))?
        .collect::<Result<Vec<i64>, _>>()?;
    let jobs = jobs.into_iter().map(JobId).collect();
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
    stmt(tx, Sql::UpsertInstallation)?.execute(params![id, change.account, state, now])?;
    let (added, removed): (&[String], &[String]) = match &change.update {
        InstallationUpdate::Installed { repositories } => {
            stmt(tx, Sql::ClearInstallationRepositories)?.execute([id])?;
            (repositories, &[])
        }
        InstallationUpdate::Repositories { added, removed } => (added, removed),
        _ => (&[], &[]),
    };
    for repo in added {
        stmt(tx, Sql::AddInstallationRepository)?.execute(params![id, repo])?;
    }
    for repo in removed {
        stmt(tx, Sql::RemoveInstallationRepository)?.execute(params![id, repo])?;
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
    let mut insert = stmt(tx, Sql::InsertDelivery)?;
    insert.execute(params_from_iter(delivery_params(d, outcome, duplicate_of)))?;
    Ok(tx.last_insert_rowid())
}

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
