//! What the egress lets through: the operator's host list, the ports, the
//! denied address ranges, an optional upstream proxy and the limits that
//! keep one sandbox from holding the host's resources.

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use super::ranges::DeniedRanges;
use super::target::{normalize_name, Host};

/// A configuration the egress cannot run with; the message says what to
/// write instead.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error(
        "environment.allow_hosts entry {entry:?}: {problem} (write a host name such as \
         mirror.example.org, a suffix such as *.example.org, or an IP address)"
    )]
    AllowHost {
        entry: String,
        problem: &'static str,
    },
    #[error("environment.upstream_proxy {url:?}: {problem}")]
    UpstreamProxy { url: String, problem: String },
    #[error("the egress's allowed ports are empty: nothing could be reached")]
    NoPorts,
    #[error("the egress's limit {0} is zero: nothing could be served")]
    ZeroLimit(&'static str),
    #[error("reading this host's own addresses (getifaddrs): {0}")]
    OwnAddresses(String),
}

/// One entry of `environment.allow_hosts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// A host name, matched case-insensitively, a trailing dot ignored.
    Exact(String),
    /// `*.example.org`: any name strictly below `example.org` (not
    /// `example.org` itself, which is its own entry). A registry that
    /// spreads downloads over numbered hosts needs it; two labels at least
    /// after the star, so `*.org` cannot open a whole top-level domain.
    Suffix(String),
    /// An IP address: a request naming this literal address is allowed
    /// (still subject to the denied ranges); a name resolving to it is not
    /// thereby allowed.
    Ip(IpAddr),
}

impl HostPattern {
    pub fn parse(entry: &str) -> Result<Self, PolicyError> {
        let problem = |problem| PolicyError::AllowHost {
            entry: entry.to_owned(),
            problem,
        };
        let trimmed = entry.trim();
        if trimmed.contains("://") || trimmed.contains('/') {
            return Err(problem("a host, not a URL: no scheme and no path"));
        }
        let unbracketed = trimmed
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or(trimmed);
        if let Ok(ip) = unbracketed.parse::<IpAddr>() {
            return Ok(HostPattern::Ip(ip));
        }
        if trimmed.contains(':') {
            return Err(problem(
                "no port: the egress's ports are a separate setting",
            ));
        }
        if let Some(suffix) = trimmed.strip_prefix("*.") {
            let suffix = normalize_name(suffix).ok_or_else(|| problem("not a valid host name"))?;
            if suffix.split('.').count() < 2 {
                return Err(problem("a suffix needs two labels at least after `*.`"));
            }
            return Ok(HostPattern::Suffix(suffix));
        }
        if trimmed.contains('*') {
            return Err(problem(
                "a star only as the first label, as in *.example.org",
            ));
        }
        normalize_name(trimmed)
            .map(HostPattern::Exact)
            .ok_or_else(|| problem("not a valid host name"))
    }

    fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (HostPattern::Exact(name), Host::Name(host)) => name == host,
            (HostPattern::Suffix(suffix), Host::Name(host)) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Ip(ip), Host::Ip(host)) => ip == host,
            _ => false,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Exact(name) => f.write_str(name),
            HostPattern::Suffix(suffix) => write!(f, "*.{suffix}"),
            HostPattern::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// `environment.allow_hosts`: the operator's list; empty allows nothing
/// (there is no built-in list).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowHosts {
    patterns: Vec<HostPattern>,
}

impl AllowHosts {
    pub fn parse<I, S>(entries: I) -> Result<Self, PolicyError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        // The operator's order, duplicates dropped: refusals list it.
        let mut patterns = Vec::new();
        for entry in entries {
            let entry = entry.as_ref();
            if entry.trim().is_empty() {
                continue;
            }
            let pattern = HostPattern::parse(entry)?;
            if !patterns.contains(&pattern) {
                patterns.push(pattern);
            }
        }
        Ok(AllowHosts { patterns })
    }

    pub fn allows(&self, host: &Host) -> bool {
        self.patterns.iter().any(|pattern| pattern.matches(host))
    }

    pub fn patterns(&self) -> &[HostPattern] {
        &self.patterns
    }
}

impl fmt::Display for AllowHosts {
    /// The list as a refusal shows it: the first entries, then a count, so
    /// that a long list does not bury the message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 20;
        if self.patterns.is_empty() {
            return f.write_str("none");
        }
        for (i, pattern) in self.patterns.iter().take(SHOWN).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{pattern}")?;
        }
        if self.patterns.len() > SHOWN {
            write!(f, " and {} more", self.patterns.len() - SHOWN)?;
        }
        Ok(())
    }
}

/// `environment.upstream_proxy`: an HTTP proxy the egress reaches the
/// registries through (CONNECT for HTTPS, absolute-form for plain HTTP).
/// It is the operator's own machine, usually on a private network, so its
/// address is not held to the denied ranges; and the origin's name is
/// resolved by it, not here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamProxy {
    pub host: String,
    pub port: u16,
}

impl UpstreamProxy {
    /// `http://host:port`. Credentials in the URL are refused: a secret
    /// never sits in a URL (it would be logged and shown).
    pub fn parse(raw: &str) -> Result<Self, PolicyError> {
        let problem = |problem: &str| PolicyError::UpstreamProxy {
            // Never echo what might hold a password.
            url: if raw.contains('@') {
                "(withheld: it holds credentials)".to_owned()
            } else {
                raw.to_owned()
            },
            problem: problem.to_owned(),
        };
        let url = url::Url::parse(raw.trim()).map_err(|e| problem(&e.to_string()))?;
        if url.scheme() != "http" {
            return Err(problem("only http://host:port proxies are supported"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(problem(
                "credentials in the URL are not supported (a secret never sits in a URL)",
            ));
        }
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(problem("write http://host:port, without a path"));
        }
        let host = match url.host() {
            Some(url::Host::Domain(name)) => name.to_owned(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => return Err(problem("no host")),
        };
        let port = url.port_or_known_default().unwrap_or(80);
        Ok(UpstreamProxy { host, port })
    }
}

/// The bounds on what one sandbox's traffic can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// A request head (request line and headers) larger than this is
    /// refused with 431; an upstream proxy's answer too.
    pub max_head_bytes: usize,
    /// Headers in one request head at most.
    pub max_headers: usize,
    /// The whole head must arrive within this, however it trickles in.
    pub head_timeout: Duration,
    /// Connections served at once (each a tunnel or a forwarded request
    /// to a registry, with its socket to the host). Package managers open
    /// many: npm 9 through a proxy opens a tunnel per request, and a
    /// tree's tarballs all at once.
    pub max_connections: usize,
    /// Connections beyond `max_connections` kept waiting, in order, for
    /// one to finish (accepted, nothing read yet: a socket each); beyond
    /// these, a connection is answered 503 at once. Waiting instead of
    /// refusing matters: a refused fetch is retried by npm and pip only
    /// after seconds of back-off.
    pub max_waiting: usize,
    /// The longest a connection waits for its turn before its 503.
    pub wait_timeout: Duration,
    /// A spliced connection with no byte either way for this long is
    /// closed (a client's keep-alive pool reconnects).
    pub idle_timeout: Duration,
    /// Resolving a name, and connecting to each address, within this.
    pub connect_timeout: Duration,
    /// Distinct (host, port, outcome) lines the summary keeps; further
    /// connections are only counted.
    pub max_records: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: 16 * 1024,
            max_headers: 64,
            head_timeout: Duration::from_secs(10),
            max_connections: 256,
            max_waiting: 1024,
            wait_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            max_records: 256,
        }
    }
}

/// Everything the egress decides by.
#[derive(Debug, Clone)]
pub struct Policy {
    pub allow_hosts: AllowHosts,
    /// Ports a request may name: 443 and 80 by default (HTTPS registries,
    /// Debian's plain-HTTP archive). A registry on another port is the
    /// operator's to add.
    pub allow_ports: BTreeSet<u16>,
    pub upstream: Option<UpstreamProxy>,
    pub denied: DeniedRanges,
    /// Whether the host's own addresses are denied too, read afresh by
    /// every egress made from this policy (an address the host gained
    /// since the policy was made counts).
    pub deny_own_addresses: bool,
    pub limits: Limits,
}

impl Policy {
    /// The operator's hosts, default ports, ranges (and the host's own
    /// addresses) and limits, no upstream.
    pub fn new(allow_hosts: AllowHosts) -> Self {
        Policy {
            allow_hosts,
            allow_ports: BTreeSet::from([80, 443]),
            upstream: None,
            denied: DeniedRanges::default(),
            deny_own_addresses: true,
            limits: Limits::default(),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), PolicyError> {
        if self.allow_ports.is_empty() {
            return Err(PolicyError::NoPorts);
        }
        let limits = &self.limits;
        for (name, value) in [
            ("max_head_bytes", limits.max_head_bytes),
            ("max_headers", limits.max_headers),
            ("max_connections", limits.max_connections),
            ("max_records", limits.max_records),
        ] {
            if value == 0 {
                return Err(PolicyError::ZeroLimit(name));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(host: &str) -> Host {
        Host::Name(host.to_owned())
    }

    #[test]
    fn exact_entries_match_case_insensitively_and_only_themselves() {
        let allow = AllowHosts::parse(["Mirror.Example.ORG.", "10.9.8.7", "[::2]"]).unwrap();
        assert!(allow.allows(&name("mirror.example.org")));
        assert!(!allow.allows(&name("x.mirror.example.org")));
        assert!(!allow.allows(&name("example.org")));
        assert!(!allow.allows(&name("mirror.example.org.evil.invalid")));
        assert!(allow.allows(&Host::Ip("10.9.8.7".parse().unwrap())));
        assert!(allow.allows(&Host::Ip("::2".parse().unwrap())));
        // A name is not an address, even one that reads like it.
        assert!(!allow.allows(&name("10.9.8.7.invalid")));
    }

    #[test]
    fn suffix_entries_match_names_strictly_below_them() {
        let allow = AllowHosts::parse(["*.cdn.example.org"]).unwrap();
        assert!(allow.allows(&name("a.cdn.example.org")));
        assert!(allow.allows(&name("a.b.cdn.example.org")));
        assert!(!allow.allows(&name("cdn.example.org")));
        assert!(!allow.allows(&name("evilcdn.example.org")));
        assert!(!allow.allows(&name(".cdn.example.org")));
    }

    #[test]
    fn entries_that_are_not_hosts_are_refused_with_what_to_write() {
        for (entry, problem) in [
            ("https://mirror.example.org/simple", "not a URL"),
            ("mirror.example.org:8080", "no port"),
            ("*.org", "two labels"),
            ("*", "a star only as the first label"),
            ("mirror.*.org", "a star only as the first label"),
            ("bad host", "not a valid host name"),
        ] {
            let error = AllowHosts::parse([entry]).unwrap_err().to_string();
            assert!(error.contains(problem), "{entry}: {error}");
            assert!(error.contains("write a host name"), "{error}");
        }
        assert_eq!(AllowHosts::parse(["", " "]).unwrap().patterns(), &[]);
    }

    #[test]
    fn a_long_list_is_shown_with_a_count() {
        let entries: Vec<String> = (0..25).map(|i| format!("h{i:02}.example.org")).collect();
        let shown = AllowHosts::parse(&entries).unwrap().to_string();
        assert!(
            shown.starts_with("h00.example.org, h01.example.org"),
            "{shown}"
        );
        assert!(shown.ends_with(" and 5 more"), "{shown}");
        assert_eq!(AllowHosts::default().to_string(), "none");
    }

    #[test]
    fn a_policy_that_could_serve_nothing_is_refused() {
        let mut policy = Policy::new(AllowHosts::default());
        assert_eq!(policy.validate(), Ok(()));
        policy.limits.max_connections = 0;
        assert_eq!(
            policy.validate(),
            Err(PolicyError::ZeroLimit("max_connections"))
        );
        policy.allow_ports.clear();
        assert_eq!(policy.validate(), Err(PolicyError::NoPorts));
    }

    #[test]
    fn upstream_proxy_urls_are_http_host_and_port_without_credentials() {
        assert_eq!(
            UpstreamProxy::parse("http://proxy.corp.invalid:3128").unwrap(),
            UpstreamProxy {
                host: "proxy.corp.invalid".into(),
                port: 3128
            }
        );
        assert_eq!(UpstreamProxy::parse("http://10.1.1.1/").unwrap().port, 80);
        let error = UpstreamProxy::parse("http://user:hunter2@proxy.invalid:3128")
            .unwrap_err()
            .to_string();
        assert!(error.contains("credentials"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
        assert!(UpstreamProxy::parse("https://proxy.invalid:3128").is_err());
        assert!(UpstreamProxy::parse("http://proxy.invalid:3128/path").is_err());
    }
}
