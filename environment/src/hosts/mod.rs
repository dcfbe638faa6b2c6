//! The allow-list proposed from the host's own package managers
//! (`forgehand env hosts`, the quick start).
//!
//! The project writes no registry's host name anywhere: the operator's
//! `environment.allow_hosts` is theirs, and this proposes it from what the
//! host itself uses: pip's index and file host (its configuration, else
//! its built-in defaults, read from pip itself), npm's registry, and the
//! apt sources. Each host comes with where it was found, so the operator
//! can judge it; a package manager that is missing is a note, not an
//! error, since many hosts have only some of them. Only host names and
//! ports leave this module: a URL's credentials and path never do.

mod apt;
mod ca;
mod command;
mod npm;
mod pip;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use apt::{read_sources, AptSource};
pub use ca::CaBundle;

/// The package manager a host was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Manager {
    Pip,
    Npm,
    Apt,
}

impl fmt::Display for Manager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Manager::Pip => "pip",
            Manager::Npm => "npm",
            Manager::Apt => "apt",
        })
    }
}

/// One sighting of a host: in which manager, on which port, and where
/// exactly (a command and key, a file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    pub manager: Manager,
    pub host: String,
    pub port: u16,
    pub source: String,
}

impl Found {
    /// The host and port of `url` (http or https), with its source;
    /// `None` for anything else (a local path, a `file:` URL).
    pub(crate) fn from_url(
        manager: Manager,
        url: &str,
        source: impl Into<String>,
    ) -> Option<Found> {
        let url = url::Url::parse(url.trim()).ok()?;
        if !matches!(url.scheme(), "http" | "https") {
            return None;
        }
        let host = match url.host()? {
            url::Host::Domain(name) => name.trim_end_matches('.').to_ascii_lowercase(),
            url::Host::Ipv4(ip) => ip.to_string(),
            url::Host::Ipv6(ip) => ip.to_string(),
        };
        Some(Found {
            manager,
            host,
            port: url.port_or_known_default()?,
            source: source.into(),
        })
    }
}

/// A host to allow, with every place it was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProposedHost {
    pub host: String,
    pub ports: BTreeSet<u16>,
    pub managers: BTreeSet<Manager>,
    pub sources: Vec<String>,
}

/// What `forgehand env hosts` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Proposal {
    pub hosts: Vec<ProposedHost>,
    /// Managers skipped and why, and what the list cannot know (a mirror
    /// list's mirrors, a configured index's file host).
    pub notes: Vec<String>,
    /// The CA bundle the host's package managers trust beyond their
    /// built-in roots (a TLS-inspecting proxy's), for
    /// `environment.ca_bundle`.
    pub ca_bundle: Option<CaBundle>,
}

impl Proposal {
    /// Merges sightings of one host, in the order first found.
    pub fn from_found(found: impl IntoIterator<Item = Found>, notes: Vec<String>) -> Self {
        let mut hosts: Vec<ProposedHost> = Vec::new();
        for found in found {
            let at = match hosts.iter().position(|h| h.host == found.host) {
                Some(at) => at,
                None => {
                    hosts.push(ProposedHost {
                        host: found.host.clone(),
                        ports: BTreeSet::new(),
                        managers: BTreeSet::new(),
                        sources: Vec::new(),
                    });
                    hosts.len() - 1
                }
            };
            let host = &mut hosts[at];
            host.ports.insert(found.port);
            host.managers.insert(found.manager);
            let source = format!("{}: {}", found.manager, found.source);
            if !host.sources.contains(&source) {
                host.sources.push(source);
            }
        }
        let mut notes = notes;
        notes.dedup();
        Proposal {
            hosts,
            notes,
            ca_bundle: None,
        }
    }

    /// The names, as `environment.allow_hosts` takes them.
    pub fn allow_hosts(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.host.clone()).collect()
    }
}

impl fmt::Display for Proposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.hosts.is_empty() {
            writeln!(f, "# No package manager on this host names a registry.")?;
        } else {
            writeln!(f, "# Hosts this machine's package managers use:")?;
        }
        for host in &self.hosts {
            let ports: Vec<String> = host.ports.iter().map(u16::to_string).collect();
            writeln!(
                f,
                "#   {} (port {}): {}",
                host.host,
                ports.join(", "),
                host.sources.join("; ")
            )?;
        }
        for note in &self.notes {
            writeln!(f, "# note: {note}")?;
        }
        let quoted: Vec<String> = self.hosts.iter().map(|h| format!("{:?}", h.host)).collect();
        writeln!(f, "[environment]")?;
        writeln!(f, "allow_hosts = [{}]", quoted.join(", "))?;
        if let Some(ca) = &self.ca_bundle {
            writeln!(
                f,
                "# The CA bundle {} names: the setup's package managers trust it too.",
                ca.source
            )?;
            writeln!(f, "ca_bundle = {:?}", ca.path.display().to_string())?;
        }
        Ok(())
    }
}

/// Where [`propose_from`] looks: the file-system root holding
/// `etc/apt`, and the home directory holding `.config/pip`.
#[derive(Debug, Clone)]
pub struct Places {
    pub root: PathBuf,
    pub home: Option<PathBuf>,
}

impl Places {
    /// This host: `/`, and `$HOME`.
    pub fn host() -> Self {
        Places {
            root: PathBuf::from("/"),
            home: std::env::var_os("HOME").map(PathBuf::from),
        }
    }
}

/// The CA bundle this host's package managers trust beyond their
/// built-in roots, when one is named.
pub async fn ca_in_use() -> Option<CaBundle> {
    ca::find(&|name| std::env::var(name).ok()).await
}

/// The proposal from this host's package managers.
pub async fn propose() -> Proposal {
    propose_from(&Places::host()).await
}

/// The proposal, pip and npm asked as installed on this host, files read
/// under `places`.
pub async fn propose_from(places: &Places) -> Proposal {
    let mut found = Vec::new();
    let mut notes = Vec::new();
    let (pip_found, pip_notes) = pip::find(places).await;
    found.extend(pip_found);
    notes.extend(pip_notes);
    match npm::find().await {
        Ok(npm_found) => found.push(npm_found),
        Err(note) => notes.push(note),
    }
    let (sources, apt_notes) = read_sources(&places.root);
    notes.extend(apt_notes);
    found.extend(sources.iter().filter_map(AptSource::found));
    if sources.is_empty() {
        notes.push(format!(
            "apt: no source in {}",
            places.root.join("etc/apt").display()
        ));
    }
    let mut proposal = Proposal::from_found(found, notes);
    proposal.ca_bundle = ca::find(&|name| std::env::var(name).ok()).await;
    proposal
}

/// Reads a small configuration file; `None` when absent. Larger than
/// `MAX_CONFIG_BYTES` is a note, not a read: a package manager's
/// configuration is never that large, and a FIFO or device here must not
/// hang or fill the host.
pub(crate) fn read_config(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    const MAX_CONFIG_BYTES: u64 = 1 << 20;
    let problem = |e: &dyn fmt::Display| format!("{}: {e}", path.display());
    // Non-blocking, then checked on the open file: opening a FIFO for
    // reading would otherwise wait for a writer, and a check by path
    // could be raced.
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(problem(&e)),
    };
    let metadata = file.metadata().map_err(|e| problem(&e))?;
    if !metadata.is_file() {
        return Err(problem(&"not a regular file, skipped"));
    }
    let mut text = String::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| problem(&e))?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(problem(&format!(
            "larger than {MAX_CONFIG_BYTES} bytes, skipped"
        )));
    }
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(manager: Manager, url: &str, source: &str) -> Found {
        Found::from_url(manager, url, source).unwrap()
    }

    #[test]
    fn urls_give_host_and_port_never_credentials_or_paths() {
        let f = found(
            Manager::Npm,
            "https://user:s3cret@Mirror.Invalid./npm/",
            "x",
        );
        assert_eq!((f.host.as_str(), f.port), ("mirror.invalid", 443));
        assert_eq!(
            found(Manager::Apt, "http://mirror.invalid:8080/d", "x").port,
            8080
        );
        assert_eq!(
            found(Manager::Apt, "http://[2001:db8::1]/d", "x").host,
            "2001:db8::1"
        );
        assert_eq!(Found::from_url(Manager::Pip, "/opt/wheels", "x"), None);
        assert_eq!(
            Found::from_url(Manager::Pip, "file:///opt/wheels", "x"),
            None
        );
    }

    #[test]
    fn a_host_found_twice_is_one_line_with_both_sources() {
        let proposal = Proposal::from_found(
            [
                found(Manager::Pip, "https://mirror.invalid/simple", "index"),
                found(Manager::Npm, "https://registry.invalid/", "registry"),
                found(
                    Manager::Apt,
                    "http://mirror.invalid/debian",
                    "/etc/apt/sources.list",
                ),
            ],
            vec!["npm: not installed".into()],
        );
        assert_eq!(
            proposal.allow_hosts(),
            ["mirror.invalid", "registry.invalid"]
        );
        let mirror = &proposal.hosts[0];
        assert_eq!(mirror.ports, BTreeSet::from([80, 443]));
        assert_eq!(
            mirror.managers,
            BTreeSet::from([Manager::Pip, Manager::Apt])
        );
        assert_eq!(mirror.sources, ["pip: index", "apt: /etc/apt/sources.list"]);
        let shown = proposal.to_string();
        assert!(
            shown.ends_with("allow_hosts = [\"mirror.invalid\", \"registry.invalid\"]\n"),
            "{shown}"
        );
        assert!(shown.contains("# note: npm: not installed"), "{shown}");
    }

    #[test]
    fn a_fifo_or_a_huge_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(2 << 20)
            .unwrap();
        assert!(read_config(&big).unwrap_err().contains("larger than"));
        assert!(read_config(dir.path())
            .unwrap_err()
            .contains("not a regular file"));
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success(), "mkfifo (coreutils) is needed");
        assert!(read_config(&fifo)
            .unwrap_err()
            .contains("not a regular file"));
        assert_eq!(read_config(&dir.path().join("absent")), Ok(None));
    }
}
