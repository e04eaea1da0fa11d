//! Upstream servers and what a worker has learned about them: round-trip times (for the retry
//! timeout, as TCP does it: RFC 6298) and health. An upstream that fails [`MAX_FAILS`] times in
//! a row is down: it gets no client queries, only health probes, until it answers again.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Consecutive failures (timeouts, refused connections) that mark an upstream down.
pub const MAX_FAILS: u32 = 3;
/// Retry timeout before an upstream's round-trip time is known.
const INITIAL_RTO: Duration = Duration::from_millis(500);
/// Floor of the retry timeout: below it a busy but healthy upstream would look dead.
const MIN_RTO: Duration = Duration::from_millis(150);
/// Ceiling of the retry timeout.
const MAX_RTO: Duration = Duration::from_secs(1);
/// How often a down upstream is probed.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// One upstream server.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Its address.
    pub addr: SocketAddr,
    srtt: Option<Duration>,
    rttvar: Duration,
    failures: u32,
    down: bool,
    /// When a probe is next due, while down.
    next_probe: Instant,
    /// A probe is in flight.
    pub(crate) probing: bool,
}

impl Upstream {
    fn new(addr: SocketAddr, now: Instant) -> Upstream {
        Upstream {
            addr,
            srtt: None,
            rttvar: Duration::ZERO,
            failures: 0,
            down: false,
            next_probe: now,
            probing: false,
        }
    }

    /// Whether the upstream is considered down.
    pub fn is_down(&self) -> bool {
        self.down
    }

    /// The timeout of an attempt, doubled for each earlier try of the same question.
    pub fn rto(&self, try_number: u32) -> Duration {
        let base = match self.srtt {
            Some(srtt) => (srtt + 4 * self.rttvar).clamp(MIN_RTO, MAX_RTO),
            None => INITIAL_RTO,
        };
        (base * 2u32.saturating_pow(try_number.min(4))).min(MAX_RTO * 2)
    }

    /// Records an answer received `rtt` after its query: the upstream is up.
    pub fn succeeded(&mut self, rtt: Duration) {
        // RFC 6298 §2: alpha = 1/8, beta = 1/4.
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
        self.failures = 0;
        self.down = false;
    }

    /// Records a failed attempt; returns whether the upstream just went down.
    pub fn failed(&mut self, now: Instant) -> bool {
        self.failures = self.failures.saturating_add(1);
        if !self.down && self.failures >= MAX_FAILS {
            self.down = true;
            self.next_probe = now;
            return true;
        }
        false
    }

    /// Whether a health probe should be sent now.
    pub fn probe_due(&self, now: Instant) -> bool {
        self.down && !self.probing && now >= self.next_probe
    }

    /// Notes that a probe was sent.
    pub fn probe_sent(&mut self, now: Instant) {
        self.probing = true;
        self.next_probe = now + PROBE_INTERVAL;
    }

    /// When the next probe is due, while down.
    pub fn next_probe(&self) -> Option<Instant> {
        (self.down && !self.probing).then_some(self.next_probe)
    }
}

/// The upstreams of one route (the default resolvers, or one stub zone's servers).
#[derive(Debug, Clone)]
pub struct Group {
    /// The servers.
    pub upstreams: Vec<Upstream>,
    rotate: bool,
    next: usize,
}

impl Group {
    /// A group of `addrs`; with `rotate`, successive questions start at successive servers
    /// (SkyDNS `ns_rotate`), otherwise always at the first.
    pub fn new(addrs: &[SocketAddr], rotate: bool, now: Instant) -> Group {
        Group {
            upstreams: addrs.iter().map(|&a| Upstream::new(a, now)).collect(),
            rotate,
            next: 0,
        }
    }

    /// Whether every server is down (or there is none).
    pub fn all_down(&self) -> bool {
        self.upstreams.iter().all(Upstream::is_down)
    }

    /// The server for a first try: the next in rotation that is up. When all are down, any
    /// (in rotation) if `even_down`, which is how a stale recheck doubles as a probe.
    pub fn first(&mut self, even_down: bool) -> Option<usize> {
        let n = self.upstreams.len();
        if n == 0 {
            return None;
        }
        let start = if self.rotate {
            self.next = (self.next + 1) % n;
            self.next
        } else {
            0
        };
        let up = (0..n).map(|i| (start + i) % n).find(|&i| !self.upstreams[i].is_down());
        up.or(even_down.then_some(start))
    }

    /// The server for a retry after `previous`: the next one that is up, `previous` again if it
    /// is the only one up, or `None` when every server is down.
    pub fn after(&self, previous: usize) -> Option<usize> {
        let n = self.upstreams.len();
        (1..=n)
            .map(|i| (previous + i) % n)
            .find(|&i| !self.upstreams[i].is_down())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(n: u16, rotate: bool) -> Group {
        let addrs: Vec<SocketAddr> = (0..n).map(|i| SocketAddr::from(([127, 0, 0, 1], 5300 + i))).collect();
        Group::new(&addrs, rotate, Instant::now())
    }

    #[test]
    fn rotation_spreads_first_tries_and_skips_down_servers() {
        let mut g = group(3, true);
        let firsts: Vec<_> = (0..3).filter_map(|_| g.first(false)).collect();
        assert_eq!(firsts, [1, 2, 0]);
        let now = Instant::now();
        for _ in 0..MAX_FAILS {
            g.upstreams[2].failed(now);
        }
        let firsts: Vec<_> = (0..3).filter_map(|_| g.first(false)).collect();
        assert_eq!(firsts, [1, 0, 0]);
        assert_eq!(g.after(1), Some(0));
        assert_eq!(g.after(0), Some(1));
    }

    #[test]
    fn without_rotation_the_first_server_goes_first() {
        let mut g = group(2, false);
        assert_eq!((g.first(false), g.first(false)), (Some(0), Some(0)));
    }

    #[test]
    fn three_failures_in_a_row_mark_a_server_down_and_an_answer_brings_it_back() {
        let mut g = group(1, true);
        let now = Instant::now();
        assert!(!g.upstreams[0].failed(now));
        g.upstreams[0].succeeded(Duration::from_millis(1));
        assert!(!g.upstreams[0].failed(now));
        assert!(!g.upstreams[0].failed(now));
        assert!(g.upstreams[0].failed(now));
        assert!(g.all_down());
        assert_eq!((g.first(false), g.after(0)), (None, None));
        assert_eq!(g.first(true), Some(0), "a recheck may still go");
        assert!(g.upstreams[0].probe_due(now));
        g.upstreams[0].probe_sent(now);
        assert!(!g.upstreams[0].probe_due(now + PROBE_INTERVAL / 2));
        g.upstreams[0].succeeded(Duration::from_millis(1));
        assert!(!g.all_down());
    }

    #[test]
    fn the_retry_timeout_follows_the_round_trip_time_within_bounds() {
        let mut u = Upstream::new(SocketAddr::from(([127, 0, 0, 1], 53)), Instant::now());
        assert_eq!(u.rto(0), INITIAL_RTO);
        u.succeeded(Duration::from_micros(100));
        assert_eq!(u.rto(0), MIN_RTO);
        assert_eq!(u.rto(1), MIN_RTO * 2);
        for _ in 0..20 {
            u.succeeded(Duration::from_millis(400));
        }
        assert!(u.rto(0) > Duration::from_millis(400) && u.rto(0) <= MAX_RTO);
        assert_eq!(u.rto(9), MAX_RTO * 2);
    }
}
