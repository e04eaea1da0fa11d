//! Settings of forwarding and the response cache: their flags, their TOML tables (`[forward]`,
//! `[cache]`), and their resolution into the data plane's [`ForwardConfig`].
//!
//! | TOML key | flag | default |
//! |---|---|---|
//! | `forward.no_rec` | `--no-rec` (SkyDNS; also `no_rec` in `/<prefix>/config`) | false: names outside the domain are forwarded |
//! | `forward.ns_rotate` | `--ns-rotate` (SkyDNS; also `ns_rotate`) | true |
//! | `forward.resolv_conf` | `--resolv-conf`, `SKYLINE_RESOLV_CONF` | `/etc/resolv.conf`, read when no `nameservers` are set |
//! | `forward.recursion_acl` | `--recursion-acl` | loopback, link-local, private ranges |
//! | `forward.timeout` | `--forward-timeout` (also `read_timeout` in `/<prefix>/config`) | `1500ms` |
//! | `forward.max_in_flight` | `--max-in-flight` | 512 per worker |
//! | `forward.max_in_flight_per_client` | `--max-in-flight-per-client` | 128 per worker (0: no limit) |
//! | `forward.stub_zones` | `--stub-zone ZONE=IP:PORT,...` | none |
//! | `forward.stubzones` | `--stubzones` (SkyDNS) | false: `dns/stub/` records in etcd are not followed |
//! | `cache.size` | `--cache-size` | `16MiB` for all workers |
//! | `cache.min_ttl`, `cache.max_ttl` | `--cache-min-ttl`, `--cache-max-ttl` | 0, 86400 |
//! | `cache.negative_ttl` | `--cache-negative-ttl` | 3600 |
//! | `cache.negative_ttl_zones` | `--cache-negative-ttl-zone ZONE=SECS` | `cluster.local.` = 5 |
//! | `cache.serve_stale` | `--serve-stale` | 86400 s past expiry; 0 turns serve-stale off |
//! | `cache.prefetch` | `--no-prefetch` | on |
//!
//! Every setting is fixed at start.

use crate::cli::parse_go_bool;
use clap::Args;
use serde::Deserialize;
use skyline_controlplane::etcd::SourceHealth;
use skyline_dataplane::cache::CacheConfig;
use skyline_dataplane::forward::{resolv_conf, Acl, ForwardConfig, Forwarding, Prefix, StubZone};
use skyline_dataplane::wire::Name;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where nameservers are read from when none are configured.
pub const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";

/// Why a forwarding or cache setting is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForwardingError {
    /// A value that does not parse; the message says which setting and why.
    #[error("{setting}: {reason}")]
    Invalid {
        /// The setting.
        setting: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn invalid(setting: &'static str, reason: impl Into<String>) -> ForwardingError {
    ForwardingError::Invalid {
        setting,
        reason: reason.into(),
    }
}

/// The command-line options of forwarding and the cache.
#[derive(Debug, Clone, Default, Args)]
pub struct ForwardArgs {
    /// Never forward: names outside the domain get REFUSED (SkyDNS -no-rec) [default: false]
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub no_rec: Option<bool>,

    /// Start successive forwarded questions at successive nameservers [default: true]
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub ns_rotate: Option<bool>,

    /// File whose nameserver lines are the upstreams when no nameservers are set
    /// [default: /etc/resolv.conf]
    #[arg(long, env = "SKYLINE_RESOLV_CONF", value_name = "FILE")]
    pub resolv_conf: Option<PathBuf>,

    /// Comma-separated address prefixes of the clients that may use forwarding; others get
    /// REFUSED for names outside the domain [default: 127.0.0.0/8, ::1, 169.254.0.0/16,
    /// fe80::/10, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7]
    #[arg(long, value_name = "PREFIX,...", value_delimiter = ',', value_parser = parse_prefix)]
    pub recursion_acl: Option<Vec<Prefix>>,

    /// How long a forwarded question may take, all tries together, before the client gets a
    /// stale answer or SERVFAIL, e.g. 1500ms or 2s [default: 1500ms]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub forward_timeout: Option<Duration>,

    /// Upstream questions in flight per worker; more get SERVFAIL at once [default: 512]
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<usize>,

    /// Questions one client address may have waiting on upstreams per worker; more get
    /// SERVFAIL at once; 0: no limit but --max-in-flight [default: 128]
    #[arg(long, value_name = "N")]
    pub max_in_flight_per_client: Option<usize>,

    /// A stub zone and its servers, ZONE=IP:PORT[,IP:PORT...]; repeat for more zones
    #[arg(long, value_name = "ZONE=IP:PORT,...", value_parser = parse_stub_zone)]
    pub stub_zone: Vec<StubZone>,

    /// Follow the stub zones of the records under dns/stub/ of the domain in etcd, as they
    /// change (SkyDNS -stubzones) [default: false]
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub stubzones: Option<bool>,

    /// Response cache memory, all workers together, e.g. 64MiB [default: 16MiB]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub cache_size: Option<usize>,

    /// Lowest TTL, seconds, given to cached positive answers [default: 0]
    #[arg(long, value_name = "SECS")]
    pub cache_min_ttl: Option<u32>,

    /// Highest TTL, seconds, given to cached positive answers [default: 86400]
    #[arg(long, value_name = "SECS")]
    pub cache_max_ttl: Option<u32>,

    /// Highest TTL, seconds, of cached negative answers (RFC 2308) [default: 3600]
    #[arg(long, value_name = "SECS")]
    pub cache_negative_ttl: Option<u32>,

    /// A lower negative-answer cap for one zone, ZONE=SECS; repeat for more zones
    /// [default: cluster.local.=5]
    #[arg(long, value_name = "ZONE=SECS", value_parser = parse_zone_ttl)]
    pub cache_negative_ttl_zone: Vec<(Name, u32)>,

    /// Seconds past expiry an answer may still be served when upstreams fail (RFC 8767); 0
    /// turns serve-stale off [default: 86400]
    #[arg(long, value_name = "SECS")]
    pub serve_stale: Option<u32>,

    /// Do not refresh popular cache entries before they expire
    #[arg(long)]
    pub no_prefetch: bool,
}

/// The `[forward]` table of the TOML file.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ForwardFile {
    /// `--no-rec`.
    pub no_rec: Option<bool>,
    /// `--ns-rotate`.
    pub ns_rotate: Option<bool>,
    /// `--resolv-conf`.
    pub resolv_conf: Option<PathBuf>,
    /// `--recursion-acl`, as a list.
    pub recursion_acl: Option<Vec<String>>,
    /// `--forward-timeout`.
    pub timeout: Option<String>,
    /// `--max-in-flight`.
    pub max_in_flight: Option<usize>,
    /// `--max-in-flight-per-client`.
    pub max_in_flight_per_client: Option<usize>,
    /// `--stub-zone`, as a list of tables.
    pub stub_zones: Option<Vec<StubZoneFile>>,
    /// `--stubzones`.
    pub stubzones: Option<bool>,
}

/// One stub zone in the TOML file.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StubZoneFile {
    /// The zone.
    pub zone: String,
    /// Its servers, IP:port.
    pub servers: Vec<SocketAddr>,
}

/// The `[cache]` table of the TOML file.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheFile {
    /// `--cache-size`, e.g. "64MiB".
    pub size: Option<String>,
    /// `--cache-min-ttl`.
    pub min_ttl: Option<u32>,
    /// `--cache-max-ttl`.
    pub max_ttl: Option<u32>,
    /// `--cache-negative-ttl`.
    pub negative_ttl: Option<u32>,
    /// `--cache-negative-ttl-zone`, as a table of zone = seconds.
    pub negative_ttl_zones: Option<BTreeMap<String, u32>>,
    /// `--serve-stale`.
    pub serve_stale: Option<u32>,
    /// The opposite of `--no-prefetch`.
    pub prefetch: Option<bool>,
}

/// The SkyDNS settings that decide forwarding, already stacked (flags, file, data, defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stacked {
    /// Configured nameservers; empty means "read resolv.conf".
    pub nameservers: Vec<SocketAddr>,
    /// Labels a name needs before it is forwarded.
    pub ndots: u32,
    /// Never forward.
    pub no_rec: bool,
    /// Rotate over the nameservers.
    pub ns_rotate: bool,
    /// SkyDNS `read_timeout` from `/<prefix>/config`, if set.
    pub read_timeout: Option<Duration>,
    /// The addresses skyline listens on, never taken as its own upstream.
    pub listen: Vec<SocketAddr>,
}

/// Resolves the forwarding configuration: `None` when nothing is to be forwarded (`no_rec`, or
/// no nameserver configured nor listed in resolv.conf). `read_file` reads resolv.conf (a missing
/// file lists no nameserver).
pub fn forward_config(
    args: &ForwardArgs,
    forward: Option<&ForwardFile>,
    cache: Option<&CacheFile>,
    stacked: &Stacked,
    read_file: impl FnOnce(&Path) -> Option<String>,
) -> Result<Option<ForwardConfig>, ForwardingError> {
    let empty_forward = ForwardFile::default();
    let empty_cache = CacheFile::default();
    let forward = forward.unwrap_or(&empty_forward);
    let cache = cache.unwrap_or(&empty_cache);
    if stacked.no_rec {
        return Ok(None);
    }
    let stub_zones = if args.stub_zone.is_empty() {
        forward
            .stub_zones
            .iter()
            .flatten()
            .map(|s| {
                Ok(StubZone {
                    zone: parse_zone("forward.stub_zones", &s.zone)?,
                    servers: s.servers.clone(),
                })
            })
            .collect::<Result<Vec<_>, ForwardingError>>()?
    } else {
        args.stub_zone.clone()
    };
    let upstreams = if stacked.nameservers.is_empty() {
        let path = args
            .resolv_conf
            .clone()
            .or_else(|| forward.resolv_conf.clone())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_RESOLV_CONF));
        let listed = read_file(&path)
            .map(|text| resolv_conf::nameservers(&text))
            .unwrap_or_default();
        listed.into_iter().filter(|ns| !stacked.listen.contains(ns)).collect()
    } else {
        stacked.nameservers.clone()
    };
    let acl = match (&args.recursion_acl, &forward.recursion_acl) {
        (Some(prefixes), _) => Acl::new(prefixes.clone()),
        (None, Some(texts)) => Acl::new(
            texts
                .iter()
                .map(|t| parse_prefix(t).map_err(|e| invalid("forward.recursion_acl", e)))
                .collect::<Result<_, _>>()?,
        ),
        (None, None) => Acl::default(),
    };
    let timeout = match (args.forward_timeout, &forward.timeout) {
        (Some(t), _) => t,
        (None, Some(text)) => parse_duration(text).map_err(|e| invalid("forward.timeout", e))?,
        (None, None) => stacked.read_timeout.unwrap_or(ForwardConfig::default().timeout),
    };
    let defaults = CacheConfig::default();
    let max_bytes = match (args.cache_size, &cache.size) {
        (Some(size), _) => size,
        (None, Some(text)) => parse_size(text).map_err(|e| invalid("cache.size", e))?,
        (None, None) => defaults.max_bytes,
    };
    let negative_zone_caps = if !args.cache_negative_ttl_zone.is_empty() {
        args.cache_negative_ttl_zone.clone()
    } else if let Some(zones) = &cache.negative_ttl_zones {
        zones
            .iter()
            .map(|(zone, secs)| Ok((parse_zone("cache.negative_ttl_zones", zone)?, *secs)))
            .collect::<Result<_, ForwardingError>>()?
    } else {
        defaults.negative_zone_caps.clone()
    };
    let config = ForwardConfig {
        upstreams,
        stub_zones,
        rotate: stacked.ns_rotate,
        ndots: stacked.ndots,
        timeout,
        max_in_flight: args
            .max_in_flight
            .or(forward.max_in_flight)
            .unwrap_or(ForwardConfig::default().max_in_flight),
        max_in_flight_per_client: args
            .max_in_flight_per_client
            .or(forward.max_in_flight_per_client)
            .unwrap_or(ForwardConfig::default().max_in_flight_per_client),
        acl,
        cache: CacheConfig {
            max_bytes,
            min_ttl: args.cache_min_ttl.or(cache.min_ttl).unwrap_or(defaults.min_ttl),
            max_ttl: args.cache_max_ttl.or(cache.max_ttl).unwrap_or(defaults.max_ttl),
            negative_max_ttl: args
                .cache_negative_ttl
                .or(cache.negative_ttl)
                .unwrap_or(defaults.negative_max_ttl),
            negative_zone_caps,
            stale_for: args.serve_stale.or(cache.serve_stale).unwrap_or(defaults.stale_for),
            prefetch: !args.no_prefetch && cache.prefetch.unwrap_or(defaults.prefetch),
        },
    };
    Ok(config.is_enabled().then_some(config))
}

/// Whether stub zones from records are followed (`--stubzones`, SkyDNS's switch for them).
pub fn stub_records(args: &ForwardArgs, forward: Option<&ForwardFile>) -> bool {
    args.stubzones.or(forward.and_then(|f| f.stubzones)).unwrap_or(false)
}

/// How often the stub zones read from records are looked at.
const STUB_RECORDS_POLL: Duration = Duration::from_secs(1);

/// Hands the stub zones the etcd source reads from `dns/stub/` records to the data plane
/// whenever they change; runs until the runtime stops.
pub async fn follow_stub_records(source: Arc<SourceHealth>, zones: Forwarding) {
    let mut applied: Option<Arc<Vec<skyline_controlplane::etcd::StubZone>>> = None;
    loop {
        let current = source.stub_zones();
        if applied.as_ref().is_none_or(|a| !Arc::ptr_eq(a, &current)) {
            zones.set_learnt_stubs(
                current
                    .iter()
                    .map(|z| StubZone {
                        zone: z.zone.clone(),
                        servers: z.nameservers.clone(),
                    })
                    .collect(),
            );
            if applied.is_some() || !current.is_empty() {
                tracing::info!(zones = current.len(), "stub zones from records in force");
            }
            applied = Some(current);
        }
        tokio::time::sleep(STUB_RECORDS_POLL).await;
    }
}

fn parse_prefix(text: &str) -> Result<Prefix, String> {
    text.parse()
        .map_err(|e: skyline_dataplane::forward::PrefixError| e.to_string())
}

fn parse_zone(setting: &'static str, text: &str) -> Result<Name, ForwardingError> {
    skyline_controlplane::skydns::config::domain(setting, text).map_err(|e| invalid(setting, e.to_string()))
}

/// A duration as `1500ms`, `2s`, `1m` or `24h`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 1500ms or 2s"))?;
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        "h" => Ok(Duration::from_secs(n.saturating_mul(3600))),
        _ => Err(format!("{text:?} is not a duration such as 1500ms or 2s")),
    }
}

/// A memory size as bytes, or with a unit: `64MiB`, `64M`, `512KiB`, `1GiB`.
fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: usize = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 64MiB"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        _ => return Err(format!("{text:?} is not a size such as 64MiB")),
    };
    n.checked_mul(scale).ok_or_else(|| format!("{text:?} is too large"))
}

/// `ZONE=SECS`.
fn parse_zone_ttl(text: &str) -> Result<(Name, u32), String> {
    let (zone, secs) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not ZONE=SECS"))?;
    let zone = parse_zone("--cache-negative-ttl-zone", zone).map_err(|e| e.to_string())?;
    let secs = secs.trim().parse().map_err(|_| format!("{text:?} is not ZONE=SECS"))?;
    Ok((zone, secs))
}

/// `ZONE=IP:PORT[,IP:PORT...]`.
fn parse_stub_zone(text: &str) -> Result<StubZone, String> {
    let (zone, servers) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not ZONE=IP:PORT[,IP:PORT...]"))?;
    let zone = parse_zone("--stub-zone", zone).map_err(|e| e.to_string())?;
    let servers = servers
        .split(',')
        .map(|s| s.trim().parse::<SocketAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| format!("{text:?}: servers must be IP:port"))?;
    Ok(StubZone { zone, servers })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stacked(nameservers: &[&str]) -> Stacked {
        Stacked {
            nameservers: nameservers.iter().map(|n| n.parse().unwrap()).collect(),
            ndots: 2,
            no_rec: false,
            ns_rotate: true,
            read_timeout: None,
            listen: vec!["127.0.0.1:53".parse().unwrap()],
        }
    }

    fn resolve(args: &ForwardArgs, forward: Option<&str>, cache: Option<&str>, s: &Stacked) -> Option<ForwardConfig> {
        let forward: Option<ForwardFile> = forward.map(|t| toml::from_str(t).unwrap());
        let cache: Option<CacheFile> = cache.map(|t| toml::from_str(t).unwrap());
        forward_config(args, forward.as_ref(), cache.as_ref(), s, |_| {
            Some("nameserver 127.0.0.1\nnameserver 10.0.0.53\n".to_owned())
        })
        .unwrap()
    }

    #[test]
    fn configured_nameservers_are_the_upstreams_with_private_acl_and_default_cache() {
        let c = resolve(&ForwardArgs::default(), None, None, &stacked(&["192.0.2.1:53"])).unwrap();
        assert_eq!(c.upstreams, ["192.0.2.1:53".parse().unwrap()]);
        assert_eq!(c.acl, Acl::default());
        assert_eq!(c.cache, CacheConfig::default());
        assert_eq!((c.ndots, c.rotate, c.timeout), (2, true, Duration::from_millis(1500)));
    }

    #[test]
    fn without_nameservers_resolv_conf_is_read_minus_our_own_address() {
        let c = resolve(&ForwardArgs::default(), None, None, &stacked(&[])).unwrap();
        assert_eq!(c.upstreams, ["10.0.0.53:53".parse().unwrap()]);
        let none = forward_config(&ForwardArgs::default(), None, None, &stacked(&[]), |_| None).unwrap();
        assert!(none.is_none(), "no upstream anywhere: nothing to forward to");
    }

    #[test]
    fn no_rec_turns_forwarding_off() {
        let s = Stacked {
            no_rec: true,
            ..stacked(&["192.0.2.1:53"])
        };
        assert!(resolve(&ForwardArgs::default(), None, None, &s).is_none());
    }

    #[test]
    fn flags_beat_the_file_and_the_file_beats_the_defaults() {
        let forward =
            "recursion_acl = [\"10.0.0.0/8\"]\ntimeout = \"2s\"\nmax_in_flight = 64\nmax_in_flight_per_client = 8\n\
                       [[stub_zones]]\nzone = \"corp.example.\"\nservers = [\"10.1.1.1:53\"]\n";
        let cache = "size = \"1MiB\"\nmin_ttl = 5\nnegative_ttl = 60\nserve_stale = 0\nprefetch = false\n\
                     [negative_ttl_zones]\n\"svc.example.\" = 2\n";
        let from_file = resolve(
            &ForwardArgs::default(),
            Some(forward),
            Some(cache),
            &stacked(&["192.0.2.1:53"]),
        )
        .unwrap();
        assert_eq!(from_file.acl.prefixes(), ["10.0.0.0/8".parse::<Prefix>().unwrap()]);
        assert_eq!(
            (
                from_file.timeout,
                from_file.max_in_flight,
                from_file.max_in_flight_per_client
            ),
            (Duration::from_secs(2), 64, 8)
        );
        assert_eq!(
            from_file.stub_zones[0].zone,
            Name::from_dotted("corp.example.").unwrap()
        );
        assert_eq!((from_file.cache.max_bytes, from_file.cache.min_ttl), (1 << 20, 5));
        assert_eq!((from_file.cache.negative_max_ttl, from_file.cache.stale_for), (60, 0));
        assert!(!from_file.cache.prefetch);
        assert_eq!(from_file.cache.negative_zone_caps[0].1, 2);

        let args = ForwardArgs {
            forward_timeout: Some(Duration::from_millis(700)),
            cache_size: Some(4096),
            recursion_acl: Some(vec!["0.0.0.0/0".parse().unwrap()]),
            ..ForwardArgs::default()
        };
        let from_flags = resolve(&args, Some(forward), Some(cache), &stacked(&["192.0.2.1:53"])).unwrap();
        assert_eq!(from_flags.timeout, Duration::from_millis(700));
        assert_eq!(from_flags.cache.max_bytes, 4096);
        assert!(from_flags.acl.allows("8.8.8.8".parse().unwrap()));
    }

    #[test]
    fn skydns_read_timeout_sets_the_budget_when_nothing_else_does() {
        let s = Stacked {
            read_timeout: Some(Duration::from_secs(3)),
            ..stacked(&["192.0.2.1:53"])
        };
        assert_eq!(
            resolve(&ForwardArgs::default(), None, None, &s).unwrap().timeout,
            Duration::from_secs(3)
        );
    }

    #[test]
    fn values_parse() {
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        let (zone, secs) = parse_zone_ttl("cluster.local.=5").unwrap();
        assert_eq!((zone.to_string(), secs), ("cluster.local.".to_owned(), 5));
        let stub = parse_stub_zone("corp.example=10.0.0.1:53,10.0.0.2:5353").unwrap();
        assert_eq!(stub.servers.len(), 2);
        assert!(parse_stub_zone("corp.example=10.0.0.1").is_err());
        assert!(parse_prefix("10.0.0.0/33").is_err());
    }

    #[test]
    fn the_example_configuration_resolves() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skyline.toml");
        let file = crate::config::FileConfig::load(&path).unwrap();
        let c = forward_config(
            &ForwardArgs::default(),
            file.forward.as_ref(),
            file.cache.as_ref(),
            &stacked(&["8.8.8.8:53"]),
            |_| None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.stub_zones.len(), 1);
        assert_eq!(c.cache.max_bytes, 64 << 20);
        assert_eq!(c.acl, Acl::default(), "the example spells out the default");
    }

    #[test]
    fn unknown_keys_in_the_tables_are_rejected() {
        assert!(toml::from_str::<ForwardFile>("timeuot = \"1s\"").is_err());
        assert!(toml::from_str::<CacheFile>("sise = \"1MiB\"").is_err());
    }
}
