//! Compiles SkyDNS records into a [`Snapshot`]: the authoritative zone of the domain with a node
//! for every existing name, the reverse zones, and the index wildcard queries read.
//!
//! A name exists iff it or a name below it holds a record (plus the apex, which always has its
//! SOA). Every name answers with all records at or below it, so the sorted index gives each name
//! its records as one contiguous run, and a single pass over it finds every name.

use super::answers::{Abort, Answerer};
use super::index::Index;
use super::key::{is_below, name_of, parse_key, path_of};
use super::reverse::ptr_nodes;
use super::section::{answer_set, Rr};
use super::select::Selection;
use super::service::{Config, Service};
use crate::snapshot::rrset::{AnswerSet, CompiledAnswer, Rdata};
use crate::snapshot::{Identity, Node, Slot, Snapshot, Zone, ZoneKind, ZoneState};
use crate::wire::{LowerName, Name};
use foldhash::fast::RandomState;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// SOA refresh, retry and expire of SkyDNS (`NewSOA`); the minimum is the configured `min_ttl`.
const SOA_TIMERS: [u32; 3] = [28800, 7200, 604800];

/// The slots a name answers from its own records.
const RECORD_SLOTS: [Slot; 6] = [Slot::A, Slot::Aaaa, Slot::Cname, Slot::Srv, Slot::Txt, Slot::Mx];

/// Builds the snapshot of `records` (etcd key, typed value) under `config`. Keys outside
/// `/<path_prefix>/`, outside the domain and the reverse trees are ignored; keys that are not
/// valid names and values that cannot serve are skipped with a warning. `now` sets the SOA serial.
pub fn build(config: &Config, records: &[(String, Service)], generation: u64, now: SystemTime) -> Snapshot {
    let t0 = std::time::Instant::now();
    let domain_path = path_of(&config.domain);
    let reverse_apexes = [reverse_apex("in-addr"), reverse_apex("ip6")];
    let reverse_paths: Vec<Vec<u8>> = reverse_apexes.iter().map(path_of).collect();
    let mut in_domain = Vec::with_capacity(records.len());
    let mut reverse = Vec::new();
    for record in records {
        let key = &record.0;
        match parse_key(key, &config.path_prefix) {
            Ok(None) => {}
            Err(error) => tracing::warn!(%key, %error, "skipping SkyDNS key that is not a valid name"),
            Ok(Some(path)) if is_below(&path, &domain_path) => in_domain.push((path, record)),
            Ok(Some(path)) if reverse_paths.iter().any(|r| is_below(&path, r)) => reverse.push((path, record)),
            Ok(Some(_)) => {}
        }
    }

    let zones = zones(config, &reverse_apexes, now);
    let zone_index = |apex: &Name| zones.iter().position(|z| z.apex == *apex).unwrap_or(0) as u16;
    let domain_zone = zone_index(&config.domain);
    let reverse_zones: Vec<(&[u8], u16)> = reverse_paths
        .iter()
        .zip(&reverse_apexes)
        .map(|(p, apex)| (p.as_slice(), zone_index(apex)))
        .collect();

    eprintln!("parse {:?}", t0.elapsed());
    let index = Arc::new(Index::new(config, in_domain));
    eprintln!("index {:?}", t0.elapsed());
    let mut tn = std::time::Duration::ZERO; let mut ts = std::time::Duration::ZERO; let mut slots = [std::time::Duration::ZERO; 6];
    let mut nodes: HashMap<Name, Node, RandomState> = HashMap::default();
    let mut answerer = Answerer::new(&index);
    for run in names(&index) {
        let t1 = std::time::Instant::now();
        let path = run.path(&index);
        let name = name_of(path);
        let Ok(qname) = LowerName::from_wire(name.wire()) else {
            continue;
        };
        let exact = index.exact_count(run.range.clone(), path.len());
        let sel = Selection::from_range(&index, run.range.clone(), exact);
        tn += t1.elapsed();
        let mut node = Node {
            zone: domain_zone,
            ..Node::default()
        };
        for (k, slot) in RECORD_SLOTS.into_iter().enumerate() {
            let t2 = std::time::Instant::now();
            let a = answerer.answer(&sel, &name, slot);
            slots[k] += t2.elapsed();
            let t3 = std::time::Instant::now();
            node.answers[slot as usize] = compiled(&qname, a);
            ts += t3.elapsed();
        }
        nodes.insert(name, node);
    }
    eprintln!("nodes {:?} name+sel {:?} compile {:?} slots {:?}", t0.elapsed(), tn, ts, slots);
    if let Some(apex) = nodes.get_mut(&config.domain) {
        apex_answers(config, &mut answerer, apex, now);
    }
    if let Some(local) = &config.local {
        local_alias(config, local, &mut answerer, domain_zone, &mut nodes);
    }
    drop(answerer);

    let zone_of_reverse = |path: &[u8]| {
        reverse_zones
            .iter()
            .find(|(apex, _)| is_below(path, apex))
            .map_or(0, |&(_, zone)| zone)
    };
    for (name, node) in ptr_nodes(config, reverse, zone_of_reverse) {
        nodes.entry(name).or_insert(node);
    }
    tracing::debug!(
        generation,
        records = index.entries.len(),
        names = nodes.len(),
        "built SkyDNS snapshot"
    );
    Snapshot {
        generation,
        zones,
        nodes,
        identity: Identity::default(),
        skydns: Some(index),
    }
}

fn reverse_apex(kind: &str) -> Name {
    Name::from_labels([kind, "arpa"]).unwrap_or_else(|_| Name::root())
}

/// The domain's zone and the reverse zones, longest apex first.
fn zones(config: &Config, reverse_apexes: &[Name], now: SystemTime) -> Vec<Zone> {
    let soa = soa(config, now);
    let mut rdata = Vec::new();
    if let Rdata::Soa {
        mname,
        rname,
        serial,
        timers,
    } = &soa
    {
        rdata.extend_from_slice(mname.wire());
        rdata.extend_from_slice(rname.wire());
        rdata.extend_from_slice(&serial.to_be_bytes());
        timers.iter().for_each(|t| rdata.extend_from_slice(&t.to_be_bytes()));
    }
    let mut zones = vec![Zone {
        apex: config.domain.clone(),
        kind: ZoneKind::Authoritative,
        state: ZoneState::Ready,
        soa_rdata: Some(rdata.into_boxed_slice()),
        negative_ttl: config.min_ttl,
        default_ttl: config.ttl,
    }];
    for apex in reverse_apexes.iter().filter(|&apex| *apex != config.domain) {
        zones.push(Zone {
            apex: apex.clone(),
            kind: ZoneKind::Reverse,
            state: ZoneState::Ready,
            soa_rdata: None,
            negative_ttl: config.min_ttl,
            default_ttl: config.ttl,
        });
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
fn soa(config: &Config, now: SystemTime) -> Rdata {
    let hour = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() / 3600 * 3600);
    let mname = config
        .domain
        .prepend("dns")
        .and_then(|d| d.prepend("ns"))
        .unwrap_or_else(|_| config.domain.clone());
    Rdata::Soa {
        mname,
        rname: config.hostmaster.clone(),
        serial: hour as u32,
        timers: [SOA_TIMERS[0], SOA_TIMERS[1], SOA_TIMERS[2], config.min_ttl],
    }
}

/// SOA and NS at the apex (§6.6, §6.8); NS comes from the records under `ns.dns.<domain>`.
fn apex_answers(config: &Config, answerer: &mut Answerer<'_>, apex: &mut Node, now: SystemTime) {
    let Ok(qname) = LowerName::from_wire(config.domain.wire()) else {
        return;
    };
    let soa = answer_set(
        vec![Rr::at_query(config.ttl, soa(config, now))],
        Vec::new(),
        config.ttl,
        false,
    );
    apex.answers[Slot::Soa as usize] = Some(Arc::new(CompiledAnswer::compile(&qname, &soa)));
    let ns_name = config.domain.prepend("dns").and_then(|d| d.prepend("ns"));
    if let Some(sel) = ns_name.ok().and_then(|n| answerer.index.lookup(&n)) {
        apex.answers[Slot::Ns as usize] = compiled(&qname, answerer.ns(&sel));
    }
}

/// `local.dns.<domain>` answers with the records of `local` (§4 step 6), owned by the query
/// name. Its missing ancestors exist as empty names, so that no NXDOMAIN denies it (RFC 8020).
fn local_alias(
    config: &Config,
    local: &Name,
    answerer: &mut Answerer<'_>,
    zone: u16,
    nodes: &mut HashMap<Name, Node, RandomState>,
) {
    let Ok(alias) = config.domain.prepend("dns").and_then(|d| d.prepend("local")) else {
        return;
    };
    if !local.is_within(&config.domain) {
        tracing::warn!(%local, "the local alias target is outside the SkyDNS domain; not served");
        return;
    }
    let Some(sel) = answerer.index.lookup(local) else {
        return;
    };
    let Ok(qname) = LowerName::from_wire(alias.wire()) else {
        return;
    };
    let mut node = Node {
        zone,
        ..Node::default()
    };
    for slot in RECORD_SLOTS {
        node.answers[slot as usize] = compiled(&qname, answerer.answer(&sel, &alias, slot));
    }
    let mut parent = alias.parent();
    while parent != config.domain && parent.is_within(&config.domain) {
        let next = parent.parent();
        nodes.entry(parent).or_insert_with(|| Node {
            zone,
            ..Node::default()
        });
        parent = next;
    }
    nodes.insert(alias, node);
}

/// A built answer compiled for `qname`; one too large for any message is marked as such.
fn compiled(qname: &LowerName, built: Result<Option<AnswerSet>, Abort>) -> Option<Arc<CompiledAnswer>> {
    match built {
        Ok(set) => set.map(|set| Arc::new(CompiledAnswer::compile(qname, &set))),
        Err(Abort::TooLarge | Abort::Exhausted) => Some(Arc::new(CompiledAnswer::overflowing())),
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
        match index.entries.get(self.range.start) {
            Some(e) if !self.range.is_empty() => &e.path[..self.len],
            _ => &index.apex,
        }
    }
}

/// Every existing name of the domain with its run of records, the apex included.
fn names(index: &Index) -> Vec<NameRun> {
    let entries = &index.entries;
    let apex_len = index.apex.len();
    let mut runs = Vec::with_capacity(entries.len() + 1);
    // Names whose runs are still open, each below the previous: (path length, first entry).
    let mut open: Vec<(usize, usize)> = vec![(apex_len, 0)];
    for (i, e) in entries.iter().enumerate() {
        while let Some(&(len, start)) = open.last() {
            if len == apex_len || e.path.get(..len) == entries[start].path.get(..len) {
                break;
            }
            open.pop();
            runs.push(NameRun { len, range: start..i });
        }
        let mut pos = open.last().map_or(apex_len, |&(len, _)| len);
        while pos < e.path.len() {
            pos += 1 + e.path[pos] as usize;
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
