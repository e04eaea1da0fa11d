//! The sans-I/O core: query bytes + snapshot → reply bytes in a caller-owned buffer.
//!
//! UDP workers, TCP connections, tests, benches and fuzzers all call [`answer`]. It never
//! allocates on the authoritative path: the query name is folded onto the stack, the node is
//! found by one hash lookup, and the precompiled RRsets are copied after the client's question.

use crate::snapshot::rrset::CompiledAnswer;
use crate::snapshot::skydns::{self, WildcardAnswer};
use crate::snapshot::{Slot, Snapshot, Zone, ZoneKind, ZoneState};
use crate::wire::types::{
    class, flags, option, rcode, rtype, ADVERTISED_UDP_LEN, CLASSIC_UDP_LEN, HEADER_LEN, MAX_MESSAGE_LEN,
};
use crate::wire::{parse_query, DropReason, LowerName, Query};

/// The transport a query arrived on; it sets the reply size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Datagrams: limited by the client's EDNS size (512 without EDNS), capped at 1232.
    Udp,
    /// Streams: up to 65535 bytes.
    Tcp,
}

/// Per-query facts from the caller, who owns sockets and clocks.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    /// Transport of the query.
    pub transport: Transport,
    /// A per-worker counter that picks the rotation of round-robin RRsets.
    pub rotation: u32,
    /// TCP idle timeout advertised in edns-tcp-keepalive (RFC 7828), in units of 100 ms.
    pub keepalive: u16,
}

impl Context {
    /// A context for `transport` with no rotation and a 10 s keepalive.
    pub fn new(transport: Transport) -> Context {
        Context {
            transport,
            rotation: 0,
            keepalive: 100,
        }
    }
}

/// What the answer path did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A reply of `len` bytes is in the output buffer.
    Reply(Reply),
    /// Nothing is to be sent.
    Drop(DropReason),
}

/// Facts about a reply, for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Bytes written.
    pub len: usize,
    /// Response code, extended (BADVERS = 16).
    pub rcode: u16,
    /// TC was set.
    pub truncated: bool,
    /// The query claimed answer or authority records, which were ignored.
    pub ignored_records: bool,
    /// Bytes followed the query, which were ignored.
    pub trailing: bool,
}

/// RFC 8482 §4.2: the synthesised HINFO that answers ANY.
const RFC8482_HINFO: &[u8] = b"\x07RFC8482\x00";
/// Length of an OPT record without options.
const OPT_LEN: usize = 11;
/// Length of an edns-tcp-keepalive option carrying a timeout.
const KEEPALIVE_LEN: usize = 6;

/// Answers one query. `out` should hold at least 65535 bytes; a smaller buffer caps replies.
pub fn answer(query: &[u8], snapshot: &Snapshot, ctx: &Context, out: &mut [u8]) -> Outcome {
    let mut qname = LowerName::default();
    let q = match parse_query(query, &mut qname) {
        Ok(q) => q,
        Err(reason) => return Outcome::Drop(reason),
    };
    let mut r = Responder::new(query, &q, ctx, out);
    respond(&mut r, &q, &qname, snapshot);
    Outcome::Reply(r.finish(&q))
}

fn respond(r: &mut Responder<'_>, q: &Query, qname: &LowerName, snapshot: &Snapshot) {
    if q.opcode() != 0 {
        r.flags = flags::QR | (q.flags & flags::OPCODE_MASK);
        r.copy_question(q, qname);
        return r.set_rcode(rcode::NOTIMP);
    }
    let question = match (q.error, q.question) {
        (None, Some(question)) if q.qdcount == 1 => question,
        _ => {
            r.copy_question(q, qname);
            return r.set_rcode(rcode::FORMERR);
        }
    };
    r.copy_question(q, qname);
    if q.edns.is_some_and(|e| e.version > 0) {
        return r.set_rcode(rcode::BADVERS);
    }
    match question.qtype {
        rtype::OPT => return r.set_rcode(rcode::FORMERR),
        rtype::AXFR | rtype::IXFR => {
            let code = if r.ctx.transport == Transport::Udp {
                rcode::NOTIMP
            } else {
                rcode::REFUSED
            };
            return r.set_rcode(code);
        }
        t if rtype::is_unsupported_meta(t) => return r.set_rcode(rcode::NOTIMP),
        _ => {}
    }
    match question.qclass {
        class::IN => {}
        class::CH => return chaos(r, qname, question.qtype, snapshot),
        _ => return r.set_rcode(rcode::REFUSED),
    }
    let Some((_, zone)) = snapshot.zone_of(qname.wire()) else {
        return r.set_rcode(rcode::REFUSED);
    };
    if zone.state == ZoneState::Syncing {
        return r.set_rcode(rcode::SERVFAIL);
    }
    if zone.kind == ZoneKind::Authoritative {
        r.flags |= flags::AA;
        if has_wildcard_label(qname, zone) {
            return wildcard(r, qname, question.qtype, zone, snapshot);
        }
    }
    let Some(node) = snapshot.node(qname.wire()) else {
        return match zone.kind {
            ZoneKind::Authoritative => r.negative(rcode::NXDOMAIN, qname, zone),
            ZoneKind::Reverse => r.set_rcode(rcode::REFUSED),
        };
    };
    if question.qtype == rtype::ANY {
        return r.hinfo(zone.default_ttl);
    }
    match Slot::for_qtype(question.qtype).and_then(|s| node.answer(s)) {
        Some(compiled) => r.compiled(compiled),
        None => r.negative(rcode::NOERROR, qname, zone),
    }
}

/// SkyDNS query wildcards: a `*` or `any` label anywhere left of the apex.
fn has_wildcard_label(qname: &LowerName, zone: &Zone) -> bool {
    let own = qname.label_count().saturating_sub(zone.apex.label_count());
    (0..own).any(|i| matches!(qname.label(i), b"*" | b"any"))
}

fn wildcard(r: &mut Responder<'_>, qname: &LowerName, qtype: u16, zone: &Zone, snapshot: &Snapshot) {
    let Some(index) = snapshot.skydns.as_deref() else {
        return r.negative(rcode::NXDOMAIN, qname, zone);
    };
    match skydns::wildcard(index, qname, qtype) {
        WildcardAnswer::NxDomain => r.negative(rcode::NXDOMAIN, qname, zone),
        WildcardAnswer::NoData => r.negative(rcode::NOERROR, qname, zone),
        WildcardAnswer::Answer(_) if qtype == rtype::ANY => r.hinfo(zone.default_ttl),
        WildcardAnswer::Answer(compiled) => r.compiled(&compiled),
    }
}

/// CHAOS identity queries, answered only when the operator configured them.
fn chaos(r: &mut Responder<'_>, qname: &LowerName, qtype: u16, snapshot: &Snapshot) {
    let id = &snapshot.identity;
    let text = match qname.wire() {
        b"\x07version\x04bind\x00" | b"\x07version\x06server\x00" => id.version.as_deref(),
        b"\x02id\x06server\x00" | b"\x08hostname\x04bind\x00" => id.id.as_deref(),
        _ => None,
    };
    let Some(text) = text else {
        return r.set_rcode(rcode::REFUSED);
    };
    r.flags |= flags::AA;
    if qtype == rtype::TXT || qtype == rtype::ANY {
        r.txt_chaos(text);
    }
}

/// Writes one reply: header, question, sections, and an OPT when the query had one.
struct Responder<'a> {
    out: &'a mut [u8],
    pos: usize,
    /// Bytes the sections may use; the OPT's room is already subtracted.
    limit: usize,
    ctx: &'a Context,
    query: &'a [u8],
    flags: u16,
    rcode: u16,
    counts: [u16; 4],
    opt_keepalive: bool,
}

impl<'a> Responder<'a> {
    fn new(query: &'a [u8], q: &Query, ctx: &'a Context, out: &'a mut [u8]) -> Responder<'a> {
        let size = match (ctx.transport, q.edns) {
            (Transport::Tcp, _) => MAX_MESSAGE_LEN,
            (Transport::Udp, Some(e)) => (e.udp_size as usize).clamp(CLASSIC_UDP_LEN, ADVERTISED_UDP_LEN as usize),
            (Transport::Udp, None) => CLASSIC_UDP_LEN,
        };
        let opt_keepalive = ctx.transport == Transport::Tcp && q.edns.is_some_and(|e| e.tcp_keepalive);
        let opt_room = match q.edns {
            Some(_) if opt_keepalive => OPT_LEN + KEEPALIVE_LEN,
            Some(_) => OPT_LEN,
            None => 0,
        };
        let limit = size.min(out.len()).saturating_sub(opt_room);
        Responder {
            out,
            pos: HEADER_LEN,
            limit,
            ctx,
            query,
            flags: flags::QR | (q.flags & (flags::OPCODE_MASK | flags::RD)),
            rcode: rcode::NOERROR,
            counts: [0; 4],
            opt_keepalive,
        }
    }

    fn set_rcode(&mut self, code: u16) {
        self.rcode = code;
    }

    fn room(&self) -> usize {
        self.limit.saturating_sub(self.pos)
    }

    fn put(&mut self, bytes: &[u8]) {
        self.out[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
    }

    /// Copies the client's question byte-exact (0x20 case echo). A question whose name used
    /// compression is rewritten from the folded name so that offsets into it stay valid.
    fn copy_question(&mut self, q: &Query, qname: &LowerName) {
        let Some(question) = q.question else { return };
        let name_len = question.end - 4 - HEADER_LEN;
        let total = if name_len == qname.wire().len() {
            question.end - HEADER_LEN
        } else {
            qname.wire().len() + 4
        };
        if total > self.room() {
            return;
        }
        if name_len == qname.wire().len() {
            let query = self.query;
            self.put(&query[HEADER_LEN..question.end]);
        } else {
            self.put(qname.wire());
            let query = self.query;
            self.put(&query[question.end - 4..question.end]);
        }
        self.counts[0] = 1;
    }

    fn compiled(&mut self, compiled: &CompiledAnswer) {
        if compiled.overflow {
            match self.ctx.transport {
                Transport::Udp => self.flags |= flags::TC,
                Transport::Tcp => {
                    self.flags &= !flags::AA;
                    self.rcode = rcode::SERVFAIL;
                }
            }
            return;
        }
        for span in compiled.answer.iter() {
            if span.len() > self.room() {
                self.flags |= flags::TC;
                return;
            }
            let bytes = &compiled.bytes[span.start as usize..span.end as usize];
            if span.rotate_len > 0 {
                let cut = (self.ctx.rotation % span.count as u32) as usize * span.rotate_len as usize;
                self.put(&bytes[cut..]);
                self.put(&bytes[..cut]);
            } else {
                self.put(bytes);
            }
            self.counts[1] += span.count;
        }
        for span in compiled.additional.iter() {
            if span.len() <= self.room() {
                self.put(&compiled.bytes[span.start as usize..span.end as usize]);
                self.counts[3] += span.count;
            }
        }
    }

    /// NXDOMAIN or NODATA, with the zone's SOA in the authority section (RFC 2308).
    fn negative(&mut self, code: u16, qname: &LowerName, zone: &Zone) {
        self.rcode = code;
        let Some(soa) = zone.soa_rdata.as_deref() else { return };
        if 12 + soa.len() > self.room() {
            self.flags |= flags::TC;
            return;
        }
        let apex_at = qname.label_count() - zone.apex.label_count();
        let owner = 0xC000 | (HEADER_LEN + qname.label_start(apex_at)) as u16;
        if zone.apex.label_count() == 0 {
            self.put(&[0]);
        } else {
            self.put(&owner.to_be_bytes());
        }
        self.put(&rtype::SOA.to_be_bytes());
        self.put(&class::IN.to_be_bytes());
        self.put(&zone.negative_ttl.to_be_bytes());
        self.put(&(soa.len() as u16).to_be_bytes());
        self.put(soa);
        self.counts[2] = 1;
    }

    fn hinfo(&mut self, ttl: u32) {
        self.record_at_query(rtype::HINFO, class::IN, ttl, &[RFC8482_HINFO]);
    }

    fn txt_chaos(&mut self, text: &[u8]) {
        let text = &text[..text.len().min(255)];
        self.record_at_query(rtype::TXT, class::CH, 0, &[&[text.len() as u8], text]);
    }

    fn record_at_query(&mut self, rtype_: u16, rclass: u16, ttl: u32, rdata: &[&[u8]]) {
        let rdlen: usize = rdata.iter().map(|p| p.len()).sum();
        if 12 + rdlen > self.room() {
            self.flags |= flags::TC;
            return;
        }
        self.put(&[0xC0, HEADER_LEN as u8]);
        self.put(&rtype_.to_be_bytes());
        self.put(&rclass.to_be_bytes());
        self.put(&ttl.to_be_bytes());
        self.put(&(rdlen as u16).to_be_bytes());
        for part in rdata {
            self.put(part);
        }
        self.counts[1] += 1;
    }

    fn finish(self, q: &Query) -> Reply {
        let Responder {
            out,
            mut pos,
            flags: fl,
            rcode: code,
            mut counts,
            ctx,
            opt_keepalive,
            ..
        } = self;
        if let Some(edns) = q.edns {
            let ext = (code >> 4) as u8;
            let do_bit = if edns.dnssec_ok { 0x80 } else { 0 };
            let rdlen: u16 = if opt_keepalive { KEEPALIVE_LEN as u16 } else { 0 };
            let mut opt = [0u8; OPT_LEN + KEEPALIVE_LEN];
            opt[1..3].copy_from_slice(&rtype::OPT.to_be_bytes());
            opt[3..5].copy_from_slice(&ADVERTISED_UDP_LEN.to_be_bytes());
            opt[5] = ext;
            opt[7] = do_bit;
            opt[9..11].copy_from_slice(&rdlen.to_be_bytes());
            opt[11..13].copy_from_slice(&option::TCP_KEEPALIVE.to_be_bytes());
            opt[13..15].copy_from_slice(&2u16.to_be_bytes());
            opt[15..17].copy_from_slice(&ctx.keepalive.to_be_bytes());
            let len = OPT_LEN + rdlen as usize;
            out[pos..pos + len].copy_from_slice(&opt[..len]);
            pos += len;
            counts[3] += 1;
        }
        out[0..2].copy_from_slice(&q.id.to_be_bytes());
        out[2..4].copy_from_slice(&(fl | (code & 0x000F)).to_be_bytes());
        for (i, c) in counts.iter().enumerate() {
            out[4 + 2 * i..6 + 2 * i].copy_from_slice(&c.to_be_bytes());
        }
        Reply {
            len: pos,
            rcode: code,
            truncated: fl & flags::TC != 0,
            ignored_records: q.ancount != 0 || q.nscount != 0,
            trailing: q.trailing,
        }
    }
}
