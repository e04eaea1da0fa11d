//! A canonical query encoder: what skyline understood of a query, written back in the one plain
//! form (uncompressed lower-case name, one question, at most an OPT with the options that
//! matter), so that a round trip can compare what each form parses to and is answered with.

use skyline_dataplane::wire::types::{option, rtype, HEADER_LEN};
use skyline_dataplane::wire::Edns;

/// The fields of a query that decide its answer.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    /// Message ID.
    pub id: u16,
    /// The flags word, opcode included.
    pub flags: u16,
    /// The question name in uncompressed wire form.
    pub qname: &'a [u8],
    /// Query type.
    pub qtype: u16,
    /// Query class.
    pub qclass: u16,
    /// The OPT record's content, when there is one.
    pub edns: Option<Edns>,
}

/// A plain query for `qname`/`qtype`/`qclass` with RD set, with or without an OPT of 1232 bytes.
pub fn plain(qname: &[u8], qtype: u16, qclass: u16, edns: bool) -> Vec<u8> {
    encode(&Fields {
        id: 0x5eed,
        flags: 0x0100,
        qname,
        qtype,
        qclass,
        edns: edns.then_some(Edns {
            udp_size: 1232,
            ..Edns::default()
        }),
    })
}

/// Writes `fields` as a query message.
pub fn encode(fields: &Fields<'_>) -> Vec<u8> {
    let mut m = Vec::with_capacity(HEADER_LEN + fields.qname.len() + 4 + 32);
    m.extend_from_slice(&fields.id.to_be_bytes());
    m.extend_from_slice(&fields.flags.to_be_bytes());
    let arcount = u16::from(fields.edns.is_some());
    for count in [1, 0, 0, arcount] {
        m.extend_from_slice(&count.to_be_bytes());
    }
    m.extend_from_slice(fields.qname);
    m.extend_from_slice(&fields.qtype.to_be_bytes());
    m.extend_from_slice(&fields.qclass.to_be_bytes());
    if let Some(edns) = fields.edns {
        let mut options = Vec::new();
        if edns.tcp_keepalive {
            options.extend_from_slice(&option::TCP_KEEPALIVE.to_be_bytes());
            options.extend_from_slice(&0u16.to_be_bytes());
        }
        if edns.cookie.is_some() {
            options.extend_from_slice(&option::COOKIE.to_be_bytes());
            options.extend_from_slice(&8u16.to_be_bytes());
            options.extend_from_slice(&[0x5e; 8]);
        }
        m.push(0);
        m.extend_from_slice(&rtype::OPT.to_be_bytes());
        m.extend_from_slice(&edns.udp_size.to_be_bytes());
        m.extend_from_slice(&[0, edns.version, if edns.dnssec_ok { 0x80 } else { 0 }, 0]);
        m.extend_from_slice(&(options.len() as u16).to_be_bytes());
        m.extend_from_slice(&options);
    }
    m
}
