//! Reverse names from `/<prefix>/arpa/...` (docs/skydns-semantics.md, "Reverse names"): a PTR
//! answer for a key that holds exactly one record and has nothing below it, or for a directory,
//! from its `.self` key. Anything else (a directory, several records, no host) is not answered, so
//! that the query can be passed on like any name skyline does not hold. A view map answers each
//! class of clients from its list, when that list is one record with a name host; a class whose
//! list holds several records is passed on, as the SkyDNS variant's `ReverseRecord` refuses them.

use super::entry::{Entry, Host};
use super::key::{is_below, name_of};
use super::section::{answer_set, Rr};
use super::select::{expand, Audience};
use super::service::Config;
use crate::snapshot::rrset::{CompiledAnswer, Rdata};
use crate::snapshot::views::{ClassAnswers, Prefix, Views};
use crate::snapshot::{Below, Node, Slot};
use crate::wire::{LowerName, Name};
use std::collections::BTreeSet;

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
            if let Some(node) = viewed_ptr(config, e, &qname, zone_of(owner)) {
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

/// The node of the reverse key `entry`, which holds a view map, at `qname` in the zone `zone`:
/// each class of clients (those of each prefix of the map, and those none holds) gets the PTR of
/// its list when that list is one record with a name host, nothing when it is empty or one
/// record without, and the name passed on when it holds several. `None` when no class gets a
/// PTR and none is passed on: the name is then not held at all.
fn viewed_ptr(config: &Config, entry: &Entry, qname: &LowerName, zone: u16) -> Option<Node> {
    let mut audience = Audience::default();
    let class = |audience: &mut Audience| {
        let mut list = Vec::new();
        expand(entry, audience, &mut list);
        let mut answers: ClassAnswers = [const { None }; Slot::COUNT];
        if let [record] = list[..] {
            answers[Slot::Ptr as usize] = ptr(config, record, qname);
        }
        (answers, list.len() > 1)
    };
    let (others, others_passed_on) = class(&mut audience);
    let prefixes: BTreeSet<Prefix> = audience.seen.drain(..).collect();
    let mut classes = Vec::with_capacity(prefixes.len());
    let mut passed_on = BTreeSet::new();
    for prefix in prefixes {
        audience.class = Some(prefix);
        let (answers, passed) = class(&mut audience);
        if passed {
            passed_on.insert(prefix);
        }
        classes.push((prefix, answers));
    }
    let ptr_of = |answers: &ClassAnswers| answers[Slot::Ptr as usize].clone();
    let apart = classes.iter().any(|(_, answers)| ptr_of(answers) != ptr_of(&others));
    if !apart && !others_passed_on && passed_on.is_empty() {
        let answer = ptr_of(&others)?;
        return Some(Node::with_answers(zone, Below::Nothing, [(Slot::Ptr, answer)]));
    }
    let shared = match apart {
        true => None,
        false => ptr_of(&others).map(|answer| (Slot::Ptr, answer)),
    };
    let slots: &[Slot] = if apart { &[Slot::Ptr] } else { &[] };
    let views = Views::new(slots, others, classes).passing_on(|class| match class {
        None => others_passed_on,
        Some(prefix) => passed_on.contains(&prefix),
    });
    Some(Node::with_answers(zone, Below::Nothing, shared).with_views(views))
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
