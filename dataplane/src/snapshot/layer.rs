//! The zones of a source laid under the snapshot already served: the seam a source with zones
//! of its own plugs into, without a field of its own in [`Snapshot`] nor a [`super::Found`] of
//! its own. Its names are ordinary [`Node`]s with compiled answers; its zones say what a miss
//! is (NXDOMAIN, passed on, or SERVFAIL, by their [`super::ZoneKind`]).
//!
//! "Under" is the precedence of a Corefile whose plugins come one after the other (CoreDNS's
//! `kubernetes`, then `hosts`, then `forward`): the snapshot below answers first. A name it
//! holds keeps its answers, and a name inside one of its zones is its to answer, unless that
//! zone passes its missing names on (a `fallthrough` zone, a reverse zone): only then do the
//! layer's names answer there.

use super::{Node, Snapshot, Zone, ZoneKind};
use crate::wire::Name;

/// A source's zones and names, ready to be laid under a served snapshot.
#[derive(Debug, Clone, Default)]
pub struct Layer {
    /// The source's zones, in any order; a zone the snapshot below has too (same apex) is
    /// that one's.
    pub zones: Vec<Zone>,
    /// The source's names, each with its node; the node's zone is set when laid.
    pub names: Vec<(Name, Node)>,
}

/// `base` with `layer` under it, as generation `generation`. The layer's zones come after all
/// of `base`'s, longest apex first among themselves, so that the zone of a name `base` does
/// not hold is `base`'s wherever `base` has one: the index of every `base` zone stays as it is,
/// and no `base` node is written. The nodes and tables of `base` are shared, not copied; only
/// the shards a layer name lands in are.
pub fn lay_under(base: &Snapshot, layer: &Layer, generation: u64) -> Snapshot {
    let mut own: Vec<Zone> = layer
        .zones
        .iter()
        .filter(|zone| !base.zones.iter().any(|b| b.apex == zone.apex))
        .cloned()
        .collect();
    own.sort_by(|a, b| {
        b.apex
            .wire()
            .len()
            .cmp(&a.apex.wire().len())
            .then_with(|| a.apex.cmp(&b.apex))
    });
    let mut zones = base.zones.clone();
    zones.extend(own);
    let mut nodes = base.nodes.clone();
    for (name, node) in &layer.names {
        let Some(index) = zones.iter().position(|zone| name.is_within(&zone.apex)) else {
            continue;
        };
        let passes_on = zones[index].kind == ZoneKind::Reverse;
        if index < base.zones.len() && (!passes_on || base.contains(name)) {
            continue;
        }
        let mut node = node.clone();
        node.set_zone(index as u16);
        nodes.insert(name.clone(), node);
    }
    Snapshot {
        generation,
        zones,
        nodes,
        hosts: base.hosts.clone(),
        leaves: base.leaves.clone(),
        identity: base.identity.clone(),
        skydns: base.skydns.clone(),
        dnssec: base.dnssec.clone(),
    }
}
