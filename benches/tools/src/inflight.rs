//! The queries sent and not yet answered, keyed by DNS message ID.
//!
//! IDs are handed out from a shuffled ring and go back to its end when a query is answered or
//! given up on, so an ID is not reused until most of the 65,536 have been: a reply arriving
//! after its query timed out then finds no live query rather than a wrong one.

use crate::rng::SplitMix64;
use std::collections::VecDeque;

/// The number of distinct DNS message IDs.
pub const IDS: usize = 1 << 16;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    live: bool,
    /// Bumped on every use of the ID, so a stale entry in the send-order queue is recognised.
    generation: u32,
    sent_at: u64,
    query: u32,
}

/// A query that got its reply: which one it was and when it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    /// Index of the query in the query file.
    pub query: u32,
    /// Send time, in the caller's clock.
    pub sent_at: u64,
}

/// Outstanding queries: at most [`IDS`] at once.
#[derive(Debug)]
pub struct Inflight {
    slots: Vec<Slot>,
    free: VecDeque<u16>,
    /// (ID, generation) in send order, for finding the oldest live query.
    order: VecDeque<(u16, u32)>,
    outstanding: usize,
}

impl Inflight {
    /// An empty table whose ID order follows from `seed`.
    pub fn new(seed: u64) -> Inflight {
        let mut ids: Vec<u16> = (0..=u16::MAX).collect();
        let mut rng = SplitMix64::new(seed);
        for i in (1..ids.len()).rev() {
            ids.swap(i, rng.below(i as u64 + 1) as usize);
        }
        Inflight {
            slots: vec![Slot::default(); IDS],
            free: ids.into(),
            order: VecDeque::with_capacity(IDS),
            outstanding: 0,
        }
    }

    /// Queries sent and neither answered nor expired.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Takes an ID for query number `query` sent at `now`; `None` when all IDs are in use.
    pub fn begin(&mut self, query: u32, now: u64) -> Option<u16> {
        let id = self.free.pop_front()?;
        let slot = &mut self.slots[usize::from(id)];
        slot.live = true;
        slot.generation = slot.generation.wrapping_add(1);
        slot.sent_at = now;
        slot.query = query;
        self.order.push_back((id, slot.generation));
        self.outstanding += 1;
        Some(id)
    }

    /// Returns an ID taken by [`Inflight::begin`] whose query could not be sent.
    pub fn cancel(&mut self, id: u16) {
        self.finish(id);
    }

    /// The query a reply with `id` answers, which is then no longer outstanding; `None` when no
    /// query with that ID is outstanding (a late or duplicate reply).
    pub fn complete(&mut self, id: u16) -> Option<Answered> {
        let slot = self.slots[usize::from(id)];
        if !slot.live {
            return None;
        }
        self.finish(id);
        Some(Answered {
            query: slot.query,
            sent_at: slot.sent_at,
        })
    }

    /// Gives up on every query sent at or before `deadline`; returns how many.
    pub fn expire(&mut self, deadline: u64) -> usize {
        let mut expired = 0;
        while let Some(&(id, generation)) = self.order.front() {
            let slot = self.slots[usize::from(id)];
            if slot.live && slot.generation == generation {
                if slot.sent_at > deadline {
                    break;
                }
                self.finish(id);
                expired += 1;
            }
            self.order.pop_front();
        }
        expired
    }

    /// Send time of the oldest outstanding query.
    pub fn oldest(&mut self) -> Option<u64> {
        while let Some(&(id, generation)) = self.order.front() {
            let slot = self.slots[usize::from(id)];
            if slot.live && slot.generation == generation {
                return Some(slot.sent_at);
            }
            self.order.pop_front();
        }
        None
    }

    fn finish(&mut self, id: u16) {
        let slot = &mut self.slots[usize::from(id)];
        if slot.live {
            slot.live = false;
            self.outstanding -= 1;
            self.free.push_back(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_completes_its_query_once() {
        let mut t = Inflight::new(1);
        let id = t.begin(7, 100).unwrap();
        assert_eq!(t.outstanding(), 1);
        assert_eq!(t.complete(id), Some(Answered { query: 7, sent_at: 100 }));
        assert_eq!(t.complete(id), None);
        assert_eq!(t.outstanding(), 0);
    }

    #[test]
    fn only_queries_past_the_deadline_expire() {
        let mut t = Inflight::new(2);
        let a = t.begin(0, 10).unwrap();
        let b = t.begin(1, 20).unwrap();
        let c = t.begin(2, 30).unwrap();
        t.complete(a);
        assert_eq!(t.oldest(), Some(20));
        assert_eq!(t.expire(25), 1);
        assert_eq!(t.complete(b), None);
        assert_eq!(t.outstanding(), 1);
        assert!(t.complete(c).is_some());
        assert_eq!(t.oldest(), None);
    }

    #[test]
    fn ids_are_not_reused_until_the_others_have_been() {
        let mut t = Inflight::new(3);
        let first = t.begin(0, 0).unwrap();
        t.complete(first);
        for i in 1..IDS as u32 - 1 {
            let id = t.begin(i, 0).unwrap();
            assert_ne!(id, first);
            t.complete(id);
        }
        let mut ids = std::collections::HashSet::new();
        for i in 0..IDS as u32 {
            assert!(ids.insert(t.begin(i, 0).unwrap()));
        }
        assert_eq!(t.begin(0, 0), None);
    }

    #[test]
    fn a_cancelled_id_is_free_again() {
        let mut t = Inflight::new(4);
        let id = t.begin(0, 0).unwrap();
        t.cancel(id);
        assert_eq!(t.outstanding(), 0);
        assert_eq!(t.complete(id), None);
        assert_eq!(t.expire(u64::MAX), 0);
    }
}
