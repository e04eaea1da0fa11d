//! Arbitrary keys and values never break a build, and every name that holds a record answers.

use super::*;
use proptest::prelude::*;

fn component() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a", "B", "web", "*", "any", "", "x.y", "dns", "ns", "arpa", "in-addr", "10",
    ])
    .prop_map(str::to_string)
}

fn host_value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "",
        "10.0.0.1",
        "2001:db8::1",
        "::ffff:10.0.0.2",
        "a.skydns.test",
        "web.a.skydns.test.",
        "b.skydns.test",
        "*.skydns.test",
        "skydns.test",
        "example.org",
        "bad..host",
    ])
    .prop_map(str::to_string)
}

fn record() -> impl Strategy<Value = (String, Service)> {
    let key = prop::collection::vec(component(), 0..5).prop_map(|c| format!("/skydns/test/skydns/{}", c.join("/")));
    let service = (
        host_value(),
        any::<u16>(),
        0u16..3,
        0u16..200,
        any::<bool>(),
        0u32..3,
        0usize..4,
        0u8..3,
    )
        .prop_map(
            |(host, port, priority, weight, mail, ttl, target_strip, group)| Service {
                host,
                port,
                priority,
                weight,
                text: if port % 3 == 0 {
                    "t".repeat(port as usize % 600)
                } else {
                    String::new()
                },
                mail,
                ttl: ttl * 100,
                target_strip,
                group: ["", "g1", "g2"][group as usize].to_string(),
            },
        );
    (key, service)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_records_build_and_every_record_name_answers(records in prop::collection::vec(record(), 0..24)) {
        let snap = build(&config(), &records, 1, UNIX_EPOCH);
        for (key, service) in &records {
            let Ok(Some(path)) = crate::snapshot::skydns::key::parse_key(key, "skydns") else { continue };
            if service.host == "bad..host" {
                continue;
            }
            let name = crate::snapshot::skydns::key::name_of(&path).to_string();
            for rtype in [RecordType::A, RecordType::AAAA, RecordType::SRV, RecordType::TXT, RecordType::CNAME, RecordType::MX] {
                let reply = ask(&snap, &name, rtype);
                prop_assert!(
                    matches!(reply.response_code(), ResponseCode::NoError | ResponseCode::ServFail),
                    "{} {} answered {}", name, rtype, reply.response_code()
                );
            }
        }
    }
}
