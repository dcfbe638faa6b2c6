//! `forgehand env list|build|rm|hosts`: the kept environments, by hand.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use forgehand_environment::hosts;
use forgehand_environment::spec::EnvKey;

use crate::config::Config;
use forgehand_jobcore::environment::Environments;

/// One line per kept environment: its key, repository, size in bytes
/// and in entries, last use.
pub fn list(config: &Config, out: &mut dyn Write) -> anyhow::Result<()> {
    let environments =
        Environments::new(&config.environment, &config.sandbox).map_err(|e| anyhow::anyhow!(e))?;
    let kept = environments.list();
    if kept.is_empty() {
        writeln!(
            out,
            "no environment is kept in {}",
            environments.cache().dir().display()
        )?;
    }
    for env in kept {
        writeln!(
            out,
            "{}  {}  {}  {} entries  {}",
            env.key,
            env.repository,
            size(env.bytes),
            env.entries,
            crate::time::rfc3339(env.last_used as i64 * 1000)
        )?;
    }
    Ok(())
}

/// Removes the environment kept under `key`.
pub fn rm(config: &Config, key: &str, out: &mut dyn Write) -> anyhow::Result<bool> {
    let key: EnvKey = key.parse().map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
    let environments =
        Environments::new(&config.environment, &config.sandbox).map_err(|e| anyhow::anyhow!(e))?;
    let removed = environments.cache().remove(key.as_str())?;
    if removed {
        writeln!(out, "removed {key}")?;
    } else {
        writeln!(out, "no environment is kept under {key}")?;
    }
    Ok(removed)
}

/// Builds the environment of the repository at `repo` (its checked-out
/// branch's commit) ahead of its first job.
pub async fn build(config: &Config, repo: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let chosen = crate::sandboxes::choose(&config.sandbox, None).await?;
    let repo = repo
        .canonicalize()
        .with_context(|| format!("--repo {}", repo.display()))?;
    let source = forgehand_forge::git::Mirror::local(&repo)
        .with_context(|| format!("{} is not a git repository", repo.display()))?;
    let base = source
        .repo
        .head()
        .context("the repository has no commit to start from")?
        .peel_to_commit()?
        .id();
    let local = super::run::local_environment(config, &*chosen.backend, &source, base).await?;
    match local.prepared {
        Err(failure) => anyhow::bail!("{}: {}", failure.reason.code(), failure.message),
        Ok(None) => writeln!(
            out,
            "{} declares no environment and none is detected (environment.detect: {})",
            repo.display(),
            config.environment.detect
        )?,
        Ok(Some(prepared)) => {
            let report = prepared.report();
            writeln!(out, "key:        {}", report.key)?;
            writeln!(out, "repository: {}", local.repository)?;
            writeln!(out, "from:       {}", report.source)?;
            if report.reused {
                writeln!(out, "kept already: nothing was set up")?;
            } else {
                writeln!(out, "set up in   {:.1} s", report.setup_secs)?;
                for step in &prepared.steps {
                    writeln!(out, "  {:<9} {:.1} s", step.name, step.secs)?;
                }
            }
            // What the setup reached, and how busy the egress was: where a
            // slow setup's time went. Hosts are the egress's normalized
            // names (ASCII letters, digits, dots), nothing escaped needed.
            if let Some(egress) = &prepared.egress {
                for line in egress.to_string().lines() {
                    writeln!(out, "egress:     {line}")?;
                }
            }
        }
    }
    Ok(())
}

/// The hosts this machine's package managers use, as an allow-list to
/// review and put in `environment.allow_hosts`.
pub async fn hosts(out: &mut dyn Write) -> anyhow::Result<()> {
    let proposal = hosts::propose().await;
    write!(out, "{proposal}").context("writing the proposal")?;
    Ok(())
}

fn size(bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (MIB * 1024.0))
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB)
    }
}
