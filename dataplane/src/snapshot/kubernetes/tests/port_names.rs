//! Port names spelled without their underscores have no node: they answer from the node of
//! `_<port>._<proto>.<service>…`, its pointers into the question moved. Every such spelling of
//! every port name of clusters built under several configurations, asked every type over UDP
//! and TCP, gets the reply of the underscored name with the question's name in place of it,
//! as hickory-proto reads both.

use super::hosts::{configs, crowded, reply};
use super::*;
use hickory_proto::rr::Record;

/// The spellings of a port name `_<port>._<proto>.<rest>` that answer as it does.
fn spellings(underscored: &str) -> Vec<String> {
    let (port, rest) = underscored.split_once('.').unwrap();
    let (protocol, rest) = rest.split_once('.').unwrap();
    let (port, protocol) = (&port[1..], &protocol[1..]);
    vec![
        format!("{port}._{protocol}.{rest}"),
        format!("_{port}.{protocol}.{rest}"),
        format!("{port}.{protocol}.{rest}"),
        format!("{port}.{protocol}.{rest}").to_uppercase(),
    ]
}

/// The records of a section with `from` as owner written as `to`, names in lower case (the
/// SOA's owner in a negative answer points into the question, and takes its case).
fn renamed(records: &[Record], from: &HName, to: &HName) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            let owner = if r.name() == from { to } else { r.name() };
            format!("{owner} {} {} {:?}", r.ttl(), r.record_type(), r.data()).to_lowercase()
        })
        .collect()
}

#[test]
fn port_names_without_underscores_answer_as_the_underscored_name() {
    let types = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::SRV,
        RecordType::TXT,
        RecordType::PTR,
        RecordType::ANY,
    ];
    for config in configs() {
        let s = snapshot_with(&config, &crowded());
        let port_names: Vec<String> = s
            .nodes
            .iter()
            .filter(|(_, node)| node.underscores_optional())
            .map(|(name, _)| name.to_string())
            .collect();
        assert!(port_names.len() >= 5, "{config:?}");
        for underscored in &port_names {
            for spelling in spellings(underscored) {
                assert!(
                    !s.nodes.contains_key(&Name::from_dotted(&spelling).unwrap()),
                    "{spelling}"
                );
                for rtype in types {
                    for (transport, edns) in [(Transport::Udp, false), (Transport::Udp, true), (Transport::Tcp, true)] {
                        let context = format!("{spelling} {rtype} {transport:?} edns {edns} ({config:?})");
                        let expected = reply(&s, underscored, rtype, transport, edns);
                        let got = reply(&s, &spelling, rtype, transport, edns);
                        assert_eq!(
                            got.len() + underscored.len(),
                            expected.len() + spelling.len(),
                            "{context}"
                        );
                        assert_eq!(got[..12], expected[..12], "header of {context}");
                        let (got, expected) = (Message::from_vec(&got).unwrap(), Message::from_vec(&expected).unwrap());
                        let (from, to) = (
                            HName::from_ascii(underscored).unwrap(),
                            HName::from_ascii(&spelling).unwrap(),
                        );
                        assert_eq!(got.queries()[0].name().to_ascii(), spelling, "{context}");
                        for (got, expected) in [
                            (got.answers(), expected.answers()),
                            (got.name_servers(), expected.name_servers()),
                            (got.additionals(), expected.additionals()),
                        ] {
                            assert_eq!(renamed(got, &to, &to), renamed(expected, &from, &to), "{context}");
                        }
                    }
                }
            }
        }
    }
}
