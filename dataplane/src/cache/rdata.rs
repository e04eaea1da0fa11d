//! The names in an upstream's records, checked before the records are cached, so that every
//! reply built from an entry reads them as the upstream's message did.
//!
//! An entry keeps records byte for byte, compression pointers included, and a reply built from
//! it differs from the upstream's message in two places only: the header (the client's ID,
//! flags and counts) and the TTL fields (counted down, or 30 when stale). A pointer is only
//! required to point backwards (RFC 1035 §4.1.4), so an upstream may point a name into either;
//! its reply parses, and the same record served from the cache names something else, or
//! nothing readable. Names are therefore read with the rewritten bytes fenced off: in owners,
//! and in the data of every type whose layout is known to hold names (RFC 3597 §4 lists those
//! that may be compressed; decoders read the later ones' names the same way). The data of the
//! types whose length is fixed is checked too: a 5-byte address would reach every client the
//! entry is served to.

use super::entry::RecordMeta;
use super::RecordsError;
use crate::wire::name::read_name;
use crate::wire::types::{class, rtype, HEADER_LEN};
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

/// One field of a record's data.
#[derive(Debug, Clone, Copy)]
pub(super) enum Field {
    /// A domain name, possibly compressed.
    Name,
    /// So many bytes.
    Fixed(usize),
    /// A character string: a length byte and that many bytes.
    Text,
    /// Whatever is left (parameters, signatures, type bitmaps).
    Rest,
}

/// The layout of `rtype`'s data, for the types whose data holds names or has a fixed length.
pub(super) fn layout(rtype: u16, rclass: u16) -> Option<&'static [Field]> {
    use Field::{Fixed, Name, Rest, Text};
    /// Types named by RFC 1035 and later RFCs, beyond those in [`rtype`].
    const MD: u16 = 3;
    const MF: u16 = 4;
    const MB: u16 = 7;
    const MG: u16 = 8;
    const MR: u16 = 9;
    const MINFO: u16 = 14;
    const RP: u16 = 17;
    const AFSDB: u16 = 18;
    const RT: u16 = 21;
    const PX: u16 = 26;
    const NAPTR: u16 = 35;
    const KX: u16 = 36;
    const DNAME: u16 = 39;
    const RRSIG: u16 = 46;
    const NSEC: u16 = 47;
    const SVCB: u16 = 64;
    const HTTPS: u16 = 65;
    Some(match rtype {
        // RFC 1035 §3.4.1: the Internet class's address; CHAOS A records hold a name.
        rtype::A if rclass == class::IN => &[Fixed(4)],
        rtype::AAAA if rclass == class::IN => &[Fixed(16)],
        rtype::NS | MD | MF | rtype::CNAME | MB | MG | MR | rtype::PTR | DNAME => &[Name],
        rtype::SOA => &[Name, Name, Fixed(20)],
        MINFO | RP => &[Name, Name],
        rtype::MX | AFSDB | RT | KX => &[Fixed(2), Name],
        PX => &[Fixed(2), Name, Name],
        rtype::SRV => &[Fixed(6), Name],
        NAPTR => &[Fixed(4), Text, Text, Text, Name],
        SVCB | HTTPS => &[Fixed(2), Name, Rest],
        RRSIG => &[Fixed(18), Name, Rest],
        NSEC => &[Name, Rest],
        _ => return None,
    })
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
            Field::Name => read_stable_name(msg, pos, None, rewritten)?,
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
