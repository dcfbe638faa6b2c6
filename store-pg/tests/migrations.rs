//! Migrations applied by replicas starting at the same moment, once, under
//! an advisory lock; and the offline query data the compiler checked the
//! queries with still fits the schema the migrations make.

use std::time::Duration;

use forgehand_store::Store;
use forgehand_store_pg::{PgOptions, PgStore, MIGRATION_LOCK};
use forgehand_store_test_support::PgServer;
use sqlx::{Column, Connection, Executor};

async fn applied(store: &PgStore) -> Vec<i64> {
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(store.pool())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_apply_each_migration_once() {
    let url = PgServer::shared().create_database().await.unwrap();
    let starters: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let options = PgOptions {
                    pool_size: 1,
                    ..PgOptions::default()
                };
                PgStore::connect(&url, &options).await
            })
        })
        .collect();
    let mut stores = Vec::new();
    for starter in starters {
        stores.push(starter.await.unwrap().expect("every replica starts"));
    }
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .unwrap()
        .count() as i64;
    assert_eq!(
        applied(&stores[0]).await,
        (1..=migrations).collect::<Vec<_>>()
    );
    stores[0].ping().await.unwrap();
}

/// While another starter holds the lock, a replica waits and touches
/// nothing; once it is let go, it migrates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starter_waits_for_the_migration_lock() {
    let url = PgServer::shared().create_database().await.unwrap();
    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut holder)
        .await
        .unwrap();
    let starting = {
        let url = url.clone();
        tokio::spawn(async move { PgStore::connect(&url, &PgOptions::default()).await })
    };
    // The starter's session waits on the advisory lock (an event the
    // server shows), not on the clock.
    let mut waiting = false;
    for _ in 0..3000 {
        let waiters: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
        )
        .fetch_one(&mut holder)
        .await
        .unwrap();
        if waiters == 1 {
            waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(waiting, "the starter never waited for the lock");
    let tables: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'")
            .fetch_one(&mut holder)
            .await
            .unwrap();
    assert_eq!(tables, 0, "nothing migrated while the lock was held");
    assert!(!starting.is_finished());
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut holder)
        .await
        .unwrap();
    let store = starting.await.unwrap().unwrap();
    assert!(!applied(&store).await.is_empty());
}

/// The offline data (`.sqlx/`) was made from the schema the migrations
/// make now: each cached query, described against a freshly migrated
/// database, has the columns, the nullability and the parameters its data
/// says. A migration added without `scripts/sqlx-prepare.sh` fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_query_data_fits_the_migrated_schema() {
    let url = PgServer::shared().create_database().await.unwrap();
    let store = PgStore::connect(&url, &PgOptions::default()).await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".sqlx");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("store-pg/.sqlx holds the offline query data") {
        let path = entry.unwrap().path();
        let data: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let sql = data["query"].as_str().unwrap();
        let described = store
            .pool()
            .describe(sql)
            .await
            .unwrap_or_else(|e| panic!("{} no longer describes: {e}\n{sql}", path.display()));
        let names: Vec<&str> = described.columns().iter().map(|c| c.name()).collect();
        let cached: Vec<&str> = data["describe"]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, cached, "{}: columns\n{sql}", path.display());
        let nullable: Vec<Option<bool>> = (0..names.len()).map(|i| described.nullable(i)).collect();
        let cached_nullable: Vec<Option<bool>> =
            serde_json::from_value(data["describe"]["nullable"].clone()).unwrap();
        assert_eq!(
            nullable,
            cached_nullable,
            "{}: nullable\n{sql}",
            path.display()
        );
        let parameters = match described.parameters() {
            Some(either) => either.either(|types| types.len(), |n| n),
            None => 0,
        };
        let cached_parameters = data["describe"]["parameters"]["Left"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(
            parameters,
            cached_parameters,
            "{}: parameters\n{sql}",
            path.display()
        );
        checked += 1;
    }
    let queries = walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("queries"));
    assert_eq!(checked, queries, "one cached description per query file");
}

fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| if p.is_dir() { walk(&p) } else { 1 })
        .sum()
}

/// What makes a job claimable is written in both claims (the oldest
/// first, and target by target): the two must say the same, word for word.
#[test]
fn the_claimable_condition_is_one_text() {
    let condition = |sql: &'static str| {
        sql.split_once("-- claimable: begin\n")
            .and_then(|(_, rest)| rest.split_once("-- claimable: end"))
            .map(|(condition, _)| condition)
            .expect("the query marks its claimable condition")
    };
    assert_eq!(
        condition(include_str!("../queries/claim/take_oldest.sql")),
        condition(include_str!("../queries/claim/take_by_target.sql"))
    );
}
