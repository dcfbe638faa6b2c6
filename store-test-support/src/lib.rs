//! A real PostgreSQL for the store crates' tests: Debian's server binaries
//! (`/usr/lib/postgresql/<version>/bin`), `initdb` into a temporary
//! directory, the server listening on a socket in that directory (and on
//! a free port of 127.0.0.1 when a test asks for TCP), stopped and the
//! directory removed at the end. PostgreSQL refuses to run as root, which
//! CI is: then the server runs as the unprivileged user `nobody` (or
//! `$FORGEHAND_TEST_PG_USER`), which owns the directory.
//!
//! No test is skipped for want of PostgreSQL: a server that cannot start
//! is an error that says what to install.

mod process;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
#[cfg(test)]
use sqlx::Connection;
use sqlx::{ConnectOptions, Executor};

use process::User;

/// The superuser `initdb` makes; every local connection is trusted.
pub const SUPERUSER: &str = "postgres";

/// How long a server may take to start: initdb and the first start on a
/// loaded two-core machine take seconds, not minutes.
const READY_WITHIN: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(
        "PostgreSQL's server binaries (initdb, postgres) are not under /usr/lib/postgresql/<version>/bin \
         (nor in $FORGEHAND_TEST_PG_BIN): install Debian's postgresql package \
         (apt-get install postgresql; bash tests/run.sh installs it)"
    )]
    NotInstalled,
    #[error(
        "PostgreSQL refuses to run as root and the user {0} it would run as does not exist \
         (set FORGEHAND_TEST_PG_USER to an unprivileged user)"
    )]
    NoUser(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} failed:\n{output}")]
    Failed { what: String, output: String },
    #[error("PostgreSQL did not become ready within {within:?}; its log:\n{log}")]
    NotReady { within: Duration, log: String },
    #[error("talking to the test server: {0}")]
    Database(#[from] sqlx::Error),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let what = what.into();
    move |source| HarnessError::Io { what, source }
}

/// What a server is started with besides the defaults.
#[derive(Debug, Clone, Default)]
pub struct PgServerBuilder {
    tcp: bool,
    settings: Vec<(String, String)>,
    files: Vec<(String, Vec<u8>)>,
    hba: Option<String>,
}

impl PgServerBuilder {
    /// Also listen on a free port of 127.0.0.1 (for TLS, which a Unix
    /// socket does not speak).
    pub fn tcp(mut self) -> Self {
        self.tcp = true;
        self
    }

    /// A `postgresql.conf` setting, given on the server's command line.
    pub fn setting(mut self, name: &str, value: &str) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }

    /// A file written into the data directory before the server starts
    /// (mode 600, owned by the server's user), e.g. `server.key`.
    pub fn file(mut self, name: &str, contents: impl Into<Vec<u8>>) -> Self {
        self.files.push((name.into(), contents.into()));
        self
    }

    /// Replaces `pg_hba.conf`. Local (socket) connections should stay
    /// trusted: the harness makes databases through them.
    pub fn hba(mut self, hba: &str) -> Self {
        self.hba = Some(hba.into());
        self
    }

    pub fn start(self) -> Result<PgServer, HarnessError> {
        let bin = process::binaries()?;
        let user = User::to_run_as()?;
        // A free port found now may be taken before the server binds it
        // (another test process): a bind failure is retried on another.
        let mut tries = if self.tcp { 3 } else { 1 };
        loop {
            match PgServer::start(&bin, user.as_ref(), &self) {
                Err(HarnessError::NotReady { log, .. })
                    if tries > 1 && log.contains("could not bind") =>
                {
                    tries -= 1;
                }
                started => return started,
            }
        }
    }
}

/// A running server. Dropping it stops it (fast shutdown) and removes its
/// directory.
pub struct PgServer {
    running: Mutex<Option<Running>>,
    socket_dir: PathBuf,
    port: u16,
}

struct Running {
    child: Child,
    /// Removed once the server has stopped.
    dir: tempfile::TempDir,
}

impl PgServer {
    pub fn builder() -> PgServerBuilder {
        PgServerBuilder::default()
    }

    /// A server of the test's own, for what changes the whole server.
    pub fn start_private() -> Result<PgServer, HarnessError> {
        Self::builder().start()
    }

    /// The server every test of this process shares, each in a database
    /// of its own ([`PgServer::create_database`]): started on first use,
    /// stopped when the process exits. Panics with what to install when it
    /// cannot start, so that the test fails saying so.
    pub fn shared() -> &'static PgServer {
        static SHARED: OnceLock<Result<PgServer, String>> = OnceLock::new();
        let shared = SHARED.get_or_init(|| {
            process::sweep_stale();
            let server = Self::builder().start().map_err(|e| e.to_string())?;
            process::at_exit(|| {
                if let Some(Ok(server)) = SHARED.get() {
                    server.stop();
                }
            });
            Ok(server)
        });
        match shared {
            Ok(server) => server,
            Err(error) => panic!("cannot start the test PostgreSQL: {error}"),
        }
    }

    fn start(bin: &Path, user: Option<&User>, how: &PgServerBuilder) -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new()
            .prefix(process::DIR_PREFIX)
            .tempdir()
            .map_err(io("making the server's temporary directory"))?;
        process::mark_owner(dir.path())?;
        if let Some(user) = user {
            user.own(dir.path())?;
        }
        let data = dir.path().join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("--pgdata")
            .arg(&data)
            .args(["--username", SUPERUSER, "--auth=trust", "--encoding=UTF8"])
            // C collation everywhere, whatever this machine's locale, and
            // no fsync: the directory is gone at the end anyway.
            .args(["--no-locale", "--no-sync"]);
        process::prepare(&mut initdb, dir.path(), user, false);
        let out = initdb.output().map_err(io("running initdb"))?;
        if !out.status.success() {
            return Err(HarnessError::Failed {
                what: format!("initdb as {}", process::who(user)),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            });
        }
        for (name, contents) in &how.files {
            process::write_private(&data.join(name), contents, user)?;
        }
        if let Some(hba) = &how.hba {
            process::write_private(&data.join("pg_hba.conf"), hba.as_bytes(), user)?;
        }

        let port = if how.tcp { process::free_port()? } else { 5432 };
        let log_path = dir.path().join("postgres.log");
        let log = std::fs::File::create(&log_path).map_err(io("creating the server's log"))?;
        let mut postgres = Command::new(bin.join("postgres"));
        postgres
            .arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(dir.path())
            .args(["-p", &port.to_string()])
            .args([
                "-c",
                if how.tcp {
                    "listen_addresses=127.0.0.1"
                } else {
                    "listen_addresses="
                },
            ])
            // Durability is not what these tests measure; the harness's
            // directory does not outlive them.
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=300"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(io("the server's log"))?)
            .stderr(log);
        for (name, value) in &how.settings {
            postgres.arg("-c").arg(format!("{name}={value}"));
        }
        process::prepare(&mut postgres, dir.path(), user, true);
        let child = process::spawn_lasting(postgres).map_err(io("starting postgres"))?;
        let server = PgServer {
            running: Mutex::new(Some(Running { child, dir })),
            socket_dir: log_path.parent().expect("in the directory").to_owned(),
            port,
        };
        server.wait_ready(&data, &log_path)?;
        Ok(server)
    }

    /// Ready when the postmaster says so in its pid file, as `pg_ctl -w`
    /// waits for it.
    fn wait_ready(&self, data: &Path, log: &Path) -> Result<(), HarnessError> {
        let started = Instant::now();
        let log = || std::fs::read_to_string(log).unwrap_or_default();
        loop {
            let pid_file = std::fs::read_to_string(data.join("postmaster.pid")).unwrap_or_default();
            if pid_file.lines().nth(7).map(str::trim) == Some("ready") {
                return Ok(());
            }
            let exited = {
                let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
                let child = &mut running.as_mut().expect("not stopped yet").child;
                child.try_wait().map_err(io("waiting for postgres"))?
            };
            if exited.is_some() || started.elapsed() > READY_WITHIN {
                return Err(HarnessError::NotReady {
                    within: READY_WITHIN,
                    log: log(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server (fast shutdown: sessions are ended) and removes
    /// its directory. Idempotent.
    pub fn stop(&self) {
        let running = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(Running { mut child, dir }) = running {
            process::stop(&mut child);
            drop(dir);
        }
    }

    /// The directory of the server's Unix socket.
    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    /// The port: of the TCP listener when there is one, else only the
    /// socket's name (`.s.PGSQL.<port>`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of `database` through the server's socket.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{SUPERUSER}@localhost:{}/{database}?host={}",
            self.port,
            self.socket_dir.display()
        )
    }

    /// The URL of `database` over TCP on 127.0.0.1 (a server started with
    /// [`PgServerBuilder::tcp`]).
    pub fn tcp_url(&self, user: &str, database: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/{database}", self.port)
    }

    /// Options for a superuser connection through the socket, whatever
    /// `PG*` variables the environment has.
    pub fn admin_options(&self, database: &str) -> PgConnectOptions {
        PgConnectOptions::new_without_pgpass()
            .socket(&self.socket_dir)
            .port(self.port)
            .username(SUPERUSER)
            .database(database)
            .ssl_mode(sqlx::postgres::PgSslMode::Disable)
    }

    /// Runs `sql` as the superuser in `database`.
    pub async fn execute(&self, database: &str, sql: &str) -> Result<(), HarnessError> {
        let mut admin = self.admin_options(database).connect().await?;
        admin.execute(sql).await?;
        Ok(())
    }

    /// A new, empty database; returns its URL.
    pub async fn create_database(&self) -> Result<String, HarnessError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.execute("postgres", &format!("CREATE DATABASE \"{name}\""))
            .await?;
        Ok(self.url(&name))
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without PostgreSQL the tests fail, saying what to install.
    #[test]
    fn a_missing_server_names_the_package_to_install() {
        let empty = tempfile::tempdir().unwrap();
        let error = process::binaries_in(None, empty.path()).unwrap_err();
        assert!(matches!(error, HarnessError::NotInstalled));
        assert!(
            error.to_string().contains("apt-get install postgresql"),
            "{error}"
        );
        let chosen =
            process::binaries_in(Some(empty.path().into()), Path::new("/usr/lib/postgresql"));
        assert!(matches!(chosen, Err(HarnessError::NotInstalled)));
    }

    /// A server runs as an unprivileged user (as root: `nobody`), answers,
    /// and is gone with its directory once dropped.
    #[tokio::test]
    async fn a_server_runs_unprivileged_and_is_gone_when_dropped() {
        let server = PgServer::start_private().unwrap();
        let dir = server.socket_dir().to_owned();
        let pid = {
            let running = server.running.lock().unwrap();
            running.as_ref().unwrap().child.id()
        };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().next())
            .unwrap()
            .to_owned();
        assert_ne!(uid, "0", "postgres runs as root");
        let url = server.create_database().await.unwrap();
        let mut connection = sqlx::PgConnection::connect(&url).await.unwrap();
        let one: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&mut connection)
            .await
            .unwrap();
        assert_eq!(one, 1);
        drop(connection);
        drop(server);
        assert!(!dir.exists(), "{} is left", dir.display());
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "postgres {pid} still runs"
        );
    }
}
