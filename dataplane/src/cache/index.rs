//! The cache's index: each key's hash to the slot holding its entry.
//!
//! Every cache hit looks its hash up here, so the table is the simplest that answers in a few
//! instructions: open addressing with linear probing over (hash, slot) pairs, at most half
//! full, the hash's low bits picking the first bucket. The hashes are keyed and well mixed
//! (`Cache::hash`), so clients cannot crowd one run of buckets. A general hash table's probe of
//! 16-bucket groups cost a hit twice as much. Removal shifts the run after the hole back, so
//! no tombstones slow later probes.

/// A bucket's slot when it is empty.
const EMPTY: u32 = u32::MAX;

/// Fewest buckets a table with entries has.
const MIN_BUCKETS: usize = 16;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    hash: u64,
    slot: u32,
}

const VACANT: Bucket = Bucket { hash: 0, slot: EMPTY };

/// Hash to slot, one slot per hash.
#[derive(Debug, Default)]
pub(super) struct Index {
    buckets: Box<[Bucket]>,
    len: usize,
}

impl Index {
    /// Number of hashes held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Whether no hash is held.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot of `hash`.
    #[inline(always)]
    pub(super) fn get(&self, hash: u64) -> Option<u32> {
        let mask = self.buckets.len().checked_sub(1)?;
        let mut i = hash as usize & mask;
        loop {
            let bucket = self.buckets[i];
            if bucket.slot == EMPTY {
                return None;
            }
            if bucket.hash == hash {
                return Some(bucket.slot);
            }
            i = (i + 1) & mask;
        }
    }

    /// Sets the slot of `hash`, replacing the one it had.
    pub(super) fn set(&mut self, hash: u64, slot: u32) {
        debug_assert!(slot != EMPTY);
        if (self.len + 1) * 2 > self.buckets.len() {
            self.grow();
        }
        let mask = self.buckets.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let bucket = &mut self.buckets[i];
            if bucket.slot == EMPTY {
                *bucket = Bucket { hash, slot };
                self.len += 1;
                return;
            }
            if bucket.hash == hash {
                bucket.slot = slot;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Removes `hash` if it maps to `slot` (a hash set again since points elsewhere, and
    /// stays).
    pub(super) fn remove(&mut self, hash: u64, slot: u32) {
        let Some(mask) = self.buckets.len().checked_sub(1) else {
            return;
        };
        let mut hole = hash as usize & mask;
        loop {
            let bucket = self.buckets[hole];
            if bucket.slot == EMPTY {
                return;
            }
            if bucket.hash == hash {
                if bucket.slot != slot {
                    return;
                }
                break;
            }
            hole = (hole + 1) & mask;
        }
        // Close the hole: a later bucket of the run moves into it unless its own first bucket
        // lies after the hole, where a probe for it would still start past the hole.
        let mut i = (hole + 1) & mask;
        loop {
            let bucket = self.buckets[i];
            if bucket.slot == EMPTY {
                break;
            }
            let home = bucket.hash as usize & mask;
            if i.wrapping_sub(home) & mask >= i.wrapping_sub(hole) & mask {
                self.buckets[hole] = bucket;
                hole = i;
            }
            i = (i + 1) & mask;
        }
        self.buckets[hole] = VACANT;
        self.len -= 1;
    }

    fn grow(&mut self) {
        let buckets = (self.buckets.len() * 2).max(MIN_BUCKETS);
        let old = std::mem::replace(&mut self.buckets, vec![VACANT; buckets].into_boxed_slice());
        self.len = 0;
        for bucket in old.iter().filter(|b| b.slot != EMPTY) {
            self.set(bucket.hash, bucket.slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A small generator, so that the sequence is the same on every run.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn sets_and_removals_agree_with_a_map_through_growth_and_crowded_runs() {
        let mut index = Index::default();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut state = 0x2545_F491_4F6C_DD1D;
        for round in 0..20_000u32 {
            // Few distinct low bits, at the start and at the end of any table, so that runs
            // are long and wrap around the table's end.
            let r = next(&mut state);
            let low = if r & 1 == 0 { r >> 60 } else { 0xFFFF_FFF0 | (r >> 60) };
            let hash = (r % 64) << 40 | low;
            match r % 5 {
                0 | 1 => {
                    index.set(hash, round);
                    model.insert(hash, round);
                }
                2 => {
                    let slot = model.get(&hash).copied().unwrap_or(round);
                    index.remove(hash, slot);
                    model.remove(&hash);
                }
                3 => {
                    // A removal naming another slot leaves the hash where it is.
                    index.remove(hash, round + 1);
                }
                _ => {}
            }
            assert_eq!(index.get(hash), model.get(&hash).copied(), "round {round}");
            assert_eq!(index.len(), model.len());
        }
        for (&hash, &slot) in &model {
            assert_eq!(index.get(hash), Some(slot));
        }
        assert!(index.buckets.len() >= 2 * index.len());
    }

    #[test]
    fn an_empty_index_finds_nothing_and_removes_nothing() {
        let mut index = Index::default();
        assert!(index.is_empty());
        assert_eq!(index.get(7), None);
        index.remove(7, 1);
        index.set(7, 1);
        index.remove(7, 1);
        assert!(index.is_empty() && index.get(7).is_none());
    }
}
