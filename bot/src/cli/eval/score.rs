//! The scored commit's tests, run as the host runs a job's: a working
//! copy of the commit over the environment its files declare, in a fresh
//! sandbox with no network, under the sandbox's limits. The agent's
//! sandbox is long gone: nothing it left running or wrote outside the
//! commit is there.

use std::path::Path;

use forgehand_forge::git::Mirror;
use forgehand_jobcore::environment::Prepared;
use forgehand_jobcore::Core;
use forgehand_sandbox::{Backend, ExecRequest, ExitStatus};
use forgehand_types::reason::Reason;

use super::results::Unresolved;
use crate::cli::run::{local_environment, Local};
use crate::config::Config;

/// How the tests ended, and their output.
pub struct Tested {
    pub passed: bool,
    pub said: String,
    pub log: String,
}

/// Runs `command` over `commit` of the repository at `repo`.
pub async fn tests(
    config: &Config,
    backend: &dyn Backend,
    repo: &Path,
    commit: git2::Oid,
    name: &str,
    command: &str,
) -> anyhow::Result<Result<Tested, (Unresolved, String)>> {
    let source = Mirror::local(repo)?;
    let Local {
        checkout, prepared, ..
    } = local_environment(config, backend, &source, commit).await?;
    let mut prepared: Option<Prepared> = match prepared {
        Ok(prepared) => prepared,
        Err(failure) => return Ok(Err((Unresolved::Run(failure.reason), failure.message))),
    };
    let core = Core {
        backend,
        sandbox: &config.sandbox,
        git: &config.git,
        agent: &config.agent,
        model: config.model.settings(),
        price: None,
        test_retries: 0,
    };
    let copy = match core
        .working_copy(
            name,
            checkout,
            prepared.as_mut().and_then(|p| p.env.take()),
            repo,
            "forgehand-eval-scored",
        )
        .await
    {
        Ok(copy) => copy,
        Err(failure) => return Ok(Err((Unresolved::Run(failure.reason), failure.message))),
    };
    let sandbox = match backend.create(copy.layered().spec(&config.sandbox)).await {
        Ok(sandbox) => sandbox,
        Err(error) => return Ok(Err((Unresolved::Run(Reason::Infra), error.to_string()))),
    };
    let timeout = config.sandbox.limits().timeout;
    let out = sandbox
        .exec(ExecRequest::new(["bash", "-c", command]).timeout(timeout))
        .await;
    if let Err(error) = sandbox.destroy().await {
        tracing::warn!(%error, "destroying the scoring sandbox failed");
    }
    drop(copy);
    let out = match out {
        Ok(out) => out,
        Err(error) => return Ok(Err((Unresolved::Run(Reason::Infra), error.to_string()))),
    };
    let said = match out.status {
        ExitStatus::Exited(0) => "the tests passed".to_owned(),
        ExitStatus::Exited(code) => format!("the test command exited {code}"),
        ExitStatus::Signaled(signal) => format!("the test command was killed by signal {signal}"),
        ExitStatus::TimedOut => format!(
            "the test command did not end within {}s (sandbox.timeout_secs)",
            timeout.as_secs()
        ),
    };
    let log = format!(
        "$ {command}\n{}\n{}\n[{said}]\n",
        out.stdout.to_text(),
        out.stderr.to_text()
    );
    Ok(Ok(Tested {
        passed: out.status.success(),
        said,
        log,
    }))
}
