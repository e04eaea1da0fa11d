//! Records the answer path writes on the stack for a name kept in a compact table (a cluster
//! host, a SkyDNS leaf) instead of a node with compiled answers: the writer, and where the
//! records it wrote lie.

use crate::wire::types::{class, rtype, HEADER_LEN};
use std::net::IpAddr;

/// Where a table's answer put its records: the answer section's records first, then the
/// additional section's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Bytes of the answer section.
    pub answer_len: usize,
    /// Records of the answer section.
    pub answer_count: u16,
    /// Bytes of both sections.
    pub len: usize,
    /// Records of the additional section.
    pub additional_count: u16,
}

/// Appends records to a buffer sized for the largest answer of its table.
pub(crate) struct Cursor<'b> {
    out: &'b mut [u8],
    /// Bytes written so far.
    pub(crate) at: usize,
}

impl<'b> Cursor<'b> {
    /// A cursor at the start of `out`.
    pub(crate) fn new(out: &'b mut [u8]) -> Cursor<'b> {
        Cursor { out, at: 0 }
    }

    fn put(&mut self, bytes: &[u8]) {
        self.out[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }

    /// A record owned by the query name: a pointer to the question.
    pub(crate) fn record(&mut self, rtype_: u16, ttl: u32, rdata: &[&[u8]]) {
        let len: usize = rdata.iter().map(|part| part.len()).sum();
        self.put(&[0xC0, HEADER_LEN as u8]);
        self.put(&rtype_.to_be_bytes());
        self.put(&class::IN.to_be_bytes());
        self.put(&ttl.to_be_bytes());
        self.put(&(len as u16).to_be_bytes());
        for part in rdata {
            self.put(part);
        }
    }

    /// The A or AAAA record of `address`, owned by the query name.
    pub(crate) fn address(&mut self, ttl: u32, address: IpAddr) {
        match address {
            IpAddr::V4(a) => self.record(rtype::A, ttl, &[&a.octets()]),
            IpAddr::V6(a) => self.record(rtype::AAAA, ttl, &[&a.octets()]),
        }
    }
}
