//! Which names exist, what a name's lookup returns, and the types answered straight from it.

use super::*;
use crate::snapshot::Slot;

#[test]
fn a_leaf_answers_its_address() {
    let snap = snapshot(&[("test/skydns/east/web", host("10.0.0.1"))]);
    assert_eq!(
        answers(&snap, "web.east.skydns.test.", RecordType::A),
        ["web.east.skydns.test. 3600 A 10.0.0.1"]
    );
}

#[test]
fn a_directory_answers_every_record_below_it_in_key_order() {
    let snap = snapshot(&[
        ("test/skydns/east/web/b", host("10.0.0.2")),
        ("test/skydns/east/db", host("10.0.0.3")),
        ("test/skydns/east/web/a/deep", host("10.0.0.1")),
        ("test/skydns/west/web", host("10.0.0.4")),
    ]);
    assert_eq!(
        answers(&snap, "east.skydns.test.", RecordType::A),
        [
            "east.skydns.test. 3600 A 10.0.0.3",
            "east.skydns.test. 3600 A 10.0.0.1",
            "east.skydns.test. 3600 A 10.0.0.2"
        ]
    );
}

#[test]
fn keys_are_lower_cased_and_may_arrive_in_any_order() {
    let snap = snapshot(&[("test/skydns/B", host("10.0.0.2")), ("Test/SkyDNS/a", host("10.0.0.1"))]);
    assert_eq!(
        answers(&snap, "A.skydns.test.", RecordType::A),
        ["A.skydns.test. 3600 A 10.0.0.1"]
    );
    assert_eq!(answers(&snap, "skydns.test.", RecordType::A).len(), 2);
}

#[test]
fn a_name_exists_iff_it_or_a_name_below_it_holds_a_record() {
    let snap = snapshot(&[("test/skydns/east/web", host("10.0.0.1"))]);
    assert!(is_nodata(&snap, "east.skydns.test.", RecordType::TXT));
    assert!(is_nxdomain(&snap, "nope.skydns.test.", RecordType::A));
    assert!(is_nxdomain(&snap, "x.web.east.skydns.test.", RecordType::A));
    assert!(
        is_nxdomain(&snap, "nope.skydns.test.", RecordType::NS),
        "NS of a missing name is NXDOMAIN too"
    );
}

#[test]
fn an_existing_name_without_the_type_is_nodata() {
    let snap = snapshot(&[("test/skydns/web", host("10.0.0.1"))]);
    assert!(is_nodata(&snap, "web.skydns.test.", RecordType::AAAA));
    assert!(is_nodata(&snap, "web.skydns.test.", RecordType::NS));
    assert!(is_nodata(&snap, "web.skydns.test.", RecordType::PTR));
}

#[test]
fn invalid_keys_and_values_are_skipped_and_their_neighbours_serve() {
    let snap = snapshot(&[
        ("test/skydns/dir//bad", host("10.0.0.9")),
        ("test/skydns/dir/dot.ted", host("10.0.0.9")),
        ("test/skydns/dir/badhost", host("a..b")),
        ("test/skydns/dir/good", host("10.0.0.1")),
    ]);
    assert_eq!(
        answers(&snap, "dir.skydns.test.", RecordType::A),
        ["dir.skydns.test. 3600 A 10.0.0.1"]
    );
    assert!(is_nxdomain(&snap, "badhost.dir.skydns.test.", RecordType::A));
    assert_eq!(
        snap.skydns.as_ref().unwrap().skipped(),
        3,
        "each skipped record is counted"
    );
}

#[test]
fn keys_outside_the_prefix_or_the_domain_are_ignored() {
    let records = vec![
        ("/other/test/skydns/web".to_string(), host("10.0.0.1")),
        ("/skydns/org/example/web".to_string(), host("10.0.0.2")),
    ];
    let snap = build(&config(), &records, 1, UNIX_EPOCH);
    assert!(is_nxdomain(&snap, "web.skydns.test.", RecordType::A));
    assert_eq!(snap.nodes.len(), 1, "only the apex");
}

#[test]
fn a_record_without_host_serves_only_its_text() {
    let snap = snapshot(&[(
        "test/skydns/info",
        Service {
            text: "hello".into(),
            ..Service::default()
        },
    )]);
    assert_eq!(
        answers(&snap, "info.skydns.test.", RecordType::TXT),
        ["info.skydns.test. 3600 TXT hello"]
    );
    for rtype in [
        RecordType::A,
        RecordType::AAAA,
        RecordType::CNAME,
        RecordType::SRV,
        RecordType::MX,
    ] {
        assert!(is_nodata(&snap, "info.skydns.test.", rtype), "{rtype}");
    }
}

#[test]
fn text_of_255_bytes_is_two_strings_the_second_empty() {
    let snap = snapshot(&[(
        "test/skydns/t",
        Service {
            text: "a".repeat(255),
            ..Service::default()
        },
    )]);
    let reply = ask(&snap, "t.skydns.test.", RecordType::TXT);
    let Some(hickory_proto::rr::RData::TXT(txt)) = reply.answers()[0].data() else {
        panic!("TXT expected")
    };
    let lens: Vec<usize> = txt.txt_data().iter().map(|s| s.len()).collect();
    assert_eq!(lens, [255, 0]);
}

#[test]
fn cname_is_nodata_everywhere_since_no_name_is_an_alias() {
    let snap = snapshot(&[
        ("test/skydns/dir/alias", host("target.skydns.test.")),
        ("test/skydns/target", host("10.0.0.1")),
    ]);
    assert!(is_nodata(&snap, "alias.dir.skydns.test.", RecordType::CNAME));
    assert!(is_nodata(&snap, "dir.skydns.test.", RecordType::CNAME));
    assert!(is_nodata(&snap, "target.skydns.test.", RecordType::CNAME));
}

#[test]
fn with_cname_chains_cname_on_a_leaf_is_its_host_without_chasing_and_on_a_directory_nodata() {
    let config = Config {
        cname_chains: true,
        ..config()
    };
    let snap = snapshot_with(
        &config,
        &[
            ("test/skydns/dir/alias", host("target.skydns.test.")),
            ("test/skydns/target", host("10.0.0.1")),
        ],
    );
    assert_eq!(
        answers(&snap, "alias.dir.skydns.test.", RecordType::CNAME),
        ["alias.dir.skydns.test. 3600 CNAME target.skydns.test."]
    );
    assert!(is_nodata(&snap, "dir.skydns.test.", RecordType::CNAME));
    assert!(is_nodata(&snap, "target.skydns.test.", RecordType::CNAME));
}

#[test]
fn records_equal_in_host_port_priority_weight_and_text_count_once_per_lookup() {
    let same = Service {
        host: "10.0.0.1".into(),
        port: 80,
        ..Service::default()
    };
    let explicit_default = Service {
        priority: 10,
        ..same.clone()
    };
    let snap = snapshot(&[
        ("test/skydns/s/a", same.clone()),
        ("test/skydns/s/b", same),
        ("test/skydns/s/c", explicit_default),
    ]);
    // b is dropped; c differs before the default priority applies, so it stays.
    assert_eq!(
        answers(&snap, "s.skydns.test.", RecordType::SRV),
        [
            "s.skydns.test. 3600 SRV 10 50 80 a.s.skydns.test.",
            "s.skydns.test. 3600 SRV 10 50 80 c.s.skydns.test."
        ]
    );
    // Each key alone is its own lookup: nothing to drop there.
    assert_eq!(
        answers(&snap, "b.s.skydns.test.", RecordType::SRV),
        ["b.s.skydns.test. 3600 SRV 10 100 80 b.s.skydns.test."]
    );
}

#[test]
fn groups_keep_the_shallowest_group_and_records_without_one() {
    let grouped = |h: &str, g: &str| Service {
        host: h.into(),
        group: g.into(),
        ..Service::default()
    };
    let snap = snapshot(&[
        ("test/skydns/grp/g1", grouped("10.0.3.1", "g1")),
        ("test/skydns/grp/sub/g2", grouped("10.0.3.2", "g2")),
        ("test/skydns/grp/sub/free", host("10.0.3.3")),
    ]);
    assert_eq!(
        answers(&snap, "grp.skydns.test.", RecordType::A),
        ["grp.skydns.test. 3600 A 10.0.3.1", "grp.skydns.test. 3600 A 10.0.3.3"]
    );
    assert_eq!(
        answers(&snap, "sub.grp.skydns.test.", RecordType::A).len(),
        2,
        "below, g2 is the shallowest group"
    );
}

#[test]
fn a_single_answer_keeps_its_ttl_and_several_share_the_smallest_capped_at_the_default() {
    let ttl = |h: &str, ttl: u32| Service {
        host: h.into(),
        ttl,
        ..Service::default()
    };
    let snap = snapshot(&[
        ("test/skydns/d/a", ttl("10.0.0.1", 7200)),
        ("test/skydns/d/b", ttl("10.0.0.2", 7200)),
    ]);
    assert_eq!(
        answers(&snap, "a.d.skydns.test.", RecordType::A),
        ["a.d.skydns.test. 7200 A 10.0.0.1"]
    );
    assert!(ask(&snap, "d.skydns.test.", RecordType::A)
        .answers()
        .iter()
        .all(|r| r.ttl() == 3600));
}

#[test]
fn mx_answers_only_mail_records() {
    let snap = snapshot(&[
        (
            "test/skydns/m/mail",
            Service {
                host: "mx.example.org".into(),
                mail: true,
                ..Service::default()
            },
        ),
        ("test/skydns/m/web", host("web.example.org")),
    ]);
    assert_eq!(
        answers(&snap, "m.skydns.test.", RecordType::MX),
        ["m.skydns.test. 3600 MX 10 mx.example.org."]
    );
    assert!(is_nodata(&snap, "web.m.skydns.test.", RecordType::MX));
}

#[test]
fn an_answer_larger_than_any_message_is_truncated_over_udp_and_servfail_over_tcp() {
    let records: Vec<(String, Service)> = (0..5000)
        .map(|i| {
            (
                format!("test/skydns/big/h{i}"),
                host(&format!("10.1.{}.{}", i / 256, i % 256)),
            )
        })
        .collect();
    let refs: Vec<(&str, Service)> = records.iter().map(|(k, s)| (k.as_str(), s.clone())).collect();
    let snap = snapshot(&refs);
    let node = snap
        .node(Name::from_dotted("big.skydns.test.").unwrap().wire())
        .unwrap();
    assert!(node.answer(Slot::A).unwrap().overflow());
    assert!(ask_over(&snap, "big.skydns.test.", RecordType::A, Transport::Udp).truncated());
    assert_eq!(
        ask(&snap, "big.skydns.test.", RecordType::A).response_code(),
        ResponseCode::ServFail
    );
    assert!(
        !ask(&snap, "big.skydns.test.", RecordType::TXT).truncated(),
        "other types are unaffected"
    );
    assert_eq!(answers(&snap, "h7.big.skydns.test.", RecordType::A).len(), 1);
}

#[test]
fn the_local_alias_answers_with_the_records_of_its_target() {
    let config = Config {
        local: Some(Name::from_dotted("host1.nodes.skydns.test.").unwrap()),
        ..config()
    };
    let snap = snapshot_with(&config, &[("test/skydns/nodes/host1", host("10.0.0.1"))]);
    assert_eq!(
        answers(&snap, "local.dns.skydns.test.", RecordType::A),
        ["local.dns.skydns.test. 3600 A 10.0.0.1"]
    );
    assert!(
        is_nodata(&snap, "dns.skydns.test.", RecordType::A),
        "its parent exists but holds nothing"
    );
    assert_eq!(
        answers(&snap, "skydns.test.", RecordType::A).len(),
        1,
        "the alias adds nothing to the apex"
    );
}

#[test]
fn a_local_alias_to_a_missing_name_does_not_exist() {
    let config = Config {
        local: Some(Name::from_dotted("gone.skydns.test.").unwrap()),
        ..config()
    };
    let snap = snapshot_with(&config, &[("test/skydns/web", host("10.0.0.1"))]);
    assert!(is_nxdomain(&snap, "local.dns.skydns.test.", RecordType::A));
}

#[test]
fn address_rrsets_rotate_only_with_round_robin() {
    let records = [
        ("test/skydns/d/a", host("10.0.0.1")),
        ("test/skydns/d/b", host("10.0.0.2")),
    ];
    let rotation = |config: &Config| {
        let snap = snapshot_with(config, &records);
        let node = snap.node(Name::from_dotted("d.skydns.test.").unwrap().wire()).unwrap();
        node.answer(Slot::A).unwrap().answer().next().unwrap().rotate_len
    };
    assert_eq!(rotation(&config()), 16);
    assert_eq!(
        rotation(&Config {
            round_robin: false,
            ..config()
        }),
        0
    );
}
