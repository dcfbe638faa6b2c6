//! The SQLite store's queries against a freshly migrated schema: the plans
//! they get, the statements the intake prepares, and the offline data the
//! compiler checks the queries with.

use sqlx::{Column, Row};

use super::record::Sql;
use super::*;

async fn migrated() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("plan.db").display());
    let store = SqliteStore::connect(&url).await.unwrap();
    (dir, store)
}

/// The steps SQLite plans for `sql` on a freshly migrated database.
async fn query_plan(sql: &str) -> Vec<String> {
    let (_dir, store) = migrated().await;
    let explain = format!("EXPLAIN QUERY PLAN {sql}");
    // EXPLAIN needs no values: an unbound parameter reads as NULL.
    sqlx::query(&explain)
        .fetch_all(store.pool())
        .await
        .unwrap()
        .iter()
        .map(|row| row.get("detail"))
        .collect()
}

const FIRST_OF_THE_OLDEST: &str = include_str!("../../queries/claim/first_of_the_oldest.sql");
const FIRST_BY_TARGET: &str = include_str!("../../queries/claim/first_by_target.sql");
const TAKE: &str = include_str!("../../queries/claim/take.sql");

/// A redelivery is handled inside the intake's one writer: a lookup
/// there that scanned a table would hold up every webhook behind it,
/// longer the more deliveries were ever recorded.
#[tokio::test]
async fn lookups_made_per_delivery_search_an_index() {
    for (sql, index) in [
        (Sql::FirstDelivery.text(), "deliveries_once"),
        (Sql::JobsOfDelivery.text(), "jobs_by_delivery"),
        (
            include_str!("../../queries/deliveries/jobs_of_first.sql"),
            "jobs_by_delivery",
        ),
        (Sql::DigestOwner.text(), "PRIMARY KEY"),
    ] {
        let plan = query_plan(sql).await;
        assert!(
            plan.iter().all(|step| step.starts_with("SEARCH")),
            "{sql}\n{plan:#?}"
        );
        assert!(
            plan.iter().any(|step| step.contains(index)),
            "{sql} does not use {index}\n{plan:#?}"
        );
    }
}

/// Pruning runs beside the intake, a batch at a time: finding a batch
/// must not read every delivery, job or digest ever kept.
#[tokio::test]
async fn pruning_finds_its_rows_through_an_index() {
    for (sql, index) in prune::PRUNE_QUERIES {
        let plan = query_plan(sql).await;
        let scanned: Vec<&String> = plan
            .iter()
            .filter(|step| step.starts_with("SCAN ") || step.contains("TEMP B-TREE"))
            .collect();
        assert!(scanned.is_empty(), "{sql}\n{plan:#?}");
        assert!(
            plan.iter().any(|step| step.contains(index)),
            "{sql} does not use {index}\n{plan:#?}"
        );
    }
}

/// A claim must not cost more the more jobs wait: it may step through
/// the targets with waiting jobs, but never read all waiting jobs.
#[tokio::test]
async fn claiming_reads_no_table_whole() {
    for sql in [FIRST_OF_THE_OLDEST, FIRST_BY_TARGET, TAKE] {
        let plan = query_plan(sql).await;
        // Tables are read by SEARCH; what is scanned is the 32 oldest
        // (`j`) or the targets found (`waiting`, `w`, `t`, `c`).
        let scanned: Vec<&String> = plan
            .iter()
            .filter(|step| step.starts_with("SCAN "))
            .filter(|step| {
                ![
                    "SCAN j",
                    "SCAN waiting",
                    "SCAN w",
                    "SCAN t",
                    "SCAN c",
                    "SCAN CONSTANT ROW",
                ]
                .contains(&step.as_str())
            })
            .collect();
        assert!(scanned.is_empty(), "{sql}\n{plan:#?}");
    }
}

/// What makes a job claimable is written in two queries (the read that
/// finds a candidate and the update that takes it): the two must say the
/// same, word for word.
#[test]
fn the_claimable_condition_is_one_text() {
    let condition = |sql: &'static str| {
        sql.split_once("-- claimable: begin\n")
            .and_then(|(_, rest)| rest.split_once("-- claimable: end"))
            .map(|(condition, _)| condition)
            .expect("the query marks its claimable condition")
    };
    assert_eq!(condition(FIRST_OF_THE_OLDEST), condition(TAKE));
}

/// Every statement the intake runs is prepared against the migrated
/// schema: one that does not fit it fails here, not at the first webhook.
#[tokio::test]
async fn every_intake_statement_prepares_against_the_schema() {
    let (_dir, store) = migrated().await;
    let connection = rusqlite::Connection::open(&store.db_path).unwrap();
    for sql in Sql::ALL {
        if let Err(error) = connection.prepare(sql.text()) {
            panic!("{sql:?} does not prepare: {error}\n{}", sql.text());
        }
    }
    // And the intake opens, preparing them all once.
    SqliteIntake::open(&store.db_path, 3).unwrap();
}

/// A statement with a typo (a column the schema lacks) is what the test
/// above must catch: prepared here, it fails.
#[tokio::test]
async fn a_statement_the_schema_does_not_fit_does_not_prepare() {
    let (_dir, store) = migrated().await;
    let connection = rusqlite::Connection::open(&store.db_path).unwrap();
    let broken = Sql::InsertJob
        .text()
        .replace("supersedable", "supersedible");
    assert!(connection.prepare(&broken).is_err());
}

/// The offline data the compiler checks the queries with (`.sqlx/`) was
/// made from the schema the migrations make now: each cached query,
/// described against a freshly migrated database, has the columns, the
/// nullability and the number of parameters its data says. A migration
/// added without `scripts/sqlx-prepare.sh` fails here.
#[tokio::test]
async fn the_offline_query_data_fits_the_migrated_schema() {
    use sqlx::Executor;
    let (_dir, store) = migrated().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".sqlx");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("store/.sqlx holds the offline query data") {
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
            Some(either) => either.right_or_else(|types| types.len()),
            None => 0,
        };
        assert_eq!(
            Some(parameters as u64),
            data["describe"]["parameters"]["Right"].as_u64().or(Some(0)),
            "{}: parameters\n{sql}",
            path.display()
        );
        checked += 1;
    }
    assert!(
        checked >= 30,
        "only {checked} cached queries in {}",
        dir.display()
    );
}
