//! Remaining lease TTLs. etcd v3 has no per-key TTL: a key attached to a lease lives as long as
//! the lease, and `LeaseTimeToLive` says how long that is. It plays the part of SkyDNS's v2 node
//! TTL (docs/skydns-semantics.md, "TTLs" and "etcd v3 and leases"): a leased record answers with
//! min(record ttl, remaining lease TTL), and a record ttl of 0 means the remaining lease TTL.
//!
//! One lookup per lease, not per key, cached with the instant it was made: the remaining TTL
//! then counts down locally. A lease kept alive by its owner jumps back up, so each one is looked
//! up again after a third of its granted TTL (keep-alive clients renew at about that pace).
//! Between lookups the local count can only be lower than the truth, never higher: an answer
//! never promises a record for longer than etcd would keep it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The shortest time between two lookups of one lease.
const MIN_REFRESH: Duration = Duration::from_secs(1);
/// The longest time between two lookups of one lease.
const MAX_REFRESH: Duration = Duration::from_secs(60);

/// A lease's TTL as etcd last reported it.
#[derive(Debug, Clone, Copy)]
struct Reported {
    /// Seconds left when looked up; negative when the lease no longer exists.
    ttl: i64,
    /// Seconds the lease was granted (or last renewed) for.
    granted: i64,
    /// When it was looked up.
    at: Instant,
}

/// Leases by ID with their last reported TTL.
#[derive(Debug, Default)]
pub(super) struct LeaseTtls(HashMap<i64, Reported>);

impl LeaseTtls {
    /// Records what `LeaseTimeToLive` said about `lease` at `at`.
    pub(super) fn record(&mut self, lease: i64, ttl: i64, granted: i64, at: Instant) {
        self.0.insert(lease, Reported { ttl, granted, at });
    }

    /// Seconds `lease` has left at `now`, at least 1; `None` when it was never looked up. A lease
    /// that is gone or at its end answers 1: etcd is about to delete its keys.
    pub(super) fn remaining(&self, lease: i64, now: Instant) -> Option<u32> {
        let r = self.0.get(&lease)?;
        let elapsed = i64::try_from(now.saturating_duration_since(r.at).as_secs()).unwrap_or(i64::MAX);
        let left = r.ttl.saturating_sub(elapsed).max(1);
        Some(u32::try_from(left).unwrap_or(u32::MAX))
    }

    /// Which of `leases` need a lookup at `now`: never looked up, looked up more than a third of
    /// their granted TTL ago, or counted down to their end (renewed, or about to be deleted).
    pub(super) fn due(&self, leases: impl IntoIterator<Item = i64>, now: Instant) -> Vec<i64> {
        let mut due: Vec<i64> = leases
            .into_iter()
            .filter(|lease| match self.0.get(lease) {
                None => true,
                Some(r) => {
                    let third = Duration::from_secs(u64::try_from(r.granted / 3).unwrap_or(0));
                    let age = now.saturating_duration_since(r.at);
                    age >= third.clamp(MIN_REFRESH, MAX_REFRESH)
                        || (age >= MIN_REFRESH && self.remaining(*lease, now) == Some(1))
                }
            })
            .collect();
        due.sort_unstable();
        due.dedup();
        due
    }

    /// Which of `leases` were never looked up.
    pub(super) fn unknown(&self, leases: impl IntoIterator<Item = i64>) -> Vec<i64> {
        leases.into_iter().filter(|lease| !self.0.contains_key(lease)).collect()
    }

    /// Forgets every lease for which `keep` is false (no key uses it any more).
    pub(super) fn retain(&mut self, mut keep: impl FnMut(i64) -> bool) {
        self.0.retain(|lease, _| keep(*lease));
    }
}

/// SkyDNS's `calculateTtl` with the lease in the role of the etcd node TTL, for the value the
/// builder reads: a record ttl of 0 means the lease's; otherwise the smaller of the two. An
/// unknown lease leaves the record ttl as it is (and 0 then means the configured default).
pub(super) fn fold(record_ttl: u32, lease_remaining: Option<u32>) -> u32 {
    match lease_remaining {
        None => record_ttl,
        Some(left) if record_ttl == 0 => left,
        Some(left) => record_ttl.min(left),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remaining_ttl_counts_down_and_stops_at_one() {
        let t0 = Instant::now();
        let mut leases = LeaseTtls::default();
        assert_eq!(leases.remaining(7, t0), None);
        leases.record(7, 10, 10, t0);
        assert_eq!(leases.remaining(7, t0), Some(10));
        assert_eq!(leases.remaining(7, t0 + Duration::from_millis(2500)), Some(8));
        assert_eq!(leases.remaining(7, t0 + Duration::from_secs(30)), Some(1));
        leases.record(8, -1, 0, t0);
        assert_eq!(leases.remaining(8, t0), Some(1), "a lease etcd no longer has");
    }

    #[test]
    fn leases_are_looked_up_again_after_a_third_of_their_ttl() {
        let t0 = Instant::now();
        let mut leases = LeaseTtls::default();
        leases.record(1, 30, 30, t0);
        leases.record(2, 3, 3, t0);
        leases.record(3, 600, 600, t0);
        assert_eq!(leases.due([1, 2, 3, 4, 4], t0), [4]);
        assert_eq!(leases.unknown([1, 4]), [4]);
        assert_eq!(leases.due([1, 2, 3], t0 + Duration::from_secs(1)), [2]);
        assert_eq!(leases.due([1, 2, 3], t0 + Duration::from_secs(10)), [1, 2]);
        assert_eq!(leases.due([1, 2, 3], t0 + Duration::from_secs(60)), [1, 2, 3]);
        leases.retain(|lease| lease != 2);
        assert_eq!(leases.remaining(2, t0), None);
    }

    #[test]
    fn folding_follows_skydns_calculate_ttl() {
        assert_eq!(fold(0, Some(5)), 5);
        assert_eq!(fold(60, Some(5)), 5);
        assert_eq!(fold(3, Some(5)), 3);
        assert_eq!(fold(60, None), 60);
        assert_eq!(fold(0, None), 0);
    }
}
