//! Answers to queries with DO set in the signed SkyDNS domain (docs/dnssec.md): the signed
//! answers and denials the snapshot holds, copied as unsigned answers are; only a name that
//! does not exist costs a signature, made per query name within the worker's budget.

use super::{completable, viewed, Outside, Responder, Transport};
use crate::dnssec::denial::{self, Covered};
use crate::dnssec::Signed;
use crate::snapshot::{Found, Slot, Snapshot};
use crate::wire::types::{flags, rcode, rtype};
use crate::wire::{LowerName, Query, Question};

/// Answers `question` from `signed` when its name lies in the signed zone; `None` leaves the
/// query to the unsigned path (names outside the zone, query wildcards, names whose answers
/// depend on the client), which then answers as without DO.
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
            if node.has_views() {
                return None;
            }
            let name = signed.name(qname)?;
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
            let compiled = Slot::for_qtype(question.qtype)
                .and_then(|slot| node.answer(slot).or_else(|| viewed(node, slot, r.ctx)));
            if let Some(beyond) = compiled
                .and_then(|c| c.beyond())
                .filter(|_| completable(r, zone, snapshot))
            {
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
            nxdomain(r, qname, signed);
            Some(O::Flow::default())
        }
        _ => None,
    }
}

/// NODATA: the SOA and the NSEC3 record matching the name, whose types lack the one asked.
fn nodata(r: &mut Responder<'_>, signed: &Signed, matching: &crate::dnssec::zone::Records) {
    r.set_rcode(rcode::NOERROR);
    r.signed(signed.soa());
    r.signed(matching);
}

/// NXDOMAIN with the closest-encloser proof of RFC 5155 §7.2.1: the NSEC3 record matching the
/// closest encloser, one covering the next closer name, one covering the wildcard at the
/// closest encloser; each "white lie" holds only the hash it is about.
fn nxdomain(r: &mut Responder<'_>, qname: &LowerName, signed: &Signed) {
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
    match denial::covering(signed, next_closer, |records| r.signed(records)) {
        Covered::Written => {}
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
            return;
        }
        Covered::Failed => {
            r.rewind(mark);
            r.flags &= !flags::AA;
            r.set_rcode(rcode::SERVFAIL);
            return;
        }
    }
    r.signed(encloser.wildcard());
}
