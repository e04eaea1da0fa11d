//! The SkyDNS record value (`msg.Service`), typed, and what else a key may hold: a view map of
//! such records, or the marker a `.wildcards` key is. Parsing from JSON happens in the control
//! plane; the values here are already checked for type, but not yet interpreted.

use crate::snapshot::views::Prefix;
use crate::wire::Name;

/// One SkyDNS record as stored under an etcd key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Service {
    /// IPv4 → A, IPv6 → AAAA, anything else is a domain name (CNAME, SRV/MX target).
    /// Empty: the record serves only its TXT.
    pub host: String,
    /// SRV port.
    pub port: u16,
    /// SRV priority / MX preference; 0 means the configured default.
    pub priority: u16,
    /// SRV relative weight; 0 counts as 100.
    pub weight: u16,
    /// TXT data; empty means no TXT.
    pub text: String,
    /// Also answer MX.
    pub mail: bool,
    /// Record TTL in seconds; 0 means unset. Sources fold a lease's remaining TTL in beforehand.
    pub ttl: u32,
    /// Labels stripped from the left of SRV/MX targets.
    pub target_strip: usize,
    /// Group filter (see SkyDNS `msg.Group`).
    pub group: String,
}

/// Whose list a key of a view map names (docs/skydns-semantics.md, "Views").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ViewKey {
    /// `default`: the clients no prefix of the map holds.
    Default,
    /// The clients of a prefix, unless a longer prefix of the map holds them.
    Prefix(Prefix),
}

/// What a source keeps under one key, interpreted no further than JSON allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// One record.
    Record(Service),
    /// A view map: lists of records by whom they are for, in the order of the map, no key twice.
    Views(Vec<(ViewKey, Vec<Service>)>),
    /// What a `.wildcards` key holds, which is never read: the key marks its directory.
    Marker,
}

impl From<Service> for Value {
    fn from(service: Service) -> Value {
        Value::Record(service)
    }
}

/// SkyDNS settings that shape answers (the `/skydns/config` keys and their flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The authoritative domain (`skydns.local.`).
    pub domain: Name,
    /// First path element of every key (`skydns`).
    pub path_prefix: String,
    /// Default TTL, and the cap applied to answers with several records.
    pub ttl: u32,
    /// TTL of the SOA in negative answers.
    pub min_ttl: u32,
    /// Default SRV priority / MX preference.
    pub priority: u16,
    /// SOA RNAME.
    pub hostmaster: Name,
    /// Name whose records `local.dns.<domain>` serves.
    pub local: Option<Name>,
    /// Rotate address answers.
    pub round_robin: bool,
    /// A directory answers with the records below it, and `*`/`any` queries below it match,
    /// only when it holds a `.wildcards` key (`--wildcards-marker`).
    pub wildcards_marker: bool,
    /// Answer a name whose records point to host names with SkyDNS's CNAME chain
    /// (`--cname-chains`) instead of the targets' addresses at the query name. A chain beside the
    /// name's SRV, MX and TXT records is what a cache then follows for every type (RFC 2181
    /// §10.1), so it suits only clients that ask directly and read the chain.
    pub cname_chains: bool,
    /// Pass a name of the domain without records on (forwarded, or REFUSED without
    /// forwarding) instead of NXDOMAIN (`--fallthrough`, CoreDNS etcd `fallthrough`): the
    /// domain's zone is then one skyline holds some names of, as a reverse zone, and its
    /// answers carry AA=0.
    pub fallthrough: bool,
    /// Sign the domain (`--dnssec`): its answers to queries with DO set carry RRSIGs and
    /// NSEC3 denials (docs/dnssec.md).
    pub dnssec: Option<crate::dnssec::Dnssec>,
}

impl Default for Config {
    fn default() -> Config {
        let domain = Name::from_dotted("skydns.local.").expect("static name");
        Config {
            hostmaster: domain.prepend("hostmaster").expect("static name"),
            domain,
            path_prefix: "skydns".into(),
            ttl: 3600,
            min_ttl: 60,
            priority: 10,
            local: None,
            round_robin: true,
            wildcards_marker: false,
            cname_chains: false,
            fallthrough: false,
            dnssec: None,
        }
    }
}
