//! The store conformance suite (forgehand-store-conformance) against a
//! real PostgreSQL: one server for this test process, a fresh database
//! per case. forgehand-store runs the same cases against SQLite.

use std::sync::Arc;

use forgehand_store_conformance::{Backend, Opened};
use forgehand_store_pg::{PgOptions, PgStore};
use forgehand_store_test_support::PgServer;

struct Postgres;

#[async_trait::async_trait]
impl Backend for Postgres {
    async fn open(&self, max_attempts: u32) -> Opened {
        let url = PgServer::shared().create_database().await.unwrap();
        let options = PgOptions {
            max_attempts,
            pool_size: 8,
            ..PgOptions::default()
        };
        let store = PgStore::connect(&url, &options).await.unwrap();
        Opened::new(Arc::new(store), ())
    }
}

forgehand_store_conformance::store_suite!(Postgres);
