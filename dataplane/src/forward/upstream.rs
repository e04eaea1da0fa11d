//! Upstream servers and what is known about them: round-trip times (per worker, for the retry
//! timeout, as TCP does it: RFC 6298) and health (shared by all workers).
//!
//! An upstream that fails [`MAX_FAILS`] times in a row, with no answer for [`SILENCE`] since
//! the first of those, is down: it gets no client queries, only health probes, until it answers
//! again. A slow upstream fails tries too (its answers come after the retry timeout), but its
//! late answers keep arriving and end every run of failures before it lasts [`SILENCE`]: its
//! clients wait for it instead of getting SERVFAIL from a forwarder that thinks it dead.
//!
//! Health is shared so that once one worker has found an upstream dead, no worker makes its
//! clients wait for it; it changes only on upstream failures and answers, never on a cache hit.

use crate::stats::{UpstreamCounters, UpstreamTable};
use crossbeam_utils::CachePadded;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Consecutive failures (timeouts, refused connections) that mark an upstream down.
pub const MAX_FAILS: u32 = 3;
/// How long a run of failures must last, with no answer, to mark an upstream down: longer than
/// the stalls of a busy upstream (a garbage collection, a burst of load), short enough that
/// clients of a dead one wait at most this long before failing fast.
const SILENCE: Duration = Duration::from_millis(500);
/// Retry timeout before an upstream's round-trip time is known.
const INITIAL_RTO: Duration = Duration::from_millis(500);
/// Floor of the retry timeout: below it a busy but healthy upstream would look dead.
const MIN_RTO: Duration = Duration::from_millis(150);
/// Ceiling of the retry timeout.
const MAX_RTO: Duration = Duration::from_secs(1);
/// How often a down upstream is probed (by one worker at a time).
pub const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// How much slower than the fastest an upstream may be and still share the rotation: above
/// the jitter of a loaded resolver on the same network, below a slowed one's delay.
const RTT_BAND: Duration = Duration::from_millis(20);
/// How often an upstream outside the band still gets a first try (per worker), so that its
/// round-trip time stays measured and it rejoins the rotation once it is fast again: a few
/// slow answers a second, however high the load.
const EXPLORE_INTERVAL: Duration = Duration::from_millis(250);

/// Whether a try that got no answer in `waited`, cut short by its question's `budget` rather
/// than by its own timeout, counts as a failure of its upstream: it waited at least the retry
/// timeout's floor, below which a busy but healthy upstream would look dead, or the whole budget
/// when that is shorter (a short `--forward-timeout` must still let a dead upstream be found).
pub(crate) fn had_a_chance(waited: Duration, budget: Duration) -> bool {
    waited >= MIN_RTO.min(budget)
}

/// The health of one upstream, shared by every worker.
#[derive(Debug)]
pub struct Health {
    /// The current run of failures: its length in the top 16 bits, when it began (ms since
    /// `epoch`) in the low 48. One word, so that workers failing at once never pair one run's
    /// length with another's start.
    failing: AtomicU64,
    down: AtomicBool,
    /// When the next probe is due, in milliseconds since `epoch`.
    next_probe: AtomicU64,
    epoch: Instant,
}

impl Health {
    /// A healthy upstream, times counted from `epoch`.
    pub fn new(epoch: Instant) -> Health {
        Health {
            failing: AtomicU64::new(0),
            down: AtomicBool::new(false),
            next_probe: AtomicU64::new(0),
            epoch,
        }
    }

    fn millis(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_millis() as u64
    }
}

const RUN_LENGTH_SHIFT: u32 = 48;
const RUN_START_MASK: u64 = (1 << RUN_LENGTH_SHIFT) - 1;
const MAX_RUN_LENGTH: u64 = u64::MAX >> RUN_LENGTH_SHIFT;

/// A run of failures after one more, at `now_ms`.
fn one_more_failure(run: u64, now_ms: u64) -> u64 {
    match run >> RUN_LENGTH_SHIFT {
        0 => (1 << RUN_LENGTH_SHIFT) | (now_ms & RUN_START_MASK),
        MAX_RUN_LENGTH => run,
        _ => run + (1 << RUN_LENGTH_SHIFT),
    }
}

/// The shared health of every upstream of every route, built once per server.
#[derive(Debug, Clone)]
pub struct SharedHealth {
    routes: Arc<[Box<[Arc<Health>]>]>,
}

impl SharedHealth {
    /// Health for routes of `sizes[i]` upstreams each.
    pub fn new(sizes: impl IntoIterator<Item = usize>, epoch: Instant) -> SharedHealth {
        SharedHealth {
            routes: sizes
                .into_iter()
                .map(|n| (0..n).map(|_| Arc::new(Health::new(epoch))).collect())
                .collect(),
        }
    }

    fn get(&self, route: usize, upstream: usize) -> Arc<Health> {
        self.routes
            .get(route)
            .and_then(|r| r.get(upstream))
            .cloned()
            .unwrap_or_else(|| Arc::new(Health::new(Instant::now())))
    }
}

/// One upstream server as one worker sees it.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Its address.
    pub addr: SocketAddr,
    srtt: Option<Duration>,
    rttvar: Duration,
    health: Arc<Health>,
    /// This worker has a probe in flight.
    pub(crate) probing: bool,
    /// When this worker last gave it a first try while it was outside the band.
    explored: Option<Instant>,
    /// This worker's counts of its tries, answers and failures.
    pub(crate) counters: Arc<CachePadded<UpstreamCounters>>,
}

impl Upstream {
    fn new(addr: SocketAddr, health: Arc<Health>, counters: Arc<CachePadded<UpstreamCounters>>) -> Upstream {
        Upstream {
            addr,
            srtt: None,
            rttvar: Duration::ZERO,
            health,
            probing: false,
            explored: None,
            counters,
        }
    }

    /// Whether the upstream is considered down.
    pub fn is_down(&self) -> bool {
        self.health.down.load(Ordering::Relaxed)
    }

    /// The timeout of an attempt, doubled for each earlier try of the same question.
    pub fn rto(&self, try_number: u32) -> Duration {
        let base = match self.srtt {
            Some(srtt) => (srtt + 4 * self.rttvar).clamp(MIN_RTO, MAX_RTO),
            None => INITIAL_RTO,
        };
        (base * 2u32.saturating_pow(try_number.min(4))).min(MAX_RTO * 2)
    }

    /// Records an answer received `rtt` after its query: the upstream is up. Returns whether
    /// it was down until now.
    pub fn succeeded(&mut self, rtt: Duration) -> bool {
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
        // Written only when it changes: answers are frequent, and the line is shared.
        if self.health.failing.load(Ordering::Relaxed) != 0 {
            self.health.failing.store(0, Ordering::Relaxed);
        }
        self.is_down() && self.health.down.swap(false, Ordering::Relaxed)
    }

    /// Records a failed attempt; returns whether the upstream just went down.
    pub fn failed(&mut self, now: Instant) -> bool {
        let now_ms = self.health.millis(now);
        let update = |run| Some(one_more_failure(run, now_ms));
        let run = match self
            .health
            .failing
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, update)
        {
            Ok(before) | Err(before) => one_more_failure(before, now_ms),
        };
        let failures = run >> RUN_LENGTH_SHIFT;
        let silent = now_ms.saturating_sub(run & RUN_START_MASK);
        if failures >= u64::from(MAX_FAILS)
            && silent >= SILENCE.as_millis() as u64
            && !self.health.down.swap(true, Ordering::Relaxed)
        {
            self.health.next_probe.store(now_ms, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Claims the probe that is due now, if any: at most one worker probes an upstream per
    /// interval.
    pub fn claim_probe(&mut self, now: Instant) -> bool {
        if !self.is_down() || self.probing {
            return false;
        }
        let now_ms = self.health.millis(now);
        let due = self.health.next_probe.load(Ordering::Relaxed);
        if now_ms < due {
            return false;
        }
        let next = now_ms + PROBE_INTERVAL.as_millis() as u64;
        let claimed = self
            .health
            .next_probe
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        self.probing = claimed;
        claimed
    }

    /// When the next probe is due, while down.
    pub fn next_probe(&self) -> Option<Instant> {
        (self.is_down() && !self.probing)
            .then(|| self.health.epoch + Duration::from_millis(self.health.next_probe.load(Ordering::Relaxed)))
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
    /// A group of `addrs` (route `route` of `health`), counting into the worker's `counters`;
    /// with `rotate`, successive questions start at successive servers (SkyDNS `ns_rotate`),
    /// otherwise always at the first.
    pub(crate) fn new(
        addrs: &[SocketAddr],
        route: usize,
        health: &SharedHealth,
        rotate: bool,
        counters: &UpstreamTable,
    ) -> Group {
        Group {
            upstreams: addrs
                .iter()
                .enumerate()
                .map(|(i, &a)| Upstream::new(a, health.get(route, i), counters.get(a)))
                .collect(),
            rotate,
            next: 0,
        }
    }

    /// The servers, in order.
    pub fn addrs(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.upstreams.iter().map(|u| u.addr)
    }

    /// Whether every server is down (or there is none).
    pub fn all_down(&self) -> bool {
        self.upstreams.iter().all(Upstream::is_down)
    }

    /// The server for a first try: the next in rotation that is up, skipping those slower than
    /// the fastest by more than [`RTT_BAND`] but for one try every [`EXPLORE_INTERVAL`] (SkyDNS
    /// rotates blindly, so a slowed upstream would add its delay to every other miss). Without
    /// rotation, the first that is up. When all are down, any (in rotation) if `even_down`,
    /// which is how a stale recheck doubles as a probe.
    pub fn first(&mut self, even_down: bool, now: Instant) -> Option<usize> {
        let n = self.upstreams.len();
        if n == 0 {
            return None;
        }
        let start = if self.rotate { (self.next + 1) % n } else { 0 };
        let mut up = (0..n)
            .map(|i| (start + i) % n)
            .filter(|&i| !self.upstreams[i].is_down());
        let chosen = if self.rotate && n > 1 {
            let fastest = self
                .upstreams
                .iter()
                .filter(|u| !u.is_down())
                .filter_map(|u| u.srtt)
                .min();
            let in_band = |u: &Upstream| match (u.srtt, fastest) {
                (Some(srtt), Some(fastest)) => srtt <= fastest + RTT_BAND,
                _ => true,
            };
            let due = |u: &Upstream| {
                u.explored
                    .is_none_or(|at| now.saturating_duration_since(at) >= EXPLORE_INTERVAL)
            };
            let slow_and_due = up
                .clone()
                .find(|&i| !in_band(&self.upstreams[i]) && due(&self.upstreams[i]));
            if let Some(slow) = slow_and_due {
                // Out of turn: the rotation of the fast ones goes on as if it had not happened.
                self.upstreams[slow].explored = Some(now);
                return Some(slow);
            }
            up.clone().find(|&i| in_band(&self.upstreams[i])).or_else(|| up.next())
        } else {
            up.next()
        };
        let chosen = chosen.or(even_down.then_some(start));
        if self.rotate {
            // The next question starts after this one's server, so that servers passed over
            // do not hand their turns to one neighbour.
            self.next = chosen.unwrap_or(start);
        }
        chosen
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
        Group::new(
            &addrs,
            0,
            &SharedHealth::new([n as usize], Instant::now()),
            rotate,
            &UpstreamTable::default(),
        )
    }

    /// Fails `u` [`MAX_FAILS`] times, the first at `from` and the last [`SILENCE`] later;
    /// returns whether it went down and when the last failure was.
    fn fail_silently(u: &mut Upstream, from: Instant) -> (bool, Instant) {
        let step = SILENCE / (MAX_FAILS - 1);
        let mut went_down = false;
        for i in 0..MAX_FAILS {
            went_down = u.failed(from + step * i);
        }
        (went_down, from + step * (MAX_FAILS - 1))
    }

    #[test]
    fn rotation_spreads_first_tries_and_skips_down_servers() {
        let mut g = group(3, true);
        let firsts: Vec<_> = (0..3).filter_map(|_| g.first(false, Instant::now())).collect();
        assert_eq!(firsts, [1, 2, 0]);
        fail_silently(&mut g.upstreams[2], Instant::now());
        let firsts: Vec<_> = (0..4).filter_map(|_| g.first(false, Instant::now())).collect();
        assert_eq!(firsts, [1, 0, 1, 0], "the two up take turns");
        assert_eq!(g.after(1), Some(0));
        assert_eq!(g.after(0), Some(1));
    }

    /// One upstream of three slowed by 300 ms: the other two share the first tries, the slow
    /// one gets one every [`EXPLORE_INTERVAL`] however many there are, and rejoins the
    /// rotation once it answers fast again.
    #[test]
    fn rotation_passes_over_a_slow_server_but_keeps_measuring_it() {
        let mut g = group(3, true);
        let start = Instant::now();
        // `picks` first tries spread over `over`.
        let count = |g: &mut Group, picks: u32, from: Instant, over: Duration| {
            let mut per_server = [0u32; 3];
            for i in 0..picks {
                per_server[g.first(false, from + over * i / picks).unwrap()] += 1;
            }
            per_server
        };
        let second = Duration::from_secs(1);
        assert_eq!(
            count(&mut g, 48, start, second),
            [16, 16, 16],
            "unknown round-trip times rotate"
        );
        for (u, rtt) in g.upstreams.iter_mut().zip([1, 2, 300]) {
            u.succeeded(Duration::from_millis(rtt));
        }
        let [fast, also_fast, slow] = count(&mut g, 1000, start + second, second);
        assert_eq!((fast + also_fast, slow), (996, 4), "four a second to the slow one");
        assert_eq!(fast, also_fast);
        for _ in 0..40 {
            g.upstreams[2].succeeded(Duration::from_millis(1));
        }
        assert_eq!(
            count(&mut g, 48, start + second * 2, second),
            [16, 16, 16],
            "back in the rotation"
        );
        fail_silently(&mut g.upstreams[0], start);
        fail_silently(&mut g.upstreams[1], start);
        g.upstreams[2].succeeded(Duration::from_millis(300));
        assert_eq!(
            count(&mut g, 4, start + second * 3, second),
            [0, 0, 4],
            "a slow server is still used when it is the only one up"
        );
    }

    #[test]
    fn without_rotation_the_first_server_goes_first() {
        let mut g = group(2, false);
        assert_eq!(
            (g.first(false, Instant::now()), g.first(false, Instant::now())),
            (Some(0), Some(0))
        );
    }

    #[test]
    fn failures_in_a_row_over_the_silence_mark_a_server_down_and_an_answer_brings_it_back() {
        let mut g = group(1, true);
        let start = Instant::now();
        assert!(!g.upstreams[0].failed(start));
        g.upstreams[0].succeeded(Duration::from_millis(1));
        let (went_down, now) = fail_silently(&mut g.upstreams[0], start + SILENCE);
        assert!(
            went_down,
            "{MAX_FAILS} failures over {SILENCE:?}, the answer before them forgotten"
        );
        assert!(g.all_down());
        assert_eq!((g.first(false, Instant::now()), g.after(0)), (None, None));
        assert_eq!(g.first(true, Instant::now()), Some(0), "a recheck may still go");
        assert!(g.upstreams[0].claim_probe(now));
        g.upstreams[0].probing = false;
        assert!(
            !g.upstreams[0].claim_probe(now + PROBE_INTERVAL / 2),
            "one probe per interval"
        );
        assert!(g.upstreams[0].succeeded(Duration::from_millis(1)));
        assert!(!g.all_down());
    }

    #[test]
    fn health_is_shared_between_workers_and_one_of_them_probes() {
        let epoch = Instant::now();
        let shared = SharedHealth::new([1], epoch);
        let addrs = [SocketAddr::from(([127, 0, 0, 1], 53))];
        let mut one = Group::new(&addrs, 0, &shared, true, &UpstreamTable::default());
        let mut two = Group::new(&addrs, 0, &shared, true, &UpstreamTable::default());
        assert!(!one.upstreams[0].failed(epoch));
        assert!(!two.upstreams[0].failed(epoch + SILENCE / 2));
        assert!(one.upstreams[0].failed(epoch + SILENCE), "the run spans both workers");
        assert!(two.all_down(), "the other worker sees it down at once");
        let now = epoch + SILENCE;
        assert!(two.upstreams[0].claim_probe(now));
        assert!(!one.upstreams[0].claim_probe(now), "the probe is claimed once");
        assert!(two.upstreams[0].succeeded(Duration::from_millis(1)));
        assert!(!one.all_down());
    }

    /// An overloaded upstream fails its tries in bursts (every try sent during a stall times
    /// out) but answers between them: each answer ends the run, so it never stays silent for
    /// [`SILENCE`] and is never marked down, however many tries of a burst fail.
    #[test]
    fn bursts_of_failures_between_answers_leave_a_slow_upstream_up() {
        let mut g = group(1, true);
        let start = Instant::now();
        let stall = SILENCE * 2 / 5;
        for cycle in 0..20 {
            let stalled = start + SILENCE * cycle;
            for i in 0..50 {
                assert!(
                    !g.upstreams[0].failed(stalled + stall * i / 50),
                    "cycle {cycle}, try {i}"
                );
            }
            g.upstreams[0].succeeded(stall);
        }
        assert!(!g.all_down());
        let (went_down, _) = fail_silently(&mut g.upstreams[0], start + SILENCE * 20);
        assert!(went_down, "then silence for {SILENCE:?}");
    }

    #[test]
    fn a_run_of_failures_is_as_long_as_its_silence_and_its_count_say() {
        let mut u = Upstream::new(
            SocketAddr::from(([127, 0, 0, 1], 53)),
            Arc::new(Health::new(Instant::now())),
            Arc::default(),
        );
        let start = Instant::now();
        assert!(!u.failed(start + SILENCE));
        assert!(!u.failed(start + SILENCE * 3), "two failures, however far apart");
        assert!(u.failed(start + SILENCE * 3), "the third, {SILENCE:?} after the first");
        u.succeeded(Duration::from_millis(1));
        let mut run = 0;
        for _ in 0..100_000 {
            run = one_more_failure(run, 7);
        }
        assert_eq!(
            (run >> RUN_LENGTH_SHIFT, run & RUN_START_MASK),
            (MAX_RUN_LENGTH, 7),
            "the count saturates"
        );
    }

    #[test]
    fn the_retry_timeout_follows_the_round_trip_time_within_bounds() {
        let mut u = Upstream::new(
            SocketAddr::from(([127, 0, 0, 1], 53)),
            Arc::new(Health::new(Instant::now())),
            Arc::default(),
        );
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
