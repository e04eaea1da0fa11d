//! Reverse names from `/<prefix>/arpa/...` (docs/skydns-semantics.md, "Reverse names"): a PTR
//! answer for a key that holds exactly one record and has nothing below it. Anything else (a
//! directory, several records, no host) is not answered, so that the query can be passed on like
//! any name skyline does not hold.

use super::entry::{Entry, Host};
use super::key::{is_below, name_of};
use super::section::{answer_set, Rr};
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
        let target = match e.host() {
            Host::Name(target) => target,
            Host::None => continue,
            Host::V4(_) | Host::V6(_) => {
                let key = e.key(&config.path_prefix);
                tracing::warn!(%key, "skipping SkyDNS reverse record whose host is an address, not a name");
                *skipped += 1;
                continue;
            }
        };
        let ttl = e.ttl_or(config.ttl);
        let name = name_of(path);
        let Ok(qname) = LowerName::from_wire(name.wire()) else {
            continue;
        };
        let set = answer_set(
            vec![Rr::at_query(ttl, Rdata::Ptr(target))],
            Vec::new(),
            config.ttl,
            false,
        );
        let node = Node::with_answers(
            zone_of(path),
            Below::Nothing,
            [(Slot::Ptr, CompiledAnswer::compile(&qname, &set))],
        );
        nodes.push((name, node));
    }
    nodes
}
