//! One shard of [`super::Nodes`]: its names with their values, and an index over them that a
//! query probes inline.
//!
//! The index is open addressing with linear probing over 8-byte buckets, at most half full:
//! the name hash's low bits pick the first bucket, and a bucket holds 32 bits of the hash (its
//! tag) beside the entry's position. A lookup compares tags until an empty bucket and the name
//! only behind a matching tag; names whose tags are equal simply sit in one run. A general hash
//! table's probe of 16-bucket groups cost every answer from a node about twice as much.
//! Removal shifts the rest of a run back, so no tombstones slow later probes.

use crate::wire::name::{name_hash, same_wire};
use crate::wire::Name;

/// An empty bucket.
const EMPTY: u64 = 0;

/// Fewest buckets an index with entries has.
const MIN_BUCKETS: usize = 8;

/// The bucket of the entry at `at` whose name hashes to `hash`: the hash's upper half as the
/// tag, the position plus one (never 0) below it.
fn bucket(hash: u64, at: usize) -> u64 {
    (hash & 0xFFFF_FFFF_0000_0000) | (at as u64 + 1)
}

fn tag_matches(bucket: u64, hash: u64) -> bool {
    (bucket ^ hash) >> 32 == 0
}

fn position(bucket: u64) -> usize {
    (bucket & 0xFFFF_FFFF) as usize - 1
}

/// Names with their values, found by their [`name_hash`].
#[derive(Debug)]
pub(super) struct Shard<V> {
    buckets: Box<[u64]>,
    entries: Vec<(Name, V)>,
}

/// A copy keeps the entries' spare room: a snapshot's change copies the shard it writes, and a
/// copy sized to the entries it holds would double its memory on the insert that follows.
impl<V: Clone> Clone for Shard<V> {
    fn clone(&self) -> Shard<V> {
        let mut entries = Vec::with_capacity(self.entries.capacity());
        entries.extend_from_slice(&self.entries);
        Shard {
            buckets: self.buckets.clone(),
            entries,
        }
    }
}

impl<V> Default for Shard<V> {
    fn default() -> Shard<V> {
        Shard {
            buckets: Box::new([]),
            entries: Vec::new(),
        }
    }
}

impl<V> Shard<V> {
    /// The entry of the lower-case wire name `wire`, whose hash is `hash`.
    #[inline(always)]
    pub(super) fn get(&self, hash: u64, wire: &[u8]) -> Option<&(Name, V)> {
        let mask = self.buckets.len().checked_sub(1)?;
        let mut i = hash as usize & mask;
        loop {
            let bucket = self.buckets[i];
            if bucket == EMPTY {
                return None;
            }
            if tag_matches(bucket, hash) {
                let entry = &self.entries[position(bucket)];
                if same_wire(entry.0.wire(), wire) {
                    return Some(entry);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Where `name`'s entry is, in the index and in the entries: the walk of [`Shard::get`]
    /// for the writers. The answer path's own walk stays written out: with one walk taking its
    /// test as a closure, answers from a node measured 25 instructions more.
    fn find(&self, hash: u64, name: &Name) -> Option<(usize, usize)> {
        let mask = self.buckets.len().checked_sub(1)?;
        let mut i = hash as usize & mask;
        loop {
            let bucket = self.buckets[i];
            if bucket == EMPTY {
                return None;
            }
            if tag_matches(bucket, hash) && self.entries[position(bucket)].0 == *name {
                return Some((i, position(bucket)));
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of `name`, to change in place.
    pub(super) fn get_mut(&mut self, hash: u64, name: &Name) -> Option<&mut V> {
        let (_, at) = self.find(hash, name)?;
        Some(&mut self.entries[at].1)
    }

    /// Sets the value of `name`, returning the one it replaces.
    pub(super) fn insert(&mut self, hash: u64, name: Name, value: V) -> Option<V> {
        if let Some((_, at)) = self.find(hash, &name) {
            return Some(std::mem::replace(&mut self.entries[at].1, value));
        }
        if (self.entries.len() + 1) * 2 > self.buckets.len() {
            self.grow();
        }
        self.entries.push((name, value));
        self.place(hash, self.entries.len() - 1);
        None
    }

    /// Removes the entry of `name`, returning its value.
    pub(super) fn remove(&mut self, hash: u64, name: &Name) -> Option<V> {
        let (slot, at) = self.find(hash, name)?;
        self.vacate(slot);
        let last = self.entries.len() - 1;
        if at != last {
            // The last entry moves into the gap: its bucket follows it.
            let moved = name_hash(self.entries[last].0.wire());
            let (slot, _) = self
                .find(moved, &self.entries[last].0)
                .expect("every entry has a bucket");
            self.buckets[slot] = bucket(moved, at);
        }
        Some(self.entries.swap_remove(at).1)
    }

    /// Every entry, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &(Name, V)> {
        self.entries.iter()
    }

    /// Every entry, to change the values in place.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&Name, &mut V)> {
        self.entries.iter_mut().map(|(name, value)| (&*name, value))
    }

    /// Puts the bucket of the entry at `at`, whose name hashes to `hash`, in the first empty
    /// bucket of its run.
    fn place(&mut self, hash: u64, at: usize) {
        let mask = self.buckets.len() - 1;
        let mut i = hash as usize & mask;
        while self.buckets[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.buckets[i] = bucket(hash, at);
    }

    /// Empties bucket `hole` and closes the gap: a later bucket of the run moves into it unless
    /// its own first bucket lies after the hole, where a probe for it still starts past it.
    fn vacate(&mut self, mut hole: usize) {
        let mask = self.buckets.len() - 1;
        let mut i = (hole + 1) & mask;
        loop {
            let bucket = self.buckets[i];
            if bucket == EMPTY {
                break;
            }
            let home = name_hash(self.entries[position(bucket)].0.wire()) as usize & mask;
            if i.wrapping_sub(home) & mask >= i.wrapping_sub(hole) & mask {
                self.buckets[hole] = bucket;
                hole = i;
            }
            i = (i + 1) & mask;
        }
        self.buckets[hole] = EMPTY;
    }

    fn grow(&mut self) {
        let buckets = (self.buckets.len() * 2).max(MIN_BUCKETS);
        self.buckets = vec![EMPTY; buckets].into_boxed_slice();
        for at in 0..self.entries.len() {
            let hash = name_hash(self.entries[at].0.wire());
            self.place(hash, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn name(i: u32) -> Name {
        Name::from_dotted(&format!("n{i}.shard.test.")).unwrap()
    }

    /// A small generator, so that the sequence is the same on every run.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn inserts_and_removals_agree_with_a_map_through_growth() {
        let mut shard = Shard::default();
        let mut model: HashMap<u32, u32> = HashMap::new();
        let mut state = 0x9E37_79B9_7F4A_7C15;
        for round in 0..20_000u32 {
            let r = next(&mut state);
            // Up to 300 names in one shard: its index grows, and its runs are long and wrap.
            let i = (r % 300) as u32;
            let n = name(i);
            let h = name_hash(n.wire());
            match r % 7 {
                0..=2 => assert_eq!(shard.insert(h, n.clone(), round), model.insert(i, round)),
                3 | 4 => assert_eq!(shard.remove(h, &n), model.remove(&i)),
                5 => {
                    if let Some(value) = shard.get_mut(h, &n) {
                        *value += 1;
                    }
                    if let Some(value) = model.get_mut(&i) {
                        *value += 1;
                    }
                }
                _ => {}
            }
            assert_eq!(
                shard.get(h, n.wire()).map(|(_, v)| *v),
                model.get(&i).copied(),
                "round {round}"
            );
            assert_eq!(shard.entries.len(), model.len());
        }
        for (i, value) in &model {
            let n = name(*i);
            assert_eq!(shard.get(name_hash(n.wire()), n.wire()).map(|(_, v)| *v), Some(*value));
        }
        assert_eq!(shard.iter().count(), model.len());
        assert!(shard.buckets.len() >= 2 * model.len());
        assert_eq!(shard.buckets.iter().filter(|&&b| b != EMPTY).count(), model.len());
    }

    #[test]
    fn a_copy_keeps_the_room_of_the_original() {
        let mut shard = Shard::default();
        for i in 0..5 {
            let n = name(i);
            shard.insert(name_hash(n.wire()), n, i);
        }
        assert!(shard.entries.capacity() > shard.entries.len());
        let mut copy = shard.clone();
        assert_eq!(copy.entries.capacity(), shard.entries.capacity());
        let n = name(5);
        copy.insert(name_hash(n.wire()), n.clone(), 5);
        assert_eq!(
            copy.entries.capacity(),
            shard.entries.capacity(),
            "no growth on the next insert"
        );
        assert_eq!(copy.get(name_hash(n.wire()), n.wire()).map(|(_, v)| *v), Some(5));
        assert!(shard.get(name_hash(n.wire()), n.wire()).is_none());
    }

    #[test]
    fn an_empty_shard_finds_and_removes_nothing() {
        let mut shard: Shard<u32> = Shard::default();
        let n = name(1);
        let h = name_hash(n.wire());
        assert!(shard.get(h, n.wire()).is_none());
        assert!(shard.remove(h, &n).is_none());
        assert!(shard.get_mut(h, &n).is_none());
        assert_eq!(shard.insert(h, n.clone(), 5), None);
        assert_eq!(shard.remove(h, &n), Some(5));
        assert!(shard.get(h, n.wire()).is_none());
    }
}
