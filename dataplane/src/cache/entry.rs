//! One cached response: the records an upstream sent after its question, kept byte for byte so
//! that serving it is a copy and a few TTL patches.
//!
//! Compression pointers in the stored records point at offsets of the upstream's message. A reply
//! built from the entry puts the client's question at offset 12 with the same length as the
//! upstream's (it is the same name), so every offset lands where it did upstream and the pointers
//! stay valid. Pointers only ever point backwards (RFC 1035 §4.1.4, enforced when the reply is
//! read), which is what lets a reply end after any record without leaving one dangling; and no
//! name may be read from the header or a TTL field, the bytes a served reply rewrites (see
//! [`super::rdata`]).

use super::rdata::{check_rdata, read_stable_name, Rewritten};
use crate::wire::bytes::copy_short;
use crate::wire::name::same_name_at;
use crate::wire::rdata::{layout, Field};
use crate::wire::types::{rcode, rtype, HEADER_LEN, MAX_NAME_LEN};
use std::time::Instant;

/// TTL served for stale answers (RFC 8767 §4: "a TTL of 30 seconds is RECOMMENDED").
pub const STALE_TTL: u32 = 30;

/// The TTL bounds that apply to one entry, resolved for its name by the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlCaps {
    /// Lowest lifetime of a positive answer.
    pub min: u32,
    /// Highest lifetime of a positive answer.
    pub max: u32,
    /// Highest lifetime of a negative answer (NXDOMAIN, NODATA).
    pub negative_max: u32,
}

/// Why an upstream reply's records could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    /// A record ran past the end of the message, held an unreadable name or one read from
    /// bytes a served reply rewrites, or data that does not fit its type's layout.
    #[error("malformed record")]
    Malformed,
    /// An OPT record outside the additional section (RFC 6891 §6.1.1).
    #[error("OPT record outside the additional section")]
    MisplacedOpt,
}

/// Where one stored record ends and where its TTL sits, both relative to the stored bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct RecordMeta {
    end: u16,
    pub(super) ttl_at: u16,
    /// The record starts a new RRset (owner, type or class differ from the one before).
    rrset_start: bool,
}

/// A response as cached: rcode, flags worth keeping, and the answer, authority and additional
/// records in wire form (the upstream's OPT left out: every reply gets skyline's own).
#[derive(Debug)]
pub struct Entry {
    body: Box<[u8]>,
    /// Sized from the header's counts, which include the OPT left out: one slot may be spare.
    records: Vec<RecordMeta>,
    counts: [u16; 3],
    rcode: u16,
    authentic: bool,
    lifetime: u32,
    stored: Instant,
}

/// What [`Entry::write`] put into a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Bytes written.
    pub len: usize,
    /// Records written per section: answer, authority, additional.
    pub counts: [u16; 3],
    /// The answer section did not fit: TC must be set.
    pub truncated: bool,
}

/// How the TTLs of a served entry are rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Age {
    /// Seconds since the entry was stored: each TTL is decremented by that much.
    Fresh(u32),
    /// Served past its lifetime: every TTL is [`STALE_TTL`].
    Stale,
}

impl Entry {
    /// Reads the records of the upstream reply `msg`, whose question ends at `body_start`, and
    /// works out how long they may be cached under `caps` (RFC 2308 for negative answers).
    pub fn from_reply(msg: &[u8], body_start: usize, caps: TtlCaps, now: Instant) -> Result<Entry, RecordsError> {
        if msg.len() < HEADER_LEN || body_start < HEADER_LEN || body_start > msg.len() {
            return Err(RecordsError::Malformed);
        }
        let header_counts = [6, 8, 10].map(|i| u16::from_be_bytes([msg[i], msg[i + 1]]));
        let mut records = Vec::with_capacity(header_counts.iter().map(|&c| usize::from(c)).sum::<usize>().min(256));
        let mut counts = [0u16; 3];
        let mut pos = body_start;
        // Owner (where its name starts), type and class of the record before, in this section.
        let mut previous: Option<(usize, u16, u16)>;
        let mut answer_ttl: Option<u32> = None;
        let mut negative_ttl: Option<u32> = None;
        let mut extended_rcode = 0u16;
        'sections: for (section, &count) in header_counts.iter().enumerate() {
            previous = None;
            for _ in 0..count {
                let mut rewritten = Rewritten {
                    base: body_start,
                    before: &records,
                    current: None,
                };
                let name_end = read_stable_name(msg, pos, None, &rewritten)?;
                let fixed = msg.get(name_end..name_end + 10).ok_or(RecordsError::Malformed)?;
                let rtype_ = u16::from_be_bytes([fixed[0], fixed[1]]);
                let rclass = u16::from_be_bytes([fixed[2], fixed[3]]);
                // RFC 2181 §8: a TTL with the top bit set is treated as zero.
                let ttl = match u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]) {
                    t if t & 0x8000_0000 != 0 => 0,
                    t => t,
                };
                let rdata_end = name_end + 10 + usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
                if rdata_end > msg.len() {
                    return Err(RecordsError::Malformed);
                }
                if rtype_ == rtype::OPT {
                    if section != 2 {
                        return Err(RecordsError::MisplacedOpt);
                    }
                    // RFC 6891 §6.1.3: the TTL's first byte holds the rcode's upper eight bits.
                    extended_rcode = u16::from(fixed[4]) << 4;
                    // Records after the OPT are dropped with it: cutting only at record ends
                    // keeps every backward pointer valid.
                    break 'sections;
                }
                rewritten.current = Some(name_end + 4);
                check_rdata(msg, rtype_, rclass, name_end + 10, rdata_end, &rewritten)?;
                let rrset_start =
                    previous.is_none_or(|(o, t, c)| t != rtype_ || c != rclass || !same_name_at(msg, o, pos));
                previous = Some((pos, rtype_, rclass));
                match section {
                    0 => answer_ttl = Some(answer_ttl.map_or(ttl, |m| m.min(ttl))),
                    1 if rtype_ == rtype::SOA && rdata_end >= name_end + 10 + 4 => {
                        let m = &msg[rdata_end - 4..rdata_end];
                        let minimum = u32::from_be_bytes([m[0], m[1], m[2], m[3]]);
                        negative_ttl = Some(ttl.min(minimum));
                    }
                    _ => {}
                }
                records.push(RecordMeta {
                    end: offset(rdata_end - body_start)?,
                    ttl_at: offset(name_end + 4 - body_start)?,
                    rrset_start,
                });
                counts[section] += 1;
                pos = rdata_end;
            }
        }
        let code = extended_rcode | u16::from(msg[3] & 0x0F);
        let lifetime = match (code, counts[0]) {
            (rcode::NOERROR, n) if n > 0 => answer_ttl.unwrap_or(0).clamp(caps.min, caps.max.max(caps.min)),
            (rcode::NOERROR | rcode::NXDOMAIN, _) => {
                // RFC 2308 §5: a negative answer without an SOA is not cached.
                negative_ttl.map_or(0, |t| t.max(caps.min).min(caps.negative_max))
            }
            _ => 0,
        };
        Ok(Entry {
            body: msg[body_start..pos].into(),
            records: fitted(records),
            counts,
            rcode: code,
            authentic: u16::from_be_bytes([msg[2], msg[3]]) & crate::wire::types::flags::AD != 0,
            lifetime,
            stored: now,
        })
    }

    /// The response code, with the upper bits an OPT carried (RFC 6891 §6.1.3): a reply that
    /// looks like NOERROR in its header may be BADVERS or BADCOOKIE. Only NOERROR and NXDOMAIN
    /// answers are ever given a lifetime.
    pub fn rcode(&self) -> u16 {
        self.rcode
    }

    /// Whether the upstream set AD (RFC 4035 §3.2.3); passed on only to clients that asked.
    pub fn authentic(&self) -> bool {
        self.authentic
    }

    /// Seconds the entry is fresh; 0 means it must not be cached.
    pub fn lifetime(&self) -> u32 {
        self.lifetime
    }

    /// When it was received.
    pub fn stored(&self) -> Instant {
        self.stored
    }

    /// Bytes the entry holds on the heap, for the cache's memory bound.
    pub fn heap_bytes(&self) -> usize {
        self.body.len() + self.records.capacity() * std::mem::size_of::<RecordMeta>()
    }

    /// Whether the answer is negative (NXDOMAIN, or NOERROR without answer records).
    pub fn is_negative(&self) -> bool {
        self.rcode() == rcode::NXDOMAIN || (self.rcode() == rcode::NOERROR && self.counts[0] == 0)
    }

    /// Writes the records into `out` (the reply just past its question), using at most `room`
    /// bytes, with TTLs rewritten for `age`. Additional, then authority records that do not fit
    /// are dropped without TC; if the answer section itself does not fit, the longest run of
    /// whole answer RRsets that does is written and TC is reported (RFC 2181 §9).
    #[inline(always)]
    pub fn write(&self, out: &mut [u8], room: usize, age: Age) -> Written {
        let room = room.min(out.len());
        let [an, ns, ar] = self.counts.map(usize::from);
        let end_of = |n: usize| {
            if n == 0 {
                0
            } else {
                usize::from(self.records[n - 1].end)
            }
        };
        let (kept, counts, truncated) = if self.body.len() <= room {
            (an + ns + ar, self.counts, false)
        } else if end_of(an + ns) <= room {
            (an + ns, [self.counts[0], self.counts[1], 0], false)
        } else if an > 0 && end_of(an) <= room {
            (an, [self.counts[0], 0, 0], false)
        } else {
            let mut fit = 0;
            for i in 0..an {
                if usize::from(self.records[i].end) > room {
                    break;
                }
                if i + 1 == an || self.records[i + 1].rrset_start {
                    fit = i + 1;
                }
            }
            (fit, [fit as u16, 0, 0], true)
        };
        let len = end_of(kept);
        copy_short(out, &self.body[..len]);
        self.patch_ttls(out, kept, age);
        Written { len, counts, truncated }
    }

    /// Writes every record into `out`, which has room for them (a replayed reply's, checked
    /// against the whole entry when it was remembered), with TTLs rewritten for `age`; returns
    /// the bytes written.
    #[inline(always)]
    pub fn write_whole(&self, out: &mut [u8], age: Age) -> usize {
        copy_short(out, &self.body);
        let [an, ns, ar] = self.counts.map(usize::from);
        self.patch_ttls(out, an + ns + ar, age);
        self.body.len()
    }

    /// Rewrites the TTLs of the first `records` records copied into `out` for `age`.
    #[inline(always)]
    fn patch_ttls(&self, out: &mut [u8], records: usize, age: Age) {
        for record in &self.records[..records] {
            let at = usize::from(record.ttl_at);
            let Some(field) = out.get_mut(at..at + 4).and_then(|f| <&mut [u8; 4]>::try_from(f).ok()) else {
                continue;
            };
            *field = self.ttl_at(u32::from_be_bytes(*field), age).to_be_bytes();
        }
    }

    /// The TTL a record stored with TTL `stored` is served with at `age`: cut to the entry's
    /// lifetime and counted down, or [`STALE_TTL`] past it.
    #[inline(always)]
    fn ttl_at(&self, stored: u32, age: Age) -> u32 {
        match age {
            Age::Fresh(age) => stored.min(self.lifetime).saturating_sub(age),
            Age::Stale => STALE_TTL,
        }
    }
}

impl Entry {
    /// Records per section: answer, authority, additional.
    pub fn counts(&self) -> [u16; 3] {
        self.counts
    }

    /// Bytes of all its records, as [`Entry::write`] writes them when they fit.
    pub fn records_len(&self) -> usize {
        self.body.len()
    }

    /// Whether `bytes` are exactly what [`Entry::write`] writes with room for every record and
    /// TTLs rewritten for `age`: the check a reply passes before it is remembered for replay.
    pub fn wrote(&self, bytes: &[u8], age: Age) -> bool {
        if bytes.len() != self.body.len() {
            return false;
        }
        let records = self.counts.iter().map(|&c| usize::from(c)).sum::<usize>();
        let mut from = 0;
        for record in &self.records[..records.min(self.records.len())] {
            let at = usize::from(record.ttl_at);
            let stored = u32::from_be_bytes([self.body[at], self.body[at + 1], self.body[at + 2], self.body[at + 3]]);
            if bytes[from..at] != self.body[from..at] || bytes[at..at + 4] != self.ttl_at(stored, age).to_be_bytes() {
                return false;
            }
            from = at + 4;
        }
        bytes[from..] == self.body[from..]
    }
}

impl Entry {
    /// Writes the answer records that `how` keeps into `out` at any place of another reply,
    /// with every name written out in full: their compression pointers meant offsets of the
    /// upstream's message, whose question was `question` (the name asked, then type and class),
    /// and mean nothing elsewhere. TTLs are rewritten for `age` as [`Entry::write`] does. All or
    /// nothing: `None` when they do not fit in `room` bytes; otherwise the bytes written and the
    /// records.
    pub fn write_answers_elsewhere(
        &self,
        question: &[u8],
        out: &mut [u8],
        room: usize,
        age: Age,
        how: Relocation<'_>,
    ) -> Option<(usize, u16)> {
        let message = Relocated {
            question,
            body: &self.body,
        };
        let room = room.min(out.len());
        let (mut len, mut count) = (0, 0u16);
        let mut start = 0;
        for record in &self.records[..usize::from(self.counts[0])] {
            let (ttl_at, end) = (usize::from(record.ttl_at), usize::from(record.end));
            let (record_start, type_at) = (start, ttl_at - 4);
            start = end;
            let rtype_ = u16::from_be_bytes([self.body[type_at], self.body[type_at + 1]]);
            let cap = match how {
                Relocation::Whole => u32::MAX,
                Relocation::WithoutCnames if rtype_ == rtype::CNAME => continue,
                Relocation::WithoutCnames => u32::MAX,
                Relocation::Flattened { rtype: wanted, .. } if rtype_ != wanted => continue,
                Relocation::Flattened { ttl, .. } => ttl,
            };
            let rclass = u16::from_be_bytes([self.body[type_at + 2], self.body[type_at + 3]]);
            len += match how {
                Relocation::Flattened { owner, .. } => copy(owner, out.get_mut(len..room)?)?,
                Relocation::Whole | Relocation::WithoutCnames => {
                    message.expand(message.offset(record_start), out.get_mut(len..room)?)?
                }
            };
            let fixed = out.get_mut(len..len + 10)?;
            fixed[..8].copy_from_slice(&self.body[type_at..type_at + 8]);
            let original = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
            let ttl = self.ttl_at(original, age).min(cap);
            fixed[4..8].copy_from_slice(&ttl.to_be_bytes());
            let rdata_at = len + 10;
            len = rdata_at;
            let data = ttl_at + 6;
            match layout(rtype_, rclass) {
                None => len += copy(&self.body[data..end], out.get_mut(len..room)?)?,
                Some(fields) => {
                    let mut pos = data;
                    for field in fields {
                        let span = match field {
                            Field::Name(_) => {
                                len += message.expand(message.offset(pos), out.get_mut(len..room)?)?;
                                pos = message.skip(pos)?;
                                continue;
                            }
                            Field::Fixed(n) => *n,
                            Field::Text => 1 + usize::from(*self.body.get(pos)?),
                            Field::Rest => end.checked_sub(pos)?,
                        };
                        len += copy(self.body.get(pos..pos + span)?, out.get_mut(len..room)?)?;
                        pos += span;
                    }
                }
            }
            let rdlen = u16::try_from(len - rdata_at).ok()?;
            out[rdata_at - 2..rdata_at].copy_from_slice(&rdlen.to_be_bytes());
            count += 1;
        }
        Some((len, count))
    }
}

/// Which of an entry's answer records [`Entry::write_answers_elsewhere`] writes, and under
/// which owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relocation<'a> {
    /// Every answer record, under its own owner: a CNAME chain's continuation.
    Whole,
    /// Every answer record but the CNAMEs: address glue.
    WithoutCnames,
    /// The records of `rtype` alone, whoever owns them upstream, under `owner` (a name in wire
    /// form, or a compression pointer to one written before) and living at most `ttl`: the
    /// records a flattened answer gives at its own name.
    Flattened {
        /// Owner written in place of the upstream's.
        owner: &'a [u8],
        /// Type of the records kept.
        rtype: u16,
        /// Largest TTL written.
        ttl: u32,
    },
}

/// `records` without more than one spare slot: shrinking costs a reallocation on every cache
/// miss, and the one slot the counts spend on an OPT is cheaper to keep; a header that
/// announced more records than the message holds is not.
fn fitted(mut records: Vec<RecordMeta>) -> Vec<RecordMeta> {
    if records.capacity() > records.len() + 1 {
        records.shrink_to_fit();
    }
    records
}

/// An entry's records with the upstream's question in front, read at the offsets of the
/// upstream's message (the header, which names may not point into, left out).
struct Relocated<'a> {
    question: &'a [u8],
    body: &'a [u8],
}

impl Relocated<'_> {
    /// The message offset of the body's byte `at`.
    fn offset(&self, at: usize) -> usize {
        HEADER_LEN + self.question.len() + at
    }

    fn byte(&self, offset: usize) -> Option<u8> {
        let at = offset.checked_sub(HEADER_LEN)?;
        match at.checked_sub(self.question.len()) {
            Some(at) => self.body.get(at).copied(),
            None => self.question.get(at).copied(),
        }
    }

    /// Writes the name at message offset `offset` uncompressed into `out`; returns its length.
    fn expand(&self, mut offset: usize, out: &mut [u8]) -> Option<usize> {
        let mut len = 0;
        loop {
            let byte = self.byte(offset)?;
            if byte & 0xC0 == 0xC0 {
                let target = usize::from(byte & 0x3F) << 8 | usize::from(self.byte(offset + 1)?);
                // Checked when the entry was stored; kept so that a walk always ends.
                if target >= offset {
                    return None;
                }
                offset = target;
                continue;
            }
            let span = 1 + usize::from(byte);
            if len + span > MAX_NAME_LEN {
                return None;
            }
            for i in 0..span {
                *out.get_mut(len + i)? = self.byte(offset + i)?;
            }
            len += span;
            if byte == 0 {
                return Some(len);
            }
            offset += span;
        }
    }

    /// The body position just past the name that starts at body position `at`.
    fn skip(&self, mut at: usize) -> Option<usize> {
        loop {
            let &byte = self.body.get(at)?;
            match byte {
                0 => return Some(at + 1),
                b if b & 0xC0 == 0xC0 => return Some(at + 2),
                b => at += 1 + usize::from(b),
            }
        }
    }
}

/// Copies `from` to the front of `to`, if it fits; returns its length.
fn copy(from: &[u8], to: &mut [u8]) -> Option<usize> {
    to.get_mut(..from.len())?.copy_from_slice(from);
    Some(from.len())
}

fn offset(n: usize) -> Result<u16, RecordsError> {
    u16::try_from(n).map_err(|_| RecordsError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: TtlCaps = TtlCaps {
        min: 0,
        max: 86400,
        negative_max: 3600,
    };

    /// A reply for `a.example.` A with the given answer TTLs and an SOA (TTL 600, minimum 300) in
    /// authority when `soa` is set, and an OPT at the end.
    fn reply(code: u8, ttls: &[u32], soa: bool) -> (Vec<u8>, usize) {
        let mut m = vec![
            0x12,
            0x34,
            0x81,
            0x80 | code,
            0,
            1,
            0,
            ttls.len() as u8,
            0,
            soa as u8,
            0,
            1,
        ];
        m.extend_from_slice(b"\x01a\x07example\x00\x00\x01\x00\x01");
        let body_start = m.len();
        for (i, ttl) in ttls.iter().enumerate() {
            m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
            m.extend_from_slice(&ttl.to_be_bytes());
            m.extend_from_slice(&[0, 4, 10, 0, 0, i as u8]);
        }
        if soa {
            m.extend_from_slice(&[0xC0, 14, 0, 6, 0, 1]);
            m.extend_from_slice(&600u32.to_be_bytes());
            let rdata_len = 2 + 2 + 20;
            m.extend_from_slice(&(rdata_len as u16).to_be_bytes());
            m.extend_from_slice(&[0xC0, 14, 0xC0, 14]);
            for v in [1u32, 2, 3, 4, 300] {
                m.extend_from_slice(&v.to_be_bytes());
            }
        }
        m.extend_from_slice(&[0, 0, 41, 4, 0xD0, 0, 0, 0, 0, 0, 0]);
        (m, body_start)
    }

    fn ttl_at(out: &[u8], record: usize) -> u32 {
        let at = record * 16 + 6;
        u32::from_be_bytes([out[at], out[at + 1], out[at + 2], out[at + 3]])
    }

    #[test]
    fn a_positive_answer_lives_for_its_smallest_answer_ttl() {
        let (m, start) = reply(0, &[300, 120], false);
        let e = Entry::from_reply(&m, start, CAPS, Instant::now()).unwrap();
        assert_eq!((e.lifetime(), e.counts, e.is_negative()), (120, [2, 0, 0], false));
        assert_eq!(e.body.len(), 32, "the OPT is left out");
    }

    #[test]
    fn ttls_are_capped_and_floored() {
        let (m, start) = reply(0, &[100_000], false);
        let caps = TtlCaps { max: 3600, ..CAPS };
        assert_eq!(
            Entry::from_reply(&m, start, caps, Instant::now()).unwrap().lifetime(),
            3600
        );
        let (m, start) = reply(0, &[2], false);
        let caps = TtlCaps { min: 10, ..CAPS };
        assert_eq!(
            Entry::from_reply(&m, start, caps, Instant::now()).unwrap().lifetime(),
            10
        );
        let (m, start) = reply(0, &[0x8000_0001], false);
        assert_eq!(
            Entry::from_reply(&m, start, CAPS, Instant::now()).unwrap().lifetime(),
            0
        );
    }

    #[test]
    fn negative_answers_live_for_the_soa_minimum_under_their_cap() {
        let (m, start) = reply(3, &[], true);
        let e = Entry::from_reply(&m, start, CAPS, Instant::now()).unwrap();
        assert_eq!((e.lifetime(), e.is_negative()), (300, true));
        let caps = TtlCaps {
            negative_max: 5,
            ..CAPS
        };
        assert_eq!(
            Entry::from_reply(&m, start, caps, Instant::now()).unwrap().lifetime(),
            5
        );
        let (m, start) = reply(3, &[], false);
        assert_eq!(
            Entry::from_reply(&m, start, CAPS, Instant::now()).unwrap().lifetime(),
            0
        );
    }

    #[test]
    fn failures_are_never_cached() {
        let (m, start) = reply(2, &[300], false);
        assert_eq!(
            Entry::from_reply(&m, start, CAPS, Instant::now()).unwrap().lifetime(),
            0
        );
    }

    #[test]
    fn served_ttls_count_down_and_stale_ones_read_30() {
        let (m, start) = reply(0, &[300, 120], false);
        let e = Entry::from_reply(&m, start, CAPS, Instant::now()).unwrap();
        let mut out = [0u8; 512];
        let w = e.write(&mut out, 512, Age::Fresh(7));
        assert_eq!((w.len, w.counts, w.truncated), (32, [2, 0, 0], false));
        assert_eq!((ttl_at(&out, 0), ttl_at(&out, 1)), (113, 113));
        e.write(&mut out, 512, Age::Fresh(500));
        assert_eq!(ttl_at(&out, 0), 0);
        e.write(&mut out, 512, Age::Stale);
        assert_eq!(ttl_at(&out, 1), STALE_TTL);
    }

    #[test]
    fn what_does_not_fit_is_cut_at_rrset_boundaries() {
        let (m, start) = reply(0, &[60, 60, 60], true);
        let e = Entry::from_reply(&m, start, CAPS, Instant::now()).unwrap();
        let mut out = [0u8; 512];
        let all = e.write(&mut out, 512, Age::Fresh(0));
        assert_eq!(all.counts, [3, 1, 0]);
        let w = e.write(&mut out, 48, Age::Fresh(0));
        assert_eq!(
            (w.len, w.counts, w.truncated),
            (48, [3, 0, 0], false),
            "authority dropped first"
        );
        let w = e.write(&mut out, 40, Age::Fresh(0));
        assert_eq!(
            (w.len, w.counts, w.truncated),
            (0, [0, 0, 0], true),
            "one RRset: all or nothing"
        );
    }

    /// A reply to `. A` (question at 12..17) with the given answer records and an OPT.
    fn root_reply(answers: &[&[u8]]) -> (Vec<u8>, usize) {
        let mut m = vec![0x5e, 0xed, 0x81, 0x80, 0, 1, 0, answers.len() as u8, 0, 0, 0, 1];
        m.extend_from_slice(b"\x00\x00\x01\x00\x01");
        let body_start = m.len();
        for answer in answers {
            m.extend_from_slice(answer);
        }
        m.extend_from_slice(&[0, 0, 41, 4, 0xD0, 0, 0, 0, 0, 0, 0]);
        (m, body_start)
    }

    /// A record: owner in wire form, type, class IN, TTL, data.
    fn record(owner: &[u8], rtype: u16, ttl: u32, data: &[u8]) -> Vec<u8> {
        let mut r = owner.to_vec();
        r.extend_from_slice(&rtype.to_be_bytes());
        r.extend_from_slice(&[0, 1]);
        r.extend_from_slice(&ttl.to_be_bytes());
        r.extend_from_slice(&(data.len() as u16).to_be_bytes());
        r.extend_from_slice(data);
        r
    }

    /// Found by the `upstream` fuzz target's check that served records are the upstream's: an
    /// owner pointing at offset 11 read the upstream's ARCOUNT (1, a one-byte label) and the
    /// question's root label after it; a client without EDNS got ARCOUNT 0 there, so the same
    /// record came out owned by the root. A name in the data may do the same.
    #[test]
    fn names_read_from_the_header_are_refused() {
        let (m, start) = root_reply(&[&record(&[0xC0, 11], rtype::A, 60, &[192, 0, 2, 1])]);
        assert_eq!(
            Entry::from_reply(&m, start, CAPS, Instant::now()).unwrap_err(),
            RecordsError::Malformed
        );
        let (m, start) = root_reply(&[&record(&[0], rtype::CNAME, 60, &[0xC0, 4])]);
        assert!(Entry::from_reply(&m, start, CAPS, Instant::now()).is_err());
        let (m, start) = root_reply(&[&record(&[0xC0, 12], rtype::CNAME, 60, &[1, b'x', 0xC0, 12])]);
        assert!(
            Entry::from_reply(&m, start, CAPS, Instant::now()).is_ok(),
            "pointers to the question stay welcome"
        );
    }

    /// Found by the same check: a second owner pointing into the first record's TTL (256: the
    /// bytes 0 0 1 0, a one-byte label) named something else once the TTL counted down to 255.
    #[test]
    fn names_read_from_a_ttl_are_refused() {
        let first = record(&[0], rtype::A, 256, &[192, 0, 2, 1]);
        let ttl_byte = 12 + 5 + 1 + 4 + 2;
        let second = record(&[0xC0, ttl_byte], rtype::A, 300, &[192, 0, 2, 2]);
        let (m, start) = root_reply(&[&first, &second]);
        assert!(Entry::from_reply(&m, start, CAPS, Instant::now()).is_err());
        let own_ttl = record(&[0], rtype::CNAME, 256, &[0xC0, ttl_byte]);
        let (m, start) = root_reply(&[&own_ttl]);
        assert!(
            Entry::from_reply(&m, start, CAPS, Instant::now()).is_err(),
            "nor from the record's own TTL"
        );
    }

    /// Found by the `upstream` fuzz target: an OPT whose extended rcode bits were 0xFF (rcode
    /// 4080) under a NOERROR header was relayed as NOERROR and cached.
    #[test]
    fn an_opts_extended_rcode_is_part_of_the_rcode() {
        let (mut m, start) = reply(0, &[300], false);
        let opt_ttl = m.len() - 6;
        m[opt_ttl] = 0xFF;
        let e = Entry::from_reply(&m, start, CAPS, Instant::now()).unwrap();
        assert_eq!((e.rcode(), e.lifetime()), (4080, 0));
        m[opt_ttl] = 1;
        assert_eq!(
            Entry::from_reply(&m, start, CAPS, Instant::now()).unwrap().rcode(),
            rcode::BADVERS
        );
    }

    #[test]
    fn record_data_must_fit_its_type() {
        for (rtype_, data) in [
            (rtype::A, &[192, 0, 2, 1, 0][..]),
            (rtype::AAAA, &[0; 4][..]),
            (rtype::CNAME, &[1, b'x', 0, 0][..]),
            (rtype::MX, &[0, 10][..]),
            (rtype::SRV, &[0, 1, 0, 1, 0][..]),
            (rtype::SOA, &[0, 0, 0, 0, 0][..]),
        ] {
            let (m, start) = root_reply(&[&record(&[0], rtype_, 60, data)]);
            assert!(
                Entry::from_reply(&m, start, CAPS, Instant::now()).is_err(),
                "type {rtype_} with {data:?}"
            );
        }
        let (m, start) = root_reply(&[&record(&[0], 65280, 60, &[1, 2, 3])]);
        assert!(
            Entry::from_reply(&m, start, CAPS, Instant::now()).is_ok(),
            "unknown types are opaque"
        );
    }

    #[test]
    fn malformed_records_are_rejected() {
        let (m, start) = reply(0, &[60], false);
        assert_eq!(
            Entry::from_reply(&m[..start + 10], start, CAPS, Instant::now()).unwrap_err(),
            RecordsError::Malformed
        );
        let mut m = m;
        m[start] = 0xC0;
        m[start + 1] = 200;
        assert!(
            Entry::from_reply(&m, start, CAPS, Instant::now()).is_err(),
            "forward pointer"
        );
    }
}
