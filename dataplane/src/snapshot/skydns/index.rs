//! The typed records of the SkyDNS domain, sorted by key path so that every name's records (its
//! own and everything below it) are one contiguous run. The builder compiles nodes from it and
//! the snapshot keeps it for the names that cannot be precompiled: `*`/`any` wildcard queries.

use super::entry::{Entry, HostKind};
use super::key::{cmp_paths, is_below, is_special, is_wildcard, marker_path, own_path, path_of, KeyKind};
use super::select::{Audience, Selection};
use super::service::Config;
use super::wildcard;
use crate::wire::Name;
use foldhash::fast::RandomState;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

/// The SkyDNS domain's records in key order, with what answering needs from the configuration.
/// Wildcard queries read it on the slow path.
///
/// The table of records is the one the source holds, shared: the index is the run of it below
/// the domain. Successive snapshots share the records themselves; a change copies the table of
/// pointers (the source's copy-on-write), never a record.
#[derive(Debug, Clone)]
pub struct Index {
    /// The authoritative domain.
    pub(super) domain: Name,
    /// The domain as a path.
    pub(super) apex: Box<[u8]>,
    /// Default TTL, and the cap on answers with several records.
    pub(super) ttl: u32,
    /// Default SRV priority / MX preference.
    priority: u16,
    /// Whether address RRsets are marked for rotation.
    pub(super) round_robin: bool,
    /// Every record of the build in the order of [`Entry::cmp_order`]: component-wise by path,
    /// keys that differ only in case as their keys sort.
    table: Arc<Vec<Arc<Entry>>>,
    /// The run of `table` below the domain.
    range: Range<usize>,
    /// The run of `table` holding the `.wildcards` markers of the domain's directories.
    markers: Range<usize>,
    /// Whether a directory answers for what lies below it only when it holds a marker.
    pub(super) wildcards_marker: bool,
    /// Whether names pointing to host names answer with CNAME chains rather than flattened.
    pub(super) cname_chains: bool,
    /// How many entries have each dedup identity, by its low 32 bits (half the table, and
    /// a collision only sends a record through the exact comparison); the dedup looks only at
    /// identities held by more than one.
    identities: HashMap<u32, u32, RandomState>,
    /// The identities of `identities` held by more than one entry: few, so the dedup's lookup
    /// per record stays in cache where one in the whole map would miss it.
    repeated: HashSet<u32, RandomState>,
    /// How many entries feed each kind of answer.
    pub(super) kinds: Kinds,
    /// Records of the build that were skipped as invalid.
    skipped: usize,
}

/// How many entries of the index can feed each kind of answer. An answer no entry can feed is
/// empty wherever it is asked: directories with many records then skip the scan of their run,
/// which matters most at the apex, compiled again on every change.
#[derive(Debug, Clone, Default)]
pub(super) struct Kinds {
    /// Entries with text (TXT).
    pub text: usize,
    /// Entries with `mail` (MX).
    pub mail: usize,
    /// Entries in a group.
    pub grouped: usize,
    /// Entries whose host is an IPv4 address or a name (A, CNAME chasing).
    pub v4_or_name: usize,
    /// Entries whose host is an IPv6 address or a name (AAAA, CNAME chasing).
    pub v6_or_name: usize,
    /// `.self` keys: without any, no name looks for one.
    pub own: usize,
}

impl Index {
    /// The authoritative domain: names outside it are completed by forwarding
    /// (docs/skydns-semantics.md, "Names outside the domain").
    pub fn domain(&self) -> &Name {
        &self.domain
    }

    /// The index of the records of `table` below the domain; `skipped` counts the records the
    /// build skipped before.
    pub(super) fn new(config: &Config, table: &Arc<Vec<Arc<Entry>>>, skipped: usize) -> Index {
        let apex = path_of(&config.domain);
        let mut index = Index {
            range: below(table, &apex),
            markers: below(table, &marker_path(&apex)),
            wildcards_marker: config.wildcards_marker,
            cname_chains: config.cname_chains,
            apex: apex.into_boxed_slice(),
            domain: config.domain.clone(),
            ttl: config.ttl,
            priority: config.priority,
            round_robin: config.round_robin,
            table: Arc::clone(table),
            identities: HashMap::default(),
            repeated: HashSet::default(),
            kinds: Kinds::default(),
            skipped,
        };
        let table = Arc::clone(&index.table);
        for entry in &table[index.range.clone()] {
            index.count(entry, true);
        }
        index
    }

    /// This index moved to `table`, the records after the keys at `paths` (below the domain)
    /// changed, and nothing else did. `None` when a change cannot be applied alone and the index
    /// must be built again: keys that differ only in case (they share a path).
    pub(super) fn edited(&self, table: &Arc<Vec<Arc<Entry>>>, paths: &[Vec<u8>]) -> Option<Index> {
        let mut index = Index {
            table: Arc::clone(table),
            range: below(table, &self.apex),
            markers: below(table, &marker_path(&self.apex)),
            ..self.clone()
        };
        for path in paths {
            let old = self.at(path);
            let new = index.at(path).to_vec();
            if old.len() > 1 || new.len() > 1 || old.iter().chain(&new).any(|e| e.folded) {
                return None;
            }
            old.iter().for_each(|e| index.count(e, false));
            new.iter().for_each(|e| index.count(e, true));
        }
        Some(index)
    }

    /// The records of the domain, in key order.
    pub(super) fn entries(&self) -> &[Arc<Entry>] {
        &self.table[self.range.clone()]
    }

    /// The entries exactly at `path`.
    fn at(&self, path: &[u8]) -> &[Arc<Entry>] {
        let entries = self.entries();
        let start = entries.partition_point(|e| cmp_paths(e.path(), path) == Ordering::Less);
        let len = entries[start..].iter().take_while(|e| e.path() == path).count();
        &entries[start..start + len]
    }

    /// Counts an entry in (`added`) or out: its identity, and what kinds of answers it feeds;
    /// for a view map, those of every record of its lists.
    fn count(&mut self, entry: &Entry, added: bool) {
        let own = &mut self.kinds.own;
        match (entry.kind == KeyKind::Own, added) {
            (false, _) => {}
            (true, true) => *own += 1,
            (true, false) => *own -= 1,
        }
        if !entry.has_views() {
            return self.count_record(entry, added);
        }
        for record in entry.views().iter().flat_map(|list| list.records.iter()) {
            self.count_record(record, added);
        }
    }

    /// Counts one record in or out.
    fn count_record(&mut self, entry: &Entry, added: bool) {
        let kinds = &mut self.kinds;
        let step = |n: &mut usize, counted: bool| match (counted, added) {
            (false, _) => {}
            (true, true) => *n += 1,
            (true, false) => *n -= 1,
        };
        step(&mut kinds.text, !entry.text().is_empty());
        step(&mut kinds.mail, entry.mail);
        step(&mut kinds.grouped, !entry.group().is_empty());
        step(
            &mut kinds.v4_or_name,
            matches!(entry.host, HostKind::V4(_) | HostKind::Name),
        );
        step(
            &mut kinds.v6_or_name,
            matches!(entry.host, HostKind::V6 | HostKind::Name),
        );
        let identity = entry.identity as u32;
        let count = self.identities.entry(identity).or_insert(0);
        match added {
            true => {
                *count += 1;
                if *count == 2 {
                    self.repeated.insert(identity);
                }
            }
            false => {
                *count -= 1;
                if *count == 1 {
                    self.repeated.remove(&identity);
                }
                if *count == 0 {
                    self.identities.remove(&identity);
                }
            }
        }
    }

    /// The TTL `entry` answers with.
    pub(super) fn ttl_of(&self, entry: &Entry) -> u32 {
        entry.ttl_or(self.ttl)
    }

    /// The SRV priority / MX preference `entry` answers with.
    pub(super) fn priority_of(&self, entry: &Entry) -> u16 {
        entry.priority_or(self.priority)
    }

    /// The SRV priority / MX preference of records that set none.
    pub(super) fn default_priority(&self) -> u16 {
        self.priority
    }

    /// Whether another entry may equal one with `identity`, for the dedup.
    pub(super) fn is_repeated(&self, identity: u64) -> bool {
        !self.repeated.is_empty() && self.repeated.contains(&(identity as u32))
    }

    /// Number of records the SkyDNS domain serves from.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Whether the domain holds no records.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// Records skipped by the build because their key is not a valid name or their value cannot
    /// serve (each also logged), for the control plane's counters.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// The entries at `path` or below it.
    pub(super) fn subtree(&self, path: &[u8]) -> Range<usize> {
        self.subtree_within(0..self.range.len(), path)
    }

    /// The entries at `path` or below it, searched only within the run `within`.
    pub(super) fn subtree_within(&self, within: Range<usize>, path: &[u8]) -> Range<usize> {
        let run = &self.entries()[within.clone()];
        let lo = run.partition_point(|e| cmp_paths(e.path(), path) == Ordering::Less);
        let hi = lo + run[lo..].partition_point(|e| is_below(e.path(), path));
        within.start + lo..within.start + hi
    }

    /// How many entries at the start of `range` sit exactly at a path of `len` bytes; the rest
    /// of the run lies below it.
    pub(super) fn exact_count(&self, range: Range<usize>, len: usize) -> usize {
        self.entries()[range]
            .iter()
            .take_while(|e| e.path().len() == len)
            .count()
    }

    /// The entries of the `.self` key of the name at `path`, whose records are `range`.
    pub(super) fn own(&self, path: &[u8], range: Range<usize>) -> Range<usize> {
        if self.kinds.own == 0 || range.is_empty() {
            return range.start..range.start;
        }
        self.subtree_within(range, &own_path(path))
    }

    /// Whether the name at `path` answers only with its own records for want of a `.wildcards`
    /// marker (docs/skydns-semantics.md, "`.self` and `.wildcards`").
    pub(super) fn unmarked(&self, path: &[u8]) -> bool {
        if !self.wildcards_marker {
            return false;
        }
        let marker = marker_path(path);
        let markers = &self.table[self.markers.clone()];
        let at = markers.partition_point(|e| cmp_paths(e.path(), &marker) == Ordering::Less);
        markers.get(at).is_none_or(|e| e.path() != marker)
    }

    /// What a lookup of the name at `path`, whose records are `range`, sees for `audience`:
    /// when it needs a marker it lacks, its own records (nothing at all, it does not exist, when
    /// it has none: the apex always exists), a `.self` key left unread, since the marker is
    /// looked at first, as the SkyDNS variant with markers does; else the records of its `.self`
    /// key if it has one; else every record at and below it.
    pub(super) fn select(&self, path: &[u8], range: Range<usize>, audience: &mut Audience) -> Option<Selection<'_>> {
        let entries = self.entries();
        let exact = self.exact_count(range.clone(), path.len());
        let unmarked = range.len() > exact && self.unmarked(path);
        let own = match unmarked {
            true => range.start..range.start,
            false => self.own(path, range.clone()),
        };
        if !own.is_empty() {
            return Some(Selection::of(self, entries[own].iter().map(|e| &**e), false, audience));
        }
        let range = match unmarked {
            true if exact == 0 && *path != *self.apex => return None,
            true => range.start..range.start + exact,
            false => range,
        };
        let directory = range.len() > exact;
        Some(Selection::of(
            self,
            entries[range].iter().map(|e| &**e),
            directory,
            audience,
        ))
    }

    /// The records a lookup of `name` returns for `audience` (SkyDNS `Records(name)`), or `None`
    /// when the name does not exist. Names with `*`/`any` labels below the domain match
    /// positionally; names with a label no key component may be asked for do not exist.
    pub(super) fn lookup(&self, name: &Name, audience: &mut Audience) -> Option<Selection<'_>> {
        if !name.is_within(&self.domain) {
            return None;
        }
        let path = path_of(name);
        let labels = || super::key::components(&path[self.apex.len()..]);
        if labels().any(is_special) {
            return None;
        }
        if labels().any(is_wildcard) {
            return wildcard::select(self, &path, audience);
        }
        let range = self.subtree(&path);
        if range.is_empty() {
            return None;
        }
        self.select(&path, range, audience)
    }
}

/// The run of `table` at `apex` or below it.
pub(super) fn below(table: &[Arc<Entry>], apex: &[u8]) -> Range<usize> {
    let start = table.partition_point(|e| cmp_paths(e.path(), apex) == Ordering::Less);
    let len = table[start..].partition_point(|e| is_below(e.path(), apex));
    start..start + len
}
