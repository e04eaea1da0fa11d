//! Reverse names from `/<prefix>/arpa/...` (§7): a PTR answer for a key that holds exactly one
//! record and has nothing below it. Anything else (a directory, several records, no host) is not
//! answered, so that the query can be passed on like any name skyline does not hold.

use super::entry::{parse_host, Host};
use super::key::{cmp_paths, is_below, name_of};
use super::section::{answer_set, Rr};
use super::service::{Config, Service};
use crate::snapshot::rrset::{CompiledAnswer, Rdata};
use crate::snapshot::{Below, Node, Slot};
use crate::wire::{LowerName, Name};

/// The nodes of the reverse keys `records` (paths with their values); `zone_of` gives the index
/// of the zone a path belongs to. Values that cannot serve are logged and counted in `skipped`.
pub fn ptr_nodes(
    config: &Config,
    mut records: Vec<(Vec<u8>, &(String, Service))>,
    zone_of: impl Fn(&[u8]) -> u16,
    skipped: &mut usize,
) -> Vec<(Name, Node)> {
    records.sort_by(|a, b| cmp_paths(&a.0, &b.0));
    let mut nodes = Vec::new();
    for (i, (path, (key, service))) in records.iter().enumerate() {
        let shares_key = |j: usize| records.get(j).is_some_and(|(other, _)| is_below(other, path));
        let first = i == 0 || records[i - 1].0 != *path;
        if !first || shares_key(i + 1) {
            continue;
        }
        let target = match parse_host(&service.host) {
            Ok(Host::Name(target)) => target,
            Ok(Host::None) => continue,
            Ok(Host::V4(_) | Host::V6(_)) => {
                tracing::warn!(%key, "skipping SkyDNS reverse record whose host is an address, not a name");
                *skipped += 1;
                continue;
            }
            Err(error) => {
                tracing::warn!(%key, %error, "skipping SkyDNS reverse record");
                *skipped += 1;
                continue;
            }
        };
        let ttl = if service.ttl == 0 { config.ttl } else { service.ttl };
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
