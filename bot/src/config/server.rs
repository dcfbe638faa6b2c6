//! `[server]` and `[database]`: the HTTP face's limits, and what the
//! store keeps and for how long.
//!
//! Every limit here bounds what an unauthenticated caller can make the
//! service hold: connections, time, header and body bytes, and rows.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::store::Retention;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// A century: the longest any retention may be.
const MAX_RETENTION_DAYS: u32 = 36_500;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address the HTTP server binds.
    pub listen: String,
    /// Where Forgehand keeps its data: the mirrors, working copies,
    /// transcripts, environments and a created GitHub App go beneath it
    /// unless their own keys say otherwise (see `config/paths.rs`).
    pub data_dir: std::path::PathBuf,
    /// The address the forges and people reach Forgehand at
    /// (`https://forgehand.example.com`): webhook URLs, the set-up pages'
    /// redirects, links. Unset: the set-up commands say to set it.
    pub public_url: Option<String>,
    /// Largest webhook body accepted, in bytes.
    pub max_body_bytes: usize,
    /// How long a stopping server waits for running jobs before it
    /// releases them back to the queue.
    pub shutdown_grace_secs: u64,
    /// How long a client may take to send a request's headers, counted
    /// from when the server starts waiting for them: this also closes a
    /// kept-alive connection that sits idle.
    pub header_read_timeout_ms: u64,
    /// How long a webhook's body may take to arrive once its headers have.
    pub body_read_timeout_ms: u64,
    /// How long a write to a client may stay blocked (a client that does
    /// not read its answers) before the connection is closed.
    pub write_timeout_ms: u64,
    /// Connections served at once.
    pub max_connections: usize,
    /// How long a connection beyond `max_connections` waits for a free
    /// slot before it is answered 503 and closed. At most
    /// `max_connections` more wait at once; the rest are refused at once.
    pub connection_wait_ms: u64,
    /// Most header fields in one request (431 beyond).
    pub max_headers: usize,
    /// Most bytes of a request's start line and headers (431 beyond).
    pub max_header_bytes: usize,
    /// Bytes of webhook bodies held in memory at once, all requests
    /// together; a body that would pass it is answered 503 with
    /// `Retry-After` instead of being read.
    pub body_buffer_bytes: usize,
    /// Refused deliveries recorded in a burst; past it they are only
    /// counted (in /metrics) until the bucket refills.
    pub refusal_records_burst: u32,
    /// How fast the bucket of `refusal_records_burst` refills.
    pub refusal_records_per_minute: u32,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://path` (created when missing), or
    /// `postgres://user:password@host:port/database?sslmode=…` for
    /// several replicas sharing one queue (the standard `PG*` environment
    /// variables fill in what the URL leaves out; the URL wins). Its
    /// password is a secret: redacted in `check-config`, never logged.
    #[serde(serialize_with = "super::redact_database_url")]
    pub url: String,
    /// PostgreSQL: connections in the pool the workers and the API share
    /// (the intake and the job listener keep one more each).
    pub pool_size: u32,
    /// PostgreSQL: a statement running longer than this is ended
    /// (0: the server's own setting).
    pub statement_timeout_secs: u64,
    /// PostgreSQL: `forgehand serve` applies pending migrations at start
    /// (one replica at a time, under an advisory lock). Off: run
    /// `forgehand db migrate` before starting a new release.
    pub migrate: bool,
    /// Deliveries waiting to be written are committed together, up to
    /// this many per transaction.
    pub intake_batch_max: usize,
    /// Keep the verified body of every accepted delivery (compressed), for
    /// audit and replay. Off by default: the jobs carry what the work
    /// needs, and bodies are most of what intake writes to disk.
    pub keep_payloads: bool,
    /// Deliveries and finished jobs older than this are deleted. Waiting
    /// and running jobs, and the deliveries they came from, are kept.
    pub retention_days: u32,
    /// Refused deliveries are deleted sooner.
    pub refused_retention_days: u32,
    /// How long the digest of an accepted body is kept, to recognise it
    /// replayed under another delivery id; bodies whose own timestamps are
    /// older than this are refused. At least `retention_days`.
    pub digest_retention_days: u32,
    /// How often `forgehand serve` deletes what is past its retention.
    pub prune_interval_secs: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:8080".into(),
            data_dir: "forgehand-data".into(),
            public_url: None,
            // What GitHub sends at most.
            max_body_bytes: 25 * 1024 * 1024,
            shutdown_grace_secs: 30,
            // GitHub gives up on an answer after 10 s.
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 20_000,
            write_timeout_ms: 10_000,
            max_connections: 256,
            connection_wait_ms: 500,
            max_headers: 64,
            max_header_bytes: 16 * 1024,
            body_buffer_bytes: 64 * 1024 * 1024,
            refusal_records_burst: 60,
            refusal_records_per_minute: 60,
        }
    }
}

/// The stores `database.url` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseKind {
    Sqlite,
    Postgres,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: "sqlite://forgehand.db".into(),
            pool_size: 8,
            statement_timeout_secs: 30,
            migrate: true,
            intake_batch_max: 256,
            keep_payloads: false,
            retention_days: 30,
            refused_retention_days: 7,
            digest_retention_days: 90,
            prune_interval_secs: 3600,
        }
    }
}

impl ServerConfig {
    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_millis(self.body_read_timeout_ms)
    }

    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_timeout_ms)
    }

    pub fn connection_wait(&self) -> Duration {
        Duration::from_millis(self.connection_wait_ms)
    }

    /// `server.public_url` without its trailing slash, when set.
    pub fn public_url(&self) -> Option<&str> {
        self.public_url.as_deref().map(|u| u.trim_end_matches('/'))
    }

    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        if self.listen.parse::<SocketAddr>().is_err() {
            problems.push(format!(
                "server.listen: `{}` is not an address like 127.0.0.1:8080",
                self.listen
            ));
        }
        if let Some(url) = &self.public_url {
            if let Err(problem) = super::base_url_problem(url) {
                problems.push(format!("server.public_url: `{url}` {problem}"));
            }
        }
        if self.max_body_bytes < 1024 {
            problems.push("server.max_body_bytes: must be at least 1024".into());
        }
        for (key, ms) in [
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("body_read_timeout_ms", self.body_read_timeout_ms),
            ("write_timeout_ms", self.write_timeout_ms),
        ] {
            if ms < 100 {
                problems.push(format!("server.{key}: must be at least 100"));
            }
        }
        if self.max_connections == 0 {
            problems.push("server.max_connections: must be at least 1".into());
        }
        // Gitea and Forgejo send each header under three or four names.
        if self.max_headers < 32 {
            problems.push("server.max_headers: must be at least 32".into());
        }
        if self.max_header_bytes < 4096 {
            problems.push("server.max_header_bytes: must be at least 4096".into());
        }
        if self.body_buffer_bytes < self.max_body_bytes {
            problems.push(
                "server.body_buffer_bytes: must be at least server.max_body_bytes, or the largest body could never be read".into(),
            );
        }
    }
}

impl DatabaseConfig {
    /// What is past its retention at `now` (Unix ms).
    pub fn retention(&self, now: i64) -> Retention {
        let before = |days: u32| now - i64::from(days) * DAY_MS;
        Retention {
            deliveries_before: before(self.retention_days),
            refused_before: before(self.refused_retention_days),
            jobs_before: before(self.retention_days),
            // A day longer than the window bodies are checked against, so
            // that a forge whose clock runs ahead of this host's cannot
            // slip a replay between the two.
            digests_before: before(self.digest_retention_days) - DAY_MS,
        }
    }

    /// Bodies whose newest own timestamp is older than this (Unix ms) are
    /// refused: their digest may be gone.
    pub fn stale_before(&self, now: i64) -> i64 {
        now - i64::from(self.digest_retention_days) * DAY_MS
    }

    /// Which store the URL names.
    pub fn kind(&self) -> Option<DatabaseKind> {
        if self.url.starts_with("sqlite:") {
            Some(DatabaseKind::Sqlite)
        } else if self.url.starts_with("postgres://") || self.url.starts_with("postgresql://") {
            Some(DatabaseKind::Postgres)
        } else {
            None
        }
    }

    /// The PostgreSQL store's connection settings.
    pub fn pg_options(&self, max_attempts: u32) -> forgehand_store_pg::PgOptions {
        forgehand_store_pg::PgOptions {
            pool_size: self.pool_size,
            statement_timeout: (self.statement_timeout_secs > 0)
                .then(|| Duration::from_secs(self.statement_timeout_secs)),
            max_attempts,
            ..forgehand_store_pg::PgOptions::default()
        }
    }

    pub fn prune_interval(&self) -> Duration {
        Duration::from_secs(self.prune_interval_secs)
    }

    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        if self.kind().is_none() {
            problems.push(format!(
                "database.url: `{}` is not supported; use sqlite://path or postgres://user@host/database",
                super::redact_url(&self.url)
            ));
        }
        if self.pool_size == 0 {
            problems.push("database.pool_size: must be at least 1".into());
        }
        if self.intake_batch_max == 0 {
            problems.push("database.intake_batch_max: must be at least 1".into());
        }
        for (key, days) in [
            ("retention_days", self.retention_days),
            ("refused_retention_days", self.refused_retention_days),
            ("digest_retention_days", self.digest_retention_days),
        ] {
            if !(1..=MAX_RETENTION_DAYS).contains(&days) {
                problems.push(format!(
                    "database.{key}: must be between 1 and {MAX_RETENTION_DAYS}"
                ));
            }
        }
        if self.refused_retention_days > self.retention_days {
            problems.push(
                "database.refused_retention_days: must not exceed database.retention_days".into(),
            );
        }
        if self.digest_retention_days < self.retention_days {
            problems.push(
                "database.digest_retention_days: must be at least database.retention_days, or a replayed body could outlive its digest".into(),
            );
        }
        if self.prune_interval_secs == 0 {
            problems.push("database.prune_interval_secs: must be at least 1".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError};

    fn problems(adjust: impl FnOnce(&mut Config)) -> Vec<String> {
        let mut config = Config::default();
        adjust(&mut config);
        match config.validate() {
            Ok(()) => Vec::new(),
            Err(ConfigError::Invalid(problems)) => problems,
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn the_defaults_are_valid_and_bound_what_a_caller_can_hold() {
        assert_eq!(problems(|_| {}), Vec::<String>::new());
        let c = Config::default();
        assert_eq!(c.server.header_read_timeout_ms, 10_000);
        assert_eq!(c.server.max_connections, 256);
        assert!(c.server.body_buffer_bytes >= c.server.max_body_bytes);
        assert_eq!(c.database.retention_days, 30);
        assert!(c.database.digest_retention_days >= c.database.retention_days);
    }

    #[test]
    fn each_limit_is_checked_by_its_key() {
        let found = problems(|c| {
            c.server.header_read_timeout_ms = 0;
            c.server.body_read_timeout_ms = 5;
            c.server.max_connections = 0;
            c.server.max_headers = 3;
            c.server.max_header_bytes = 100;
            c.server.body_buffer_bytes = c.server.max_body_bytes - 1;
            c.database.prune_interval_secs = 0;
        });
        for key in [
            "server.header_read_timeout_ms",
            "server.body_read_timeout_ms",
            "server.max_connections",
            "server.max_headers",
            "server.max_header_bytes",
            "server.body_buffer_bytes",
            "database.prune_interval_secs",
        ] {
            assert!(
                found.iter().any(|p| p.starts_with(key)),
                "{key} not in {found:#?}"
            );
        }
    }

    #[test]
    fn public_and_web_urls_are_plain_http_addresses() {
        for bad in [
            "ftp://fh.example",
            "https://user:pw@fh.example",
            "https://fh.example/?a=1",
            "https://fh.example/#x",
            "fh.example",
        ] {
            let found = problems(|c| {
                c.server.public_url = Some(bad.into());
                c.github.web_url = bad.into();
            });
            for key in ["server.public_url", "github.web_url"] {
                assert!(
                    found.iter().any(|p| p.starts_with(key)),
                    "{bad}: {key} not in {found:#?}"
                );
            }
        }
        let mut c = Config::default();
        assert_eq!(c.github.web_url(), "https://github.com");
        assert_eq!(c.server.public_url(), None);
        c.server.public_url = Some("https://fh.example/forgehand/".into());
        c.github.web_url = "https://ghe.example/".into();
        assert_eq!(c.validate().map_err(|e| e.to_string()), Ok(()));
        assert_eq!(c.server.public_url(), Some("https://fh.example/forgehand"));
        assert_eq!(c.github.web_url(), "https://ghe.example");
    }

    #[test]
    fn digests_outlive_deliveries_and_refusals_go_first() {
        let found = problems(|c| {
            c.database.retention_days = 30;
            c.database.digest_retention_days = 29;
            c.database.refused_retention_days = 31;
        });
        assert!(
            found
                .iter()
                .any(|p| p.starts_with("database.digest_retention_days: must be at least")),
            "{found:#?}"
        );
        assert!(
            found
                .iter()
                .any(|p| p.starts_with("database.refused_retention_days")),
            "{found:#?}"
        );
        let found = problems(|c| c.database.retention_days = 0);
        assert!(found
            .iter()
            .any(|p| p.starts_with("database.retention_days: must be between")));
    }

    #[test]
    fn retention_turns_days_into_cutoffs() {
        const DAY: i64 = 24 * 60 * 60 * 1000;
        let database = crate::config::DatabaseConfig::default();
        let now = 1_000 * DAY;
        let r = database.retention(now);
        assert_eq!(r.deliveries_before, now - 30 * DAY);
        assert_eq!(r.jobs_before, now - 30 * DAY);
        assert_eq!(r.refused_before, now - 7 * DAY);
        // A digest outlives the window bodies are checked against.
        assert!(r.digests_before < database.stale_before(now));
        assert_eq!(database.stale_before(now), now - 90 * DAY);
    }
}
