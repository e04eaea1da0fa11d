//! Stub zones (docs/skydns-semantics.md, "Stub zones"): records under
//! `/<prefix>/<domain path>/dns/stub/<zone, reversed>/<ns>` name the nameservers that answer for a
//! zone, e.g. `/skydns/local/skydns/dns/stub/com/example/ns1 {"host":"172.16.1.1","port":54}`
//! sends `example.com.` to 172.16.1.1:54. The source keeps the list current; forwarding to these
//! servers belongs to the forwarder.

use skyline_dataplane::snapshot::skydns::{Entry, Host};
use skyline_dataplane::wire::Name;
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// The port of a stub nameserver whose record has none.
const DNS_PORT: u16 = 53;

/// A zone answered by other nameservers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubZone {
    /// The zone's apex.
    pub zone: Name,
    /// Its nameservers, in key order.
    pub nameservers: Vec<SocketAddr>,
}

impl fmt::Display for StubZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} →", self.zone)?;
        for ns in &self.nameservers {
            write!(f, " {ns}")?;
        }
        Ok(())
    }
}

/// The key prefix under which the stub records of `domain` live.
pub(super) fn stub_key_prefix(path_prefix: &str, domain: &Name) -> String {
    let mut key = format!("/{path_prefix}/");
    let labels: Vec<&[u8]> = domain.labels().collect();
    for label in labels.iter().rev() {
        key.push_str(&String::from_utf8_lossy(label));
        key.push('/');
    }
    key.push_str("dns/stub/");
    key
}

/// A stub record that names no usable nameserver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unusable {
    /// The record's key.
    pub key: String,
    /// Why it is not used.
    pub reason: &'static str,
}

/// The stub zones of `records`, the records under `prefix` (see [`stub_key_prefix`]) with
/// their keys, in a stable order (by the zone's wire form), and the records that were passed
/// over. As in SkyDNS the host must be an IP address, and a port of 0 means 53.
pub(super) fn stub_zones(prefix: &str, records: Vec<(String, &Entry)>) -> (Vec<StubZone>, Vec<Unusable>) {
    let mut zones: BTreeMap<Name, Vec<SocketAddr>> = BTreeMap::new();
    let mut unusable = Vec::new();
    for (key, entry) in records {
        let Some(rest) = key.strip_prefix(prefix) else {
            continue;
        };
        let mut components: Vec<&str> = rest.split('/').collect();
        components.pop();
        if components.is_empty() {
            unusable.push(Unusable {
                key: key.clone(),
                reason: "the key names no zone: dns/stub/<zone labels, reversed>/<name>",
            });
            continue;
        }
        let Ok(zone) = Name::from_labels(components.into_iter().rev()) else {
            unusable.push(Unusable {
                key: key.clone(),
                reason: "the key's zone is not a valid name",
            });
            continue;
        };
        let ip = match entry.host() {
            Host::V4(ip) => IpAddr::V4(ip),
            Host::V6(ip) => IpAddr::V6(ip),
            Host::None | Host::Name(_) => {
                unusable.push(Unusable {
                    key,
                    reason: "a stub nameserver's host must be an IP address",
                });
                continue;
            }
        };
        let port = if entry.port() == 0 { DNS_PORT } else { entry.port() };
        zones.entry(zone).or_default().push(SocketAddr::new(ip, port));
    }
    let zones = zones
        .into_iter()
        .map(|(zone, nameservers)| StubZone { zone, nameservers })
        .collect();
    (zones, unusable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skyline_dataplane::snapshot::skydns::{KeyPath, Service};

    fn record(key: &str, host: &str, port: u16) -> (String, Entry) {
        let service = Service {
            host: host.into(),
            port,
            ..Service::default()
        };
        let at = KeyPath::parse(key, "skydns").unwrap().unwrap();
        (key.into(), Entry::new(&at, &service).unwrap())
    }

    #[test]
    fn the_prefix_follows_the_domain() {
        let domain = Name::from_dotted("skydns.local.").unwrap();
        assert_eq!(stub_key_prefix("skydns", &domain), "/skydns/local/skydns/dns/stub/");
        assert_eq!(stub_key_prefix("p", &Name::root()), "/p/dns/stub/");
    }

    #[test]
    fn records_group_into_zones_with_default_ports() {
        let prefix = "/skydns/local/skydns/dns/stub/";
        let records = [
            record("/skydns/local/skydns/dns/stub/com/example/ns1", "172.16.1.1", 54),
            record("/skydns/local/skydns/dns/stub/com/example/ns2", "2001:db8::53", 0),
            record("/skydns/local/skydns/dns/stub/org/ns", "172.16.2.1", 0),
            record("/skydns/local/skydns/dns/stub/net/x/ns", "ns.example.net", 0),
            record("/skydns/local/skydns/dns/stub/lonely", "172.16.3.1", 0),
        ];
        let (zones, unusable) = stub_zones(prefix, records.iter().map(|(k, e)| (k.clone(), e)).collect());
        let shown: Vec<String> = zones.iter().map(|z| z.to_string()).collect();
        assert_eq!(
            shown,
            ["org. → 172.16.2.1:53", "example.com. → 172.16.1.1:54 [2001:db8::53]:53"]
        );
        let passed_over: Vec<&str> = unusable.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(
            passed_over,
            [
                "/skydns/local/skydns/dns/stub/net/x/ns",
                "/skydns/local/skydns/dns/stub/lonely"
            ]
        );
    }
}
