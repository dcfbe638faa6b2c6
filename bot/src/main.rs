use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use forgehand_bot::cli::{doctor, sandbox_exec, SandboxExecArgs};
use forgehand_bot::config::{Config, CONFIG_PATH_VAR};
use forgehand_bot::queue::LoggingHandler;
use forgehand_bot::{service, telemetry};
use forgehand_sandbox::BackendChoice;

// Intake allocates a little for every delivery on several threads at once;
// mimalloc does that with less locking than glibc's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Forgehand turns forge issues into pull requests.
#[derive(Parser)]
#[command(name = "forgehand", version, about)]
struct Cli {
    /// Configuration file (TOML). Defaults to ./forgehand.toml when it
    /// exists; every key can also be set as FORGEHAND_<SECTION>__<KEY>.
    #[arg(long, short, global = true, env = CONFIG_PATH_VAR)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Receive webhooks and run jobs.
    Serve,
    /// Validate the configuration and print it, secrets redacted.
    CheckConfig,
    /// Check each sandbox backend and the guest rootfs; say what jobs would use.
    Doctor,
    /// Sandboxes by hand.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("forgehand: {error}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::CheckConfig => {
            print!("{}", config.to_redacted_toml());
            for warning in config.warnings() {
                eprintln!("warning: {warning}");
            }
            eprintln!("configuration is valid");
            ExitCode::SUCCESS
        }
        Command::Doctor => {
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            match runtime.block_on(doctor(&config, &mut std::io::stdout())) {
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
                    eprintln!("forgehand: {error:#}");
                    // Distinct from any status the command could have.
                    ExitCode::from(125)
                }
            }
        }
        Command::Serve => {
            telemetry::init(&config.log);
            let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
            let served = runtime.block_on(service::serve(
                config,
                Arc::new(LoggingHandler),
                service::shutdown_signal(),
            ));
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    tracing::error!("{error:#}");
                    eprintln!("forgehand: {error:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
