//! Round trips, parse → build → parse:
//! - a query skyline understood, written back canonically, parses to the same fields and gets
//!   the same reply (up to the case of the question, which is echoed as sent);
//! - every reply parses back, with skyline's parser to the query's question, and with
//!   hickory-proto to as many records as its header claims.

#![no_main]

use libfuzzer_sys::fuzz_target;
use skyline_dataplane::wire::types::{HEADER_LEN, MAX_MESSAGE_LEN};
use skyline_dataplane::wire::{parse_query, LowerName, Query};
use skyline_dataplane::Transport;
use skyline_fuzz::query::{encode, Fields};
use skyline_fuzz::{check, fixture};

fuzz_target!(|data: &[u8]| {
    let mut qname = LowerName::default();
    let Ok(q) = parse_query(data, &mut qname) else {
        return;
    };
    let snapshot = fixture::snapshot();
    let mut out = vec![0u8; MAX_MESSAGE_LEN];
    let mut canonical_out = vec![0u8; MAX_MESSAGE_LEN];
    for transport in [Transport::Udp, Transport::Tcp] {
        let Some(reply) = check::answered(data, snapshot, transport, 0, &mut out) else {
            panic!("a query whose header parsed went unanswered");
        };
        check::hickory(reply);
        let Some(canonical) = canonical(&q, &qname) else {
            continue;
        };
        let canonical_reply = check::answered(&canonical, snapshot, transport, 0, &mut canonical_out)
            .expect("the canonical query is answered");
        let mut folded = reply.to_vec();
        let name_end = HEADER_LEN + qname.wire().len();
        if folded.len() >= name_end {
            folded[HEADER_LEN..name_end].make_ascii_lowercase();
        }
        assert_eq!(folded, canonical_reply, "the canonical query gets the same reply");
    }
});

/// The canonical form of a well-formed single-question query, after checking that it parses
/// back to the same fields.
fn canonical(q: &Query, qname: &LowerName) -> Option<Vec<u8>> {
    let question = q.question.filter(|_| q.error.is_none() && q.qdcount == 1)?;
    let fields = Fields {
        id: q.id,
        flags: q.flags,
        qname: qname.wire(),
        qtype: question.qtype,
        qclass: question.qclass,
        edns: q.edns,
    };
    let bytes = encode(&fields);
    let mut again = LowerName::default();
    let back = parse_query(&bytes, &mut again).expect("the canonical form has a header");
    assert_eq!(back.error, None, "the canonical form is well-formed");
    assert_eq!((back.id, back.flags), (q.id, q.flags));
    assert_eq!(again.wire(), qname.wire());
    let back_question = back.question.expect("the canonical form has its question");
    assert_eq!(
        (back_question.qtype, back_question.qclass),
        (question.qtype, question.qclass)
    );
    let fold = |e: Option<skyline_dataplane::wire::Edns>| {
        e.map(|e| (e.udp_size, e.version, e.dnssec_ok, e.tcp_keepalive, e.cookie))
    };
    assert_eq!(fold(back.edns), fold(q.edns), "the OPT reads back the same");
    Some(bytes)
}
