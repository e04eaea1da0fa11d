//! Incremental updates against full builds: after every batch of random changes, the snapshot
//! [`update`] makes from the previous one holds exactly the names and answers a full [`build`]
//! of the same records holds. Chains of updates are checked, not just one step.

use super::{build, config, Config, Service};
use crate::signer::update;
use crate::snapshot::skydns::key::path_of;
use crate::snapshot::skydns::{typed, Value, ViewKey, LARGE};
use crate::snapshot::test_rng::Rng;
use crate::snapshot::{Nodes, Slot, Snapshot};
use crate::wire::Name;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

const DIRS: [&str; 6] = ["a", "b", "b/x", "c/y/z", "dns/ns", "mail"];
const LEAVES: [&str; 5] = ["w1", "w2", "w3", "*", "any"];

/// Keys in the reverse trees: leaves, a directory above two of them with its own key and its
/// `.self` key, and an IPv6 one.
const REVERSE: [&str; 6] = [
    "/skydns/arpa/in-addr/10/0/0/1",
    "/skydns/arpa/in-addr/10/0/0/2",
    "/skydns/arpa/in-addr/10/0/0",
    "/skydns/arpa/in-addr/10/0/0/.self",
    "/skydns/arpa/in-addr/10/0/0/1/x",
    "/skydns/arpa/ip6/2/0/0/1",
];

/// A key below the domain: a directory, sometimes a leaf under it, its `.self` key or its
/// `.wildcards` marker; one time in seven, a key in the reverse trees.
fn key(rng: &mut Rng) -> String {
    if rng.below(7) == 0 {
        return rng.pick(&REVERSE).to_owned();
    }
    let dir = rng.pick(&DIRS);
    match rng.below(6) {
        0 => format!("/skydns/test/skydns/{dir}"),
        1 => format!("/skydns/test/skydns/{dir}/{}", rng.pick(&[".self", ".wildcards"])),
        _ => format!("/skydns/test/skydns/{dir}/{}", rng.pick(&LEAVES[..3])),
    }
}

/// A value of any kind the builder distinguishes: addresses, name hosts inside and outside the
/// domain (chains, loops, wildcards, stripped targets), text, mail, groups and repeats.
fn service(rng: &mut Rng) -> Service {
    let hosts = [
        "10.0.0.1",
        "10.0.0.2",
        "2001:db8::1",
        "",
        "w1.a.skydns.test",
        "b.skydns.test",
        "x.b.skydns.test",
        "w2.x.b.skydns.test",
        "z.y.c.skydns.test",
        "*.b.skydns.test",
        "any.a.skydns.test",
        "mail.skydns.test",
        "www.example.org",
    ];
    Service {
        host: rng.pick(&hosts).into(),
        port: [0, 80, 443][rng.below(3)],
        priority: [0, 10, 20][rng.below(3)],
        weight: [0, 50][rng.below(2)],
        text: ["", "hello", "world"][rng.below(3)].into(),
        mail: rng.below(3) == 0,
        ttl: [0, 30, 300][rng.below(3)],
        target_strip: [0, 0, 1][rng.below(3)],
        group: ["", "", "g1", "g2"][rng.below(4)].into(),
    }
}

/// What `key` holds: a marker for a `.wildcards` key, else a record or, one time in four, a
/// view map of nested and disjoint prefixes of both families.
fn value(rng: &mut Rng, key: &str) -> Value {
    if key.ends_with("/.wildcards") {
        return Value::Marker;
    }
    if rng.below(4) != 0 {
        return Value::Record(service(rng));
    }
    let keys = [
        "default",
        "10.0.0.0/8",
        "10.1.0.0/16",
        "192.168.0.0/16",
        "2001:db8::/32",
    ];
    let mut lists: Vec<(ViewKey, Vec<Service>)> = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let view = match rng.pick(&keys) {
            "default" => ViewKey::Default,
            prefix => ViewKey::Prefix(prefix.parse().unwrap()),
        };
        if lists.iter().all(|(k, _)| *k != view) {
            let records = (0..rng.below(3)).map(|_| service(rng)).collect();
            lists.push((view, records));
        }
    }
    Value::Views(lists)
}

fn assert_same(updated: &Snapshot, built: &Snapshot, seed: u64, step: usize) {
    // Which names are leaves is part of what must agree.
    let names = |s: &Snapshot| -> BTreeMap<String, bool> {
        let index = s.skydns.as_deref().unwrap();
        let nodes = s.nodes.iter().map(|(n, _)| (n.to_string(), false));
        nodes
            .chain(s.leaves.nodes(index).map(|(n, _)| (n.to_string(), true)))
            .collect()
    };
    assert_eq!(names(updated), names(built), "names differ (seed {seed}, step {step})");
    assert_eq!(updated.leaves.len(), built.leaves.len());
    let all = |s: &Snapshot| -> Nodes {
        let mut nodes = s.nodes.clone();
        for (name, node) in s.leaves.nodes(s.skydns.as_deref().unwrap()) {
            nodes.insert(name, node);
        }
        nodes
    };
    let (updated_all, built_all) = (all(updated), all(built));
    for (name, node) in built_all.iter() {
        let other = updated_all.get(name.wire()).unwrap();
        assert_eq!(other.zone(), node.zone(), "{name}: zone (seed {seed}, step {step})");
        for slot in Slot::ALL {
            assert_eq!(
                other.answer(slot),
                node.answer(slot),
                "{name}: slot {slot:?} (seed {seed}, step {step})"
            );
        }
        assert_eq!(other.views(), node.views(), "{name}: views (seed {seed}, step {step})");
    }
    assert_eq!(updated.zones.len(), built.zones.len());
    for (u, b) in updated.zones.iter().zip(built.zones.iter()) {
        assert_eq!((&u.apex, &u.soa_rdata), (&b.apex, &b.soa_rdata));
    }
    let (u, b) = (updated.skydns.as_ref().unwrap(), built.skydns.as_ref().unwrap());
    assert_eq!(u.len(), b.len(), "records (seed {seed}, step {step})");
}

fn run(config: &Config, seed: u64, steps: usize) -> usize {
    let now = UNIX_EPOCH + Duration::from_secs(1_700_001_234);
    let mut rng = Rng(seed);
    let mut records: BTreeMap<String, Value> = BTreeMap::new();
    for _ in 0..20 {
        let key = key(&mut rng);
        let value = value(&mut rng, &key);
        records.insert(key, value);
    }
    let table = |r: &BTreeMap<String, Value>| -> Vec<(String, Value)> {
        r.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    let mut previous = build(config, &table(&records), 1, now);
    let mut applied = 0;
    for step in 0..steps {
        let mut changed = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let key = key(&mut rng);
            match rng.below(3) {
                0 => {
                    records.remove(&key);
                }
                _ => {
                    let value = value(&mut rng, &key);
                    records.insert(key.clone(), value);
                }
            }
            changed.push(key);
        }
        changed.sort();
        changed.dedup();
        let current = table(&records);
        let built = build(config, &current, step as u64 + 2, now);
        previous = match update(
            &previous,
            config,
            &Arc::new(typed(config, &current).0),
            &changed,
            &[],
            step as u64 + 2,
            now,
        ) {
            Some(updated) => {
                assert!(updated.stale.is_empty(), "no name of these tables is large");
                assert_same(&updated.snapshot, &built, seed, step);
                applied += 1;
                updated.snapshot
            }
            None => built,
        };
    }
    applied
}

#[test]
fn random_changes_update_to_what_a_full_build_holds() {
    let mut applied = 0;
    for seed in 1..=30 {
        applied += run(&config(), seed, 50);
    }
    assert!(
        applied > 30 * 50 * 9 / 10,
        "only {applied} updates applied incrementally"
    );
}

#[test]
fn random_changes_update_alike_when_directories_need_a_marker() {
    let config = Config {
        wildcards_marker: true,
        ..config()
    };
    for seed in 200..=215 {
        run(&config, seed, 50);
    }
}

#[test]
fn the_local_alias_follows_its_target_through_updates() {
    let config = Config {
        local: Some(Name::from_dotted("w1.a.skydns.test.").unwrap()),
        ..config()
    };
    for seed in 100..=110 {
        run(&config, seed, 50);
    }
}

#[test]
fn a_change_outside_the_domain_keeps_every_node_case_variants_build_whole_and_reverse_keys_do_not() {
    let now = UNIX_EPOCH + Duration::from_secs(1_700_001_234);
    let config = config();
    let mut records = vec![("/skydns/test/skydns/a".to_owned(), super::host("10.0.0.1"))];
    let previous = build(&config, &records, 1, now);
    records.push(("/skydns/org/example/x".to_owned(), super::host("10.0.0.2")));
    let next = update(
        &previous,
        &config,
        &Arc::new(typed(&config, &records).0),
        &["/skydns/org/example/x".into()],
        &[],
        2,
        now,
    )
    .unwrap()
    .snapshot;
    assert_eq!(next.nodes.len(), previous.nodes.len());
    records.push(("/skydns/test/skydns/A".to_owned(), super::host("10.0.0.3")));
    records.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(update(
        &next,
        &config,
        &Arc::new(typed(&config, &records).0),
        &["/skydns/test/skydns/A".into()],
        &[],
        3,
        now
    )
    .is_none());
    records.push(("/skydns/arpa/in-addr/10/0/0/1".to_owned(), super::host("a.skydns.test")));
    records.sort_by(|a, b| a.0.cmp(&b.0));
    let reverse = update(
        &next,
        &config,
        &Arc::new(typed(&config, &records).0),
        &["/skydns/arpa/in-addr/10/0/0/1".into()],
        &[],
        3,
        now,
    )
    .expect("a reverse key updates alone")
    .snapshot;
    assert_eq!(reverse.nodes.len(), next.nodes.len() + 1, "its PTR name, nothing else");
}

#[test]
fn case_variants_of_a_changed_key_count_their_path_once() {
    let now = UNIX_EPOCH + Duration::from_secs(1_700_001_234);
    let config = config();
    let mut records = vec![
        ("/skydns/test/skydns/a".to_owned(), super::host("10.0.0.1")),
        ("/skydns/test/skydns/b".to_owned(), super::host("10.0.0.2")),
    ];
    let previous = build(&config, &records, 1, now);
    records.remove(0);
    let changed = ["/skydns/test/skydns/A".to_owned(), "/skydns/test/skydns/a".to_owned()];
    let updated = update(
        &previous,
        &config,
        &Arc::new(typed(&config, &records).0),
        &changed,
        &[],
        2,
        now,
    )
    .unwrap()
    .snapshot;
    assert_same(&updated, &build(&config, &records, 2, now), 0, 0);
    let next = ("/skydns/test/skydns/c".to_owned(), super::host("10.0.0.3"));
    records.push(next.clone());
    let changed = [next.0];
    let again = update(
        &updated,
        &config,
        &Arc::new(typed(&config, &records).0),
        &changed,
        &[],
        3,
        now,
    )
    .unwrap()
    .snapshot;
    assert_same(&again, &build(&config, &records, 3, now), 0, 1);
}

#[test]
fn the_first_and_last_record_of_a_kind_update_like_a_full_build() {
    let now = UNIX_EPOCH + Duration::from_secs(1_700_001_234);
    let config = config();
    let plain = |i: u8| {
        (
            format!("/skydns/test/skydns/d/r{i}"),
            super::host(&format!("10.0.0.{i}")),
        )
    };
    let mut records: Vec<(String, Service)> = (1..=5).map(plain).collect();
    let mut previous = build(&config, &records, 1, now);
    let rich = Service {
        host: "2001:db8::7".into(),
        text: "only text".into(),
        mail: true,
        group: "g".into(),
        ..Service::default()
    };
    let key = "/skydns/test/skydns/d/rich".to_owned();
    for (step, put) in [Some(rich), None].into_iter().enumerate() {
        records.retain(|(k, _)| *k != key);
        if let Some(service) = put {
            records.push((key.clone(), service));
            records.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let built = build(&config, &records, step as u64 + 2, now);
        let updated = update(
            &previous,
            &config,
            &Arc::new(typed(&config, &records).0),
            std::slice::from_ref(&key),
            &[],
            step as u64 + 2,
            now,
        )
        .unwrap()
        .snapshot;
        assert_same(&updated, &built, 0, step);
        previous = updated;
    }
}

#[test]
fn a_large_name_stays_as_it_was_until_its_catch_up_and_then_equals_a_full_build() {
    let now = UNIX_EPOCH + Duration::from_secs(1_700_001_234);
    let config = config();
    let record = |i: usize| {
        (
            format!("/skydns/test/skydns/big/r{i:05}"),
            super::host(&format!("10.{}.{}.{}", i >> 16, (i >> 8) & 0xFF, i & 0xFF)),
        )
    };
    let mut records: Vec<(String, Service)> = (0..=LARGE).map(record).collect();
    records.push(("/skydns/test/skydns/small/a".to_owned(), super::host("10.255.0.1")));
    records.sort_by(|a, b| a.0.cmp(&b.0));
    let previous = build(&config, &records, 1, now);
    let moved = records.iter().position(|(k, _)| k.ends_with("r00007")).unwrap();
    records[moved].1 = super::host("10.255.0.7");
    let changed = [records[moved].0.clone(), "/skydns/test/skydns/small/a".to_owned()];
    records.retain(|(k, _)| !k.ends_with("small/a"));
    let table = Arc::new(typed(&config, &records).0);
    let updated = update(&previous, &config, &table, &changed, &[], 2, now).unwrap();
    let big = Name::from_dotted("big.skydns.test.").unwrap();
    let apex = Name::from_dotted("skydns.test.").unwrap();
    let mut stale = updated.stale.clone();
    stale.sort();
    let mut expected = vec![path_of(&apex), path_of(&big)];
    expected.sort();
    assert_eq!(stale, expected, "the domain and big/ hold more than LARGE records");
    for name in [&big, &apex] {
        assert_eq!(
            updated.snapshot.nodes.get(name.wire()),
            previous.nodes.get(name.wire()),
            "{name} answers as before the change"
        );
    }
    let gone = Name::from_dotted("small.skydns.test.").unwrap();
    assert!(previous.nodes.get(gone.wire()).is_some());
    assert!(
        updated.snapshot.nodes.get(gone.wire()).is_none(),
        "a small name follows at once"
    );
    let caught_up = update(&updated.snapshot, &config, &table, &[], &updated.stale, 3, now).unwrap();
    assert!(caught_up.stale.is_empty());
    assert_same(&caught_up.snapshot, &build(&config, &records, 3, now), 0, 0);
}

#[test]
fn a_leaf_of_a_depth_no_leaf_had_is_found_once_an_update_adds_it() {
    let now = UNIX_EPOCH + Duration::from_secs(1_700_001_234);
    let config = config();
    let mut records: Vec<(String, Service)> = (1..=3)
        .map(|i| {
            (
                format!("/skydns/test/skydns/d/r{i}"),
                super::host(&format!("10.0.0.{i}")),
            )
        })
        .collect();
    let previous = build(&config, &records, 1, now);
    let solo = "/skydns/test/skydns/solo".to_owned();
    records.push((solo.clone(), super::host("10.0.9.9")));
    records.sort_by(|a, b| a.0.cmp(&b.0));
    let updated = update(
        &previous,
        &config,
        &Arc::new(typed(&config, &records).0),
        std::slice::from_ref(&solo),
        &[],
        2,
        now,
    )
    .unwrap()
    .snapshot;
    let lower = |name: &str| crate::wire::LowerName::from_wire(Name::from_dotted(name).unwrap().wire()).unwrap();
    let (leaf, _) = updated
        .leaf(&lower("solo.skydns.test."))
        .expect("a leaf one label above the others");
    assert_eq!(leaf.v4(), Some(std::net::Ipv4Addr::new(10, 0, 9, 9)));
    assert!(updated.leaf(&lower("r2.d.skydns.test.")).is_some());
    assert!(previous.leaf(&lower("solo.skydns.test.")).is_none());
    assert_same(&updated, &build(&config, &records, 2, now), 0, 0);
}
