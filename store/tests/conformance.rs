//! The store conformance suite (forgehand-store-conformance) against
//! SQLite: a fresh database file per case. store-pg runs the same cases
//! against PostgreSQL.

use std::sync::Arc;

use forgehand_store::SqliteStore;
use forgehand_store_conformance::{Backend, Opened};

struct Sqlite;

#[async_trait::async_trait]
impl Backend for Sqlite {
    async fn open(&self, max_attempts: u32) -> Opened {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("conformance.db").display());
        let store = SqliteStore::connect(&url)
            .await
            .unwrap()
            .with_max_attempts(max_attempts);
        Opened::new(Arc::new(store), dir)
    }
}

forgehand_store_conformance::store_suite!(Sqlite);
