//! The standard `PG*` environment variables fill in what the URL leaves
//! out, and the URL wins. A test binary of its own: it sets the process's
//! environment, which no other test must see.

use forgehand_store::Store;
use forgehand_store_pg::{PgOptions, PgStore};
use forgehand_store_test_support::PgServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_variables_fill_in_what_the_url_leaves_out() {
    let server = PgServer::shared();
    let url = server.create_database().await.unwrap();
    let database = url
        .split('/')
        .nth(3)
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .to_owned();
    // SAFETY: this binary's only test, before any thread of its own reads
    // the environment.
    unsafe {
        std::env::set_var("PGHOST", server.socket_dir());
        std::env::set_var("PGPORT", server.port().to_string());
        std::env::set_var("PGUSER", "postgres");
        std::env::set_var("PGDATABASE", &database);
    }
    let options = PgOptions::default();
    let store = PgStore::connect("postgres://", &options).await.unwrap();
    let connected: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(connected, database);
    store.ping().await.unwrap();

    // The URL wins: it names another database (and the variables still
    // give the rest).
    server
        .execute("postgres", "CREATE DATABASE named_in_the_url")
        .await
        .unwrap();
    let store = PgStore::connect("postgres:///named_in_the_url", &options)
        .await
        .unwrap();
    let connected: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(connected, "named_in_the_url");
    // And a variable pointing nowhere loses to the URL's host.
    unsafe { std::env::set_var("PGHOST", "/nonexistent") };
    PgStore::connect(&url, &options).await.unwrap();
}
