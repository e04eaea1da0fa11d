//! The message builder: header, question, sections and OPT of one reply, written in place into
//! a caller-owned buffer within the size the transport and the client's EDNS allow.

use super::{Context, Reply, Transport, RFC8482_HINFO};
use crate::cache::{Age, Entry, Relocation};
use crate::cookie::{self, Verdict, COOKIE_LEN};
use crate::dnssec::rrsets::{Records, Section};
use crate::reply::{note, size_limit};
use crate::snapshot::rrset::{CompiledAnswer, RrsetSpan};
use crate::snapshot::{Written, Zone, ZoneKind};
use crate::wire::bytes::copy_short;
use crate::wire::name::skip_name;
use crate::wire::query::CookieAt;
use crate::wire::types::{class, ede, flags, option, rcode, rtype, ADVERTISED_UDP_LEN, HEADER_LEN, MAX_NAME_LEN};
use crate::wire::writer::{relocate_question, shift_pointers, Shift};
use crate::wire::{LowerName, Query};

/// Length of an OPT record without options.
pub(crate) const OPT_LEN: usize = 11;
/// Length of an edns-tcp-keepalive option carrying a timeout.
const KEEPALIVE_LEN: usize = 6;
/// Length of an Extended DNS Error option without extra text (RFC 8914 §2).
const EDE_LEN: usize = 6;

/// A compression pointer to the question's name, which every reply writes right after the
/// header: the owner of records written at the query name.
const QUESTION_NAME: [u8; 2] = [0xC0, HEADER_LEN as u8];

/// Length of a COOKIE option carrying a client cookie and this server's cookie.
const COOKIE_OPT_LEN: usize = 4 + COOKIE_LEN;

/// Writes one reply: header, question, sections, and an OPT when the query had one. The one
/// message builder: authoritative answers and forwarded ones alike are written through it, so
/// that section order, counts, truncation and the OPT are decided in one place.
pub(crate) struct Responder<'a> {
    out: &'a mut [u8],
    pos: usize,
    /// Bytes the sections may use; the OPT's room is already subtracted.
    limit: usize,
    pub(crate) ctx: &'a Context<'a>,
    query: &'a [u8],
    pub(crate) flags: u16,
    pub(crate) rcode: u16,
    counts: [u16; 4],
    opt_keepalive: bool,
    /// Extended DNS Error info code to send in the OPT (room already subtracted).
    ede: Option<u16>,
    /// The query had an OPT, so the reply gets one.
    has_opt: bool,
    /// The COOKIE option's data for the reply (room already subtracted).
    cookie: Option<[u8; COOKIE_LEN]>,
    /// Offset just past the reply's question; 0 while it has none.
    question_end: u16,
    /// The [`note`]s decided while answering: a valid server cookie, an answer from a search
    /// list (autopath).
    notes: u8,
}

impl<'a> Responder<'a> {
    /// Sets AA when `zone` is one skyline answers for (not a zone it only holds some names of
    /// and passes the others on).
    #[inline(always)]
    pub(crate) fn authority(&mut self, zone: &Zone) {
        if zone.kind != ZoneKind::Reverse {
            self.flags |= flags::AA;
        }
    }

    #[inline(always)]
    pub(crate) fn new(query: &'a [u8], q: &Query, ctx: &'a Context<'a>, out: &'a mut [u8]) -> Responder<'a> {
        let size = size_limit(ctx.transport, q.edns);
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
            ede: None,
            has_opt: q.edns.is_some(),
            cookie: None,
            question_end: 0,
            notes: 0,
        }
    }

    /// Checks the query's COOKIE option and puts the cookie to answer with in the reply's OPT;
    /// `None` when this server does not do cookies.
    #[cold]
    #[inline(never)]
    pub(crate) fn cookie(&mut self, at: CookieAt) -> Option<Verdict> {
        let secrets = self.ctx.cookies?;
        let mut reply = [0u8; COOKIE_LEN];
        let verdict = secrets.check(
            at.data(self.query),
            self.ctx.client.ip(),
            cookie::timestamp(self.ctx.now),
            &mut reply,
        );
        self.limit = self.limit.saturating_sub(COOKIE_OPT_LEN);
        self.cookie = Some(reply);
        if verdict.is_valid() {
            self.notes |= note::VALID_COOKIE;
        }
        Some(verdict)
    }

    /// Whether the reply carries a cookie.
    pub(crate) fn has_cookie(&self) -> bool {
        self.cookie.is_some()
    }

    /// Records in the answer section so far.
    pub(crate) fn answers(&self) -> u16 {
        self.counts[1]
    }

    pub(crate) fn set_rcode(&mut self, code: u16) {
        self.rcode = code;
    }

    /// Adds an Extended DNS Error (RFC 8914) to the reply's OPT, if it has one.
    pub(crate) fn set_ede(&mut self, code: u16) {
        if self.has_opt && self.ede.is_none() {
            self.limit = self.limit.saturating_sub(EDE_LEN);
            self.ede = Some(code);
        }
    }

    /// Writes a cached (or just received) upstream answer after the question. Compression
    /// pointers in it stay valid because the question has the upstream's length (see
    /// [`crate::cache::Entry`]). AA stays clear: a cache is not an authority.
    #[inline(always)]
    pub(crate) fn cached(&mut self, q: &Query, entry: &Entry, age: Age) {
        self.rcode = entry.rcode();
        let asked_for_ad = q.flags & flags::AD != 0 || q.edns.is_some_and(|e| e.dnssec_ok);
        if entry.authentic() && asked_for_ad {
            self.flags |= flags::AD;
        }
        if age == Age::Stale {
            self.set_ede(if entry.rcode() == rcode::NXDOMAIN {
                ede::STALE_NXDOMAIN
            } else {
                ede::STALE_ANSWER
            });
        }
        let room = self.room();
        let (start, counts) = (self.pos, [self.counts[1], self.counts[2], self.counts[3]]);
        let written = entry.write(&mut self.out[self.pos..], room, age);
        self.pos += written.len;
        for (count, n) in self.counts[1..].iter_mut().zip(written.counts) {
            *count += n;
        }
        if written.truncated {
            match self.ctx.transport {
                Transport::Udp => self.flags |= flags::TC,
                // A TCP client cannot retry a truncated answer anywhere bigger: as for an
                // authoritative answer too large for TCP (see `does_not_fit`), SERVFAIL.
                Transport::Tcp => {
                    self.pos = start;
                    self.counts[1..].copy_from_slice(&counts);
                    self.flags &= !flags::AD;
                    self.rcode = rcode::SERVFAIL;
                }
            }
        }
    }

    /// Appends the records an upstream gave for `target` to the answer section: for the last
    /// CNAME's target of a chain (`flattened` is `None`) its whole answer, under its own owners;
    /// for a flattened answer, the records of `qtype` alone, owned by the query name and living
    /// at most the TTL `flattened` gives. Only a NOERROR answer completes (SkyDNS treats any
    /// other rcode as a failed lookup). What does not fit is left out: over UDP with TC, so that
    /// the client asks again over TCP; over TCP the answer stands as it is.
    pub(crate) fn alias(&mut self, target: &LowerName, qtype: u16, entry: &Entry, age: Age, flattened: Option<u32>) {
        if entry.rcode() != rcode::NOERROR {
            return;
        }
        if age == Age::Stale {
            self.set_ede(ede::STALE_ANSWER);
        }
        let how = match flattened {
            Some(ttl) => Relocation::Flattened {
                owner: &QUESTION_NAME,
                rtype: qtype,
                ttl,
            },
            None => Relocation::Whole,
        };
        if let Some(n) = self.append(target, qtype, entry, age, how) {
            self.counts[1] += n;
        } else if self.ctx.transport == Transport::Udp {
            self.flags |= flags::TC;
        }
    }

    /// Appends the address records an upstream gave for `target` to the additional section,
    /// if they fit (additional data is never worth TC).
    pub(crate) fn glue(&mut self, target: &LowerName, qtype: u16, entry: &Entry, age: Age, skip_cnames: bool) {
        if entry.rcode() != rcode::NOERROR {
            return;
        }
        let how = if skip_cnames {
            Relocation::WithoutCnames
        } else {
            Relocation::Whole
        };
        if let Some(n) = self.append(target, qtype, entry, age, how) {
            self.counts[3] += n;
        }
    }

    /// Writes the answer records of `entry`, the upstream's answer to `target` and `qtype`,
    /// that `how` keeps at the end of the reply; returns how many, or `None` when they do not
    /// all fit.
    pub(crate) fn append(
        &mut self,
        target: &LowerName,
        qtype: u16,
        entry: &Entry,
        age: Age,
        how: Relocation<'_>,
    ) -> Option<u16> {
        let mut question = [0u8; MAX_NAME_LEN + 4];
        let name = target.wire();
        question[..name.len()].copy_from_slice(name);
        question[name.len()..name.len() + 2].copy_from_slice(&qtype.to_be_bytes());
        question[name.len() + 2..name.len() + 4].copy_from_slice(&class::IN.to_be_bytes());
        let room = self.room();
        let (len, n) =
            entry.write_answers_elsewhere(&question[..name.len() + 4], &mut self.out[self.pos..], room, age, how)?;
        self.pos += len;
        Some(n)
    }

    /// Writes `<question name> CNAME <target>` (its TTL set later by [`Self::cname_ttl`]) and
    /// returns the offset of `target` in the reply, where the records of the name found in a
    /// search list are pointed ([`Self::relocate`]); `None` when it does not fit.
    pub(crate) fn search_cname(&mut self, target: &[u8]) -> Option<u16> {
        if 12 + target.len() > self.room() {
            return None;
        }
        self.put(&QUESTION_NAME);
        self.put(&rtype::CNAME.to_be_bytes());
        self.put(&class::IN.to_be_bytes());
        self.put(&0u32.to_be_bytes());
        self.put(&(target.len() as u16).to_be_bytes());
        let at = self.pos as u16;
        self.put(target);
        self.counts[1] += 1;
        Some(at)
    }

    /// Points every record written since `mark`, compiled for a question name of `len` bytes,
    /// at that name written at `to` instead ([`Self::search_cname`]).
    pub(crate) fn relocate(&mut self, (start, counts): (usize, [u16; 4]), len: usize, to: u16) {
        let written = self.counts[1..]
            .iter()
            .zip(&counts[1..])
            .map(|(now, then)| now - then)
            .sum::<u16>();
        relocate_question(&mut self.out[start..self.pos], usize::from(written), len, to);
    }

    /// Gives the CNAME written at `cname` the TTL of the record written right after it, as
    /// CoreDNS's autopath does.
    pub(crate) fn cname_ttl(&mut self, cname: usize) {
        let Some(next) = self.out.get(cname + 10..cname + 12) else {
            return;
        };
        let first = cname + 12 + usize::from(u16::from_be_bytes([next[0], next[1]]));
        let Ok(fixed) = skip_name(&self.out[..self.pos], first) else {
            return;
        };
        if let Some(ttl) = self.out.get(fixed + 4..fixed + 8) {
            let ttl: [u8; 4] = [ttl[0], ttl[1], ttl[2], ttl[3]];
            self.out[cname + 6..cname + 10].copy_from_slice(&ttl);
        }
    }

    /// Answers with an upstream's answer to `target`, the name a search list found beyond the
    /// zones (`entry`, NOERROR): a CNAME to `target`, then the upstream's answer records under
    /// their own names; an answer without records is NODATA without the CNAME. Not
    /// authoritative. `false` when the CNAME does not fit, which leaves the reply as it was.
    pub(crate) fn searched_beyond(&mut self, target: &LowerName, qtype: u16, entry: &Entry, age: Age) -> bool {
        let mark = self.mark();
        if self.search_cname(target.wire()).is_none() {
            return false;
        }
        self.flags &= !flags::AA;
        if age == Age::Stale {
            self.set_ede(ede::STALE_ANSWER);
        }
        match self.append(target, qtype, entry, age, Relocation::Whole) {
            Some(0) => self.rewind(mark),
            Some(n) => {
                self.counts[1] += n;
                self.cname_ttl(mark.0);
            }
            None => {
                self.rewind(mark);
                self.does_not_fit();
            }
        }
        self.note_searched();
        true
    }

    /// SERVFAIL, saying why with the Extended DNS Error `ede`.
    pub(crate) fn fail(&mut self, ede: u16) {
        self.rcode = rcode::SERVFAIL;
        self.set_ede(ede);
    }

    /// Marks the answer as one from further down a search list (autopath), counted apart.
    pub(crate) fn note_searched(&mut self) {
        self.notes |= note::SEARCHED;
    }

    pub(crate) fn room(&self) -> usize {
        self.limit.saturating_sub(self.pos)
    }

    #[inline(always)]
    pub(crate) fn put(&mut self, bytes: &[u8]) {
        copy_short(&mut self.out[self.pos..], bytes);
        self.pos += bytes.len();
    }

    /// Where the sections stand now, to [`Self::rewind`] to.
    pub(crate) fn mark(&self) -> (usize, [u16; 4]) {
        (self.pos, self.counts)
    }

    /// Takes back every record written since `mark`.
    pub(crate) fn rewind(&mut self, (pos, counts): (usize, [u16; 4])) {
        self.pos = pos;
        self.counts = counts;
    }

    /// Copies the client's question byte-exact (0x20 case echo). A question whose name used
    /// compression is rewritten from the folded name so that offsets into it stay valid.
    #[inline(always)]
    pub(crate) fn copy_question(&mut self, q: &Query, qname: &LowerName) {
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
        self.question_end = self.pos as u16;
    }

    #[inline(always)]
    pub(crate) fn compiled(&mut self, compiled: &CompiledAnswer) {
        let Some(parts) = compiled.parts() else {
            return self.does_not_fit();
        };
        let records = parts.records;
        let whole = parts.whole;
        if records.len() <= self.room() {
            // Room for every record: the sets go in as compiled, both sections in one piece
            // unless a set of the answer rotates.
            if whole.rotates {
                let (answer, additional) = records.split_at(whole.answer_len);
                for span in parts.answer {
                    self.rotated(&answer[span.start as usize..span.end as usize], &span);
                }
                self.put(additional);
            } else {
                self.put(records);
            }
            self.counts[1] += whole.answer_records;
            self.counts[3] += whole.additional_records;
            return;
        }
        let answer_start = self.pos;
        for span in parts.answer {
            if span.len() > self.room() {
                if self.ctx.transport == Transport::Tcp {
                    // Fits no message after this question: nothing of it is sent.
                    self.pos = answer_start;
                    self.counts[1] = 0;
                }
                return self.does_not_fit();
            }
            self.rotated(&records[span.start as usize..span.end as usize], &span);
            self.counts[1] += span.count;
        }
        for span in parts.additional {
            if span.len() <= self.room() {
                self.put(&records[span.start as usize..span.end as usize]);
                self.counts[3] += span.count;
            }
        }
    }

    /// Copies `bytes`, the records of `span`, starting from the one this reply's rotation
    /// picks when the set rotates.
    #[inline(always)]
    fn rotated(&mut self, bytes: &[u8], span: &RrsetSpan) {
        if span.rotate_len > 0 {
            let cut = (self.ctx.rotation % span.count as u32) as usize * span.rotate_len as usize;
            self.put(&bytes[cut..]);
            self.put(&bytes[..cut]);
        } else {
            self.put(bytes);
        }
    }

    /// Copies the RRsets of `qtype` that `compiled`, another name's answer, holds at its own
    /// name, as records of this reply's question name (they are owned by a pointer to the
    /// question), each TTL capped at `ttl`: the part of a flattened answer another zone of this
    /// server gives. What does not fit is left out, over UDP with TC.
    pub(crate) fn flattened(&mut self, compiled: &CompiledAnswer, qtype: u16, ttl: u32) {
        let Some(parts) = compiled.parts() else {
            return;
        };
        for span in parts.answer {
            let bytes = &parts.records[span.start as usize..span.end as usize];
            if bytes.get(..2) != Some(&QUESTION_NAME[..]) || bytes.get(2..4) != Some(&qtype.to_be_bytes()[..]) {
                continue;
            }
            if bytes.len() > self.room() {
                if self.ctx.transport == Transport::Udp {
                    self.flags |= flags::TC;
                }
                return;
            }
            let start = self.pos;
            self.put(bytes);
            let mut at = start;
            while at + 12 <= self.pos {
                let field = &mut self.out[at + 6..at + 10];
                let capped = u32::from_be_bytes([field[0], field[1], field[2], field[3]]).min(ttl);
                field.copy_from_slice(&capped.to_be_bytes());
                at += 12 + usize::from(u16::from_be_bytes([self.out[at + 10], self.out[at + 11]]));
            }
            self.counts[1] += span.count;
        }
    }

    /// Copies signed records (`crate::dnssec::rrsets`) as [`Self::compiled`] copies an answer: an
    /// answer or authority RRset that does not fit is [`Self::does_not_fit`], an additional one
    /// is left out.
    pub(crate) fn signed(&mut self, records: &Records) {
        let mut start = 0;
        for chunk in records.chunks.iter() {
            let end = chunk.end as usize;
            let bytes = &records.bytes[start..end];
            start = end;
            let section = match chunk.section {
                Section::Answer => 1,
                Section::Authority => 2,
                Section::Additional => 3,
            };
            if bytes.len() > self.room() {
                if section == 3 {
                    continue;
                }
                return self.does_not_fit();
            }
            self.put(bytes);
            self.counts[section] += chunk.count;
        }
    }

    /// [`Self::compiled`] for a question that spells the name the answer was compiled for
    /// shorter, by `shift`.
    pub(crate) fn respelled(&mut self, compiled: &CompiledAnswer, shift: Shift) {
        let (start, before) = (self.pos, self.counts[1] + self.counts[3]);
        self.compiled(compiled);
        let count = self.counts[1] + self.counts[3] - before;
        shift_pointers(&mut self.out[start..self.pos], usize::from(count), shift);
    }

    /// Records [`crate::snapshot::kubernetes::Host::write`] wrote, copied as [`Self::compiled`] copies an answer of one
    /// RRset a section.
    pub(crate) fn written(&mut self, records: &[u8], written: Written) {
        let answer = &records[..written.answer_len];
        if answer.len() > self.room() {
            if self.ctx.transport == Transport::Tcp {
                self.counts[1] = 0;
            }
            return self.does_not_fit();
        }
        self.put(answer);
        self.counts[1] += written.answer_count;
        let additional = &records[written.answer_len..written.len];
        if written.additional_count > 0 && additional.len() <= self.room() {
            self.put(additional);
            self.counts[3] += written.additional_count;
        }
    }

    /// Records already in wire form for section `section` (1 answer, 2 authority, 3
    /// additional), `count` of them; an answer or authority section that does not fit is
    /// [`Self::does_not_fit`], an additional one is left out.
    pub(crate) fn records(&mut self, section: usize, records: &[u8], count: u16) {
        if records.len() > self.room() {
            if section < 3 {
                self.does_not_fit();
            }
            return;
        }
        self.put(records);
        self.counts[section] += count;
    }

    /// An answer section too large for the reply: TC over UDP, so that the client retries over TCP;
    /// over TCP there is no larger transport, so SERVFAIL (docs/robustness.md, "DNS over TCP and
    /// abuse").
    pub(crate) fn does_not_fit(&mut self) {
        match self.ctx.transport {
            Transport::Udp => self.flags |= flags::TC,
            Transport::Tcp => {
                self.flags &= !flags::AA;
                self.rcode = rcode::SERVFAIL;
            }
        }
    }

    /// NXDOMAIN or NODATA, with the zone's SOA in the authority section (RFC 2308).
    pub(crate) fn negative(&mut self, code: u16, qname: &LowerName, zone: &Zone) {
        self.rcode = code;
        let Some(soa) = zone.soa_rdata.as_deref() else { return };
        if 12 + soa.len() > self.room() {
            self.flags |= flags::TC;
            return;
        }
        let apex_at = qname.label_count() - zone.apex_labels();
        let owner = 0xC000 | (HEADER_LEN + qname.label_start(apex_at)) as u16;
        if zone.apex_labels() == 0 {
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

    pub(crate) fn hinfo(&mut self, ttl: u32) {
        self.record_at_query(rtype::HINFO, class::IN, ttl, &[RFC8482_HINFO]);
    }

    pub(crate) fn txt_chaos(&mut self, text: &[u8]) {
        let text = &text[..text.len().min(255)];
        self.record_at_query(rtype::TXT, class::CH, 0, &[&[text.len() as u8], text]);
    }

    /// [`Self::record_at_query`] for one A or AAAA record, as one fixed-size write: the
    /// answer of most leaves.
    #[inline(always)]
    pub(crate) fn address_at_query<const N: usize>(&mut self, rtype_: u16, ttl: u32, address: [u8; N]) {
        const MAX: usize = 12 + 16;
        if 12 + N > self.room() {
            self.flags |= flags::TC;
            return;
        }
        let mut rr = [0u8; MAX];
        rr[0] = 0xC0;
        rr[1] = HEADER_LEN as u8;
        rr[2..4].copy_from_slice(&rtype_.to_be_bytes());
        rr[4..6].copy_from_slice(&class::IN.to_be_bytes());
        rr[6..10].copy_from_slice(&ttl.to_be_bytes());
        rr[10..12].copy_from_slice(&(N as u16).to_be_bytes());
        rr[12..12 + N].copy_from_slice(&address);
        self.put(&rr[..12 + N]);
        self.counts[1] += 1;
    }

    pub(crate) fn record_at_query(&mut self, rtype_: u16, rclass: u16, ttl: u32, rdata: &[&[u8]]) {
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

    #[inline(always)]
    pub(crate) fn finish(self, q: &Query) -> Reply {
        let Responder {
            out,
            mut pos,
            flags: fl,
            rcode: code,
            mut counts,
            ctx,
            opt_keepalive,
            ede: ede_code,
            cookie,
            question_end,
            notes,
            ..
        } = self;
        if let Some(edns) = q.edns {
            let ext = (code >> 4) as u8;
            let do_bit = if edns.dnssec_ok { 0x80 } else { 0 };
            let mut opt = [0u8; OPT_LEN + KEEPALIVE_LEN + EDE_LEN + COOKIE_OPT_LEN];
            opt[1..3].copy_from_slice(&rtype::OPT.to_be_bytes());
            opt[3..5].copy_from_slice(&ADVERTISED_UDP_LEN.to_be_bytes());
            opt[5] = ext;
            opt[7] = do_bit;
            let mut len = OPT_LEN;
            if opt_keepalive {
                opt[len..len + 2].copy_from_slice(&option::TCP_KEEPALIVE.to_be_bytes());
                opt[len + 2..len + 4].copy_from_slice(&2u16.to_be_bytes());
                opt[len + 4..len + 6].copy_from_slice(&ctx.keepalive.to_be_bytes());
                len += KEEPALIVE_LEN;
            }
            if let Some(info) = ede_code {
                opt[len..len + 2].copy_from_slice(&option::EDE.to_be_bytes());
                opt[len + 2..len + 4].copy_from_slice(&2u16.to_be_bytes());
                opt[len + 4..len + 6].copy_from_slice(&info.to_be_bytes());
                len += EDE_LEN;
            }
            if let Some(data) = cookie {
                opt[len..len + 2].copy_from_slice(&option::COOKIE.to_be_bytes());
                opt[len + 2..len + 4].copy_from_slice(&(COOKIE_LEN as u16).to_be_bytes());
                opt[len + 4..len + COOKIE_OPT_LEN].copy_from_slice(&data);
                len += COOKIE_OPT_LEN;
            }
            opt[9..11].copy_from_slice(&((len - OPT_LEN) as u16).to_be_bytes());
            out[pos..pos + len].copy_from_slice(&opt[..len]);
            pos += len;
            counts[3] += 1;
        }
        // The header is put together on the stack and copied at once: one bounds check, not six.
        let mut header = [0u8; HEADER_LEN];
        header[0..2].copy_from_slice(&q.id.to_be_bytes());
        header[2..4].copy_from_slice(&(fl | (code & 0x000F)).to_be_bytes());
        for (i, c) in counts.iter().enumerate() {
            header[4 + 2 * i..6 + 2 * i].copy_from_slice(&c.to_be_bytes());
        }
        out[..HEADER_LEN].copy_from_slice(&header);
        let notes = notes
            | note::when(fl & flags::TC != 0, note::TRUNCATED)
            | note::when(q.ancount != 0 || q.nscount != 0, note::IGNORED_RECORDS)
            | note::when(q.trailing, note::TRAILING);
        let qtype = match q.question {
            Some(question) if question_end != 0 => question.qtype,
            _ => 0,
        };
        Reply::new(pos, code, question_end, qtype, notes)
    }
}
