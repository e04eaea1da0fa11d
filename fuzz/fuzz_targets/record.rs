//! Any bytes as an etcd value: through the control plane's record parser, and when it accepts
//! the value, into the SkyDNS builder beside the fixture's records (as a leaf, inside a
//! directory, as a name server and as a reverse entry), then every question about the names it
//! touches over UDP and TCP. Nothing may panic, and every reply must keep the properties in
//! `skyline_fuzz::check` and parse with hickory-proto.

#![no_main]

use libfuzzer_sys::fuzz_target;
use skyline_controlplane::skydns::parse_record;
use skyline_dataplane::snapshot::skydns::Service;
use skyline_dataplane::snapshot::Slot;
use skyline_dataplane::wire::types::{class, rtype, MAX_MESSAGE_LEN};
use skyline_dataplane::wire::Name;
use skyline_dataplane::Transport;
use skyline_fuzz::{check, fixture, query};
use std::sync::OnceLock;

/// Keys the fuzzed value is stored under.
const KEYS: &[&str] = &[
    "/skydns/local/skydns/fuzz/x",
    "/skydns/local/skydns/fuzz/sub/y",
    "/skydns/local/skydns/dns/ns/fuzz",
    "/skydns/arpa/in-addr/10/9/9/9",
];

/// Names asked about: the keys' names, their directories, a wildcard over them, the apex.
const NAMES: &[&str] = &[
    "x.fuzz.skydns.local.",
    "y.sub.fuzz.skydns.local.",
    "fuzz.skydns.local.",
    "*.fuzz.skydns.local.",
    "ns.dns.skydns.local.",
    "skydns.local.",
    "9.9.9.10.in-addr.arpa.",
];

/// Types asked for at every name: those a name answers from its data, and ANY.
fn qtypes() -> impl Iterator<Item = u16> {
    Slot::QTYPES.into_iter().chain([rtype::ANY])
}

fn base() -> &'static [(String, Service)] {
    static BASE: OnceLock<Vec<(String, Service)>> = OnceLock::new();
    BASE.get_or_init(|| fixture::parse_all(&fixture::small_records()))
}

fn names(service: &Service) -> Vec<Name> {
    let mut names: Vec<Name> = NAMES
        .iter()
        .map(|n| Name::from_dotted(n).expect("static name"))
        .collect();
    names.extend(Name::from_dotted(&service.host).ok());
    names
}

fuzz_target!(|data: &[u8]| {
    let Ok(service) = parse_record(data) else {
        return;
    };
    let mut records = base().to_vec();
    records.extend(KEYS.iter().map(|k| (k.to_string(), service.clone())));
    records.sort_by(|a, b| a.0.cmp(&b.0));
    let snapshot = fixture::build_snapshot(&records);
    let mut out = vec![0u8; MAX_MESSAGE_LEN];
    for name in names(&service) {
        for qtype in qtypes() {
            // UDP without EDNS has the tightest limit (512 bytes), TCP the loosest.
            for (edns, transport) in [(false, Transport::Udp), (true, Transport::Tcp)] {
                let q = query::plain(name.wire(), qtype, class::IN, edns);
                if let Some(reply) = check::answered(&q, &snapshot, transport, 1, &mut out) {
                    check::hickory(reply);
                }
            }
        }
    }
});
