//! Updates against full builds: after every batch of changes, the snapshot [`update()`] makes from
//! the one served holds exactly the names, zones and answers of a full [`build`] composed with the
//! same SkyDNS snapshot, and shares every name the changes do not reach. Chains of random changes
//! are checked, not just one step.

use super::*;
use crate::snapshot::{Slot, Zone};
use std::collections::BTreeSet;
use std::sync::Arc;

const AT: u64 = 1_700_000_000;

/// A small deterministic generator (xorshift64*), so a failure reproduces from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// Up to `most` items of `items`, repeats possible.
    fn some<T: Clone>(&mut self, items: &[T], most: usize) -> Vec<T> {
        (0..self.below(most + 1))
            .map(|_| items[self.below(items.len())].clone())
            .collect()
    }
}

/// Namespaces of services, slices and pods; `ghost` has no Namespace object.
const NAMESPACES: [&str; 3] = ["a", "b", "ghost"];
const SERVICES: [&str; 4] = ["s1", "s2", "s3", "s4"];
/// Endpoint and pod addresses. Some are cluster IPs too (`10.0.<namespace>.<service>`), and
/// SkyDNS holds the PTRs of 10.0.0.3 and 172.0.0.3 (see [`skydns_base`]), so that PTRs move
/// between owners.
const ADDRESSES: [&str; 8] = [
    "10.0.0.1",
    "10.0.0.3",
    "fd00::1:2",
    "172.0.0.1",
    "172.0.0.2",
    "172.0.0.3",
    "fd00::a",
    "fd00::b",
];
const LABELS: [&str; 3] = ["", "h1", "h2"];
const TARGETS: [&str; 5] = [
    "example.net",
    "1.2.3.4",
    "s1.a.svc.cluster.local",
    "h1.s2.a.svc.cluster.local",
    "s3.b.svc.cluster.local",
];

fn key(rng: &mut Rng, names: &[&str]) -> ObjectKey {
    ObjectKey::new(rng.pick(&NAMESPACES), rng.pick(names))
}

/// A service as `key`; its cluster IPs are its own, as the API server allocates them (two
/// services with one cluster IP would share a PTR in no defined order).
fn a_service(rng: &mut Rng, key: &ObjectKey) -> Service {
    let ns = NAMESPACES.iter().position(|n| **n == *key.namespace).unwrap_or(0);
    let svc = SERVICES.iter().position(|s| **s == *key.name).unwrap_or(0) + 1;
    let families = match rng.below(3) {
        0 => vec![format!("10.0.{ns}.{svc}")],
        1 => vec![format!("fd00::{ns}:{svc}")],
        _ => vec![format!("10.0.{ns}.{svc}"), format!("fd00::{ns}:{svc}")],
    };
    let kind = match rng.below(4) {
        0 => ServiceKind::Headless,
        1 => ServiceKind::ExternalName(rng.pick(&TARGETS).into()),
        _ => ServiceKind::ClusterIp(families.iter().map(|a| ip(a)).collect()),
    };
    let mut dns = port("dns", 53);
    dns.protocol = Protocol::Udp;
    let mut unnamed = port("", 53);
    unnamed.protocol = Protocol::Udp;
    Service {
        kind,
        ports: rng.some(&[port("http", 80), dns, unnamed], 2).into(),
    }
}

fn a_slice(rng: &mut Rng) -> EndpointSlice {
    let mut dns = port("dns", 5353);
    dns.protocol = Protocol::Udp;
    let endpoints: Vec<Endpoint> = (0..rng.below(4))
        .map(|_| {
            let hostname = Some(rng.pick(&LABELS)).filter(|h| !h.is_empty());
            let pod = Some(rng.pick(&LABELS))
                .filter(|p| !p.is_empty())
                .map(|p| format!("pod-{p}"));
            endpoint(rng.pick(&ADDRESSES), hostname, pod.as_deref())
        })
        .collect();
    EndpointSlice {
        service: rng.pick(&SERVICES).into(),
        ports: rng.some(&[port("http", 8080), dns], 2).into(),
        endpoints: endpoints.into(),
    }
}

/// Puts `value` under `key` (removes it when `None`) and returns what was there.
fn put<V>(table: &mut Objects<V>, key: &ObjectKey, value: Option<V>) -> Option<V> {
    match value {
        Some(value) => table.insert(key.clone(), value),
        None => table.remove(key),
    }
}

/// One random change to `cluster`, noted in `changes` as the source's mirror notes it.
fn change(rng: &mut Rng, cluster: &mut Cluster, changes: &mut Changes) {
    let keep = rng.below(4) != 0;
    match rng.below(12) {
        0..=3 => {
            let key = key(rng, &SERVICES);
            let service = keep.then(|| a_service(rng, &key));
            let old = put(&mut cluster.services, &key, service);
            changes.service(cluster, &key, old.as_ref());
        }
        4..=8 => {
            let name = format!("{}-{}", rng.pick(&SERVICES), rng.pick(&["x", "y"]));
            let key = ObjectKey::new(rng.pick(&NAMESPACES), &name);
            let slice = keep.then(|| a_slice(rng));
            let old = put(&mut cluster.slices, &key, slice);
            changes.slice(cluster, &key, old.as_ref());
        }
        9 | 10 => {
            let key = key(rng, &["p1", "p2", "p3"]);
            let pod = keep.then(|| Pod {
                address: ip(rng.pick(&ADDRESSES)),
            });
            let old = put(&mut cluster.pods, &key, pod);
            changes.pod(&key, old.as_ref());
        }
        _ => {
            // A Namespace comes or goes: the source builds whole.
            if !cluster.namespaces.remove("b") {
                cluster.namespaces.insert("b".into());
            }
            changes.full = true;
        }
    }
}

/// The SkyDNS snapshot the cluster zones are composed with: a name of its own and PTRs for two
/// addresses the cluster may also hold.
fn skydns_base() -> Snapshot {
    let domain = Name::from_dotted("skydns.test.").unwrap();
    let config = skydns::Config {
        hostmaster: domain.prepend("hostmaster").unwrap(),
        domain,
        ..skydns::Config::default()
    };
    let host = |host: &str| skydns::Service {
        host: host.into(),
        ..skydns::Service::default()
    };
    let records = vec![
        ("/skydns/arpa/in-addr/10/0/0/3".to_owned(), host("web.skydns.test.")),
        ("/skydns/arpa/in-addr/172/0/0/3".to_owned(), host("web.skydns.test.")),
        ("/skydns/test/skydns/web".to_owned(), host("192.0.2.1")),
    ];
    skydns::build(&config, &records, 1, UNIX_EPOCH + Duration::from_secs(AT))
}

fn rtype_of(slot: usize) -> RecordType {
    [
        RecordType::A,
        RecordType::AAAA,
        RecordType::CNAME,
        RecordType::SRV,
        RecordType::TXT,
        RecordType::MX,
        RecordType::NS,
        RecordType::SOA,
        RecordType::PTR,
    ][slot]
}

/// The reply to `name`/`rtype` as its code and sorted record lines: answers whose records
/// come in another order (slices listed in another order) read the same.
fn reply_lines(s: &Snapshot, name: &Name, rtype: RecordType) -> (ResponseCode, Vec<String>) {
    let reply = ask(s, &name.to_string(), rtype);
    let mut lines: Vec<String> = reply
        .answers()
        .iter()
        .chain(reply.additionals())
        .map(|r| r.to_string())
        .collect();
    lines.sort();
    (reply.response_code(), lines)
}

fn zone_fields(zones: &[Zone]) -> Vec<String> {
    zones.iter().map(|z| format!("{z:?}")).collect()
}

/// `updated` holds the names, zones and answers `built` holds.
fn assert_same(updated: &Snapshot, built: &Snapshot, context: &str) {
    let names = |s: &Snapshot| -> BTreeSet<String> { s.nodes.keys().map(ToString::to_string).collect() };
    assert_eq!(names(updated), names(built), "names ({context})");
    assert_eq!(updated.nodes.len(), built.nodes.len(), "count ({context})");
    assert_eq!(
        zone_fields(&updated.zones),
        zone_fields(&built.zones),
        "zones ({context})"
    );
    for (name, node) in &built.nodes {
        let other = &updated.nodes[name];
        assert_eq!((other.zone, other.below), (node.zone, node.below), "{name} ({context})");
        for slot in 0..Slot::COUNT {
            let (u, b) = (other.answers[slot].as_deref(), node.answers[slot].as_deref());
            assert_eq!(u.is_some(), b.is_some(), "{name} slot {slot} ({context})");
            if u != b {
                let rtype = rtype_of(slot);
                assert_eq!(
                    reply_lines(updated, name, rtype),
                    reply_lines(built, name, rtype),
                    "{name} {rtype} ({context})"
                );
            }
        }
    }
}

/// Whether `name`'s `slot` answer is the very one `previous` holds: carried over, not compiled.
fn shared(updated: &Snapshot, previous: &Snapshot, name: &str, slot: Slot) -> bool {
    let name = Name::from_dotted(name).unwrap();
    let answer = |s: &Snapshot| s.nodes.get(name.wire()).and_then(|n| n.answers[slot as usize].clone());
    matches!((answer(updated), answer(previous)), (Some(u), Some(p)) if Arc::ptr_eq(&u, &p))
}

fn configs() -> Vec<Config> {
    let zones = ["cluster.local.", "other.test.", "in-addr.arpa.", "ip6.arpa."];
    vec![
        Config::default(),
        Config {
            ignore_empty_service: true,
            openshift_names: true,
            ..Config::default()
        },
        Config {
            endpoint_pod_names: true,
            pods: PodMode::Verified,
            ..Config::default()
        },
        Config {
            zones: zones.iter().map(|z| Name::from_dotted(z).unwrap()).collect(),
            namespaces: vec!["a".into()],
            ttl: 30,
            fallthrough: Some(vec![Name::from_dotted("in-addr.arpa.").unwrap()]),
            pods: PodMode::Verified,
            ..Config::default()
        },
    ]
}

/// `steps` batches of random changes from seed `seed`, each update checked against a full build.
/// Returns how many updates were incremental.
fn run(config: &Config, seed: u64, steps: usize) -> usize {
    let now = UNIX_EPOCH + Duration::from_secs(AT);
    let base = skydns_base();
    let mut rng = Rng(seed);
    let mut cluster = Cluster::default();
    cluster.namespaces.extend(["a".into(), "b".into()]);
    for _ in 0..16 {
        change(&mut rng, &mut cluster, &mut Changes::default());
    }
    let mut served = compose(&base, build(config, &cluster, 1, now), 1);
    let mut incremental = 0;
    for step in 0..steps {
        let mut changes = Changes::default();
        for _ in 0..1 + rng.below(3) {
            change(&mut rng, &mut cluster, &mut changes);
        }
        let generation = step as u64 + 2;
        let updated = update(config, &cluster, &changes, &base, &served, generation, now);
        let built = compose(&base, build(config, &cluster, generation, now), generation);
        let context = format!("seed {seed}, step {step}, {config:?}");
        assert_same(&updated, &built, &context);
        if !changes.full {
            assert!(
                shared(&updated, &served, "dns-version.cluster.local.", Slot::Txt),
                "names no change reaches are carried over ({context})"
            );
            incremental += 1;
        }
        served = updated;
    }
    incremental
}

#[test]
fn random_changes_update_to_what_a_full_build_holds() {
    let mut incremental = 0;
    for config in configs() {
        for seed in 1..=12 {
            incremental += run(&config, seed, 40);
        }
    }
    assert!(
        incremental > 4 * 12 * 40 * 3 / 4,
        "only {incremental} updates incremental"
    );
}

#[test]
fn an_update_answers_exactly_as_a_full_build() {
    let base = skydns_base();
    let at = UNIX_EPOCH + Duration::from_secs(AT);
    for config in configs().into_iter().take(3) {
        let mut cluster = cluster();
        let previous = compose(&base, build(&config, &cluster, 1, at), 1);
        let mut changes = Changes::default();
        let svc1_b = ObjectKey::new("testns", "svc1-b");
        let slice = EndpointSlice {
            service: "svc1".into(),
            ports: vec![port("http", 8080)].into(),
            endpoints: vec![endpoint("172.0.0.12", None, None)].into(),
        };
        let old = cluster.slices.insert(svc1_b.clone(), slice);
        changes.slice(&cluster, &svc1_b, old.as_ref());
        let dual = ObjectKey::new("testns", "dual");
        let old = cluster.services.remove(&dual);
        changes.service(&cluster, &dual, old.as_ref());
        let new = ObjectKey::new("testns", "new");
        let service = Service {
            kind: ServiceKind::ClusterIp(vec![ip("10.0.0.7")].into()),
            ports: vec![port("http", 80)].into(),
        };
        let old = cluster.services.insert(new.clone(), service);
        changes.service(&cluster, &new, old.as_ref());
        let hdls_v4 = ObjectKey::new("testns", "hdls-v4");
        let mut slice = cluster.slices[&hdls_v4].clone();
        slice.endpoints = vec![
            endpoint("172.0.0.2", Some("pet-0"), None),
            endpoint("172.0.0.3", Some("pet-1"), None),
        ]
        .into();
        let old = cluster.slices.insert(hdls_v4.clone(), slice);
        changes.slice(&cluster, &hdls_v4, old.as_ref());
        let service = Service {
            kind: ServiceKind::ClusterIp(vec![ip("10.0.0.2")].into()),
            ports: vec![port("https", 443)].into(),
        };
        let old = cluster.services.insert(dual.clone(), service);
        changes.service(&cluster, &dual, old.as_ref());
        let dual_a = ObjectKey::new("testns", "dual-a");
        let slice = EndpointSlice {
            service: "dual".into(),
            ports: vec![port("https", 8443)].into(),
            endpoints: vec![endpoint("172.0.0.40", None, Some("dual-pod"))].into(),
        };
        let old = cluster.slices.insert(dual_a.clone(), slice);
        changes.slice(&cluster, &dual_a, old.as_ref());

        let updated = update(&config, &cluster, &changes, &base, &previous, 2, at);
        let built = compose(&base, build(&config, &cluster, 2, at), 2);
        assert_same(&updated, &built, &format!("{config:?}"));
        assert!(
            shared(&updated, &previous, "9.0.0.172.in-addr.arpa.", Slot::Ptr)
                && shared(&updated, &previous, "noports.testns.svc.cluster.local.", Slot::A),
            "untouched names keep their compiled answers"
        );
        assert_eq!(
            data(&updated, "3.0.0.172.in-addr.arpa.", RecordType::PTR),
            ["pet-1.hdls.testns.svc.cluster.local."],
            "the cluster's PTR wins over SkyDNS's"
        );
        assert_eq!(data(&updated, "web.skydns.test.", RecordType::A), ["192.0.2.1"]);
    }
}

#[test]
fn a_ptr_the_cluster_lets_go_falls_back_to_skydns() {
    let base = skydns_base();
    let at = UNIX_EPOCH + Duration::from_secs(AT);
    let config = Config::default();
    let mut cluster = cluster();
    let previous = compose(&base, build(&config, &cluster, 1, at), 1);
    assert_eq!(
        data(&previous, "3.0.0.172.in-addr.arpa.", RecordType::PTR),
        ["172-0-0-3.hdls.testns.svc.cluster.local."]
    );
    let hdls_v4 = ObjectKey::new("testns", "hdls-v4");
    let old = cluster.slices.remove(&hdls_v4);
    let mut changes = Changes::default();
    changes.slice(&cluster, &hdls_v4, old.as_ref());
    let updated = update(&config, &cluster, &changes, &base, &previous, 2, at);
    assert_eq!(
        data(&updated, "3.0.0.172.in-addr.arpa.", RecordType::PTR),
        ["web.skydns.test."]
    );
    assert_same(
        &updated,
        &compose(&base, build(&config, &cluster, 2, at), 2),
        "hdls-v4 gone",
    );
}
