//! The typed records of the SkyDNS domain, sorted by key path so that every name's records (its
//! own and everything below it) are one contiguous run. The builder compiles nodes from it and
//! the snapshot keeps it for the names that cannot be precompiled: `*`/`any` wildcard queries.

use super::entry::{Entry, NO_ENTRY};
use super::key::{cmp_paths, is_below, is_wildcard, path_of};
use super::select::Selection;
use super::service::{Config, Service};
use super::wildcard;
use crate::wire::Name;
use foldhash::fast::RandomState;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Range;

/// The SkyDNS domain's records in key order, with what answering needs from the configuration.
/// Wildcard queries read it on the slow path.
#[derive(Debug)]
pub struct Index {
    /// The authoritative domain.
    pub(super) domain: Name,
    /// The domain as a path.
    pub(super) apex: Box<[u8]>,
    /// Default TTL, and the cap on answers with several records.
    pub(super) ttl: u32,
    /// Whether address RRsets are marked for rotation.
    pub(super) round_robin: bool,
    /// Records sorted component-wise by path; equal paths keep their input order.
    pub(super) entries: Vec<Entry>,
    /// Records of the build that were skipped as invalid.
    skipped: usize,
}

impl Index {
    /// Sorts `records` (paths below the domain with their values) into an index. Values that
    /// cannot serve are skipped with a warning and counted on top of `skipped`, the records the
    /// build already skipped.
    pub(super) fn new(config: &Config, mut records: Vec<(Vec<u8>, &(String, Service))>, skipped: usize) -> Index {
        records.sort_by(|a, b| cmp_paths(&a.0, &b.0));
        let mut groups: HashMap<&str, u32, RandomState> = HashMap::default();
        let mut kept: Vec<&Service> = Vec::with_capacity(records.len());
        let mut entries = Vec::with_capacity(records.len());
        let mut skipped = skipped;
        for (path, (key, service)) in records {
            let next = groups.len() as u32 + 1;
            let group = match service.group.as_str() {
                "" => 0,
                g => *groups.entry(g).or_insert(next),
            };
            match Entry::new(path, service, group, config) {
                Ok(entry) => {
                    entries.push(entry);
                    kept.push(service);
                }
                Err(error) => {
                    tracing::warn!(%key, %error, "skipping SkyDNS record");
                    skipped += 1;
                }
            }
        }
        link_equal_records(&mut entries, &kept);
        Index {
            apex: path_of(&config.domain).into_boxed_slice(),
            domain: config.domain.clone(),
            ttl: config.ttl,
            round_robin: config.round_robin,
            entries,
            skipped,
        }
    }

    /// Number of records the SkyDNS domain serves from.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the domain holds no records.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records skipped by the build because their key is not a valid name or their value cannot
    /// serve (each also logged), for the control plane's counters.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// The entries at `path` or below it.
    pub(super) fn subtree(&self, path: &[u8]) -> Range<usize> {
        self.subtree_within(0..self.entries.len(), path)
    }

    /// The entries at `path` or below it, searched only within the run `within`.
    pub(super) fn subtree_within(&self, within: Range<usize>, path: &[u8]) -> Range<usize> {
        let run = &self.entries[within.clone()];
        let lo = run.partition_point(|e| cmp_paths(&e.path, path) == Ordering::Less);
        let hi = lo + run[lo..].partition_point(|e| is_below(&e.path, path));
        within.start + lo..within.start + hi
    }

    /// How many entries at the start of `range` sit exactly at a path of `len` bytes; the rest
    /// of the run lies below it.
    pub(super) fn exact_count(&self, range: Range<usize>, len: usize) -> usize {
        self.entries[range].iter().take_while(|e| e.path.len() == len).count()
    }

    /// The records a lookup of `name` returns (SkyDNS `Records(name)`), or `None` when the name
    /// does not exist. Names with `*`/`any` labels below the domain match positionally.
    pub(super) fn lookup(&self, name: &Name) -> Option<Selection> {
        if !name.is_within(&self.domain) {
            return None;
        }
        let path = path_of(name);
        if super::key::components(&path[self.apex.len()..]).any(is_wildcard) {
            return wildcard::select(self, &path);
        }
        let range = self.subtree(&path);
        if range.is_empty() {
            return None;
        }
        let exact = self.exact_count(range.clone(), path.len());
        Some(Selection::from_range(self, range, exact))
    }
}

/// Fills in each entry's dedup class and its closest earlier equal entry. SkyDNS drops a record
/// whose `(host, port, priority, weight, text)` equals an earlier one of the same lookup, with
/// the priority compared before its default is applied.
fn link_equal_records(entries: &mut [Entry], services: &[&Service]) {
    type Identity<'a> = (&'a str, u16, u16, u16, &'a str);
    let mut last: HashMap<Identity<'_>, (u32, u32), RandomState> = HashMap::default();
    for (i, (entry, s)) in entries.iter_mut().zip(services).enumerate() {
        let identity = (s.host.as_str(), s.port, s.priority, s.weight, s.text.as_str());
        let i = i as u32;
        match last.get_mut(&identity) {
            Some((class, prev)) => {
                entry.class = *class;
                entry.prev_equal = *prev;
                *prev = i;
            }
            None => {
                entry.class = i;
                entry.prev_equal = NO_ENTRY;
                last.insert(identity, (i, i));
            }
        }
    }
}
