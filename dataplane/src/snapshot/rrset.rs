//! Structured resource-record sets, as the snapshot builder produces them, and their compilation
//! into the ready-to-copy wire form the answer path uses.

use crate::wire::types::{class, rtype};
use crate::wire::writer::{Owner, RrWriter};
use crate::wire::{LowerName, Name};
use std::net::{Ipv4Addr, Ipv6Addr};

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

/// Largest answer worth precompiling: anything bigger cannot be sent even over TCP.
const MAX_COMPILED: usize = 65535;

/// A positive answer in wire form for one query name and type, ready to be copied after the
/// question of any reply to that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledAnswer {
    /// Every record of both sections, back to back.
    pub bytes: Box<[u8]>,
    /// The answer section's RRsets.
    pub answer: Box<[RrsetSpan]>,
    /// The additional section's RRsets.
    pub additional: Box<[RrsetSpan]>,
    /// The answer cannot fit in any DNS message: UDP gets TC, TCP gets SERVFAIL.
    pub overflow: bool,
    /// Names the answer leaves unresolved, which forwarding may complete; `None` for almost
    /// every answer, so that the copy path does not carry their weight.
    pub beyond: Option<Box<Beyond>>,
}

/// What a compiled answer names but does not resolve: SkyDNS completes these with upstream
/// lookups (spec §6.2, §6.3) when they lie outside its domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beyond {
    /// Targets of CNAMEs that end a chain (no record of the answer is owned by them): an
    /// address query is completed with the target's records of the query's type.
    pub aliases: Box<[Name]>,
    /// SRV and MX targets without glue: their A and AAAA records belong in the additional
    /// section.
    pub hosts: Box<[Name]>,
}

impl Beyond {
    /// The unresolved names of `set`, or `None` when it has none.
    fn of(set: &AnswerSet) -> Option<Box<Beyond>> {
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
        if aliases.is_empty() && hosts.is_empty() {
            return None;
        }
        Some(Box::new(Beyond {
            aliases: aliases.into_boxed_slice(),
            hosts: hosts.into_boxed_slice(),
        }))
    }
}

impl CompiledAnswer {
    /// Compiles `set` for replies whose question name is `qname`.
    pub fn compile(qname: &LowerName, set: &AnswerSet) -> CompiledAnswer {
        let mut bytes = Vec::new();
        let answer = compile_section(&mut bytes, qname, &set.answer);
        let answer_len = bytes.len();
        let additional = compile_section(&mut bytes, qname, &set.additional);
        if answer_len > MAX_COMPILED {
            return CompiledAnswer::overflowing();
        }
        CompiledAnswer {
            bytes: bytes.into_boxed_slice(),
            answer: answer.into_boxed_slice(),
            additional: additional.into_boxed_slice(),
            overflow: false,
            beyond: Beyond::of(set),
        }
    }

    /// An answer known to be too large for any message.
    pub fn overflowing() -> CompiledAnswer {
        CompiledAnswer {
            bytes: Box::new([]),
            answer: Box::new([]),
            additional: Box::new([]),
            overflow: true,
            beyond: None,
        }
    }

    /// Bytes of the answer set, then of the additional set, for memory accounting.
    pub fn heap_size(&self) -> usize {
        self.bytes.len() + (self.answer.len() + self.additional.len()) * std::mem::size_of::<RrsetSpan>()
    }
}

fn compile_section(bytes: &mut Vec<u8>, qname: &LowerName, sets: &[Rrset]) -> Vec<RrsetSpan> {
    let mut spans = Vec::with_capacity(sets.len());
    for set in sets {
        if set.records.is_empty() {
            continue;
        }
        let start = bytes.len();
        let mut lens = Vec::with_capacity(set.records.len());
        for record in &set.records {
            let before = bytes.len();
            write_record(&mut RrWriter::new(bytes, qname), set.owner.as_ref(), record);
            lens.push(bytes.len() - before);
        }
        let uniform = lens.windows(2).all(|w| w[0] == w[1]);
        let rotate_len = if set.rotate && set.records.len() > 1 && uniform {
            lens[0] as u16
        } else {
            0
        };
        spans.push(RrsetSpan {
            start: start as u32,
            end: bytes.len() as u32,
            count: set.records.len().min(u16::MAX as usize) as u16,
            rotate_len,
        });
    }
    spans
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
