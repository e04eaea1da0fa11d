//! What a served entry remembers of the reply it made for one exact query, so that the same
//! query asked again is answered by copying: the header and OPT of that reply, around the
//! client's own question and the entry's records with their TTLs counted down
//! (`forward/replay.rs` makes and replays memos; docs/forwarding.md, "Replayed hits").
//!
//! A memo holds only for a query of the plain shape most clients send (one question, nothing
//! else but an OPT without options), over UDP, and only while the snapshot and the forwarding
//! plan it was made under are in force: its `stamp` says which.

use crate::reply::Reply;

/// Bytes of an OPT record without options, the one record a plain query may carry.
pub const PLAIN_OPT_LEN: usize = 11;

/// The parts of a query a memo is kept for: its flags and counts (bytes 2 to 12), and its OPT
/// record as sent, if any. The question is the entry's key; the ID differs from query to query
/// and is copied. Packed in three words, compared at every replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked([u64; 3]);

impl Asked {
    /// The query with the header after the ID `header` and, when it has one, the OPT record
    /// `opt`.
    #[inline(always)]
    pub fn new(header: &[u8; 10], opt: Option<&[u8; PLAIN_OPT_LEN]>) -> Asked {
        let mut bytes = [0u8; 24];
        bytes[..10].copy_from_slice(header);
        if let Some(opt) = opt {
            bytes[10..10 + PLAIN_OPT_LEN].copy_from_slice(opt);
            bytes[23] = 1;
        }
        Asked([0, 8, 16].map(|at| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))))
    }

    /// Whether the query ends with an OPT record (and its reply with one of its own).
    #[inline(always)]
    pub fn opt(&self) -> bool {
        self.0[2] >> 56 != 0
    }
}

/// The reply a served entry made for one [`Asked`] query, less what each query brings (the ID,
/// the question as spelled) and what each moment changes (the records' TTLs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memo {
    /// The snapshot and forwarding plan the reply was made under (`forward/replay.rs`).
    pub stamp: u64,
    /// The query it answers.
    pub asked: Asked,
    /// The reply's header after the ID.
    pub header: [u8; 10],
    /// The reply's OPT record, when the query had one.
    pub opt_record: [u8; PLAIN_OPT_LEN],
    /// The facts of the reply: its length, response code and question.
    pub reply: Reply,
}
