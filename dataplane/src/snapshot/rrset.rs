//! Structured resource-record sets, as the snapshot builder produces them, and their compilation
//! into the ready-to-copy wire form the answer path uses.

use super::views::Views;
use crate::wire::types::{class, rtype};
use crate::wire::writer::{Owner, RrWriter};
use crate::wire::{LowerName, Name};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// The data of one record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Rdata {
    /// IPv4 address.
    A(Ipv4Addr),
    /// IPv6 address.
    Aaaa(Ipv6Addr),
    /// Alias target.
    Cname(Name),
    /// Name server.
    Ns(Name),
    /// Reverse pointer target.
    Ptr(Name),
    /// Mail exchange.
    Mx {
        /// Preference (SkyDNS `priority`).
        preference: u16,
        /// Exchange host.
        exchange: Name,
    },
    /// Service location.
    Srv {
        /// Priority.
        priority: u16,
        /// Relative weight, already normalised per priority.
        weight: u16,
        /// Port.
        port: u16,
        /// Target host.
        target: Name,
    },
    /// Character-strings, each at most 255 bytes.
    Txt(Vec<Box<[u8]>>),
    /// Start of authority.
    Soa {
        /// Primary name server.
        mname: Name,
        /// Responsible mailbox.
        rname: Name,
        /// Serial.
        serial: u32,
        /// Refresh, retry, expire, minimum.
        timers: [u32; 4],
    },
}

impl Rdata {
    /// The record type this data belongs to.
    pub fn rtype(&self) -> u16 {
        match self {
            Rdata::A(_) => rtype::A,
            Rdata::Aaaa(_) => rtype::AAAA,
            Rdata::Cname(_) => rtype::CNAME,
            Rdata::Ns(_) => rtype::NS,
            Rdata::Ptr(_) => rtype::PTR,
            Rdata::Mx { .. } => rtype::MX,
            Rdata::Srv { .. } => rtype::SRV,
            Rdata::Txt(_) => rtype::TXT,
            Rdata::Soa { .. } => rtype::SOA,
        }
    }
}

/// One record of a set: its TTL and data. The owner and type are the set's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Time to live, seconds.
    pub ttl: u32,
    /// Record data.
    pub rdata: Rdata,
}

/// Records sharing an owner and type: the unit that truncation keeps or drops whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rrset {
    /// `None` means the query name as the client spelled it.
    pub owner: Option<Name>,
    /// The records, in answer order.
    pub records: Vec<Record>,
    /// Whether replies rotate the records (SkyDNS round-robin of address answers).
    pub rotate: bool,
}

/// The sections of a positive answer, before compilation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnswerSet {
    /// Answer section.
    pub answer: Vec<Rrset>,
    /// Additional section (glue for SRV/MX/NS targets).
    pub additional: Vec<Rrset>,
    /// Targets outside the zone whose records of the query's type belong in the answer
    /// section at the query name: a flattened answer the zone alone cannot complete.
    pub flattened: Vec<Alias>,
}

/// A name outside the zone that a flattened address answer stands for: its records of the
/// query's type answer at the query name, with at most `ttl`, the smallest TTL of the names
/// that led to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// The name the records come from.
    pub target: Name,
    /// The most the records may live.
    pub ttl: u32,
}

/// A stretch of precompiled bytes holding one RRset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrsetSpan {
    /// Start offset in [`CompiledAnswer::bytes`].
    pub start: u32,
    /// End offset (exclusive).
    pub end: u32,
    /// Number of records.
    pub count: u16,
    /// Length of each record when the set may be rotated (all records then have the same
    /// length); 0 when it may not.
    pub rotate_len: u16,
}

impl RrsetSpan {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Whether the set holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Largest answer worth precompiling: anything bigger cannot be sent even over TCP. An
/// additional RRset longer than this is left out for the same reason, which is what lets every
/// set's length fit the two bytes its entry gives it.
const MAX_COMPILED: usize = 65535;

/// Bit of an entry's second word marking a set whose records rotate.
const ROTATES: u16 = 0x8000;

/// Most RRsets a section records: its count is two bytes. Only an additional section could hold
/// more (an answer section of at most [`MAX_COMPILED`] bytes has fewer than 6,000 records), and
/// no message could carry its sets beyond that many.
const MAX_SETS: usize = u16::MAX as usize;

/// A positive answer in wire form for one query name and type, ready to be copied after the
/// question of any reply to that name.
///
/// A snapshot holds one per name and type, so it is one allocation: the RRsets' entries and the
/// records share it (layout below), and the rare names it leaves unresolved ([`Beyond`]) live
/// out of line only in the answers that have them. Cloning shares the allocation, and equality
/// compares the allocations before their bytes, so that answers a new snapshot carries over
/// compare at the cost of a pointer.
///
/// A name whose answers depend on who asks keeps its [`Views`] in a compiled answer of its
/// own, which has no records (see [`crate::snapshot::Node::views`]): it lives out of line like the
/// answers that name what they do not resolve, so that it costs every other answer nothing.
///
/// # Layout
///
/// | bytes | content |
/// |---|---|
/// | 2 | RRsets of the answer section (little-endian, as every number here) |
/// | 2 | RRsets of the additional section |
/// | 2 | length of the answer section's records |
/// | 2 | records of the answer section, with bit 15 set when one of its sets rotates |
/// | 2 | records of the additional section, at most `u16::MAX` |
/// | 4 per RRset | length, then record count; for a set that rotates, its records' common length, then its count with bit 15 set |
/// | rest | every record of both sections, back to back |
///
/// The section totals let a reply with room for everything copy the records in one piece
/// ([`Parts::whole`]); the entries serve a reply that must leave sets out or rotate them.
/// No bytes at all mark an answer that overflows. Lengths fit two bytes because sections and
/// sets are at most [`MAX_COMPILED`] bytes, and counts fit fifteen bits because a record takes
/// at least 11 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledAnswer(Form);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Form {
    /// Almost every answer: the layout alone.
    Plain(Arc<[u8]>),
    /// What needs more than the layout, out of line.
    Rich(Arc<Rich>),
}

#[derive(Debug, PartialEq, Eq)]
enum Rich {
    /// An answer that names what it does not resolve.
    Unresolved { data: Box<[u8]>, beyond: Beyond },
    /// No answer of its own: the answers of each class of clients of a name.
    Views(Views),
}

/// Length of a compiled answer's header: the five numbers before the entries.
const HEADER_LEN: usize = 10;

/// The totals a section's compilation leaves for the header.
#[derive(Default)]
struct Section {
    /// RRsets kept.
    sets: usize,
    /// Their records.
    records: usize,
    /// Whether one of the kept sets rotates.
    rotates: bool,
}

/// What a compiled answer names but does not resolve: SkyDNS completes these with upstream
/// lookups when they lie outside its domain (docs/skydns-semantics.md, "Names outside the domain").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beyond {
    /// Targets of CNAMEs that end a chain (no record of the answer is owned by them): an
    /// address query is completed with the target's records of the query's type.
    pub aliases: Box<[Name]>,
    /// Targets of a flattened answer: an address query is completed with the target's records
    /// of the query's type, owned by the query name.
    pub flattened: Box<[Alias]>,
    /// SRV and MX targets without glue: their A and AAAA records belong in the additional
    /// section.
    pub hosts: Box<[Name]>,
}

impl Beyond {
    /// The unresolved names of `set`, or `None` when it has none.
    fn of(set: &AnswerSet) -> Option<Beyond> {
        let owns = |sets: &[Rrset], name: &Name| sets.iter().any(|s| s.owner.as_ref() == Some(name));
        let mut aliases: Vec<Name> = Vec::new();
        let mut hosts: Vec<Name> = Vec::new();
        for record in set.answer.iter().flat_map(|s| s.records.iter()) {
            match &record.rdata {
                Rdata::Cname(target) if !owns(&set.answer, target) && !aliases.contains(target) => {
                    aliases.push(target.clone());
                }
                Rdata::Srv { target, .. } | Rdata::Mx { exchange: target, .. }
                    if !owns(&set.additional, target) && !hosts.contains(target) =>
                {
                    hosts.push(target.clone());
                }
                _ => {}
            }
        }
        if aliases.is_empty() && hosts.is_empty() && set.flattened.is_empty() {
            return None;
        }
        Some(Beyond {
            aliases: aliases.into_boxed_slice(),
            flattened: set.flattened.clone().into_boxed_slice(),
            hosts: hosts.into_boxed_slice(),
        })
    }
}

impl CompiledAnswer {
    /// Compiles `set` for replies whose question name is `qname`.
    pub fn compile(qname: &LowerName, set: &AnswerSet) -> CompiledAnswer {
        let mut records = Vec::new();
        let mut entries = Vec::new();
        let Some(answer) = compile_section(&mut records, &mut entries, qname, &set.answer, TooLong::Overflows) else {
            return CompiledAnswer::overflowing();
        };
        let answer_len = records.len();
        if answer_len > MAX_COMPILED {
            return CompiledAnswer::overflowing();
        }
        let additional =
            compile_section(&mut records, &mut entries, qname, &set.additional, TooLong::IsLeftOut).unwrap_or_default();
        // Fewer than 6,000 records fit an answer section of at most `MAX_COMPILED` bytes.
        let answer_records = answer.records as u16 | if answer.rotates { ROTATES } else { 0 };
        let additional_records = additional.records.min(usize::from(u16::MAX)) as u16;
        let mut data = Vec::with_capacity(HEADER_LEN + entries.len() + records.len());
        for number in [
            answer.sets as u16,
            additional.sets as u16,
            answer_len as u16,
            answer_records,
            additional_records,
        ] {
            data.extend_from_slice(&number.to_le_bytes());
        }
        data.extend_from_slice(&entries);
        data.extend_from_slice(&records);
        CompiledAnswer(match Beyond::of(set) {
            None => Form::Plain(data.into()),
            Some(beyond) => Form::Rich(Arc::new(Rich::Unresolved {
                data: data.into_boxed_slice(),
                beyond,
            })),
        })
    }

    /// An answer known to be too large for any message.
    pub fn overflowing() -> CompiledAnswer {
        CompiledAnswer(Form::Plain(Arc::new([])))
    }

    /// The holder of `views`, a name's answers by client, with no records of its own.
    pub(crate) fn by_client(views: Views) -> CompiledAnswer {
        CompiledAnswer(Form::Rich(Arc::new(Rich::Views(views))))
    }

    fn data(&self) -> &[u8] {
        match &self.0 {
            Form::Plain(data) => data,
            Form::Rich(rich) => match &**rich {
                Rich::Unresolved { data, .. } => data,
                Rich::Views(_) => &[],
            },
        }
    }

    /// The answers by client this holds, if it is the holder [`Self::by_client`] made.
    pub(crate) fn views(&self) -> Option<&Views> {
        match &self.0 {
            Form::Rich(rich) => match &**rich {
                Rich::Views(views) => Some(views),
                Rich::Unresolved { .. } => None,
            },
            Form::Plain(_) => None,
        }
    }

    /// The answer cannot fit in any DNS message: UDP gets TC, TCP gets SERVFAIL.
    #[inline]
    pub fn overflow(&self) -> bool {
        self.data().is_empty()
    }

    /// The records and both sections' spans, the header read once: what the answer path needs
    /// of every answer it copies. `None` for an answer that overflows.
    #[inline(always)]
    pub fn parts(&self) -> Option<Parts<'_>> {
        let (&[a0, a1, d0, d1, l0, l1, r0, r1, e0, e1], rest) = self.data().split_first_chunk::<HEADER_LEN>()?;
        let answer_sets = usize::from(u16::from_le_bytes([a0, a1]));
        let additional_sets = usize::from(u16::from_le_bytes([d0, d1]));
        let answer_len = u16::from_le_bytes([l0, l1]);
        let answer_records = u16::from_le_bytes([r0, r1]);
        let (entries, records) = rest.split_at(4 * (answer_sets + additional_sets));
        let (answer, additional) = entries.split_at(4 * answer_sets);
        Some(Parts {
            records,
            answer: Spans {
                entries: answer,
                offset: 0,
            },
            additional: Spans {
                entries: additional,
                offset: u32::from(answer_len),
            },
            whole: Whole {
                answer_len: usize::from(answer_len),
                answer_records: answer_records & !ROTATES,
                additional_records: u16::from_le_bytes([e0, e1]),
                rotates: answer_records & ROTATES != 0,
            },
        })
    }

    /// Every record of both sections, back to back: the bytes the spans of [`Self::answer`]
    /// and [`Self::additional`] point into.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        self.parts().map_or(&[], |parts| parts.records)
    }

    /// The answer section's RRsets.
    #[inline]
    pub fn answer(&self) -> Spans<'_> {
        self.parts().map_or(Spans::NONE, |parts| parts.answer)
    }

    /// The additional section's RRsets.
    #[inline]
    pub fn additional(&self) -> Spans<'_> {
        self.parts().map_or(Spans::NONE, |parts| parts.additional)
    }

    /// Names the answer leaves unresolved, which forwarding may complete; `None` for almost
    /// every answer.
    #[inline]
    pub fn beyond(&self) -> Option<&Beyond> {
        match &self.0 {
            Form::Plain(_) => None,
            Form::Rich(rich) => match &**rich {
                Rich::Unresolved { beyond, .. } => Some(beyond),
                Rich::Views(_) => None,
            },
        }
    }

    /// Bytes of the answer's allocation past its reference counts, for memory accounting.
    pub fn heap_size(&self) -> usize {
        self.data().len()
    }
}

/// The RRsets of one section of a [`CompiledAnswer`], read from their entries as the answer
/// path walks them.
#[derive(Debug, Clone)]
pub struct Spans<'a> {
    entries: &'a [u8],
    offset: u32,
}

impl Spans<'_> {
    /// No RRsets.
    const NONE: Spans<'static> = Spans {
        entries: &[],
        offset: 0,
    };
}

/// A compiled answer's parts, read from its header once.
#[derive(Debug, Clone)]
pub struct Parts<'a> {
    /// Every record of both sections, back to back; the spans point into it.
    pub records: &'a [u8],
    /// The answer section's RRsets.
    pub answer: Spans<'a>,
    /// The additional section's RRsets.
    pub additional: Spans<'a>,
    /// Both sections' totals, for a reply with room for every record.
    pub whole: Whole,
}

/// The totals of a compiled answer's sections: a reply with room for all of its records copies
/// them in one piece (the answer section's in two, around the rotation, when a set rotates)
/// instead of set by set.
#[derive(Debug, Clone, Copy)]
pub struct Whole {
    /// Length of the answer section's records, which come first in [`Parts::records`].
    pub answer_len: usize,
    /// Records of the answer section.
    pub answer_records: u16,
    /// Records of the additional section.
    pub additional_records: u16,
    /// Whether a set of the answer section rotates, so that it is copied set by set.
    pub rotates: bool,
}

impl Iterator for Spans<'_> {
    type Item = RrsetSpan;

    #[inline(always)]
    fn next(&mut self) -> Option<RrsetSpan> {
        let (&[l0, l1, c0, c1], rest) = self.entries.split_first_chunk::<4>()?;
        self.entries = rest;
        let first = u16::from_le_bytes([l0, l1]);
        let second = u16::from_le_bytes([c0, c1]);
        let count = second & !ROTATES;
        let (len, rotate_len) = if second & ROTATES != 0 {
            (u32::from(first) * u32::from(count), first)
        } else {
            (u32::from(first), 0)
        };
        let start = self.offset;
        self.offset += len;
        Some(RrsetSpan {
            start,
            end: self.offset,
            count,
            rotate_len,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.entries.len() / 4;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Spans<'_> {}

/// What a section does with a set too long for any message.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TooLong {
    /// The whole answer overflows: an answer section is sent whole or not at all.
    Overflows,
    /// The set is left out: additional sets are sent as far as they fit.
    IsLeftOut,
}

/// Appends the records of `sets` to `records` and an entry per set to `entries` (see
/// [`CompiledAnswer`]'s layout), at most [`MAX_SETS`] of them; returns the totals of the sets it
/// kept, or `None` when a set is too long and `too_long` says the answer then overflows. Empty
/// sets are left out.
fn compile_section(
    records: &mut Vec<u8>,
    entries: &mut Vec<u8>,
    qname: &LowerName,
    sets: &[Rrset],
    too_long: TooLong,
) -> Option<Section> {
    let mut kept = Section::default();
    let mut lens = Vec::new();
    for set in sets {
        if kept.sets == MAX_SETS {
            break;
        }
        if set.records.is_empty() {
            continue;
        }
        let start = records.len();
        lens.clear();
        for record in &set.records {
            let before = records.len();
            write_record(&mut RrWriter::new(records, qname), set.owner.as_ref(), record);
            lens.push(records.len() - before);
        }
        let len = records.len() - start;
        if len > MAX_COMPILED {
            if too_long == TooLong::Overflows {
                return None;
            }
            records.truncate(start);
            continue;
        }
        // At least 11 bytes a record: a set of at most 65535 bytes counts fewer than 2^15.
        let count = set.records.len() as u16;
        let uniform = lens.windows(2).all(|w| w[0] == w[1]);
        let entry = if set.rotate && set.records.len() > 1 && uniform {
            kept.rotates = true;
            [lens[0] as u16, count | ROTATES]
        } else {
            [len as u16, count]
        };
        entries.extend_from_slice(&entry[0].to_le_bytes());
        entries.extend_from_slice(&entry[1].to_le_bytes());
        kept.sets += 1;
        kept.records += set.records.len();
    }
    Some(kept)
}

fn write_record(w: &mut RrWriter<'_>, owner: Option<&Name>, record: &Record) {
    let owner = owner.map_or(Owner::Query, Owner::Name);
    let ttl = record.ttl;
    match &record.rdata {
        Rdata::A(ip) => w.a(owner, ttl, *ip),
        Rdata::Aaaa(ip) => w.aaaa(owner, ttl, *ip),
        Rdata::Cname(n) => w.name_rr(owner, rtype::CNAME, ttl, n),
        Rdata::Ns(n) => w.name_rr(owner, rtype::NS, ttl, n),
        Rdata::Ptr(n) => w.name_rr(owner, rtype::PTR, ttl, n),
        Rdata::Mx { preference, exchange } => w.mx(owner, ttl, *preference, exchange),
        Rdata::Srv {
            priority,
            weight,
            port,
            target,
        } => w.srv(owner, ttl, *priority, *weight, *port, target),
        Rdata::Txt(strings) => w.txt(owner, class::IN, ttl, strings.iter().map(|s| &s[..])),
        Rdata::Soa {
            mname,
            rname,
            serial,
            timers,
        } => w.soa(owner, ttl, mname, rname, *serial, *timers),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(dotted: &str) -> Name {
        Name::from_dotted(dotted).unwrap()
    }

    fn qname() -> LowerName {
        LowerName::from_wire(name("web.skydns.test.").wire()).unwrap()
    }

    fn addresses(owner: Option<&str>, last_octets: &[u8], rotate: bool) -> Rrset {
        Rrset {
            owner: owner.map(name),
            records: last_octets
                .iter()
                .map(|&last| Record {
                    ttl: 60,
                    rdata: Rdata::A(Ipv4Addr::new(10, 0, 0, last)),
                })
                .collect(),
            rotate,
        }
    }

    /// A TXT set of `records` records of 25,500 bytes each.
    fn texts(owner: &str, records: usize) -> Rrset {
        Rrset {
            owner: Some(name(owner)),
            records: (0..records)
                .map(|_| Record {
                    ttl: 60,
                    rdata: Rdata::Txt(vec![Box::from([b't'; 255]); 100]),
                })
                .collect(),
            rotate: false,
        }
    }

    #[test]
    fn one_address_takes_its_record_and_fourteen_bytes() {
        let set = AnswerSet {
            flattened: Vec::new(),
            answer: vec![addresses(None, &[1], true)],
            additional: vec![],
        };
        let compiled = CompiledAnswer::compile(&qname(), &set);
        let span = RrsetSpan {
            start: 0,
            end: 16,
            count: 1,
            rotate_len: 0,
        };
        assert_eq!(compiled.answer().collect::<Vec<_>>(), [span]);
        assert_eq!(compiled.additional().count(), 0);
        assert_eq!((compiled.bytes().len(), compiled.heap_size()), (16, 30));
        assert!(!compiled.overflow() && compiled.beyond().is_none());
    }

    #[test]
    fn spans_tile_the_records_of_both_sections_in_order() {
        let set = AnswerSet {
            flattened: Vec::new(),
            answer: vec![
                addresses(None, &[1, 2, 3], true),
                addresses(None, &[], true),
                addresses(Some("other.skydns.test."), &[4, 5], false),
            ],
            additional: vec![addresses(Some("host.skydns.test."), &[6, 7], true)],
        };
        let compiled = CompiledAnswer::compile(&qname(), &set);
        let answer: Vec<RrsetSpan> = compiled.answer().collect();
        let additional: Vec<RrsetSpan> = compiled.additional().collect();
        assert_eq!(answer.len(), 2, "the empty set is left out");
        assert_eq!(additional.len(), 1);
        assert_eq!((answer[0].start, answer[0].end), (0, 48));
        assert_eq!((answer[0].count, answer[0].rotate_len), (3, 16));
        assert_eq!((answer[1].start, answer[1].count, answer[1].rotate_len), (48, 2, 0));
        assert_eq!(additional[0].start, answer[1].end);
        assert_eq!(
            (additional[0].count, additional[0].rotate_len),
            (2, additional[0].len() as u16 / 2)
        );
        assert_eq!(additional[0].end as usize, compiled.bytes().len());
        let whole = compiled.parts().expect("fits").whole;
        assert_eq!(
            whole.answer_len, answer[1].end as usize,
            "the answer's records come first"
        );
        assert_eq!((whole.answer_records, whole.additional_records), (5, 2));
        assert!(whole.rotates, "the first set rotates");
    }

    #[test]
    fn an_answer_section_too_long_for_any_message_overflows() {
        let set = AnswerSet {
            flattened: Vec::new(),
            answer: vec![texts("web.skydns.test.", 3)],
            additional: vec![],
        };
        let compiled = CompiledAnswer::compile(&qname(), &set);
        assert!(compiled.overflow());
        assert!(compiled.bytes().is_empty() && compiled.answer().count() == 0);
        assert_eq!(compiled, CompiledAnswer::overflowing());
    }

    #[test]
    fn an_additional_set_too_long_for_any_message_is_left_out() {
        let set = AnswerSet {
            flattened: Vec::new(),
            answer: vec![addresses(None, &[1], false)],
            additional: vec![
                texts("big.skydns.test.", 3),
                addresses(Some("host.skydns.test."), &[2], false),
            ],
        };
        let compiled = CompiledAnswer::compile(&qname(), &set);
        let additional: Vec<RrsetSpan> = compiled.additional().collect();
        assert_eq!(additional.len(), 1);
        assert_eq!((additional[0].start, additional[0].count), (16, 1));
        assert_eq!(additional[0].end as usize, compiled.bytes().len());
        let whole = compiled.parts().expect("fits").whole;
        assert_eq!(
            (whole.answer_records, whole.additional_records),
            (1, 1),
            "the left-out set counts no records"
        );
        assert!(!whole.rotates);
    }

    #[test]
    fn names_left_unresolved_stay_beside_the_records() {
        let set = AnswerSet {
            flattened: Vec::new(),
            answer: vec![Rrset {
                owner: None,
                records: vec![Record {
                    ttl: 60,
                    rdata: Rdata::Cname(name("www.example.org.")),
                }],
                rotate: false,
            }],
            additional: vec![],
        };
        let compiled = CompiledAnswer::compile(&qname(), &set);
        let beyond = compiled.beyond().expect("the alias target is unresolved");
        assert_eq!(&beyond.aliases[..], [name("www.example.org.")]);
        assert!(beyond.hosts.is_empty());
        assert_eq!(compiled.answer().count(), 1);
        assert_eq!(compiled.answer().next().unwrap().end as usize, compiled.bytes().len());
    }
}
