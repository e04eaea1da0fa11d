//! Compiles a [`Cluster`] into the snapshot of the cluster zones: a node for every name that
//! exists, with every answer precompiled, or for a name of one address or one PTR an entry of the
//! tables that stand in for nodes (see [`super::hosts`]), so that NXDOMAIN versus NODATA is the
//! presence of the name, as everywhere in skyline (docs/kubernetes-dns.md, "Names" and "NXDOMAIN
//! and NODATA", lists which names exist).
//!
//! Names, per forward zone `<zone>` (`<base>` is `<svc>.<ns>.svc.<zone>`):
//! - the apex (SOA, NS), `dns-version.<zone>` (TXT), `svc.<zone>`, `pod.<zone>` and
//!   `<ns>.svc.<zone>` for every exposed namespace (no data);
//! - `<base>`: the cluster IPs, or for a headless service its ready endpoints (none ⇒ the name
//!   does not exist), or a CNAME for ExternalName; SRV for every port;
//! - `_<port>._<proto>.<base>`: SRV for every named port, and (as CoreDNS answers) the
//!   addresses behind that port; the same name without either underscore answers from it;
//! - `<endpoint>.<base>`: the addresses of the endpoints with that label, and SRV for their
//!   ports;
//! - pods: `<ns>.pod.<zone>` (no data; under `insecure` every dashed address below it answers
//!   with itself) and, under `verified`, `<dashed podIP>.<ns>.pod.<zone>`;
//! - with `openshift_names`: `<svc>.<ns>.endpoints.<zone>`, its endpoints, and
//!   `_endpoints.<base>`.
//!
//! Reverse zones get their apex and a PTR for every cluster IP (to `<base>`) and every other
//! ready endpoint address (to `<endpoint>.<base>`, one per distinct target), named in the
//! primary zone.

use super::autopath::Autopath;
use super::config::{Config, PodMode, SCHEMA_VERSION, VERSION_TTL};
use super::hosts::{Compact, Hosts, Named, Pointer};
use super::model::{Cluster, EndpointSlice, ObjectKey, Service, ServiceKind, ServicePort};
use super::names::{dashed, reverse};
use super::service::ServiceView;
use super::sets::{address_answers, address_rrsets, single, srv_answer, SrvEntry};
use crate::snapshot::rrset::{AnswerSet, CompiledAnswer, Rdata, Record, Rrset};
use crate::snapshot::{Below, Identity, Node, Nodes, Slot, Snapshot, Zone, ZoneKind, ZoneState};
use crate::wire::{LowerName, Name};
use foldhash::fast::RandomState;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// SOA refresh, retry and expire as CoreDNS writes them; the minimum is the `ttl`.
const SOA_TIMERS: [u32; 3] = [7200, 1800, 86400];
/// The SOA's own TTL is the `ttl` capped at this (CoreDNS).
const SOA_TTL_CAP: u32 = 300;

/// The snapshot of the cluster zones before every watch has listed: the zones answer SERVFAIL,
/// never a denial from data not yet read.
pub fn syncing(config: &Config, generation: u64, now: SystemTime) -> Snapshot {
    Snapshot {
        generation,
        zones: zones(config, ZoneState::Syncing, now).into(),
        ..Snapshot::default()
    }
}

/// Builds the cluster zones of `cluster` under `config`. `now` sets the SOA serial.
pub fn build(config: &Config, cluster: &Cluster, generation: u64, now: SystemTime) -> Snapshot {
    let zones = zones(config, ZoneState::Ready, now);
    let views = views(config, cluster, &slices_by_service(cluster, None), None);
    let mut b = Builder::new(config, &zones, &views, now);
    for (primary, zone) in config.forward_zones().enumerate().map(|(i, z)| (i == 0, z)) {
        let Some(zi) = b.zone_index(zone) else { continue };
        b.forward_apex(zone, zi);
        for ns in namespaces(config, cluster) {
            b.namespace(zone, zi, ns);
        }
        for view in views.values() {
            b.service(zone, zi, view, primary);
        }
        if config.pods == PodMode::Verified {
            b.pods(zone, zi, cluster, None);
        }
    }
    let (nodes, hosts) = finish(b, config);
    let mut snapshot = snapshot(zones, nodes, hosts, generation, cluster);
    snapshot.autopath = Autopath::new(config, cluster).map(Arc::new);
    snapshot
}

/// EndpointSlices with their keys by the (namespace, name) of their service.
pub(super) type SlicesByService<'c> = HashMap<(&'c str, &'c str), Vec<(&'c ObjectKey, &'c EndpointSlice)>, RandomState>;

/// Services by (namespace, name).
pub(super) type ServiceIds<'c> = HashSet<(&'c str, &'c str), RandomState>;

/// The slices of every service, or of the services in `only`.
pub(super) fn slices_by_service<'c>(cluster: &'c Cluster, only: Option<&ServiceIds<'_>>) -> SlicesByService<'c> {
    let mut slices: SlicesByService<'c> = HashMap::default();
    for (key, slice) in &cluster.slices {
        let id = (&*key.namespace, &*slice.service);
        if only.is_none_or(|only| only.contains(&id)) {
            slices.entry(id).or_default().push((key, slice));
        }
    }
    slices
}

/// Every exposed service (those in `only`, when given) with its ready endpoints, by
/// (namespace, name).
pub(super) fn views<'c>(
    config: &Config,
    cluster: &'c Cluster,
    slices: &SlicesByService<'c>,
    only: Option<&ServiceIds<'_>>,
) -> HashMap<(&'c str, &'c str), ServiceView<'c>, RandomState> {
    let view = |(key, service): (&'c ObjectKey, &'c Service)| {
        let id = (&*key.namespace, &*key.name);
        let own = slices.get(&id).into_iter().flatten().map(|&(_, slice)| slice);
        (id, ServiceView::new(config, key, service, own))
    };
    let exposed = |(key, _): &(&'c ObjectKey, &'c Service)| exposed(config, cluster, &key.namespace);
    match only {
        None => cluster.services.iter().filter(exposed).map(view).collect(),
        Some(only) => only
            .iter()
            .filter_map(|&(ns, name)| cluster.services.get_key_value(&ObjectKey::new(ns, name)))
            .filter(exposed)
            .map(view)
            .collect(),
    }
}

/// The exposed services among `only` (every one when `None`), each with its ready endpoints:
/// what the names under `<svc>.<ns>.svc.<zone>` are made of, for a consumer that writes them
/// somewhere other than a snapshot (kube2etcd's records in etcd).
pub fn service_views<'c>(
    config: &Config,
    cluster: &'c Cluster,
    only: Option<&HashSet<ObjectKey, RandomState>>,
) -> Vec<ServiceView<'c>> {
    let ids: Option<ServiceIds<'_>> = only.map(|keys| keys.iter().map(|k| (&*k.namespace, &*k.name)).collect());
    let slices = slices_by_service(cluster, ids.as_ref());
    views(config, cluster, &slices, ids.as_ref()).into_values().collect()
}

/// `<dashed address>.<ns>.pod.<zone>`.
pub(super) fn pod_name(zone: &Name, ns: &str, address: IpAddr) -> Option<Name> {
    zone.prepend("pod")
        .and_then(|n| n.prepend(ns))
        .and_then(|n| n.prepend(&dashed(address)))
        .ok()
}

/// Whether names in `namespace` are served: the Namespace exists and `namespaces` allows it.
pub(super) fn exposed(config: &Config, cluster: &Cluster, namespace: &str) -> bool {
    cluster.namespaces.contains(namespace) && config.exposes(namespace)
}

fn namespaces<'c>(config: &Config, cluster: &'c Cluster) -> impl Iterator<Item = &'c str> + 'c {
    let config = config.clone();
    cluster
        .namespaces
        .iter()
        .map(|n| &**n)
        .filter(move |n| exposed(&config, cluster, n))
}

/// The reverse zones' apexes and PTRs: the last names, which need every service seen. Returns
/// the names compiled as nodes and those kept in the tables.
pub(super) fn finish(mut b: Builder<'_, '_>, config: &Config) -> (Nodes, Hosts) {
    for zone in config.reverse_zones() {
        if let Some(zi) = b.zone_index(zone) {
            b.apex(zone, zi);
        }
    }
    b.ptrs();
    (b.nodes, b.hosts)
}

fn snapshot(zones: Vec<Zone>, nodes: Nodes, hosts: Hosts, generation: u64, cluster: &Cluster) -> Snapshot {
    tracing::debug!(
        generation,
        services = cluster.services.len(),
        slices = cluster.slices.len(),
        names = nodes.len() + hosts.len(),
        "built cluster zones"
    );
    Snapshot {
        generation,
        zones: zones.into(),
        nodes,
        hosts,
        leaves: Default::default(),
        identity: Identity::default(),
        skydns: None,
        autopath: None,
        dnssec: None,
    }
}

/// The configured zones, longest apex first, with their SOA.
pub(super) fn zones(config: &Config, state: ZoneState, now: SystemTime) -> Vec<Zone> {
    let mut zones: Vec<Zone> = Vec::with_capacity(config.zones.len());
    for apex in &config.zones {
        if zones.iter().any(|z| z.apex == *apex) {
            continue;
        }
        let kind = if config.falls_through(apex) {
            ZoneKind::Reverse
        } else {
            ZoneKind::Authoritative
        };
        zones.push(Zone::new(
            apex.clone(),
            kind,
            state,
            Some(soa(apex, config.ttl, serial(now)).wire()),
            config.ttl.min(SOA_TTL_CAP),
            config.ttl,
        ));
    }
    zones.sort_by(|a, b| {
        b.apex
            .wire()
            .len()
            .cmp(&a.apex.wire().len())
            .then_with(|| a.apex.cmp(&b.apex))
    });
    zones
}

fn serial(now: SystemTime) -> u32 {
    now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as u32)
}

/// The zone's SOA as CoreDNS writes it: `ns.dns.<zone>`, `hostmaster.<zone>`.
struct Soa {
    mname: Name,
    rname: Name,
    serial: u32,
    timers: [u32; 4],
}

fn soa(zone: &Name, ttl: u32, serial: u32) -> Soa {
    Soa {
        mname: ns_name(zone),
        rname: zone.prepend("hostmaster").unwrap_or_else(|_| zone.clone()),
        serial,
        timers: [SOA_TIMERS[0], SOA_TIMERS[1], SOA_TIMERS[2], ttl],
    }
}

fn ns_name(zone: &Name) -> Name {
    zone.prepend("dns")
        .and_then(|d| d.prepend("ns"))
        .unwrap_or_else(|_| zone.clone())
}

impl Soa {
    fn wire(&self) -> Box<[u8]> {
        let mut rdata = Vec::with_capacity(self.mname.wire().len() + self.rname.wire().len() + 20);
        rdata.extend_from_slice(self.mname.wire());
        rdata.extend_from_slice(self.rname.wire());
        rdata.extend_from_slice(&self.serial.to_be_bytes());
        self.timers
            .iter()
            .for_each(|t| rdata.extend_from_slice(&t.to_be_bytes()));
        rdata.into_boxed_slice()
    }

    fn rdata(self) -> Rdata {
        Rdata::Soa {
            mname: self.mname,
            rname: self.rname,
            serial: self.serial,
            timers: self.timers,
        }
    }
}

pub(super) struct Builder<'a, 'c> {
    config: &'a Config,
    zones: &'a [Zone],
    views: &'a HashMap<(&'c str, &'c str), ServiceView<'c>, RandomState>,
    nodes: Nodes,
    /// The names that fit the tables instead of a node each.
    hosts: Hosts,
    /// The last answer compiled for each slot (see [`Builder::compile`]).
    last_compiled: [Option<CompiledAnswer>; Slot::COUNT],
    /// Cluster IP → its service's name: the one PTR such an address gets.
    cluster_ptrs: HashMap<IpAddr, Name, RandomState>,
    /// Endpoint address → endpoint name, duplicates included. The name is the allocation of
    /// its entry in the tables where they hold it: one per endpoint would be the largest
    /// temporary of a full build.
    endpoint_ptrs: Vec<(IpAddr, Arc<[u8]>)>,
    serial: u32,
    /// While set, names are listed here instead of compiled (see [`Builder::names_of`]).
    listing: Option<Vec<Name>>,
}

impl<'a, 'c> Builder<'a, 'c> {
    pub(super) fn new(
        config: &'a Config,
        zones: &'a [Zone],
        views: &'a HashMap<(&'c str, &'c str), ServiceView<'c>, RandomState>,
        now: SystemTime,
    ) -> Builder<'a, 'c> {
        Builder {
            config,
            zones,
            views,
            nodes: Nodes::default(),
            hosts: Hosts::new(config.ttl),
            last_compiled: [const { None }; Slot::COUNT],
            cluster_ptrs: HashMap::default(),
            endpoint_ptrs: Vec::with_capacity(views.values().map(|view| view.endpoints.len()).sum()),
            serial: serial(now),
            listing: None,
        }
    }

    /// The names `give` gives (a service's, a namespace's), listed by the code that compiles
    /// them so that the two cannot disagree; nothing is compiled.
    pub(super) fn names_of(&mut self, give: impl FnOnce(&mut Self)) -> Vec<Name> {
        self.listing = Some(Vec::new());
        give(self);
        self.listing.take().unwrap_or_default()
    }

    pub(super) fn zone_index(&self, apex: &Name) -> Option<u16> {
        self.zones.iter().position(|z| z.apex == *apex).map(|i| i as u16)
    }

    /// Adds the node `name` with `answers`; a name already present keeps its first node.
    fn put(&mut self, name: Name, zone: u16, below: Below, answers: [(Slot, Option<AnswerSet>); 3]) {
        self.put_node(name, zone, below, answers, |node| node);
    }

    /// [`Builder::put`], `finish` making the last changes to the node.
    fn put_node(
        &mut self,
        name: Name,
        zone: u16,
        below: Below,
        answers: [(Slot, Option<AnswerSet>); 3],
        finish: impl FnOnce(Node) -> Node,
    ) {
        if let Some(listing) = &mut self.listing {
            listing.push(name);
            return;
        }
        if self.present(&name) {
            return;
        }
        let Ok(qname) = LowerName::from_wire(name.wire()) else {
            return;
        };
        let answers: Vec<(Slot, CompiledAnswer)> = answers
            .into_iter()
            .filter_map(|(slot, set)| set.map(|set| (slot, self.compile(&qname, slot, set))))
            .collect();
        self.nodes
            .insert(name, finish(Node::with_answers(zone, below, answers)));
    }

    /// `set` compiled for `qname`, sharing the allocation of the last answer compiled for
    /// `slot` when their bytes are the same: a service's name and its port names answer with
    /// the same addresses (their owner is the question's whatever the name).
    fn compile(&mut self, qname: &LowerName, slot: Slot, set: AnswerSet) -> CompiledAnswer {
        let compiled = CompiledAnswer::compile(qname, &set);
        let last = &mut self.last_compiled[slot as usize];
        match last {
            Some(last) if *last == compiled => last.clone(),
            _ => {
                *last = Some(compiled.clone());
                compiled
            }
        }
    }

    /// Whether `name` was given already, as a node or in the tables: the first keeps it.
    fn present(&self, name: &Name) -> bool {
        self.nodes.contains_key(name) || self.hosts.contains(name)
    }

    /// A name answering with `addresses` and an SRV record naming itself per port of `ports`:
    /// in the tables when it fits them (see [`Named::new`]), else a node.
    fn host(&mut self, name: Name, zone: u16, addresses: &[IpAddr], ports: &[&ServicePort]) {
        if let Some(listing) = &mut self.listing {
            listing.push(name);
            return;
        }
        if self.present(&name) {
            return;
        }
        let name = match Named::new(name, zone, addresses, ports) {
            Ok(named) => return self.hosts.insert(Compact::Named(named)),
            Err(name) => name,
        };
        let entries: Vec<SrvEntry<'_>> = ports
            .iter()
            .map(|port| SrvEntry {
                port: port.port,
                target: name.clone(),
                addresses,
            })
            .collect();
        let srv = srv_answer(self.config.ttl, &entries);
        self.addresses(name, zone, addresses, srv);
    }

    /// A PTR of `address` to `target` alone: in the tables, unless its name was given already.
    fn pointer(&mut self, name: &Name, zone: u16, address: IpAddr, target: Arc<[u8]>) {
        if !self.present(name) {
            self.hosts.insert(Compact::Pointer(Pointer::new(address, zone, target)));
        }
    }

    fn empty(&mut self, name: Name, zone: u16) {
        self.put(
            name,
            zone,
            Below::Nothing,
            [(Slot::A, None), (Slot::Aaaa, None), (Slot::Srv, None)],
        );
    }

    fn addresses(&mut self, name: Name, zone: u16, addresses: &[IpAddr], srv: Option<AnswerSet>) {
        let (a, aaaa) = address_answers(self.config.ttl, addresses);
        self.put(
            name,
            zone,
            Below::Nothing,
            [(Slot::A, a), (Slot::Aaaa, aaaa), (Slot::Srv, srv)],
        );
    }

    /// A port name (see [`port_name`]) answering with `addresses` and `srv`: a node that its
    /// spellings without underscores answer from.
    fn port_name(&mut self, name: Name, zone: u16, addresses: &[IpAddr], srv: Option<AnswerSet>) {
        let (a, aaaa) = address_answers(self.config.ttl, addresses);
        let answers = [(Slot::A, a), (Slot::Aaaa, aaaa), (Slot::Srv, srv)];
        self.put_node(name, zone, Below::Nothing, answers, Node::with_optional_underscores);
    }

    /// SOA and NS at a zone's apex.
    pub(super) fn apex(&mut self, zone: &Name, zi: u16) {
        let ttl = self.config.ttl;
        let soa = single(ttl.min(SOA_TTL_CAP), soa(zone, ttl, self.serial).rdata());
        let ns = single(ttl, Rdata::Ns(ns_name(zone)));
        self.put(
            zone.clone(),
            zi,
            Below::Nothing,
            [(Slot::Soa, Some(soa)), (Slot::Ns, Some(ns)), (Slot::A, None)],
        );
    }

    fn forward_apex(&mut self, zone: &Name, zi: u16) {
        self.apex(zone, zi);
        if let Ok(version) = zone.prepend("dns-version") {
            let txt = single(VERSION_TTL, Rdata::Txt(vec![SCHEMA_VERSION.as_bytes().into()]));
            self.put(
                version,
                zi,
                Below::Nothing,
                [(Slot::Txt, Some(txt)), (Slot::A, None), (Slot::Aaaa, None)],
            );
        }
        for label in ["svc", "pod"] {
            if let Ok(name) = zone.prepend(label) {
                self.empty(name, zi);
            }
        }
        if self.config.openshift_names {
            if let Ok(name) = zone.prepend("endpoints") {
                self.empty(name, zi);
            }
        }
    }

    /// `<ns>.svc.<zone>`, `<ns>.pod.<zone>` (unless pods are disabled) and, with
    /// `openshift_names`, `<ns>.endpoints.<zone>`: names with no data of their own.
    pub(super) fn namespace(&mut self, zone: &Name, zi: u16, ns: &str) {
        if let Ok(name) = zone.prepend("svc").and_then(|n| n.prepend(ns)) {
            self.empty(name, zi);
        }
        let below = match self.config.pods {
            PodMode::Disabled => None,
            PodMode::Insecure => Some(Below::DashedAddresses),
            PodMode::Verified => Some(Below::Nothing),
        };
        if let Some(below) = below {
            if let Ok(name) = zone.prepend("pod").and_then(|n| n.prepend(ns)) {
                self.put(
                    name,
                    zi,
                    below,
                    [(Slot::A, None), (Slot::Aaaa, None), (Slot::Srv, None)],
                );
            }
        }
        if self.config.openshift_names {
            if let Ok(name) = zone.prepend("endpoints").and_then(|n| n.prepend(ns)) {
                self.empty(name, zi);
            }
        }
    }

    pub(super) fn service(&mut self, zone: &Name, zi: u16, view: &ServiceView<'c>, primary: bool) {
        let Ok(base) = zone
            .prepend("svc")
            .and_then(|n| n.prepend(&view.key.namespace))
            .and_then(|n| n.prepend(&view.key.name))
        else {
            return;
        };
        match &view.service.kind {
            ServiceKind::ExternalName(target) => self.external_name(zone, zi, base, target),
            ServiceKind::ClusterIp(ips) => {
                if self.config.ignore_empty_service && view.endpoints.is_empty() {
                    return;
                }
                self.cluster_ip(zi, &base, view, ips);
                self.endpoints(zone, zi, &base, view);
            }
            ServiceKind::Headless => {
                if view.endpoints.is_empty() {
                    return;
                }
                let srv = self.endpoint_srv(&base, view, None);
                self.addresses(base.clone(), zi, &view.addresses(), srv);
                for port in view.named_slice_ports() {
                    let srv = self.endpoint_srv(&base, view, Some((&port.name, port.protocol.label())));
                    let addresses = view.addresses_with_port(&port.name, port.protocol);
                    if let Some(name) = port_name(&base, &port.name, port.protocol.label()) {
                        self.port_name(name, zi, &addresses, srv);
                    }
                }
                self.endpoints(zone, zi, &base, view);
            }
        }
        if primary {
            self.ptr_contributions(zone, view, None);
        }
    }

    /// Records the PTRs `view` gives (those of the addresses in `only`, when given): its cluster
    /// IPs to its name, its endpoints to their names. Named in the primary `zone`.
    pub(super) fn ptr_contributions(
        &mut self,
        zone: &Name,
        view: &ServiceView<'c>,
        only: Option<&HashSet<IpAddr, RandomState>>,
    ) {
        let wanted = |address: &IpAddr| only.is_none_or(|set| set.contains(address));
        let ips: &[IpAddr] = match &view.service.kind {
            ServiceKind::ExternalName(_) => return,
            ServiceKind::ClusterIp(_) if self.config.ignore_empty_service && view.endpoints.is_empty() => return,
            ServiceKind::Headless if view.endpoints.is_empty() => return,
            ServiceKind::ClusterIp(ips) => ips,
            ServiceKind::Headless => &[],
        };
        if !ips.iter().any(wanted) && !view.endpoints.iter().any(|e| wanted(&e.address)) {
            return;
        }
        let Ok(base) = zone
            .prepend("svc")
            .and_then(|n| n.prepend(&view.key.namespace))
            .and_then(|n| n.prepend(&view.key.name))
        else {
            return;
        };
        for &ip in ips.iter().filter(|ip| wanted(ip)) {
            self.cluster_ptrs.entry(ip).or_insert_with(|| base.clone());
        }
        for group in view.by_label() {
            if !group.addresses.iter().any(wanted) {
                continue;
            }
            let Ok(name) = base.prepend(&group.label) else { continue };
            let target = self.hosts.shared(&name);
            self.endpoint_ptrs.extend(
                group
                    .addresses
                    .iter()
                    .filter(|a| wanted(a))
                    .map(|&a| (a, Arc::clone(&target))),
            );
        }
    }

    /// The service name and its port names (see [`Self::port_name`]), answering with the cluster IPs.
    fn cluster_ip(&mut self, zi: u16, base: &Name, view: &ServiceView<'c>, ips: &[IpAddr]) {
        let ttl = self.config.ttl;
        let entries: Vec<SrvEntry<'_>> = view
            .service
            .ports
            .iter()
            .flat_map(|port| {
                ips.iter().map(|_| SrvEntry {
                    port: port.port,
                    target: base.clone(),
                    addresses: ips,
                })
            })
            .collect();
        self.addresses(base.clone(), zi, ips, srv_answer(ttl, &entries));
        for port in view.service.ports.iter().filter(|p| !p.name.is_empty()) {
            let entries: Vec<SrvEntry<'_>> = ips
                .iter()
                .map(|_| SrvEntry {
                    port: port.port,
                    target: base.clone(),
                    addresses: ips,
                })
                .collect();
            let srv = srv_answer(ttl, &entries);
            if let Some(name) = port_name(base, &port.name, port.protocol.label()) {
                self.port_name(name, zi, ips, srv);
            }
        }
    }

    /// SRV records naming the endpoints under `owner`, one per endpoint and slice port (only the
    /// ports named `port` when given), with the endpoint (target) port.
    fn endpoint_srv(&self, owner: &Name, view: &ServiceView<'c>, port: Option<(&str, &str)>) -> Option<AnswerSet> {
        let labels = view.by_label();
        let targets: HashMap<&str, (Name, &[IpAddr]), RandomState> = labels
            .iter()
            .filter_map(|group| {
                let target = owner.prepend(&group.label).ok()?;
                Some((group.label.as_str(), (target, group.addresses.as_slice())))
            })
            .collect();
        let mut entries = Vec::new();
        for endpoint in &view.endpoints {
            let Some((target, addresses)) = targets.get(view.label(endpoint).as_str()) else {
                continue;
            };
            for p in endpoint.ports {
                let matches = port.is_none_or(|(name, proto)| *p.name == *name && p.protocol.label() == proto);
                if matches {
                    entries.push(SrvEntry {
                        port: p.port,
                        target: target.clone(),
                        addresses,
                    });
                }
            }
        }
        srv_answer(self.config.ttl, &entries)
    }

    /// `<endpoint>.<base>` names and OpenShift's endpoint names. An endpoint name's SRV answer is
    /// what CoreDNS gives for a query with an endpoint label (docs/kubernetes-dns.md, "Endpoint
    /// names"): one record per port of its endpoints' slices, unnamed ports included (no port label
    /// filters none out), with the target port and the endpoint name itself as target.
    fn endpoints(&mut self, zone: &Name, zi: u16, base: &Name, view: &ServiceView<'c>) {
        for group in view.by_label() {
            let Ok(name) = base.prepend(&group.label) else { continue };
            self.host(name, zi, &group.addresses, &group.ports);
        }
        if self.config.openshift_names && !view.endpoints.is_empty() {
            self.openshift(zone, zi, base, view);
        }
    }

    /// `<svc>.<ns>.endpoints.<zone>` with its endpoints, and `_endpoints.<base>`: every ready
    /// endpoint address whatever the service type, SRV per endpoint and port.
    fn openshift(&mut self, zone: &Name, zi: u16, base: &Name, view: &ServiceView<'c>) {
        let Ok(owner) = zone
            .prepend("endpoints")
            .and_then(|n| n.prepend(&view.key.namespace))
            .and_then(|n| n.prepend(&view.key.name))
        else {
            return;
        };
        let addresses = view.addresses();
        for group in view.by_label() {
            if let Ok(name) = owner.prepend(&group.label) {
                self.host(name, zi, &group.addresses, &[]);
            }
        }
        let srv = self.endpoint_srv(&owner, view, None);
        if let Ok(prefixed) = base.prepend("_endpoints") {
            self.addresses(prefixed, zi, &addresses, srv.clone());
        }
        self.addresses(owner, zi, &addresses, srv);
    }

    /// A CNAME to `target`. An in-zone target is followed: its addresses come along, and a type
    /// it has none of is NODATA, as CoreDNS answers. An address as `externalName` is not served.
    fn external_name(&mut self, zone: &Name, zi: u16, base: Name, target: &str) {
        if target.parse::<IpAddr>().is_ok() {
            return;
        }
        let Ok(target) = Name::from_dotted(target) else {
            return;
        };
        let ttl = self.config.ttl;
        let cname = single(ttl, Rdata::Cname(target.clone()));
        let (a, aaaa) = if target.is_within(zone) {
            let addresses = self.resolve(zone, &target);
            let (v4, v6) = address_rrsets(Some(&target), ttl, &addresses);
            let chased = |set: Option<_>| {
                set.map(|set| {
                    let mut answer = cname.clone();
                    answer.answer.push(set);
                    answer
                })
            };
            (chased(v4), chased(v6))
        } else {
            (Some(cname.clone()), Some(cname.clone()))
        };
        self.put(
            base,
            zi,
            Below::Nothing,
            [(Slot::Cname, Some(cname)), (Slot::A, a), (Slot::Aaaa, aaaa)],
        );
    }

    /// The addresses an in-zone name answers with: `<svc>.<ns>.svc.<zone>` or
    /// `<endpoint>.<svc>.<ns>.svc.<zone>`.
    fn resolve(&self, zone: &Name, target: &Name) -> Vec<IpAddr> {
        let Some((endpoint, svc, ns)) = named_service(zone, target) else {
            return Vec::new();
        };
        let Some(view) = self.views.get(&(ns.as_str(), svc.as_str())) else {
            return Vec::new();
        };
        match (endpoint, &view.service.kind) {
            (Some(label), ServiceKind::ClusterIp(_) | ServiceKind::Headless) => view
                .by_label()
                .into_iter()
                .find(|group| group.label == label)
                .map(|group| group.addresses)
                .unwrap_or_default(),
            (None, ServiceKind::ClusterIp(ips)) => {
                if self.config.ignore_empty_service && view.endpoints.is_empty() {
                    Vec::new()
                } else {
                    ips.to_vec()
                }
            }
            (None, ServiceKind::Headless) => view.addresses(),
            _ => Vec::new(),
        }
    }

    /// `<dashed podIP>.<ns>.pod.<zone>` for every pod of an exposed namespace (those with a
    /// (namespace, address) in `only`, when given).
    pub(super) fn pods(
        &mut self,
        zone: &Name,
        zi: u16,
        cluster: &Cluster,
        only: Option<&HashSet<(&str, IpAddr), RandomState>>,
    ) {
        for (key, pod) in &cluster.pods {
            if !exposed(self.config, cluster, &key.namespace)
                || only.is_some_and(|set| !set.contains(&(&*key.namespace, pod.address)))
            {
                continue;
            }
            if let Some(name) = pod_name(zone, &key.namespace, pod.address) {
                self.host(name, zi, &[pod.address], &[]);
            }
        }
    }

    /// PTRs in the reverse zones: a cluster IP's one PTR to its service, else one PTR per
    /// distinct endpoint name holding the address.
    fn ptrs(&mut self) {
        let reverse_zones: Vec<(Name, u16)> = self
            .config
            .reverse_zones()
            .filter_map(|z| Some((z.clone(), self.zone_index(z)?)))
            .collect();
        let zone_of = |name: &Name| {
            reverse_zones
                .iter()
                .filter(|(apex, _)| name.is_within(apex))
                .max_by_key(|(apex, _)| apex.wire().len())
                .map(|&(_, zi)| zi)
        };
        let ttl = self.config.ttl;
        let cluster_ptrs = std::mem::take(&mut self.cluster_ptrs);
        for (&address, target) in &cluster_ptrs {
            let name = reverse(address);
            if let Some(zi) = zone_of(&name) {
                let target = self.hosts.shared(target);
                self.pointer(&name, zi, address, target);
            }
        }
        let mut endpoint_ptrs = std::mem::take(&mut self.endpoint_ptrs);
        endpoint_ptrs.retain(|(address, _)| !cluster_ptrs.contains_key(address));
        endpoint_ptrs.sort_unstable();
        endpoint_ptrs.dedup();
        for group in endpoint_ptrs.chunk_by(|a, b| a.0 == b.0) {
            let name = reverse(group[0].0);
            let Some(zi) = zone_of(&name) else { continue };
            if let [(_, target)] = group {
                self.pointer(&name, zi, group[0].0, Arc::clone(target));
                continue;
            }
            let records = group.iter().filter_map(|(_, target)| {
                Some(Record {
                    ttl,
                    rdata: Rdata::Ptr(Name::from_wire(target).ok()?),
                })
            });
            let set = AnswerSet {
                flattened: Vec::new(),
                answer: vec![Rrset {
                    owner: None,
                    records: records.collect(),
                    rotate: false,
                }],
                additional: Vec::new(),
            };
            self.put(
                name,
                zi,
                Below::Nothing,
                [(Slot::Ptr, Some(set)), (Slot::A, None), (Slot::Aaaa, None)],
            );
        }
    }
}

/// The service an in-zone name names, as (endpoint label, service, namespace):
/// `<svc>.<ns>.svc.<zone>` or `<endpoint>.<svc>.<ns>.svc.<zone>`.
pub(super) fn named_service(zone: &Name, name: &Name) -> Option<(Option<String>, String, String)> {
    let own = name.label_count().saturating_sub(zone.label_count());
    let labels: Vec<&[u8]> = name.labels().take(own).collect();
    let text = |l: &[u8]| std::str::from_utf8(l).ok().map(str::to_owned);
    match labels.as_slice() {
        [svc, ns, b"svc"] => Some((None, text(svc)?, text(ns)?)),
        [ep, svc, ns, b"svc"] => Some((Some(text(ep)?), text(svc)?, text(ns)?)),
        _ => None,
    }
}

/// The name a port's SRV records answer at: `_<port>._<proto>.<base>`. CoreDNS reads the two labels
/// below a service as port and protocol, stripping one leading `_` from each but requiring none
/// (docs/kubernetes-dns.md, "Port names"), so the three spellings without one or both underscores
/// answer alike; they are answered from this name's node (see [`Node::underscores_optional`]). A
/// port name that starts with `_` itself (not a valid IANA service name, but nothing in the API
/// object stops it) matches only with one more `_` in front. None of these can be an endpoint's
/// name: those are one label below the service, these two.
fn port_name(base: &Name, port: &str, proto: &str) -> Option<Name> {
    base.prepend(&format!("_{proto}"))
        .and_then(|n| n.prepend(&format!("_{port}")))
        .ok()
}
