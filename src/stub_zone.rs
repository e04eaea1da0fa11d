//! A stub zone as configured: the zone, its servers, how they are used and how they are asked,
//! as `--stub-zone` and the `[[forward.stub_zones]]` tables write it. `crate::forwarding` turns
//! it into the data plane's stub zone.

use crate::file_value::{address_hint, FileValue};
use crate::flag_value::{parse_duration, parse_policy, parse_zone};
use crate::in_force::{FileForm, InForce};
use serde::Deserialize;
use skyline_dataplane::forward::{ForwardOptions, HealthCheck, TLS_PORT};
use skyline_dataplane::wire::Name;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// One stub zone in the TOML file: the zone, its servers, and how they are used, with the
/// keys and meanings of the `[forward]` table's options (each left out takes its default, not
/// the `[forward]` table's value: a stub zone is a `forward` block of its own).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StubZoneFile {
    /// The zone.
    pub zone: String,
    /// Its servers, `IP:port`, or all `tls://IP[:port]` for DNS over TLS.
    pub servers: Vec<String>,
    /// Every query over TCP (CoreDNS `force_tcp`).
    #[serde(default)]
    pub force_tcp: bool,
    /// The name the servers' certificates must carry (CoreDNS `tls_servername`).
    #[serde(default)]
    pub tls_servername: Option<String>,
    /// Certificate authorities trusted besides the platform's.
    #[serde(default)]
    pub tls_ca: Option<PathBuf>,
    /// `policy`.
    pub policy: Option<String>,
    /// `max_fails`.
    pub max_fails: Option<u32>,
    /// `health_check`.
    pub health_check: Option<String>,
    /// `health_check_no_rec`.
    pub health_check_no_rec: Option<bool>,
    /// `health_check_domain`.
    pub health_check_domain: Option<String>,
    /// `except`.
    pub except: Option<Vec<String>>,
    /// `max_concurrent`.
    pub max_concurrent: Option<usize>,
}

impl StubZoneFile {
    /// The options of the zone's servers the table gives, the others at their defaults.
    pub fn options(&self) -> Result<ForwardOptions, String> {
        let defaults = ForwardOptions::default();
        let health_check = self
            .health_check
            .as_deref()
            .map(parse_duration)
            .transpose()?
            .map(|interval| {
                let domain = self
                    .health_check_domain
                    .as_deref()
                    .map(|name| parse_zone("health_check_domain", name))
                    .transpose()?;
                Ok::<_, String>(health_check(
                    interval,
                    self.health_check_no_rec.unwrap_or_default(),
                    domain,
                ))
            })
            .transpose()?;
        Ok(ForwardOptions {
            policy: self
                .policy
                .as_deref()
                .map(parse_policy)
                .transpose()?
                .unwrap_or_default(),
            max_fails: self.max_fails.unwrap_or(defaults.max_fails),
            health_check,
            except: self
                .except
                .iter()
                .flatten()
                .map(|z| parse_zone("except", z))
                .collect::<Result<_, _>>()?,
            max_concurrent: self.max_concurrent.unwrap_or(defaults.max_concurrent),
        })
    }
}

/// The health checks of a set of upstreams, every `interval`: an NS query for `domain` (the root
/// when none is given), with RD set unless `no_rec`, as CoreDNS's `health_check` option sends
/// them; the `[forward]` table's and a stub zone's alike.
pub fn health_check(interval: Duration, no_rec: bool, domain: Option<Name>) -> HealthCheck {
    HealthCheck {
        interval,
        recursion_desired: !no_rec,
        domain: domain.unwrap_or_else(Name::root),
    }
}

/// How a set of upstreams is asked, as configured: CoreDNS `forward`'s options, kept apart
/// from the set's servers so that the default resolvers and each stub zone have their own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ask {
    /// Every query over TCP, on persistent connections (`force_tcp`).
    pub force_tcp: bool,
    /// Every query over TLS (`tls://` servers).
    pub tls: bool,
    /// The name the servers' certificates must carry; their IP addresses without it.
    pub tls_servername: Option<String>,
    /// Certificate authorities trusted besides the platform's root store.
    pub tls_ca: Option<PathBuf>,
}

/// A stub zone as configured: its servers, how they are used and how they are asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubZoneSetting {
    /// The zone apex.
    pub zone: Name,
    /// Its servers.
    pub servers: Vec<SocketAddr>,
    /// How they are used.
    pub options: ForwardOptions,
    /// How they are asked.
    pub ask: Ask,
}

/// `ZONE=IP:PORT[,IP:PORT...]`, or `ZONE=tls://IP[:PORT][,...]`.
pub(crate) fn parse_stub_zone(text: &str) -> Result<StubZoneSetting, String> {
    let (zone, servers) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not ZONE=IP:PORT[,IP:PORT...]"))?;
    let zone = parse_zone("--stub-zone", zone)?;
    let (servers, tls) = parse_servers(servers.split(',')).map_err(|e| format!("{text:?}: {e}"))?;
    Ok(StubZoneSetting {
        zone,
        servers,
        options: ForwardOptions::default(),
        ask: Ask { tls, ..Ask::default() },
    })
}

/// Servers as `IP:PORT`, or all as `tls://IP[:PORT]` (port 853 when none is given, as
/// CoreDNS takes them); whether they are TLS ones. A set is asked one way: TLS and plain
/// servers mixed are refused.
pub(crate) fn parse_servers<'a>(texts: impl Iterator<Item = &'a str>) -> Result<(Vec<SocketAddr>, bool), String> {
    let mut servers = Vec::new();
    let mut tls = None;
    for text in texts {
        let text = text.trim();
        let (is_tls, addr) = match text.strip_prefix("tls://") {
            Some(rest) => {
                let addr = rest.parse::<SocketAddr>().or_else(|_| {
                    rest.trim_start_matches('[')
                        .trim_end_matches(']')
                        .parse::<IpAddr>()
                        .map(|ip| SocketAddr::new(ip, TLS_PORT))
                });
                (true, addr.map_err(|_| format!("{text:?} is not tls://IP[:PORT]"))?)
            }
            None => (
                false,
                text.parse::<SocketAddr>().map_err(|_| {
                    crate::flag_value::missing_port(text)
                        .unwrap_or_else(|| format!("{text:?} is not IP:PORT (or tls://IP[:PORT])"))
                })?,
            ),
        };
        if *tls.get_or_insert(is_tls) != is_tls {
            return Err("the servers of a set are all tls:// or none are".to_owned());
        }
        servers.push(addr);
    }
    Ok((servers, tls.unwrap_or(false)))
}

impl FileValue for Vec<StubZoneFile> {
    const EXPECTED: &'static str =
        "a list of tables, each with zone = \"name\", servers = [\"IP:port\", ...] (or [\"tls://IP:port\", ...]), and optionally force_tcp, tls_servername and tls_ca";

    fn hint(value: &toml::Value) -> Option<String> {
        address_hint(&value.as_array()?.iter().find_map(|t| t.get("servers"))?.clone())
    }
}

impl FileForm for Vec<StubZoneFile> {}

impl InForce for StubZoneSetting {
    fn in_force(&self) -> Option<toml::Value> {
        let mut table = toml::Table::new();
        table.insert("zone".to_owned(), toml::Value::String(self.zone.to_string()));
        let scheme = if self.ask.tls { "tls://" } else { "" };
        let servers = self
            .servers
            .iter()
            .map(|s| toml::Value::String(format!("{scheme}{s}")))
            .collect();
        table.insert("servers".to_owned(), toml::Value::Array(servers));
        if self.ask.force_tcp {
            table.insert("force_tcp".to_owned(), toml::Value::Boolean(true));
        }
        if let Some(name) = &self.ask.tls_servername {
            table.insert("tls_servername".to_owned(), toml::Value::String(name.clone()));
        }
        if let Some(ca) = &self.ask.tls_ca {
            table.insert("tls_ca".to_owned(), ca.in_force()?);
        }
        let options = &self.options;
        let defaults = ForwardOptions::default();
        let mut set = |key: &str, value: Option<toml::Value>| {
            if let Some(value) = value {
                table.insert(key.to_owned(), value);
            }
        };
        set(
            "policy",
            (options.policy != defaults.policy)
                .then(|| options.policy.in_force())
                .flatten(),
        );
        set(
            "max_fails",
            (options.max_fails != defaults.max_fails)
                .then(|| options.max_fails.in_force())
                .flatten(),
        );
        if let Some(check) = &options.health_check {
            set("health_check", check.interval.in_force());
            set(
                "health_check_no_rec",
                Some(toml::Value::Boolean(!check.recursion_desired)),
            );
            set("health_check_domain", check.domain.in_force());
        }
        set(
            "except",
            (options.except != defaults.except)
                .then(|| options.except.in_force())
                .flatten(),
        );
        set(
            "max_concurrent",
            (options.max_concurrent != defaults.max_concurrent)
                .then(|| options.max_concurrent.in_force())
                .flatten(),
        );
        Some(toml::Value::Table(table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stub_zone_flag_parses() {
        let stub = parse_stub_zone("corp.example=10.0.0.1:53,10.0.0.2:5353").unwrap();
        assert_eq!(stub.servers.len(), 2);
        assert!(!stub.ask.tls);
        assert!(parse_stub_zone("corp.example=10.0.0.1").is_err());
        let tls = parse_stub_zone("corp.example=tls://10.0.0.1,tls://[2001:db8::1]:8853").unwrap();
        assert!(tls.ask.tls);
        assert_eq!(
            tls.servers,
            [
                "10.0.0.1:853".parse::<SocketAddr>().unwrap(),
                "[2001:db8::1]:8853".parse().unwrap()
            ]
        );
        assert!(parse_stub_zone("corp.example=tls://10.0.0.1,10.0.0.2:53").is_err());
    }
}
