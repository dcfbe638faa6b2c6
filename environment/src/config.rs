//! `[environment]`: how repositories' environments are built and kept
//! (docs/environments.md). The allow-list is the operator's alone: no
//! registry is built in (`forgehand env hosts` proposes one from this
//! host's package managers).

use std::path::PathBuf;
use std::time::Duration;

use crate::egress::{AllowHosts, Limits, Policy, UpstreamProxy};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvironmentConfig {
    /// The hosts the setup phase may reach (package registries): a TOML
    /// list, or one comma-separated string (the form environment
    /// variables use). Empty: a setup that needs the network fails.
    #[serde(deserialize_with = "forgehand_types::config::string_list")]
    pub allow_hosts: Vec<String>,
    /// Extra CA certificates (PEM) the setup phase's tools trust, for
    /// hosts behind a TLS-inspecting proxy.
    pub ca_bundle: Option<PathBuf>,
    /// An HTTP proxy (`http://host:port`) the egress reaches the allowed
    /// hosts through, for networks that need one.
    pub upstream_proxy: Option<String>,
    /// Connections the egress serves at once for one setup (each a
    /// tunnel to a registry); more wait for a turn. Package managers open
    /// many at once: npm 9 through a proxy opens one per request.
    pub max_connections: usize,
    /// The longest a whole setup (packages and command) may run.
    pub setup_timeout_secs: u64,
    /// Memory of the setup sandbox, in MiB.
    pub memory_mib: u64,
    /// What a setup may write (the environment it builds), in MiB.
    pub disk_mib: u64,
    /// Where environments are kept.
    pub cache_dir: PathBuf,
    /// Kept environments past this size are evicted, least recently used
    /// first.
    pub cache_max_gib: u64,
    /// The most files, directories and links one environment may hold
    /// (its layers together): a setup making more fails
    /// `environment:too_large`, as does one that runs its file system
    /// out of inodes.
    pub max_entries: usize,
    /// Kept environments past this many entries in all are evicted, least
    /// recently used first: the host's file system has inodes as it has
    /// blocks.
    pub cache_max_entries: u64,
    /// A kept environment unused for this many days is removed. 0: kept
    /// until evicted.
    pub max_idle_days: u64,
    /// Rounds the agent gets to fix a failing test run before the pull
    /// request is opened as a draft.
    pub test_retries: u32,
    /// A default environment detected from a repository's lockfiles when
    /// it declares none.
    pub detect: bool,
    /// A kept environment older than this is built again (when no job
    /// uses it), whatever its key: what a setup reads without naming it
    /// (a download of "latest", a file no script names) is current again
    /// at least this often. 0: kept until its key changes or it is
    /// evicted.
    pub max_age_hours: u64,
}

impl Default for EnvironmentConfig {
    fn default() -> Self {
        EnvironmentConfig {
            allow_hosts: Vec::new(),
            ca_bundle: None,
            upstream_proxy: None,
            max_connections: Limits::default().max_connections,
            setup_timeout_secs: 1200,
            memory_mib: 4096,
            disk_mib: 8192,
            cache_dir: "forgehand-data/environments".into(),
            cache_max_gib: 20,
            max_entries: 500_000,
            cache_max_entries: 5_000_000,
            max_idle_days: 30,
            test_retries: 1,
            detect: true,
            max_age_hours: 168,
        }
    }
}

/// The most `environment.max_connections`: each connection holds two
/// sockets of Forgehand's own (the sandbox's and the registry's), and
/// several setups may run at once.
const MAX_CONNECTIONS: usize = 4096;

/// The longest `environment.max_age_hours`: ten years.
const MAX_AGE_HOURS: u64 = 24 * 365 * 10;

impl EnvironmentConfig {
    pub fn setup_timeout(&self) -> Duration {
        Duration::from_secs(self.setup_timeout_secs)
    }

    /// How long a kept environment is reused; `None`: until its key
    /// changes.
    pub fn max_age(&self) -> Option<Duration> {
        // Bounded by validation; saturating all the same, as a
        // configuration built in code is not validated.
        (self.max_age_hours > 0)
            .then(|| Duration::from_secs(self.max_age_hours.saturating_mul(3600)))
    }

    /// The egress proxy's policy: the operator's hosts, the default ports,
    /// ranges and limits, the upstream when one is set.
    pub fn egress(&self) -> Result<Policy, String> {
        let hosts = AllowHosts::parse(&self.allow_hosts)
            .map_err(|e| format!("environment.allow_hosts: {e}"))?;
        let mut policy = Policy::new(hosts);
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return Err(format!(
                "environment.max_connections: from 1 to {MAX_CONNECTIONS} (connections a \
                 setup's egress serves at once; the default is {})",
                Limits::default().max_connections
            ));
        }
        policy.limits.max_connections = self.max_connections;
        if let Some(upstream) = &self.upstream_proxy {
            policy.upstream = Some(
                UpstreamProxy::parse(upstream)
                    .map_err(|e| format!("environment.upstream_proxy: {e}"))?,
            );
        }
        Ok(policy)
    }

    /// The extra CA certificates, read.
    pub fn ca_bundle(&self) -> Result<Option<Vec<u8>>, String> {
        let Some(path) = &self.ca_bundle else {
            return Ok(None);
        };
        let bytes = std::fs::read(path)
            .map_err(|e| format!("environment.ca_bundle: {}: {e}", path.display()))?;
        if !bytes
            .windows(27)
            .any(|w| w == b"-----BEGIN CERTIFICATE-----")
        {
            return Err(format!(
                "environment.ca_bundle: {} holds no PEM certificate",
                path.display()
            ));
        }
        Ok(Some(bytes))
    }

    pub fn problems(&self, problems: &mut Vec<String>) {
        if let Err(problem) = self.egress() {
            problems.push(problem);
        }
        if let Err(problem) = self.ca_bundle() {
            problems.push(problem);
        }
        if self.setup_timeout_secs == 0 {
            problems.push("environment.setup_timeout_secs: must be at least 1".into());
        }
        if self.memory_mib < 64 {
            problems.push("environment.memory_mib: must be at least 64".into());
        }
        if self.disk_mib < 64 {
            problems.push("environment.disk_mib: must be at least 64".into());
        }
        if self.max_entries < 100 {
            problems.push("environment.max_entries: must be at least 100".into());
        }
        if self.cache_max_entries < self.max_entries as u64 {
            problems.push(
                "environment.cache_max_entries: must be at least environment.max_entries".into(),
            );
        }
        if self.max_age_hours > MAX_AGE_HOURS {
            problems.push(format!(
                "environment.max_age_hours: at most {MAX_AGE_HOURS} (ten years); 0 keeps an \
                 environment until its key changes"
            ));
        }
    }
}
