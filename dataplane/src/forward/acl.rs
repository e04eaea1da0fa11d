//! Who may use forwarding: a list of address prefixes. A node-local cache must not become an
//! open resolver on a cluster IP, so by default only loopback, link-local and private addresses
//! are served recursion; everyone else gets REFUSED for names outside the zones.

use crate::io::Peer;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An address prefix, `10.0.0.0/8` or `fd00::/8`; a bare address is a /32 or /128.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

/// Why a prefix could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an address prefix such as 10.0.0.0/8 or fd00::/8")]
pub struct PrefixError(String);

impl Prefix {
    /// The prefix of `addr` with `len` leading bits; `None` if `len` is too long for the family.
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (len <= max).then_some(Prefix { addr, len })
    }

    /// Whether `ip` lies in the prefix. IPv4-mapped IPv6 addresses count as IPv4.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => leading_match(
                u128::from(net.to_bits()) << 96,
                u128::from(ip.to_bits()) << 96,
                self.len,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => leading_match(net.to_bits(), ip.to_bits(), self.len),
            _ => false,
        }
    }
}

fn leading_match(a: u128, b: u128, len: u8) -> bool {
    len == 0 || (a ^ b) >> (128 - u32::from(len)) == 0
}

impl FromStr for Prefix {
    type Err = PrefixError;
    fn from_str(text: &str) -> Result<Prefix, PrefixError> {
        let err = || PrefixError(text.to_owned());
        let (addr, len) = match text.trim().split_once('/') {
            Some((addr, len)) => (addr, Some(len)),
            None => (text.trim(), None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| err())?;
        let len = match len {
            Some(len) => len.parse().map_err(|_| err())?,
            None if addr.is_ipv4() => 32,
            None => 128,
        };
        Prefix::new(addr, len).ok_or_else(err)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The recursion access list, checked on every query (its verdict also sets RA): kept as
/// network and mask per family, their bytes in network order read as native integers as a
/// socket address holds them ([`Peer::ip_raw`]), so that a check is a few integer comparisons
/// on the datagram's address as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    prefixes: Vec<Prefix>,
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

impl Acl {
    /// An access list of the given prefixes; empty allows nobody.
    pub fn new(prefixes: Vec<Prefix>) -> Acl {
        let mask32 = |len: u8| u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        let mask128 = |len: u8| u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for p in &prefixes {
            match p.addr {
                IpAddr::V4(net) => v4.push(((net.to_bits() & mask32(p.len)).to_be(), mask32(p.len).to_be())),
                IpAddr::V6(net) => v6.push(((net.to_bits() & mask128(p.len)).to_be(), mask128(p.len).to_be())),
            }
        }
        Acl { prefixes, v4, v6 }
    }

    /// Loopback, link-local and private ranges: 127.0.0.0/8, ::1, 169.254.0.0/16, fe80::/10,
    /// 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 (RFC 1918) and fc00::/7 (RFC 4193).
    pub fn private() -> Acl {
        let v4 = |a, b, len| Prefix {
            addr: IpAddr::V4(Ipv4Addr::new(a, b, 0, 0)),
            len,
        };
        let v6 = |addr: Ipv6Addr, len| Prefix {
            addr: IpAddr::V6(addr),
            len,
        };
        Acl::new(vec![
            v4(127, 0, 8),
            v6(Ipv6Addr::LOCALHOST, 128),
            v4(169, 254, 16),
            v6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),
            v4(10, 0, 8),
            v4(172, 16, 12),
            v4(192, 168, 16),
            v6(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),
        ])
    }

    /// Whether `ip` may use forwarding. IPv4-mapped IPv6 addresses count as IPv4.
    #[inline]
    pub fn allows(&self, ip: IpAddr) -> bool {
        match ip.to_canonical() {
            IpAddr::V4(ip) => self.allows_raw((u128::from(ip.to_bits().to_be()), true)),
            IpAddr::V6(ip) => self.allows_raw((ip.to_bits().to_be(), false)),
        }
    }

    /// [`Acl::allows`] of an address in [`Peer::ip_raw`]'s form: a datagram's sender read from
    /// its socket address without making an [`IpAddr`] of it.
    #[inline(always)]
    pub(crate) fn allows_raw(&self, (ip, v4): (u128, bool)) -> bool {
        if v4 {
            let ip = ip as u32;
            self.v4.iter().any(|&(net, mask)| ip & mask == net)
        } else {
            self.v6.iter().any(|&(net, mask)| ip & mask == net)
        }
    }

    /// The prefixes.
    pub fn prefixes(&self) -> &[Prefix] {
        &self.prefixes
    }
}

/// A worker's recursion ACL with its verdict on the last datagram's sender kept: the
/// datagrams of a turn mostly come from a few clients, often one (a node's resolver stub), so
/// most queries compare one address instead of walking the prefixes.
#[derive(Debug)]
pub(crate) struct Admission {
    acl: Acl,
    last: ((u128, bool), bool),
}

impl Admission {
    pub(crate) fn new(acl: Acl) -> Admission {
        let unspecified = (0, true);
        Admission {
            last: (unspecified, acl.allows_raw(unspecified)),
            acl,
        }
    }

    /// Whether the datagram's sender `peer` may use forwarding ([`Acl::allows_raw`]), the
    /// verdict remembered for the next datagram from the same address.
    #[inline(always)]
    pub(crate) fn allows_peer(&mut self, peer: &Peer) -> bool {
        let ip = peer.ip_raw();
        if ip != self.last.0 {
            self.last = (ip, self.acl.allows_raw(ip));
        }
        self.last.1
    }

    /// [`Acl::allows`], for a client on a stream.
    pub(crate) fn allows(&self, ip: IpAddr) -> bool {
        self.acl.allows(ip)
    }
}

impl Default for Acl {
    fn default() -> Acl {
        Acl::private()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_default_allows_loopback_link_local_and_private_addresses_only() {
        let acl = Acl::default();
        for allowed in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "169.254.20.10",
            "fe80::1",
            "10.1.2.3",
            "172.31.255.255",
            "192.168.0.1",
            "fd12::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(acl.allows(ip(allowed)), "{allowed}");
        }
        for denied in ["8.8.8.8", "172.32.0.1", "192.169.0.1", "2001:db8::1", "100.64.0.1"] {
            assert!(!acl.allows(ip(denied)), "{denied}");
        }
    }

    #[test]
    fn a_datagram_sender_is_judged_as_its_address_is() {
        let acl: Acl = Acl::new(
            ["10.20.0.0/16", "192.0.2.7", "fd00::/8", "2001:db8:1::/48"]
                .map(|p| p.parse().unwrap())
                .to_vec(),
        );
        for addr in [
            "10.20.3.4",
            "10.21.0.0",
            "192.0.2.7",
            "192.0.2.8",
            "fd12::1",
            "fe12::1",
            "2001:db8:1:ffff::1",
            "2001:db8:2::1",
            "::ffff:10.20.0.1",
            "::ffff:10.30.0.1",
            "127.0.0.1",
        ] {
            let peer = Peer::from(std::net::SocketAddr::new(ip(addr), 53));
            assert_eq!(acl.allows_raw(peer.ip_raw()), acl.allows(ip(addr)), "{addr}");
        }
        assert!(acl.allows_raw(Peer::from(std::net::SocketAddr::new(ip("::ffff:10.20.0.1"), 53)).ip_raw()));
        assert!(!acl.allows_raw(Peer::from(std::net::SocketAddr::new(ip("fe12::1"), 53)).ip_raw()));
    }

    #[test]
    fn the_remembered_verdict_follows_the_sender() {
        let acl = Acl::new(vec!["10.20.0.0/16".parse().unwrap(), "fd00::/8".parse().unwrap()]);
        let mut admission = Admission::new(acl.clone());
        let senders = [
            "10.20.3.4",
            "10.20.3.4",
            "10.21.0.0",
            "10.21.0.0",
            "10.20.3.4",
            "0.0.0.0",
            "::",
            "fd12::1",
            "::ffff:10.20.0.1",
            "::ffff:10.30.0.1",
            "fe12::1",
            "10.20.9.9",
        ];
        for addr in senders {
            let peer = Peer::from(std::net::SocketAddr::new(ip(addr), 53));
            assert_eq!(admission.allows_peer(&peer), acl.allows(ip(addr)), "{addr}");
            assert_eq!(admission.allows(ip(addr)), acl.allows(ip(addr)), "{addr}");
        }
        let everyone = Acl::new(vec!["0.0.0.0/0".parse().unwrap()]);
        let mut admission = Admission::new(everyone);
        let unspecified = Peer::from(std::net::SocketAddr::new(ip("0.0.0.0"), 53));
        assert!(
            admission.allows_peer(&unspecified),
            "the first verdict is the ACL's own"
        );
    }

    #[test]
    fn prefixes_parse_and_print() {
        let p: Prefix = "10.20.0.0/16".parse().unwrap();
        assert_eq!(p.to_string(), "10.20.0.0/16");
        assert!(p.contains(ip("10.20.3.4")) && !p.contains(ip("10.21.0.0")));
        let host: Prefix = "192.0.2.7".parse().unwrap();
        assert!(host.contains(ip("192.0.2.7")) && !host.contains(ip("192.0.2.8")));
        let all: Prefix = "::/0".parse().unwrap();
        assert!(all.contains(ip("2001:db8::1")) && !all.contains(ip("1.2.3.4")));
        for bad in ["10.0.0.0/33", "nope", "::/129", "1.2.3.4/x"] {
            assert!(bad.parse::<Prefix>().is_err(), "{bad}");
        }
    }

    #[test]
    fn an_empty_list_allows_nobody() {
        assert!(!Acl::new(vec![]).allows(ip("127.0.0.1")));
    }
}
