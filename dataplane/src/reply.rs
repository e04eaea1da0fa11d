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

/// Facts about a reply, for counters and response rate limiting, packed in one 64-bit word:
/// every answer moves them from the answer path through the forwarder to the pipeline, and a
/// word moves in one register where nine fields took a store and a load each.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Reply(u64);

/// The notes a [`Reply`] carries beside its length, code and question.
pub mod note {
    /// TC was set.
    pub const TRUNCATED: u8 = 1;
    /// The query claimed answer or authority records, which were ignored.
    pub const IGNORED_RECORDS: u8 = 1 << 1;
    /// Bytes followed the query, which were ignored.
    pub const TRAILING: u8 = 1 << 2;
    /// The query carried a server cookie this server made (RFC 7873): its client receives at
    /// its address, so response rate limiting leaves it alone.
    pub const VALID_COOKIE: u8 = 1 << 3;
    /// The answer is that of a name further down the client pod's search list (CoreDNS's
    /// `autopath`, docs/kubernetes.md "Autopath"): `coredns_autopath_success_total` counts it.
    pub const SEARCHED: u8 = 1 << 4;

    /// `note` when `cond` holds, else none: notes decided by a test, put together without a
    /// branch.
    #[inline(always)]
    pub fn when(cond: bool, note: u8) -> u8 {
        u8::from(cond) * note
    }
}

const QTYPE_SHIFT: u32 = 16;
const QUESTION_END_SHIFT: u32 = 32;
const QUESTION_END_BITS: u32 = 10;
const RCODE_SHIFT: u32 = 42;
const RCODE_BITS: u32 = 12;
const NOTES_SHIFT: u32 = 54;

impl Reply {
    /// A reply of `len` bytes (at most a message's 65535) with the extended response code
    /// `rcode` (12 bits), echoing a question of type `qtype` that ends at `question_end` (both
    /// 0 without a question; a question ends by byte 271), with the [`note`]s `notes`.
    #[inline(always)]
    pub fn new(len: usize, rcode: u16, question_end: u16, qtype: u16, notes: u8) -> Reply {
        debug_assert!(len <= usize::from(u16::MAX));
        debug_assert!(question_end < 1 << QUESTION_END_BITS);
        debug_assert!(rcode < 1 << RCODE_BITS);
        // Each field is cut to its width, so that no value can spill into the next.
        Reply(
            (len as u64 & 0xFFFF)
                | u64::from(qtype) << QTYPE_SHIFT
                | (u64::from(question_end) & ((1 << QUESTION_END_BITS) - 1)) << QUESTION_END_SHIFT
                | (u64::from(rcode) & ((1 << RCODE_BITS) - 1)) << RCODE_SHIFT
                | u64::from(notes) << NOTES_SHIFT,
        )
    }

    /// Bytes written.
    #[inline(always)]
    #[expect(clippy::len_without_is_empty, reason = "a reply has at least its header")]
    pub fn len(self) -> usize {
        (self.0 & 0xFFFF) as usize
    }

    /// Response code, extended (BADVERS = 16).
    #[inline(always)]
    pub fn rcode(self) -> u16 {
        ((self.0 >> RCODE_SHIFT) & ((1 << RCODE_BITS) - 1)) as u16
    }

    /// The type of the question the reply echoes, 0 without one: the requests counted by type
    /// read it here, not from the reply's bytes.
    #[inline(always)]
    pub fn qtype(self) -> u16 {
        (self.0 >> QTYPE_SHIFT) as u16
    }

    /// Offset just past the reply's question, 0 when it has none: response rate limiting
    /// finds the question's name and the zone's SOA after it without walking the name again.
    #[inline(always)]
    pub fn question_end(self) -> u16 {
        ((self.0 >> QUESTION_END_SHIFT) & ((1 << QUESTION_END_BITS) - 1)) as u16
    }

    /// The [`note`]s, as bits.
    #[inline(always)]
    pub fn notes(self) -> u8 {
        (self.0 >> NOTES_SHIFT) as u8
    }

    #[inline(always)]
    fn noted(self, note: u8) -> bool {
        self.notes() & note != 0
    }

    /// TC was set.
    #[inline(always)]
    pub fn truncated(self) -> bool {
        self.noted(note::TRUNCATED)
    }

    /// The query claimed answer or authority records, which were ignored.
    #[inline(always)]
    pub fn ignored_records(self) -> bool {
        self.noted(note::IGNORED_RECORDS)
    }

    /// Bytes followed the query, which were ignored.
    #[inline(always)]
    pub fn trailing(self) -> bool {
        self.noted(note::TRAILING)
    }

    /// The query carried a valid server cookie of this server's.
    #[inline(always)]
    pub fn valid_cookie(self) -> bool {
        self.noted(note::VALID_COOKIE)
    }

    /// The answer is that of a name further down the client pod's search list.
    #[inline(always)]
    pub fn searched(self) -> bool {
        self.noted(note::SEARCHED)
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply")
            .field("len", &self.len())
            .field("rcode", &self.rcode())
            .field("question_end", &self.question_end())
            .field("qtype", &self.qtype())
            .field("truncated", &self.truncated())
            .field("ignored_records", &self.ignored_records())
            .field("trailing", &self.trailing())
            .field("valid_cookie", &self.valid_cookie())
            .field("searched", &self.searched())
            .finish()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_reads_back_as_written_at_its_extremes() {
        let every_note = note::TRUNCATED | note::IGNORED_RECORDS | note::TRAILING | note::VALID_COOKIE | note::SEARCHED;
        for len in [0, 12, 512, 1232, 65535] {
            for rcode in [0, 3, 16, 23, 0x0FFF] {
                for (question_end, qtype) in [(0, 0), (17, 1), (271, 0xFFFF), (1023, 255)] {
                    for notes in [0, every_note, note::TRUNCATED, note::SEARCHED] {
                        let reply = Reply::new(len, rcode, question_end, qtype, notes);
                        assert_eq!(
                            (
                                reply.len(),
                                reply.rcode(),
                                reply.question_end(),
                                reply.qtype(),
                                reply.notes()
                            ),
                            (len, rcode, question_end, qtype, notes)
                        );
                        assert_eq!(reply.truncated(), notes & note::TRUNCATED != 0);
                        assert_eq!(reply.ignored_records(), notes & note::IGNORED_RECORDS != 0);
                        assert_eq!(reply.trailing(), notes & note::TRAILING != 0);
                        assert_eq!(reply.valid_cookie(), notes & note::VALID_COOKIE != 0);
                        assert_eq!(reply.searched(), notes & note::SEARCHED != 0);
                    }
                }
            }
        }
    }
}
