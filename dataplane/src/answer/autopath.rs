//! CoreDNS's `autopath @kubernetes` (docs/kubernetes.md, "Autopath"): a pod asking a name under
//! the first domain of its search list (`<ns>.svc.<zone>`) that does not exist gets, at that
//! first question, the answer of the first name of the rest of its list that exists, with a
//! CNAME from the name it asked, instead of the NXDOMAIN its resolver would follow with the
//! next question. Reached only from a denial in a cluster zone with autopath on, so that no
//! other answer pays for it; it allocates nothing.

use super::{found, Outside, Responder};
use crate::snapshot::kubernetes::Autopath;
use crate::snapshot::{Found, Snapshot, Zone};
use crate::wire::types::{rcode, MAX_NAME_LEN};
use crate::wire::{LowerName, Query, Question};

/// The label a search list's second domain puts before the zone, in wire form.
const SVC: &[u8] = b"\x03svc";

/// Answers `qname`, which the cluster zone `zone` denies, with the answer of the first name of
/// the client pod's search list after its first domain that is not denied: `svc.<zone>`,
/// `<zone>`, the host's search domains, then the bare name, each asked as `<base>.<domain>`
/// where `<base>` is `qname` without `<ns>.svc.<zone>`. Names of the zones answer at once;
/// a name outside them is answered by `outside` (from the cache, or forwarded while the client
/// waits). `None` when the search does not apply (a client that is no pod, a name not under
/// its namespace's domain) or finds nothing: the name is then denied as it would be without it.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(super) fn search<O: Outside>(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    question: Question,
    zone: &Zone,
    snapshot: &Snapshot,
    autopath: &Autopath,
    outside: &mut O,
) -> Option<O::Flow> {
    if !autopath.serves(&zone.apex) {
        return None;
    }
    let namespace = autopath.namespace(r.ctx.client.ip())?;
    let base = base(qname, namespace, zone.apex.wire())?;
    let apex = zone.apex.wire();
    let cluster = [(SVC, apex), (&b""[..], apex)];
    let host = autopath.search().iter().map(|domain| (&b""[..], domain.wire()));
    let bare = [(&b""[..], &b"\x00"[..])];
    for (label, domain) in cluster.into_iter().chain(host).chain(bare) {
        let mut wire = [0u8; MAX_NAME_LEN];
        let len = base.len() + label.len() + domain.len();
        if len > MAX_NAME_LEN {
            continue;
        }
        wire[..base.len()].copy_from_slice(base);
        wire[base.len()..base.len() + label.len()].copy_from_slice(label);
        wire[base.len() + label.len()..len].copy_from_slice(domain);
        let Ok(candidate) = LowerName::from_wire(&wire[..len]) else {
            continue;
        };
        match snapshot.find(&candidate) {
            Found::Missing(_) => {}
            Found::Outside => {
                if let Some(flow) = outside.searched(r, q, question, &candidate) {
                    return Some(flow);
                }
            }
            other => return within(r, q, qname, question, &candidate, snapshot, outside, other),
        }
    }
    None
}

/// The labels of `qname` before `<namespace>.svc.<apex>` (`namespace` a wire label), in wire
/// form without the root; `None` when `qname` is not below that domain.
fn base<'q>(qname: &'q LowerName, namespace: &[u8], apex: &[u8]) -> Option<&'q [u8]> {
    let wire = qname.wire();
    let suffix = namespace.len() + SVC.len() + apex.len();
    let cut = wire.len().checked_sub(suffix).filter(|&cut| cut > 0)?;
    let (base, domain) = wire.split_at(cut);
    let at_label = (0..qname.label_count()).any(|i| qname.label_start(i) == cut);
    let (ns, rest) = domain.split_at(namespace.len());
    (at_label && ns == namespace && rest.starts_with(SVC) && &rest[SVC.len()..] == apex).then_some(base)
}

/// Answers with `candidate`, a name of the zones that exists (or whose zone cannot say yet): a
/// CNAME from the question's name to it, then its answer as it would be given to a question
/// for it, the records pointed at the CNAME's target. An answer without records is the
/// candidate's NODATA, without the CNAME, as CoreDNS's autopath adds one only before records.
#[allow(clippy::too_many_arguments)]
fn within<O: Outside>(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    question: Question,
    candidate: &LowerName,
    snapshot: &Snapshot,
    outside: &mut O,
    at: Found<'_>,
) -> Option<O::Flow> {
    let mark = r.mark();
    let target = r.search_cname(candidate.wire())?;
    let after = r.mark();
    let flow = found(r, q, candidate, question, snapshot, outside, at);
    r.relocate(after, candidate.wire().len(), target);
    r.note_searched();
    if r.answers() > mark.1[1] + 1 {
        r.cname_ttl(mark.0);
        return Some(flow);
    }
    r.rewind(mark);
    if r.rcode == rcode::NOERROR {
        if let Some(zone) = zone_of(at) {
            r.negative(rcode::NOERROR, qname, zone);
        }
    }
    Some(flow)
}

/// The zone of what was found.
fn zone_of(found: Found<'_>) -> Option<&Zone> {
    match found {
        Found::Leaf(_, zone)
        | Found::Syncing(zone)
        | Found::Wildcard(zone)
        | Found::Node(_, zone)
        | Found::Host(_, zone)
        | Found::PortName(_, _, zone)
        | Found::Echo(_, zone)
        | Found::Missing(zone) => Some(zone),
        Found::Outside => None,
    }
}
