//! Answers to queries with DO set in the signed SkyDNS domain (docs/dnssec.md): the signed
//! answers and denials the snapshot holds, copied as unsigned answers are; only a name that
//! does not exist and a query wildcard cost signatures, made per query name within the
//! worker's budget. The cache, the budget and the room a wildcard answer is made in are the
//! caller's [`Signing`], lent in the [`Context`]; the time is the context's too.
//!
//! The signer of the snapshot's zone (`crate::signer`, at build time) finds what to sign by
//! answering each name as the zones alone answer it, [`unsigned_sets`]: the query-time half of
//! DNSSEC and the build-time half read the zone through this one answer path.

use super::{answer_inside, answer_of, completable, Context, Outcome, Outside, Responder, Transport};
use crate::dnssec::denial::{Covered, Signing};
use crate::dnssec::nsec3::{self, HASH_LEN};
use crate::dnssec::records::{self, Set};
use crate::dnssec::rrsets::{Records, RrsetSigner, Section};
use crate::dnssec::rrsig::{Validity, RRSIG};
use crate::dnssec::SigningKey;
use crate::snapshot::rrset::Beyond;
use crate::snapshot::{Found, Signed, Slot, Snapshot, Zone};
use crate::wire::types::{class, flags, rcode, rtype, HEADER_LEN, MAX_NAME_LEN};
use crate::wire::{LowerName, Query, Question};
use ring::digest::SHA1_FOR_LEGACY_USE_ONLY;
use std::net::IpAddr;

/// Answers `question` from `signed` when its name lies in the signed zone; `None` leaves the
/// query to the unsigned path (names outside the zone), which then answers as without DO.
#[cold]
#[inline(never)]
pub(super) fn respond<O: Outside>(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    question: Question,
    snapshot: &Snapshot,
    signed: &Signed,
    outside: &mut O,
) -> Option<O::Flow> {
    let found = snapshot.find(qname);
    match found {
        Found::Node(node, zone) if zone.apex == *signed.apex() => {
            let name = signed.name(qname)?;
            let name = match node.has_views().then(|| node.views()).flatten() {
                Some(views) => name.for_class(views.class(r.ctx.client.ip())),
                None => name,
            };
            r.flags |= flags::AA;
            let records = match question.qtype {
                rtype::ANY => name.first(),
                qtype => name.answer(qtype),
            };
            let Some(records) = records else {
                nodata(r, signed, name.matching());
                return Some(O::Flow::default());
            };
            let mark = r.mark();
            r.signed(records);
            let compiled = Slot::for_qtype(question.qtype).and_then(|slot| answer_of(node, slot, r.ctx));
            if let Some(beyond) = compiled
                .and_then(|c| c.beyond())
                .filter(|_| completable(r, zone, snapshot))
            {
                // Records from outside the zone cannot join a signed RRset of the query name: a
                // signed flattened answer is what the zone alone gives (docs/dnssec.md).
                let unflattened;
                let beyond = if beyond.flattened.is_empty() {
                    beyond
                } else {
                    unflattened = Beyond {
                        flattened: Box::default(),
                        ..beyond.clone()
                    };
                    &unflattened
                };
                match outside.complete(r, q, question, beyond, snapshot) {
                    Some(flow) => return Some(flow),
                    None => {
                        r.rewind(mark);
                        nodata(r, signed, name.matching());
                    }
                }
            }
            Some(O::Flow::default())
        }
        Found::Leaf(_, zone) if zone.apex == *signed.apex() => {
            let name = signed.name(qname)?;
            r.flags |= flags::AA;
            let records = match question.qtype {
                rtype::ANY => name.first(),
                qtype => name.answer(qtype),
            };
            match records {
                Some(records) => r.signed(records),
                None => nodata(r, signed, name.matching()),
            }
            Some(O::Flow::default())
        }
        Found::Missing(zone) if zone.apex == *signed.apex() => {
            r.flags |= flags::AA;
            lend(r, |r, signing| nxdomain(r, qname, signed, signing));
            Some(O::Flow::default())
        }
        Found::Wildcard(zone) if zone.apex == *signed.apex() => {
            r.flags |= flags::AA;
            lend(r, |r, signing| {
                wildcard(r, qname, question.qtype, snapshot, signed, signing)
            });
            Some(O::Flow::default())
        }
        _ => None,
    }
}

/// A query without DO for a type the snapshot's nodes have no slot for: at the apex of the
/// signed zone, DNSKEY and NSEC3PARAM are answered without RRSIG: a client without DO gets
/// DNSSEC records only when it asks for their type (RFC 3225 §3), and then as any RRset. True
/// when it wrote that answer; the other questions go on to NODATA. Only questions of a type
/// without a slot reach it, so the others pay nothing for it.
#[cold]
#[inline(never)]
pub(super) fn apex_unsigned(
    r: &mut Responder<'_>,
    qname: &LowerName,
    qtype: u16,
    zone: &Zone,
    snapshot: &Snapshot,
) -> bool {
    let Some(signed) = snapshot.dnssec.as_deref() else {
        return false;
    };
    if zone.apex != *signed.apex() || qname.label_count() != zone.apex_labels() {
        return false;
    }
    let Some(records) = signed.apex_unsigned(qtype) else {
        return false;
    };
    r.signed(records);
    true
}

/// NODATA: the SOA and the NSEC3 record matching the name, whose types lack the one asked.
fn nodata(r: &mut Responder<'_>, signed: &Signed, matching: &Records) {
    r.set_rcode(rcode::NOERROR);
    r.signed(signed.soa());
    r.signed(matching);
}

/// NXDOMAIN with the closest-encloser proof of RFC 5155 §7.2.1: the NSEC3 record matching the
/// closest encloser, one covering the next closer name, one covering the wildcard at the
/// closest encloser; each "white lie" holds only the hash it is about.
fn nxdomain(r: &mut Responder<'_>, qname: &LowerName, signed: &Signed, signing: &mut Signing) {
    r.set_rcode(rcode::NXDOMAIN);
    let labels = qname.label_count();
    let apex_labels = signed.apex().label_count();
    let Some((closest, encloser)) = (1..=labels.saturating_sub(apex_labels))
        .find_map(|skip| signed.name_wire(qname.suffix(skip)).map(|name| (skip, name)))
    else {
        return;
    };
    let mark = r.mark();
    r.signed(signed.soa());
    r.signed(encloser.matching());
    let next_closer = qname.suffix(closest - 1);
    let now = r.ctx.now;
    let covered = signing.covering(
        signed.dnssec(),
        signed.apex(),
        signed.negative_ttl(),
        next_closer,
        now,
        |records| r.signed(records),
    );
    if unsigned(r, covered, mark) {
        return;
    }
    r.signed(encloser.wildcard());
}

/// Takes back what was written since `mark` and says why, when the records a reply needed
/// signed per query name were not `covered`; true then.
fn unsigned(r: &mut Responder<'_>, covered: Covered, mark: (usize, [u16; 4])) -> bool {
    match covered {
        Covered::Written => return false,
        Covered::OverBudget => {
            // docs/dnssec.md, "Cost": UDP asks the client to come back over TCP, where each
            // query costs it a connection; TCP gets SERVFAIL.
            r.rewind(mark);
            match r.ctx.transport {
                Transport::Udp => {
                    r.set_rcode(rcode::NOERROR);
                    r.flags |= flags::TC;
                }
                Transport::Tcp => {
                    r.flags &= !flags::AA;
                    r.set_rcode(rcode::SERVFAIL);
                }
            }
        }
        Covered::Failed => {
            r.rewind(mark);
            r.flags &= !flags::AA;
            r.set_rcode(rcode::SERVFAIL);
        }
    }
    true
}

/// Runs `answer` with the caller's [`Signing`], or with a fresh one, kept for this query alone,
/// when the context lends none. The caller's is borrowed for this one query: were it borrowed
/// already (an answer inside an answer that signs), nothing is signed and the query gets
/// SERVFAIL.
fn lend(r: &mut Responder<'_>, answer: impl FnOnce(&mut Responder<'_>, &mut Signing)) {
    let Some(cell) = r.ctx.signing else {
        return answer(r, &mut Signing::new());
    };
    match cell.try_borrow_mut() {
        Ok(mut signing) => answer(r, &mut signing),
        Err(_) => {
            r.flags &= !flags::AA;
            r.set_rcode(rcode::SERVFAIL);
        }
    }
}

/// A query wildcard (`*` or `any` labels; docs/dnssec.md): answered as without DO, then that
/// answer's records signed, or a denial. Signed per query name and answer, as denials are, in
/// the worker's cache and within its budget; the unsigned answer is written in room
/// `signing` keeps.
#[cold]
#[inline(never)]
fn wildcard(
    r: &mut Responder<'_>,
    qname: &LowerName,
    qtype: u16,
    snapshot: &Snapshot,
    signed: &Signed,
    signing: &mut Signing,
) {
    let mut out = signing.take_unsigned();
    signed_wildcard(r, qname, qtype, snapshot, signed, signing, &mut out);
    signing.put_back(out);
}

/// [`wildcard`] with the room `out` for the unsigned reply, taken from `signing`.
fn signed_wildcard(
    r: &mut Responder<'_>,
    qname: &LowerName,
    qtype: u16,
    snapshot: &Snapshot,
    signed: &Signed,
    signing: &mut Signing,
    out: &mut [u8],
) {
    let client = r.ctx.client.ip();
    let Some(len) = unsigned_reply(snapshot, qname.wire(), qtype, client, out) else {
        r.flags &= !flags::AA;
        return r.set_rcode(rcode::SERVFAIL);
    };
    let msg = &out[..len];
    match u16::from(msg[3] & 0x0F) {
        rcode::NOERROR => {}
        rcode::NXDOMAIN => return nxdomain(r, qname, signed, signing),
        code => return r.set_rcode(code),
    }
    // The reply less its ID (the flags hold its rcode; the question, its name and type):
    // what the client gets signed. A leading 0xFF, a label no name starts with, keeps it
    // apart from the names whose NSEC3 hashes share the cache.
    let mut digest = ring::digest::Context::new(&SHA1_FOR_LEGACY_USE_ONLY);
    digest.update(&[0xFF]);
    digest.update(&msg[2..]);
    let mut id = [0u8; HASH_LEN];
    id.copy_from_slice(digest.finish().as_ref());
    let mark = r.mark();
    let make = |key: &SigningKey, validity| sign_query(snapshot, signed, key, validity, (qname, qtype, client), msg);
    let covered = signing.cached(signed.dnssec(), id, r.ctx.now, make, |records| r.signed(records));
    unsigned(r, covered, mark);
}

/// The signed records of the reply `msg` (made by [`unsigned_reply`]) to a query wildcard `qname`
/// (`*` or `any` labels) and `qtype` asked by `client`: its RRsets with their RRSIGs, or for a
/// NODATA reply the SOA and an NSEC3 record matching `qname` whose bitmap lists the types the
/// query wildcard answers that client. Signed per query name (see [`Signing::cached`]).
fn sign_query(
    snapshot: &Snapshot,
    signed: &Signed,
    key: &SigningKey,
    validity: Validity,
    question: (&LowerName, u16, IpAddr),
    msg: &[u8],
) -> Option<Records> {
    let (qname, qtype, client) = question;
    let zone = snapshot.zones.iter().find(|z| z.apex == signed.apex)?;
    let apex = signed.apex.wire().to_ascii_lowercase();
    let mut signer = RrsetSigner::new(key, apex, validity, zone.negative_ttl);
    if msg.get(6..8)? != [0, 0] {
        return signer.records(&records::sets(msg)?, qname.wire(), Section::Answer);
    }
    let mut types = vec![RRSIG];
    let mut out = vec![0; crate::wire::types::MAX_MESSAGE_LEN];
    for other in Slot::QTYPES.into_iter().filter(|t| *t != qtype) {
        let sets = unsigned_sets(snapshot, qname, other, client, &mut out);
        if sets.is_some_and(|sets| {
            sets.iter()
                .any(|s| s.section == 0 && s.owner == qname.wire() && s.rtype == other)
        }) {
            types.push(other);
        }
    }
    let hash = nsec3::hash_name(qname.wire());
    let (owner, rdata) = nsec3::matching(&hash, &nsec3::type_bitmap(&types));
    Some(signed.soa.then(&signer.nsec3(&owner, rdata)?))
}

/// The RRsets of the unsigned answer to `qname` and `qtype` asked by `client`, written in
/// `out`, or `None` when it has no answer records (NODATA, or an answer too large for any
/// message): what a name answers that the signer signs.
pub(crate) fn unsigned_sets(
    snapshot: &Snapshot,
    qname: &LowerName,
    qtype: u16,
    client: IpAddr,
    out: &mut [u8],
) -> Option<Vec<Set>> {
    let len = unsigned_reply(snapshot, qname.wire(), qtype, client, out)?;
    let msg = &out[..len];
    let ancount = u16::from_be_bytes([msg[6], msg[7]]);
    if msg[3] & 0x0F != 0 || ancount == 0 {
        return None;
    }
    records::sets(msg)
}

/// Writes in `out` the unsigned reply to `qname` (wire form) and `qtype` asked by `client` over
/// TCP, as the zones alone answer it; its length, or `None` when it was dropped or truncated.
fn unsigned_reply(snapshot: &Snapshot, qname: &[u8], qtype: u16, client: IpAddr, out: &mut [u8]) -> Option<usize> {
    let mut query = [0u8; HEADER_LEN + MAX_NAME_LEN + 4];
    query[5] = 1;
    let end = HEADER_LEN + qname.len();
    query.get_mut(HEADER_LEN..end)?.copy_from_slice(qname);
    query[end..end + 2].copy_from_slice(&qtype.to_be_bytes());
    query[end + 2..end + 4].copy_from_slice(&class::IN.to_be_bytes());
    let ctx = Context::new(Transport::Tcp).with_client(client);
    match answer_inside(&query[..end + 4], snapshot, &ctx, out) {
        Outcome::Reply(reply) if !reply.truncated() => Some(reply.len()),
        _ => None,
    }
}
