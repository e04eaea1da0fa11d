//! Capped, jittered exponential backoff between attempts to list or watch, so that a fleet of
//! servers that lost the API server together does not return to it in lockstep.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

/// The pause after the first failure.
const FIRST: Duration = Duration::from_millis(200);
/// The longest pause: the API server's return shows in answers within about this long.
const CAP: Duration = Duration::from_secs(5);

/// The pauses of one watch: doubling after every failure up to [`CAP`], each drawn uniformly
/// from the upper half of the current step; back to the start after a success.
#[derive(Debug)]
pub struct Backoff {
    step: Duration,
    random: RandomState,
    draws: u64,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            step: FIRST,
            random: RandomState::new(),
            draws: 0,
        }
    }
}

impl Iterator for Backoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let step = self.step;
        self.step = (step * 2).min(CAP);
        self.draws += 1;
        let half = step / 2;
        let span = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
        Some(half + Duration::from_micros(self.random.hash_one(self.draws) % span))
    }
}

impl kube::runtime::utils::Backoff for Backoff {
    fn reset(&mut self) {
        self.step = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::utils::Backoff as _;

    #[test]
    fn pauses_grow_to_the_cap_with_jitter_and_reset() {
        let mut b = Backoff::default();
        let pauses: Vec<Duration> = b.by_ref().take(12).collect();
        assert!(pauses[0] >= FIRST / 2 && pauses[0] <= FIRST, "{pauses:?}");
        assert!(pauses.iter().all(|p| *p <= CAP), "{pauses:?}");
        assert!(pauses[11] >= CAP / 2, "{pauses:?}");
        b.reset();
        assert!(b.next().is_some_and(|p| p <= FIRST));
    }
}
