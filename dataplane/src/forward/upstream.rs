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
//!
//! A set configured with a health check ([`HealthCheck`]) checks every upstream from the
//! start, up or down, through the same probes: a failed check counts toward `max_fails` with no
//! silence asked of it (it is a deliberate test, not a client's try during a stall), an answered
//! one brings the upstream up. With loop detection, each upstream is also sent a query for a
//! random name of its own once ([`Health::loop_probe`]): an upstream that hands it back to this
//! server forwards in a loop, and is cut ([`mark_looping`]) for good, not probed.

use super::options::{ForwardOptions, HealthCheck, Policy};
use crate::cache::Key;
use crate::stats::{UpstreamCounters, UpstreamTable};
use crate::wire::types::{class, rtype};
use crate::wire::{LowerName, Name};
use crossbeam_utils::CachePadded;
use std::hash::BuildHasher;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Consecutive failures (timeouts, refused connections) that mark an upstream down, unless its
/// set says otherwise (`max_fails`).
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
/// How often a down upstream is probed (by one worker at a time) when its set has no health
/// check of its own.
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
    /// Failures in a row that mark it down; 0 never does.
    max_fails: u32,
    /// Checked from the start, and how ([`HealthCheck`]); else probed only while down.
    check: Option<Check>,
    /// Forwarding to it loops back to this server: it stays down and is not probed.
    looping: AtomicBool,
    /// The loop probe, sent once by whichever worker claims it first.
    loop_probe: Option<Key>,
    loop_probe_pending: AtomicBool,
}

/// A health check as each upstream's health holds it.
#[derive(Debug)]
struct Check {
    interval: Duration,
    recursion_desired: bool,
    key: Key,
}

impl Health {
    /// A healthy upstream, times counted from `epoch`, with skyline's default options.
    pub fn new(epoch: Instant) -> Health {
        Health::with(epoch, &ForwardOptions::default(), None)
    }

    /// A healthy upstream of a set with `options`; `loop_probe` is the name it is sent once
    /// to detect a forwarding loop, if detection is on.
    fn with(epoch: Instant, options: &ForwardOptions, loop_probe: Option<&LowerName>) -> Health {
        Health {
            failing: AtomicU64::new(0),
            down: AtomicBool::new(false),
            next_probe: AtomicU64::new(0),
            epoch,
            max_fails: options.max_fails,
            check: options.health_check.as_ref().map(|c: &HealthCheck| Check {
                interval: c.interval.max(Duration::from_millis(1)),
                recursion_desired: c.recursion_desired,
                key: Key::new(&lower(&c.domain), rtype::NS, class::IN, false, false),
            }),
            looping: AtomicBool::new(false),
            loop_probe: loop_probe.map(|name| Key::new(name, rtype::HINFO, class::IN, false, false)),
            loop_probe_pending: AtomicBool::new(loop_probe.is_some()),
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

/// The lower-cased form of a name that is already valid.
fn lower(name: &Name) -> LowerName {
    LowerName::from_wire(name.wire()).unwrap_or_default()
}

/// One set of upstreams as [`SharedHealth::with_options`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamSet<'a> {
    /// The zone it forwards (the root for the default resolvers): loop probes are names in it.
    pub zone: Option<&'a Name>,
    /// Its servers.
    pub servers: &'a [SocketAddr],
    /// Its options.
    pub options: &'a ForwardOptions,
}

/// One route's upstreams: their servers and options, and each one's health.
#[derive(Debug)]
struct RouteHealth {
    servers: Vec<SocketAddr>,
    options: ForwardOptions,
    upstreams: Box<[Arc<Health>]>,
}

/// The shared health of every upstream of every route, built once per forwarding plan.
#[derive(Debug, Clone)]
pub struct SharedHealth {
    routes: Arc<[RouteHealth]>,
    /// With loop detection: the first label of every loop probe, random per process.
    loop_token: Option<Arc<[u8]>>,
}

impl SharedHealth {
    /// Health for routes of `sizes[i]` upstreams each, with skyline's default options.
    pub fn new(sizes: impl IntoIterator<Item = usize>, epoch: Instant) -> SharedHealth {
        let options = ForwardOptions::default();
        SharedHealth {
            routes: sizes
                .into_iter()
                .map(|n| RouteHealth {
                    servers: Vec::new(),
                    options: options.clone(),
                    upstreams: (0..n).map(|_| Arc::new(Health::new(epoch))).collect(),
                })
                .collect(),
            loop_token: None,
        }
    }

    /// Health for `sets` (route `i` each). A route whose servers and options are those of
    /// the same route in `previous` keeps its health, as every worker keeps its view of it:
    /// the upstreams stay down or up, and are not probed for loops again. With `loop_token`
    /// (the label every loop probe of this server starts with), each new upstream gets a loop
    /// probe, `<token>.<random>.<zone>`.
    pub fn with_options<'a>(
        sets: impl IntoIterator<Item = UpstreamSet<'a>>,
        previous: Option<&SharedHealth>,
        loop_token: Option<&Arc<[u8]>>,
        epoch: Instant,
    ) -> SharedHealth {
        let random = std::collections::hash_map::RandomState::new();
        let routes = sets
            .into_iter()
            .enumerate()
            .map(|(route, set)| {
                let kept = previous
                    .and_then(|p| p.routes.get(route))
                    .filter(|r| r.servers == set.servers && r.options == *set.options);
                let upstreams = match kept {
                    Some(r) => r.upstreams.clone(),
                    None => (0..set.servers.len())
                        .map(|i| {
                            let probe = loop_token.and_then(|token| {
                                let id = format!("{:016x}", random.hash_one((route, i)));
                                probe_name(token, id.as_bytes(), set.zone)
                            });
                            Arc::new(Health::with(epoch, set.options, probe.as_ref()))
                        })
                        .collect(),
                };
                RouteHealth {
                    servers: set.servers.to_vec(),
                    options: set.options.clone(),
                    upstreams,
                }
            })
            .collect();
        SharedHealth {
            routes,
            loop_token: loop_token.cloned(),
        }
    }

    fn get(&self, route: usize, upstream: usize) -> Arc<Health> {
        self.routes
            .get(route)
            .and_then(|r| r.upstreams.get(upstream))
            .cloned()
            .unwrap_or_else(|| Arc::new(Health::new(Instant::now())))
    }

    /// The options of `route`.
    pub(crate) fn options(&self, route: usize) -> Option<&ForwardOptions> {
        self.routes.get(route).map(|r| &r.options)
    }

    /// Whether loop detection is on.
    pub(crate) fn detects_loops(&self) -> bool {
        self.loop_token.is_some()
    }

    /// The route, index and health of the upstream whose loop probe `qname` (in wire form) is:
    /// a query this server received for it came back through that upstream. The first label
    /// rules out every other name at the cost of one comparison.
    pub(crate) fn loop_probe_of(&self, qname: &[u8]) -> Option<(usize, usize, Arc<Health>)> {
        let token = self.loop_token.as_deref()?;
        let first = qname.get(1..1 + usize::from(*qname.first()?))?;
        if !first.eq_ignore_ascii_case(token) {
            return None;
        }
        self.routes.iter().enumerate().find_map(|(route, r)| {
            r.upstreams.iter().enumerate().find_map(|(i, h)| {
                h.loop_probe
                    .as_ref()
                    .filter(|k| k.name_wire().eq_ignore_ascii_case(qname))
                    .map(|_| (route, i, Arc::clone(h)))
            })
        })
    }

    /// The address of upstream `upstream` of `route`.
    pub(crate) fn addr(&self, route: usize, upstream: usize) -> Option<SocketAddr> {
        self.routes.get(route)?.servers.get(upstream).copied()
    }
}

/// `<token>.<id>.<zone>`, lower-cased, if it fits in a name.
fn probe_name(token: &[u8], id: &[u8], zone: Option<&Name>) -> Option<LowerName> {
    let mut wire = Vec::with_capacity(2 + token.len() + id.len() + 255);
    for label in [token, id] {
        wire.push(u8::try_from(label.len()).ok()?);
        wire.extend_from_slice(label);
    }
    wire.extend_from_slice(zone.map_or(&[0u8][..], Name::wire));
    LowerName::from_wire(&wire).ok()
}

/// A random label for the loop probes of one server.
pub(crate) fn loop_token() -> Arc<[u8]> {
    let random = std::collections::hash_map::RandomState::new();
    format!("{:016x}", random.hash_one(std::process::id()))
        .into_bytes()
        .into()
}

/// Marks the upstream whose health is `health` as looping; returns whether it was not yet.
pub(crate) fn mark_looping(health: &Health) -> bool {
    if health.looping.swap(true, Ordering::Relaxed) {
        return false;
    }
    health.down.store(true, Ordering::Relaxed);
    true
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
        self.is_down() && !self.is_looping() && self.health.down.swap(false, Ordering::Relaxed)
    }

    /// Whether forwarding to it was found to loop back to this server.
    pub fn is_looping(&self) -> bool {
        self.health.looping.load(Ordering::Relaxed)
    }

    /// Records a failed attempt; returns whether the upstream just went down.
    pub fn failed(&mut self, now: Instant) -> bool {
        self.count_failure(now, SILENCE)
    }

    /// Records a failed health check (or probe): returns whether the upstream just went down.
    /// No silence is asked of checks: `max_fails` of them in a row are enough.
    pub fn check_failed(&mut self, now: Instant) -> bool {
        self.count_failure(now, Duration::ZERO)
    }

    fn count_failure(&mut self, now: Instant, silence: Duration) -> bool {
        let max_fails = self.health.max_fails;
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
        if max_fails != 0
            && failures >= u64::from(max_fails)
            && silent >= silence.as_millis() as u64
            && !self.health.down.swap(true, Ordering::Relaxed)
        {
            if self.health.check.is_none() {
                self.health.next_probe.store(now_ms, Ordering::Relaxed);
            }
            return true;
        }
        false
    }

    /// Whether it is probed now: checked from the start, or down (and not looping).
    fn is_probed(&self) -> bool {
        (self.health.check.is_some() || self.is_down()) && !self.is_looping()
    }

    /// Claims the probe or health check that is due now, if any: at most one worker probes an
    /// upstream per interval.
    pub fn claim_probe(&mut self, now: Instant) -> bool {
        if self.probing || !self.is_probed() {
            return false;
        }
        let now_ms = self.health.millis(now);
        let due = self.health.next_probe.load(Ordering::Relaxed);
        if now_ms < due {
            return false;
        }
        let interval = self.health.check.as_ref().map_or(PROBE_INTERVAL, |c| c.interval);
        let next = now_ms + interval.as_millis().max(1) as u64;
        let claimed = self
            .health
            .next_probe
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        self.probing = claimed;
        claimed
    }

    /// When the next probe is due, while it is probed; at once while its loop probe waits.
    pub fn next_probe(&self) -> Option<Instant> {
        if self.probing {
            return None;
        }
        if self.health.loop_probe_pending.load(Ordering::Relaxed) {
            return Some(self.health.epoch);
        }
        self.is_probed()
            .then(|| self.health.epoch + Duration::from_millis(self.health.next_probe.load(Ordering::Relaxed)))
    }

    /// The question a probe asks: the set's health check (`. NS` by default).
    pub fn probe_key(&self) -> Key {
        match &self.health.check {
            Some(check) => check.key.clone(),
            None => Key::new(&LowerName::default(), rtype::NS, class::IN, false, false),
        }
    }

    /// Whether a probe asking `key` sets RD: every query does but the health check of a set
    /// configured `no_rec`.
    pub fn probe_recursion_desired(&self, key: &Key) -> bool {
        match &self.health.check {
            Some(check) if !check.recursion_desired => check.key.bytes() != key.bytes(),
            _ => true,
        }
    }

    /// Claims the loop probe, if it is still to be sent and no probe is in flight: one worker
    /// sends it, once per upstream.
    pub fn claim_loop_probe(&mut self) -> Option<Key> {
        let key = self.health.loop_probe.as_ref()?;
        if self.probing || !self.health.loop_probe_pending.swap(false, Ordering::Relaxed) {
            return None;
        }
        self.probing = true;
        Some(key.clone())
    }
}

/// The upstreams of one route (the default resolvers, or one stub zone's servers).
#[derive(Debug, Clone)]
pub struct Group {
    /// The servers.
    pub upstreams: Vec<Upstream>,
    policy: Policy,
    /// The set's options, as the plan it was built from gave them.
    options: ForwardOptions,
    next: usize,
    /// The state of the generator [`Policy::Random`] draws from (xorshift64*): a draw per
    /// question must cost no system call.
    draw: u64,
}

impl Group {
    /// A group of `addrs` (route `route` of `health`, whose options it follows), counting
    /// into the worker's `counters`. The default policy without `rotate` (SkyDNS
    /// `ns_rotate=false`) is [`Policy::Sequential`].
    pub(crate) fn new(
        addrs: &[SocketAddr],
        route: usize,
        health: &SharedHealth,
        rotate: bool,
        counters: &UpstreamTable,
    ) -> Group {
        let options = health.options(route).cloned().unwrap_or_default();
        let policy = match options.policy {
            Policy::Fastest if !rotate => Policy::Sequential,
            policy => policy,
        };
        let seed = std::collections::hash_map::RandomState::new().hash_one(route);
        Group {
            upstreams: addrs
                .iter()
                .enumerate()
                .map(|(i, &a)| Upstream::new(a, health.get(route, i), counters.get(a)))
                .collect(),
            policy,
            options,
            next: 0,
            draw: seed | 1,
        }
    }

    /// The servers, in order.
    pub fn addrs(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.upstreams.iter().map(|u| u.addr)
    }

    /// Whether the group serves `servers` under the options `health` gives route `route`:
    /// then a new plan leaves it as it is.
    pub fn serves(&self, servers: &[SocketAddr], route: usize, health: &SharedHealth) -> bool {
        self.addrs().eq(servers.iter().copied()) && health.options(route).is_none_or(|o| *o == self.options)
    }

    fn random(&mut self) -> usize {
        self.draw ^= self.draw >> 12;
        self.draw ^= self.draw << 25;
        self.draw ^= self.draw >> 27;
        (self.draw.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as usize
    }

    /// Whether every server is down (or there is none).
    pub fn all_down(&self) -> bool {
        self.upstreams.iter().all(Upstream::is_down)
    }

    /// The server for a first try, by the group's [`Policy`]. [`Policy::Fastest`]: the next
    /// in rotation that is up, skipping those slower than the fastest by more than
    /// [`RTT_BAND`] but for one try every [`EXPLORE_INTERVAL`] (SkyDNS rotates blindly, so a
    /// slowed upstream would add its delay to every other miss). [`Policy::RoundRobin`]: the
    /// next in rotation that is up; [`Policy::Random`]: the first up from a random one;
    /// [`Policy::Sequential`]: the first that is up. When all are down, any (in rotation) if
    /// `even_down`, which is how a stale recheck doubles as a probe, unless it loops.
    pub fn first(&mut self, even_down: bool, now: Instant) -> Option<usize> {
        let n = self.upstreams.len();
        if n == 0 {
            return None;
        }
        let rotate = matches!(self.policy, Policy::Fastest | Policy::RoundRobin);
        let start = match self.policy {
            Policy::Fastest | Policy::RoundRobin => (self.next + 1) % n,
            Policy::Random => self.random() % n,
            Policy::Sequential => 0,
        };
        let mut up = (0..n)
            .map(|i| (start + i) % n)
            .filter(|&i| !self.upstreams[i].is_down());
        let chosen = if self.policy == Policy::Fastest && n > 1 {
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
        // A looping upstream gets nothing, not even a recheck: it would come back here.
        let chosen = chosen.or(even_down.then_some(start).filter(|&i| !self.upstreams[i].is_looping()));
        if rotate {
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

    /// A group of `n` upstreams whose set has `options`, with loop probes if `loops`.
    fn group_with(n: u16, options: ForwardOptions, loops: bool) -> Group {
        let addrs: Vec<SocketAddr> = (0..n).map(|i| SocketAddr::from(([127, 0, 0, 1], 5300 + i))).collect();
        let set = UpstreamSet {
            zone: None,
            servers: &addrs,
            options: &options,
        };
        let token = loops.then(loop_token);
        let health = SharedHealth::with_options([set], None, token.as_ref(), Instant::now());
        Group::new(&addrs, 0, &health, true, &UpstreamTable::default())
    }

    fn with_policy(policy: Policy) -> ForwardOptions {
        ForwardOptions {
            policy,
            ..ForwardOptions::default()
        }
    }

    fn check_every(interval: Duration, recursion_desired: bool) -> ForwardOptions {
        ForwardOptions {
            health_check: Some(HealthCheck {
                interval,
                recursion_desired,
                domain: Name::root(),
            }),
            ..ForwardOptions::default()
        }
    }

    #[test]
    fn sequential_always_starts_at_the_first_up() {
        let mut g = group_with(3, with_policy(Policy::Sequential), false);
        let now = Instant::now();
        assert_eq!((0..5).filter_map(|_| g.first(false, now)).collect::<Vec<_>>(), [0; 5]);
        fail_silently(&mut g.upstreams[0], now);
        assert_eq!((0..3).filter_map(|_| g.first(false, now)).collect::<Vec<_>>(), [1; 3]);
        assert_eq!(g.after(1), Some(2), "a retry goes to the next one up");
    }

    #[test]
    fn round_robin_takes_turns_blind_to_speed() {
        let mut g = group_with(3, with_policy(Policy::RoundRobin), false);
        for (u, rtt) in g.upstreams.iter_mut().zip([1, 2, 300]) {
            u.succeeded(Duration::from_millis(rtt));
        }
        let now = Instant::now();
        let firsts: Vec<_> = (0..6).filter_map(|_| g.first(false, now)).collect();
        assert_eq!(firsts, [1, 2, 0, 1, 2, 0], "the slow one keeps its turn");
    }

    #[test]
    fn random_spreads_first_tries_over_every_upstream_up() {
        let mut g = group_with(4, with_policy(Policy::Random), false);
        let now = Instant::now();
        let mut per_server = [0u32; 4];
        for _ in 0..4000 {
            per_server[g.first(false, now).unwrap()] += 1;
        }
        assert!(per_server.iter().all(|&n| (800..1200).contains(&n)), "{per_server:?}");
        let firsts: Vec<_> = (0..8).filter_map(|_| g.first(false, now)).collect();
        assert_ne!(firsts, [firsts[0]; 8], "not one server: {firsts:?}");
        fail_silently(&mut g.upstreams[2], now);
        assert!((0..400).all(|_| g.first(false, now) != Some(2)), "never a down one");
    }

    #[test]
    fn the_default_policy_is_fastest_and_without_rotation_sequential() {
        assert_eq!(group_with(2, ForwardOptions::default(), false).policy, Policy::Fastest);
        assert_eq!(group(2, false).policy, Policy::Sequential);
    }

    #[test]
    fn max_fails_sets_how_many_failures_mark_an_upstream_down_and_zero_never_does() {
        let five = ForwardOptions {
            max_fails: 5,
            ..ForwardOptions::default()
        };
        let mut g = group_with(1, five, false);
        let start = Instant::now();
        let went_down: Vec<bool> = (0..5).map(|i| g.upstreams[0].failed(start + SILENCE * i)).collect();
        assert_eq!(went_down, [false, false, false, false, true]);
        let never = ForwardOptions {
            max_fails: 0,
            ..ForwardOptions::default()
        };
        let mut g = group_with(1, never, false);
        assert!((0..100).all(|i| !g.upstreams[0].failed(start + SILENCE * i)));
        assert!((0..100).all(|i| !g.upstreams[0].check_failed(start + SILENCE * i)));
        assert!(!g.all_down());
    }

    #[test]
    fn failed_health_checks_mark_down_after_max_fails_without_waiting_for_silence() {
        let two = ForwardOptions {
            max_fails: 2,
            ..check_every(Duration::from_millis(100), true)
        };
        let mut g = group_with(1, two, false);
        let start = Instant::now();
        assert!(!g.upstreams[0].check_failed(start));
        assert!(g.upstreams[0].check_failed(start + Duration::from_millis(100)));
        assert!(g.all_down());
        assert!(
            g.upstreams[0].succeeded(Duration::from_millis(1)),
            "an answered check marks it up"
        );
        assert!(!g.all_down());
    }

    #[test]
    fn health_checks_are_due_from_the_start_and_every_interval_up_or_down() {
        let interval = Duration::from_millis(200);
        let mut g = group_with(2, check_every(interval, false), false);
        let u = &mut g.upstreams[0];
        let epoch = u.health.epoch;
        assert_eq!(u.next_probe(), Some(epoch), "due at once, while up");
        assert!(u.claim_probe(epoch));
        u.probing = false;
        assert!(!u.claim_probe(epoch + interval / 2));
        assert_eq!(u.next_probe(), Some(epoch + interval));
        assert!(u.claim_probe(epoch + interval));
        let key = u.probe_key();
        assert_eq!((key.qtype(), key.name_wire()), (rtype::NS, &[0u8][..]));
        assert!(!u.probe_recursion_desired(&key), "no_rec");
        let without = &mut group_with(1, ForwardOptions::default(), false).upstreams[0];
        assert_eq!(
            without.next_probe(),
            None,
            "without health checks, an upstream up is not probed"
        );
        assert!(!without.claim_probe(Instant::now()));
    }

    /// The forwarder's machine, started with health checks every 200 ms without RD: its first
    /// turn sends one `. NS` check to each upstream, RD clear, before any client asked.
    #[test]
    fn the_machine_sends_health_checks_from_its_first_turn() {
        use crate::cache::{Cache, CacheConfig};
        use crate::forward::machine::{Action, Entropy, Machine};
        use crate::forward::ForwardConfig;
        let addrs = [
            SocketAddr::from(([192, 0, 2, 1], 53)),
            SocketAddr::from(([192, 0, 2, 2], 53)),
        ];
        let config = ForwardConfig {
            upstreams: addrs.to_vec(),
            options: check_every(Duration::from_millis(200), false),
            ..ForwardConfig::default()
        };
        let start = Instant::now();
        let health = config.health(start);
        let mut machine: Machine<()> = Machine::new(&[&addrs], &config, &health, Entropy::seeded(1));
        let cache = Cache::new(CacheConfig::default());
        assert!(machine.poll_timeout().is_some_and(|at| at <= start), "due at once");
        machine.handle_timeout(&cache, start);
        let mut checked = Vec::new();
        while let Some(action) = machine.poll_action() {
            if let Action::Transmit(t) = action {
                let query = t.query();
                assert_eq!(query[2] & 0x01, 0, "RD clear (no_rec)");
                assert_eq!(&query[12..17], &[0, 0, rtype::NS as u8, 0, 1], ". NS IN");
                checked.push(t.upstream);
            }
        }
        assert_eq!(checked, addrs);
    }

    #[test]
    fn a_loop_probe_is_sent_once_and_an_upstream_found_looping_stays_out() {
        let mut g = group_with(2, ForwardOptions::default(), true);
        let key = g.upstreams[0].claim_loop_probe().expect("a loop probe to send");
        assert_eq!(key.qtype(), rtype::HINFO);
        assert!(g.upstreams[0].probe_recursion_desired(&key));
        g.upstreams[0].probing = false;
        assert!(g.upstreams[0].claim_loop_probe().is_none(), "once");
        let health = SharedHealth::with_options(
            [UpstreamSet {
                zone: None,
                servers: &[],
                options: &ForwardOptions::default(),
            }],
            None,
            Some(&loop_token()),
            Instant::now(),
        );
        assert!(
            health.loop_probe_of(key.name_wire()).is_none(),
            "another server's probe is no loop"
        );
        assert!(mark_looping(&g.upstreams[0].health));
        assert!(!mark_looping(&g.upstreams[0].health), "reported once");
        assert!(g.upstreams[0].is_down());
        assert!(
            !g.upstreams[0].succeeded(Duration::from_millis(1)),
            "an answer does not bring it back"
        );
        assert!(g.upstreams[0].is_down());
        assert!(
            !g.upstreams[0].claim_probe(Instant::now() + Duration::from_secs(5)),
            "nor is it probed"
        );
        assert_eq!(g.first(false, Instant::now()), Some(1));
        let mut alone = group_with(1, ForwardOptions::default(), true);
        mark_looping(&alone.upstreams[0].health);
        assert_eq!(alone.first(true, Instant::now()), None, "not even a recheck");
    }

    #[test]
    fn a_plan_with_the_same_servers_and_options_keeps_the_health_of_the_one_before() {
        let servers = [SocketAddr::from(([127, 0, 0, 1], 53))];
        let set = |options| UpstreamSet {
            zone: None,
            servers: &servers,
            options,
        };
        let default = ForwardOptions::default();
        let first = SharedHealth::with_options([set(&default)], None, None, Instant::now());
        let same = SharedHealth::with_options([set(&default)], Some(&first), None, Instant::now());
        assert!(Arc::ptr_eq(&first.get(0, 0), &same.get(0, 0)));
        let sequential = with_policy(Policy::Sequential);
        let changed = SharedHealth::with_options([set(&sequential)], Some(&first), None, Instant::now());
        assert!(!Arc::ptr_eq(&first.get(0, 0), &changed.get(0, 0)));
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
