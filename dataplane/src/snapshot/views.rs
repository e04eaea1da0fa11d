//! Answers that depend on who asks (SkyDNS views, docs/skydns-semantics.md, "Views"): a name
//! whose records hold view maps keeps, besides the answers every client gets, the answers of
//! each class of clients for the types where they differ, and a table of the prefixes that tell
//! the classes apart.
//!
//! Which list of a view map a client gets depends only on the longest of the map's prefixes
//! that holds the client's address. For a name, take every prefix of every view map its answers
//! read: two clients whose longest match among those prefixes is the same prefix (or who match
//! none) get the same answers. So the builder compiles one set of answers per prefix, and one for
//! the clients no prefix holds, and the answer path finds a client's class with one walk over
//! the table, longest prefix first, and its answer at the class's row and the type's column.

use super::rrset::CompiledAnswer;
use super::Slot;
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

/// The column of a type no class answers apart.
const NO_COLUMN: u8 = u8::MAX;

/// The answers of each class of clients of one name for the types where classes differ, and
/// the table that finds a client's class: what [`super::Node::views`] holds for a name whose
/// answers depend on the client.
#[derive(Debug, PartialEq, Eq)]
pub struct Views {
    /// The IPv4 prefixes, longest first, so that the first one holding a client is its longest
    /// match: a client's address masked is the network. The class of row `i` is `i + 1`.
    v4: Box<[(u32, u32)]>,
    /// The IPv6 prefixes, longest first; their classes follow the IPv4 ones'.
    v6: Box<[(u128, u128)]>,
    /// Each slot's column in `answers`, [`NO_COLUMN`] for those no class answers apart.
    columns: [u8; Slot::COUNT],
    /// Columns, the types classes answer apart.
    width: usize,
    /// The answers, class by class, the class of the clients no prefix holds first.
    answers: Box<[Option<CompiledAnswer>]>,
    /// By class, in the order of `answers`, whether the name is not this server's to answer to
    /// its clients: a reverse name whose view map selects several records for them, which are no
    /// PTR answer (docs/skydns-semantics.md, "Reverse names"). Empty when no class is.
    passed_on: Box<[bool]>,
}

/// Answers of one class, by slot.
pub type ClassAnswers = [Option<CompiledAnswer>; Slot::COUNT];

impl Views {
    /// The table of `classes`, each prefix with the answers its clients get, in the slots
    /// `apart` (those where classes differ); `others` are the answers of the clients none of the
    /// prefixes holds.
    pub fn new(apart: &[Slot], others: ClassAnswers, classes: Vec<(Prefix, ClassAnswers)>) -> Views {
        let mut classes = classes;
        classes.sort_by(|(a, _), (b, _)| {
            let family = |p: &Prefix| p.addr.is_ipv6();
            family(a).cmp(&family(b)).then(b.len.cmp(&a.len)).then_with(|| a.cmp(b))
        });
        let mut columns = [NO_COLUMN; Slot::COUNT];
        for (column, slot) in apart.iter().enumerate() {
            columns[*slot as usize] = column as u8;
        }
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        let mut answers = Vec::with_capacity((classes.len() + 1) * apart.len());
        let mut row = |answered: ClassAnswers| {
            let mut answered = answered;
            answers.extend(apart.iter().map(|slot| answered[*slot as usize].take()));
        };
        row(others);
        for (prefix, answered) in classes {
            let (net, width) = bits_of(prefix.addr);
            let mask = mask(prefix.len, width);
            match prefix.addr {
                IpAddr::V4(_) => v4.push((net as u32, mask as u32)),
                IpAddr::V6(_) => v6.push((net, mask)),
            }
            row(answered);
        }
        Views {
            v4: v4.into_boxed_slice(),
            v6: v6.into_boxed_slice(),
            columns,
            width: apart.len(),
            answers: answers.into_boxed_slice(),
            passed_on: Box::default(),
        }
    }

    /// These views, the name passed on to the clients of each class for which `passed_on` says
    /// so: it is asked of `None`, the clients no prefix holds, and of each prefix.
    pub fn passing_on(self, passed_on: impl Fn(Option<Prefix>) -> bool) -> Views {
        let classes: Box<[bool]> = std::iter::once(None)
            .chain(self.prefixes().map(Some))
            .map(passed_on)
            .collect();
        Views {
            passed_on: match classes.contains(&true) {
                true => classes,
                false => Box::default(),
            },
            ..self
        }
    }

    /// Whether the name is passed on to `client` as one this server does not hold (see
    /// [`Self::passing_on`]). For the answer path, where a name with views had no answer.
    pub fn passes_on(&self, client: IpAddr) -> bool {
        !self.passed_on.is_empty() && self.passed_on.get(self.class(client)) == Some(&true)
    }

    /// The answer `client` gets for `slot`, if the classes answer it apart and the client's
    /// class has one. Allocation-free, for the answer path.
    #[inline]
    pub fn answer(&self, slot: Slot, client: IpAddr) -> Option<&CompiledAnswer> {
        let column = self.columns[slot as usize];
        if column == NO_COLUMN {
            return None;
        }
        match client {
            IpAddr::V4(v4) => self.cell(self.class_v4(u32::from(v4)), column),
            IpAddr::V6(v6) => self.answer_v6(v6, column),
        }
    }

    /// The answer of `class` in `column`.
    #[inline]
    fn cell(&self, class: usize, column: u8) -> Option<&CompiledAnswer> {
        self.answers.get(class * self.width + usize::from(column))?.as_ref()
    }

    /// The class of the IPv4 client `bits`.
    #[inline]
    fn class_v4(&self, bits: u32) -> usize {
        let rows = &self.v4;
        let mut row = 0;
        while row < rows.len() {
            let (net, mask) = rows[row];
            row += 1;
            if bits & mask == net {
                return row;
            }
        }
        0
    }

    /// The answer in `column` of the IPv6 client `v6`, an IPv4-mapped one as IPv4: out of the
    /// way of the IPv4 clients, who are most.
    #[inline(never)]
    fn answer_v6(&self, v6: Ipv6Addr, column: u8) -> Option<&CompiledAnswer> {
        if let Some(v4) = v6.to_ipv4_mapped() {
            return self.cell(self.class_v4(u32::from(v4)), column);
        }
        let bits = u128::from(v6);
        let row = self.v6.iter().position(|&(net, mask)| bits & mask == net);
        self.cell(row.map_or(0, |row| self.v4.len() + row + 1), column)
    }

    /// The class of `client`: 0 for the clients no prefix holds, else one past the row of its
    /// longest matching prefix. Allocation-free, for the answer path of signed answers, which
    /// are made per class when the snapshot is built.
    #[inline]
    pub fn class(&self, client: IpAddr) -> usize {
        match client {
            IpAddr::V4(v4) => self.class_v4(u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => self.class_v4(u32::from(v4)),
                None => {
                    let bits = u128::from(v6);
                    let row = self.v6.iter().position(|&(net, mask)| bits & mask == net);
                    row.map_or(0, |row| self.v4.len() + row + 1)
                }
            },
        }
    }

    /// For each class, in order, an address of a client it holds; `None` for a class no
    /// address falls in (a prefix wholly covered by longer ones). What the signer asks as, to
    /// sign each class's answers.
    pub fn members(&self) -> Vec<Option<IpAddr>> {
        let v4: Vec<(u128, u128)> = self.v4.iter().map(|&(n, m)| (u128::from(n), u128::from(m))).collect();
        let as_v4 = |bits: u128| IpAddr::V4(Ipv4Addr::from(bits as u32));
        let as_v6 = |bits: u128| IpAddr::V6(Ipv6Addr::from(bits));
        let others = member(&v4, u128::from(u32::MAX), 0, u128::from(u32::MAX), None)
            .map(as_v4)
            .or_else(|| member(&self.v6, u128::MAX, 0, u128::MAX, None).map(as_v6));
        let mut members = vec![others];
        for (row, &(net, mask)) in v4.iter().enumerate() {
            let last = net | (!mask & u128::from(u32::MAX));
            members.push(member(&v4, u128::from(u32::MAX), net, last, Some(row)).map(as_v4));
        }
        for (row, &(net, mask)) in self.v6.iter().enumerate() {
            members.push(member(&self.v6, u128::MAX, net, net | !mask, Some(row)).map(as_v6));
        }
        members
            .into_iter()
            .enumerate()
            .map(|(class, addr)| addr.filter(|addr| self.class(*addr) == class))
            .collect()
    }

    /// The slots classes answer apart, for tests.
    #[cfg(test)]
    pub(crate) fn apart(&self) -> impl Iterator<Item = Slot> + '_ {
        Slot::ALL
            .into_iter()
            .filter(|slot| self.columns[*slot as usize] != NO_COLUMN)
    }

    /// The prefixes, IPv4 ones first, each longest first: the classes after the first, in order.
    pub(crate) fn prefixes(&self) -> impl Iterator<Item = Prefix> + '_ {
        let prefix = |addr: IpAddr, mask: u128| Prefix {
            addr,
            len: mask.count_ones() as u8,
        };
        let v4 = self
            .v4
            .iter()
            .map(move |&(net, mask)| prefix(IpAddr::V4(Ipv4Addr::from(net)), u128::from(mask)));
        let v6 = self
            .v6
            .iter()
            .map(move |&(net, mask)| prefix(IpAddr::V6(Ipv6Addr::from(net)), mask));
        v4.chain(v6)
    }
}

/// The first address from `first` to `last` whose first match in `rows` (network and mask,
/// longest prefix first, within `all` bits) is row `want` (`None`: no row): past each row that
/// matches instead, the search goes on after that row's last address.
fn member(rows: &[(u128, u128)], all: u128, first: u128, last: u128, want: Option<usize>) -> Option<u128> {
    let mut addr = first;
    loop {
        let hit = rows.iter().position(|&(net, mask)| addr & mask == net);
        if hit == want {
            return Some(addr);
        }
        let (net, mask) = rows[hit?];
        let end = net | (!mask & all);
        if end >= last {
            return None;
        }
        addr = end + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_client_gets_the_answer_of_its_longest_matching_prefix() {
        let answer = |last: u8| {
            let mut answers: ClassAnswers = [const { None }; Slot::COUNT];
            answers[Slot::A as usize] = Some(crate::snapshot::tests::answer(last));
            answers
        };
        let views = Views::new(
            &[Slot::A],
            answer(0),
            vec![
                (prefix("10.0.0.0/8"), answer(8)),
                (prefix("2001:db8::/32"), answer(32)),
                (prefix("10.1.0.0/16"), answer(16)),
            ],
        );
        let of = |client: &str| -> u8 {
            let compiled = views.answer(Slot::A, client.parse().unwrap()).unwrap();
            *compiled.bytes().last().unwrap()
        };
        assert_eq!(of("10.1.2.3"), 16);
        let members = views.members();
        assert_eq!(members.len(), 4);
        for (class, member) in members.iter().enumerate() {
            assert_eq!(views.class(member.unwrap()), class, "{member:?}");
        }
        assert_eq!(views.members()[1], Some("10.1.0.0".parse().unwrap()));
        assert_eq!(views.members()[2], Some("10.0.0.0".parse().unwrap()));
        assert_eq!(of("10.2.2.3"), 8);
        assert_eq!(of("::ffff:10.2.2.3"), 8);
        assert_eq!(of("11.0.0.1"), 0);
        assert_eq!(of("2001:db8::5"), 32);
        assert_eq!(of("2001:db9::5"), 0);
        assert!(views.answer(Slot::Txt, "10.1.2.3".parse().unwrap()).is_none());
        let prefixes: Vec<String> = views.prefixes().map(|p| p.to_string()).collect();
        assert_eq!(prefixes, ["10.1.0.0/16", "10.0.0.0/8", "2001:db8::/32"]);
        assert_eq!(views.apart().collect::<Vec<_>>(), [Slot::A]);
    }
}
