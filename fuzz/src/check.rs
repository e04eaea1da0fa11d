//! Properties of the answer path that hold for every input; a broken one panics, which
//! libFuzzer reports as a crash with the input that broke it.

use hickory_proto::op::Message;
use skyline_dataplane::wire::types::{flags, rcode, ADVERTISED_UDP_LEN, CLASSIC_UDP_LEN, HEADER_LEN, MAX_MESSAGE_LEN};
use skyline_dataplane::wire::{parse_query, DropReason, LowerName, Query};
use skyline_dataplane::{answer, Context, Outcome, Snapshot, Transport};

/// Answers `query` over `transport` into `out` and checks the outcome; returns the reply.
pub fn answered<'o>(
    query: &[u8],
    snapshot: &Snapshot,
    transport: Transport,
    rotation: u32,
    out: &'o mut [u8],
) -> Option<&'o [u8]> {
    let ctx = Context {
        rotation,
        ..Context::new(transport)
    };
    match answer(query, snapshot, &ctx, out) {
        Outcome::Reply(reply) => {
            let bytes = &out[..reply.len()];
            self::reply(query, bytes, transport);
            Some(bytes)
        }
        Outcome::Drop(reason) => {
            dropped(query, reason);
            None
        }
    }
}

/// A message is dropped only for the reasons docs/robustness.md gives: a runt, or a response.
pub fn dropped(query: &[u8], reason: DropReason) {
    match reason {
        DropReason::TooShort => assert!(query.len() < HEADER_LEN, "a dropped runt had a whole header"),
        DropReason::Response => assert!(query[2] & 0x80 != 0, "a query dropped as a response"),
    }
}

/// The most a reply over `transport` may hold for query `q`: 512 bytes without EDNS, the
/// client's EDNS size within 512..=1232 over UDP, 65535 over TCP.
fn size_limit(q: &Query, transport: Transport) -> usize {
    match (transport, q.edns) {
        (Transport::Tcp, _) => MAX_MESSAGE_LEN,
        (Transport::Udp, Some(e)) => usize::from(e.udp_size).clamp(CLASSIC_UDP_LEN, usize::from(ADVERTISED_UDP_LEN)),
        (Transport::Udp, None) => CLASSIC_UDP_LEN,
    }
}

/// Checks one reply against the query it answers: size limit, ID, flags, a well-formed body
/// that skyline's own parser reads back to the same question, and an OPT exactly when the
/// query's OPT parsed.
pub fn reply(query: &[u8], reply: &[u8], transport: Transport) {
    let mut qname = LowerName::default();
    let q = parse_query(query, &mut qname).expect("a reply went out, so the header parsed");
    assert!(reply.len() >= HEADER_LEN, "a reply shorter than a header");
    assert!(
        reply.len() <= size_limit(&q, transport),
        "a reply of {} bytes over {transport:?}",
        reply.len()
    );
    assert_eq!(u16::from_be_bytes([reply[0], reply[1]]), q.id, "the reply's ID");
    let word = u16::from_be_bytes([reply[2], reply[3]]);
    assert!(word & flags::QR != 0, "QR is set in replies");
    assert_eq!(
        word & flags::OPCODE_MASK,
        q.flags & flags::OPCODE_MASK,
        "the opcode is copied"
    );
    assert_eq!(
        word & (flags::Z | flags::AD | flags::CD | flags::RA),
        0,
        "Z, AD, CD, RA are clear"
    );
    if transport == Transport::Tcp {
        assert_eq!(word & flags::TC, 0, "TC over TCP: answers that do not fit are SERVFAIL");
    }
    if q.opcode() != 0 {
        assert_eq!(
            word & !(flags::QR | flags::OPCODE_MASK),
            rcode::NOTIMP,
            "unknown opcodes: NOTIMP, flags clear"
        );
    }

    let mut as_query = reply.to_vec();
    as_query[2] &= !0x80;
    let mut rname = LowerName::default();
    let r = parse_query(&as_query, &mut rname).expect("the reply has a header");
    assert_eq!(r.error, None, "the reply is well-formed: {reply:02x?}");
    assert!(!r.trailing, "the reply ends with its last record");
    assert!(r.qdcount <= 1, "at most the one question is echoed");
    assert_eq!(
        r.question.is_some(),
        q.question.is_some(),
        "the question is echoed when it parsed"
    );
    if let (Some(asked), Some(echoed)) = (q.question, r.question) {
        assert_eq!((asked.qtype, asked.qclass), (echoed.qtype, echoed.qclass));
        assert_eq!(rname.wire(), qname.wire(), "the echoed question names the same name");
        let uncompressed = asked.end - 4 - HEADER_LEN == qname.wire().len();
        if uncompressed {
            assert_eq!(
                &reply[HEADER_LEN..echoed.end],
                &query[HEADER_LEN..asked.end],
                "0x20 echo"
            );
        }
    }
    assert_eq!(
        r.edns.is_some(),
        q.edns.is_some(),
        "an OPT in the reply iff the query's OPT parsed"
    );
    if let (Some(asked), Some(echoed)) = (q.edns, r.edns) {
        assert_eq!(echoed.version, 0, "replies speak EDNS version 0");
        assert_eq!(echoed.udp_size, ADVERTISED_UDP_LEN);
        assert_eq!(echoed.dnssec_ok, asked.dnssec_ok, "DO is copied");
    }
}

/// hickory-proto, an independent implementation, reads the reply and finds as many records as
/// the header announces. Opcodes hickory does not know (anything but QUERY, STATUS, NOTIFY and
/// UPDATE) make it refuse the header, so those replies are left to [`reply`].
pub fn hickory(reply: &[u8]) {
    let opcode = (reply[2] >> 3) & 0x0F;
    if !matches!(opcode, 0 | 2 | 4 | 5) {
        return;
    }
    let message = Message::from_vec(reply).unwrap_or_else(|e| panic!("hickory rejects the reply ({e}): {reply:02x?}"));
    let count = |i: usize| usize::from(u16::from_be_bytes([reply[4 + 2 * i], reply[5 + 2 * i]]));
    assert_eq!(message.queries().len(), count(0));
    assert_eq!(message.answers().len(), count(1));
    assert_eq!(message.name_servers().len(), count(2));
    let opt = usize::from(message.extensions().is_some());
    assert_eq!(message.additionals().len() + opt, count(3));
}
