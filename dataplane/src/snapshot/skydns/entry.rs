//! One record as the source keeps it and the snapshot builder reads it: the SkyDNS value
//! interpreted once (host parsed, text checked) so that answering many names from it costs no
//! re-parsing, in as few bytes as it takes, since a source holds every record while it runs.

use super::key::{cmp_keys, owner, KeyKind, KeyPath};
use super::service::{Service, Value, ViewKey};
use crate::wire::Name;
use std::cmp::Ordering;
use std::hash::BuildHasher;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The `host` field, interpreted as SkyDNS does with `net.ParseIP`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// No host: the record serves only its TXT.
    None,
    /// IPv4 (IPv4-mapped IPv6 counts as IPv4): A records.
    V4(Ipv4Addr),
    /// IPv6: AAAA records.
    V6(Ipv6Addr),
    /// Anything else: a CNAME target for address queries, an SRV/MX target.
    Name(Name),
}

/// Why a record value cannot serve at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// `host` is neither an address nor a domain name.
    #[error("host is neither an IP address nor a domain name")]
    BadHost,
    /// `text` does not fit the 65535 bytes of one TXT record's data.
    #[error("text too long for one TXT record")]
    TextTooLong,
    /// The marker a `.wildcards` key holds, at a key that holds records.
    #[error("a .wildcards marker at a key that is not a .wildcards key")]
    Marker,
}

/// Longest `text` whose TXT RDATA fits in 65535 bytes: each 255-byte chunk costs one length octet,
/// and a 255-multiple adds an empty string.
pub const MAX_TEXT_LEN: usize = 65535 / 256 * 255;

/// How an entry keeps its host: an IPv4 address inline, an IPv6 address or a name (in wire
/// form) in the entry's data, so that the entry itself stays small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HostKind {
    /// No host.
    None,
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// An IPv6 address: its 16 bytes in the data.
    V6,
    /// A name: its wire form in the data.
    Name,
}

/// Bytes an entry keeps inside itself: the entry is then 72 bytes, which with the `Arc`'s
/// counters and the allocator's header fills a 96-byte chunk; a separate allocation would cost
/// at least 32 more.
const INLINE: usize = 38;

/// An entry's bytes, inside it up to [`INLINE`] bytes, on the heap beyond; and the lists of a
/// view map, whose bytes are always on the heap, in the same place as a long run's, so that
/// reading the bytes costs no more than with two kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Data {
    /// The length, and the bytes followed by zeros.
    Inline(u8, [u8; INLINE]),
    /// Longer runs.
    Heap(Box<[u8]>),
    /// The bytes of a view map's entry, and its lists.
    Views(Box<[u8]>, Box<[ViewList]>),
}

/// One list of a view map (docs/skydns-semantics.md, "Views"): whom it is for, and its records,
/// each an entry of the view map's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ViewList {
    /// `default` or a prefix.
    pub key: ViewKey,
    /// The records, in the order of the list.
    pub records: Box<[Entry]>,
    /// Their TTLs as stored, which a lease's remaining TTL caps (see [`Entry::set_ttl`]).
    stored_ttls: Box<[u32]>,
}

impl Data {
    /// The concatenation of `parts`.
    fn new(parts: &[&[u8]]) -> Data {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > INLINE {
            return Data::Heap(parts.concat().into_boxed_slice());
        }
        let mut bytes = [0; INLINE];
        let mut at = 0;
        for part in parts {
            bytes[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        Data::Inline(len as u8, bytes)
    }

    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Inline(len, bytes) => &bytes[..*len as usize],
            Data::Heap(bytes) | Data::Views(bytes, _) => bytes,
        }
    }
}

/// A typed record at its key, as the source that watches the records keeps it and as every
/// snapshot's index shares it: the value is interpreted once, when it is put, and exists once
/// however many snapshots hold it. It depends on no setting but the key prefix, so that a change
/// of the settings builds again from the same records; the defaults apply where it answers.
///
/// The key's path, the host when longer than an IPv4 address, the text and the group are one
/// run of bytes, kept inside the entry when short: a record of the common shape (an IPv4
/// address, a port, a key path of up to 38 bytes) is one allocation of 96 bytes with its `Arc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The path of the key (see [`super::key`]), lower-cased; then the path as written when the
    /// key had upper-case letters; then an IPv6 address or a name host; then the text; then the
    /// group.
    data: Data,
    /// Hash of what the per-lookup dedup compares (SkyDNS drops a record whose
    /// `(host, port, priority, weight, text)` equals an earlier one of the same lookup, with the
    /// priority compared before its default is applied); [`Entry::same_record`] confirms a match.
    pub(super) identity: u64,
    /// TTL as stored (a lease's remaining TTL folded in); 0 is the configured default.
    ttl: u32,
    /// Length of the text in `data`; a TXT record holds less than 65536 bytes.
    text_len: u16,
    /// SRV port.
    pub(super) port: u16,
    /// SRV priority / MX preference as stored; 0 is the configured default.
    priority: u16,
    /// SRV weight as stored; 0 counts as 100.
    pub(super) weight: u16,
    /// Interpreted `host`.
    pub(super) host: HostKind,
    /// Length of the path in `data`; no path is longer than a name's 255 bytes.
    path_len: u8,
    /// Length of the host in `data`: 16 for IPv6, a name's wire form (at most 255 bytes).
    host_len: u8,
    /// Labels stripped from SRV/MX targets; no name has 255 labels, so saturating keeps meaning.
    pub(super) target_strip: u8,
    /// Number of path components (SkyDNS compares slash counts, which differ by a constant).
    pub(super) depth: u8,
    /// Answers MX.
    pub(super) mail: bool,
    /// The key had upper-case letters: another key may fold to the same path.
    pub(super) folded: bool,
    /// What the key is: a name's, a `.self` or a `.wildcards` key.
    pub(super) kind: KeyKind,
}

impl Entry {
    /// Interprets `value` stored at `key`. A `.wildcards` key makes a marker, whatever it holds.
    pub fn of(key: &KeyPath, value: &Value) -> Result<Entry, ValueError> {
        match value {
            _ if key.kind() == KeyKind::Wildcards => Entry::new(key, &Service::default()),
            Value::Record(service) => Entry::new(key, service),
            Value::Views(lists) => Entry::with_views(key, lists),
            Value::Marker => Err(ValueError::Marker),
        }
    }

    /// Interprets the view map `lists` stored at `key`: an entry without a record of its own,
    /// holding each list's records as entries of the same key.
    fn with_views(key: &KeyPath, lists: &[(ViewKey, Vec<Service>)]) -> Result<Entry, ValueError> {
        let mut views = Vec::with_capacity(lists.len());
        for (view, services) in lists {
            let records = services.iter().map(|service| Entry::new(key, service));
            views.push(ViewList {
                key: *view,
                records: records.collect::<Result<_, _>>()?,
                stored_ttls: services.iter().map(|service| service.ttl).collect(),
            });
        }
        let mut entry = Entry::new(key, &Service::default())?;
        if entry.kind != KeyKind::Wildcards {
            entry.data = Data::Views(entry.data.bytes().into(), views.into_boxed_slice());
        }
        Ok(entry)
    }

    /// Interprets `service` stored at `key`. A `.wildcards` key makes a marker, whatever the
    /// service says.
    pub fn new(key: &KeyPath, service: &Service) -> Result<Entry, ValueError> {
        let nothing = Service::default();
        let service = match key.kind() {
            KeyKind::Wildcards => &nothing,
            KeyKind::Name | KeyKind::Own => service,
        };
        if service.text.len() > MAX_TEXT_LEN {
            return Err(ValueError::TextTooLong);
        }
        let parsed = parse_host(&service.host)?;
        let v6;
        let (host, host_bytes): (HostKind, &[u8]) = match &parsed {
            Host::None => (HostKind::None, &[]),
            Host::V4(ip) => (HostKind::V4(*ip), &[]),
            Host::V6(ip) => {
                v6 = ip.octets();
                (HostKind::V6, &v6)
            }
            Host::Name(name) => (HostKind::Name, name.wire()),
        };
        let path = key.path();
        let folded = key.written() != path;
        let written: &[u8] = if folded { key.written() } else { &[] };
        let data = Data::new(&[
            path,
            written,
            host_bytes,
            service.text.as_bytes(),
            service.group.as_bytes(),
        ]);
        Ok(Entry {
            data,
            host,
            identity: identity(service),
            ttl: service.ttl,
            text_len: service.text.len() as u16,
            port: service.port,
            priority: service.priority,
            weight: service.weight,
            path_len: path.len() as u8,
            host_len: host_bytes.len() as u8,
            target_strip: service.target_strip.min(u8::MAX as usize) as u8,
            depth: super::key::depth(owner(path, key.kind())).min(u8::MAX as usize) as u8,
            mail: service.mail,
            folded,
            kind: key.kind(),
        })
    }

    /// The path of the name the record answers for: its key's path, less the last component
    /// of a `.self` key.
    #[inline]
    pub(super) fn owner(&self) -> &[u8] {
        owner(self.path(), self.kind)
    }

    /// The lists of a view map; none for any other entry.
    #[inline]
    pub(super) fn views(&self) -> &[ViewList] {
        match &self.data {
            Data::Views(_, views) => views,
            Data::Inline(..) | Data::Heap(_) => &[],
        }
    }

    /// Whether the entry holds a view map.
    #[inline]
    pub fn has_views(&self) -> bool {
        matches!(self.data, Data::Views(..))
    }

    /// What the key holds, as a value [`Entry::of`] makes an equal entry of again (see
    /// [`Entry::service`]).
    pub fn value(&self) -> Value {
        if self.kind == KeyKind::Wildcards {
            return Value::Marker;
        }
        if !self.has_views() {
            return Value::Record(self.service());
        }
        let lists = self.views().iter();
        Value::Views(
            lists
                .map(|list| (list.key, list.records.iter().map(Entry::service).collect()))
                .collect(),
        )
    }

    /// The path of the name the record belongs to, lower-cased.
    #[inline(always)]
    pub fn path(&self) -> &[u8] {
        &self.data.bytes()[..self.path_len as usize]
    }

    /// The length of [`Entry::path`], without reading the data.
    #[inline(always)]
    pub(super) fn path_len(&self) -> usize {
        self.path_len as usize
    }

    /// The path as the key writes it.
    fn written(&self) -> &[u8] {
        match self.folded {
            true => &self.data.bytes()[self.path_len as usize..2 * self.path_len as usize],
            false => self.path(),
        }
    }

    fn host_start(&self) -> usize {
        self.path_len as usize * (1 + self.folded as usize)
    }

    /// The IPv6 address or the name's wire form of the host; empty for the others.
    fn host_bytes(&self) -> &[u8] {
        let start = self.host_start();
        &self.data.bytes()[start..start + self.host_len as usize]
    }

    fn text_start(&self) -> usize {
        self.host_start() + self.host_len as usize
    }

    /// TXT data; empty means no TXT.
    pub fn text(&self) -> &[u8] {
        let start = self.text_start();
        &self.data.bytes()[start..start + self.text_len as usize]
    }

    /// The `group`; empty means no group.
    pub fn group(&self) -> &[u8] {
        &self.data.bytes()[self.text_start() + self.text_len as usize..]
    }

    /// The interpreted `host`; a name is made from its wire form.
    pub fn host(&self) -> Host {
        match self.host {
            HostKind::None => Host::None,
            HostKind::V4(ip) => Host::V4(ip),
            HostKind::V6 => {
                Host::V6(<[u8; 16]>::try_from(self.host_bytes()).map_or(Ipv6Addr::UNSPECIFIED, Ipv6Addr::from))
            }
            HostKind::Name => Host::Name(Name::from_wire(self.host_bytes()).unwrap_or_else(|_| Name::root())),
        }
    }

    /// The wire form of a name host.
    pub(super) fn host_name(&self) -> Option<&[u8]> {
        (self.host == HostKind::Name).then(|| self.host_bytes())
    }

    /// SRV port (0 when the record has none).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// TTL as stored; 0 means the configured default.
    pub fn ttl(&self) -> u32 {
        self.ttl
    }

    /// Sets the TTL, for a record whose lease counts it down. A view map's records take it as
    /// the TTL a key's record without one of its own takes, and a cap on the TTL they have; 0
    /// gives them theirs back.
    pub fn set_ttl(&mut self, ttl: u32) {
        self.ttl = ttl;
        if let Data::Views(_, lists) = &mut self.data {
            for list in lists.iter_mut() {
                for (record, &stored) in list.records.iter_mut().zip(list.stored_ttls.iter()) {
                    record.ttl = match (stored, ttl) {
                        (_, 0) => stored,
                        (0, lease) => lease,
                        (stored, lease) => stored.min(lease),
                    };
                }
            }
        }
    }

    /// TTL, `default` when the record sets none.
    pub(super) fn ttl_or(&self, default: u32) -> u32 {
        if self.ttl == 0 {
            default
        } else {
            self.ttl
        }
    }

    /// SRV priority / MX preference, `default` when the record sets none.
    pub(super) fn priority_or(&self, default: u16) -> u16 {
        if self.priority == 0 {
            default
        } else {
            self.priority
        }
    }

    /// The key the record is stored at, below `/<prefix>/`.
    pub fn key(&self, prefix: &str) -> String {
        let mut key = format!("/{prefix}");
        let mut components: Vec<&[u8]> = super::key::components(self.written()).collect();
        if self.kind == KeyKind::Wildcards && !components.is_empty() {
            components.rotate_left(1);
        }
        for component in components {
            key.push('/');
            key.push_str(&String::from_utf8_lossy(component));
        }
        key
    }

    /// The record as a value [`Entry::new`] makes an equal entry of again, so that a source can
    /// write its records out and read them back (the persisted snapshot). The host is written in
    /// its canonical form (a name lower-cased and absolute, an IPv4-mapped address as IPv4), so
    /// the dedup identity of a host written otherwise differs: two records of one name whose
    /// hosts differed only in such spelling are then one.
    pub fn service(&self) -> Service {
        let host = match self.host() {
            Host::None => String::new(),
            Host::V4(ip) => ip.to_string(),
            Host::V6(ip) => ip.to_string(),
            Host::Name(name) => name.to_string(),
        };
        Service {
            host,
            port: self.port,
            priority: self.priority,
            weight: self.weight,
            text: String::from_utf8_lossy(self.text()).into_owned(),
            mail: self.mail,
            ttl: self.ttl,
            target_strip: usize::from(self.target_strip),
            group: String::from_utf8_lossy(self.group()).into_owned(),
        }
    }

    /// The order of records (see [`super::key::cmp_keys`]): the source keeps its records in it,
    /// which is the order the index needs, so a build never sorts.
    pub fn cmp_order(&self, other: &Entry) -> Ordering {
        cmp_keys(self.path(), self.written(), other.path(), other.written())
    }

    /// Where the record at `key` sorts against this one, for a binary search by key.
    pub fn cmp_key(&self, key: &KeyPath) -> Ordering {
        cmp_keys(self.path(), self.written(), key.path(), key.written())
    }

    /// Whether the dedup counts `other` as the same record as this one.
    pub fn same_record(&self, other: &Entry) -> bool {
        self.identity == other.identity
            && self.host == other.host
            && self.host_bytes() == other.host_bytes()
            && self.port == other.port
            && self.priority == other.priority
            && self.weight == other.weight
            && self.text() == other.text()
    }

    /// The name of the key (SkyDNS `msg.Domain(key)`), the SRV/MX/NS target of address hosts;
    /// a `.self` key's is its directory's.
    pub fn name(&self) -> Name {
        super::key::name_of(self.owner())
    }
}

/// The dedup's hash of a value: its host as written, port, priority before the default,
/// weight and text. Fixed seed: entries of different builds are compared.
fn identity(service: &Service) -> u64 {
    let fields = (
        service.host.as_str(),
        service.port,
        service.priority,
        service.weight,
        service.text.as_str(),
    );
    foldhash::fast::FixedState::with_seed(0x5eed_0fd5_d0d0).hash_one(fields)
}

/// `net.ParseIP` first, then a domain name.
pub fn parse_host(host: &str) -> Result<Host, ValueError> {
    if host.is_empty() {
        return Ok(Host::None);
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => Ok(Host::V4(ip)),
        Ok(IpAddr::V6(ip)) => Ok(ip.to_ipv4_mapped().map_or(Host::V6(ip), Host::V4)),
        Err(_) => Name::from_dotted(host).map(Host::Name).map_err(|_| ValueError::BadHost),
    }
}

/// SkyDNS `split255`: chunks of 255 bytes, and an empty string after a 255-byte multiple.
pub fn split255(text: &[u8]) -> Vec<Box<[u8]>> {
    if text.len() < 255 {
        return vec![text.into()];
    }
    let mut chunks: Vec<Box<[u8]>> = text.chunks(255).map(Into::into).collect();
    if text.len().is_multiple_of(255) {
        chunks.push(Box::new([]));
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_addresses_first_then_names() {
        assert_eq!(parse_host("10.0.0.1"), Ok(Host::V4(Ipv4Addr::new(10, 0, 0, 1))));
        assert_eq!(parse_host("::ffff:10.0.0.1"), Ok(Host::V4(Ipv4Addr::new(10, 0, 0, 1))));
        assert_eq!(parse_host("2001:db8::1"), Ok(Host::V6("2001:db8::1".parse().unwrap())));
        assert_eq!(
            parse_host("Web.Example.org"),
            Ok(Host::Name(Name::from_dotted("web.example.org.").unwrap()))
        );
        assert_eq!(parse_host(""), Ok(Host::None));
        assert_eq!(parse_host("a..b"), Err(ValueError::BadHost));
    }

    #[test]
    fn an_entry_fits_96_bytes_of_heap_in_its_arc() {
        // The Arc's two counters and the entry, with the allocator's 8-byte header, round to 96.
        assert!(std::mem::size_of::<Entry>() <= 72);
    }

    #[test]
    fn short_and_long_data_read_back_alike() {
        for len in [0, INLINE - 1, INLINE, INLINE + 1, 300] {
            let text = "x".repeat(len);
            let service = Service {
                text: text.clone(),
                group: "g".into(),
                ..Service::default()
            };
            let entry = Entry::new(&key("/skydns/a"), &service).unwrap();
            assert_eq!(
                (entry.path(), entry.text(), entry.group()),
                (&b"\x01a"[..], text.as_bytes(), &b"g"[..])
            );
        }
    }

    #[test]
    fn long_hosts_read_back_from_the_data() {
        for host in ["2001:db8::1", "web.example.org", ""] {
            let service = Service {
                host: host.into(),
                text: "t".into(),
                group: "g".into(),
                ..Service::default()
            };
            let entry = Entry::new(&key("/skydns/test/Web"), &service).unwrap();
            assert_eq!(entry.host(), parse_host(host).unwrap());
            assert_eq!((entry.text(), entry.group()), (&b"t"[..], &b"g"[..]));
            assert_eq!(entry.host_name().is_some(), host.contains('.'));
        }
    }

    #[test]
    fn text_of_255_bytes_splits_into_a_full_string_and_an_empty_one() {
        let chunks = split255(&[b'a'; 255]);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].len(), 255);
        assert!(chunks[1].is_empty());
    }

    #[test]
    fn text_shorter_than_255_bytes_stays_whole_and_longer_text_is_cut() {
        assert_eq!(split255(b"hello").len(), 1);
        let chunks = split255(&[b'a'; 300]);
        assert_eq!(chunks.iter().map(|c| c.len()).collect::<Vec<_>>(), [255, 45]);
        assert_eq!(
            split255(&[b'a'; 510]).iter().map(|c| c.len()).collect::<Vec<_>>(),
            [255, 255, 0]
        );
    }

    fn key(key: &str) -> KeyPath {
        KeyPath::parse(key, "skydns").unwrap().unwrap()
    }

    #[test]
    fn defaults_apply_to_zero_priority_and_ttl() {
        let service = Service {
            host: "10.0.0.1".into(),
            ..Service::default()
        };
        let entry = Entry::new(&key("/skydns/x"), &service).unwrap();
        assert_eq!((entry.priority_or(10), entry.ttl_or(3600)), (10, 3600));
        let set = Service {
            priority: 5,
            ttl: 30,
            ..service
        };
        let entry = Entry::new(&key("/skydns/x"), &set).unwrap();
        assert_eq!((entry.priority_or(10), entry.ttl_or(3600)), (5, 30));
    }

    #[test]
    fn a_record_written_out_as_its_service_reads_back_equal() {
        for service in [
            Service {
                host: "10.0.0.1".into(),
                port: 80,
                priority: 5,
                weight: 7,
                text: "hello".into(),
                mail: true,
                ttl: 30,
                target_strip: 2,
                group: "g1".into(),
            },
            Service {
                host: "2001:db8::1".into(),
                ..Service::default()
            },
            Service {
                host: "web.example.org.".into(),
                text: "x".repeat(300),
                ..Service::default()
            },
            Service::default(),
        ] {
            let entry = Entry::new(&key("/skydns/test/Web"), &service).unwrap();
            assert_eq!(entry.service(), service);
            let again = Entry::new(&key(&entry.key("skydns")), &entry.service()).unwrap();
            assert_eq!(again, entry);
        }
    }

    #[test]
    fn text_too_long_for_one_record_is_rejected() {
        let service = Service {
            text: "a".repeat(MAX_TEXT_LEN + 1),
            ..Service::default()
        };
        assert_eq!(
            Entry::new(&key("/skydns/x"), &service).unwrap_err(),
            ValueError::TextTooLong
        );
    }

    #[test]
    fn the_key_text_and_group_share_one_allocation_and_read_back() {
        let service = Service {
            host: "10.0.0.1".into(),
            text: "hello".into(),
            group: "g1".into(),
            ..Service::default()
        };
        let entry = Entry::new(&key("/skydns/test/Web"), &service).unwrap();
        assert_eq!(entry.path(), b"\x04test\x03web");
        assert_eq!((entry.text(), entry.group()), (&b"hello"[..], &b"g1"[..]));
        assert_eq!(entry.host(), Host::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(entry.key("skydns"), "/skydns/test/Web");
        assert!(entry.folded);
        let lower = Entry::new(&key("/skydns/test/web"), &Service::default()).unwrap();
        assert_eq!((lower.text(), lower.group()), (&b""[..], &b""[..]));
        assert_eq!(lower.key("skydns"), "/skydns/test/web");
        assert_eq!(
            entry.cmp_order(&lower),
            Ordering::Less,
            "upper case sorts first, as in the keys"
        );
        assert_eq!(lower.cmp_key(&key("/skydns/test/web")), Ordering::Equal);
    }

    #[test]
    fn a_lease_caps_the_records_of_a_view_map_and_gives_them_back() {
        let record = |ttl: u32| Service {
            host: "10.0.0.1".into(),
            ttl,
            ..Service::default()
        };
        let value = Value::Views(vec![(ViewKey::Default, vec![record(0), record(30)])]);
        let mut entry = Entry::of(&key("/skydns/test/.self"), &value).unwrap();
        assert_eq!(entry.value(), value);
        assert_eq!(entry.name().to_string(), "test.");
        let ttls = |e: &Entry| -> Vec<u32> { e.views()[0].records.iter().map(Entry::ttl).collect() };
        entry.set_ttl(10);
        assert_eq!(ttls(&entry), [10, 10]);
        entry.set_ttl(60);
        assert_eq!(ttls(&entry), [60, 30]);
        entry.set_ttl(0);
        assert_eq!(ttls(&entry), [0, 30]);
        assert_eq!(entry.value(), value);
    }

    #[test]
    fn a_wildcards_key_is_a_marker_whatever_it_holds() {
        let at = key("/skydns/test/Dir/.WildCards");
        let marker = Entry::of(&at, &Value::Record(Service::default())).unwrap();
        assert_eq!(marker.value(), Value::Marker);
        assert_eq!(marker.key("skydns"), "/skydns/test/Dir/.WildCards");
        assert_eq!(marker.name().to_string(), "dir.test.");
        assert_eq!(
            Entry::of(&key("/skydns/test/dir"), &Value::Marker),
            Err(ValueError::Marker)
        );
    }
}
