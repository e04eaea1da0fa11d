//! Answers that depend on who asks (SkyDNS views, docs/skydns-semantics.md, "Views"): a name
//! whose records hold view maps keeps, besides the answers every client gets, one node per class
//! of clients, and a table of the prefixes that tell the classes apart.
//!
//! Which list of a view map a client gets depends only on the longest of the map's prefixes
//! that holds the client's address. For a name, take every prefix of every view map its answers
//! read: two clients whose longest match among those prefixes is the same prefix (or who match
//! none) get the same answers. So the builder compiles one set of answers per prefix, and one for
//! the clients no prefix holds, and the answer path finds a client's class with one walk over
//! the table, longest prefix first.

use super::Node;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IP prefix: the addresses whose first `len` bits are those of its address. An IPv4-mapped
/// IPv6 prefix is kept as the IPv4 prefix it covers, as a client's mapped address is read as
/// IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

/// Why a view map's key is not a prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PrefixError {
    /// No `/length` after the address.
    #[error("no /length after the address")]
    NoLength,
    /// The part before the slash is not an IP address.
    #[error("not an IP address before the slash")]
    BadAddress,
    /// The length is not a number of bits the address has.
    #[error("the length is not a number of bits of the address (0-32 for IPv4, 0-128 for IPv6)")]
    BadLength,
}

/// The bits of a prefix of `len` bits of a 32- or 128-bit address, as a mask on a `u128`.
fn mask(len: u8, bits: u8) -> u128 {
    let ones = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    ones >> (128 - u32::from(bits))
}

impl Prefix {
    /// The prefix of `len` bits of `addr`; the bits past `len` are cleared, as `net.ParseCIDR`
    /// gives the network of `10.0.0.1/8`.
    pub fn new(addr: IpAddr, len: u8) -> Result<Prefix, PrefixError> {
        let (addr, len) = match addr {
            IpAddr::V6(v6) => match (v6.to_ipv4_mapped(), len.checked_sub(96)) {
                (Some(v4), Some(len)) => (IpAddr::V4(v4), len),
                _ => (addr, len),
            },
            IpAddr::V4(_) => (addr, len),
        };
        let (bits, width) = bits_of(addr);
        if len > width {
            return Err(PrefixError::BadLength);
        }
        let net = bits & mask(len, width);
        let addr = match addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(net as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(net)),
        };
        Ok(Prefix { addr, len })
    }

    /// The prefix holding `addr` alone: what a client's address is, as a class.
    pub fn host(addr: IpAddr) -> Prefix {
        let addr = client(addr);
        Prefix {
            len: bits_of(addr).1,
            addr,
        }
    }

    /// The address, its bits past the length cleared.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The number of leading bits that count.
    pub fn length(&self) -> u8 {
        self.len
    }

    /// Whether every address of `other` is one of this prefix's.
    pub fn covers(&self, other: &Prefix) -> bool {
        let ((mine, width), (theirs, other_width)) = (bits_of(self.addr), bits_of(other.addr));
        width == other_width && self.len <= other.len && theirs & mask(self.len, width) == mine
    }
}

/// A client's address as the views read it: an IPv4-mapped IPv6 address is IPv4.
fn client(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        IpAddr::V4(_) => addr,
    }
}

/// An address's bits, low-aligned, and how many it has.
fn bits_of(addr: IpAddr) -> (u128, u8) {
    match addr {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

impl FromStr for Prefix {
    type Err = PrefixError;

    /// `10.0.0.0/8`, `2001:db8::/32`: an address, a slash, a length in bits.
    fn from_str(text: &str) -> Result<Prefix, PrefixError> {
        let (addr, len) = text.split_once('/').ok_or(PrefixError::NoLength)?;
        let addr: IpAddr = addr.parse().map_err(|_| PrefixError::BadAddress)?;
        let digits = !len.is_empty() && len.len() <= 3 && len.bytes().all(|b| b.is_ascii_digit());
        let len: u8 = len.parse().ok().filter(|_| digits).ok_or(PrefixError::BadLength)?;
        Prefix::new(addr, len)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// One row of the table: a prefix as the answer path tests it, and its class.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    /// IPv4 (the low 32 bits count) or IPv6.
    v4: bool,
    net: u128,
    mask: u128,
    class: u16,
}

/// The nodes answering each class of clients of one name, and the table that finds a client's
/// class: what [`Node::views`] holds for a name whose answers depend on the client.
#[derive(Debug, PartialEq, Eq)]
pub struct Views {
    /// Longest prefix first, so that the first row holding a client is its longest match.
    rows: Box<[Row]>,
    /// The class of clients no prefix holds first, then one per row's class.
    classes: Box<[Node]>,
}

impl Views {
    /// The table of `classes`, each prefix with the node its clients get; `others` answers the
    /// clients none of the prefixes holds.
    pub fn new(others: Node, classes: Vec<(Prefix, Node)>) -> Views {
        let mut classes = classes;
        classes.sort_by(|(a, _), (b, _)| b.len.cmp(&a.len).then_with(|| a.cmp(b)));
        let rows = classes
            .iter()
            .enumerate()
            .map(|(i, (prefix, _))| {
                let (net, width) = bits_of(prefix.addr);
                Row {
                    v4: width == 32,
                    net,
                    mask: mask(prefix.len, width),
                    class: (i + 1) as u16,
                }
            })
            .collect();
        let classes = std::iter::once(others).chain(classes.into_iter().map(|(_, node)| node));
        Views {
            rows,
            classes: classes.collect(),
        }
    }

    /// The node answering `client`. Allocation-free, for the answer path.
    #[inline]
    pub fn node_for(&self, client: IpAddr) -> &Node {
        let (bits, width) = bits_of(self::client(client));
        let v4 = width == 32;
        let class = self
            .rows
            .iter()
            .find(|row| row.v4 == v4 && bits & row.mask == row.net)
            .map_or(0, |row| usize::from(row.class));
        &self.classes[class]
    }

    /// The prefixes, longest first, each with the node its clients get; then the node of the
    /// clients no prefix holds. For tests and tools.
    pub fn classes(&self) -> (impl Iterator<Item = (Prefix, &Node)>, &Node) {
        let rows = self.rows.iter().map(|row| {
            let addr = match row.v4 {
                true => IpAddr::V4(Ipv4Addr::from(row.net as u32)),
                false => IpAddr::V6(Ipv6Addr::from(row.net)),
            };
            let len = row.mask.count_ones() as u8;
            (Prefix { addr, len }, &self.classes[usize::from(row.class)])
        });
        (rows, &self.classes[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Below;

    fn prefix(text: &str) -> Prefix {
        text.parse().unwrap()
    }

    #[test]
    fn prefixes_parse_and_clear_their_host_bits() {
        assert_eq!(prefix("10.1.2.3/8").to_string(), "10.0.0.0/8");
        assert_eq!(prefix("2001:db8::1/32").to_string(), "2001:db8::/32");
        assert_eq!(prefix("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert_eq!(prefix("::ffff:10.1.0.0/112").to_string(), "10.1.0.0/16");
        assert_eq!(prefix("10.0.0.1/32").to_string(), "10.0.0.1/32");
        for (text, error) in [
            ("10.0.0.0", PrefixError::NoLength),
            ("default", PrefixError::NoLength),
            ("10.0.0/8", PrefixError::BadAddress),
            ("web/8", PrefixError::BadAddress),
            ("10.0.0.0/33", PrefixError::BadLength),
            ("::/129", PrefixError::BadLength),
            ("10.0.0.0/", PrefixError::BadLength),
            ("10.0.0.0/+8", PrefixError::BadLength),
            ("10.0.0.0/ 8", PrefixError::BadLength),
        ] {
            assert_eq!(text.parse::<Prefix>(), Err(error), "{text}");
        }
    }

    #[test]
    fn a_prefix_covers_the_longer_prefixes_inside_it_of_its_family() {
        assert!(prefix("10.0.0.0/8").covers(&prefix("10.1.0.0/16")));
        assert!(prefix("10.0.0.0/8").covers(&prefix("10.0.0.0/8")));
        assert!(!prefix("10.1.0.0/16").covers(&prefix("10.0.0.0/8")));
        assert!(!prefix("10.0.0.0/8").covers(&prefix("11.0.0.0/16")));
        assert!(prefix("0.0.0.0/0").covers(&Prefix::host("192.0.2.1".parse().unwrap())));
        assert!(!prefix("::/0").covers(&Prefix::host("192.0.2.1".parse().unwrap())));
        assert!(prefix("0.0.0.0/0").covers(&Prefix::host("::ffff:192.0.2.1".parse().unwrap())));
    }

    #[test]
    fn a_client_gets_the_node_of_its_longest_matching_prefix() {
        let node = |zone: u16| Node::new(zone, Below::Nothing);
        let views = Views::new(
            node(0),
            vec![
                (prefix("10.0.0.0/8"), node(8)),
                (prefix("10.1.0.0/16"), node(16)),
                (prefix("2001:db8::/32"), node(32)),
            ],
        );
        let zone = |client: &str| views.node_for(client.parse().unwrap()).zone();
        assert_eq!(zone("10.1.2.3"), 16);
        assert_eq!(zone("10.2.2.3"), 8);
        assert_eq!(zone("::ffff:10.2.2.3"), 8);
        assert_eq!(zone("11.0.0.1"), 0);
        assert_eq!(zone("2001:db8::5"), 32);
        assert_eq!(zone("2001:db9::5"), 0);
        let (rows, others) = views.classes();
        let rows: Vec<(String, u16)> = rows.map(|(p, n)| (p.to_string(), n.zone())).collect();
        assert_eq!(
            rows,
            [
                ("2001:db8::/32".to_string(), 32),
                ("10.1.0.0/16".to_string(), 16),
                ("10.0.0.0/8".to_string(), 8)
            ]
        );
        assert_eq!(others.zone(), 0);
    }
}
