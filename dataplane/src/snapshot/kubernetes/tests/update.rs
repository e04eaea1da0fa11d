//! Updates against full builds: after every batch of changes, of the cluster or of the SkyDNS
//! records, the snapshot [`update()`] makes from the one served holds exactly the names, zones and
//! answers of a full [`build`] composed with the same SkyDNS snapshot, and shares every name the
//! changes do not reach. Chains of random changes are checked, not just one step.

use super::*;
use crate::snapshot::test_rng::Rng;
use crate::snapshot::{Node, Slot, Zone};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const AT: u64 = 1_700_000_000;

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
            // A Namespace comes or goes, with everything in it.
            let existed = cluster.namespaces.remove("b");
            if !existed {
                cluster.namespaces.insert("b".into());
            }
            changes.namespace(cluster, "b", existed);
        }
    }
}

fn skydns_config(domain: &str) -> skydns::Config {
    let domain = Name::from_dotted(domain).unwrap();
    skydns::Config {
        hostmaster: domain.prepend("hostmaster").unwrap(),
        domain,
        ..skydns::Config::default()
    }
}

fn host(host: &str) -> skydns::Service {
    skydns::Service {
        host: host.into(),
        ..skydns::Service::default()
    }
}

/// The SkyDNS snapshot the cluster zones are composed with: a name of its own and PTRs for two
/// addresses the cluster may also hold.
fn skydns_base() -> Snapshot {
    let records = vec![
        ("/skydns/arpa/in-addr/10/0/0/3".to_owned(), host("web.skydns.test.")),
        ("/skydns/arpa/in-addr/172/0/0/3".to_owned(), host("web.skydns.test.")),
        ("/skydns/test/skydns/web".to_owned(), host("192.0.2.1")),
    ];
    skydns::build(
        &skydns_config("skydns.test."),
        &records,
        1,
        UNIX_EPOCH + Duration::from_secs(AT),
    )
}

/// The served snapshot after `changes`, as the source makes it: by [`update()`] where it can,
/// else composed from a full build. Also says which it was.
fn next(
    config: &Config,
    cluster: &Cluster,
    changes: &Changes,
    base: &Snapshot,
    served: Served<'_>,
    generation: u64,
) -> (Snapshot, bool) {
    let now = UNIX_EPOCH + Duration::from_secs(AT);
    match update(config, cluster, changes, base, served, generation, now) {
        Some(updated) => (updated, true),
        None => (
            compose(base, build(config, cluster, generation, now), generation),
            false,
        ),
    }
}

fn rtype_of(slot: Slot) -> RecordType {
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
    ][slot as usize]
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

/// Every name of `s` with its node, those of the tables as the nodes they stand for.
fn every_node(s: &Snapshot) -> BTreeMap<String, (Name, Node)> {
    s.nodes
        .iter()
        .map(|(name, node)| (name.clone(), node.clone()))
        .chain(s.hosts.nodes())
        .map(|(name, node)| (name.to_string(), (name, node)))
        .collect()
}

/// `updated` holds the names, zones and answers `built` holds, each name in the same form
/// (a node, or in the tables).
fn assert_same(updated: &Snapshot, built: &Snapshot, context: &str) {
    let names = |s: &Snapshot| -> BTreeSet<String> { s.nodes.keys().map(ToString::to_string).collect() };
    assert_eq!(names(updated), names(built), "names ({context})");
    assert_eq!(updated.nodes.len(), built.nodes.len(), "count ({context})");
    let (every_updated, every_built) = (every_node(updated), every_node(built));
    assert_eq!(
        every_updated.keys().collect::<Vec<_>>(),
        every_built.keys().collect::<Vec<_>>(),
        "names in the tables ({context})"
    );
    assert_eq!(
        updated.hosts.len(),
        built.hosts.len(),
        "count in the tables ({context})"
    );
    assert_eq!(
        zone_fields(&updated.zones),
        zone_fields(&built.zones),
        "zones ({context})"
    );
    for (name, node) in every_built.values() {
        let other = &every_updated[&name.to_string()].1;
        assert_eq!(
            (other.zone(), other.below(), other.underscores_optional()),
            (node.zone(), node.below(), node.underscores_optional()),
            "{name} ({context})"
        );
        for slot in Slot::ALL {
            let (u, b) = (other.answer(slot), node.answer(slot));
            assert_eq!(u.is_some(), b.is_some(), "{name} slot {slot:?} ({context})");
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

/// Whether `name`'s `slot` answer is the very one `previous` holds: carried over, not compiled
/// (for a name of the tables, its entry in a shard both share).
fn shared(updated: &Snapshot, previous: &Snapshot, name: &str, slot: Slot) -> bool {
    let name = Name::from_dotted(name).unwrap();
    let answer = |s: &Snapshot| {
        s.nodes
            .get(name.wire())
            .and_then(|n| n.answer(slot))
            .map(|a| a.bytes().as_ptr())
    };
    let qname = LowerName::from_wire(name.wire()).unwrap();
    let entry = |s: &Snapshot| s.host(&qname).map(|host| host.entry_address());
    matches!((answer(updated), answer(previous)), (Some(u), Some(p)) if u == p)
        || matches!((entry(updated), entry(previous)), (Some(u), Some(p)) if u == p)
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
        let was = Served {
            snapshot: &served,
            base: &base,
        };
        let (updated, incrementally) = next(config, &cluster, &changes, &base, was, generation);
        let built = compose(&base, build(config, &cluster, generation, now), generation);
        let context = format!("seed {seed}, step {step}, {config:?}");
        assert_same(&updated, &built, &context);
        assert_eq!(incrementally, !changes.full, "{context}");
        if incrementally {
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

        let was = Served {
            snapshot: &previous,
            base: &base,
        };
        let updated = update(&config, &cluster, &changes, &base, was, 2, at).unwrap();
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
    let was = Served {
        snapshot: &previous,
        base: &base,
    };
    let updated = update(&config, &cluster, &changes, &base, was, 2, at).unwrap();
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

/// The SkyDNS keys the random SkyDNS changes pick from: names of the domain, PTRs of addresses
/// the cluster also holds or may hold (both families), a partial reverse name, and a PTR the
/// cluster never holds.
fn skydns_keys() -> Vec<String> {
    let ip6 = |address: &str| {
        let name = names::reverse(ip(address)).to_string();
        let labels: Vec<&str> = name.trim_end_matches('.').split('.').rev().collect();
        format!("/skydns/{}", labels.join("/"))
    };
    vec![
        "/skydns/test/skydns/web".to_owned(),
        "/skydns/test/skydns/api/x".to_owned(),
        "/skydns/test/skydns/api/y".to_owned(),
        "/skydns/arpa/in-addr/10/0/0/3".to_owned(),
        "/skydns/arpa/in-addr/172/0/0/1".to_owned(),
        "/skydns/arpa/in-addr/172/0/0/3".to_owned(),
        "/skydns/arpa/in-addr/172/0/0".to_owned(),
        "/skydns/arpa/in-addr/192/0/2/99".to_owned(),
        ip6("fd00::a"),
        ip6("fd00::1:2"),
    ]
}

/// One random change of the SkyDNS records: a key set, changed or removed.
fn skydns_change(rng: &mut Rng, records: &mut Vec<(String, skydns::Service)>) {
    let keys = skydns_keys();
    let key = keys[rng.below(keys.len())].clone();
    records.retain(|(k, _)| *k != key);
    if rng.below(3) != 0 {
        let value = if key.contains("/arpa/") {
            host(rng.pick(&["web.skydns.test.", "api.skydns.test."]))
        } else {
            host(rng.pick(&["192.0.2.1", "192.0.2.2", "2001:db8::1"]))
        };
        records.push((key, value));
    }
}

/// Like [`run`], with the SkyDNS records changing too, alone or with the cluster, each SkyDNS
/// snapshot built anew (its SOA serial moving) as a records-file reload makes it. Returns how
/// many SkyDNS changes were applied without a full build.
fn run_with_skydns(config: &Config, seed: u64, steps: usize) -> usize {
    let now = UNIX_EPOCH + Duration::from_secs(AT);
    let skydns_config = skydns_config("skydns.test.");
    let mut rng = Rng(seed);
    let mut records = Vec::new();
    for _ in 0..6 {
        skydns_change(&mut rng, &mut records);
    }
    let mut base = Arc::new(skydns::build(&skydns_config, &records, 1, now));
    let mut cluster = Cluster::default();
    cluster.namespaces.extend(["a".into(), "b".into()]);
    for _ in 0..16 {
        change(&mut rng, &mut cluster, &mut Changes::default());
    }
    let mut served = compose(&base, build(config, &cluster, 1, now), 1);
    let mut rebased = 0;
    for step in 0..steps {
        let generation = step as u64 + 2;
        let mut changes = Changes::default();
        let what = rng.below(3);
        if what != 0 {
            for _ in 0..1 + rng.below(3) {
                skydns_change(&mut rng, &mut records);
            }
        }
        if what != 1 {
            for _ in 0..1 + rng.below(2) {
                change(&mut rng, &mut cluster, &mut changes);
            }
        }
        let previous_base = Arc::clone(&base);
        if what != 0 {
            let at = now + Duration::from_secs(step as u64);
            base = Arc::new(skydns::build(&skydns_config, &records, generation, at));
        }
        let was = Served {
            snapshot: &served,
            base: &previous_base,
        };
        let (updated, incrementally) = next(config, &cluster, &changes, &base, was, generation);
        let built = compose(&base, build(config, &cluster, generation, now), generation);
        let context = format!("seed {seed}, step {step}, {records:?}, {config:?}");
        assert_same(&updated, &built, &context);
        assert_eq!(incrementally, !changes.full, "{context}");
        if incrementally && what != 0 {
            rebased += 1;
        }
        served = updated;
    }
    rebased
}

#[test]
fn skydns_changes_update_to_what_a_full_build_holds() {
    let mut rebased = 0;
    for config in configs() {
        for seed in 1..=10 {
            rebased += run_with_skydns(&config, seed, 30);
        }
    }
    assert!(
        rebased > 4 * 10 * 30 / 2,
        "only {rebased} SkyDNS changes without a full build"
    );
}

#[test]
fn a_skydns_change_keeps_the_cluster_names_and_ptrs() {
    let at = UNIX_EPOCH + Duration::from_secs(AT);
    let config = Config::default();
    let cluster = cluster();
    let before = skydns_base();
    let previous = compose(&before, build(&config, &cluster, 1, at), 1);
    let records = vec![
        ("/skydns/arpa/in-addr/10/0/0/3".to_owned(), host("web.skydns.test.")),
        ("/skydns/arpa/in-addr/172/0/0/3".to_owned(), host("api.skydns.test.")),
        ("/skydns/arpa/in-addr/192/0/2/2".to_owned(), host("api.skydns.test.")),
        ("/skydns/test/skydns/web".to_owned(), host("192.0.2.2")),
    ];
    let later = at + Duration::from_secs(60);
    let base = skydns::build(&skydns_config("skydns.test."), &records, 2, later);
    let was = Served {
        snapshot: &previous,
        base: &before,
    };
    let updated = update(&config, &cluster, &Changes::default(), &base, was, 2, at).unwrap();
    assert_same(
        &updated,
        &compose(&base, build(&config, &cluster, 2, at), 2),
        "records changed",
    );
    assert_eq!(data(&updated, "web.skydns.test.", RecordType::A), ["192.0.2.2"]);
    assert_eq!(
        data(&updated, "2.2.0.192.in-addr.arpa.", RecordType::PTR),
        ["api.skydns.test."]
    );
    assert_eq!(
        data(&updated, "3.0.0.172.in-addr.arpa.", RecordType::PTR),
        ["172-0-0-3.hdls.testns.svc.cluster.local."],
        "the cluster's PTR still wins"
    );
    assert!(
        shared(&updated, &previous, "svc1.testns.svc.cluster.local.", Slot::A)
            && shared(&updated, &previous, "9.0.0.172.in-addr.arpa.", Slot::Ptr),
        "the cluster's names are carried over"
    );
}

#[test]
fn skydns_names_inside_a_cluster_zone_or_new_skydns_zones_build_whole() {
    let at = UNIX_EPOCH + Duration::from_secs(AT);
    let config = Config::default();
    let cluster = cluster();
    for (domain, key) in [
        ("cluster.local.", "/skydns/local/cluster/web"),
        ("other.test.", "/skydns/test/other/web"),
    ] {
        let before = skydns_base();
        let previous = compose(&before, build(&config, &cluster, 1, at), 1);
        let records = vec![(key.to_owned(), host("192.0.2.9"))];
        let base = skydns::build(&skydns_config(domain), &records, 2, at);
        let was = Served {
            snapshot: &previous,
            base: &before,
        };
        assert!(
            update(&config, &cluster, &Changes::default(), &base, was, 2, at).is_none(),
            "{domain}"
        );
    }
}
