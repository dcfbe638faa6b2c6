//! Where a request wants to go: the authority of a CONNECT, or the
//! host, port and path of an absolute-form `http://` request.
//!
//! Parsed strictly and by hand rather than with a lenient URL parser: a
//! host is ASCII letters, digits, `-`, `_` and dots, or a plain IP
//! address, and anything else (user-info, percent-escapes, backslashes,
//! short or octal IPv4 forms) is refused, so the name the policy checks is
//! the name that gets resolved.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A request's host: a normalized name, or an address written literally.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: Host,
    pub port: u16,
}

impl Target {
    /// `host:port` as a request line or `Host` header writes it.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// A host name lower-cased, one trailing dot dropped; `None` when it is
/// not a valid DNS name of ASCII labels.
pub(crate) fn normalize_name(raw: &str) -> Option<String> {
    let name = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
    let valid_label = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    (name.len() <= 253 && name.split('.').all(valid_label)).then_some(name)
}

fn parse_host(raw: &str) -> Result<Host, TargetError> {
    if let Some(inner) = raw.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(TargetError::BadHost)?;
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| Host::Ip(IpAddr::V6(ip)))
            .map_err(|_| TargetError::BadHost);
    }
    // std's IPv4 parser takes only four decimal parts: `127.1` and
    // `0x7f.0.0.1` stay names, which no allow-list entry matches and the
    // denied ranges still catch once resolved.
    if let Ok(ip) = raw.parse::<Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(ip)));
    }
    normalize_name(raw)
        .map(Host::Name)
        .ok_or(TargetError::BadHost)
}

/// Splits `host[:port]`, an IPv6 address in brackets.
fn split_authority(authority: &str) -> Result<(&str, Option<&str>), TargetError> {
    if authority.contains('@') {
        return Err(TargetError::UserInfo);
    }
    if authority.starts_with('[') {
        let end = authority.find(']').ok_or(TargetError::BadHost)?;
        let (host, rest) = authority.split_at(end + 1);
        return match rest {
            "" => Ok((host, None)),
            _ => rest
                .strip_prefix(':')
                .map(|port| (host, Some(port)))
                .ok_or(TargetError::BadHost),
        };
    }
    Ok(match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

fn parse_port(raw: &str) -> Result<u16, TargetError> {
    if raw.is_empty() || raw.len() > 5 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TargetError::BadPort);
    }
    match raw.parse::<u16>() {
        Ok(0) | Err(_) => Err(TargetError::BadPort),
        Ok(port) => Ok(port),
    }
}

/// A CONNECT request's target: `host:port`, the port required.
pub fn parse_connect_target(raw: &str) -> Result<Target, TargetError> {
    let (host, port) = split_authority(raw)?;
    let port = port.ok_or(TargetError::BadPort)?;
    Ok(Target {
        host: parse_host(host)?,
        port: parse_port(port)?,
    })
}

/// An absolute-form `http://host[:port]/path?query` request target: where
/// to connect, and the origin-form path to send there.
pub fn parse_absolute_form(raw: &str) -> Result<(Target, String), TargetError> {
    let scheme_len = "http://".len();
    let rest = match raw.get(..scheme_len) {
        Some(scheme) if scheme.eq_ignore_ascii_case("http://") => &raw[scheme_len..],
        _ if raw.starts_with('/') => return Err(TargetError::OriginForm),
        _ => return Err(TargetError::NotHttp),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let (host, port) = split_authority(authority)?;
    let port = port.map(parse_port).transpose()?.unwrap_or(80);
    // A fragment is the client's own; it never goes on the wire.
    let path = path.split('#').next().unwrap_or_default();
    let path = match path {
        "" => "/".to_owned(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_owned(),
    };
    Ok((
        Target {
            host: parse_host(host)?,
            port,
        },
        path,
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("not a valid host (ASCII names and IP addresses only)")]
    BadHost,
    #[error("not a valid port")]
    BadPort,
    #[error("user-info (name@host) is not accepted")]
    UserInfo,
    #[error(
        "this is a forward proxy: send the full URL (GET http://host/path) or CONNECT host:port"
    )]
    OriginForm,
    #[error("only http:// URLs are forwarded; for HTTPS use CONNECT")]
    NotHttp,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(host: &str, port: u16) -> Target {
        Target {
            host: Host::Name(host.into()),
            port,
        }
    }

    #[test]
    fn connect_targets_are_host_and_port() {
        assert_eq!(
            parse_connect_target("Mirror.Example.Org.:443"),
            Ok(name("mirror.example.org", 443))
        );
        assert_eq!(
            parse_connect_target("[::1]:8443").unwrap().host,
            Host::Ip("::1".parse().unwrap())
        );
        assert_eq!(
            parse_connect_target("10.0.0.1:443").unwrap().host,
            Host::Ip("10.0.0.1".parse().unwrap())
        );
        for bad in [
            "mirror.example.org",
            "mirror.example.org:",
            "mirror.example.org:0",
            "mirror.example.org:65536",
            "mirror.example.org:+443",
            "user@mirror.example.org:443",
            "mirror%2eexample.org:443",
            "[::1%eth0]:443",
            "[::1]443",
            "::1:443",
            "mirror.example.org:443:1",
            "-bad.example.org:443",
            "bad..example.org:443",
            "b\\ad.example.org:443",
        ] {
            assert!(parse_connect_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn short_and_octal_ipv4_forms_are_names_not_addresses() {
        assert_eq!(
            parse_connect_target("127.1:443").unwrap().host,
            Host::Name("127.1".into())
        );
        assert!(
            parse_connect_target("0x7f.0.0.1:443").is_ok_and(|t| matches!(t.host, Host::Name(_)))
        );
    }

    #[test]
    fn absolute_form_gives_the_origin_form_path() {
        assert_eq!(
            parse_absolute_form("http://mirror.example.org/debian/dists/x/Release"),
            Ok((
                name("mirror.example.org", 80),
                "/debian/dists/x/Release".into()
            ))
        );
        assert_eq!(
            parse_absolute_form("HTTP://mirror.example.org:8080?q=1#frag"),
            Ok((name("mirror.example.org", 8080), "/?q=1".into()))
        );
        assert_eq!(
            parse_absolute_form("http://[::1]"),
            Ok((
                Target {
                    host: Host::Ip("::1".parse().unwrap()),
                    port: 80
                },
                "/".into()
            ))
        );
        assert_eq!(parse_absolute_form("/path"), Err(TargetError::OriginForm));
        assert_eq!(
            parse_absolute_form("https://mirror.example.org/"),
            Err(TargetError::NotHttp)
        );
        assert_eq!(
            parse_absolute_form("http://allowed.example.org@evil.invalid/"),
            Err(TargetError::UserInfo)
        );
        assert_eq!(
            parse_absolute_form("http://evil.invalid\\@allowed.example.org/"),
            Err(TargetError::UserInfo)
        );
    }

    #[test]
    fn authority_is_written_back_with_brackets_for_ipv6() {
        let target = parse_connect_target("[::1]:443").unwrap();
        assert_eq!(target.authority(), "[::1]:443");
    }
}
