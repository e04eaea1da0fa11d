//! Open-loop pacing for a target query rate: credit accrues with time and is spent by sends.
//!
//! The credit is capped at one batch, so a generator that fell behind (a full window, a
//! preempted thread) does not make up for it with a burst that would measure queueing of its
//! own making instead of the server's latency.

/// Credit for sending at a fixed rate.
#[derive(Debug, Clone)]
pub struct Pace {
    per_ns: f64,
    burst: f64,
    credit: f64,
    last: u64,
}

impl Pace {
    /// Pacing at `rate` queries per second, starting at time `now` (ns) with one query of
    /// credit, allowing at most `burst` queries at once.
    pub fn new(rate: f64, burst: usize, now: u64) -> Pace {
        Pace {
            per_ns: rate / 1e9,
            burst: burst.max(1) as f64,
            credit: 1.0,
            last: now,
        }
    }

    /// How many of `want` queries may go out at `now`; the grant is spent at once.
    pub fn take(&mut self, now: u64, want: usize) -> usize {
        let elapsed = now.saturating_sub(self.last) as f64;
        self.last = self.last.max(now);
        self.credit = (self.credit + elapsed * self.per_ns).min(self.burst);
        let grant = (self.credit.floor() as usize).min(want);
        self.credit -= grant as f64;
        grant
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_kept_over_time() {
        let mut p = Pace::new(100_000.0, 16, 0);
        let mut sent = 0;
        for t in (0..1_000_000_000u64).step_by(1_000) {
            sent += p.take(t, 16);
        }
        assert!((99_990..=100_010).contains(&sent), "{sent}");
    }

    #[test]
    fn credit_is_capped_at_one_burst() {
        let mut p = Pace::new(1_000.0, 8, 0);
        assert_eq!(p.take(10_000_000_000, 100), 8);
        assert_eq!(p.take(10_000_000_000, 100), 0);
    }

    #[test]
    fn unused_grant_stays_as_credit() {
        let mut p = Pace::new(1e9, 4, 0);
        assert_eq!(p.take(10, 1), 1);
        assert_eq!(p.take(10, 4), 3);
    }
}
