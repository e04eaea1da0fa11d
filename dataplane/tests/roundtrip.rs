//! Property tests of the wire format round trips: what hickory-proto builds, we parse to the same
//! fields; what we build, hickory-proto parses back to what we meant.

mod common;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{DNSClass, Name as HName, RData, RecordType};
use proptest::prelude::*;
use skyline_dataplane::snapshot::rrset::{AnswerSet, CompiledAnswer, Rdata, Record, Rrset};
use skyline_dataplane::wire::{parse_query, LowerName, Name};
use std::net::{Ipv4Addr, Ipv6Addr};

fn label() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9][a-zA-Z0-9-]{0,20}"
}

fn dotted() -> impl Strategy<Value = String> {
    prop::collection::vec(label(), 1..6).prop_map(|ls| ls.join(".") + ".")
}

fn rdata() -> impl Strategy<Value = Rdata> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|b| Rdata::A(Ipv4Addr::from(b))),
        any::<[u8; 16]>().prop_map(|b| Rdata::Aaaa(Ipv6Addr::from(b))),
        dotted().prop_map(|n| Rdata::Cname(Name::from_dotted(&n).unwrap())),
        (any::<u16>(), any::<u16>(), any::<u16>(), dotted()).prop_map(|(p, w, port, t)| Rdata::Srv {
            priority: p,
            weight: w,
            port,
            target: Name::from_dotted(&t).unwrap()
        }),
        (any::<u16>(), dotted()).prop_map(|(p, n)| Rdata::Mx {
            preference: p,
            exchange: Name::from_dotted(&n).unwrap()
        }),
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..255), 1..4)
            .prop_map(|ss| Rdata::Txt(ss.into_iter().map(Vec::into_boxed_slice).collect())),
    ]
}

fn same_name(ours: &Name, theirs: &HName) -> bool {
    ours.to_string().eq_ignore_ascii_case(&theirs.to_ascii())
}

fn matches(ours: &Rdata, theirs: &RData) -> bool {
    match (ours, theirs) {
        (Rdata::A(a), RData::A(b)) => *a == b.0,
        (Rdata::Aaaa(a), RData::AAAA(b)) => *a == b.0,
        (Rdata::Cname(a), RData::CNAME(b)) => same_name(a, &b.0),
        (
            Rdata::Srv {
                priority,
                weight,
                port,
                target,
            },
            RData::SRV(s),
        ) => *priority == s.priority() && *weight == s.weight() && *port == s.port() && same_name(target, s.target()),
        (Rdata::Mx { preference, exchange }, RData::MX(m)) => {
            *preference == m.preference() && same_name(exchange, m.exchange())
        }
        (Rdata::Txt(ours), RData::TXT(t)) => ours.iter().map(|s| &s[..]).eq(t.txt_data().iter().map(|s| &s[..])),
        _ => false,
    }
}

proptest! {
    #[test]
    fn hickory_queries_parse_to_the_same_fields(
        qname in dotted(),
        qtype in 1u16..300,
        id in any::<u16>(),
        rd in any::<bool>(),
        edns in proptest::option::of((512u16..4096, any::<bool>())),
    ) {
        let mut m = Message::new();
        m.set_id(id).set_message_type(MessageType::Query).set_op_code(OpCode::Query).set_recursion_desired(rd);
        m.add_query(Query::query(HName::from_ascii(&qname).unwrap(), RecordType::from(qtype)));
        if let Some((size, dnssec_ok)) = edns {
            let mut e = Edns::new();
            e.set_max_payload(size).set_dnssec_ok(dnssec_ok);
            m.set_edns(e);
        }
        let bytes = m.to_vec().unwrap();
        let mut name = LowerName::default();
        let q = parse_query(&bytes, &mut name).unwrap();
        prop_assert_eq!(q.id, id);
        prop_assert_eq!(q.flags & 0x0100 != 0, rd);
        prop_assert!(q.error.is_none());
        let question = q.question.unwrap();
        prop_assert_eq!(question.qtype, qtype);
        prop_assert_eq!(question.qclass, u16::from(DNSClass::IN));
        let expected = Name::from_dotted(&qname).unwrap();
        prop_assert_eq!(name.wire(), expected.wire());
        prop_assert_eq!(q.edns.map(|e| (e.udp_size, e.dnssec_ok)), edns);
    }

    #[test]
    fn compiled_records_parse_back_with_hickory(
        qname in dotted(),
        records in prop::collection::vec((rdata(), any::<u32>(), any::<bool>()), 1..12),
    ) {
        let q = Name::from_dotted(&qname).unwrap();
        let lower = LowerName::from_wire(q.wire()).unwrap();
        let set = AnswerSet {
            flattened: Vec::new(),
            answer: records
                .iter()
                .map(|(rdata, ttl, own)| Rrset {
                    owner: if *own { None } else { Some(Name::from_dotted("other.example.").unwrap()) },
                    records: vec![Record { ttl: *ttl, rdata: rdata.clone() }],
                    rotate: false,
                })
                .collect(),
            additional: vec![],
        };
        let compiled = CompiledAnswer::compile(&lower, &set);
        let mut msg = vec![0, 1, 0x84, 0, 0, 1, 0, records.len() as u8, 0, 0, 0, 0];
        msg.extend_from_slice(q.wire());
        msg.extend_from_slice(&[0, 1, 0, 1]);
        msg.extend_from_slice(compiled.bytes());
        let parsed = Message::from_vec(&msg).unwrap();
        prop_assert_eq!(parsed.answers().len(), records.len());
        for ((rdata, ttl, own), rr) in records.iter().zip(parsed.answers()) {
            prop_assert_eq!(rr.ttl(), *ttl);
            let owner = if *own { qname.clone() } else { "other.example.".to_string() };
            prop_assert!(rr.name().to_ascii().eq_ignore_ascii_case(&owner));
            prop_assert!(matches(rdata, rr.data().unwrap()), "{:?} vs {:?}", rdata, rr.data());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_answer_path(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let snap = common::snapshot();
        let mut out = vec![0u8; 65535];
        for transport in [skyline_dataplane::Transport::Udp, skyline_dataplane::Transport::Tcp] {
            if let skyline_dataplane::Outcome::Reply(r) =
                skyline_dataplane::answer(&bytes, &snap, &skyline_dataplane::Context::new(transport), &mut out)
            {
                prop_assert!(r.len() >= 12);
                prop_assert!(Message::from_vec(&out[..r.len()]).is_ok() || out[2] & 0x78 != 0);
            }
        }
    }
}
