//! The address ranges the egress never connects to, each with a name the
//! refusal shows ("resolves to 10.0.0.5, a private (RFC 1918) address").
//!
//! A named list rather than a test of "is not global": some legitimate
//! mirrors and gateways answer from ranges a "global" test refuses (on the
//! project's own CI every registry name resolves into a documentation
//! range, behind a TLS-inspecting gateway; fake-IP proxies hand out
//! benchmarking addresses). What must never be reached is the host itself,
//! its private networks and the cloud's metadata services; those are
//! listed here by name. IPv6 forms that carry an IPv4 address (mapped,
//! translated, NAT64, 6to4, IPv4-compatible) are checked again as that
//! IPv4 address, since a dual-stack socket connecting to `::ffff:127.0.0.1`
//! reaches loopback.
//!
//! Beside the named ranges, the host's own addresses
//! ([`DeniedRanges::with_own_addresses`], read when an egress is made):
//! the host answers on each of them, whatever range it is in.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use serde::Serialize;

/// One range the egress refuses, with the phrase a refusal shows for it
/// ("a loopback address").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedRange {
    pub net: IpNet,
    pub name: String,
}

impl DeniedRange {
    /// `net` in CIDR form; `name` a noun phrase with its article.
    ///
    /// # Panics
    /// When `net` is not a CIDR range: the ranges are written in code.
    pub fn new(net: &str, name: &str) -> Self {
        DeniedRange {
            net: net.parse().expect("a range written in code is valid CIDR"),
            name: name.to_owned(),
        }
    }
}

/// The ordered list of denied ranges: the first range containing an
/// address names it, so specific entries (a metadata address) come before
/// the range around them (link-local).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedRanges {
    ranges: Vec<DeniedRange>,
}

impl Default for DeniedRanges {
    fn default() -> Self {
        let r = DeniedRange::new;
        DeniedRanges {
            ranges: vec![
                // IPv4
                r("0.0.0.0/8", "an unspecified ('this network') address"),
                r("127.0.0.0/8", "a loopback address"),
                r("10.0.0.0/8", "a private (RFC 1918) address"),
                r("172.16.0.0/12", "a private (RFC 1918) address"),
                r("192.168.0.0/16", "a private (RFC 1918) address"),
                r(
                    "169.254.169.254/32",
                    "a cloud metadata address (link-local)",
                ),
                r("169.254.0.0/16", "a link-local address"),
                r(
                    "100.100.100.200/32",
                    "a cloud metadata address (carrier-grade NAT range)",
                ),
                r("100.64.0.0/10", "a carrier-grade NAT (RFC 6598) address"),
                r(
                    "168.63.129.16/32",
                    "a cloud platform address (Azure's host endpoint)",
                ),
                r(
                    "192.0.0.0/24",
                    "an IETF protocol assignment (RFC 6890) address",
                ),
                r("224.0.0.0/4", "a multicast address"),
                r("240.0.0.0/4", "a reserved or broadcast address"),
                // IPv6
                r("::/128", "an unspecified address"),
                r("::1/128", "a loopback address"),
                r("fd00:ec2::254/128", "a cloud metadata address (IPv6)"),
                r("fc00::/7", "a unique-local (fc00::/7) address"),
                r("fe80::/10", "a link-local address"),
                r("fec0::/10", "a site-local (deprecated) address"),
                r("ff00::/8", "a multicast address"),
                r(
                    "64:ff9b:1::/48",
                    "a local-use NAT64 (RFC 8215) address, translated to an unknown IPv4 address",
                ),
                r("2001::/32", "a Teredo tunnel address"),
            ],
        }
    }
}

impl DeniedRanges {
    /// A list of one's own (tests whose servers listen on loopback).
    pub fn new(ranges: Vec<DeniedRange>) -> Self {
        DeniedRanges { ranges }
    }

    /// No range denied at all: only for tests.
    pub fn none() -> Self {
        DeniedRanges { ranges: Vec::new() }
    }

    /// This list without the ranges `drop` says to drop (the default list
    /// without loopback, for tests).
    pub fn without(mut self, drop: impl Fn(&DeniedRange) -> bool) -> Self {
        self.ranges.retain(|range| !drop(range));
        self
    }

    pub fn ranges(&self) -> &[DeniedRange] {
        &self.ranges
    }

    /// This list and each of `addresses` (the host's own) it does not
    /// already refuse, as [`OWN_ADDRESS`]. A service the host binds on
    /// all its addresses answers on each of them, and an address outside
    /// the named ranges (a public one, a documentation range) would reach
    /// it. Loopback addresses are left to the named loopback range: a
    /// list without it (a test's, whose servers listen there) means to
    /// reach them.
    pub fn with_own_addresses(mut self, addresses: impl IntoIterator<Item = IpAddr>) -> Self {
        for address in addresses {
            if address.is_loopback() || self.check(address).is_err() {
                continue;
            }
            let net = IpNet::from(address);
            self.ranges.push(DeniedRange {
                net,
                name: OWN_ADDRESS.to_owned(),
            });
        }
        self
    }

    /// Whether `address` may be connected to; if not, which range it is in.
    pub fn check(&self, address: IpAddr) -> Result<(), DeniedAddress> {
        if let Some(range) = self.find(address) {
            return Err(DeniedAddress {
                address,
                embedded: None,
                range: range.name.clone(),
            });
        }
        if let IpAddr::V6(v6) = address {
            if let Some((form, v4)) = embedded_ipv4(v6) {
                if let Some(range) = self.find(IpAddr::V4(v4)) {
                    return Err(DeniedAddress {
                        address,
                        embedded: Some(EmbeddedIpv4 { form, address: v4 }),
                        range: range.name.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    fn find(&self, address: IpAddr) -> Option<&DeniedRange> {
        self.ranges
            .iter()
            .find(|range| range.net.contains(&address))
    }
}

/// The name a refusal gives an address of the host's own interfaces.
pub const OWN_ADDRESS: &str = "one of this host's own addresses";

/// Every address of this host's interfaces (`getifaddrs`), in the
/// network namespace the egress connects from.
pub fn own_addresses() -> std::io::Result<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut addresses = Vec::new();
    let mut next = head;
    while !next.is_null() {
        // SAFETY: a node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*next };
        if !entry.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family says
            // which sockaddr it is.
            unsafe {
                match i32::from((*entry.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let v4 = &*(entry.ifa_addr as *const libc::sockaddr_in);
                        addresses
                            .push(IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))));
                    }
                    libc::AF_INET6 => {
                        let v6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                        addresses.push(IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
        }
        next = entry.ifa_next;
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(head) };
    addresses.sort();
    addresses.dedup();
    Ok(addresses)
}

/// An address the egress refused to connect to, and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct DeniedAddress {
    pub address: IpAddr,
    /// The IPv4 address an IPv6 form carries, when that is what is denied.
    pub embedded: Option<EmbeddedIpv4>,
    /// The denied range's name ("a loopback address").
    pub range: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct EmbeddedIpv4 {
    pub form: &'static str,
    pub address: Ipv4Addr,
}

impl fmt::Display for DeniedAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.embedded {
            None => write!(f, "{}, {}", self.address, self.range),
            Some(embedded) => write!(
                f,
                "{} ({} of {}), {}",
                self.address, embedded.form, embedded.address, self.range
            ),
        }
    }
}

/// The IPv4 address an IPv6 address stands for, where it stands for one,
/// with the name of the form.
fn embedded_ipv4(v6: Ipv6Addr) -> Option<(&'static str, Ipv4Addr)> {
    let s = v6.segments();
    let last32 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(("an IPv4-mapped form", last32)),
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(("an IPv4-translated form", last32)),
        [0, 0, 0, 0, 0, 0, _, _] => Some(("an IPv4-compatible form", last32)),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(("a NAT64 form", last32)),
        [0x2002, hi, lo, ..] => Some((
            "a 6to4 form",
            Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(address: &str) -> String {
        DeniedRanges::default()
            .check(address.parse().unwrap())
            .expect_err(address)
            .to_string()
    }

    #[test]
    fn each_kind_of_address_the_host_must_not_reach_is_refused_by_name() {
        let cases = [
            ("127.0.0.1", "127.0.0.1, a loopback address"),
            ("127.255.0.9", "a loopback address"),
            ("10.0.0.5", "10.0.0.5, a private (RFC 1918) address"),
            ("172.31.255.1", "a private (RFC 1918) address"),
            ("192.168.1.1", "a private (RFC 1918) address"),
            ("169.254.169.254", "a cloud metadata address"),
            ("169.254.0.23", "a link-local address"),
            ("100.64.0.1", "a carrier-grade NAT"),
            ("100.100.100.200", "a cloud metadata address"),
            ("168.63.129.16", "Azure"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("::", "an unspecified address"),
            ("::1", "::1, a loopback address"),
            ("fd00:ec2::254", "a cloud metadata address (IPv6)"),
            ("fd12:3456::1", "unique-local"),
            ("fc00::1", "unique-local"),
            ("fe80::1", "a link-local address"),
            ("64:ff9b:1::1", "local-use NAT64"),
            (
                "::ffff:127.0.0.1",
                "::ffff:127.0.0.1 (an IPv4-mapped form of 127.0.0.1), a loopback address",
            ),
            ("::ffff:10.1.2.3", "a private (RFC 1918) address"),
            ("::ffff:169.254.169.254", "a cloud metadata address"),
            ("64:ff9b::a00:1", "a NAT64 form of 10.0.0.1"),
            ("2002:c0a8:0101::1", "a 6to4 form of 192.168.1.1"),
            ("::7f00:1", "an IPv4-compatible form of 127.0.0.1"),
            ("::ffff:0:a00:1", "an IPv4-translated form of 10.0.0.1"),
        ];
        for (address, expected) in cases {
            let message = refused(address);
            assert!(
                message.contains(expected),
                "{address}: {message:?} lacks {expected:?}"
            );
        }
    }

    #[test]
    fn public_and_documentation_addresses_are_not_refused() {
        // Not a "global" test: this machine's registries answer from a
        // documentation range, which must pass.
        for address in [
            "203.0.113.80",
            "198.18.0.1",
            "8.8.8.8",
            "2a00:1450::1",
            "::ffff:203.0.113.80",
            "64:ff9b::cb00:7150",
            "2002:cb00:7150::1",
        ] {
            assert_eq!(
                DeniedRanges::default().check(address.parse().unwrap()),
                Ok(()),
                "{address}"
            );
        }
    }

    /// Red-team F8: the host's own addresses outside the named ranges
    /// are refused by that name; those inside keep their range's name.
    #[test]
    fn the_hosts_own_addresses_are_refused_by_name() {
        let own: Vec<IpAddr> = [
            "192.0.2.2",
            "203.0.113.9",
            "2a00:1450::7",
            "127.0.0.1",
            "::1",
            "10.88.0.1",
            "fd00::2",
            "fe80::1",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let ranges = DeniedRanges::default().with_own_addresses(own.clone());
        let refused = |address: &str| {
            ranges
                .check(address.parse().unwrap())
                .expect_err(address)
                .to_string()
        };
        assert_eq!(
            refused("192.0.2.2"),
            "192.0.2.2, one of this host's own addresses"
        );
        assert_eq!(
            refused("::ffff:203.0.113.9"),
            "::ffff:203.0.113.9 (an IPv4-mapped form of 203.0.113.9), one of this host's own addresses"
        );
        assert!(refused("2a00:1450::7").ends_with(OWN_ADDRESS));
        assert!(refused("127.0.0.1").ends_with("a loopback address"));
        assert!(refused("10.88.0.1").ends_with("a private (RFC 1918) address"));
        assert!(refused("fd00::2").ends_with("unique-local (fc00::/7) address"));
        // Only the addresses themselves: their neighbours are not the host.
        assert_eq!(ranges.check("192.0.2.3".parse().unwrap()), Ok(()));
        // Those in a named range got no entry of their own.
        assert_eq!(
            ranges.ranges().len(),
            DeniedRanges::default().ranges().len() + 3
        );
        // A list without loopback (a test's) still lets loopback through.
        let without = DeniedRanges::default()
            .without(|range| range.net.contains(&IpAddr::from([127, 0, 0, 1])))
            .with_own_addresses(own);
        assert_eq!(without.check("127.0.0.1".parse().unwrap()), Ok(()));
        assert!(without.check("192.0.2.2".parse().unwrap()).is_err());
    }

    #[test]
    fn this_hosts_own_addresses_are_read() {
        let own = own_addresses().unwrap();
        assert!(
            own.contains(&IpAddr::from([127, 0, 0, 1])),
            "loopback is one of them: {own:?}"
        );
    }

    #[test]
    fn a_list_without_loopback_lets_loopback_through_but_keeps_the_rest() {
        let ranges = DeniedRanges::default()
            .without(|range| range.net.contains(&IpAddr::from([127, 0, 0, 1])));
        assert_eq!(ranges.check("127.0.0.1".parse().unwrap()), Ok(()));
        assert!(ranges.check("10.0.0.1".parse().unwrap()).is_err());
        assert!(DeniedRanges::none()
            .check("10.0.0.1".parse().unwrap())
            .is_ok());
    }
}
