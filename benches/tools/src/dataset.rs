//! One data set, written twice: as SkyDNS records for skyline and as a zone file for an
//! authoritative peer (Knot), with the same answers for every name the query files ask; and
//! the query files of each mix.
//!
//! The zone file spells out what SkyDNS derives from the key hierarchy: a service name holds
//! the addresses, SRV records (weights normalised to 100 per priority) and texts of the
//! records below it, and SRV targets of address records are the records' own names, whose
//! addresses go in the additional section.
//!
//! Beside the services, names with view maps (docs/skydns-semantics.md, "Views"): `view<s>`
//! answers a client of 127.0.0.0/8 (every benchmark client) otherwise than the others, and
//! `same<s>` holds a view map whose lists agree, so that it answers as a name without views:
//! the two mixes that ask them measure what views cost a name that has them. The zone file
//! holds what the benchmark's clients get. And `alias<s>`, a name whose record points to a host
//! name (`h0.svc<s>`): it answers that host's address at its own name (flattened), which the
//! zone file states as a plain address. And `one<s>`, a directory of one record (`one<s>/i0`,
//! the shape a registrator writes for a service with one instance): its A answer is that
//! record's address at the directory's name.

use crate::rng::SplitMix64;
use std::fmt::Write;

/// SkyDNS's defaults, which the zone file has to state explicitly.
const TTL: u32 = 3600;
const PRIORITY: u16 = 10;
const PORT: u16 = 8080;
/// IPv4 instances per service (`h0` .. `h{n-1}`).
const V4_INSTANCES: usize = 4;
/// One service in this many also has an IPv6 instance and a text record.
const EVERY: usize = 10;

/// The shape of the data set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The zone, without the trailing dot, e.g. `skydns.local`.
    pub domain: String,
    /// Services `svc0` .. `svc{n-1}`, each with four IPv4 instances; every tenth also has an
    /// IPv6 instance `h4` and a text record `info`.
    pub services: usize,
}

impl Spec {
    /// The etcd key prefix of the domain: `skydns.local` → `/skydns/local/skydns`.
    fn key_prefix(&self) -> String {
        let mut key = String::from("/skydns");
        for label in self.domain.rsplit('.') {
            key.push('/');
            key.push_str(label);
        }
        key
    }

    fn v4(service: usize, instance: usize) -> String {
        let i = service * V4_INSTANCES + instance;
        format!("10.{}.{}.{}", (i >> 16) & 0xFF, (i >> 8) & 0xFF, i & 0xFF)
    }

    fn v6(service: usize) -> String {
        format!("2001:db8::{service:x}")
    }

    /// The address `view<s>` answers `list` (0: 127.0.0.0/8, 1: 10.0.0.0/8, 2: default) with, and
    /// `same<s>` every client.
    fn viewed(service: usize, list: usize) -> String {
        format!("10.{}.{}.{}", 200 + list, (service >> 8) & 0xFF, service & 0xFF)
    }

    fn text(service: usize) -> String {
        format!("service {service}: owner team-{}, tier web", service % 7)
    }

    /// Address records (leaf names) in the data set.
    pub fn address_names(&self) -> usize {
        self.services * V4_INSTANCES + self.services.div_ceil(EVERY)
    }

    /// Names pointing to a host name: `alias<s>` of every tenth service.
    pub fn alias_names(&self) -> usize {
        self.services.div_ceil(EVERY)
    }

    /// Directories of one record: `one<s>` of every tenth service.
    pub fn directory_names(&self) -> usize {
        self.services.div_ceil(EVERY)
    }

    /// The address of `one<s>/i0`.
    fn single(service: usize) -> String {
        format!("10.210.{}.{}", (service >> 8) & 0xFF, service & 0xFF)
    }

    /// Names holding a view map: `view<s>` and `same<s>` of every tenth service.
    pub fn view_names(&self) -> usize {
        2 * self.services.div_ceil(EVERY)
    }

    /// The records file for skyline: a JSON object of etcd key → SkyDNS record.
    pub fn records_json(&self) -> String {
        let prefix = self.key_prefix();
        let mut out = String::from("{\n");
        let _ = write!(out, "  \"{prefix}/dns/ns/ns1\": {{\"host\": \"10.255.0.1\"}}");
        for s in 0..self.services {
            for h in 0..V4_INSTANCES {
                let ip = Spec::v4(s, h);
                let _ = write!(
                    out,
                    ",\n  \"{prefix}/svc{s}/h{h}\": {{\"host\": \"{ip}\", \"port\": {PORT}}}"
                );
            }
            if s % EVERY == 0 {
                let ip = Spec::v6(s);
                let _ = write!(
                    out,
                    ",\n  \"{prefix}/svc{s}/h{V4_INSTANCES}\": {{\"host\": \"{ip}\", \"port\": {PORT}}}"
                );
                let text = Spec::text(s);
                let _ = write!(out, ",\n  \"{prefix}/svc{s}/info\": {{\"text\": \"{text}\"}}");
                let (local, ten, other) = (Spec::viewed(s, 0), Spec::viewed(s, 1), Spec::viewed(s, 2));
                let _ = write!(
                    out,
                    ",\n  \"{prefix}/view{s}\": {{\"default\": [{{\"host\": \"{other}\"}}], \
                     \"10.0.0.0/8\": [{{\"host\": \"{ten}\"}}], \"127.0.0.0/8\": [{{\"host\": \"{local}\"}}]}}"
                );
                let _ = write!(
                    out,
                    ",\n  \"{prefix}/same{s}\": {{\"default\": [{{\"host\": \"{local}\"}}], \
                     \"127.0.0.0/8\": [{{\"host\": \"{local}\"}}]}}"
                );
                let _ = write!(
                    out,
                    ",\n  \"{prefix}/alias{s}\": {{\"host\": \"h0.svc{s}.{}.\"}}",
                    self.domain
                );
                let one = Spec::single(s);
                let _ = write!(
                    out,
                    ",\n  \"{prefix}/one{s}/i0\": {{\"host\": \"{one}\", \"port\": {PORT}}}"
                );
            }
        }
        out.push_str("\n}\n");
        out
    }

    /// The same data as a master file (RFC 1035 §5) for an authoritative server.
    pub fn zone_file(&self) -> String {
        let d = &self.domain;
        let mut out = String::new();
        let _ = writeln!(out, "$ORIGIN {d}.\n$TTL {TTL}");
        // SkyDNS's synthesised SOA: serial aside, the same fields and the same 60 s minimum.
        let _ = writeln!(
            out,
            "@ SOA ns.dns.{d}. hostmaster.{d}. 1 28800 7200 604800 60\n@ NS ns1.ns.dns.{d}.\nns1.ns.dns A 10.255.0.1"
        );
        for s in 0..self.services {
            let with_v6 = s % EVERY == 0;
            let instances = V4_INSTANCES + usize::from(with_v6);
            let weight = srv_weight(instances);
            for h in 0..V4_INSTANCES {
                let ip = Spec::v4(s, h);
                let _ = writeln!(out, "h{h}.svc{s} A {ip}\nsvc{s} A {ip}");
            }
            if with_v6 {
                let ip = Spec::v6(s);
                let text = Spec::text(s);
                let _ = writeln!(
                    out,
                    "h{V4_INSTANCES}.svc{s} AAAA {ip}\nsvc{s} AAAA {ip}\ninfo.svc{s} TXT \"{text}\"\nsvc{s} TXT \"{text}\""
                );
                let local = Spec::viewed(s, 0);
                let _ = writeln!(out, "view{s} A {local}\nsame{s} A {local}");
                let _ = writeln!(out, "alias{s} A {}", Spec::v4(s, 0));
                let one = Spec::single(s);
                let _ = writeln!(out, "one{s} A {one}\ni0.one{s} A {one}");
            }
            for h in 0..instances {
                let _ = writeln!(out, "svc{s} SRV {PRIORITY} {weight} {PORT} h{h}.svc{s}");
            }
        }
        out
    }

    /// `count` queries of `mix`, one `name type` per line, the same for every `seed`.
    pub fn queries(&self, mix: Mix, count: usize, seed: u64) -> String {
        let mut rng = SplitMix64::new(seed);
        let mut out = String::with_capacity(count * 32);
        for k in 0..count {
            let s = rng.below(self.services as u64);
            let h = rng.below(V4_INSTANCES as u64);
            let d = &self.domain;
            let _ = match mix {
                Mix::A => writeln!(out, "h{h}.svc{s}.{d} A"),
                Mix::Nxdomain if k % 10 == 9 => writeln!(out, "h{h}.nosuch{s}.{d} A"),
                Mix::Nxdomain => writeln!(out, "h{h}.svc{s}.{d} A"),
                Mix::Srv => writeln!(out, "svc{s}.{d} SRV"),
                Mix::Views => writeln!(out, "view{}.{d} A", s / EVERY as u64 * EVERY as u64),
                Mix::Viewless => writeln!(out, "same{}.{d} A", s / EVERY as u64 * EVERY as u64),
                Mix::Alias => writeln!(out, "alias{}.{d} A", s / EVERY as u64 * EVERY as u64),
                Mix::Directory => writeln!(out, "one{}.{d} A", s / EVERY as u64 * EVERY as u64),
                Mix::MixedCase => {
                    let name = format!("h{h}.svc{s}.{d}");
                    let mixed: String = name
                        .chars()
                        .map(|c| if rng.one_in(2) { c.to_ascii_uppercase() } else { c })
                        .collect();
                    writeln!(out, "{mixed} A")
                }
            };
        }
        out
    }
}

/// SkyDNS's SRV weight for each of `instances` records of weight 0 (counted as 100) at one
/// priority: `floor(100 / (100 * n) * 100)`.
pub fn srv_weight(instances: usize) -> u16 {
    let w1 = 100.0 / (100 * instances) as f64;
    (w1 * 100.0).floor() as u16
}

/// The query mixes of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// Random existing A names.
    A,
    /// As [`Mix::A`], with every tenth query for a name that does not exist.
    Nxdomain,
    /// SRV queries for service names: several records with addresses in the additional section.
    Srv,
    /// As [`Mix::A`], each letter's case chosen at random (as resolvers using 0x20 send them).
    MixedCase,
    /// A queries for names with views, each answering one address to the benchmark's clients.
    Views,
    /// A queries for names whose view maps' lists agree: one address, no views.
    Viewless,
    /// A queries for names whose record points to a host name: its address, flattened.
    Alias,
    /// A queries for directories of one record (a registrator's service of one instance).
    Directory,
}

impl Mix {
    /// Every mix, in report order.
    pub const ALL: [Mix; 8] = [
        Mix::A,
        Mix::Nxdomain,
        Mix::Srv,
        Mix::MixedCase,
        Mix::Views,
        Mix::Viewless,
        Mix::Alias,
        Mix::Directory,
    ];

    /// The name used in file names and reports.
    pub fn name(self) -> &'static str {
        match self {
            Mix::A => "a",
            Mix::Nxdomain => "nxdomain",
            Mix::Srv => "srv",
            Mix::MixedCase => "mixedcase",
            Mix::Views => "views",
            Mix::Viewless => "viewless",
            Mix::Alias => "alias",
            Mix::Directory => "directory",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{parse_file, QueryOptions};

    fn spec() -> Spec {
        Spec {
            domain: "skydns.local".into(),
            services: 20,
        }
    }

    #[test]
    fn keys_follow_the_reversed_domain() {
        assert_eq!(spec().key_prefix(), "/skydns/local/skydns");
        let json = spec().records_json();
        assert!(json.contains("\"/skydns/local/skydns/svc19/h3\": {\"host\": \"10.0.0.79\", \"port\": 8080}"));
        assert!(json.contains("\"/skydns/local/skydns/svc10/h4\": {\"host\": \"2001:db8::a\""));
        assert_eq!(
            json.matches("\"host\"").count(),
            1 + spec().address_names() + spec().view_names() / 2 * 5 + spec().alias_names() + spec().directory_names()
        );
        assert!(json.contains("\"/skydns/local/skydns/one10/i0\": {\"host\": \"10.210.0.10\", \"port\": 8080}"));
        assert!(json.contains("\"/skydns/local/skydns/alias10\": {\"host\": \"h0.svc10.skydns.local.\"}"));
        assert!(json.contains(
            "\"/skydns/local/skydns/view10\": {\"default\": [{\"host\": \"10.202.0.10\"}], \"10.0.0.0/8\": \
             [{\"host\": \"10.201.0.10\"}], \"127.0.0.0/8\": [{\"host\": \"10.200.0.10\"}]}"
        ));
    }

    #[test]
    fn the_zone_states_what_skydns_derives() {
        let zone = spec().zone_file();
        assert!(zone.contains("h3.svc19 A 10.0.0.79\n"));
        assert!(zone.contains("svc19 SRV 10 25 8080 h3.svc19\n"));
        assert!(zone.contains("svc10 SRV 10 20 8080 h4.svc10\n"));
        assert!(zone.contains("h4.svc10 AAAA 2001:db8::a\n"));
        assert!(zone.contains("info.svc0 TXT \"service 0: owner team-0, tier web\"\n"));
        assert!(zone.contains("view10 A 10.200.0.10\nsame10 A 10.200.0.10\n"));
        assert!(zone.contains("one10 A 10.210.0.10\ni0.one10 A 10.210.0.10\n"));
    }

    #[test]
    fn skydns_weights_floor_the_even_share() {
        assert_eq!(
            [srv_weight(1), srv_weight(3), srv_weight(4), srv_weight(5)],
            [100, 33, 25, 20]
        );
    }

    #[test]
    fn every_mix_parses_and_asks_for_names_in_the_zone() {
        let spec = spec();
        let zone = spec.zone_file();
        for mix in Mix::ALL {
            let text = spec.queries(mix, 100, 1);
            assert_eq!(parse_file(&text, QueryOptions::default()).unwrap().len(), 100);
            assert_eq!(text, spec.queries(mix, 100, 1));
            for line in text.lines() {
                let name = line.split(' ').next().unwrap().to_ascii_lowercase();
                let relative = name.strip_suffix(".skydns.local").unwrap();
                let exists = zone.contains(&format!("\n{relative} "));
                assert_eq!(exists, !relative.contains("nosuch"), "{line}");
            }
        }
        let nx = spec.queries(Mix::Nxdomain, 100, 1);
        assert_eq!(nx.matches("nosuch").count(), 10);
        let mixed = spec.queries(Mix::MixedCase, 100, 1);
        assert_ne!(mixed, mixed.to_ascii_lowercase());
    }
}
