//! One record as the snapshot builder keeps it: the SkyDNS value interpreted once (host parsed,
//! defaults applied, text checked) so that answering many names from it costs no re-parsing.

use super::service::{Config, Service};
use crate::wire::Name;
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
}

/// Longest `text` whose TXT RDATA fits in 65535 bytes: each 255-byte chunk costs one length octet,
/// and a 255-multiple adds an empty string.
const MAX_TEXT_LEN: usize = 65535 / 256 * 255;

/// A typed record at its key.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The key as a path (see [`super::key`]).
    pub path: Box<[u8]>,
    /// Interpreted `host`.
    pub host: Host,
    /// TXT data; empty means no TXT.
    pub text: Box<str>,
    /// SRV port.
    pub port: u16,
    /// SRV priority / MX preference, the configured default already applied.
    pub priority: u16,
    /// SRV weight as stored; 0 counts as 100.
    pub weight: u16,
    /// Answers MX.
    pub mail: bool,
    /// TTL, the configured default already applied.
    pub ttl: u32,
    /// Labels stripped from SRV/MX targets; no name has 255 labels, so saturating keeps meaning.
    pub target_strip: u8,
    /// Interned `group`; 0 is no group.
    pub group: u32,
    /// Number of path components (SkyDNS compares slash counts, which differ by a constant).
    pub depth: u8,
    /// Hash of what the per-lookup dedup compares (SkyDNS drops a record whose
    /// `(host, port, priority, weight, text)` equals an earlier one of the same lookup, with the
    /// priority compared before its default is applied); [`Entry::same_record`] confirms a match.
    pub identity: u64,
    /// The key had upper-case letters: another key may fold to the same path.
    pub folded: bool,
}

impl Entry {
    /// Interprets `service` stored at `path` (from `key`). `group` is the interned group.
    pub fn new(key: &str, path: Vec<u8>, service: &Service, group: u32, config: &Config) -> Result<Entry, ValueError> {
        if service.text.len() > MAX_TEXT_LEN {
            return Err(ValueError::TextTooLong);
        }
        let depth = super::key::depth(&path).min(u8::MAX as usize) as u8;
        Ok(Entry {
            path: path.into_boxed_slice(),
            host: parse_host(&service.host)?,
            text: service.text.as_str().into(),
            port: service.port,
            priority: if service.priority == 0 {
                config.priority
            } else {
                service.priority
            },
            weight: service.weight,
            mail: service.mail,
            ttl: if service.ttl == 0 { config.ttl } else { service.ttl },
            target_strip: service.target_strip.min(u8::MAX as usize) as u8,
            group,
            depth,
            identity: identity(service),
            folded: key.bytes().any(|b| b.is_ascii_uppercase()),
        })
    }

    /// Whether the dedup counts `other` as the same record as this one.
    pub fn same_record(&self, other: &Entry) -> bool {
        self.identity == other.identity
            && self.host == other.host
            && self.port == other.port
            && self.priority == other.priority
            && self.weight == other.weight
            && self.text == other.text
    }

    /// The name of the key (SkyDNS `msg.Domain(key)`), the SRV/MX/NS target of address hosts.
    pub fn name(&self) -> Name {
        super::key::name_of(&self.path)
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

    #[test]
    fn defaults_apply_to_zero_priority_and_ttl() {
        let config = Config::default();
        let service = Service {
            host: "10.0.0.1".into(),
            ..Service::default()
        };
        let entry = Entry::new("/skydns/x", vec![1, b'x'], &service, 0, &config).unwrap();
        assert_eq!((entry.priority, entry.ttl), (config.priority, config.ttl));
    }

    #[test]
    fn text_too_long_for_one_record_is_rejected() {
        let config = Config::default();
        let service = Service {
            text: "a".repeat(MAX_TEXT_LEN + 1),
            ..Service::default()
        };
        assert_eq!(
            Entry::new("/skydns/x", vec![1, b'x'], &service, 0, &config).unwrap_err(),
            ValueError::TextTooLong
        );
    }
}
