//! The names kept as leaves answer byte for byte as the nodes they stand for would: every leaf
//! of a domain built under several configurations, asked every type over UDP and TCP, in its
//! own spelling and in capitals, against a snapshot holding it as a node.

use super::*;
use crate::snapshot::test_replies::assert_same_replies;
use crate::wire::LowerName;

/// Leaves of every shape the table takes, beside names it must leave to nodes.
fn records() -> Vec<(&'static str, Service)> {
    let long = Box::leak(format!("test/skydns/{}/{}", "l".repeat(63), "m".repeat(60)).into_boxed_str());
    vec![
        ("test/skydns/web/a", host("10.0.0.1")),
        (
            "test/skydns/web/b",
            Service {
                host: "10.0.0.2".into(),
                port: 8080,
                priority: 20,
                weight: 97,
                ttl: 30,
                ..Service::default()
            },
        ),
        (
            "test/skydns/web/v6",
            Service {
                host: "2001:db8::7".into(),
                port: 443,
                ..Service::default()
            },
        ),
        ("test/skydns/web/Mixed", host("10.0.0.3")),
        (long, host("10.0.0.4")),
        ("test/skydns/dns/ns/ns1", host("10.0.0.53")),
        ("test/skydns/local/host1", host("10.0.0.9")),
        // Not leaves: a name with a record and a name below it, two records at one name, text,
        // mail, a group, a target strip, a name host, no host, a wildcard label.
        ("test/skydns/dir", host("10.0.1.1")),
        ("test/skydns/dir/below", host("10.0.1.2")),
        ("test/skydns/twice/x", host("10.0.2.1")),
        ("test/skydns/twice/X", host("10.0.2.2")),
        (
            "test/skydns/texted",
            Service {
                host: "10.0.3.1".into(),
                text: "hello".into(),
                ..Service::default()
            },
        ),
        (
            "test/skydns/mailer",
            Service {
                host: "10.0.3.2".into(),
                mail: true,
                ..Service::default()
            },
        ),
        (
            "test/skydns/grouped",
            Service {
                host: "10.0.3.3".into(),
                group: "g".into(),
                ..Service::default()
            },
        ),
        (
            "test/skydns/stripped/s",
            Service {
                host: "10.0.3.4".into(),
                target_strip: 1,
                ..Service::default()
            },
        ),
        ("test/skydns/alias", host("web.skydns.test")),
        ("test/skydns/outside", host("www.example.org")),
        ("test/skydns/textonly", Service::default()),
        ("test/skydns/wild/*", host("10.0.3.5")),
        ("test/skydns/wild/any", host("10.0.3.6")),
    ]
}

fn configs() -> Vec<Config> {
    vec![
        config(),
        Config {
            ttl: 30,
            priority: 5,
            round_robin: false,
            local: Some(Name::from_dotted("host1.local.skydns.test.").unwrap()),
            ..config()
        },
    ]
}

/// `s` with every leaf made the node it stands for.
fn as_nodes(s: &Snapshot) -> Snapshot {
    let index = s.skydns.as_deref().unwrap();
    let mut nodes = s.nodes.clone();
    for (name, node) in s.leaves.nodes(index) {
        nodes.insert(name, node);
    }
    Snapshot {
        generation: s.generation,
        zones: s.zones.clone(),
        nodes,
        identity: s.identity.clone(),
        skydns: s.skydns.clone(),
        ..Snapshot::default()
    }
}

fn is_leaf(s: &Snapshot, name: &str) -> bool {
    let qname = LowerName::from_wire(Name::from_dotted(name).unwrap().wire()).unwrap();
    s.leaf(&qname).is_some()
}

#[test]
fn leaves_answer_as_their_nodes_would() {
    let types = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::SRV,
        RecordType::TXT,
        RecordType::MX,
        RecordType::CNAME,
        RecordType::PTR,
        RecordType::NS,
        RecordType::SOA,
        RecordType::HINFO,
        RecordType::ANY,
    ];
    for config in configs() {
        let s = snapshot_with(&config, &records());
        let nodes = as_nodes(&s);
        let index = s.skydns.as_deref().unwrap();
        assert_eq!(s.leaves.len(), 8, "{config:?}");
        assert_eq!(s.nodes.len() + s.leaves.len(), nodes.nodes.len(), "{config:?}");
        let names: Vec<String> = s.leaves.nodes(index).map(|(name, _)| name.to_string()).collect();
        for name in &names {
            assert!(is_leaf(&s, name), "{name}");
        }
        assert_same_replies(&s, &nodes, &names, &types, &format!("{config:?}"));
    }
}

#[test]
fn only_single_address_records_with_nothing_below_are_leaves() {
    let s = snapshot(&records());
    for leaf in [
        "a.web",
        "b.web",
        "v6.web",
        "mixed.web",
        "ns1.ns.dns",
        "host1.local",
        "below.dir",
    ] {
        assert!(is_leaf(&s, &format!("{leaf}.skydns.test.")), "{leaf}");
    }
    for node in [
        "web",
        "dir",
        "x.twice",
        "texted",
        "mailer",
        "grouped",
        "s.stripped",
        "alias",
        "outside",
        "textonly",
        "*.wild",
        "any.wild",
    ] {
        let name = format!("{node}.skydns.test.");
        assert!(!is_leaf(&s, &name), "{node}");
        assert!(
            s.nodes.contains_key(&Name::from_dotted(&name).unwrap()),
            "{node} is a node"
        );
    }
    assert_eq!(
        answers(&s, "b.web.skydns.test.", RecordType::SRV),
        ["b.web.skydns.test. 30 SRV 20 99 8080 b.web.skydns.test."],
        "SkyDNS's lone weight-97 record gets 99"
    );
    assert_eq!(
        additionals(&s, "v6.web.skydns.test.", RecordType::SRV),
        ["v6.web.skydns.test. 3600 AAAA 2001:db8::7"]
    );
    assert!(is_nodata(&s, "a.web.skydns.test.", RecordType::AAAA));
    assert!(is_nxdomain(&s, "x.a.web.skydns.test.", RecordType::A));
}

#[test]
fn names_of_one_length_behind_one_tag_are_told_apart() {
    // The table's first test is the name's length behind a 7-bit tag: among 20,000 names of one
    // length many share a tag, and each must still find its own record.
    let records: Vec<(String, Service)> = (0..20_000u32)
        .map(|i| {
            let address = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            (format!("test/skydns/x/h{i:05}"), host(&address.to_string()))
        })
        .collect();
    let borrowed: Vec<(&str, Service)> = records.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let s = snapshot(&borrowed);
    assert_eq!(s.leaves.len(), 20_000);
    for i in 0..20_000u32 {
        let qname =
            LowerName::from_wire(Name::from_dotted(&format!("h{i:05}.x.skydns.test.")).unwrap().wire()).unwrap();
        let (leaf, _) = s.leaf(&qname).unwrap_or_else(|| panic!("h{i:05} is a leaf"));
        assert_eq!(leaf.v4(), Some(std::net::Ipv4Addr::from(0x0a00_0000 + i)), "h{i:05}");
    }
    for absent in [
        "h20000.x.skydns.test.",
        "h0000.xx.skydns.test.",
        "h00000.y.skydns.test.",
    ] {
        assert!(!is_leaf(&s, absent), "{absent}");
    }
}
