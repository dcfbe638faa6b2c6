use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use forgehand_bot::cli::eval::{self, EvalArgs, PatchMode};
use forgehand_bot::cli::run::{self, RunArgs};
use forgehand_bot::cli::{doctor, sandbox_exec, setup, SandboxExecArgs};
use forgehand_bot::config::{Config, ConfigFile};
use forgehand_bot::{service, telemetry};
use forgehand_model::Provider;
use forgehand_sandbox::BackendChoice;

// Intake allocates a little for every delivery on several threads at once;
// mimalloc does that with less locking than glibc's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Forgehand turns forge issues into pull requests.
#[derive(Parser)]
#[command(name = "forgehand", version, about)]
struct Cli {
    /// Configuration file (TOML). Without it, $FORGEHAND_CONFIG, else
    /// /etc/forgehand/forgehand.toml when it exists, else none (never a
    /// file in the working directory); every key can also be set as
    /// FORGEHAND_<SECTION>__<KEY>.
    #[arg(long, short, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Receive webhooks and run jobs.
    Serve,
    /// Repositories' environments: the kept ones, and the hosts to allow.
    #[command(subcommand)]
    Env(EnvCommand),
    /// Validate the configuration and print it, secrets redacted.
    CheckConfig,
    /// Check each sandbox backend and the guest rootfs, say what jobs would
    /// use; check the forge's credentials and that server.public_url answers.
    Doctor {
        /// Also check this repository (OWNER/NAME): the App installed, the
        /// webhook registered, the trigger label there.
        #[arg(long)]
        repo: Option<String>,
    },
    /// Sandboxes by hand.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// The gate: what it holds for a maintainer, and why.
    #[command(subcommand)]
    Gate(GateCommand),
    /// Set a forge up for Forgehand: a GitHub App, or a repository's webhook and label.
    #[command(subcommand)]
    Setup(SetupCommand),
    /// Run the agent on a local repository, no forge involved: it works on
    /// a new branch, and the diff, cost, turns and transcript are printed.
    Run {
        /// The git repository (its checked-out branch is the starting point).
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// What to do, in plain words.
        #[arg(long)]
        task: String,
        #[command(flatten)]
        agent: AgentFlags,
        /// Also commit changes the gate holds: anything but ordinary
        /// source, tests and documentation (listed either way; see
        /// `forgehand gate explain`).
        #[arg(long)]
        allow_sensitive: bool,
        /// Also commit a change that deletes or empties more than
        /// gate.max_removed_share of the tracked files or bytes.
        #[arg(long)]
        allow_destructive: bool,
        /// Exit 0 when the change was committed though the host's tests
        /// failed or did not run (otherwise 3).
        #[arg(long)]
        allow_failing_tests: bool,
        /// Work on the working tree's uncommitted changes too (otherwise
        /// a dirty tree is refused): they are committed on top of the
        /// branch first, on no branch, and the report lists them.
        #[arg(long)]
        include_uncommitted: bool,
        /// Print one JSON object instead of the diff and a summary.
        #[arg(long)]
        json: bool,
    },
    /// The database by hand: migrations, and moving from SQLite to PostgreSQL.
    #[command(subcommand)]
    Db(DbCommand),
    /// Measure the agent on instances in SWE-bench's format: each is run as
    /// a job (no push), then the row's tests are run over what it
    /// committed with the row's test patch. Writes DIR/results.jsonl and
    /// DIR/summary.json; run again with the same --out to go on.
    Eval {
        /// The instances, one JSON object per line (docs/eval.md).
        #[arg(long)]
        dataset: PathBuf,
        /// Where the results go (and a stopped evaluation's are read).
        #[arg(long)]
        out: PathBuf,
        /// Score the row's gold patch, or nothing, instead of running the
        /// agent: the controls that prove a dataset.
        #[arg(long)]
        patch: Option<PatchMode>,
        /// Runs of each instance.
        #[arg(long, default_value_t = 1)]
        runs: u32,
        /// Instance-runs at once.
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Start no further run once this much is spent (runs under way
        /// finish).
        #[arg(long)]
        max_dollars: Option<f64>,
        /// Where OWNER/NAME repositories are looked for (as OWNER/NAME or
        /// OWNER__NAME) before they are cloned from GitHub.
        #[arg(long)]
        repos: Option<PathBuf>,
        #[command(flatten)]
        agent: AgentFlags,
    },
}

/// The model and sandbox flags of `run` and `eval`, over the
/// configuration's.
#[derive(clap::Args)]
struct AgentFlags {
    /// openai or anthropic (default: model.provider).
    #[arg(long)]
    provider: Option<Provider>,
    /// The model server (default: model.base_url).
    #[arg(long)]
    base_url: Option<String>,
    /// The model's name (default: model.name).
    #[arg(long)]
    model: Option<String>,
    /// auto, microvm or namespace (default: sandbox.backend).
    #[arg(long)]
    backend: Option<BackendChoice>,
}

#[derive(Subcommand)]
enum DbCommand {
    /// Apply the configured database's pending migrations (for
    /// deployments with database.migrate = false).
    Migrate,
    /// Copy a stopped SQLite database (deliveries with their replay
    /// digests and refusal records, jobs, their runs, installations) into
    /// a new, empty PostgreSQL database; counts verified, all or nothing.
    Copy {
        /// sqlite://PATH
        #[arg(long)]
        from: String,
        /// postgres://USER@HOST/DATABASE (the PG* variables fill in the rest)
        #[arg(long)]
        to: String,
    },
}

#[derive(Subcommand)]
enum SetupCommand {
    /// Without --repo: create Forgehand's GitHub App from a manifest (a
    /// one-time link to the set-up page is printed). With --repo (token
    /// mode): check the token, create or update the repository's webhook
    /// and the trigger label, and see a test ping answered.
    Github {
        /// The organization that will own the App (default: your account).
        #[arg(long, conflicts_with = "repo")]
        org: Option<String>,
        /// Token mode: the repository to wire, OWNER/NAME.
        #[arg(long)]
        repo: Option<String>,
        /// The App's name (default: bot.username).
        #[arg(long, conflicts_with = "repo")]
        name: Option<String>,
        /// Print the link and exit instead of waiting for the App.
        #[arg(long, conflicts_with = "repo")]
        no_wait: bool,
    },
    /// Check the token, create or update the webhook (of a repository or
    /// of an organization) and the trigger label, and see a test delivery
    /// answered.
    Gitea {
        /// The repository, OWNER/NAME.
        #[arg(long, required_unless_present = "org", conflicts_with = "org")]
        repo: Option<String>,
        /// The organization: its webhook covers all its repositories.
        #[arg(long)]
        org: Option<String>,
    },
}

#[derive(Subcommand)]
enum EnvCommand {
    /// One line per kept environment: its key, repository, size, last use.
    List,
    /// Build the environment of a local repository (its checked-out
    /// branch's commit) ahead of its first job.
    Build {
        /// The repository (a directory of a git repository).
        #[arg(long, default_value = ".")]
        repo: PathBuf,
    },
    /// Remove a kept environment.
    Rm {
        /// The environment's key, as `forgehand env list` shows it.
        key: String,
    },
    /// The package registries this host's package managers use: an
    /// allow-list to review and put in environment.allow_hosts.
    Hosts,
}

#[derive(Subcommand)]
enum GateCommand {
    /// How the gate would classify each path (relative to the
    /// repository's root; without paths, what the working tree changes
    /// against HEAD): ordinary, or held and why. The repository's own
    /// [gate] patterns are read from HEAD's .forgehand.toml (the base a
    /// change is judged against; an edit of it is itself held).
    /// Exits 0 whatever the verdicts.
    Explain {
        /// The git repository.
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// The paths to explain.
        paths: Vec<String>,
    },
}

#[derive(Subcommand)]
enum SandboxCommand {
    /// Run one command in a fresh sandbox over a directory (mounted at
    /// /workspace) with the configured limits; exits with its status.
    Exec {
        /// auto, microvm or namespace (default: sandbox.backend).
        #[arg(long)]
        backend: Option<BackendChoice>,
        /// The directory to mount at /workspace (default: the current one).
        #[arg(long)]
        workdir: Option<PathBuf>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

/// Lifts the soft limit on open files to the hard one, as Go's runtime
/// does for every program. systemd starts services with a soft limit of
/// 1,024 (and a hard one of 524,288) for the sake of `select`, which
/// Forgehand does not use; a setup's egress alone may hold two sockets
/// per connection (`environment.max_connections`, 256 by default) and
/// one per connection waiting for a turn. The hard limit is the
/// operator's, and stays.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn main() -> ExitCode {
    raise_open_files_limit();
    let cli = Cli::parse();
    let file = ConfigFile::for_process(cli.config.as_deref());
    // A GitHub App `forgehand setup github` stored is used when the
    // configuration names no other credential.
    let adopt = |github: &mut forgehand_bot::config::GitHubConfig| {
        forgehand_bot::github_app::adopt(github).map(|_| ())
    };
    let config = match Config::load(file.as_ref().map(|f| f.path.as_path()), &adopt) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("forgehand: {error}");
            return ExitCode::from(2);
        }
    };
    // What is printed or logged from here on is filtered for the host's
    // own credentials.
    forgehand_bot::redaction::know(forgehand_bot::host_secrets::host_secrets(&config));
    // Every command says which file it read (serve logs it; run --json
    // puts it in its report).
    let quiet = matches!(
        cli.command,
        Command::Serve | Command::Run { json: true, .. }
    );
    if !quiet {
        eprintln!("forgehand: {}", ConfigFile::describe(file.as_ref()));
    }
    match cli.command {
        Command::CheckConfig => {
            print!("{}", config.to_redacted_toml());
            for warning in forgehand_bot::github_app::warnings(&config) {
                eprintln!("warning: {warning}");
            }
            eprintln!("configuration is valid");
            ExitCode::SUCCESS
        }
        Command::Doctor { repo } => {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            match runtime.block_on(doctor(&config, repo.as_deref(), &mut std::io::stdout())) {
                Ok(0) => ExitCode::SUCCESS,
                Ok(_) => ExitCode::FAILURE,
                Err(error) => {
                    eprintln!("forgehand: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Sandbox(SandboxCommand::Exec {
            backend,
            workdir,
            command,
        }) => {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            let args = SandboxExecArgs {
                backend,
                workdir,
                command,
            };
            match runtime.block_on(sandbox_exec(&config, args)) {
                Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
                Err(error) => {
                    eprintln!("forgehand: {}", run::said(&error));
                    // Distinct from any status the command could have.
                    ExitCode::from(125)
                }
            }
        }
        Command::Env(command) => env(&config, command),
        Command::Gate(GateCommand::Explain { repo, paths }) => {
            match forgehand_bot::cli::gate::explain(&repo, &paths, &mut std::io::stdout()) {
                Ok(_) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("forgehand: {}", run::said(&error));
                    ExitCode::from(2)
                }
            }
        }
        Command::Run {
            repo,
            task,
            agent,
            allow_sensitive,
            allow_destructive,
            allow_failing_tests,
            include_uncommitted,
            json,
        } => {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            let args = RunArgs {
                repo,
                task,
                provider: agent.provider,
                base_url: agent.base_url,
                model: agent.model,
                backend: agent.backend,
                allow_sensitive,
                allow_destructive,
                include_uncommitted,
            };
            // A run that could not start is reported as one that failed:
            // its first line (or its JSON) says why.
            let mut report = match runtime.block_on(run::run(&config, args)) {
                Ok(report) => report,
                Err(error) => run::RunReport::from_error(&error),
            };
            report.config = file;
            let report = report.redacted();
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&report).expect("the report serializes")
                );
            } else {
                let _ = run::print_human(&report, &mut std::io::stdout());
            }
            ExitCode::from(report.status.exit_code(allow_failing_tests))
        }
        Command::Db(command) => {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            let mut stdout = std::io::stdout();
            let done = runtime.block_on(async {
                match command {
                    DbCommand::Migrate => {
                        forgehand_bot::cli::db::migrate(&config, &mut stdout).await
                    }
                    DbCommand::Copy { from, to } => {
                        // The URLs given here are secrets like the configured one.
                        forgehand_bot::redaction::know(
                            [&from, &to]
                                .into_iter()
                                .flat_map(|u| forgehand_bot::host_secrets::url_password(u))
                                .map(|s| ("--to".to_owned(), s)),
                        );
                        let copied = forgehand_bot::cli::db::copy(&config, &from, &to).await?;
                        for (table, rows) in copied.tables {
                            println!("{table}: {rows} rows");
                        }
                        println!("copied; point database.url at the new database");
                        Ok(())
                    }
                }
            });
            match done {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("forgehand: {}", run::said(&error));
                    ExitCode::FAILURE
                }
            }
        }
        Command::Eval {
            dataset,
            out,
            patch,
            runs,
            jobs,
            max_dollars,
            repos,
            agent,
        } => {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            let args = EvalArgs {
                dataset,
                out,
                patch,
                runs,
                jobs,
                max_dollars,
                repos,
                provider: agent.provider,
                base_url: agent.base_url,
                model: agent.model,
                backend: agent.backend,
            };
            let mut stdout = std::io::stdout();
            match runtime.block_on(eval::eval(&config, args, &mut stdout)) {
                Ok(eval::Ended::Complete(_)) => ExitCode::SUCCESS,
                Ok(eval::Ended::Stopped(_)) => ExitCode::from(3),
                Err(error) => {
                    eprintln!("forgehand: {}", run::said(&error));
                    let bad_input = error
                        .chain()
                        .any(|c| c.downcast_ref::<eval::dataset::DatasetError>().is_some());
                    ExitCode::from(if bad_input { 2 } else { 1 })
                }
            }
        }
        Command::Setup(command) => {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            match runtime.block_on(setup(&config, command)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("forgehand: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Serve => {
            telemetry::init(&config.log);
            tracing::info!("{}", ConfigFile::describe(file.as_ref()));
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            let served = runtime.block_on(async {
                let runner = service::job_runner(&config).await?;
                service::serve(config, runner, service::shutdown_signal()).await
            });
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    tracing::error!("{}", run::said(&error));
                    eprintln!("forgehand: {}", run::said(&error));
                    ExitCode::FAILURE
                }
            }
        }
    }
}

async fn setup(config: &Config, command: SetupCommand) -> Result<(), setup::Stop> {
    use forgehand_forge::admin::Scope;
    let scope = |r: Result<Scope, forgehand_forge::admin::SetupError>| {
        r.map_err(|e| setup::Stop(e.to_string()))
    };
    let out = &mut std::io::stdout();
    match command {
        SetupCommand::Github {
            repo: Some(repo), ..
        } => {
            let scope = scope(Scope::repo(&repo))?;
            setup::setup_token_mode(config, setup::TokenForge::GitHub, scope, out).await
        }
        SetupCommand::Github {
            org,
            name,
            no_wait,
            repo: None,
        } => {
            let args = setup::AppArgs { org, name, no_wait };
            setup::setup_github_app(config, args, out).await
        }
        SetupCommand::Gitea { repo, org } => {
            let scope = match (repo, org) {
                (Some(repo), _) => scope(Scope::repo(&repo))?,
                (None, Some(org)) => scope(Scope::org(&org))?,
                (None, None) => unreachable!("clap requires --repo or --org"),
            };
            setup::setup_token_mode(config, setup::TokenForge::Gitea, scope, out).await
        }
    }
}

/// `forgehand env …`.
fn env(config: &Config, command: EnvCommand) -> ExitCode {
    use forgehand_bot::cli::env;
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let mut out = std::io::stdout();
    let done = match command {
        EnvCommand::List => env::list(config, &mut out).map(|()| true),
        EnvCommand::Rm { key } => env::rm(config, &key, &mut out),
        EnvCommand::Build { repo } => runtime
            .block_on(env::build(config, &repo, &mut out))
            .map(|()| true),
        EnvCommand::Hosts => runtime.block_on(env::hosts(&mut out)).map(|()| true),
    };
    match done {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("forgehand: {}", run::said(&error));
            ExitCode::FAILURE
        }
    }
}
