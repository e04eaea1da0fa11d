//! The vocabulary of a reply, below both the answer path that writes one and the plugins that
//! turn one back for their client (`rewrite`): the transport a query came on and the size it
//! allows, and what became of a message.

use crate::wire::query::Edns;
use crate::wire::types::{ADVERTISED_UDP_LEN, CLASSIC_UDP_LEN, MAX_MESSAGE_LEN};
use crate::wire::DropReason;

/// The transport a query arrived on; it sets the reply size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Datagrams: limited by the client's EDNS size (512 without EDNS), capped at 1232.
    Udp,
    /// Streams: up to 65535 bytes.
    Tcp,
}

/// What the answer path did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A reply of `len` bytes is in the output buffer.
    Reply(Reply),
    /// Nothing is to be sent.
    Drop(DropReason),
}

/// Facts about a reply, for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Bytes written.
    pub len: usize,
    /// Response code, extended (BADVERS = 16).
    pub rcode: u16,
    /// TC was set.
    pub truncated: bool,
    /// The query claimed answer or authority records, which were ignored.
    pub ignored_records: bool,
    /// Bytes followed the query, which were ignored.
    pub trailing: bool,
    /// The query carried a server cookie this server made (RFC 7873): its client receives at
    /// its address, so response rate limiting leaves it alone.
    pub valid_cookie: bool,
    /// Offset just past the reply's question, 0 when it has none: response rate limiting
    /// finds the zone's SOA after it without walking the name again.
    pub question_end: u16,
    /// The low 32 bits of the question's name's [`crate::wire::LowerName::hash`] (0 without a
    /// question): response rate limiting keys answers on it without hashing the name again. 32
    /// bits keep these facts in 24 bytes, which every answer moves several times.
    pub name_hash: u32,
    /// The answer is that of a name further down the client pod's search list (CoreDNS's
    /// `autopath`, docs/kubernetes.md "Autopath"): `coredns_autopath_success_total` counts it.
    pub searched: bool,
}

/// The size a reply may take: a message over TCP; over UDP the client's EDNS size, capped at
/// the size skyline advertises, or 512 bytes without EDNS.
#[inline(always)]
pub(crate) fn size_limit(transport: Transport, edns: Option<Edns>) -> usize {
    match (transport, edns) {
        (Transport::Tcp, _) => MAX_MESSAGE_LEN,
        (Transport::Udp, Some(e)) => (e.udp_size as usize).clamp(CLASSIC_UDP_LEN, ADVERTISED_UDP_LEN as usize),
        (Transport::Udp, None) => CLASSIC_UDP_LEN,
    }
}
