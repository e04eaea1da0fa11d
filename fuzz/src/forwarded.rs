//! Properties of replies to forwarded questions, whatever the upstream sent: the client's ID and
//! question come back, QR and RA are set, the reply fits the client's transport, and the records
//! are the upstream's own, in order, with only their TTLs rewritten.

use crate::query::{encode, Fields};
use hickory_proto::op::Message;
use hickory_proto::rr::Record;
use skyline_dataplane::wire::types::{
    class, flags, option, ADVERTISED_UDP_LEN, CLASSIC_UDP_LEN, HEADER_LEN, MAX_MESSAGE_LEN,
};
use skyline_dataplane::wire::{parse_query, Edns, LowerName};
use skyline_dataplane::Transport;

/// A client of the forwarder: its query as sent, and the transport it came over.
#[derive(Debug, Clone)]
pub struct Client {
    /// The query, with the question spelled as the client spelled it.
    pub query: Vec<u8>,
    /// UDP or TCP.
    pub transport: Transport,
}

impl Client {
    /// A recursive query (RD set, CD when `checking_disabled`) with ID `id` for `qname` as
    /// spelled (uncompressed wire form, any case), with an OPT of `udp_size` and DO when
    /// `edns` is given.
    pub fn new(
        id: u16,
        qname: &[u8],
        qtype: u16,
        checking_disabled: bool,
        edns: Option<(u16, bool)>,
        transport: Transport,
    ) -> Client {
        let cd = if checking_disabled { flags::CD } else { 0 };
        let query = encode(&Fields {
            id,
            flags: flags::RD | cd,
            qname,
            qtype,
            qclass: class::IN,
            edns: edns.map(|(udp_size, dnssec_ok)| Edns {
                udp_size,
                dnssec_ok,
                ..Edns::default()
            }),
        });
        Client { query, transport }
    }

    /// The most its reply may hold: 512 bytes without EDNS, the EDNS size within 512..=1232
    /// over UDP, 65535 over TCP.
    pub fn size_limit(&self) -> usize {
        let mut name = LowerName::default();
        let edns = parse_query(&self.query, &mut name).ok().and_then(|q| q.edns);
        match (self.transport, edns) {
            (Transport::Tcp, _) => MAX_MESSAGE_LEN,
            (Transport::Udp, Some(e)) => {
                usize::from(e.udp_size).clamp(CLASSIC_UDP_LEN, usize::from(ADVERTISED_UDP_LEN))
            }
            (Transport::Udp, None) => CLASSIC_UDP_LEN,
        }
    }

    /// The question as the client wrote it: name, type and class.
    fn question(&self) -> &[u8] {
        let end = self.query.len() - if self.has_opt() { 11 } else { 0 };
        &self.query[HEADER_LEN..end]
    }

    fn has_opt(&self) -> bool {
        self.query[11] == 1
    }
}

/// Checks what the forwarder sent `client`: size, ID, flags, the question echoed byte for byte
/// (0x20), an OPT exactly when the client sent one, and a body skyline's own reader reads back.
pub fn reply(client: &Client, reply: &[u8]) {
    assert!(reply.len() >= HEADER_LEN, "a reply shorter than a header");
    assert!(
        reply.len() <= client.size_limit(),
        "a reply of {} bytes to a client allowing {}",
        reply.len(),
        client.size_limit()
    );
    assert_eq!(reply[..2], client.query[..2], "the client's ID");
    let word = u16::from_be_bytes([reply[2], reply[3]]);
    let asked = u16::from_be_bytes([client.query[2], client.query[3]]);
    assert!(word & flags::QR != 0, "QR is set in replies");
    assert_eq!(word & flags::OPCODE_MASK, 0, "a QUERY answered");
    assert!(word & flags::RA != 0, "RA: recursion is offered to this client");
    assert_eq!(word & (flags::AA | flags::Z), 0, "a cache is no authority; Z clear");
    assert_eq!(
        word & (flags::RD | flags::CD),
        asked & (flags::RD | flags::CD),
        "RD and CD copied"
    );
    if client.transport == Transport::Tcp {
        assert_eq!(word & flags::TC, 0, "TC over TCP: the client has nowhere to go");
    }
    let question = client.question();
    assert_eq!(&reply[4..6], &[0, 1], "exactly the one question is echoed");
    assert_eq!(
        reply.get(HEADER_LEN..HEADER_LEN + question.len()),
        Some(question),
        "the question echoed byte for byte (0x20)"
    );

    let mut as_query = reply.to_vec();
    as_query[2] &= !0x80;
    let mut name = LowerName::default();
    let read = parse_query(&as_query, &mut name).expect("the reply has a header");
    assert_eq!(read.error, None, "skyline reads its own reply: {reply:02x?}");
    assert!(!read.trailing, "the reply ends with its last record");
    assert_eq!(read.edns.is_some(), client.has_opt(), "an OPT iff the client sent one");
    if let Some(edns) = read.edns {
        assert_eq!((edns.version, edns.udp_size), (0, ADVERTISED_UDP_LEN));
        assert_eq!(
            edns.dnssec_ok,
            client.query[client.query.len() - 4] & 0x80 != 0,
            "DO copied"
        );
    }
}

/// hickory-proto reads `reply` and finds as many records as its header says.
pub fn hickory(reply: &[u8]) -> Message {
    let message = Message::from_vec(reply).unwrap_or_else(|e| panic!("hickory rejects the reply ({e}): {reply:02x?}"));
    let count = |i: usize| usize::from(u16::from_be_bytes([reply[4 + 2 * i], reply[5 + 2 * i]]));
    assert_eq!(message.answers().len(), count(1));
    assert_eq!(message.name_servers().len(), count(2));
    assert_eq!(
        message.additionals().len() + usize::from(message.extensions().is_some()),
        count(3)
    );
    message
}

/// A reply built from an upstream's reply that hickory-proto read (`upstream`) has its rcode
/// and holds the upstream's records, in order, each section possibly cut short by the client's size but never
/// reordered or altered beyond its TTL, and hickory reads it too.
///
/// An upstream reply hickory refuses (an A record of 5 bytes, rdata of a type whose format
/// hickory checks and skyline does not interpret) is relayed as it came, in records skyline's
/// reader checked: [`reply`] still holds for it, this does not.
pub fn relayed(reply: &[u8], upstream: &Message) -> Message {
    let served = hickory(reply);
    assert_eq!(
        served.response_code(),
        upstream.response_code(),
        "the upstream's rcode, extended bits included"
    );
    for (what, ours, theirs) in [
        ("answer", served.answers(), upstream.answers()),
        ("authority", served.name_servers(), upstream.name_servers()),
        ("additional", served.additionals(), upstream.additionals()),
    ] {
        assert!(
            ours.len() <= theirs.len() && ours.iter().zip(theirs).all(|(a, b)| same_record(a, b)),
            "the {what} section is not the upstream's: {ours:?} against {theirs:?}"
        );
    }
    served
}

/// Equal but for the TTL, which the cache counts down. Names compare case-insensitively: an
/// owner compressed to the question takes the client's spelling.
fn same_record(a: &Record, b: &Record) -> bool {
    a.name() == b.name() && a.record_type() == b.record_type() && a.dns_class() == b.dns_class() && a.data() == b.data()
}

/// The Extended DNS Error info code in a reply's OPT, if any.
pub fn ede(reply: &Message) -> Option<u16> {
    let edns = reply.extensions().as_ref()?;
    edns.options().as_ref().iter().find_map(|(code, value)| {
        (u16::from(*code) == option::EDE).then(|| match value {
            hickory_proto::rr::rdata::opt::EdnsOption::Unknown(_, data) if data.len() >= 2 => {
                u16::from_be_bytes([data[0], data[1]])
            }
            _ => panic!("an unreadable Extended DNS Error: {value:?}"),
        })
    })
}
