//! Schema migrations, applied at start by every replica: under an
//! advisory lock, so that replicas starting at the same moment apply each
//! migration once, the others waiting and then finding nothing to do.

use forgehand_store::StoreResult;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};

/// The advisory lock held while migrating: "forgehnd" in ASCII. Advisory
/// locks are per database, so stores in other databases do not meet it.
pub const MIGRATION_LOCK: i64 = 0x666f_7267_6568_6e64;

pub(crate) async fn migrate(connect: &PgConnectOptions) -> StoreResult<()> {
    // A connection of its own, without the pool's statement timeout:
    // waiting for another replica's migration may take longer, and so may
    // a migration.
    let mut connection = connect.connect().await?;
    sqlx::query("SET statement_timeout = 0")
        .execute(&mut connection)
        .await?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut connection)
        .await?;
    let migrated = run(&mut connection).await;
    // Also released when the connection closes, if this fails.
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut connection)
        .await;
    let closed = connection.close().await;
    migrated?;
    unlocked?;
    closed?;
    Ok(())
}

async fn run(connection: &mut PgConnection) -> StoreResult<()> {
    let mut migrator = sqlx::migrate!("./migrations");
    // The lock above is the one: sqlx's own would be a second, keyed on
    // the database's name.
    migrator.set_locking(false);
    migrator.run_direct(connection).await?;
    Ok(())
}
