//! Writing resource records in wire form, compressing names against the query name.
//!
//! Precompiled answers are written once, off the hot path, for a known query name. Every reply
//! carries the question at offset 12, so a name equal to the query name, or to one of its
//! suffixes, becomes a 2-byte pointer into the question. Pointers to anything else are avoided on
//! purpose: RRsets may be dropped or reordered at truncation time, and a pointer into a dropped
//! RRset would corrupt the reply.

use super::name::{LowerName, Name};
use super::rdata::{layout, Field, NameRule};
use super::types::{class, rtype, HEADER_LEN};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The owner of a record being written.
#[derive(Debug, Clone, Copy)]
pub enum Owner<'a> {
    /// The query name, as the client spelled it: always a pointer to offset 12.
    Query,
    /// Some other name, compressed against the query name where a suffix matches.
    Name(&'a Name),
}

/// Appends records to a byte buffer for a reply whose question name is `qname`.
pub struct RrWriter<'a> {
    out: &'a mut Vec<u8>,
    qname: &'a LowerName,
}

impl<'a> RrWriter<'a> {
    /// Writes into `out` for replies to questions about `qname`.
    pub fn new(out: &'a mut Vec<u8>, qname: &'a LowerName) -> Self {
        RrWriter { out, qname }
    }

    /// Writes `name`, ending in a pointer to the longest suffix of the query name it shares.
    pub fn name(&mut self, name: &Name) {
        let wire = name.wire();
        let mut pos = 0;
        while wire[pos] != 0 {
            if let Some(offset) = self.suffix_offset(&wire[pos..]) {
                let ptr = 0xC000 | offset as u16;
                self.out.extend_from_slice(&ptr.to_be_bytes());
                return;
            }
            let len = wire[pos] as usize;
            self.out.extend_from_slice(&wire[pos..pos + 1 + len]);
            pos += 1 + len;
        }
        self.out.push(0);
    }

    /// Writes `name` uncompressed, as RFC 2782 requires for SRV targets.
    pub fn name_uncompressed(&mut self, name: &Name) {
        self.out.extend_from_slice(name.wire());
    }

    fn suffix_offset(&self, suffix: &[u8]) -> Option<usize> {
        (0..self.qname.label_count())
            .find(|&i| self.qname.suffix(i) == suffix)
            .map(|i| HEADER_LEN + self.qname.label_start(i))
    }

    fn owner(&mut self, owner: Owner<'_>) {
        match owner {
            Owner::Query => self.out.extend_from_slice(&[0xC0, HEADER_LEN as u8]),
            Owner::Name(n) => self.name(n),
        }
    }

    /// Writes the fixed part of a record and returns where its RDLENGTH must be patched.
    fn begin(&mut self, owner: Owner<'_>, rtype_: u16, rclass: u16, ttl: u32) -> usize {
        self.owner(owner);
        self.out.extend_from_slice(&rtype_.to_be_bytes());
        self.out.extend_from_slice(&rclass.to_be_bytes());
        self.out.extend_from_slice(&ttl.to_be_bytes());
        self.out.extend_from_slice(&[0, 0]);
        self.out.len()
    }

    fn finish(&mut self, rdata_start: usize) {
        let len = (self.out.len() - rdata_start) as u16;
        self.out[rdata_start - 2..rdata_start].copy_from_slice(&len.to_be_bytes());
    }

    /// An A record.
    pub fn a(&mut self, owner: Owner<'_>, ttl: u32, ip: Ipv4Addr) {
        let at = self.begin(owner, rtype::A, class::IN, ttl);
        self.out.extend_from_slice(&ip.octets());
        self.finish(at);
    }

    /// An AAAA record.
    pub fn aaaa(&mut self, owner: Owner<'_>, ttl: u32, ip: Ipv6Addr) {
        let at = self.begin(owner, rtype::AAAA, class::IN, ttl);
        self.out.extend_from_slice(&ip.octets());
        self.finish(at);
    }

    /// A record whose RDATA is a single (compressible) name: CNAME, NS, PTR.
    pub fn name_rr(&mut self, owner: Owner<'_>, rtype_: u16, ttl: u32, target: &Name) {
        let at = self.begin(owner, rtype_, class::IN, ttl);
        self.name(target);
        self.finish(at);
    }

    /// An SRV record (RFC 2782); the target is never compressed.
    pub fn srv(&mut self, owner: Owner<'_>, ttl: u32, priority: u16, weight: u16, port: u16, target: &Name) {
        let at = self.begin(owner, rtype::SRV, class::IN, ttl);
        for v in [priority, weight, port] {
            self.out.extend_from_slice(&v.to_be_bytes());
        }
        self.name_uncompressed(target);
        self.finish(at);
    }

    /// An MX record.
    pub fn mx(&mut self, owner: Owner<'_>, ttl: u32, preference: u16, exchange: &Name) {
        let at = self.begin(owner, rtype::MX, class::IN, ttl);
        self.out.extend_from_slice(&preference.to_be_bytes());
        self.name(exchange);
        self.finish(at);
    }

    /// A TXT record made of the given character-strings (each at most 255 bytes).
    pub fn txt<'s>(&mut self, owner: Owner<'_>, rclass: u16, ttl: u32, strings: impl IntoIterator<Item = &'s [u8]>) {
        let at = self.begin(owner, rtype::TXT, rclass, ttl);
        for s in strings {
            debug_assert!(s.len() <= 255);
            self.out.push(s.len() as u8);
            self.out.extend_from_slice(s);
        }
        self.finish(at);
    }

    /// An SOA record.
    #[allow(clippy::too_many_arguments)]
    pub fn soa(&mut self, owner: Owner<'_>, ttl: u32, mname: &Name, rname: &Name, serial: u32, timers: [u32; 4]) {
        let at = self.begin(owner, rtype::SOA, class::IN, ttl);
        self.name(mname);
        self.name(rname);
        self.out.extend_from_slice(&serial.to_be_bytes());
        for t in timers {
            self.out.extend_from_slice(&t.to_be_bytes());
        }
        self.finish(at);
    }

    /// A HINFO record, used for RFC 8482 minimal ANY answers.
    pub fn hinfo(&mut self, owner: Owner<'_>, ttl: u32, cpu: &[u8], os: &[u8]) {
        let at = self.begin(owner, rtype::HINFO, class::IN, ttl);
        for s in [cpu, os] {
            self.out.push(s.len() as u8);
            self.out.extend_from_slice(s);
        }
        self.finish(at);
    }
}

/// How an answer compiled for one question name moves to a reply whose question spells that
/// name shorter in its first labels (Kubernetes port names without their underscores): the
/// pointers at or past offset `from` of the message (into the labels both spellings share)
/// move back by `by` bytes. A pointer to the question name itself, offset 12, stays. The
/// answers this is used for point into the question nowhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shift {
    /// First offset that moves: where the shared labels start in the longer spelling.
    pub from: u16,
    /// How many bytes shorter the reply's question is.
    pub by: u16,
}

/// Moves by `shift` the pointers of the `count` records at the start of `records`, written by
/// [`RrWriter`]: in their owners and in the names of the RDATA it compresses (those
/// [`layout`] marks [`NameRule::Compressed`]). Lengths do not change, so spans and truncation stay as compiled. Stops at the first
/// record that does not parse, which [`RrWriter`] never writes.
pub fn shift_pointers(records: &mut [u8], count: usize, shift: Shift) {
    move_pointers(records, count, |pointer| {
        (pointer >= shift.from).then(|| pointer - shift.by)
    });
}

/// Points the pointers into the question name (of `len` bytes, at offset 12) of the `count`
/// records at the start of `records` at the same name written at offset `to` instead: an answer
/// compiled for a name other than the question's, written after a CNAME to that name (a search
/// list's answer, docs/kubernetes.md "Autopath"). The records [`RrWriter`] writes point into
/// the question name and nowhere else, so every other pointer stays.
pub fn relocate_question(records: &mut [u8], count: usize, len: usize, to: u16) {
    let question = HEADER_LEN as u16..(HEADER_LEN + len) as u16;
    move_pointers(records, count, |pointer| {
        question.contains(&pointer).then(|| to + (pointer - question.start))
    });
}

/// Rewrites, by `moved`, the pointers of the `count` records at the start of `records` that
/// `moved` maps: in their owners and in the names of the RDATA that may be compressed
/// ([`NameRule::Compressed`]).
fn move_pointers(records: &mut [u8], count: usize, moved: impl Fn(u16) -> Option<u16>) {
    let mut at = 0;
    for _ in 0..count {
        let Some(fixed) = move_name(records, at, &moved) else {
            return;
        };
        let (Some(rtype_), Some(rclass), Some(rdlength)) =
            (be16(records, fixed), be16(records, fixed + 2), be16(records, fixed + 8))
        else {
            return;
        };
        let rdata = fixed + 10;
        if let Some(fields) = layout(rtype_, rclass) {
            move_rdata_pointers(records, rdata, fields, &moved);
        }
        at = rdata + usize::from(rdlength);
    }
}

/// Moves, by `moved`, the pointers of the names in the data at `at` of a record whose data has
/// `fields`, as far as the names that may be compressed go: a type's names all may be or none
/// may (RFC 3597 §4), so the first other name ends the walk, as does data that does not parse.
fn move_rdata_pointers(
    records: &mut [u8],
    mut at: usize,
    fields: &[Field],
    moved: &impl Fn(u16) -> Option<u16>,
) -> Option<()> {
    for field in fields {
        at = match *field {
            Field::Name(NameRule::Compressed) => move_name(records, at, moved)?,
            Field::Name(_) | Field::Rest => return Some(()),
            Field::Fixed(len) => at + len,
            Field::Text => at + 1 + usize::from(*records.get(at)?),
        };
    }
    Some(())
}

/// Moves the pointer ending the name at `at`, if it has one that `moved` maps; returns where
/// the name ends.
fn move_name(records: &mut [u8], mut at: usize, moved: &impl Fn(u16) -> Option<u16>) -> Option<usize> {
    loop {
        let len = *records.get(at)?;
        if len & 0xC0 == 0xC0 {
            let pointer = be16(records, at)? & 0x3FFF;
            if let Some(to) = moved(pointer) {
                records[at..at + 2].copy_from_slice(&(0xC000 | to).to_be_bytes());
            }
            return Some(at + 2);
        }
        if len == 0 {
            return Some(at + 1);
        }
        at += 1 + usize::from(len);
    }
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compress_against_query_suffixes() {
        let q = LowerName::from_wire(Name::from_dotted("web.skydns.local").unwrap().wire()).unwrap();
        let mut out = Vec::new();
        let mut w = RrWriter::new(&mut out, &q);
        w.name(&Name::from_dotted("db.skydns.local").unwrap());
        assert_eq!(out, [2, b'd', b'b', 0xC0, 16]);
        out.clear();
        let mut w = RrWriter::new(&mut out, &q);
        w.name(&Name::from_dotted("WEB.skydns.local").unwrap());
        assert_eq!(out, [0xC0, 12]);
        out.clear();
        let mut w = RrWriter::new(&mut out, &q);
        w.name(&Name::from_dotted("example.org").unwrap());
        assert_eq!(out, b"\x07example\x03org\x00");
    }

    /// Every kind of record, written for `qname`: owners and RDATA names at the question, at
    /// suffixes of it, below them, and elsewhere.
    fn records(qname: &str) -> Vec<u8> {
        let q = LowerName::from_wire(Name::from_dotted(qname).unwrap().wire()).unwrap();
        let n = |text: &str| Name::from_dotted(text).unwrap();
        let (base, below, elsewhere) = (
            n("svc.ns.svc.cluster.local"),
            n("ep.svc.ns.svc.cluster.local"),
            n("example.org"),
        );
        let mut out = Vec::new();
        let mut w = RrWriter::new(&mut out, &q);
        w.srv(Owner::Query, 5, 0, 100, 80, &below);
        w.a(Owner::Name(&base), 5, Ipv4Addr::new(10, 0, 0, 1));
        w.aaaa(Owner::Name(&below), 5, Ipv6Addr::LOCALHOST);
        w.name_rr(Owner::Name(&elsewhere), rtype::CNAME, 5, &below);
        w.name_rr(Owner::Query, rtype::PTR, 5, &base);
        w.mx(Owner::Name(&below), 5, 10, &base);
        w.soa(Owner::Name(&base), 5, &below, &base, 1, [1, 2, 3, 4]);
        w.txt(Owner::Name(&below), class::IN, 5, [b"x".as_slice()]);
        out
    }

    #[test]
    fn rdata_names_are_compressed_exactly_where_their_layout_allows() {
        let written = records("_http._tcp.svc.ns.svc.cluster.local");
        let ends_in_pointer =
            |at: usize| move_name(&mut written.clone(), at, &|_| None).map(|end| written[end - 2] >= 0xC0);
        let mut at = 0;
        let mut names = 0;
        while at < written.len() {
            let fixed = move_name(&mut written.clone(), at, &|_| None).unwrap();
            let (rtype_, rclass) = (be16(&written, fixed).unwrap(), be16(&written, fixed + 2).unwrap());
            let mut pos = fixed + 10;
            let end = pos + usize::from(be16(&written, fixed + 8).unwrap());
            let Some(fields) = layout(rtype_, rclass) else {
                at = end;
                continue;
            };
            for field in fields {
                pos = match *field {
                    Field::Name(rule) => {
                        names += 1;
                        assert_eq!(
                            ends_in_pointer(pos),
                            Some(rule == NameRule::Compressed),
                            "type {rtype_}"
                        );
                        move_name(&mut written.clone(), pos, &|_| None).unwrap()
                    }
                    Field::Fixed(len) => pos + len,
                    Field::Text => pos + 1 + usize::from(written[pos]),
                    Field::Rest => end,
                };
            }
            assert_eq!(pos, end, "type {rtype_}");
            at = end;
        }
        assert_eq!(
            names, 6,
            "SRV, CNAME, PTR, MX and SOA's two, all sharing the query's suffix"
        );
    }

    #[test]
    fn shifted_pointers_are_those_written_for_the_shorter_spelling() {
        let compiled = records("_http._tcp.svc.ns.svc.cluster.local");
        for (spelling, by) in [("http._tcp", 1), ("_http.tcp", 1), ("http.tcp", 2)] {
            let mut shifted = compiled.clone();
            let from = (HEADER_LEN + "_http._tcp.".len()) as u16;
            shift_pointers(&mut shifted, 8, Shift { from, by });
            assert_eq!(
                shifted,
                records(&format!("{spelling}.svc.ns.svc.cluster.local")),
                "{spelling}"
            );
        }
    }

    #[test]
    fn records_compiled_for_another_name_point_at_it_where_it_is_written() {
        let found = LowerName::from_wire(Name::from_dotted("svc.ns.svc.cluster.local").unwrap().wire()).unwrap();
        let mut compiled = Vec::new();
        let mut w = RrWriter::new(&mut compiled, &found);
        w.name_rr(
            Owner::Query,
            rtype::CNAME,
            5,
            &Name::from_dotted("x.ns.svc.cluster.local").unwrap(),
        );
        let to = 100u16;
        let mut moved = compiled.clone();
        relocate_question(&mut moved, 1, found.wire().len(), to);
        let pointers = |records: &[u8]| -> Vec<u16> {
            records
                .windows(2)
                .filter(|pair| pair[0] & 0xC0 == 0xC0)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]) & 0x3FFF)
                .collect()
        };
        let before = pointers(&compiled);
        assert!(!before.is_empty());
        assert_eq!(
            pointers(&moved),
            before.iter().map(|p| p - HEADER_LEN as u16 + to).collect::<Vec<_>>()
        );
    }
}
