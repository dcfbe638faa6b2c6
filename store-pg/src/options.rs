//! How the store connects: the URL (with what the `PG*` environment
//! variables add), and what the caller chooses (pool size, statement
//! timeout, attempts).

use std::str::FromStr;
use std::time::Duration;

use forgehand_store::StoreResult;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// What the caller chooses; the URL says where and how securely
/// (`sslmode=require`, `verify-full` with `sslrootcert=…`).
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Connections in the pool that workers and the operator API share.
    /// The intake and the job listener each keep one more of their own.
    pub pool_size: u32,
    /// Ends any statement of the pool's or the intake's that runs longer
    /// (`statement_timeout`); `None` leaves the server's setting.
    /// Migrations and the listener are exempt: a migration may wait long
    /// for another replica's.
    pub statement_timeout: Option<Duration>,
    /// How long a query waits for a free connection of the pool.
    pub acquire_timeout: Duration,
    /// Attempts a new job gets before it is dead-lettered.
    pub max_attempts: u32,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            pool_size: 8,
            statement_timeout: Some(Duration::from_secs(30)),
            acquire_timeout: Duration::from_secs(10),
            max_attempts: 5,
        }
    }
}

impl PgOptions {
    pub(crate) fn pool_options(&self) -> PgPoolOptions {
        PgPoolOptions::new()
            .max_connections(self.pool_size.max(1))
            .acquire_timeout(self.acquire_timeout)
    }
}

/// The options of the pool's and the intake's connections. sqlx starts
/// from the `PG*` variables (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`,
/// `PGDATABASE`, `PGSSLMODE`, `PGSSLROOTCERT`, …) and `~/.pgpass`, then
/// sets what the URL names: the URL wins.
pub(crate) fn connect_options(url: &str, options: &PgOptions) -> StoreResult<PgConnectOptions> {
    let mut connect = PgConnectOptions::from_str(url)?;
    if connect.get_application_name().is_none() {
        connect = connect.application_name("forgehand");
    }
    if let Some(timeout) = options.statement_timeout {
        connect = connect.options([("statement_timeout", format!("{}ms", timeout.as_millis()))]);
    }
    Ok(connect)
}

/// The URL with its password replaced by `***`, for logs and messages.
/// A URL that does not parse is shown as `<unparsable URL>`: it may hold
/// a password where no parser would find it.
pub fn redact_url(url: &str) -> String {
    match sqlx::postgres::PgConnectOptions::from_str(url) {
        Ok(_) => {}
        Err(_) => return "<unparsable URL>".into(),
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<unparsable URL>".into();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(end) => rest.split_at(end),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{credentials}@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = redact_query(tail);
    format!("{scheme}://{authority}{tail}")
}

/// A `password=` query parameter is redacted too.
fn redact_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_owned();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_password_is_redacted_wherever_it_is() {
        assert_eq!(
            redact_url("postgres://forgehand:s3cr%40t@db.example:5432/forgehand?sslmode=require"),
            "postgres://forgehand:***@db.example:5432/forgehand?sslmode=require"
        );
        assert_eq!(
            redact_url("postgresql://u@h/db?sslmode=verify-full&password=hunter2"),
            "postgresql://u@h/db?sslmode=verify-full&password=***"
        );
        assert_eq!(redact_url("postgres://h"), "postgres://h");
        assert_eq!(
            redact_url("postgres://u:p@ss@h/db"),
            "postgres://u:***@h/db",
            "an unescaped @ in the password"
        );
        assert_eq!(redact_url("not a url with secret"), "<unparsable URL>");
    }

    #[test]
    fn the_statement_timeout_is_given_to_every_connection() {
        let options = PgOptions {
            statement_timeout: Some(Duration::from_millis(1500)),
            ..PgOptions::default()
        };
        let connect = connect_options("postgres://u@h/db", &options).unwrap();
        let shown = format!("{connect:?}");
        assert!(shown.contains("statement_timeout=1500ms"), "{shown}");
        let none = connect_options(
            "postgres://u@h/db",
            &PgOptions {
                statement_timeout: None,
                ..PgOptions::default()
            },
        )
        .unwrap();
        assert!(!format!("{none:?}").contains("statement_timeout"));
    }
}
