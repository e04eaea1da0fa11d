//! The SkyDNS record value (`msg.Service`), typed. Parsing from JSON happens in the control plane;
//! the values here are already checked for type, but not yet interpreted.

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
        }
    }
}
