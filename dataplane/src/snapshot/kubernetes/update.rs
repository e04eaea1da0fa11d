//! A served snapshot after a few objects changed, or after the SkyDNS snapshot below it changed,
//! made from the one served before without compiling every name again: what the Kubernetes
//! source publishes for each watch event and each new SkyDNS snapshot.
//!
//! A change reaches the names of the services it touched (as they were and as they are, so
//! [`Changes::before`] keeps the objects as they were), the names of every ExternalName service
//! (their answers follow the services they name), the PTRs of the addresses it touched, the
//! names of the pods it touched, and the apexes. Those are compiled again by the code that
//! builds them all ([`super::build()`]); every other name keeps its node, shared with the previous
//! snapshot (see [`crate::snapshot::Nodes`]), as do the names composed from SkyDNS.
//!
//! A new SkyDNS snapshot reaches only the names whose node it changed: outside the cluster
//! zones they take the new node as they are; in the reverse zones both sources share, a changed
//! PTR name is one more touched address, so that the cluster's PTR keeps winning there as in
//! [`compose`](crate::snapshot::compose).

use super::autopath::Autopath;
use super::build::{
    exposed, finish, named_service, pod_name, slices_by_service, views, zones, Builder, ServiceIds, SlicesByService,
};
use super::config::{Config, PodMode};
use super::model::{Changes, Cluster, EndpointSlice, ObjectKey, ServiceKind};
use super::names::{reverse, unreverse};
use super::service::ServiceView;
use crate::snapshot::{Node, Nodes, Snapshot, Zone, ZoneState};
use crate::wire::Name;
use foldhash::fast::RandomState;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

/// The snapshot served, with the SkyDNS snapshot it was composed with.
#[derive(Debug, Clone, Copy)]
pub struct Served<'a> {
    /// The served snapshot: the cluster zones built by [`super::build()`] (or by [`update()`])
    /// composed by [`compose`](crate::snapshot::compose) with `base`.
    pub snapshot: &'a Snapshot,
    /// The SkyDNS snapshot it holds.
    pub base: &'a Snapshot,
}

/// The served snapshot after `changes` and with `base` as the SkyDNS snapshot, made from
/// `served` without building the cluster zones again: the snapshot that
/// `compose(base, build(config, cluster, ..))` gives, name for name. Only the names the changes
/// reach are compiled again: those of the changed services as they were and as they are, those
/// of every ExternalName service (their answers follow other services), the PTRs of the changed
/// addresses, the names of the changed pods, and the apexes (the SOA serial moves). When `base`
/// is not `served.base`, the names whose SkyDNS node differs are taken from `base` as well
/// (see [`rebased`]). Every other name keeps its node, shared with `served` rather than copied
/// (see [`Nodes`]), so that a change costs what it reaches, not the size of the cluster. A name
/// the cluster zones no longer hold shows `base`'s node, if any, as [`compose`] would.
///
/// `None` when the snapshot must be built from scratch: full changes, a served snapshot that
/// does not hold the cluster zones ready, a SkyDNS snapshot with other zones, or SkyDNS names
/// changed inside a cluster zone.
///
/// [`compose`]: crate::snapshot::compose
pub fn update(
    config: &Config,
    cluster: &Cluster,
    changes: &Changes,
    base: &Snapshot,
    served: Served<'_>,
    generation: u64,
    now: SystemTime,
) -> Option<Snapshot> {
    if changes.full {
        return None;
    }
    let previous = served.snapshot;
    let mut zones = renewed(previous, zones(config, ZoneState::Ready, now))?;
    let rebase = if std::ptr::eq(served.base, base) {
        Rebase::default()
    } else {
        rebased(config, served.base, base, &mut zones)?
    };
    let addresses: Cow<'_, HashSet<IpAddr, RandomState>> = if rebase.addresses.is_empty() {
        Cow::Borrowed(&changes.addresses)
    } else {
        Cow::Owned(changes.addresses.union(&rebase.addresses).copied().collect())
    };
    let reached = reached_services(config, cluster, changes, &addresses);
    let slices = slices_by_service(cluster, Some(&reached));
    let views = views(config, cluster, &slices, Some(&reached));
    let before = before(config, cluster, changes, &slices);
    let rebuilt: Vec<&ServiceView<'_>> = views
        .values()
        .filter(|view| changes.services.contains(view.key) || matches!(view.service.kind, ServiceKind::ExternalName(_)))
        .collect();
    let pods = reached_pods(config, cluster, changes);
    let mut b = Builder::new(config, &zones, &views, now);
    // Every name that may change, listed by the code that compiles it, as it was and as it is.
    let mut cleared: Vec<Name> = Vec::new();
    for zone in config.forward_zones() {
        let Some(zi) = b.zone_index(zone) else { continue };
        cleared.push(zone.clone());
        for view in before.iter().chain(rebuilt.iter().copied()) {
            cleared.extend(b.names_of(|b| b.service(zone, zi, view, false)));
        }
        cleared.extend(pods.iter().filter_map(|&(ns, address)| pod_name(zone, ns, address)));
        for ns in changes.namespaces.keys() {
            cleared.extend(b.names_of(|b| b.namespace(zone, zi, ns)));
        }
    }
    cleared.extend(config.reverse_zones().cloned());
    cleared.extend(
        addresses
            .iter()
            .map(|&address| reverse(address))
            .filter(|name| config.reverse_zones().any(|zone| name.is_within(zone))),
    );
    for (primary, zone) in config.forward_zones().enumerate().map(|(i, z)| (i == 0, z)) {
        let Some(zi) = b.zone_index(zone) else { continue };
        b.apex(zone, zi);
        for ns in changes.namespaces.keys().filter(|ns| exposed(config, cluster, ns)) {
            b.namespace(zone, zi, ns);
        }
        for view in &rebuilt {
            b.service(zone, zi, view, false);
        }
        if primary {
            for view in views.values() {
                b.ptr_contributions(zone, view, Some(&addresses));
            }
        }
        if !pods.is_empty() {
            b.pods(zone, zi, cluster, Some(&pods));
        }
    }
    let (compiled, compact) = finish(b, config);
    // Only names whose node differs are written: each write copies a shard `previous` shares.
    let mut nodes = previous.nodes.clone();
    let mut hosts = previous.hosts.clone();
    let set = |nodes: &mut Nodes, name: &Name, node: Option<Node>| match node {
        Some(node) if !previous.nodes.get(name.wire()).is_some_and(|old| *old == node) => {
            nodes.insert(name.clone(), node);
        }
        Some(_) => {}
        None => {
            nodes.remove(name);
        }
    };
    // The served zone of `base`'s zone of index `zone`: the one of the same apex.
    let served_zone = |zone: u16| {
        let apex = base.zones.get(usize::from(zone)).map(|z| &z.apex);
        zones.iter().position(|z| Some(&z.apex) == apex).unwrap_or(0) as u16
    };
    // A name of `base` as `compose` places it: its node, in the zone of the same apex.
    let from_base = |name: &Name| {
        base.nodes.get(name.wire()).map(|node| {
            let mut node = node.clone();
            node.set_zone(served_zone(node.zone()));
            node
        })
    };
    for (name, node) in &compiled {
        set(&mut nodes, name, Some(node.clone()));
        hosts.remove(name);
    }
    let compacted = compact.len();
    let compact_names: HashSet<Name, RandomState> = compact
        .into_names()
        .into_iter()
        .map(|entry| {
            let name = entry.name();
            // A node of `base` would answer first: the cluster's name becomes a node, as in
            // `compose`.
            if base.nodes.get(name.wire()).is_some() {
                set(&mut nodes, &name, Some(hosts.node_of(&entry)));
                hosts.remove(&name);
            } else {
                set(&mut nodes, &name, None);
                hosts.insert(entry);
            }
            name
        })
        .collect();
    // A name the cluster zones no longer hold shows `base`'s node, as `compose` gives it.
    for name in cleared
        .iter()
        .filter(|name| !compiled.contains_key(name) && !compact_names.contains(*name))
    {
        set(&mut nodes, name, from_base(name));
        hosts.remove(name);
    }
    for name in &rebase.names {
        set(&mut nodes, name, from_base(name));
    }
    tracing::debug!(
        generation,
        services = changes.services.len(),
        skydns = rebase.names.len() + rebase.addresses.len(),
        compiled = compiled.len() + compacted,
        names = nodes.len() + hosts.len(),
        "updated cluster zones"
    );
    let leaves = base.leaves.composed(served_zone(base.leaves.zone()));
    // The pod table follows the pods alone: rebuilt when one changed, shared otherwise.
    let autopath = if changes.before.pods.is_empty() {
        previous.autopath.clone()
    } else {
        Autopath::new(config, cluster).map(Arc::new)
    };
    Some(Snapshot {
        generation,
        zones: zones.into(),
        nodes,
        hosts,
        leaves,
        identity: base.identity.clone(),
        skydns: base.skydns.clone(),
        autopath,
        dnssec: base.dnssec.clone(),
    })
}

/// What a new SkyDNS snapshot changes in the served one.
#[derive(Debug, Default)]
struct Rebase {
    /// Names the cluster zones cannot hold whose node is now `base`'s, or none.
    names: Vec<Name>,
    /// Addresses whose reverse name changed in SkyDNS, inside a cluster reverse zone: the
    /// cluster's PTR, if it has one, still wins there, so they are recompiled as touched.
    addresses: HashSet<IpAddr, RandomState>,
}

/// The names whose node differs between the SkyDNS snapshots `before` and `base`, sorted by
/// whether the cluster zones may hold them, with `zones` (the served ones) given `base`'s
/// versions of its zones. `None` when `base` has other zones than `before`, or changed a name
/// inside a cluster forward zone, where only a full build tells which source holds it.
///
/// Finding the differences reads every name of both (a hash lookup each, answers compared by
/// pointer first), which costs about what [`compose`](crate::snapshot::compose) costs and is
/// independent of the cluster's size.
fn rebased(config: &Config, before: &Snapshot, base: &Snapshot, zones: &mut [Zone]) -> Option<Rebase> {
    let apexes = |s: &Snapshot| s.zones.iter().map(|z| z.apex.clone()).collect::<Vec<_>>();
    if apexes(before) != apexes(base) {
        return None;
    }
    for zone in base.zones.iter().filter(|z| !config.zones.contains(&z.apex)) {
        let held = zones.iter_mut().find(|z| z.apex == zone.apex)?;
        *held = zone.clone();
    }
    let mut rebase = Rebase::default();
    let mut note = |name: &Name| {
        if config.forward_zones().any(|zone| name.is_within(zone)) {
            return false;
        }
        if config.reverse_zones().any(|zone| name.is_within(zone)) {
            if config.reverse_zones().any(|zone| zone == name) {
                return true;
            }
            if let Some(address) = unreverse(name) {
                rebase.addresses.insert(address);
                return true;
            }
        }
        rebase.names.push(name.clone());
        true
    };
    let mut kept = 0;
    for (name, node) in &base.nodes {
        match before.nodes.get(name.wire()) {
            Some(old) if old == node => kept += 1,
            Some(_) => {
                kept += 1;
                if !note(name) {
                    return None;
                }
            }
            None => {
                if !note(name) {
                    return None;
                }
            }
        }
    }
    if kept < before.nodes.len() {
        for (name, _) in &before.nodes {
            if base.nodes.get(name.wire()).is_none() && !note(name) {
                return None;
            }
        }
    }
    Some(rebase)
}

/// `previous`'s zones with the cluster zones `fresh` in their places; `None` when `previous`
/// does not hold one of them ready (it was not built from a synced cluster).
fn renewed(previous: &Snapshot, fresh: Vec<Zone>) -> Option<Vec<Zone>> {
    let mut zones = previous.zones.to_vec();
    for zone in fresh {
        let held = zones
            .iter_mut()
            .find(|z| z.apex == zone.apex && z.state == ZoneState::Ready)?;
        *held = zone;
    }
    Some(zones)
}

/// The services an update reads: the changed ones and the ExternalName ones (compiled again),
/// the services the in-zone targets of those name, and every service giving a PTR to one of
/// `addresses`. A few, however large the cluster: only these get a [`ServiceView`].
fn reached_services<'c>(
    config: &Config,
    cluster: &'c Cluster,
    changes: &'c Changes,
    addresses: &HashSet<IpAddr, RandomState>,
) -> ServiceIds<'c> {
    let id = |key: &'c ObjectKey| (&*key.namespace, &*key.name);
    // The changed ones whether or not they exist now: their old views need their slices too.
    let mut reached: ServiceIds<'c> = changes.services.iter().map(id).collect();
    let changed = |address: &IpAddr| addresses.contains(address);
    for (key, service) in &cluster.services {
        match &service.kind {
            ServiceKind::ClusterIp(ips) if ips.iter().any(changed) => {
                reached.insert(id(key));
            }
            ServiceKind::ExternalName(target) => {
                reached.insert(id(key));
                let Ok(target) = Name::from_dotted(target) else {
                    continue;
                };
                for zone in config.forward_zones().filter(|zone| target.is_within(zone)) {
                    let Some((_, svc, ns)) = named_service(zone, &target) else {
                        continue;
                    };
                    if let Some((key, _)) = cluster.services.get_key_value(&ObjectKey::new(&ns, &svc)) {
                        reached.insert(id(key));
                    }
                }
            }
            _ => {}
        }
    }
    for (key, slice) in &cluster.slices {
        if slice.endpoints.iter().any(|e| changed(&e.address)) {
            if let Some((key, _)) = cluster
                .services
                .get_key_value(&ObjectKey::new(&key.namespace, &slice.service))
            {
                reached.insert(id(key));
            }
        }
    }
    reached
}

/// The changed services of served namespaces as the previous snapshot saw them (those that
/// existed then): their objects and slices from [`Changes::before`] where it has them, from
/// `cluster` where they have not changed.
fn before<'c>(
    config: &Config,
    cluster: &'c Cluster,
    changes: &'c Changes,
    slices: &SlicesByService<'c>,
) -> Vec<ServiceView<'c>> {
    let mut changed: HashMap<(&str, &str), Vec<&EndpointSlice>, RandomState> = HashMap::default();
    for (key, slice) in &changes.before.slices {
        if let Some(slice) = slice {
            changed.entry((&key.namespace, &slice.service)).or_default().push(slice);
        }
    }
    changes
        .services
        .iter()
        .filter(|key| exposed_before(config, cluster, changes, &key.namespace))
        .filter_map(|key| {
            let service = match changes.before.services.get(key) {
                Some(old) => old.as_ref(),
                None => cluster.services.get(key),
            }?;
            let id = (&*key.namespace, &*key.name);
            let unchanged = slices
                .get(&id)
                .into_iter()
                .flatten()
                .filter(|(k, _)| !changes.before.slices.contains_key(*k))
                .map(|&(_, slice)| slice);
            let changed = changed.get(&id).into_iter().flatten().copied();
            Some(ServiceView::new(config, key, service, unchanged.chain(changed)))
        })
        .collect()
}

/// The pod names the changes reach under `pods verified`, before and after, as (namespace,
/// address) of served namespaces.
fn reached_pods<'c>(
    config: &Config,
    cluster: &'c Cluster,
    changes: &'c Changes,
) -> HashSet<(&'c str, IpAddr), RandomState> {
    if config.pods != PodMode::Verified {
        return HashSet::default();
    }
    changes
        .before
        .pods
        .iter()
        .flat_map(|(key, old)| {
            let ns = &*key.namespace;
            let was = old.iter().filter(move |_| exposed_before(config, cluster, changes, ns));
            let is = cluster.pods.get(key).filter(|_| exposed(config, cluster, ns));
            was.chain(is).map(move |pod| (ns, pod.address))
        })
        .collect()
}

/// Whether names in `namespace` were served when the last snapshot was built.
fn exposed_before(config: &Config, cluster: &Cluster, changes: &Changes, namespace: &str) -> bool {
    config.exposes(namespace) && changes.namespace_existed(cluster, namespace)
}
