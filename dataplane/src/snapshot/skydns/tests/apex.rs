//! The zone apex: SOA and NS with glue (docs/skydns-semantics.md, "SOA, NXDOMAIN and NODATA" and
//! "NS at the apex").

use super::*;
use hickory_proto::rr::RData;

#[test]
fn the_apex_answers_the_skydns_soa() {
    let snap = snapshot::<Service>(&[]);
    let reply = ask(&snap, "skydns.test.", RecordType::SOA);
    assert_eq!(reply.answers()[0].ttl(), 3600);
    let Some(RData::SOA(soa)) = reply.answers()[0].data() else {
        panic!("SOA expected")
    };
    assert_eq!(soa.mname().to_ascii(), "ns.dns.skydns.test.");
    assert_eq!(soa.rname().to_ascii(), "hostmaster.skydns.test.");
    assert_eq!(soa.serial(), 1_699_999_200, "the build time truncated to the hour");
    assert_eq!(
        (soa.refresh(), soa.retry(), soa.expire(), soa.minimum()),
        (28800, 7200, 604800, 60)
    );
}

#[test]
fn negative_answers_carry_the_soa_with_min_ttl() {
    let snap = snapshot::<Service>(&[]);
    let reply = ask(&snap, "nope.skydns.test.", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    assert_eq!(reply.name_servers()[0].ttl(), 60);
}

#[test]
fn ns_at_the_apex_names_each_nameserver_by_its_key_with_glue() {
    let snap = snapshot(&[
        ("test/skydns/dns/ns/ns1", host("10.0.9.1")),
        (
            "test/skydns/dns/ns/ns2",
            Service {
                host: "2001:db8::53".into(),
                ttl: 600,
                ..Service::default()
            },
        ),
    ]);
    assert_eq!(
        answers(&snap, "skydns.test.", RecordType::NS),
        [
            "skydns.test. 600 NS ns1.ns.dns.skydns.test.",
            "skydns.test. 600 NS ns2.ns.dns.skydns.test."
        ]
    );
    assert_eq!(
        additionals(&snap, "skydns.test.", RecordType::NS),
        [
            "ns1.ns.dns.skydns.test. 3600 A 10.0.9.1",
            "ns2.ns.dns.skydns.test. 600 AAAA 2001:db8::53"
        ]
    );
}

#[test]
fn a_nameserver_with_a_name_host_is_skipped_and_the_others_serve() {
    let snap = snapshot(&[
        ("test/skydns/dns/ns/a", host("ns.example.org")),
        ("test/skydns/dns/ns/b", host("10.0.9.2")),
    ]);
    assert_eq!(
        answers(&snap, "skydns.test.", RecordType::NS),
        ["skydns.test. 3600 NS b.ns.dns.skydns.test."]
    );
}

#[test]
fn ns_and_soa_below_the_apex_are_nodata() {
    let snap = snapshot(&[("test/skydns/dns/ns/ns1", host("10.0.9.1"))]);
    assert!(is_nodata(&snap, "ns.dns.skydns.test.", RecordType::NS));
    assert!(is_nodata(&snap, "ns1.ns.dns.skydns.test.", RecordType::SOA));
    assert_eq!(
        answers(&snap, "ns.dns.skydns.test.", RecordType::A),
        ["ns.dns.skydns.test. 3600 A 10.0.9.1"]
    );
}

#[test]
fn the_apex_is_a_directory_of_the_whole_zone() {
    let snap = snapshot(&[
        ("test/skydns/a/web", host("10.0.0.1")),
        ("test/skydns/dns/ns/ns1", host("10.0.9.1")),
    ]);
    assert_eq!(answers(&snap, "skydns.test.", RecordType::A).len(), 2);
}

#[test]
fn the_apex_of_a_hundred_thousand_records_is_marked_too_large() {
    let records: Vec<(String, Service)> = (0..100_000u32)
        .map(|i| {
            (
                format!("/skydns/test/skydns/svc{}/h{i}", i % 100),
                host(&std::net::Ipv4Addr::from(i).to_string()),
            )
        })
        .collect();
    let snap = build(&config(), &records, 1, UNIX_EPOCH);
    let apex = snap.node(config().domain.wire()).unwrap();
    assert!(apex.answer(crate::snapshot::Slot::A).unwrap().overflow());
    assert_eq!(
        answers(&snap, "h4242.svc42.skydns.test.", RecordType::A),
        ["h4242.svc42.skydns.test. 3600 A 0.0.16.146"]
    );
    assert_eq!(answers(&snap, "svc42.skydns.test.", RecordType::A).len(), 1000);
    assert_eq!(snap.nodes.len() + snap.leaves.len(), 100_000 + 100 + 1);
    assert_eq!(snap.leaves.len(), 100_000);
}
