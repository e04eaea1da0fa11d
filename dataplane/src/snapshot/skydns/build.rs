//! Compiles SkyDNS records into a [`Snapshot`]: the authoritative zone of the domain with a node
//! for every existing name, the reverse zones, and the index wildcard queries read.
//!
//! A name exists iff it or a name below it holds a record (plus the apex, which always has its
//! SOA). Every name answers with all records at or below it, so the sorted index gives each name
//! its records as one contiguous run, and a single pass over it finds every name.

use super::answers::{Abort, Answerer};
use super::entry::{Entry, ValueError};
use super::index::{below, Index};
use super::key::{is_below, name_of, path_of, KeyPath};
use super::leaves::Leaves;
use super::reverse::ptr_nodes;
use super::section::{answer_set, Rr};
use super::select::{Audience, Selection};
use super::service::{Config, Service, Value};
use crate::snapshot::rrset::{AnswerSet, CompiledAnswer, Rdata};
use crate::snapshot::views::{ClassAnswers, Prefix, Views};
use crate::snapshot::{Below, Identity, Node, Nodes, Slot, Snapshot, Zone, ZoneKind, ZoneState};
use crate::wire::{LowerName, Name};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// SOA refresh, retry and expire of SkyDNS (`NewSOA`); the minimum is the configured `min_ttl`.
const SOA_TIMERS: [u32; 3] = [28800, 7200, 604800];

/// The slots a name answers from its own records.
const RECORD_SLOTS: [Slot; 6] = [Slot::A, Slot::Aaaa, Slot::Cname, Slot::Srv, Slot::Txt, Slot::Mx];

/// What a source hands a build for one key: a record ([`Service`]), or any [`Value`].
pub trait Stored {
    /// The entry of this value stored at `key`.
    fn entry(&self, key: &KeyPath) -> Result<Entry, ValueError>;
}

impl Stored for Service {
    fn entry(&self, key: &KeyPath) -> Result<Entry, ValueError> {
        Entry::new(key, self)
    }
}

impl Stored for Value {
    fn entry(&self, key: &KeyPath) -> Result<Entry, ValueError> {
        Entry::of(key, self)
    }
}

/// Builds the snapshot of `records` (etcd key, typed value) under `config`, unsigned (the
/// sources build through `crate::signer::build`, which signs it). Keys outside
/// `/<path_prefix>/`, outside the domain and the reverse trees are ignored; keys that are not
/// valid names and values that cannot serve are skipped with a warning. `now` sets the SOA serial.
pub(crate) fn build<V: Stored>(config: &Config, records: &[(String, V)], generation: u64, now: SystemTime) -> Snapshot {
    let (entries, skipped) = typed(config, records);
    build_from(config, &Arc::new(entries), skipped, generation, now)
}

/// Builds the snapshot of `entries`, the records below `/<path_prefix>/` in the order of
/// [`Entry::cmp_order`], sharing the table: what a source that keeps its records typed builds
/// from. Entries outside the domain and the reverse trees are ignored.
pub(crate) fn build_entries(
    config: &Config,
    entries: &Arc<Vec<Arc<Entry>>>,
    generation: u64,
    now: SystemTime,
) -> Snapshot {
    build_from(config, entries, 0, generation, now)
}

/// The records of `records` a build serves from, typed, in the order of [`Entry::cmp_order`];
/// and how many were skipped, each with a warning: keys below `/<path_prefix>/` that are not
/// names, and values in the domain or the reverse trees that cannot serve.
pub fn typed<V: Stored>(config: &Config, records: &[(String, V)]) -> (Vec<Arc<Entry>>, usize) {
    let served: Vec<Vec<u8>> = std::iter::once(path_of(&config.domain))
        .chain(reverse_apexes().iter().map(path_of))
        .collect();
    let mut entries = Vec::with_capacity(records.len());
    let mut skipped = 0;
    for (key, service) in records {
        match KeyPath::parse(key, &config.path_prefix) {
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%key, %error, "skipping SkyDNS key that is not a valid name");
                skipped += 1;
            }
            Ok(Some(at)) if served.iter().any(|apex| is_below(at.owner(), apex)) => match service.entry(&at) {
                Ok(entry) => entries.push(Arc::new(entry)),
                Err(error) => {
                    tracing::warn!(%key, %error, "skipping SkyDNS record");
                    skipped += 1;
                }
            },
            Ok(Some(_)) => {}
        }
    }
    entries.sort_by(|a, b| a.cmp_order(b));
    (entries, skipped)
}

fn build_from(
    config: &Config,
    entries: &Arc<Vec<Arc<Entry>>>,
    mut skipped: usize,
    generation: u64,
    now: SystemTime,
) -> Snapshot {
    let reverse_apexes = reverse_apexes();
    let reverse = reverse_entries(config, entries, &reverse_apexes);
    let zones = zones(config, &reverse_apexes, now);
    let zone_index = |apex: &Name| zones.iter().position(|z| z.apex == *apex).unwrap_or(0) as u16;
    let reverse_zones: Vec<(Vec<u8>, u16)> = reverse_apexes.iter().map(|a| (path_of(a), zone_index(a))).collect();
    let zone_of_reverse = |path: &[u8]| {
        reverse_zones
            .iter()
            .find(|(apex, _)| is_below(path, apex))
            .map_or(0, |&(_, zone)| zone)
    };
    let ptrs = ptr_nodes(config, reverse, zone_of_reverse, &mut skipped);

    let index = Arc::new(Index::new(config, entries, skipped));
    let (mut nodes, leaves) = domain_names(config, &index, zone_index(&config.domain), now);
    for (name, node) in ptrs {
        if !nodes.contains_key(&name) && !leaves.contains(&path_of(&name)) {
            nodes.insert(name, node);
        }
    }
    tracing::debug!(
        generation,
        records = index.len(),
        skipped = index.skipped(),
        names = nodes.len() + leaves.len(),
        leaves = leaves.len(),
        "built SkyDNS snapshot"
    );
    Snapshot {
        generation,
        zones: zones.into(),
        nodes,
        hosts: Default::default(),
        leaves,
        identity: Identity::default(),
        skydns: Some(index),
        autopath: None,
        dnssec: None,
    }
}

/// The apexes of the reverse zones PTR records are served in.
pub(super) fn reverse_apexes() -> [Name; 2] {
    [reverse_apex("in-addr"), reverse_apex("ip6")]
}

fn reverse_apex(kind: &str) -> Name {
    Name::from_labels([kind, "arpa"]).unwrap_or_else(|_| Name::root())
}

/// The entries of the reverse trees, in key order, less what the domain holds should it lie
/// inside one. Sorted entries put the records below a name in one run.
fn reverse_entries<'r>(config: &Config, entries: &'r [Arc<Entry>], reverse_apexes: &[Name]) -> Vec<&'r Entry> {
    let domain_path = path_of(&config.domain);
    let mut reverse = Vec::new();
    for apex in reverse_apexes {
        let run = &entries[below(entries, &path_of(apex))];
        reverse.extend(run.iter().filter(|e| !is_below(e.path(), &domain_path)).map(|e| &**e));
    }
    reverse
}

/// The domain's zone and the reverse zones, longest apex first.
pub(super) fn zones(config: &Config, reverse_apexes: &[Name], now: SystemTime) -> Vec<Zone> {
    // With fallthrough the domain is a zone skyline holds some names of, as a Kubernetes
    // fallthrough zone is: a name without records is passed on, never denied.
    let kind = if config.fallthrough {
        ZoneKind::Reverse
    } else {
        ZoneKind::Authoritative
    };
    let mut zones = vec![Zone::new(
        config.domain.clone(),
        kind,
        ZoneState::Ready,
        Some(Soa::new(config, now).wire()),
        config.min_ttl,
        config.ttl,
    )];
    for apex in reverse_apexes.iter().filter(|&apex| *apex != config.domain) {
        zones.push(Zone::new(
            apex.clone(),
            ZoneKind::Reverse,
            ZoneState::Ready,
            None,
            config.min_ttl,
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

/// SkyDNS `NewSOA`: `ns.dns.<domain>`, the hostmaster, the current hour as serial.
struct Soa {
    mname: Name,
    rname: Name,
    serial: u32,
    timers: [u32; 4],
}

impl Soa {
    fn new(config: &Config, now: SystemTime) -> Soa {
        let hour = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() / 3600 * 3600);
        Soa {
            mname: config
                .domain
                .prepend("dns")
                .and_then(|d| d.prepend("ns"))
                .unwrap_or_else(|_| config.domain.clone()),
            rname: config.hostmaster.clone(),
            serial: hour as u32,
            timers: [SOA_TIMERS[0], SOA_TIMERS[1], SOA_TIMERS[2], config.min_ttl],
        }
    }

    fn rdata(self) -> Rdata {
        Rdata::Soa {
            mname: self.mname,
            rname: self.rname,
            serial: self.serial,
            timers: self.timers,
        }
    }

    /// Uncompressed RDATA, for the authority section of negative answers.
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
}

/// Every existing name of the domain, the `local` alias included: a leaf (see [`Leaves`]) or
/// a node.
fn domain_names(config: &Config, index: &Index, zone: u16, now: SystemTime) -> (Nodes, Leaves) {
    let mut nodes = Nodes::default();
    let mut leaves = Vec::new();
    let mut answerer = Answerer::new(index);
    for run in names(index) {
        let path = run.path(index);
        if let Some(entry) = Leaves::leaf_of(index, path, run.range.clone()) {
            leaves.push(Arc::clone(entry));
            continue;
        }
        let name = name_of(path);
        if let Some(node) = compile_node(index, &mut answerer, path, run.range, zone) {
            nodes.insert(name, node);
        }
    }
    let mut leaves = Leaves::new(index, zone).with_entries(leaves);
    if let Some(apex) = nodes.get_mut(&config.domain) {
        apex_answers(config, apex, now);
    }
    if let Some(local) = &config.local {
        local_alias(config, local, &mut answerer, zone, &mut nodes, &mut leaves);
    }
    (nodes, leaves)
}

/// What the name at `path` is: a leaf with its entry, a node, or nothing (it does not exist;
/// the apex always does).
pub(super) enum Named<'i> {
    Leaf(&'i Arc<Entry>),
    Node(Node),
    Absent,
}

/// The name at `path` in the domain, from the records at and below it.
pub(super) fn name_at<'i>(index: &'i Index, answerer: &mut Answerer<'_>, path: &[u8], zone: u16) -> Named<'i> {
    let range = index.subtree(path);
    if let Some(entry) = Leaves::leaf_of(index, path, range.clone()) {
        return Named::Leaf(entry);
    }
    if range.is_empty() && *path != *index.apex {
        return Named::Absent;
    }
    compile_node(index, answerer, path, range, zone).map_or(Named::Absent, Named::Node)
}

/// A node answering from the records `range` of the index, those at and below `path`; `None`
/// when the name does not exist. At the apex, NS comes from the records under `ns.dns.<domain>`
/// (docs/skydns-semantics.md, "NS at the apex").
pub(super) fn compile_node(
    index: &Index,
    answerer: &mut Answerer<'_>,
    path: &[u8],
    range: Range<usize>,
    zone: u16,
) -> Option<Node> {
    let name = name_of(path);
    let qname = LowerName::from_wire(name.wire()).ok()?;
    let ns_name = (*path == *index.apex)
        .then(|| name.prepend("dns").and_then(|d| d.prepend("ns")).ok())
        .flatten();
    for_clients(answerer, zone, |answerer| {
        let sel = index.select(path, range.clone(), &mut answerer.audience)?;
        let mut answers = record_answers(answerer, &sel, &name, &qname);
        if let Some(sel) = ns_name.as_ref().and_then(|ns| answerer.lookup(ns)) {
            answers.extend(compiled(&qname, answerer.ns(&sel)).map(|answer| (Slot::Ns, answer)));
        }
        Some(answers)
    })
}

/// The answers of `sel`, the lookup of `name` (`qname` as a query asks it), in every slot a
/// name answers from its records.
fn record_answers(
    answerer: &mut Answerer<'_>,
    sel: &Selection<'_>,
    name: &Name,
    qname: &LowerName,
) -> Vec<(Slot, CompiledAnswer)> {
    RECORD_SLOTS
        .into_iter()
        .filter_map(|slot| compiled(qname, answerer.answer(sel, name, slot)).map(|answer| (slot, answer)))
        .collect()
}

/// The node of a name whose answers for a class of clients `answers` gives (`None`: the name
/// does not exist). Answers reading no view map make a node as any other; otherwise every
/// prefix of the view maps read is a class of its own, its answers built in turn (which may
/// read more view maps, whose prefixes are classes too), and the node holds the answers all
/// classes share, with [`Views`] for the rest (docs/skydns-semantics.md, "Views").
pub(super) fn for_clients<A: AsMut<Audience>>(
    answerer: &mut A,
    zone: u16,
    mut answers: impl FnMut(&mut A) -> Option<Vec<(Slot, CompiledAnswer)>>,
) -> Option<Node> {
    let audience = answerer.as_mut();
    audience.class = None;
    audience.seen.clear();
    let others = answers(answerer)?;
    let mut pending: BTreeSet<Prefix> = answerer.as_mut().seen.drain(..).collect();
    if pending.is_empty() {
        return Some(Node::with_answers(zone, Below::Nothing, others));
    }
    let mut classes: BTreeMap<Prefix, Vec<(Slot, CompiledAnswer)>> = BTreeMap::new();
    while let Some(prefix) = pending.pop_first() {
        answerer.as_mut().class = Some(prefix);
        let answered = answers(answerer).unwrap_or_default();
        let seen = answerer.as_mut().seen.drain(..);
        pending.extend(seen.filter(|p| *p != prefix && !classes.contains_key(p)));
        classes.insert(prefix, answered);
    }
    answerer.as_mut().class = None;
    Some(viewed(zone, others, classes))
}

/// The node holding the answers every class shares, and views of the others.
fn viewed(
    zone: u16,
    others: Vec<(Slot, CompiledAnswer)>,
    classes: BTreeMap<Prefix, Vec<(Slot, CompiledAnswer)>>,
) -> Node {
    let by_slot = |answers: Vec<(Slot, CompiledAnswer)>| {
        let mut by_slot: ClassAnswers = [const { None }; Slot::COUNT];
        for (slot, answer) in answers {
            by_slot[slot as usize] = Some(answer);
        }
        by_slot
    };
    let others = by_slot(others);
    let classes: Vec<(Prefix, ClassAnswers)> = classes.into_iter().map(|(p, a)| (p, by_slot(a))).collect();
    let apart: Vec<Slot> = Slot::ALL
        .into_iter()
        .filter(|&slot| {
            classes
                .iter()
                .any(|(_, answers)| answers[slot as usize] != others[slot as usize])
        })
        .collect();
    let shared = Slot::ALL
        .into_iter()
        .filter(|slot| !apart.contains(slot))
        .filter_map(|slot| Some((slot, others[slot as usize].clone()?)));
    let node = Node::with_answers(zone, Below::Nothing, shared);
    if apart.is_empty() {
        return node;
    }
    node.with_views(Views::new(&apart, others, classes))
}

/// SOA at the apex (docs/skydns-semantics.md, "SOA, NXDOMAIN and NODATA").
pub(super) fn apex_answers(config: &Config, apex: &mut Node, now: SystemTime) {
    let Ok(qname) = LowerName::from_wire(config.domain.wire()) else {
        return;
    };
    let soa = answer_set(
        vec![Rr::at_query(config.ttl, Soa::new(config, now).rdata())],
        Vec::new(),
        config.ttl,
        false,
    );
    apex.set_answer(Slot::Soa, Some(CompiledAnswer::compile(&qname, &soa)));
}

/// `local.dns.<domain>`.
pub(super) fn local_alias_name(config: &Config) -> Option<Name> {
    config.domain.prepend("dns").and_then(|d| d.prepend("local")).ok()
}

/// `local.dns.<domain>` answers with the records of `local` (docs/skydns-semantics.md, "The local
/// alias"), owned by the query name. Its missing ancestors exist as empty names, so that no
/// NXDOMAIN denies it (RFC 8020).
pub(super) fn local_alias(
    config: &Config,
    local: &Name,
    answerer: &mut Answerer<'_>,
    zone: u16,
    nodes: &mut Nodes,
    leaves: &mut Leaves,
) {
    let Some(alias) = local_alias_name(config) else {
        return;
    };
    if !local.is_within(&config.domain) {
        tracing::warn!(%local, "the local alias target is outside the SkyDNS domain; not served");
        return;
    }
    let Ok(qname) = LowerName::from_wire(alias.wire()) else {
        return;
    };
    let node = for_clients(answerer, zone, |answerer| {
        let sel = answerer.lookup(local)?;
        Some(record_answers(answerer, &sel, &alias, &qname))
    });
    let Some(node) = node else {
        return;
    };
    let mut parent = alias.parent();
    while parent != config.domain && parent.is_within(&config.domain) {
        let next = parent.parent();
        if !nodes.contains_key(&parent) && !leaves.contains(&path_of(&parent)) {
            nodes.insert(parent, Node::new(zone, Below::Nothing));
        }
        parent = next;
    }
    leaves.remove(&path_of(&alias));
    nodes.insert(alias, node);
}

/// A built answer compiled for `qname`; one too large for any message is marked as such.
fn compiled(qname: &LowerName, built: Result<Option<AnswerSet>, Abort>) -> Option<CompiledAnswer> {
    match built {
        Ok(set) => set.map(|set| CompiledAnswer::compile(qname, &set)),
        Err(Abort::TooLarge | Abort::Exhausted) => Some(CompiledAnswer::overflowing()),
    }
}

/// An existing name: its path is the first `len` bytes of its entries' paths, and `range` its
/// records (at it and below it).
struct NameRun {
    len: usize,
    range: Range<usize>,
}

impl NameRun {
    fn path<'a>(&self, index: &'a Index) -> &'a [u8] {
        match index.entries().get(self.range.start) {
            Some(e) if !self.range.is_empty() => &e.path()[..self.len],
            _ => &index.apex,
        }
    }
}

/// Every existing name of the domain with its run of records, the apex included.
fn names(index: &Index) -> Vec<NameRun> {
    let entries = index.entries();
    let apex_len = index.apex.len();
    let mut runs = Vec::with_capacity(entries.len() + 1);
    // Names whose runs are still open, each below the previous: (path length, first entry).
    let mut open: Vec<(usize, usize)> = vec![(apex_len, 0)];
    for (i, e) in entries.iter().enumerate() {
        while let Some(&(len, start)) = open.last() {
            if len == apex_len || e.path().get(..len) == entries[start].path().get(..len) {
                break;
            }
            open.pop();
            runs.push(NameRun { len, range: start..i });
        }
        let mut pos = open.last().map_or(apex_len, |&(len, _)| len);
        let path = e.path();
        // A `.self` key's last component names nothing.
        let owner = e.owner().len();
        while pos < owner {
            pos += 1 + path[pos] as usize;
            open.push((pos, i));
        }
    }
    while let Some((len, start)) = open.pop() {
        runs.push(NameRun {
            len,
            range: start..entries.len(),
        });
    }
    runs
}
