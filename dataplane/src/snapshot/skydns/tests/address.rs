//! A/AAAA answers of names pointing to names (docs/skydns-semantics.md, "A and AAAA: names
//! pointing to names"): flattened by default, SkyDNS's CNAME chains with `--cname-chains`.

use super::*;

/// The configuration of `--cname-chains`.
fn chains() -> Config {
    Config {
        cname_chains: true,
        ..config()
    }
}

fn chained(records: &[(&str, Service)]) -> Snapshot {
    snapshot_with(&chains(), records)
}

fn chained_of(records: &[(String, Service)]) -> Snapshot {
    let refs: Vec<(&str, Service)> = records.iter().map(|(k, s)| (k.as_str(), s.clone())).collect();
    chained(&refs)
}

/// `c1 → c2 → … → c<len+1>`, the last one holding an address: a chain of `len` CNAMEs.
fn chain(len: usize) -> Vec<(String, Service)> {
    let mut records: Vec<(String, Service)> = (1..=len)
        .map(|i| {
            (
                format!("test/skydns/chain/c{i}"),
                host(&format!("c{}.chain.skydns.test.", i + 1)),
            )
        })
        .collect();
    records.push((format!("test/skydns/chain/c{}", len + 1), host("10.0.2.1")));
    records
}

fn snapshot_of(records: &[(String, Service)]) -> Snapshot {
    let refs: Vec<(&str, Service)> = records.iter().map(|(k, s)| (k.as_str(), s.clone())).collect();
    snapshot(&refs)
}

#[test]
fn a_name_pointing_to_a_name_answers_the_targets_addresses_at_its_own_name() {
    let snap = snapshot_of(&chain(8));
    assert_eq!(
        answers(&snap, "c1.chain.skydns.test.", RecordType::A),
        ["c1.chain.skydns.test. 3600 A 10.0.2.1"],
        "eight links are followed"
    );
    assert!(is_nodata(&snap, "c1.chain.skydns.test.", RecordType::CNAME));
    assert!(is_nodata(&snap, "c1.chain.skydns.test.", RecordType::AAAA));
}

#[test]
fn a_name_of_nine_links_answers_nothing() {
    let snap = snapshot_of(&chain(9));
    assert!(is_nodata(&snap, "c1.chain.skydns.test.", RecordType::A));
    assert_eq!(
        answers(&snap, "c2.chain.skydns.test.", RecordType::A),
        ["c2.chain.skydns.test. 3600 A 10.0.2.1"]
    );
}

/// A cache that has seen a CNAME at a name follows it for every type (RFC 2181 §10.1): a
/// directory of services with name hosts must give its SRV records, and its addresses, at its
/// own name.
#[test]
fn a_directory_of_name_hosts_answers_the_union_of_their_addresses() {
    let snap = snapshot(&[
        ("test/skydns/api/a", host("one.skydns.test.")),
        ("test/skydns/api/b", host("two.skydns.test.")),
        ("test/skydns/api/c", host("10.0.0.9")),
        ("test/skydns/one", host("10.0.0.1")),
        ("test/skydns/two/x", host("10.0.0.2")),
        ("test/skydns/two/y", host("2001:db8::2")),
    ]);
    let mut a = answers(&snap, "api.skydns.test.", RecordType::A);
    a.sort();
    assert_eq!(
        a,
        [
            "api.skydns.test. 3600 A 10.0.0.1",
            "api.skydns.test. 3600 A 10.0.0.2",
            "api.skydns.test. 3600 A 10.0.0.9",
        ]
    );
    assert_eq!(
        answers(&snap, "api.skydns.test.", RecordType::AAAA),
        ["api.skydns.test. 3600 AAAA 2001:db8::2"]
    );
    assert!(is_nodata(&snap, "api.skydns.test.", RecordType::CNAME));
    assert_eq!(answers(&snap, "api.skydns.test.", RecordType::SRV).len(), 3);
}

#[test]
fn a_flattened_answer_lives_as_long_as_the_shortest_link() {
    let snap = snapshot(&[
        (
            "test/skydns/c1",
            Service {
                host: "c2.skydns.test.".into(),
                ttl: 300,
                ..Service::default()
            },
        ),
        (
            "test/skydns/c2",
            Service {
                host: "c3.skydns.test.".into(),
                ttl: 60,
                ..Service::default()
            },
        ),
        ("test/skydns/c3", host("10.0.2.1")),
    ]);
    assert_eq!(
        answers(&snap, "c1.skydns.test.", RecordType::A),
        ["c1.skydns.test. 60 A 10.0.2.1"]
    );
}

#[test]
fn a_chain_of_eight_cnames_resolves() {
    let snap = chained_of(&chain(8));
    let lines = answers(&snap, "c1.chain.skydns.test.", RecordType::A);
    assert_eq!(lines.len(), 9);
    assert_eq!(lines[0], "c1.chain.skydns.test. 3600 CNAME c2.chain.skydns.test.");
    assert_eq!(lines[8], "c9.chain.skydns.test. 3600 A 10.0.2.1");
}

#[test]
fn a_chain_of_nine_cnames_vanishes_whole() {
    let snap = chained_of(&chain(9));
    assert!(is_nodata(&snap, "c1.chain.skydns.test.", RecordType::A));
    assert_eq!(
        answers(&snap, "c2.chain.skydns.test.", RecordType::A).len(),
        9,
        "from one step further it fits"
    );
}

#[test]
fn a_cname_loop_vanishes() {
    let snap = snapshot(&[
        ("test/skydns/c3", host("c4.skydns.test.")),
        ("test/skydns/c4", host("c3.skydns.test.")),
    ]);
    assert!(is_nodata(&snap, "c3.skydns.test.", RecordType::A));
}

/// SkyDNS answered `c3 CNAME c4`, `c4 CNAME c3` and `c3 A` together: a CNAME beside other data
/// at one owner, which RFC 1034 forbids.
#[test]
fn a_name_holding_addresses_answers_them_and_no_cname() {
    let snap = chained(&[
        ("test/skydns/c3/a", host("c4.skydns.test.")),
        ("test/skydns/c3/b", host("10.0.0.3")),
        ("test/skydns/c4", host("c3.skydns.test.")),
        ("test/skydns/mixed/a", host("2001:db8::3")),
        ("test/skydns/mixed/b", host("www.example.org.")),
    ]);
    assert_eq!(
        answers(&snap, "c3.skydns.test.", RecordType::A),
        ["c3.skydns.test. 3600 A 10.0.0.3"]
    );
    assert_eq!(
        answers(&snap, "c4.skydns.test.", RecordType::A),
        [
            "c4.skydns.test. 3600 CNAME c3.skydns.test.",
            "c3.skydns.test. 3600 A 10.0.0.3",
        ],
        "a chain reaching a name with addresses ends at them"
    );
    assert!(
        is_nodata(&snap, "mixed.skydns.test.", RecordType::A),
        "an IPv6 address keeps the name an address name for A queries too"
    );
    assert_eq!(
        answers(&snap, "mixed.skydns.test.", RecordType::AAAA),
        ["mixed.skydns.test. 3600 AAAA 2001:db8::3"]
    );
}

#[test]
fn a_record_aliasing_its_own_lookup_name_is_skipped() {
    let snap = snapshot(&[
        ("test/skydns/d/self", host("d.skydns.test.")),
        ("test/skydns/d/ip", host("10.0.0.1")),
    ]);
    assert_eq!(
        answers(&snap, "d.skydns.test.", RecordType::A),
        ["d.skydns.test. 3600 A 10.0.0.1"]
    );
}

#[test]
fn a_cname_to_a_missing_name_inside_the_domain_vanishes() {
    let snap = snapshot(&[("test/skydns/alias", host("missing.skydns.test."))]);
    assert!(is_nodata(&snap, "alias.skydns.test.", RecordType::A));
}

/// SkyDNS drops a chain whose target its lookups cannot complete; without forwarding nothing
/// completes one leaving the domain (`forward/recursive.rs`'s tests cover the completion).
#[test]
fn a_cname_outside_the_domain_is_dropped_without_forwarding() {
    let snap = snapshot(&[
        ("test/skydns/alias", host("www.example.org")),
        ("test/skydns/via", host("alias.skydns.test.")),
    ]);
    assert!(is_nodata(&snap, "alias.skydns.test.", RecordType::A));
    assert!(is_nodata(&snap, "alias.skydns.test.", RecordType::AAAA));
    assert!(
        is_nodata(&snap, "via.skydns.test.", RecordType::A),
        "nor a chain through it"
    );
}

#[test]
fn a_cname_is_chased_for_the_asked_family_only() {
    let snap = chained(&[
        ("test/skydns/alias", host("target.skydns.test.")),
        ("test/skydns/target/v4", host("10.0.0.1")),
        ("test/skydns/target/v6", host("2001:db8::1")),
    ]);
    assert_eq!(
        answers(&snap, "alias.skydns.test.", RecordType::AAAA),
        [
            "alias.skydns.test. 3600 CNAME target.skydns.test.",
            "target.skydns.test. 3600 AAAA 2001:db8::1"
        ]
    );
}

#[test]
fn a_chain_takes_the_smallest_ttl_of_its_records() {
    let snap = snapshot(&[
        ("test/skydns/c1", host("c2.skydns.test.")),
        (
            "test/skydns/c2",
            Service {
                host: "10.0.2.1".into(),
                ttl: 30,
                ..Service::default()
            },
        ),
    ]);
    assert!(ask(&snap, "c1.skydns.test.", RecordType::A)
        .answers()
        .iter()
        .all(|r| r.ttl() == 30));
}

#[test]
fn two_aliases_of_one_owner_keep_the_first_by_key_order() {
    let snap = chained(&[
        ("test/skydns/d/b", host("two.skydns.test.")),
        ("test/skydns/d/a", host("one.skydns.test.")),
        ("test/skydns/one", host("10.0.0.1")),
        ("test/skydns/two", host("10.0.0.2")),
    ]);
    assert_eq!(
        answers(&snap, "d.skydns.test.", RecordType::A),
        [
            "d.skydns.test. 3600 CNAME one.skydns.test.",
            "one.skydns.test. 3600 A 10.0.0.1"
        ]
    );
}

#[test]
fn a_fan_out_of_distinct_chains_is_bounded_and_answered_as_too_large() {
    // Every name of level n points to all three names of level n+1, and level 8 holds nothing:
    // finding that none leads anywhere tries 3^8 distinct chains.
    let mut records: Vec<(String, Service)> = Vec::new();
    for level in 0..8 {
        for i in 0..3 {
            for j in 0..3 {
                let target = format!("t{j}.l{}.skydns.test.", level + 1);
                records.push((format!("test/skydns/l{level}/t{i}/{j}"), host(&target)));
            }
        }
    }
    records.push(("test/skydns/other".to_owned(), host("10.0.0.8")));
    let snap = snapshot_of(&records);
    let node = snap
        .node(Name::from_dotted("t0.l0.skydns.test.").unwrap().wire())
        .unwrap();
    assert!(node.answer(crate::snapshot::Slot::A).unwrap().overflow());
    assert!(
        is_nodata(&snap, "t0.l6.skydns.test.", RecordType::A),
        "a short search still answers"
    );
}
