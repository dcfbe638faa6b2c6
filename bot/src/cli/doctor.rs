//! `forgehand doctor`: each sandbox backend usable or not, and why; the
//! guest rootfs; what the configuration would use.

use std::io::Write;

use forgehand_sandbox::Readiness;

use super::doctor_forge::Verdict;
use crate::config::Config;
use crate::sandboxes;

/// Prints the report; returns the exit status: 0 when the configured
/// backend can run jobs, the rootfs is there and the forge checks found
/// no problem (`repo` adds that repository's), 1 otherwise.
pub async fn doctor(
    config: &Config,
    repo: Option<&str>,
    out: &mut impl Write,
) -> std::io::Result<i32> {
    let (checks, chosen) = sandboxes::doctor(&config.sandbox).await;
    let mut healthy = true;
    for check in &checks {
        let (mark, detail) = match &check.readiness {
            Readiness::Usable(d) => ("usable", d),
            Readiness::Unusable(d) => ("NOT usable", d),
        };
        writeln!(out, "{:<18} {mark}: {detail}", check.what)?;
        if check.what == "guest rootfs" && !check.readiness.is_usable() {
            healthy = false;
        }
    }
    let configured = format!("{:?}", config.sandbox.backend).to_lowercase();
    match chosen {
        Ok(chosen) => {
            writeln!(
                out,
                "sandbox.backend = \"{configured}\": jobs run in the {} backend ({})",
                chosen.backend.name(),
                chosen.backend.isolation().describe()
            )?;
            if let Some(warning) = chosen.warning {
                writeln!(out, "WARNING: {warning}")?;
            }
            if chosen.backend.name() == "namespace" {
                for warning in
                    forgehand_sandbox::namespace::host_warnings(config.sandbox.memory_mib)
                {
                    writeln!(out, "WARNING: {warning}")?;
                }
            }
        }
        Err(error) => {
            healthy = false;
            writeln!(
                out,
                "sandbox.backend = \"{configured}\": jobs cannot run: {error}"
            )?;
            for hint in crate::container::hints(&config.sandbox) {
                writeln!(out, "{hint}")?;
            }
        }
    }
    for line in super::doctor_forge::checks(config, repo).await {
        let (mark, detail) = match &line.verdict {
            Verdict::Ok(d) => ("ok", d),
            Verdict::Problem(d) => {
                healthy = false;
                ("PROBLEM", d)
            }
            Verdict::Note(d) => ("note", d),
        };
        writeln!(out, "{:<18} {mark}: {detail}", line.what)?;
    }
    Ok(if healthy { 0 } else { 1 })
}
