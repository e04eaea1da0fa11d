//! dnstap messages, encoded by hand: the few fields of `dnstap.proto` (the schema of
//! dnstap.info) that skyline fills, written as protocol buffers without a code generator.
//!
//! ```text
//! Dnstap  { identity = 1 (bytes), version = 2 (bytes), message = 14 (Message), type = 15 (MESSAGE = 1) }
//! Message { type = 1, socket_family = 2, socket_protocol = 3, query_address = 4,
//!           response_address = 5, query_port = 6, response_port = 7, query_time_sec = 8 (uint64),
//!           query_time_nsec = 9 (fixed32), query_message = 10, response_time_sec = 12 (uint64),
//!           response_time_nsec = 13 (fixed32), response_message = 14 }
//! ```

use crate::answer::Transport;
use std::net::{IpAddr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

/// The content type a dnstap Frame Streams connection carries.
pub const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";

/// `Message.Type`: which exchange a message records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A query from a client, as received.
    ClientQuery = 5,
    /// The reply sent to a client.
    ClientResponse = 6,
    /// A query sent to an upstream.
    ForwarderQuery = 7,
    /// An upstream's reply, as received.
    ForwarderResponse = 8,
}

impl Kind {
    fn is_query(self) -> bool {
        matches!(self, Kind::ClientQuery | Kind::ForwarderQuery)
    }
}

/// One message's facts: the DNS message, the peers and the time.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// What the message records.
    pub kind: Kind,
    /// The transport of the exchange.
    pub transport: Transport,
    /// The side that asked: the client, or skyline for forwarder messages (unknown: `None`).
    pub query_addr: Option<SocketAddr>,
    /// The side that answered: the upstream for forwarder messages.
    pub response_addr: Option<SocketAddr>,
    /// The DNS message in wire form.
    pub message: &'a [u8],
    /// When it was received or sent.
    pub time: SystemTime,
}

/// Room left for the length of the nested `Message`: five varint bytes hold any length a DNS
/// message and its fields can reach.
const LENGTH_ROOM: usize = 5;

/// Appends the dnstap frame of `event` to `out`: the `Dnstap` message with `identity` and
/// `version` (left out when empty). The nested `Message` is written in place after room for
/// its length, then moved up against the length once that is known: no second buffer.
pub fn encode(event: &Event<'_>, identity: &[u8], version: &[u8], out: &mut Vec<u8>) {
    if !identity.is_empty() {
        bytes_field(out, 1, identity);
    }
    if !version.is_empty() {
        bytes_field(out, 2, version);
    }
    key(out, 14, 2);
    let length_at = out.len();
    out.extend_from_slice(&[0; LENGTH_ROOM]);
    let start = out.len();
    message(event, out);
    let mut prefix = [0u8; LENGTH_ROOM];
    let prefix_len = varint_into(&mut prefix, (out.len() - start) as u64);
    out.copy_within(start.., length_at + prefix_len);
    out.truncate(out.len() - (LENGTH_ROOM - prefix_len));
    out[length_at..length_at + prefix_len].copy_from_slice(&prefix[..prefix_len]);
    varint_field(out, 15, 1);
}

/// Appends the fields of the `Message` of `event` to `out`.
fn message(event: &Event<'_>, out: &mut Vec<u8>) {
    varint_field(out, 1, event.kind as u64);
    let family = event.query_addr.or(event.response_addr).map(|a| a.ip());
    if let Some(ip) = family {
        varint_field(out, 2, if ip.is_ipv4() { 1 } else { 2 });
    }
    let protocol = match event.transport {
        Transport::Udp => 1,
        Transport::Tcp => 2,
    };
    varint_field(out, 3, protocol);
    if let Some(addr) = event.query_addr {
        let (bytes, len) = ip_bytes(addr.ip());
        bytes_field(out, 4, &bytes[..len]);
    }
    if let Some(addr) = event.response_addr {
        let (bytes, len) = ip_bytes(addr.ip());
        bytes_field(out, 5, &bytes[..len]);
    }
    if let Some(addr) = event.query_addr {
        varint_field(out, 6, u64::from(addr.port()));
    }
    if let Some(addr) = event.response_addr {
        varint_field(out, 7, u64::from(addr.port()));
    }
    let since = event.time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (sec, nsec, body) = if event.kind.is_query() {
        (8, 9, 10)
    } else {
        (12, 13, 14)
    };
    varint_field(out, sec, since.as_secs());
    key(out, nsec, 5);
    out.extend_from_slice(&since.subsec_nanos().to_le_bytes());
    bytes_field(out, body, event.message);
}

/// An address as dnstap carries it, in the first 4 bytes (IPv4, IPv4-mapped IPv6 included) or
/// all 16 (IPv6).
fn ip_bytes(ip: IpAddr) -> ([u8; 16], usize) {
    let mut bytes = [0u8; 16];
    let v4 = match ip {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4,
            None => return (v6.octets(), 16),
        },
    };
    bytes[..4].copy_from_slice(&v4.octets());
    (bytes, 4)
}

fn key(out: &mut Vec<u8>, field: u32, wire_type: u32) {
    varint(out, u64::from(field << 3 | wire_type));
}

fn varint_field(out: &mut Vec<u8>, field: u32, value: u64) {
    key(out, field, 0);
    varint(out, value);
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    key(out, field, 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, value: u64) {
    let mut bytes = [0u8; 10];
    let len = varint_into(&mut bytes, value);
    out.extend_from_slice(&bytes[..len]);
}

/// Writes `value` as a varint at the start of `out`, which must have room for it; its length.
fn varint_into(out: &mut [u8], mut value: u64) -> usize {
    let mut len = 0;
    while value >= 0x80 {
        out[len] = (value as u8) | 0x80;
        value >>= 7;
        len += 1;
    }
    out[len] = value as u8;
    len + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_client_query_encodes_as_the_schema_says() {
        let event = Event {
            kind: Kind::ClientQuery,
            transport: Transport::Udp,
            query_addr: Some("10.0.0.210:55142".parse().unwrap()),
            response_addr: Some("10.0.0.210:53".parse().unwrap()),
            message: b"\xda\xba",
            time: UNIX_EPOCH + Duration::new(1_609_664_398, 355_231_260),
        };
        let mut out = Vec::new();
        encode(&event, b"id", b"v", &mut out);
        let message: &[u8] = &[
            8, 5, 16, 1, 24, 1, 34, 4, 10, 0, 0, 210, 42, 4, 10, 0, 0, 210, 48, 230, 174, 3, 56, 53, 64, 142, 143, 198,
            255, 5, 77, 28, 102, 44, 21, 82, 2, 0xda, 0xba,
        ];
        let mut expected = vec![10, 2, b'i', b'd', 18, 1, b'v', 114, message.len() as u8];
        expected.extend_from_slice(message);
        expected.extend_from_slice(&[120, 1]);
        assert_eq!(out, expected);
    }

    #[test]
    fn responses_use_the_response_fields() {
        let event = Event {
            kind: Kind::ForwarderResponse,
            transport: Transport::Tcp,
            query_addr: None,
            response_addr: Some("[2001:db8::1]:53".parse().unwrap()),
            message: b"x",
            time: UNIX_EPOCH + Duration::new(1, 2),
        };
        let mut out = Vec::new();
        encode(&event, b"", b"", &mut out);
        // Dnstap.message (field 14) first: no identity, no version.
        assert_eq!(out[0], 114);
        let m = &out[2..out.len() - 2];
        assert_eq!(&m[..6], &[8, 8, 16, 2, 24, 2]);
        assert_eq!(&m[6..8], &[42, 16]);
        assert_eq!(&m[24..], &[56, 53, 96, 1, 109, 2, 0, 0, 0, 114, 1, b'x']);
    }

    #[test]
    fn a_message_longer_than_one_length_byte_gets_a_two_byte_length() {
        let body = vec![7u8; 300];
        let event = Event {
            kind: Kind::ClientResponse,
            transport: Transport::Udp,
            query_addr: Some("192.0.2.1:5300".parse().unwrap()),
            response_addr: None,
            message: &body,
            time: UNIX_EPOCH,
        };
        let mut out = b"kept".to_vec();
        encode(&event, b"", b"", &mut out);
        assert_eq!(&out[..5], b"kept\x72");
        let length = usize::from(out[5] & 0x7f) | usize::from(out[6]) << 7;
        assert_eq!(out[5] & 0x80, 0x80);
        assert_eq!(length, out.len() - 7 - 2, "the length counts the message exactly");
        assert!(out[7..out.len() - 2].ends_with(&body));
        assert_eq!(&out[out.len() - 2..], &[120, 1]);
    }
}
