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
    let mut zones = base.zones.to_vec();
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
        zones: zones.into(),
        nodes,
        hosts: base.hosts.clone(),
        leaves: base.leaves.clone(),
        identity: base.identity.clone(),
        skydns: base.skydns.clone(),
        autopath: base.autopath.clone(),
        dnssec: base.dnssec.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::kubernetes::{build, Cluster, Config};
    use crate::snapshot::{Below, ZoneState};
    use std::time::UNIX_EPOCH;

    fn name(text: &str) -> Name {
        Name::from_dotted(text).unwrap()
    }

    fn zone(apex: &str, kind: ZoneKind) -> Zone {
        Zone::new(name(apex), kind, ZoneState::Ready, None, 60, 60)
    }

    #[test]
    fn the_layer_answers_only_where_the_snapshot_below_leaves_it_room() {
        let config = Config {
            fallthrough: Some(vec![name("in-addr.arpa.")]),
            ..Config::default()
        };
        let base = build(&config, &Cluster::default(), 1, UNIX_EPOCH);
        let node = || Node::new(0, Below::Nothing);
        let layer = Layer {
            zones: vec![
                zone(".", ZoneKind::Listed),
                zone("in-addr.arpa.", ZoneKind::Reverse),
                zone("lan.", ZoneKind::Reverse),
            ],
            names: vec![
                (name("x.cluster.local."), node()),
                (name("1.0.0.10.in-addr.arpa."), node()),
                (name("1.0.0.10.ip6.arpa."), node()),
                (name("node.lan."), node()),
                (name("node."), node()),
            ],
        };
        let laid = lay_under(&base, &layer, 2);
        let apexes: Vec<String> = laid.zones.iter().map(|z| z.apex.to_string()).collect();
        let below: Vec<String> = base.zones.iter().map(|z| z.apex.to_string()).collect();
        assert_eq!(apexes[..below.len()], below[..], "the zones below keep their places");
        assert_eq!(
            apexes[below.len()..],
            ["lan.", "."],
            "the layer's own after, longest first"
        );
        assert!(
            !laid.contains(&name("x.cluster.local.")),
            "the cluster zone is the cluster's"
        );
        assert!(
            !laid.contains(&name("1.0.0.10.ip6.arpa.")),
            "ip6.arpa. denies its misses"
        );
        let zone_of = |n: &str| {
            laid.zones[usize::from(laid.node(name(n).wire()).unwrap().zone())]
                .apex
                .to_string()
        };
        assert_eq!(
            zone_of("1.0.0.10.in-addr.arpa."),
            "in-addr.arpa.",
            "a zone passing misses on"
        );
        assert_eq!(zone_of("node.lan."), "lan.");
        assert_eq!(zone_of("node."), ".");
        assert_eq!(laid.generation, 2);
    }
}
