//! One test per message-level row of docs/robustness.md ("Messages"), against the sans-I/O answer
//! function, with replies parsed by hickory-proto.

mod common;

use common::{ask, ask_over, ask_raw, snapshot, snapshot_with_identity, RawQuery};
use hickory_proto::op::{OpCode, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use skyline_dataplane::answer::{answer, Context, Outcome};
use skyline_dataplane::wire::DropReason;
use skyline_dataplane::Transport;

const A: u16 = 1;
const TXT: u16 = 16;
const COOKIE: &[u8] = &[1, 2, 3, 4, 5, 6, 7, 8];

fn outcome(query: &[u8]) -> Outcome {
    let mut out = vec![0u8; 65535];
    answer(query, &snapshot(), &Context::new(Transport::Udp), &mut out)
}

#[test]
fn qdcount_zero_without_edns_is_formerr() {
    let reply = ask(&snapshot(), &RawQuery::empty().bytes());
    assert_eq!(reply.response_code(), ResponseCode::FormErr);
    assert!(reply.extensions().is_none());
}

#[test]
fn qdcount_zero_with_only_a_cookie_is_formerr_with_opt() {
    let reply = ask(&snapshot(), &RawQuery::empty().opt(1232, 0, &[(10, COOKIE)]).bytes());
    assert_eq!(reply.response_code(), ResponseCode::FormErr);
    assert!(reply.extensions().is_some());
}

#[test]
fn qdcount_zero_with_opt_is_formerr_with_opt() {
    let reply = ask(&snapshot(), &RawQuery::empty().opt(1232, 0, &[]).bytes());
    assert_eq!(reply.response_code(), ResponseCode::FormErr);
    assert_eq!(reply.extensions().as_ref().unwrap().max_payload(), 1232);
}

#[test]
fn two_questions_are_formerr() {
    let mut q = RawQuery::new("web.skydns.test.", A);
    q.question("big.skydns.test.", A, 1);
    assert_eq!(ask(&snapshot(), &q.bytes()).response_code(), ResponseCode::FormErr);
}

#[test]
fn unknown_opcodes_get_notimp_with_every_flag_but_qr_cleared() {
    for opcode in [2u16, 15] {
        let mut q = RawQuery::new("web.skydns.test.", A);
        q.flags = (opcode << 11) | 0x0100 | 0x0400 | 0x0200 | 0x0080 | 0x0040 | 0x0020 | 0x0010;
        let raw = ask_raw(&snapshot(), &q.bytes(), Transport::Udp).unwrap();
        assert_eq!(
            u16::from_be_bytes([raw[2], raw[3]]),
            0x8000 | (opcode << 11) | 4,
            "opcode {opcode}"
        );
        assert_eq!(&raw[4..6], &[0, 1], "question copied");
        assert_eq!(&raw[12..], &q.bytes()[12..]);
        if opcode == 2 {
            let reply = hickory_proto::op::Message::from_vec(&raw).unwrap();
            assert_eq!(reply.op_code(), OpCode::Status);
            assert_eq!(reply.queries().len(), 1);
        }
    }
}

#[test]
fn responses_are_dropped() {
    let mut q = RawQuery::new("web.skydns.test.", A);
    q.flags |= 0x8000;
    assert_eq!(outcome(&q.bytes()), Outcome::Drop(DropReason::Response));
}

#[test]
fn runts_are_dropped() {
    assert_eq!(outcome(&[0u8; 11]), Outcome::Drop(DropReason::TooShort));
    assert_eq!(outcome(&[]), Outcome::Drop(DropReason::TooShort));
}

#[test]
fn header_only_is_formerr() {
    let mut q = RawQuery::empty();
    q.counts[0] = 1;
    assert_eq!(ask(&snapshot(), &q.bytes()).response_code(), ResponseCode::FormErr);
}

#[test]
fn truncated_question_is_formerr() {
    let mut bytes = RawQuery::new("web.skydns.test.", A).bytes();
    bytes.truncate(bytes.len() - 3);
    assert_eq!(ask(&snapshot(), &bytes).response_code(), ResponseCode::FormErr);
}

#[test]
fn compression_loop_is_formerr() {
    let mut q = RawQuery::empty();
    q.counts[0] = 1;
    q.body = vec![1, b'a', 0xC0, 12, 0, 1, 0, 1];
    assert_eq!(ask(&snapshot(), &q.bytes()).response_code(), ResponseCode::FormErr);
}

#[test]
fn label_over_63_is_formerr() {
    let mut q = RawQuery::empty();
    q.counts[0] = 1;
    q.body.push(64);
    q.body.extend([b'a'; 64]);
    q.body.extend([0, 0, 1, 0, 1]);
    assert_eq!(ask(&snapshot(), &q.bytes()).response_code(), ResponseCode::FormErr);
}

#[test]
fn name_over_255_is_formerr() {
    let label = "a".repeat(63);
    let long = format!("{label}.{label}.{label}.{label}.");
    let bytes = RawQuery::new(&long, A).bytes();
    assert_eq!(ask(&snapshot(), &bytes).response_code(), ResponseCode::FormErr);
}

#[test]
fn edns_version_above_zero_is_badvers_with_version_zero_opt() {
    let reply = ask(
        &snapshot(),
        &RawQuery::new("web.skydns.test.", A).opt(1232, 1, &[]).bytes(),
    );
    assert_eq!(
        u16::from(reply.response_code()),
        16,
        "BADVERS shares code 16 with BADSIG"
    );
    assert_eq!(reply.extensions().as_ref().unwrap().version(), 0);
    assert!(reply.answers().is_empty());
}

#[test]
fn two_opt_records_are_formerr_with_opt() {
    let reply = ask(
        &snapshot(),
        &RawQuery::new("web.skydns.test.", A)
            .opt(1232, 0, &[])
            .opt(1232, 0, &[])
            .bytes(),
    );
    assert_eq!(reply.response_code(), ResponseCode::FormErr);
    assert!(reply.extensions().is_some());
}

#[test]
fn opt_outside_additional_is_formerr() {
    let mut q = RawQuery::new("web.skydns.test.", A);
    q.opt(1232, 0, &[]);
    q.counts[3] = 0;
    q.counts[1] = 1;
    assert_eq!(ask(&snapshot(), &q.bytes()).response_code(), ResponseCode::FormErr);
}

#[test]
fn opt_rdlen_overrun_is_formerr() {
    let mut bytes = RawQuery::new("web.skydns.test.", A)
        .opt(1232, 0, &[(10, COOKIE)])
        .bytes();
    let n = bytes.len();
    bytes[n - 13] = 40;
    let raw = ask_raw(&snapshot(), &bytes, Transport::Udp).unwrap();
    assert_eq!(raw[3] & 0x0F, 1, "FORMERR");
}

#[test]
fn unknown_edns_options_are_ignored_and_opt_echoed() {
    let reply = ask(
        &snapshot(),
        &RawQuery::new("web.skydns.test.", A)
            .opt(1232, 0, &[(65001, b"xyz")])
            .bytes(),
    );
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert_eq!(reply.answers().len(), 2);
    assert_eq!(reply.extensions().as_ref().unwrap().max_payload(), 1232);
}

#[test]
fn edns_udp_size_below_512_counts_as_512() {
    let bytes = RawQuery::new("big.skydns.test.", A).opt(100, 0, &[]).bytes();
    let raw = ask_raw(&snapshot(), &bytes, Transport::Udp).unwrap();
    assert!(raw.len() <= 512);
    let reply = hickory_proto::op::Message::from_vec(&raw).unwrap();
    assert!(reply.truncated());
}

#[test]
fn oversized_answer_rrset_is_left_out_whole_with_tc() {
    let reply = ask(&snapshot(), &RawQuery::new("big.skydns.test.", A).bytes());
    assert!(reply.truncated());
    assert!(
        reply.answers().is_empty(),
        "an RRset that does not fit is left out entirely"
    );
    let reply = ask(
        &snapshot(),
        &RawQuery::new("big.skydns.test.", A).opt(1232, 0, &[]).bytes(),
    );
    assert!(!reply.truncated());
    assert_eq!(reply.answers().len(), 40);
}

#[test]
fn additional_records_that_do_not_fit_are_dropped_without_tc() {
    let reply = ask(&snapshot(), &RawQuery::new("srv.skydns.test.", 33).bytes());
    assert!(!reply.truncated());
    assert_eq!(reply.answers().len(), 2);
    assert!(reply.additionals().len() < 60);
    let reply = ask_over(
        &snapshot(),
        &RawQuery::new("srv.skydns.test.", 33).bytes(),
        Transport::Tcp,
    );
    assert_eq!(reply.additionals().len(), 60, "the full answer over TCP");
}

#[test]
fn tc_and_z_in_a_query_are_ignored_and_z_cleared() {
    let mut q = RawQuery::new("web.skydns.test.", A);
    q.flags |= 0x0200 | 0x0040;
    let raw = ask_raw(&snapshot(), &q.bytes(), Transport::Udp).unwrap();
    assert_eq!(raw[3] & 0x40, 0, "Z cleared");
    let reply = hickory_proto::op::Message::from_vec(&raw).unwrap();
    assert!(!reply.truncated());
    assert_eq!(reply.answers().len(), 2);
}

#[test]
fn rd_is_copied_aa_set_and_ra_clear_without_recursion() {
    let reply = ask(&snapshot(), &RawQuery::new("web.skydns.test.", A).bytes());
    assert!(reply.recursion_desired() && reply.authoritative() && !reply.recursion_available());
    let mut q = RawQuery::new("web.skydns.test.", A);
    q.flags = 0;
    assert!(!ask(&snapshot(), &q.bytes()).recursion_desired());
}

#[test]
fn ad_and_cd_are_cleared_in_authoritative_answers() {
    let mut q = RawQuery::new("web.skydns.test.", A);
    q.flags |= 0x0020 | 0x0010;
    let reply = ask(&snapshot(), &q.bytes());
    assert!(!reply.authentic_data() && !reply.checking_disabled());
}

#[test]
fn qtype_any_gets_a_minimal_hinfo_answer() {
    let reply = ask(&snapshot(), &RawQuery::new("web.skydns.test.", 255).bytes());
    assert_eq!(reply.answers().len(), 1);
    let RData::HINFO(hinfo) = reply.answers()[0].data().unwrap() else {
        panic!("HINFO expected")
    };
    assert_eq!(hinfo.cpu(), b"RFC8482");
}

#[test]
fn axfr_and_ixfr_over_udp_are_notimp() {
    for qtype in [252, 251] {
        assert_eq!(
            ask(&snapshot(), &RawQuery::new("skydns.test.", qtype).bytes()).response_code(),
            ResponseCode::NotImp
        );
    }
}

#[test]
fn axfr_over_tcp_is_refused_while_transfers_are_off() {
    let reply = ask_over(&snapshot(), &RawQuery::new("skydns.test.", 252).bytes(), Transport::Tcp);
    assert_eq!(reply.response_code(), ResponseCode::Refused);
}

#[test]
fn qtype_opt_is_formerr() {
    assert_eq!(
        ask(&snapshot(), &RawQuery::new("web.skydns.test.", 41).bytes()).response_code(),
        ResponseCode::FormErr
    );
}

#[test]
fn meta_qtypes_and_qtype_zero_are_notimp() {
    for qtype in [0, 128, 249, 250, 253, 254] {
        let reply = ask(&snapshot(), &RawQuery::new("web.skydns.test.", qtype).bytes());
        assert_eq!(reply.response_code(), ResponseCode::NotImp, "qtype {qtype}");
    }
}

#[test]
fn unknown_qtype_for_an_existing_name_is_nodata_with_soa() {
    let reply = ask(&snapshot(), &RawQuery::new("web.skydns.test.", 65280).bytes());
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.answers().is_empty() && reply.authoritative());
    assert_eq!(reply.name_servers().len(), 1);
    assert_eq!(reply.name_servers()[0].record_type(), RecordType::SOA);
    assert_eq!(reply.name_servers()[0].ttl(), 60);
}

#[test]
fn missing_name_is_nxdomain_with_soa_and_aa() {
    let reply = ask(&snapshot(), &RawQuery::new("nope.skydns.test.", A).bytes());
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    assert!(reply.authoritative());
    assert_eq!(reply.name_servers()[0].name().to_ascii(), "skydns.test.");
}

#[test]
fn chaos_identity_is_refused_unless_configured() {
    for name in ["version.bind.", "id.server."] {
        let mut q = RawQuery::empty();
        q.question(name, TXT, 3);
        assert_eq!(ask(&snapshot(), &q.bytes()).response_code(), ResponseCode::Refused);
        let reply = ask(&snapshot_with_identity(), &q.bytes());
        assert_eq!(reply.response_code(), ResponseCode::NoError);
        assert_eq!(reply.answers().len(), 1);
    }
}

#[test]
fn unknown_classes_are_refused() {
    for qclass in [254, 4, 255] {
        let mut q = RawQuery::empty();
        q.question("web.skydns.test.", A, qclass);
        assert_eq!(
            ask(&snapshot(), &q.bytes()).response_code(),
            ResponseCode::Refused,
            "class {qclass}"
        );
    }
}

#[test]
fn names_outside_every_zone_are_refused() {
    let reply = ask(&snapshot(), &RawQuery::new("example.org.", A).bytes());
    assert_eq!(reply.response_code(), ResponseCode::Refused);
    assert!(!reply.authoritative());
}

#[test]
fn answer_and_authority_records_in_a_query_are_ignored_and_noted() {
    let mut q = RawQuery::new("web.skydns.test.", A);
    q.body.extend_from_slice(&[0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4]);
    q.counts[1] = 1;
    let mut out = vec![0u8; 65535];
    let Outcome::Reply(r) = answer(&q.bytes(), &snapshot(), &Context::new(Transport::Udp), &mut out) else {
        panic!()
    };
    assert!(r.ignored_records());
    let reply = hickory_proto::op::Message::from_vec(&out[..r.len()]).unwrap();
    assert_eq!(reply.answers().len(), 2);
}

#[test]
fn trailing_bytes_are_ignored_and_noted() {
    let mut bytes = RawQuery::new("web.skydns.test.", A).bytes();
    bytes.extend_from_slice(b"junk");
    let mut out = vec![0u8; 65535];
    let Outcome::Reply(r) = answer(&bytes, &snapshot(), &Context::new(Transport::Udp), &mut out) else {
        panic!()
    };
    assert!(r.trailing());
    assert_eq!(
        hickory_proto::op::Message::from_vec(&out[..r.len()])
            .unwrap()
            .answers()
            .len(),
        2
    );
}

#[test]
fn mixed_case_question_is_echoed_byte_exact_and_owners_keep_its_case() {
    let bytes = RawQuery::new("wEb.SkyDNS.TeSt.", A).bytes();
    let raw = ask_raw(&snapshot(), &bytes, Transport::Udp).unwrap();
    assert_eq!(&raw[12..bytes.len()], &bytes[12..]);
    let reply = hickory_proto::op::Message::from_vec(&raw).unwrap();
    assert_eq!(reply.answers()[0].name().to_ascii(), "wEb.SkyDNS.TeSt.");
}

#[test]
fn every_reply_to_a_query_with_opt_carries_opt() {
    let queries = [
        RawQuery::new("web.skydns.test.", A).opt(1232, 0, &[]).bytes(),
        RawQuery::new("nope.skydns.test.", A).opt(1232, 0, &[]).bytes(),
        RawQuery::new("example.org.", A).opt(1232, 0, &[]).bytes(),
        RawQuery::new("web.skydns.test.", 41).opt(1232, 0, &[]).bytes(),
        RawQuery::new("web.skydns.test.", 252).opt(1232, 0, &[]).bytes(),
    ];
    for q in queries {
        assert!(ask(&snapshot(), &q).extensions().is_some());
    }
}

#[test]
fn tcp_keepalive_is_advertised_only_over_tcp_when_asked() {
    let q = RawQuery::new("web.skydns.test.", A).opt(1232, 0, &[(11, &[])]).bytes();
    let tcp = ask_raw(&snapshot(), &q, Transport::Tcp).unwrap();
    assert_eq!(&tcp[tcp.len() - 6..], &[0, 11, 0, 2, 0, 100]);
    let udp = ask_raw(&snapshot(), &q, Transport::Udp).unwrap();
    assert_eq!(&udp[udp.len() - 2..], &[0, 0], "no options over UDP");
}

#[test]
fn address_rrsets_rotate_between_queries() {
    let q = RawQuery::new("web.skydns.test.", A).bytes();
    let first = |rotation| {
        let mut out = vec![0u8; 65535];
        let ctx = Context {
            rotation,
            ..Context::new(Transport::Udp)
        };
        let Outcome::Reply(r) = answer(&q, &snapshot(), &ctx, &mut out) else {
            panic!()
        };
        let reply = hickory_proto::op::Message::from_vec(&out[..r.len()]).unwrap();
        reply.answers()[0].data().unwrap().clone()
    };
    assert_ne!(first(0), first(1));
    assert_eq!(first(0), first(2));
}
