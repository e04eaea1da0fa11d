//! Writing resource records in wire form, compressing names against the query name.
//!
//! Precompiled answers are written once, off the hot path, for a known query name. Every reply
//! carries the question at offset 12, so a name equal to the query name, or to one of its
//! suffixes, becomes a 2-byte pointer into the question. Pointers to anything else are avoided on
//! purpose: RRsets may be dropped or reordered at truncation time, and a pointer into a dropped
//! RRset would corrupt the reply.

use super::name::{LowerName, Name};
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
}
