//! Capped, jittered exponential backoff between attempts to reach a backend (etcd, the
//! Kubernetes API). The jitter keeps a fleet of servers that lost the backend together from
//! returning to it in lockstep.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

/// Pauses that double after every failure up to a cap, each drawn uniformly from the upper half
/// of the current step; back to the first step after a success.
#[derive(Debug)]
pub struct Backoff {
    first: Duration,
    cap: Duration,
    step: Duration,
    random: RandomState,
    draws: u64,
}

impl Backoff {
    /// Starts at `first`; `cap` bounds how long a returning backend waits to be noticed.
    pub fn new(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            first,
            cap,
            step: first,
            random: RandomState::new(),
            draws: 0,
        }
    }

    /// How long to wait before the next attempt.
    pub fn next_pause(&mut self) -> Duration {
        let step = self.step;
        self.step = (step * 2).min(self.cap);
        self.draws += 1;
        let half = step / 2;
        let span = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_micros(self.random.hash_one(self.draws) % span)
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.step = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: Duration = Duration::from_millis(100);
    const CAP: Duration = Duration::from_secs(3);

    #[test]
    fn pauses_double_up_to_the_cap_with_jitter_and_reset_after_success() {
        let mut b = Backoff::new(FIRST, CAP);
        let pauses: Vec<Duration> = (0..12).map(|_| b.next_pause()).collect();
        assert!(pauses[0] >= FIRST / 2 && pauses[0] <= FIRST, "{pauses:?}");
        assert!(pauses[3] >= FIRST * 4 && pauses[3] <= FIRST * 8, "{pauses:?}");
        assert!(pauses.iter().all(|p| *p <= CAP), "{pauses:?}");
        assert!(pauses[8..].windows(2).any(|w| w[0] != w[1]), "jittered: {pauses:?}");
        b.reset();
        assert!(b.next_pause() <= FIRST);
    }
}
