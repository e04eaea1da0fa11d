//! Capped, jittered exponential backoff between attempts to reach etcd. The jitter keeps a fleet
//! of servers that lost etcd together from reconnecting in lockstep when it returns.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

/// The pause after the first failure.
const FIRST: Duration = Duration::from_millis(100);
/// The longest pause: etcd's return shows in answers within about this long.
const CAP: Duration = Duration::from_secs(3);

/// The next pause: doubles after every failure up to [`CAP`], drawn each time uniformly from
/// the upper half of the current step.
#[derive(Debug)]
pub(super) struct Backoff {
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

impl Backoff {
    /// How long to wait before the next attempt.
    pub(super) fn next_pause(&mut self) -> Duration {
        let step = self.step;
        self.step = (step * 2).min(CAP);
        self.draws += 1;
        let half = step / 2;
        let span = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_micros(self.random.hash_one(self.draws) % span)
    }

    /// Starts over after a success.
    pub(super) fn reset(&mut self) {
        self.step = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_to_the_cap_with_jitter_and_reset() {
        let mut b = Backoff::default();
        let pauses: Vec<Duration> = (0..12).map(|_| b.next_pause()).collect();
        assert!(pauses[0] >= FIRST / 2 && pauses[0] <= FIRST, "{pauses:?}");
        assert!(pauses[3] >= FIRST * 4 && pauses[3] <= FIRST * 8, "{pauses:?}");
        assert!(pauses.iter().all(|p| *p <= CAP), "{pauses:?}");
        assert!(pauses[11] >= CAP / 2, "{pauses:?}");
        assert!(pauses[8..].windows(2).any(|w| w[0] != w[1]), "jittered: {pauses:?}");
        b.reset();
        assert!(b.next_pause() <= FIRST);
    }
}
