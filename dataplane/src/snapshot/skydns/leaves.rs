//! The SkyDNS names that hold one address record and nothing below it, kept as a table of the
//! source's own entries instead of a node with compiled answers each.
//!
//! Most names of a large SkyDNS domain are such leaves: one key, an IPv4 or IPv6 host, maybe a
//! port. As nodes they cost about 250 bytes each (a hash-table slot, the name, and the node
//! with its A and SRV answers compiled apart), for records the source already holds typed. Here
//! a leaf is a pointer to that entry in a hash table; the answer path writes its records when
//! it finds the name (see [`Leaves::get`]), byte for byte as its node would answer (the tests
//! compile those nodes and compare the two).
//!
//! Like [`crate::snapshot::Nodes`], the table is split into shards shared between snapshots
//! until a change writes one, so that an update copies what it writes, not the table.

use super::entry::{Entry, Host, HostKind};
use super::index::Index;
use super::key::{components, depth, is_path_of, is_wildcard, name_of, wire_of};
use super::srv::{effective_weight, normalised_weight};
use crate::snapshot::written::{Cursor, Written};
use crate::wire::name::{name_hash, same_wire};
use crate::wire::types::{rtype, MAX_NAME_LEN};
use crate::wire::LowerName;
use hashbrown::HashTable;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;
use std::sync::Arc;

/// Shards of the table: an update copies the shards it writes, about 400 leaves each at 100k.
const SHARDS: usize = 256;

/// Bits of the hash that pick the shard, as for [`crate::snapshot::Nodes`].
const SHARD_SHIFT: u32 = 40;

/// Bytes a leaf's largest answer takes: an SRV record naming the longest name, and its glue.
pub const MAX_LEAF_ANSWER: usize = 2 + 10 + 6 + MAX_NAME_LEN + 2 + 10 + 16;

type Shard = HashTable<Arc<Entry>>;

fn shard_of(hash: u64) -> usize {
    (hash >> SHARD_SHIFT) as usize % SHARDS
}

/// The bit of [`Leaves`]'s depths that names of `labels` labels have.
#[inline(always)]
fn depth_bit(labels: usize) -> u64 {
    1 << labels.min(63)
}

/// The hash a query for the name at `path` looks the entry up by.
fn hash_of(path: &[u8]) -> u64 {
    let mut buf = [0; MAX_NAME_LEN];
    wire_of(path, &mut buf).map_or(0, name_hash)
}

/// The leaves of the SkyDNS domain; a name is a leaf or a node, never both.
#[derive(Debug, Clone)]
pub struct Leaves {
    /// The index of the domain's zone in the snapshot's zones.
    zone: u16,
    /// Default TTL of the records.
    ttl: u32,
    /// Default SRV priority.
    priority: u16,
    /// The domain's apex in wire form: every leaf lies below it, so a query's name that does
    /// not end with it is no leaf, and one that does needs only its other labels compared.
    apex: Box<[u8]>,
    /// Another source's names may shadow a leaf (a composed snapshot): a leaf then answers only
    /// where no node or cluster table holds its name.
    shadowed: bool,
    /// Bit `n` set when a leaf may have `n` labels (bit 63: 63 or more): a name of another
    /// depth is no leaf, which spares the names of directories (a service above its instances,
    /// most often one label above every leaf) the table lookup. A removal leaves its bit set,
    /// which costs a name of that depth a lookup, never an answer; a full build starts it again.
    depths: u64,
    shards: Box<[Arc<Shard>]>,
    len: usize,
}

impl Default for Leaves {
    fn default() -> Leaves {
        let empty = Arc::new(Shard::new());
        Leaves {
            zone: 0,
            ttl: 0,
            priority: 0,
            apex: Box::default(),
            shadowed: false,
            depths: 0,
            shards: (0..SHARDS).map(|_| Arc::clone(&empty)).collect(),
            len: 0,
        }
    }
}

/// A leaf found by the answer path.
#[derive(Debug, Clone, Copy)]
pub struct Leaf<'a> {
    entry: &'a Entry,
    ttl: u32,
    priority: u16,
}

impl Leaves {
    /// An empty table for the domain of `index`, in the zone of index `zone`.
    pub(super) fn new(index: &Index, zone: u16) -> Leaves {
        Leaves {
            zone,
            ttl: index.ttl,
            priority: index.default_priority(),
            apex: name_of(&index.apex).wire().into(),
            ..Leaves::default()
        }
    }

    /// The entries of `leaves` (each a leaf's, see [`Leaves::leaf_of`]), each shard sized once.
    pub(super) fn with_entries(mut self, leaves: Vec<Arc<Entry>>) -> Leaves {
        let hashed: Vec<(u64, Arc<Entry>)> = leaves.into_iter().map(|e| (hash_of(e.path()), e)).collect();
        self.depths |= hashed.iter().fold(0, |bits, (_, e)| bits | depth_bit(depth(e.path())));
        let mut counts = [0usize; SHARDS];
        for (hash, _) in &hashed {
            counts[shard_of(*hash)] += 1;
        }
        let mut shards: Vec<Shard> = counts.iter().map(|&n| Shard::with_capacity(n)).collect();
        for (hash, entry) in hashed {
            shards[shard_of(hash)].insert_unique(hash, entry, |e| hash_of(e.path()));
        }
        self.len += shards.iter().map(|s| s.len()).sum::<usize>();
        self.shards = shards.into_iter().map(Arc::new).collect();
        self
    }

    /// The entry that makes the name at `path`, whose records are `range` of `index`, a leaf:
    /// its one record, at the name itself, with an address host and nothing that needs more
    /// than the address and the port to answer (no text, mail, group or target strip). The
    /// apex and names with wildcard labels (answered by the wildcard lookup) are never leaves.
    pub(super) fn leaf_of<'i>(index: &'i Index, path: &[u8], range: Range<usize>) -> Option<&'i Arc<Entry>> {
        if range.len() != 1 || path.len() <= index.apex.len() {
            return None;
        }
        let entry = &index.entries()[range.start];
        let plain = matches!(entry.host, HostKind::V4(_) | HostKind::V6)
            && entry.path().len() == path.len()
            && entry.text().is_empty()
            && !entry.mail
            && entry.group().is_empty()
            && entry.target_strip == 0;
        let wildcard = components(&path[index.apex.len()..]).any(is_wildcard);
        (plain && !wildcard).then_some(entry)
    }

    /// The name of every leaf, in no particular order.
    pub fn names(&self) -> impl Iterator<Item = crate::wire::Name> + '_ {
        self.shards.iter().flat_map(|shard| shard.iter()).map(|e| e.name())
    }

    /// Number of leaves.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no leaves.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The index of the zone the leaves answer in.
    #[inline(always)]
    pub fn zone(&self) -> u16 {
        self.zone
    }

    /// Whether another source's names may shadow a leaf (see [`crate::snapshot::Snapshot::leaf`]).
    #[inline(always)]
    pub fn shadowed(&self) -> bool {
        self.shadowed
    }

    /// These leaves in a snapshot composed with another source's names, their zone there
    /// being of index `zone`.
    pub fn composed(&self, zone: u16) -> Leaves {
        Leaves {
            zone,
            shadowed: true,
            ..self.clone()
        }
    }

    /// The leaf of a query's name, by the hash computed while the name was read.
    /// Allocation-free, for the query path.
    #[inline(always)]
    pub fn get(&self, qname: &LowerName) -> Option<Leaf<'_>> {
        if self.depths & depth_bit(qname.label_count()) == 0 {
            return None;
        }
        let wire = qname.wire();
        let at = wire.len().checked_sub(self.apex.len())?;
        if !same_wire(&wire[at..], &self.apex) {
            return None;
        }
        let known = self.apex.len().saturating_sub(1);
        let h = qname.hash();
        let shard = &self.shards[shard_of(h)];
        // The table calls its test out of line, through a pointer, unless it is this small: a
        // name of the length wanted behind a matching 7-bit tag is all but surely the one.
        let total = wire.len() - 1;
        let mut entry = shard.find(h, |e| e.path_len() == total)?;
        if !is_path_of(entry.path(), known, qname) {
            entry = shard.iter_hash(h).find(|e| is_path_of(e.path(), known, qname))?;
        }
        Some(Leaf {
            entry,
            ttl: self.ttl,
            priority: self.priority,
        })
    }

    /// Whether the name at `path` is a leaf.
    pub(super) fn contains(&self, path: &[u8]) -> bool {
        let h = hash_of(path);
        self.shards[shard_of(h)].find(h, |e| e.path() == path).is_some()
    }

    /// Makes `entry` the leaf of its name, unless that very entry is already (which would
    /// copy its shard for nothing).
    pub(super) fn insert(&mut self, entry: &Arc<Entry>) {
        self.depths |= depth_bit(depth(entry.path()));
        let h = hash_of(entry.path());
        let index = shard_of(h);
        let same = |e: &Arc<Entry>| e.path() == entry.path();
        if self.shards[index].find(h, same).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            return;
        }
        let shard = Arc::make_mut(&mut self.shards[index]);
        match shard.find_mut(h, same) {
            Some(old) => *old = Arc::clone(entry),
            None => {
                shard.insert_unique(h, Arc::clone(entry), |e| hash_of(e.path()));
                self.len += 1;
            }
        }
    }

    /// Removes the leaf of the name at `path`, if it is one.
    pub(super) fn remove(&mut self, path: &[u8]) {
        let h = hash_of(path);
        let index = shard_of(h);
        if self.shards[index].find(h, |e| e.path() == path).is_none() {
            return;
        }
        let shard = Arc::make_mut(&mut self.shards[index]);
        if let Ok(found) = shard.find_entry(h, |e| e.path() == path) {
            found.remove();
            self.len -= 1;
        }
    }

    /// Every leaf with the node it stands for, compiled from `index` (the snapshot's own) as
    /// the builder compiles a name's node: what the tests compare the leaves' answers with.
    #[cfg(test)]
    pub(crate) fn nodes<'a>(
        &'a self,
        index: &'a Index,
    ) -> impl Iterator<Item = (crate::wire::Name, crate::snapshot::Node)> + 'a {
        use super::answers::Answerer;
        use super::build::compile_node;
        let mut answerer = Answerer::new(index);
        self.shards.iter().flat_map(|shard| shard.iter()).filter_map(move |e| {
            let path = e.path();
            let node = compile_node(index, &mut answerer, path, index.subtree(path), self.zone)?;
            Some((e.name(), node))
        })
    }
}

impl Leaf<'_> {
    /// The TTL of the leaf's records.
    #[inline(always)]
    pub fn ttl(&self) -> u32 {
        self.entry.ttl_or(self.ttl)
    }

    /// The IPv4 address, for an A query.
    #[inline(always)]
    pub fn v4(&self) -> Option<Ipv4Addr> {
        match self.entry.host {
            HostKind::V4(address) => Some(address),
            _ => None,
        }
    }

    /// The IPv6 address, for an AAAA query.
    pub fn v6(&self) -> Option<Ipv6Addr> {
        match self.entry.host() {
            Host::V6(address) => Some(address),
            _ => None,
        }
    }

    /// Writes the SRV answer at `qname` (the leaf's name) into `out` as its node's compiled
    /// answer holds it: the record naming the leaf itself (written out, as SRV targets are),
    /// and the address as glue owned by the question's name.
    pub fn write_srv(&self, qname: &LowerName, out: &mut [u8; MAX_LEAF_ANSWER]) -> Written {
        let ttl = self.ttl();
        let weight = normalised_weight(self.entry.weight, effective_weight(self.entry.weight));
        let fixed = [
            self.entry.priority_or(self.priority).to_be_bytes(),
            weight.to_be_bytes(),
            self.entry.port.to_be_bytes(),
        ];
        let mut w = Cursor::new(out);
        w.record(rtype::SRV, ttl, &[fixed.as_flattened(), qname.wire()]);
        let answer_len = w.at;
        let address = match self.entry.host() {
            Host::V4(address) => Some(IpAddr::V4(address)),
            Host::V6(address) => Some(IpAddr::V6(address)),
            Host::None | Host::Name(_) => None,
        };
        if let Some(address) = address {
            w.address(ttl, address);
        }
        Written {
            answer_len,
            answer_count: 1,
            len: w.at,
            additional_count: u16::from(w.at > answer_len),
        }
    }
}
