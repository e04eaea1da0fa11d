//! Reverse names from `/<prefix>/arpa/...` (docs/skydns-semantics.md, "Reverse names"): a PTR
//! answer for a key that holds exactly one record and has nothing below it, or for a directory,
//! from its `.self` key. Anything else (a directory, several records, no host) is not answered, so
//! that the query can be passed on like any name skyline does not hold. A view map answers each
//! class of clients from its list, when that list is one record with a name host.

use super::build::for_clients;
use super::entry::{Entry, Host};
use super::key::{is_below, name_of};
use super::section::{answer_set, Rr};
use super::select::{expand, Audience};
use super::service::Config;
use crate::snapshot::rrset::{CompiledAnswer, Rdata};
use crate::snapshot::{Below, Node, Slot};
use crate::wire::{LowerName, Name};

/// The nodes of the reverse records `records` (in key order); `zone_of` gives the index of the
/// zone a path belongs to. Records whose host is an address are logged and counted in `skipped`.
pub fn ptr_nodes(
    config: &Config,
    records: Vec<&Entry>,
    zone_of: impl Fn(&[u8]) -> u16,
    skipped: &mut usize,
) -> Vec<(Name, Node)> {
    let mut nodes = Vec::new();
    for (i, e) in records.iter().enumerate() {
        let path = e.path();
        let shares_key = |j: usize| records.get(j).is_some_and(|other| is_below(other.path(), path));
        let first = i == 0 || records[i - 1].path() != path;
        if !first || shares_key(i + 1) {
            continue;
        }
        let owner = e.owner();
        let name = name_of(owner);
        let Ok(qname) = LowerName::from_wire(name.wire()) else {
            continue;
        };
        if e.has_views() {
            let node = for_clients(&mut Audience::default(), zone_of(owner), |audience| {
                let mut list = Vec::new();
                expand(e, audience, &mut list);
                let answer = match list[..] {
                    [record] => ptr(config, record, &qname),
                    _ => None,
                };
                Some(answer.map(|answer| (Slot::Ptr, answer)).into_iter().collect())
            });
            if let Some(node) = node.filter(|node| node.answers().next().is_some() || node.views().is_some()) {
                nodes.push((name, node));
            }
            continue;
        }
        if let Host::V4(_) | Host::V6(_) = e.host() {
            let key = e.key(&config.path_prefix);
            tracing::warn!(%key, "skipping SkyDNS reverse record whose host is an address, not a name");
            *skipped += 1;
            continue;
        }
        if let Some(answer) = ptr(config, e, &qname) {
            nodes.push((
                name,
                Node::with_answers(zone_of(owner), Below::Nothing, [(Slot::Ptr, answer)]),
            ));
        }
    }
    nodes
}

/// The PTR answer of `record` at `qname`: its host, if a name.
fn ptr(config: &Config, record: &Entry, qname: &LowerName) -> Option<CompiledAnswer> {
    let Host::Name(target) = record.host() else {
        return None;
    };
    let ttl = record.ttl_or(config.ttl);
    let set = answer_set(
        vec![Rr::at_query(ttl, Rdata::Ptr(target))],
        Vec::new(),
        config.ttl,
        false,
    );
    Some(CompiledAnswer::compile(qname, &set))
}
