//! `forgehand doctor`: each sandbox backend usable or not, and why; the
//! guest rootfs; what the configuration would use.

use std::io::Write;

use forgehand_sandbox::Readiness;

use super::doctor_forge::{Line, Verdict};
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
    let mut lines = vec![model_line(config).await];
    lines.extend(registry_lines(config).await);
    lines.extend(super::doctor_forge::checks(config, repo).await);
    for line in lines {
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

/// Whether the model server answers (`run` and `serve` both need it):
/// its model list asked for, nothing billed.
async fn model_line(config: &Config) -> Line {
    let settings = config.model.settings();
    let url = settings.base_url.clone();
    let verdict = match forgehand_model::ModelClient::new(settings) {
        Ok(client) => match client.probe().await {
            Ok(()) => Verdict::Ok(format!(
                "{url} answers (model.name = {})",
                config.model.name
            )),
            Err(e) => Verdict::Problem(e.to_string()),
        },
        Err(e) => Verdict::Problem(e.to_string()),
    };
    Line {
        what: "model",
        verdict,
    }
}

/// Whether each registry an environment's setup may reach answers a
/// connection (through `environment.upstream_proxy` when one is set, by
/// a connection to the proxy): a repository whose setup needs it would
/// fail otherwise.
async fn registry_lines(config: &Config) -> Vec<Line> {
    let hosts = &config.environment.allow_hosts;
    if hosts.is_empty() {
        return vec![Line {
            what: "registries",
            verdict: Verdict::Note(
                "environment.allow_hosts is empty: an environment that installs packages fails to set up (forgehand env hosts proposes this host's)".into(),
            ),
        }];
    }
    let mut lines = Vec::new();
    for host in hosts {
        let target = match &config.environment.upstream_proxy {
            Some(proxy) => proxy
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned(),
            None if host.contains(':') && !host.starts_with('[') => host.clone(),
            None => format!("{host}:443"),
        };
        let connect = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            tokio::net::TcpStream::connect(target.clone()),
        )
        .await;
        let verdict = match connect {
            Ok(Ok(_)) => Verdict::Ok(format!("{host} answers a connection")),
            Ok(Err(e)) => Verdict::Problem(format!("{host}: cannot connect to {target}: {e}")),
            Err(_) => Verdict::Problem(format!("{host}: no connection to {target} within 5 s")),
        };
        lines.push(Line {
            what: "registry",
            verdict,
        });
    }
    lines
}
