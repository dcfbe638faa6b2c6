//! How the store connects: TLS through `sslmode` in the URL (and the
//! server's certificate checked with `sslrootcert`), a password that never
//! shows in an error, the statement timeout and pool size the caller
//! chooses.

use std::time::Duration;

use forgehand_store_pg::{redact_url, PgOptions, PgStore};
use forgehand_store_test_support::PgServer;

/// A certificate authority (`ca.crt`) and the server's certificate for
/// 127.0.0.1 and localhost signed by it, by openssl.
fn certificate(dir: &std::path::Path) -> (Vec<u8>, Vec<u8>) {
    let openssl = |args: &[&str]| {
        let status = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl (Debian: apt-get install openssl)");
        assert!(status.success(), "openssl {args:?}");
    };
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "san.ext",
        "-out",
        "server.crt",
    ]);
    (
        std::fs::read(dir.join("server.crt")).unwrap(),
        std::fs::read(dir.join("server.key")).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_is_what_the_urls_sslmode_asks_for_and_the_password_never_shows() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(certs.path());
    let server = PgServer::builder()
        .tcp()
        .setting("ssl", "on")
        .file("server.crt", cert)
        .file("server.key", key)
        // TCP only with TLS and a password; the socket stays the harness's.
        .hba("local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n")
        .start()
        .unwrap();
    server
        .execute(
            "postgres",
            "CREATE ROLE forgehand LOGIN PASSWORD 'correct horse'",
        )
        .await
        .unwrap();
    server
        .execute("postgres", "CREATE DATABASE tls OWNER forgehand")
        .await
        .unwrap();
    let base = server.tcp_url("forgehand:correct%20horse", "tls");
    let options = PgOptions::default();

    let store = PgStore::connect(&format!("{base}?sslmode=require"), &options)
        .await
        .unwrap();
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(ssl, "the connection is encrypted");
    let shown = format!("{store:?}");
    assert!(!shown.contains("correct"), "{shown}");

    // The server's certificate checked against the one it should have.
    let root = certs.path().join("ca.crt");
    let verified = format!("{base}?sslmode=verify-full&sslrootcert={}", root.display());
    PgStore::connect(&verified, &options).await.unwrap();
    let error = PgStore::connect(&format!("{base}?sslmode=verify-full"), &options)
        .await
        .unwrap_err()
        .to_string();
    assert!(!error.contains("correct"), "{error}");

    // Without TLS the server has no entry for us; a wrong password is
    // refused; neither error shows a password.
    for url in [
        format!("{base}?sslmode=disable"),
        server.tcp_url("forgehand:wrong-secret", "tls") + "?sslmode=require",
    ] {
        let error = PgStore::connect(&url, &options)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            !error.contains("correct") && !error.contains("wrong-secret"),
            "{error}"
        );
        assert!(!redact_url(&url).contains("secret") && !redact_url(&url).contains("horse"));
    }
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statement_timeout_and_pool_size_are_the_callers() {
    let url = PgServer::shared().create_database().await.unwrap();
    let options = PgOptions {
        pool_size: 3,
        statement_timeout: Some(Duration::from_millis(200)),
        ..PgOptions::default()
    };
    let store = PgStore::connect(&url, &options).await.unwrap();
    assert_eq!(store.pool().options().get_max_connections(), 3);
    let shown: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(shown, "200ms");
    let error = sqlx::query("SELECT pg_sleep(5)")
        .execute(store.pool())
        .await
        .unwrap_err();
    let code = error.as_database_error().and_then(|e| e.code());
    assert_eq!(code.as_deref(), Some("57014"), "query_canceled: {error}");
    // Migrating waits as long as it must: no timeout there.
    store.migrate().await.unwrap();
}
