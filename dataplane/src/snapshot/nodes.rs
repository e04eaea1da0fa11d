//! The names of a snapshot, split into shards that snapshots share until one of them changes.
//!
//! A change to one name must not cost a copy of every name: a new snapshot starts as a clone of
//! the previous one's [`Nodes`] (one reference count per shard), and writing a name copies only
//! the shard that holds it. Lookups hash the name once; the hash picks the shard and then the
//! slot within it, so sharding costs the answer path one pointer more than a single table.

mod shard;

use super::Node;
use crate::wire::name::name_hash as hash;
use crate::wire::{LowerName, Name};
use shard::Shard;
use std::sync::Arc;

/// Number of shards: enough that one shard of a million names (about 250) copies in tens of
/// microseconds (a copy clones each name and node of the shard, and a change writes several
/// shards: a name, its ancestors, its PTR names), few enough that an empty snapshot stays small
/// (32 KiB of shard pointers).
const SHARDS: usize = 4096;

/// Bits of the hash that pick the shard. The index inside a shard takes its first bucket from
/// the low bits, so the shard uses bits above those.
const SHARD_SHIFT: u32 = 40;

/// Every existing name of a snapshot with its node, keyed by lower-cased wire name; or, with
/// another `V`, any per-name data that snapshots share the same way (the DNSSEC signatures).
#[derive(Debug, Clone)]
pub struct Nodes<V = Node> {
    shards: Box<[Arc<Shard<V>>]>,
    len: usize,
}

impl<V> Default for Nodes<V> {
    fn default() -> Nodes<V> {
        let empty = Arc::new(Shard::default());
        Nodes {
            shards: (0..SHARDS).map(|_| Arc::clone(&empty)).collect(),
            len: 0,
        }
    }
}

fn shard_of(hash: u64) -> usize {
    (hash >> SHARD_SHIFT) as usize % SHARDS
}

impl<V> Nodes<V> {
    /// The node of a lower-cased wire name.
    #[inline]
    pub fn get(&self, wire: &[u8]) -> Option<&V> {
        self.get_hashed(hash(wire), wire)
    }

    /// The node of a query's name, by the hash computed while the name was read.
    #[inline]
    pub fn get_lower(&self, name: &LowerName) -> Option<&V> {
        self.get_hashed(name.hash(), name.wire())
    }

    #[inline(always)]
    fn get_hashed(&self, h: u64, wire: &[u8]) -> Option<&V> {
        self.shards[shard_of(h)].get(h, wire).map(|(_, node)| node)
    }

    /// Whether the name has a node.
    pub fn contains_key(&self, name: &Name) -> bool {
        self.get(name.wire()).is_some()
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no names.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every name, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &Name> {
        self.iter().map(|(name, _)| name)
    }

    /// Every name with its node, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Name, &V)> {
        self.shards
            .iter()
            .flat_map(|shard| shard.iter().map(|(name, node)| (name, node)))
    }
}

impl<V: Clone> Nodes<V> {
    /// The node of `name`, to change in place; copies its shard if another snapshot shares it.
    pub fn get_mut(&mut self, name: &Name) -> Option<&mut V> {
        let h = hash(name.wire());
        Arc::make_mut(&mut self.shards[shard_of(h)]).get_mut(h, name)
    }

    /// Sets the node of `name`, returning the one it replaces.
    pub fn insert(&mut self, name: Name, node: V) -> Option<V> {
        let h = hash(name.wire());
        let replaced = Arc::make_mut(&mut self.shards[shard_of(h)]).insert(h, name, node);
        if replaced.is_none() {
            self.len += 1;
        }
        replaced
    }

    /// Removes the node of `name`, if any.
    pub fn remove(&mut self, name: &Name) -> Option<V> {
        let h = hash(name.wire());
        let index = shard_of(h);
        self.shards[index].get(h, name.wire())?;
        let removed = Arc::make_mut(&mut self.shards[index]).remove(h, name)?;
        self.len -= 1;
        Some(removed)
    }

    /// Every node, to change in place; copies every shard another snapshot shares.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Name, &mut V)> {
        self.shards.iter_mut().flat_map(|shard| Arc::make_mut(shard).iter_mut())
    }
}

impl<V: Clone> FromIterator<(Name, V)> for Nodes<V> {
    fn from_iter<I: IntoIterator<Item = (Name, V)>>(iter: I) -> Nodes<V> {
        let mut nodes = Nodes::default();
        for (name, node) in iter {
            nodes.insert(name, node);
        }
        nodes
    }
}

impl<V> std::ops::Index<&Name> for Nodes<V> {
    type Output = V;

    /// The node of `name`; panics when there is none, as a map's index does.
    fn index(&self, name: &Name) -> &V {
        self.get(name.wire()).expect("no node for the name")
    }
}

impl<'a, V> IntoIterator for &'a Nodes<V> {
    type Item = (&'a Name, &'a V);
    type IntoIter = Box<dyn Iterator<Item = (&'a Name, &'a V)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Below;

    fn name(i: usize) -> Name {
        Name::from_dotted(&format!("n{i}.skydns.test.")).unwrap()
    }

    fn node(zone: u16) -> Node {
        Node::new(zone, Below::Nothing)
    }

    #[test]
    fn names_are_found_replaced_and_removed() {
        let mut nodes: Nodes = (0..1000).map(|i| (name(i), node(i as u16))).collect();
        assert_eq!(nodes.len(), 1000);
        assert_eq!(nodes.get(name(7).wire()).map(|n| n.zone()), Some(7));
        assert!(nodes.get(b"\x01x\x00").is_none());
        assert_eq!(nodes.insert(name(7), node(70)).map(|n| n.zone()), Some(7));
        assert_eq!(nodes.len(), 1000);
        assert_eq!(nodes.remove(&name(7)).map(|n| n.zone()), Some(70));
        assert!(nodes.remove(&name(7)).is_none());
        assert_eq!(nodes.len(), 999);
        assert!(!nodes.contains_key(&name(7)));
        nodes.get_mut(&name(8)).unwrap().set_zone(80);
        assert_eq!(nodes.get(name(8).wire()).unwrap().zone(), 80);
        assert_eq!(nodes.iter().count(), 999);
    }

    #[test]
    fn a_clone_shares_every_shard_until_one_name_changes() {
        let nodes: Nodes = (0..10_000).map(|i| (name(i), node(1))).collect();
        let mut next = nodes.clone();
        next.insert(name(3), node(2));
        let copied = nodes
            .shards
            .iter()
            .zip(next.shards.iter())
            .filter(|(a, b)| !Arc::ptr_eq(a, b))
            .count();
        assert_eq!(copied, 1);
        assert_eq!(nodes.get(name(3).wire()).unwrap().zone(), 1);
        assert_eq!(next.get(name(3).wire()).unwrap().zone(), 2);
    }
}
