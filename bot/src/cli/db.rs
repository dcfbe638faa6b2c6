//! `forgehand db migrate` and `forgehand db copy`: the database by hand.
//! Migrations for deployments that do not let the service change the
//! schema (`database.migrate = false`); and the move from one host's
//! SQLite file to a PostgreSQL database several replicas share.
//!
//! The copy reads the source in one read transaction (a consistent
//! snapshot; the source should be stopped, or what arrives meanwhile is
//! not copied), writes the target in one transaction, and commits only
//! when every table's rows are all there: a copy is whole or nothing.
//! Ids are kept, so that a job's delivery, a run's job and a digest's
//! delivery still point at each other, and the target's id sequences go
//! on after them. Jobs that were running are copied running: their
//! leases expire and the queue takes them over, as after a crash.

use std::io::Write;

use anyhow::Context;
use futures::TryStreamExt;
use sqlx::{Row, Sqlite};

use crate::config::{Config, DatabaseKind};

/// How a column is read from SQLite and written to PostgreSQL.
#[derive(Debug, Clone, Copy)]
enum Col {
    Int,
    Text,
    Bytes,
    /// An integer 0 or 1 in SQLite, a boolean in PostgreSQL.
    Bool,
}

/// A table copied, in the order their references need.
struct Table {
    name: &'static str,
    columns: &'static [(&'static str, Col)],
    /// Its id is generated (`GENERATED ALWAYS AS IDENTITY`): inserted as
    /// it was, then the sequence moved past it.
    identity: bool,
}

const TABLES: &[Table] = &[
    Table {
        name: "deliveries",
        identity: true,
        columns: &[
            ("id", Col::Int),
            ("forge", Col::Text),
            ("delivery_id", Col::Text),
            ("event", Col::Text),
            ("event_name", Col::Text),
            ("outcome", Col::Text),
            ("status_code", Col::Int),
            ("reason", Col::Text),
            ("repo", Col::Text),
            ("target", Col::Int),
            ("sender", Col::Text),
            ("detail", Col::Text),
            ("payload", Col::Bytes),
            ("received_at", Col::Int),
            ("duplicate_of", Col::Int),
        ],
    },
    Table {
        name: "jobs",
        identity: true,
        columns: &[
            ("id", Col::Int),
            ("delivery", Col::Int),
            ("kind", Col::Text),
            ("payload", Col::Text),
            ("target_key", Col::Text),
            ("state", Col::Text),
            ("attempts", Col::Int),
            ("max_attempts", Col::Int),
            ("run_at", Col::Int),
            ("lease_owner", Col::Text),
            ("lease_expires_at", Col::Int),
            ("last_error", Col::Text),
            ("result", Col::Text),
            ("created_at", Col::Int),
            ("updated_at", Col::Int),
            ("finished_at", Col::Int),
            ("stop_reason", Col::Text),
            ("stopped_by", Col::Int),
            ("supersedable", Col::Bool),
            ("cancel_cause", Col::Text),
        ],
    },
    Table {
        name: "job_runs",
        identity: true,
        columns: &[
            ("id", Col::Int),
            ("job", Col::Int),
            ("attempt", Col::Int),
            ("worker", Col::Text),
            ("started_at", Col::Int),
            ("finished_at", Col::Int),
            ("outcome", Col::Text),
            ("error", Col::Text),
        ],
    },
    Table {
        name: "installations",
        identity: false,
        columns: &[
            ("id", Col::Int),
            ("account", Col::Text),
            ("state", Col::Text),
            ("updated_at", Col::Int),
        ],
    },
    Table {
        name: "installation_repositories",
        identity: false,
        columns: &[("installation", Col::Int), ("repository", Col::Text)],
    },
    Table {
        name: "payload_digests",
        identity: false,
        columns: &[
            ("signer", Col::Text),
            ("sha256", Col::Bytes),
            ("event", Col::Text),
            ("delivery", Col::Int),
            ("received_at", Col::Int),
        ],
    },
];

/// Rows written per statement (PostgreSQL takes at most 65,535 binds).
const BATCH: usize = 500;

/// One value, as read.
enum Value {
    Int(Option<i64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
    Bool(bool),
}

/// `forgehand db migrate`: applies the configured database's pending
/// migrations.
pub async fn migrate(config: &Config, out: &mut dyn Write) -> anyhow::Result<()> {
    let database = &config.database;
    let shown = crate::config::redact_url(&database.url);
    match database.kind() {
        Some(DatabaseKind::Postgres) => {
            let options = database.pg_options(config.queue.max_attempts);
            let store =
                forgehand_store_pg::PgStore::connect_without_migrating(&database.url, &options)
                    .await
                    .with_context(|| format!("connecting to {shown}"))?;
            store
                .migrate()
                .await
                .with_context(|| format!("migrating {shown}"))?;
            store.close().await;
        }
        _ => {
            // SQLite's store applies its migrations as it opens.
            forgehand_store::SqliteStore::connect(&database.url)
                .await
                .with_context(|| format!("migrating {shown}"))?;
        }
    }
    writeln!(out, "{shown}: the schema is current")?;
    Ok(())
}

/// Rows of each table, as copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub tables: Vec<(&'static str, u64)>,
}

/// `forgehand db copy --from sqlite://… --to postgres://…`.
pub async fn copy(config: &Config, from: &str, to: &str) -> anyhow::Result<Copied> {
    if !from.starts_with("sqlite:") {
        anyhow::bail!("--from must be a sqlite:// URL (the database to move from)");
    }
    if !(to.starts_with("postgres://") || to.starts_with("postgresql://")) {
        anyhow::bail!("--to must be a postgres:// URL (the database to move to)");
    }
    let shown_to = crate::config::redact_url(to);
    let path = from.trim_start_matches("sqlite://");
    if !std::path::Path::new(path.split('?').next().unwrap_or(path)).exists() {
        anyhow::bail!("--from {from}: no such database");
    }
    // Opened through the store, so that its schema is the current one
    // (its pending migrations applied) before it is read.
    let source = forgehand_store::SqliteStore::connect(from)
        .await
        .with_context(|| format!("opening {from}"))?;
    let options = config.database.pg_options(config.queue.max_attempts);
    let target = forgehand_store_pg::PgStore::connect(to, &options)
        .await
        .with_context(|| format!("opening {shown_to}"))?;
    let mut write = target.pool().begin().await?;
    for table in TABLES {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {}", table.name))
            .fetch_one(&mut *write)
            .await?;
        if n > 0 {
            anyhow::bail!(
                "{shown_to} is not empty ({} rows in {}): db copy writes only into a new database",
                n,
                table.name
            );
        }
    }
    let mut read = source.pool().begin().await?;
    let mut tables = Vec::new();
    for table in TABLES {
        let columns: Vec<&str> = table.columns.iter().map(|(c, _)| *c).collect();
        let select = format!(
            "SELECT {} FROM {} ORDER BY 1",
            columns.join(", "),
            table.name
        );
        let mut rows = sqlx::query::<Sqlite>(&select).fetch(&mut *read);
        let mut batch: Vec<Vec<Value>> = Vec::with_capacity(BATCH);
        let mut copied = 0u64;
        while let Some(row) = rows.try_next().await? {
            let mut values = Vec::with_capacity(table.columns.len());
            for (i, (_, col)) in table.columns.iter().enumerate() {
                values.push(match col {
                    Col::Int => Value::Int(row.try_get(i)?),
                    Col::Text => Value::Text(row.try_get(i)?),
                    Col::Bytes => Value::Bytes(row.try_get(i)?),
                    Col::Bool => Value::Bool(row.try_get::<i64, _>(i)? != 0),
                });
            }
            batch.push(values);
            if batch.len() == BATCH {
                copied += insert(&mut write, table, &columns, std::mem::take(&mut batch)).await?;
            }
        }
        drop(rows);
        if !batch.is_empty() {
            copied += insert(&mut write, table, &columns, batch).await?;
        }
        tables.push((table.name, copied));
    }
    // Every row is there, or nothing is committed.
    for (table, copied) in &tables {
        let source_n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(&mut *read)
            .await?;
        let target_n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(&mut *write)
            .await?;
        if source_n != target_n || target_n as u64 != *copied {
            anyhow::bail!(
                "{table}: {source_n} rows in the source, {target_n} in the target: nothing was committed"
            );
        }
    }
    for table in TABLES.iter().filter(|t| t.identity) {
        sqlx::query(&format!(
            "SELECT setval(pg_get_serial_sequence('{0}', 'id'), \
             COALESCE((SELECT MAX(id) FROM {0}), 0) + 1, false)",
            table.name
        ))
        .execute(&mut *write)
        .await?;
    }
    read.rollback().await?;
    write.commit().await?;
    target.close().await;
    Ok(Copied { tables })
}

async fn insert(
    write: &mut sqlx::PgConnection,
    table: &Table,
    columns: &[&str],
    rows: Vec<Vec<Value>>,
) -> anyhow::Result<u64> {
    let mut query = sqlx::QueryBuilder::<sqlx::Postgres>::new(format!(
        "INSERT INTO {} ({}) {}",
        table.name,
        columns.join(", "),
        if table.identity {
            "OVERRIDING SYSTEM VALUE "
        } else {
            ""
        }
    ));
    query.push_values(rows, |mut b, values| {
        for value in values {
            match value {
                Value::Int(v) => b.push_bind(v),
                Value::Text(v) => b.push_bind(v),
                Value::Bytes(v) => b.push_bind(v),
                Value::Bool(v) => b.push_bind(v),
            };
        }
    });
    let done = query
        .build()
        .execute(write)
        .await
        .with_context(|| format!("writing {}", table.name))?;
    Ok(done.rows_affected())
}
