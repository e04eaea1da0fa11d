//! The names in an upstream's records, checked before the records are cached, so that every
//! reply built from an entry reads them as the upstream's message did.
//!
//! An entry keeps records byte for byte, compression pointers included, and a reply built from
//! it differs from the upstream's message in two places only: the header (the client's ID,
//! flags and counts) and the TTL fields (counted down, or 30 when stale). A pointer is only
//! required to point backwards (RFC 1035 §4.1.4), so an upstream may point a name into either;
//! its reply parses, and the same record served from the cache names something else, or
//! nothing readable. Names are therefore read with the rewritten bytes fenced off: in owners,
//! and in the data of every type whose layout ([`crate::wire::rdata::layout`]) holds names,
//! compressible or not (RFC 3597 §4 lists those that may be compressed; decoders read the later
//! ones' names the same way). The data of the types whose length is fixed is checked too: a
//! 5-byte address would reach every client the entry is served to.

use super::entry::RecordMeta;
use super::RecordsError;
use crate::wire::name::read_name;
use crate::wire::rdata::{layout, Field};
use crate::wire::types::HEADER_LEN;
use crate::wire::LowerName;

/// Length of a TTL field.
const TTL_LEN: usize = 4;

/// The bytes of an upstream's message that a reply built from its entry rewrites: the header,
/// and the TTL field of every record read so far (in message order). A view on the records
/// already read, so that reading a reply allocates nothing for it.
#[derive(Debug)]
pub(super) struct Rewritten<'a> {
    /// Where the records start: their `ttl_at` is relative to it.
    pub(super) base: usize,
    /// The records read before, in message order.
    pub(super) before: &'a [RecordMeta],
    /// The TTL field of the record being read, once its owner name is read.
    pub(super) current: Option<usize>,
}

impl Rewritten<'_> {
    /// Whether `start..end` overlaps the header or a noted TTL field.
    fn overlaps(&self, start: usize, end: usize) -> bool {
        if start < HEADER_LEN {
            return true;
        }
        let ttl = |record: &RecordMeta| self.base + usize::from(record.ttl_at);
        let first_after = self.before.partition_point(|r| ttl(r) + TTL_LEN <= start);
        self.before.get(first_after).is_some_and(|r| ttl(r) < end)
            || self.current.is_some_and(|at| at < end && start < at + TTL_LEN)
    }
}

/// Reads the name at `pos` as [`read_name`] does, and fails when any of its labels or pointers
/// lies in rewritten bytes; returns the offset just past the name.
pub(super) fn read_stable_name(
    msg: &[u8],
    pos: usize,
    out: Option<&mut LowerName>,
    rewritten: &Rewritten,
) -> Result<usize, RecordsError> {
    let end = read_name(msg, pos, out).map_err(|_| RecordsError::Malformed)?;
    // `read_name` has bounded the walk: every pointer goes strictly backwards, within the
    // message, and the labels are whole.
    let mut at = pos;
    loop {
        let &byte = msg.get(at).ok_or(RecordsError::Malformed)?;
        let pointer = byte & 0xC0 == 0xC0;
        let span = if pointer { 2 } else { 1 + usize::from(byte) };
        if rewritten.overlaps(at, at + span) {
            return Err(RecordsError::Malformed);
        }
        if byte == 0 {
            return Ok(end);
        }
        at = if pointer {
            let &low = msg.get(at + 1).ok_or(RecordsError::Malformed)?;
            usize::from(byte & 0x3F) << 8 | usize::from(low)
        } else {
            at + span
        };
    }
}

/// Checks the data of a record of type `rtype` and class `rclass` at `start..end` of `msg`:
/// its fields fill it exactly, and its names are readable and stable.
pub(super) fn check_rdata(
    msg: &[u8],
    rtype: u16,
    rclass: u16,
    start: usize,
    end: usize,
    rewritten: &Rewritten,
) -> Result<(), RecordsError> {
    let Some(fields) = layout(rtype, rclass) else {
        return Ok(());
    };
    let mut pos = start;
    for field in fields {
        pos = match field {
            Field::Name(_) => read_stable_name(msg, pos, None, rewritten)?,
            Field::Fixed(len) => pos + len,
            Field::Text => pos + 1 + usize::from(*msg.get(pos).ok_or(RecordsError::Malformed)?),
            Field::Rest => end,
        };
        if pos > end {
            return Err(RecordsError::Malformed);
        }
    }
    if pos == end {
        Ok(())
    } else {
        Err(RecordsError::Malformed)
    }
}
