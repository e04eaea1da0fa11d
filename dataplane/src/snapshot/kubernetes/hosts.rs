//! The cluster names that answer with one address, or point to one name, kept as two compact
//! tables instead of one node with compiled answers each.
//!
//! CoreDNS compatibility gives every endpoint two names of its own, `<endpoint>.<svc>.<ns>.svc`
//! and its PTR: at 100k endpoints they are most of the cluster zones, and as nodes they cost
//! about 600 bytes an endpoint (a hash-table slot, the name, the node, an A, an SRV with its glue
//! and a PTR answer compiled apart). Here an endpoint name is its name, its address and its
//! ports, and a PTR its address and target, about 200 bytes together; the answer path writes
//! their records when the node lookup misses (see [`Hosts::get`]), byte for byte as the node they
//! replace would answer ([`Hosts::take`] compiles that node, and the tests compare the two).
//!
//! Like [`crate::snapshot::Nodes`], the tables are split into shards shared between snapshots
//! until a change writes one, so that an update copies what it writes, not the tables.

use super::model::ServicePort;
use super::names::{reverse, reversed, unreverse};
use super::sets::{address_answers, single, srv_weighted, weight, SrvEntry};
use crate::snapshot::rrset::{AnswerSet, CompiledAnswer, Rdata};
use crate::snapshot::written::{Cursor, Written};
use crate::snapshot::{Below, Node, Slot};
use crate::wire::types::{rtype, HEADER_LEN};
use crate::wire::{LowerName, Name};
use foldhash::fast::RandomState;
use hashbrown::HashTable;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::Arc;

/// Most distinct ports an endpoint name in the table has; one with more is a node.
pub const MAX_PORTS: usize = 4;

/// Longest record a host's answer holds: an SRV record with the longest target.
const MAX_RECORD: usize = 2 + 10 + 6 + 255;

/// Bytes a host's answer may take: [`MAX_PORTS`] SRV records and their glue.
pub const MAX_ANSWER: usize = MAX_PORTS * MAX_RECORD + 2 + 10 + 16;

/// Shards of each table: an update copies the shards it writes, about 1,600 entries each at
/// 100k endpoints.
const SHARDS: usize = 64;

/// An endpoint name (or a verified pod's, or an OpenShift endpoint's): one address, and SRV
/// records naming itself on its ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The name's wire form, shared with the PTR that names it (see [`Hosts::shared`]).
    name: Arc<[u8]>,
    zone: u16,
    address: IpAddr,
    /// CoreDNS's weight, from the count of ports before duplicates were removed.
    weight: u16,
    /// Distinct ports in the order first given; the first `count` are used.
    ports: [u16; MAX_PORTS],
    count: u8,
}

impl Named {
    /// The entry of `name` in the zone of index `zone`, answering with `addresses` and an SRV
    /// record per port of `ports` (duplicates included, as for [`super::sets::srv_answer`]).
    /// `name` is given back, to be a node, unless it has exactly one address and at most
    /// [`MAX_PORTS`] distinct ports.
    pub fn new(name: Name, zone: u16, addresses: &[IpAddr], ports: &[&ServicePort]) -> Result<Named, Name> {
        let [address] = *addresses else { return Err(name) };
        let mut distinct = [0; MAX_PORTS];
        let mut count = 0;
        for port in ports {
            if distinct[..count].contains(&port.port) {
                continue;
            }
            let Some(slot) = distinct.get_mut(count) else {
                return Err(name);
            };
            *slot = port.port;
            count += 1;
        }
        Ok(Named {
            name: name.wire().into(),
            zone,
            address,
            weight: weight(ports.len()),
            ports: distinct,
            count: count as u8,
        })
    }

    fn ports(&self) -> &[u16] {
        &self.ports[..usize::from(self.count)]
    }

    /// The node the entry stands for, compiled as the builder compiles endpoint names.
    fn node(&self, ttl: u32) -> Node {
        let name = named(&self.name);
        let (a, aaaa) = address_answers(ttl, &[self.address]);
        let entries: Vec<SrvEntry<'_>> = self
            .ports()
            .iter()
            .map(|&port| SrvEntry {
                port,
                target: name.clone(),
                addresses: std::slice::from_ref(&self.address),
            })
            .collect();
        let srv = srv_weighted(ttl, self.weight, &entries);
        compiled_node(&name, self.zone, [(Slot::A, a), (Slot::Aaaa, aaaa), (Slot::Srv, srv)])
    }
}

/// The name of a wire form the tables hold, which is valid.
fn named(wire: &[u8]) -> Name {
    Name::from_wire(wire).unwrap_or_else(|_| Name::root())
}

/// A reverse name with one PTR record, kept by its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer {
    address: IpAddr,
    zone: u16,
    /// The target's wire form.
    target: Arc<[u8]>,
}

impl Pointer {
    /// The PTR of `address`, in the zone of index `zone`, to the name of wire form `target`.
    pub fn new(address: IpAddr, zone: u16, target: Arc<[u8]>) -> Pointer {
        Pointer { address, zone, target }
    }

    fn node(&self, ttl: u32) -> Node {
        let ptr = single(ttl, Rdata::Ptr(named(&self.target)));
        compiled_node(&reverse(self.address), self.zone, [(Slot::Ptr, Some(ptr))])
    }
}

/// The node of `name` with `answers`, compiled for it as the builder compiles a node's.
fn compiled_node<const N: usize>(name: &Name, zone: u16, answers: [(Slot, Option<AnswerSet>); N]) -> Node {
    let qname = LowerName::from_wire(name.wire()).unwrap_or_default();
    let answers = answers
        .into_iter()
        .filter_map(|(slot, set)| set.map(|set| (slot, CompiledAnswer::compile(&qname, &set))));
    Node::with_answers(zone, Below::Nothing, answers)
}

/// A name found in the tables, as the answer path sees it.
#[derive(Debug, Clone, Copy)]
pub struct Host<'a> {
    ttl: u32,
    entry: Entry<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Entry<'a> {
    Named(&'a Named),
    Pointer(&'a Pointer),
}

impl Host<'_> {
    /// Where the entry's name (or target) lies: the same in two snapshots that carried the
    /// entry over, even in a copied shard, and another for an entry compiled again.
    #[cfg(test)]
    pub fn entry_address(&self) -> usize {
        match self.entry {
            Entry::Named(named) => Arc::as_ptr(&named.name).cast::<u8>() as usize,
            Entry::Pointer(pointer) => Arc::as_ptr(&pointer.target).cast::<u8>() as usize,
        }
    }

    /// Writes the records answering `qtype` at `qname` (the name found) into `out`, as the
    /// node's compiled answer holds them: owners and names equal to a suffix of the query name
    /// as pointers into the question, SRV targets written out. `None`: no data of that type.
    pub fn write(&self, qname: &LowerName, qtype: u16, out: &mut [u8; MAX_ANSWER]) -> Option<Written> {
        let mut w = Cursor::new(out);
        let ttl = self.ttl;
        let (answer_count, additional_count) = match (self.entry, qtype) {
            (Entry::Named(named), rtype::A) if named.address.is_ipv4() => {
                w.address(ttl, named.address);
                (1, 0)
            }
            (Entry::Named(named), rtype::AAAA) if named.address.is_ipv6() => {
                w.address(ttl, named.address);
                (1, 0)
            }
            (Entry::Named(named), rtype::SRV) if named.count > 0 => {
                let target = &named.name[..];
                for &port in named.ports() {
                    let fixed = [[0, 0], named.weight.to_be_bytes(), port.to_be_bytes()];
                    w.record(rtype::SRV, ttl, &[fixed.as_flattened(), target]);
                }
                let answer_len = w.at;
                w.address(ttl, named.address);
                return Some(Written {
                    answer_len,
                    answer_count: u16::from(named.count),
                    len: w.at,
                    additional_count: 1,
                });
            }
            (Entry::Pointer(pointer), rtype::PTR) => {
                let mut target = [0u8; 255];
                let len = compressed(&pointer.target, qname, &mut target);
                w.record(rtype::PTR, ttl, &[&target[..len]]);
                (1, 0)
            }
            _ => return None,
        };
        Some(Written {
            answer_len: w.at,
            answer_count,
            len: w.at,
            additional_count,
        })
    }
}

/// `name` written into `out` as [`crate::wire::writer::RrWriter::name`] writes it: ending in
/// a pointer to the longest suffix of the query name it shares. Returns the length written.
fn compressed(name: &[u8], qname: &LowerName, out: &mut [u8; 255]) -> usize {
    let mut pos = 0;
    while name[pos] != 0 {
        let suffix = &name[pos..];
        if let Some(i) = (0..qname.label_count()).find(|&i| qname.suffix(i) == suffix) {
            let pointer = 0xC000 | (HEADER_LEN + qname.label_start(i)) as u16;
            out[pos..pos + 2].copy_from_slice(&pointer.to_be_bytes());
            return pos + 2;
        }
        let len = usize::from(name[pos]);
        out[pos..pos + 1 + len].copy_from_slice(&name[pos..pos + 1 + len]);
        pos += 1 + len;
    }
    out[pos] = 0;
    pos + 1
}

/// A table's entries, found by their key's hash.
trait Keyed: Clone {
    type Key: ?Sized + std::hash::Hash + PartialEq;
    fn key(&self) -> &Self::Key;
}

impl Keyed for Named {
    type Key = [u8];
    fn key(&self) -> &[u8] {
        &self.name
    }
}

impl Keyed for Pointer {
    type Key = IpAddr;
    fn key(&self) -> &IpAddr {
        &self.address
    }
}

/// One table, sharded; no shards at all while it is empty.
#[derive(Debug, Clone)]
struct Table<T> {
    shards: Vec<Arc<HashTable<T>>>,
    len: usize,
}

impl<T> Default for Table<T> {
    fn default() -> Table<T> {
        Table {
            shards: Vec::new(),
            len: 0,
        }
    }
}

fn shard_of(hash: u64) -> usize {
    // The table inside a shard reads the low bits and the top seven.
    (hash >> 40) as usize % SHARDS
}

impl<T: Keyed> Table<T> {
    fn get(&self, hash: u64, key: &T::Key) -> Option<&T> {
        self.shards.get(shard_of(hash))?.find(hash, |e| e.key() == key)
    }

    /// Sets `entry`, unless the same is there already (which would copy its shard for nothing).
    fn insert(&mut self, state: &RandomState, entry: T)
    where
        T: PartialEq,
    {
        if self.shards.is_empty() {
            self.shards = (0..SHARDS).map(|_| Arc::new(HashTable::new())).collect();
        }
        let hash = state.hash_one(entry.key());
        let shard = &mut self.shards[shard_of(hash)];
        if shard.find(hash, |e| e.key() == entry.key()) == Some(&entry) {
            return;
        }
        let shard = Arc::make_mut(shard);
        match shard.find_mut(hash, |e| e.key() == entry.key()) {
            Some(old) => *old = entry,
            None => {
                shard.insert_unique(hash, entry, |e| state.hash_one(e.key()));
                self.len += 1;
            }
        }
    }

    fn remove(&mut self, state: &RandomState, key: &T::Key) -> Option<T> {
        let hash = state.hash_one(key);
        let shard = self.shards.get_mut(shard_of(hash))?;
        shard.find(hash, |e| e.key() == key)?;
        let (entry, _) = Arc::make_mut(shard).find_entry(hash, |e| e.key() == key).ok()?.remove();
        self.len -= 1;
        Some(entry)
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.shards.iter().flat_map(|shard| shard.iter())
    }

    fn set_zones(&mut self, zone: impl Fn(&mut T)) {
        for shard in &mut self.shards {
            Arc::make_mut(shard).iter_mut().for_each(&zone);
        }
    }
}

/// The cluster names kept as tables rather than nodes: a name is in one or the other, never
/// both, and a node always answers first.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    ttl: u32,
    state: RandomState,
    names: Table<Named>,
    pointers: Table<Pointer>,
}

impl Hosts {
    /// Empty tables whose records carry `ttl`.
    pub fn new(ttl: u32) -> Hosts {
        Hosts {
            ttl,
            ..Hosts::default()
        }
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.names.len + self.pointers.len
    }

    /// Whether there are no names.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name `qname`, if the tables hold it. Allocation-free, for the query path: a name
    /// hashed once, and a reverse name read as its address.
    #[inline]
    pub fn get(&self, qname: &LowerName) -> Option<Host<'_>> {
        if self.is_empty() {
            return None;
        }
        let wire = qname.wire();
        let entry = match self.names.get(self.state.hash_one(wire), wire) {
            Some(named) => Entry::Named(named),
            None => {
                let address = reversed(qname)?;
                Entry::Pointer(self.pointers.get(self.state.hash_one(address), &address)?)
            }
        };
        Some(Host { ttl: self.ttl, entry })
    }

    /// Whether the tables hold `name`.
    pub fn contains(&self, name: &Name) -> bool {
        LowerName::from_wire(name.wire()).is_ok_and(|qname| self.get(&qname).is_some())
    }

    /// The wire form of `name` to keep in a PTR: that of its entry, if the tables hold it, so
    /// that an endpoint's name and its PTR share one allocation.
    pub fn shared(&self, name: &Name) -> Arc<[u8]> {
        let wire = name.wire();
        match self.names.get(self.state.hash_one(wire), wire) {
            Some(named) => Arc::clone(&named.name),
            None => wire.into(),
        }
    }

    /// Removes `name` and returns the node it stands for: where a node must answer it
    /// instead (another source holds a node of that name, which would answer first).
    pub fn take(&mut self, name: &Name) -> Option<Node> {
        let taken = self.remove(name)?;
        Some(self.node_of(&taken))
    }

    /// Removes `name`, if the tables hold it, and returns it.
    pub fn remove(&mut self, name: &Name) -> Option<Compact> {
        if self.is_empty() {
            return None;
        }
        if let Some(named) = self.names.remove(&self.state, name.wire()) {
            return Some(Compact::Named(named));
        }
        let address = unreverse(name)?;
        self.pointers.remove(&self.state, &address).map(Compact::Pointer)
    }

    /// Every name with the node it stands for, in no particular order: for comparisons and
    /// accounting, not for answering.
    pub fn nodes(&self) -> impl Iterator<Item = (Name, Node)> + '_ {
        let named = self.names.iter().map(|n| (named(&n.name), n.node(self.ttl)));
        let pointers = self.pointers.iter().map(|p| (reverse(p.address), p.node(self.ttl)));
        named.chain(pointers)
    }

    /// Moves every name to the zone `map` gives for its zone's index.
    pub fn set_zones(&mut self, map: impl Fn(u16) -> u16) {
        self.names.set_zones(|n| n.zone = map(n.zone));
        self.pointers.set_zones(|p| p.zone = map(p.zone));
    }

    /// Every name, taken out: for an update that moves the names it compiled into the
    /// served snapshot's tables (or into nodes, see [`Hosts::take`]).
    pub fn into_names(self) -> Vec<Compact> {
        let named = self.names.iter().cloned().map(Compact::Named);
        let pointers = self.pointers.iter().cloned().map(Compact::Pointer);
        named.chain(pointers).collect()
    }

    /// Adds `name`, replacing one of the same name; the same entry already there is kept, so
    /// that its shard is not copied for nothing.
    pub fn insert(&mut self, name: Compact) {
        match name {
            Compact::Named(named) => self.names.insert(&self.state, named),
            Compact::Pointer(pointer) => self.pointers.insert(&self.state, pointer),
        }
    }

    /// The node `name` stands for, compiled with these tables' TTL.
    pub fn node_of(&self, name: &Compact) -> Node {
        match name {
            Compact::Named(named) => named.node(self.ttl),
            Compact::Pointer(pointer) => pointer.node(self.ttl),
        }
    }
}

/// One name of the tables, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compact {
    /// An endpoint name.
    Named(Named),
    /// A PTR.
    Pointer(Pointer),
}

impl Compact {
    /// The name.
    pub fn name(&self) -> Name {
        match self {
            Compact::Named(entry) => named(&entry.name),
            Compact::Pointer(pointer) => reverse(pointer.address),
        }
    }
}
