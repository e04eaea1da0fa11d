//! `*` and `any` query labels (docs/skydns-semantics.md, "Query wildcards").

use super::*;

fn regions() -> Snapshot {
    snapshot(&[
        ("test/skydns/region1/development/server1", host("10.0.4.1")),
        ("test/skydns/region1/development/server2", host("10.0.4.2")),
        ("test/skydns/region1/production/server1", host("10.0.4.3")),
        ("test/skydns/region1/production/server2/extra", host("10.0.4.4")),
        ("test/skydns/region1/short", host("10.0.4.5")),
        ("test/skydns/region2/production/server1", host("10.0.5.1")),
    ])
}

#[test]
fn a_wildcard_matches_any_label_and_owners_are_the_query_name() {
    assert_eq!(
        answers(&regions(), "*.region1.skydns.test.", RecordType::A),
        [
            "*.region1.skydns.test. 3600 A 10.0.4.1",
            "*.region1.skydns.test. 3600 A 10.0.4.2",
            "*.region1.skydns.test. 3600 A 10.0.4.3",
            "*.region1.skydns.test. 3600 A 10.0.4.4",
            "*.region1.skydns.test. 3600 A 10.0.4.5",
        ]
    );
}

#[test]
fn keys_shorter_than_the_pattern_are_skipped_and_longer_ones_match() {
    let got = answers(&regions(), "*.*.region1.skydns.test.", RecordType::A);
    assert_eq!(got.len(), 4, "region1/short is too short: {got:?}");
    let got = answers(&regions(), "server2.*.region1.skydns.test.", RecordType::A);
    assert_eq!(
        got,
        [
            "server2.*.region1.skydns.test. 3600 A 10.0.4.2",
            "server2.*.region1.skydns.test. 3600 A 10.0.4.4"
        ]
    );
}

#[test]
fn any_is_a_wildcard_too_in_any_position() {
    let got = answers(&regions(), "server1.production.any.skydns.test.", RecordType::A);
    assert_eq!(
        got,
        [
            "server1.production.any.skydns.test. 3600 A 10.0.4.3",
            "server1.production.any.skydns.test. 3600 A 10.0.5.1"
        ]
    );
}

#[test]
fn a_missing_fixed_part_is_nxdomain_and_no_match_is_nodata() {
    assert!(is_nxdomain(&regions(), "*.nowhere.skydns.test.", RecordType::A));
    assert!(is_nodata(&regions(), "nothing.*.skydns.test.", RecordType::A));
    assert!(is_nodata(&regions(), "*.region1.skydns.test.", RecordType::AAAA));
}

#[test]
fn a_wildcard_below_a_single_key_returns_that_key() {
    assert_eq!(
        answers(&regions(), "*.short.region1.skydns.test.", RecordType::A),
        ["*.short.region1.skydns.test. 3600 A 10.0.4.5"]
    );
}

#[test]
fn wildcards_answer_every_type_from_the_matched_records() {
    let snap = snapshot(&[(
        "test/skydns/svc/a",
        Service {
            host: "10.0.0.1".into(),
            port: 80,
            ..Service::default()
        },
    )]);
    assert_eq!(
        answers(&snap, "*.svc.skydns.test.", RecordType::SRV),
        ["*.svc.skydns.test. 3600 SRV 10 100 80 a.svc.skydns.test."]
    );
    assert_eq!(
        additionals(&snap, "*.svc.skydns.test.", RecordType::SRV),
        ["a.svc.skydns.test. 3600 A 10.0.0.1"]
    );
    assert!(
        is_nodata(&snap, "*.svc.skydns.test.", RecordType::CNAME),
        "a directory answers no CNAME"
    );
    assert!(is_nodata(&snap, "*.svc.skydns.test.", RecordType::NS));
}
