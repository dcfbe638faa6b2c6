//! `forgehand serve`: the store, the intake writer, the workers and the
//! HTTP server, started together and stopped in the right order.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::{Config, DatabaseConfig, DatabaseKind};
use crate::live::{Live, Rebuild, SwappableHandler};
use crate::queue::{Backoff, JobHandler, QueueSettings, WorkerPool};
use crate::sandboxes;
use crate::server::{self, AppState};
use crate::store::{IntakeWriter, Pruned, SqliteStore, Store};

pub fn queue_settings(config: &Config) -> QueueSettings {
    QueueSettings {
        workers: config.queue.workers,
        lease: config.queue.lease(),
        poll_interval: Duration::from_millis(config.queue.poll_interval_ms),
        backoff: Backoff {
            base: Duration::from_secs(config.queue.retry_base_secs),
            max: Duration::from_secs(config.queue.retry_max_secs),
        },
        shutdown_grace: Duration::from_secs(config.server.shutdown_grace_secs),
    }
}

/// The store `database.url` names, and for PostgreSQL what wakes this
/// host's workers when a job is queued on any host.
pub struct Opened {
    pub store: Arc<dyn Store>,
    listener: Option<forgehand_store_pg::JobListener>,
}

impl Opened {
    /// Wakes `workers` on every job queued anywhere (PostgreSQL's
    /// `LISTEN`); nothing for SQLite, whose one host's intake wakes them.
    pub fn wake(
        self,
        workers: Arc<Notify>,
    ) -> (Arc<dyn Store>, Option<forgehand_store_pg::WakeTask>) {
        let task = self.listener.map(|listener| listener.wake(workers));
        (self.store, task)
    }
}

pub async fn open_store(config: &Config) -> anyhow::Result<Opened> {
    let database = &config.database;
    // Never the URL as written: it may hold a password.
    let shown = crate::config::redact_url(&database.url);
    match database.kind() {
        Some(DatabaseKind::Postgres) => {
            let options = database.pg_options(config.queue.max_attempts);
            let store = if database.migrate {
                forgehand_store_pg::PgStore::connect(&database.url, &options).await
            } else {
                forgehand_store_pg::PgStore::connect_without_migrating(&database.url, &options)
                    .await
            }
            .with_context(|| format!("opening the database {shown}"))?;
            let listener = store
                .listen_for_jobs()
                .await
                .with_context(|| format!("listening for queued jobs on {shown}"))?;
            Ok(Opened {
                store: Arc::new(store),
                listener: Some(listener),
            })
        }
        _ => {
            let store = SqliteStore::connect(&database.url)
                .await
                .with_context(|| format!("opening the database {shown}"))?
                .with_max_attempts(config.queue.max_attempts);
            Ok(Opened {
                store: Arc::new(store),
                listener: None,
            })
        }
    }
}

/// Serves until `shutdown` resolves; then stops taking requests, lets
/// running jobs finish (or releases them) and returns.
pub async fn serve(
    config: Config,
    runner: Runner,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = config.listen_addr().context("server.listen")?;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (server.listen)"))?;
    serve_on(listener, config, runner, shutdown).await
}

/// [`serve`] on a listener the caller bound (tests bind port 0).
pub async fn serve_on(
    listener: TcpListener,
    config: Config,
    runner: Runner,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let Runner {
        handler,
        sandbox,
        rebuild,
    } = runner;
    let handler = Arc::new(SwappableHandler::new(handler));
    for warning in crate::github_app::warnings(&config) {
        warn!("{warning}");
    }
    let jobs_ready = Arc::new(Notify::new());
    let (store, _wake) = open_store(&config).await?.wake(jobs_ready.clone());
    let intake_log = store
        .intake_log()
        .context("opening the intake connection to the database")?;
    let intake = IntakeWriter::spawn(
        intake_log,
        config.database.intake_batch_max,
        jobs_ready.clone(),
    );
    // A node that runs jobs needs somewhere to run them; the runner
    // brings the sandbox it prepared, or it is prepared here (once: that
    // also sweeps what a crashed run left behind).
    let sandbox = match sandbox {
        Some(prepared) => Some(prepared),
        None if config.queue.workers > 0 => Some(prepare_sandbox(&config).await?),
        None => None,
    };
    let state = AppState::new(&config, store.clone(), intake).with_sandbox(sandbox);
    let live = Live::new(
        config.clone(),
        state.github_secrets.clone(),
        handler.clone(),
        rebuild,
    );
    let state = state.with_live(Arc::new(live));
    let pruning = CancellationToken::new();
    let pruner = tokio::spawn(prune_periodically(
        store.clone(),
        config.database.clone(),
        pruning.clone(),
    ));
    let pool = WorkerPool::start(store, handler, queue_settings(&config), jobs_ready);
    info!(
        listen = %listener.local_addr()?,
        workers = config.queue.workers,
        role = if config.queue.workers == 0 { "intake" } else { "intake+workers" },
        "forgehand is serving"
    );
    server::serve(listener, state, shutdown)
        .await
        .context("the HTTP server failed")?;
    info!("no longer accepting requests; stopping workers");
    pruning.cancel();
    let _ = pruner.await;
    pool.shutdown().await;
    info!("stopped");
    Ok(())
}

/// Deletes what is past its retention (`database.retention_days` and
/// friends) at start and then every `database.prune_interval_secs`,
/// until `stop`.
async fn prune_periodically(
    store: Arc<dyn Store>,
    database: DatabaseConfig,
    stop: CancellationToken,
) {
    let mut every = tokio::time::interval(database.prune_interval());
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        let retention = database.retention(crate::time::now_ms());
        // Stopping mid-way is fine: each batch is its own transaction.
        let pruned = tokio::select! {
            _ = stop.cancelled() => return,
            pruned = store.prune(&retention) => pruned,
        };
        match pruned {
            Ok(p) if p == Pruned::default() => debug!("nothing past its retention"),
            Ok(p) => info!(
                deliveries = p.deliveries,
                refused = p.refused,
                jobs = p.jobs,
                digests = p.digests,
                "deleted what was past its retention"
            ),
            Err(error) => warn!(%error, "pruning the database failed; trying again later"),
        }
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    info!("shutdown requested");
}

/// What runs a node's jobs, and the sandbox it prepared for them (none
/// for an intake-only node or a dry run).
pub struct Runner {
    pub handler: Arc<JobHandler>,
    pub sandbox: Option<sandboxes::SandboxStatus>,
    /// Makes the handler again for a changed configuration (a GitHub App
    /// created while serving); `None` when it does not use the forges.
    pub rebuild: Option<Rebuild>,
}

impl Runner {
    /// Jobs recorded and logged, nothing done on the forge.
    pub fn logging() -> Self {
        Runner {
            handler: Arc::new(crate::queue::LoggingHandler),
            sandbox: None,
            rebuild: None,
        }
    }
}

async fn prepare_sandbox(config: &Config) -> anyhow::Result<sandboxes::SandboxStatus> {
    // Job directories a crashed run left (mounted): their jobs start
    // over. A live `forgehand run`'s are its own.
    let removed = forgehand_jobcore::jobdir::sweep(&config.git.work_dir, true);
    if removed > 0 {
        warn!(
            removed,
            "removed job directories left by a process that died"
        );
    }
    sandboxes::prepare(&config.sandbox).await.map_err(|error| {
        let hints: String = crate::container::hints(&config.sandbox)
            .iter()
            .map(|h| format!("\n  {h}"))
            .collect();
        anyhow::anyhow!("no sandbox for the agent's tools (see `forgehand doctor`): {error}{hints}")
    })
}

/// What runs the jobs of `forgehand serve`: the pipeline, on the sandbox
/// backend this node settles on, with the forges configured. An
/// intake-only node (`queue.workers = 0`) runs none.
pub async fn job_runner(config: &Config) -> anyhow::Result<Runner> {
    if config.queue.workers == 0 || config.bot.dry_run {
        return Ok(Runner::logging());
    }
    let status = prepare_sandbox(config).await?;
    let github_signs_in = config.github.token.is_some() || config.github.app_id.is_some();
    if !github_signs_in && config.gitea.base_url.is_none() {
        warn!("no forge API is configured (github.token or github.app_id, gitea.base_url + gitea.token): jobs will fail saying so");
    }
    let handler = pipeline(config, &status)?;
    let rebuild: Rebuild = {
        let status = status.clone();
        Arc::new(move |config: &Config| pipeline(config, &status))
    };
    Ok(Runner {
        handler,
        sandbox: Some(status),
        rebuild: Some(rebuild),
    })
}

/// The pipeline for `config`, on the sandbox this node settled on.
fn pipeline(config: &Config, status: &sandboxes::SandboxStatus) -> anyhow::Result<Arc<JobHandler>> {
    let github: Option<Arc<dyn forgehand_forge::api::ForgeApi>> = match config.github.client() {
        Some(client) => Some(Arc::new(client.context("github")?)),
        None => None,
    };
    let gitea: Option<Arc<dyn forgehand_forge::api::ForgeApi>> = match config.gitea.client() {
        Some(client) => Some(Arc::new(client.context("gitea")?)),
        None => None,
    };
    let isolation = match &status.warning {
        Some(_) => format!("{} sandbox, shared kernel", status.backend.name()),
        None => format!("{} sandbox", status.backend.name()),
    };
    let pipeline = crate::pipeline::Pipeline::new(
        config.clone(),
        github,
        gitea,
        status.backend.clone(),
        isolation,
    )
    .map_err(|e| anyhow::anyhow!("environments: {e}"))?;
    Ok(Arc::new(pipeline))
}
