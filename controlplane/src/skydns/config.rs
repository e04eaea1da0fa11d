//! SkyDNS's settings object, the JSON under `/<prefix>/config`, as a partial configuration.
//!
//! Each key is optional: a [`ConfigPatch`] says only what one layer (the JSON in the store, the
//! operator's flags and files) sets, and layers are stacked with [`ConfigPatch::or`]. SkyDNS fills
//! zero values with its defaults (`server/config.go: SetDefaults`), so a zero `ttl`, an empty
//! `domain` or an empty `nameservers` list here means "not set", not "zero".
//!
//! Keys are decoded like Go's `encoding/json` into SkyDNS's `server.Config` (case-insensitive,
//! unknown keys ignored, wrong types rejected), and values are checked: addresses must be
//! `IP:port`, names must be valid domain names.

use super::json::{self, JsonError};
use super::names;
use serde_json::Value;
use skyline_dataplane::dnssec::{Dnssec, SigningKey, DEFAULT_CACHE};
use skyline_dataplane::snapshot::skydns::Config;
use skyline_dataplane::wire::Name;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Where SkyDNS listens when nothing says otherwise.
pub const DEFAULT_DNS_ADDR: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 53);

/// Labels a name needs before it is forwarded (SkyDNS `ndots`).
pub const DEFAULT_NDOTS: u32 = 2;

/// The JSON keys of `server.Config` (`Etcd3` has no tag and so matches `etcd3` in any case).
const KEYS: &[&str] = &[
    "dns_addr",
    "systemd",
    "domain",
    "local",
    "hostmaster",
    "dnssec",
    "round_robin",
    "ns_rotate",
    "nameservers",
    "no_rec",
    "read_timeout",
    "priority",
    "ttl",
    "min_ttl",
    "scache",
    "rcache",
    "rcache_ttl",
    "ndot",
    "etcd3",
];

/// Why a configuration could not be read or resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Not a JSON object of the config schema (syntax, type or range error).
    #[error(transparent)]
    Json(#[from] JsonError),
    /// An address that is not `IP:port`.
    #[error("{key}: {value:?} is not an IP:port address")]
    BadAddress {
        /// The setting.
        key: &'static str,
        /// The value as written.
        value: String,
    },
    /// A name that is not a valid domain name.
    #[error("{key}: {value:?} is not a valid domain name: {reason}")]
    BadName {
        /// The setting.
        key: &'static str,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The DNSSEC key pair cannot sign the domain.
    #[error("dnssec: {keybase}: {source}")]
    Dnssec {
        /// The key base name as given.
        keybase: String,
        /// What is wrong.
        source: skyline_dataplane::dnssec::KeyError,
    },
}

/// The settings one layer of configuration sets; `None` leaves the key to the layers below.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigPatch {
    /// Listen address for DNS over UDP and TCP (`dns_addr`).
    pub dns_addr: Option<SocketAddr>,
    /// Use systemd socket activation (`systemd`); recognised, not offered by skyline.
    pub systemd: Option<bool>,
    /// The authoritative domain, lower-cased and absolute (`domain`).
    pub domain: Option<Name>,
    /// The name whose records `local.dns.<domain>` answers with (`local`).
    pub local: Option<Name>,
    /// The SOA RNAME, `@` already turned into `.` (`hostmaster`).
    pub hostmaster: Option<Name>,
    /// DNSSEC key file base name (`--dnssec`): the domain is signed with `<dnssec>.key` and
    /// `<dnssec>.private`. The operator's setting alone: a key stored in `/<prefix>/config` is
    /// not read, so that the data cannot make the server read files.
    pub dnssec: Option<String>,
    /// Shuffle address answers (`round_robin`).
    pub round_robin: Option<bool>,
    /// Spread forwarded queries over the nameservers (`ns_rotate`).
    pub ns_rotate: Option<bool>,
    /// Upstream resolvers for names outside the domain (`nameservers`).
    pub nameservers: Option<Vec<SocketAddr>>,
    /// Never forward (`no_rec`).
    pub no_rec: Option<bool>,
    /// Upstream read timeout (`read_timeout`, a Go duration in nanoseconds).
    pub read_timeout: Option<Duration>,
    /// Default SRV priority / MX preference (`priority`).
    pub priority: Option<u16>,
    /// Default record TTL and cap for multi-record answers (`ttl`).
    pub ttl: Option<u32>,
    /// SOA TTL in negative answers (`min_ttl`).
    pub min_ttl: Option<u32>,
    /// DNSSEC signature cache capacity (`scache`); negative values count as 0, as in SkyDNS.
    pub scache: Option<u64>,
    /// Response cache capacity (`rcache`, 0 = off); negative values count as 0.
    pub rcache: Option<u64>,
    /// TTL of cached responses and of upstream records merged into answers (`rcache_ttl`).
    pub rcache_ttl: Option<u32>,
    /// Labels a name needs before it is forwarded (`ndot`).
    pub ndots: Option<u32>,
    /// Use the etcd v3 API (`etcd3`).
    pub etcd3: Option<bool>,
    /// Directories answer for what lies below them only when marked with a `.wildcards` key;
    /// skyline's own setting (`--wildcards-marker`), never read from `/<prefix>/config`.
    pub wildcards_marker: Option<bool>,
    /// Names pointing to host names answer with SkyDNS's CNAME chains instead of flattened
    /// addresses; skyline's own setting (`--cname-chains`), never read from `/<prefix>/config`.
    pub cname_chains: Option<bool>,
    /// Names of the domain without records are passed on instead of denied; skyline's own
    /// setting (`--fallthrough`, CoreDNS etcd `fallthrough`), never read from `/<prefix>/config`.
    pub fallthrough: Option<bool>,
}

impl ConfigPatch {
    /// Parses the JSON object stored under `/<prefix>/config`.
    pub fn parse(bytes: &[u8]) -> Result<ConfigPatch, ConfigError> {
        let mut patch = ConfigPatch::default();
        for (key, value) in json::decode_object(bytes, KEYS)? {
            patch.set(key, value)?;
        }
        Ok(patch)
    }

    fn set(&mut self, key: &'static str, value: Value) -> Result<(), ConfigError> {
        match key {
            "dns_addr" => {
                self.dns_addr = non_empty(json::string(key, value)?)
                    .map(|a| address(key, &a))
                    .transpose()?
            }
            "systemd" => self.systemd = Some(json::boolean(key, &value)?),
            "domain" => {
                self.domain = non_empty(json::string(key, value)?)
                    .map(|d| domain(key, &d))
                    .transpose()?
            }
            "local" => {
                self.local = non_empty(json::string(key, value)?)
                    .map(|d| domain(key, &d))
                    .transpose()?
            }
            "hostmaster" => {
                self.hostmaster = non_empty(json::string(key, value)?)
                    .map(|h| hostmaster(&h))
                    .transpose()?
            }
            // Checked, never applied: see the field.
            "dnssec" => _ = non_empty(json::string(key, value)?),
            "round_robin" => self.round_robin = Some(json::boolean(key, &value)?),
            "ns_rotate" => self.ns_rotate = Some(json::boolean(key, &value)?),
            "nameservers" => {
                let list = json::strings(key, value)?;
                let addrs = list.iter().map(|a| address(key, a)).collect::<Result<Vec<_>, _>>()?;
                self.nameservers = (!addrs.is_empty()).then_some(addrs);
            }
            "no_rec" => self.no_rec = Some(json::boolean(key, &value)?),
            "read_timeout" => {
                let nanos: u64 = json::bounded(key, &value, "0 or more nanoseconds")?;
                self.read_timeout = (nanos != 0).then(|| Duration::from_nanos(nanos));
            }
            "priority" => self.priority = non_zero(json::bounded(key, &value, "0..=65535")?),
            "ttl" => self.ttl = non_zero(json::bounded(key, &value, "0..=4294967295")?),
            "min_ttl" => self.min_ttl = non_zero(json::bounded(key, &value, "0..=4294967295")?),
            "scache" => self.scache = Some(clamped(key, &value)?),
            "rcache" => self.rcache = Some(clamped(key, &value)?),
            "rcache_ttl" => self.rcache_ttl = non_zero(json::bounded(key, &value, "0..=4294967295")?),
            "ndot" => {
                let n = json::integer(key, &value)?;
                self.ndots = if n <= 0 {
                    None
                } else {
                    Some(u32::try_from(n).unwrap_or(u32::MAX))
                };
            }
            "etcd3" => self.etcd3 = Some(json::boolean(key, &value)?),
            _ => {}
        }
        Ok(())
    }

    /// Stacks `self` over `lower`: every key `self` sets wins, the others come from `lower`.
    /// Lists are replaced whole, never merged, as SkyDNS does.
    pub fn or(self, lower: ConfigPatch) -> ConfigPatch {
        ConfigPatch {
            dns_addr: self.dns_addr.or(lower.dns_addr),
            systemd: self.systemd.or(lower.systemd),
            domain: self.domain.or(lower.domain),
            local: self.local.or(lower.local),
            hostmaster: self.hostmaster.or(lower.hostmaster),
            dnssec: self.dnssec.or(lower.dnssec),
            round_robin: self.round_robin.or(lower.round_robin),
            ns_rotate: self.ns_rotate.or(lower.ns_rotate),
            nameservers: self.nameservers.or(lower.nameservers),
            no_rec: self.no_rec.or(lower.no_rec),
            read_timeout: self.read_timeout.or(lower.read_timeout),
            priority: self.priority.or(lower.priority),
            ttl: self.ttl.or(lower.ttl),
            min_ttl: self.min_ttl.or(lower.min_ttl),
            scache: self.scache.or(lower.scache),
            rcache: self.rcache.or(lower.rcache),
            rcache_ttl: self.rcache_ttl.or(lower.rcache_ttl),
            ndots: self.ndots.or(lower.ndots),
            etcd3: self.etcd3.or(lower.etcd3),
            wildcards_marker: self.wildcards_marker.or(lower.wildcards_marker),
            cname_chains: self.cname_chains.or(lower.cname_chains),
            fallthrough: self.fallthrough.or(lower.fallthrough),
        }
    }

    /// The listen address, SkyDNS's default (`127.0.0.1:53`) when unset.
    pub fn dns_addr_or_default(&self) -> SocketAddr {
        self.dns_addr.unwrap_or(DEFAULT_DNS_ADDR)
    }

    /// The forwarding label threshold, SkyDNS's default (2) when unset.
    pub fn ndots_or_default(&self) -> u32 {
        self.ndots.unwrap_or(DEFAULT_NDOTS)
    }

    /// The settings a SkyDNS snapshot is built with: what this patch sets, SkyDNS's defaults for
    /// the rest (domain `skydns.local.`, ttl 3600, min_ttl 60, priority 10, round robin on).
    /// An unset hostmaster is `hostmaster.<domain>`, following the domain actually served.
    pub fn skydns_config(&self, path_prefix: &str) -> Result<Config, ConfigError> {
        let defaults = Config::default();
        let domain = self.domain.clone().unwrap_or(defaults.domain);
        let hostmaster = match &self.hostmaster {
            Some(h) => h.clone(),
            None => domain.prepend("hostmaster").map_err(|_| ConfigError::BadName {
                key: "hostmaster",
                value: format!("hostmaster.{domain}"),
                reason: "the domain is too long to hold a hostmaster label",
            })?,
        };
        let dnssec = match &self.dnssec {
            Some(keybase) => {
                let key = SigningKey::load(Path::new(keybase), &domain).map_err(|source| ConfigError::Dnssec {
                    keybase: keybase.clone(),
                    source,
                })?;
                let cache = self
                    .scache
                    .map_or(DEFAULT_CACHE, |n| usize::try_from(n).unwrap_or(usize::MAX));
                Some(Dnssec {
                    key: Arc::new(key),
                    cache,
                })
            }
            None => None,
        };
        Ok(Config {
            dnssec,
            domain,
            path_prefix: path_prefix.to_owned(),
            ttl: self.ttl.unwrap_or(defaults.ttl),
            min_ttl: self.min_ttl.unwrap_or(defaults.min_ttl),
            priority: self.priority.unwrap_or(defaults.priority),
            hostmaster,
            local: self.local.clone(),
            round_robin: self.round_robin.unwrap_or(defaults.round_robin),
            wildcards_marker: self.wildcards_marker.unwrap_or(defaults.wildcards_marker),
            cname_chains: self.cname_chains.unwrap_or(defaults.cname_chains),
            fallthrough: self.fallthrough.unwrap_or(defaults.fallthrough),
        })
    }
}

/// Parses a domain setting (`domain`, `local`): lower-cased, absolute.
pub fn domain(key: &'static str, text: &str) -> Result<Name, ConfigError> {
    names::parse_host_name(text).map_err(|reason| ConfigError::BadName {
        key,
        value: text.to_owned(),
        reason,
    })
}

/// Parses a hostmaster setting: SkyDNS accepts the mail form `hostmaster@skydns.local.` and turns
/// every `@` into `.` (an SOA RNAME cannot hold `@`).
pub fn hostmaster(text: &str) -> Result<Name, ConfigError> {
    let dotted = text.replace('@', ".");
    names::parse_host_name(&dotted).map_err(|reason| ConfigError::BadName {
        key: "hostmaster",
        value: text.to_owned(),
        reason,
    })
}

/// Parses an `IP:port` setting (`[v6]:port` for IPv6); host names are not resolved.
pub fn address(key: &'static str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.trim().parse().map_err(|_| ConfigError::BadAddress {
        key,
        value: text.to_owned(),
    })
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn non_zero<T: Default + PartialEq>(n: T) -> Option<T> {
    (n != T::default()).then_some(n)
}

/// A Go `int` capacity: negative counts as 0 (SkyDNS `SetDefaults`), huge saturates.
fn clamped(key: &'static str, value: &Value) -> Result<u64, ConfigError> {
    let n = json::integer(key, value)?;
    Ok(u64::try_from(n.max(0)).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::from_dotted(s).unwrap()
    }

    #[test]
    fn every_key_is_read() {
        let patch = ConfigPatch::parse(
            br#"{"dns_addr":"127.0.0.1:1053","systemd":true,"domain":"SkyDNS.Test","local":"a.b.skydns.test",
                "hostmaster":"admin@skydns.test","dnssec":"Kskydns.test.+005+1","round_robin":false,
                "ns_rotate":false,"nameservers":["8.8.8.8:53","[2001:db8::1]:53"],"no_rec":true,
                "read_timeout":3000000000,"priority":20,"ttl":1800,"min_ttl":30,"scache":5,"rcache":-1,
                "rcache_ttl":10,"ndot":3,"Etcd3":true}"#,
        )
        .unwrap();
        assert_eq!(
            patch,
            ConfigPatch {
                dns_addr: Some("127.0.0.1:1053".parse().unwrap()),
                systemd: Some(true),
                domain: Some(name("skydns.test.")),
                local: Some(name("a.b.skydns.test.")),
                hostmaster: Some(name("admin.skydns.test.")),
                dnssec: None,
                round_robin: Some(false),
                ns_rotate: Some(false),
                nameservers: Some(vec!["8.8.8.8:53".parse().unwrap(), "[2001:db8::1]:53".parse().unwrap()]),
                no_rec: Some(true),
                read_timeout: Some(Duration::from_secs(3)),
                priority: Some(20),
                ttl: Some(1800),
                min_ttl: Some(30),
                scache: Some(5),
                rcache: Some(0),
                rcache_ttl: Some(10),
                ndots: Some(3),
                etcd3: Some(true),
                wildcards_marker: None,
                cname_chains: None,
                fallthrough: None,
            }
        );
    }

    #[test]
    fn the_wildcards_marker_is_the_operators_setting_alone() {
        let patch = ConfigPatch::parse(br#"{"wildcards_marker":true}"#).unwrap();
        assert_eq!(patch.wildcards_marker, None);
        assert!(!patch.skydns_config("skydns").unwrap().wildcards_marker);
        let operator = ConfigPatch {
            wildcards_marker: Some(true),
            ..ConfigPatch::default()
        };
        assert!(operator.or(patch).skydns_config("skydns").unwrap().wildcards_marker);
    }

    #[test]
    fn fallthrough_is_the_operators_setting_alone() {
        let patch = ConfigPatch::parse(br#"{"fallthrough":true}"#).unwrap();
        assert!(!patch.skydns_config("skydns").unwrap().fallthrough);
        let operator = ConfigPatch {
            fallthrough: Some(true),
            ..ConfigPatch::default()
        };
        assert!(operator.or(patch).skydns_config("skydns").unwrap().fallthrough);
    }

    #[test]
    fn keys_are_case_insensitive_and_unknown_keys_ignored() {
        let patch =
            ConfigPatch::parse(br#"{"DOMAIN":"skydns.test.","Min_TTL":30,"path_prefix":"x","ndots":9}"#).unwrap();
        assert_eq!(patch.domain, Some(name("skydns.test.")));
        assert_eq!(patch.min_ttl, Some(30));
        assert_eq!(patch.ndots, None, "SkyDNS's key is ndot; ndots is unknown");
    }

    #[test]
    fn zero_values_mean_unset() {
        let patch = ConfigPatch::parse(
            br#"{"domain":"","ttl":0,"min_ttl":0,"priority":0,"nameservers":[],"ndot":-1,"dns_addr":""}"#,
        )
        .unwrap();
        assert_eq!(patch, ConfigPatch::default());
    }

    #[test]
    fn bad_values_are_rejected() {
        for json in [
            r#"{"ttl":"1800"}"#,
            r#"{"ttl":-1}"#,
            r#"{"round_robin":"false"}"#,
            r#"{"nameservers":"8.8.8.8:53"}"#,
            r#"{"nameservers":["8.8.8.8"]}"#,
            r#"{"dns_addr":"localhost:53"}"#,
            r#"{"domain":"bad domain"}"#,
            r#"{"hostmaster":"a..b"}"#,
            "[]",
            "{",
        ] {
            assert!(ConfigPatch::parse(json.as_bytes()).is_err(), "{json}");
        }
    }

    #[test]
    fn upper_layers_win_and_lists_replace() {
        let upper = ConfigPatch {
            ttl: Some(10),
            nameservers: Some(vec!["1.1.1.1:53".parse().unwrap()]),
            ..Default::default()
        };
        let lower = ConfigPatch {
            ttl: Some(20),
            min_ttl: Some(5),
            nameservers: Some(vec!["8.8.8.8:53".parse().unwrap(), "8.8.4.4:53".parse().unwrap()]),
            ..Default::default()
        };
        let merged = upper.or(lower);
        assert_eq!(merged.ttl, Some(10));
        assert_eq!(merged.min_ttl, Some(5));
        assert_eq!(merged.nameservers.unwrap().len(), 1);
    }

    #[test]
    fn defaults_follow_skydns() {
        let config = ConfigPatch::default().skydns_config("skydns").unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.hostmaster, name("hostmaster.skydns.local."));
        let patch = ConfigPatch::default();
        assert_eq!(patch.dns_addr_or_default().to_string(), "127.0.0.1:53");
        assert_eq!(patch.ndots_or_default(), 2);
    }

    #[test]
    fn hostmaster_follows_the_domain_unless_set() {
        let patch = ConfigPatch {
            domain: Some(name("example.org.")),
            ..Default::default()
        };
        assert_eq!(
            patch.skydns_config("skydns").unwrap().hostmaster,
            name("hostmaster.example.org.")
        );
        let patch = ConfigPatch {
            hostmaster: Some(hostmaster("hostmaster@skydns.local.").unwrap()),
            ..patch
        };
        assert_eq!(
            patch.skydns_config("p").unwrap().hostmaster,
            name("hostmaster.skydns.local.")
        );
        assert_eq!(patch.skydns_config("p").unwrap().path_prefix, "p");
    }
}
