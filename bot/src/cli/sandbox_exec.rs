//! `forgehand sandbox exec`: one command in a fresh sandbox over a
//! directory, with the configured limits, its output streamed, its exit
//! status returned. Operators use it to see the isolation for themselves.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use forgehand_sandbox::{BackendChoice, ExecRequest, Stream};

use crate::config::Config;
use crate::sandboxes;

pub struct SandboxExecArgs {
    pub backend: Option<BackendChoice>,
    /// Mounted at /workspace; the current directory when not given.
    pub workdir: Option<PathBuf>,
    pub command: Vec<String>,
}

/// Returns the command's exit status as a shell reports it.
pub async fn sandbox_exec(config: &Config, args: SandboxExecArgs) -> anyhow::Result<i32> {
    let workdir = match args.workdir {
        Some(dir) => dir,
        None => std::env::current_dir().context("the current directory")?,
    };
    let workdir = workdir
        .canonicalize()
        .with_context(|| format!("--workdir {}", workdir.display()))?;
    let chosen = sandboxes::choose(&config.sandbox, args.backend).await?;
    if let Some(warning) = &chosen.warning {
        eprintln!("forgehand: {warning}");
    }
    let sandbox = chosen
        .backend
        .create(config.sandbox.spec(&workdir))
        .await
        .context("creating the sandbox")?;
    let result = tokio::select! {
        result = run(&*sandbox, args.command) => result,
        _ = super::interrupted() => {
            eprintln!("forgehand: interrupted: the sandbox is destroyed");
            Ok(130)
        }
    };
    sandbox.destroy().await.context("destroying the sandbox")?;
    result
}

async fn run(
    sandbox: &dyn forgehand_sandbox::Sandbox,
    command: Vec<String>,
) -> anyhow::Result<i32> {
    let mut stream = sandbox.exec_stream(ExecRequest::new(command)).await?;
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    while let Some(chunk) = stream.next_chunk().await {
        // A closed pipe on our side (`| head`) must not stop the command.
        let _ = match chunk.stream {
            Stream::Stdout => stdout.write_all(&chunk.bytes).and_then(|_| stdout.flush()),
            Stream::Stderr => stderr.write_all(&chunk.bytes).and_then(|_| stderr.flush()),
        };
    }
    // Every byte was streamed and printed as it came; what the sandbox
    // kept of it (sandbox.output_limit_bytes) is not needed here.
    let output = stream.finish().await?;
    if !output.status.success() {
        eprintln!("forgehand: {}", output.status);
    }
    Ok(output.status.code())
}
