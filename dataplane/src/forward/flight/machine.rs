//! The forwarder's state machine, sans I/O: one worker's questions in flight (one entry per
//! distinct question: single-flight), their tries, timers, the order in which upstreams are
//! asked, and what the upstreams' health says. Events go in — a question submitted, a reply or
//! a failure on a try, a send that failed, time passing — each with the time it happened; what
//! to do comes out: tries to send ([`Transmit`]), tries whose socket may close, and questions
//! that ended ([`Done`]). Nothing here opens a socket or reads a clock, so tests and the
//! `upstream` fuzz target drive it through retries, timeouts, the TCP fallback and the down/up
//! rules with simulated time; `flight::sockets` is the thin layer that carries its tries over
//! real sockets.
//!
//! A question is tried at most [`TRIES`] times within the time budget, moving to the next
//! healthy upstream each time, every try under a fresh random ID. Every try is its own
//! transmit, which the socket layer sends from a socket and source port of its own. A try that
//! timed out stays open until the question ends, so that a late answer still counts (and tells
//! that the upstream is alive). A try that failed outright (a refused datagram, a reset
//! connection) makes way for the next upstream at once. A truncated answer is asked again over
//! TCP of the same upstream. A set of upstreams whose transport is a stream
//! ([`Transport::ForceTcp`], [`Transport::Tls`]) is asked over the worker's persistent
//! connections instead: the socket layer pipelines the tries on them and matches replies by ID,
//! and a try whose connection its upstream closed after answering others is sent once more on
//! a new one ([`Machine::on_connection_lost`]).

#[cfg(test)]
mod tests;

pub use crate::forward::entropy::Entropy;

use super::timers::{Timer, Timers};
use crate::cache::{Cache, Entry, Key};
use crate::forward::message::{read_reply, without_recursion, write_query, Mismatch, Verdict, MAX_QUERY_LEN};
use crate::forward::upstream::{had_a_chance, Group, SharedHealth, Upstream};
use crate::forward::{Failure, ForwardConfig, Route, Tls, Transport};
use crate::stats::{RateLimitedWarning, WorkerStats};
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tries per question: SkyDNS makes at most n + 1 for n upstreams; three cover the common one
/// or two upstreams and bound the work a question that never resolves can cause.
pub const TRIES: usize = 3;
/// Clients that may wait on one question; more get SERVFAIL at once.
const MAX_WAITERS: usize = 256;
/// The longest waiter list [`Machine::recycle`] keeps.
const SPARE_WAITERS_CAPACITY: usize = 4;
/// How long a health probe may take.
const PROBE_BUDGET: Duration = Duration::from_secs(1);
/// Floor of the timeout of a TCP retry, which costs a handshake more than the UDP try.
const MIN_TCP_TIMEOUT: Duration = Duration::from_millis(500);

/// Why a question is put in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Clients wait for it; `stale` says the cache holds a stale answer for it.
    Clients {
        /// A stale answer is at hand.
        stale: bool,
    },
    /// A prefetch or stale recheck: only the cache waits. When every upstream is down it goes
    /// anyway and doubles as a probe.
    Refresh,
}

/// Why a question is in flight: what was submitted, or a probe the machine sent itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Clients {
        stale: bool,
    },
    Refresh,
    /// A health probe (`. NS`) of one down upstream of the question's route.
    Probe(usize),
}

impl From<Kind> for Purpose {
    fn from(kind: Kind) -> Purpose {
        match kind {
            Kind::Clients { stale } => Purpose::Clients { stale },
            Kind::Refresh => Purpose::Refresh,
        }
    }
}

/// A question that ended (or whose waiters get a stale answer while it goes on).
#[derive(Debug)]
pub struct Done<W> {
    /// The question.
    pub key: Key,
    /// Clients to answer.
    pub waiters: Vec<W>,
    /// The answer, or why there is none.
    pub result: Result<Entry, Failure>,
    /// The answer should be cached.
    pub store: bool,
}

/// One try of one question: what the socket layer files its socket under, and what it hands
/// back with each reply or failure. A try that ended is never named again: its slot's next try
/// has another serial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TryId {
    index: usize,
    serial: u64,
}

impl TryId {
    fn new(slot: usize, attempt: usize, serial: u64) -> TryId {
        TryId {
            index: slot * TRIES + attempt,
            serial,
        }
    }

    /// A small number for a table of open tries: below [`TRIES`] times the most questions
    /// ever in flight at once. Two tries open at once never share it; a try may take the index
    /// of one that was closed before it.
    pub fn index(self) -> usize {
        self.index
    }

    fn slot(self) -> usize {
        self.index / TRIES
    }

    fn attempt(self) -> usize {
        self.index % TRIES
    }
}

/// How a try travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// One datagram each way, from a socket connected to the upstream.
    Udp,
    /// A connection of its own, the query and the reply framed by a 2-byte length (RFC 7766).
    Tcp,
    /// A persistent TCP connection to the upstream shared with other tries, which are
    /// pipelined on it and told apart by ID (RFC 7766 §6.2.1.1).
    PooledTcp,
    /// The same under TLS (RFC 7858).
    Tls,
}

impl Protocol {
    /// Whether replies come framed over a stream, where truncation means nothing more is to
    /// be had.
    pub fn is_stream(self) -> bool {
        self != Protocol::Udp
    }
}

/// A try to send: its query, to `upstream` over `protocol`.
#[derive(Debug, Clone)]
pub struct Transmit {
    /// The try; replies and failures are handed back under it.
    pub id: TryId,
    /// Where it goes.
    pub upstream: SocketAddr,
    /// How.
    pub protocol: Protocol,
    /// Whom to trust and which name to check, over [`Protocol::Tls`].
    pub tls: Option<Arc<Tls>>,
    query: [u8; MAX_QUERY_LEN],
    len: usize,
}

impl Transmit {
    /// The query, unframed.
    pub fn query(&self) -> &[u8] {
        &self.query[..self.len]
    }

    /// The query's ID, which its reply carries back.
    pub fn query_id(&self) -> u16 {
        u16::from_be_bytes([self.query[0], self.query[1]])
    }
}

/// What the socket layer must do, in the order the machine asks it.
// A query travels inline: boxing it would allocate on every cache miss, and the queue holds a
// few actions at a time.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Action {
    /// Open a socket for a new try and send its query.
    Transmit(Transmit),
    /// A try ended: close its socket. Only tries whose transmit went out are closed this way.
    Close(TryId),
}

/// Why a try's query could not go out.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// This host ran out of something (file descriptors, memory, ports): the upstream is not
    /// at fault, and other upstreams would fail alike.
    #[error("no socket for an upstream query: {0}")]
    Local(#[source] io::Error),
    /// The upstream cannot be reached (no route, refused).
    #[error("the upstream cannot be reached: {0}")]
    Upstream(#[source] io::Error),
}

struct Flight<W> {
    key: Key,
    /// The hash it is indexed under in `by_key`, if it is.
    hash: Option<u64>,
    route: usize,
    purpose: Purpose,
    waiters: Vec<W>,
    deadline: Instant,
    serial: u64,
    tries: usize,
    last: usize,
    attempts: [Option<Attempt>; TRIES],
    bad_answer: bool,
    /// Tries that timed out or failed so far.
    failures: u32,
}

impl<W> Flight<W> {
    /// Whether a try is still waiting within its own timeout.
    fn has_live_attempt(&self) -> bool {
        self.attempts.iter().flatten().any(|a| !a.timed_out)
    }
}

struct Attempt {
    upstream: usize,
    id: u16,
    serial: u64,
    sent: Instant,
    timed_out: bool,
    protocol: Protocol,
    /// Sent again after its connection was lost ([`Machine::on_connection_lost`]).
    resent: bool,
}

/// One worker's questions in flight and its view of the upstreams, generic over what waits
/// for an answer (`W`: a client to answer, in the worker).
pub struct Machine<W> {
    groups: Vec<Group>,
    /// How each route's upstreams are asked.
    transports: Vec<Transport>,
    down: Vec<bool>,
    flights: Vec<Option<Flight<W>>>,
    free: Vec<usize>,
    active: usize,
    max_in_flight: usize,
    /// Questions by the hash of their key (made with the map's own hasher), for
    /// single-flight: the key itself would cost an allocation a question. Two questions whose
    /// keys share a hash are never merged; the second goes on its own.
    by_key: HashMap<u64, usize, foldhash::fast::RandomState>,
    /// Emptied waiter lists handed back ([`Machine::recycle`]), so that a question does not
    /// allocate one.
    spare_waiters: Vec<Vec<W>>,
    timers: Timers,
    serial: u64,
    ids: Entropy,
    budget: Duration,
    actions: VecDeque<Action>,
    done: Vec<Done<W>>,
    stats: Arc<WorkerStats>,
    socket_warning: RateLimitedWarning,
    rotate: bool,
}

impl<W> Machine<W> {
    /// A machine over `groups` of upstreams (route index → servers) under `config`, their
    /// health in `health`, drawing query IDs from `ids`, with counters of its own.
    pub fn new(groups: &[&[SocketAddr]], config: &ForwardConfig, health: &SharedHealth, ids: Entropy) -> Machine<W> {
        Machine::with_stats(groups, config, health, ids, Arc::default())
    }

    /// A machine counting into a worker's `stats`.
    pub(crate) fn with_stats(
        groups: &[&[SocketAddr]],
        config: &ForwardConfig,
        health: &SharedHealth,
        ids: Entropy,
        stats: Arc<WorkerStats>,
    ) -> Machine<W> {
        let groups: Vec<Group> = groups
            .iter()
            .enumerate()
            .map(|(route, g)| Group::new(g, route, health, config.rotate, &stats.upstreams))
            .collect();
        Machine {
            down: groups.iter().map(Group::all_down).collect(),
            transports: (0..groups.len()).map(|r| config.transport_of(r).clone()).collect(),
            groups,
            flights: Vec::new(),
            free: Vec::new(),
            active: 0,
            max_in_flight: config.max_in_flight.max(1),
            // Sized for the bound (up to a point): growing it would allocate in the middle of
            // a burst of misses.
            by_key: HashMap::with_capacity_and_hasher(config.max_in_flight.clamp(1, 1024), Default::default()),
            spare_waiters: Vec::new(),
            timers: Timers::default(),
            serial: 0,
            ids,
            budget: config.timeout,
            actions: VecDeque::new(),
            done: Vec::new(),
            stats,
            socket_warning: RateLimitedWarning::default(),
            rotate: config.rotate,
        }
    }

    /// Switches to `groups` of upstreams (route index → servers) under `config`, their servers'
    /// health in `health`. A route whose servers and transport are the same keeps its group,
    /// health and questions in flight. A question in flight on a route whose servers changed is asked
    /// again of the new servers within what is left of its budget, its clients still waiting;
    /// one on a route that is gone, or a probe of a server that is gone, ends unanswered.
    pub fn replace(&mut self, groups: &[&[SocketAddr]], config: &ForwardConfig, health: &SharedHealth, now: Instant) {
        let rotate_changed = self.rotate != config.rotate;
        let kept: Vec<bool> = groups
            .iter()
            .enumerate()
            .map(|(route, servers)| {
                !rotate_changed
                    && self.transports.get(route) == Some(config.transport_of(route))
                    && self.groups.get(route).is_some_and(|g| g.serves(servers, route, health))
            })
            .collect();
        let mut again = Vec::new();
        for slot in 0..self.flights.len() {
            let Some(flight) = self.flights[slot].as_ref() else {
                continue;
            };
            if kept.get(flight.route).copied().unwrap_or(false) {
                continue;
            }
            if matches!(flight.purpose, Purpose::Probe(_)) || flight.route >= groups.len() {
                self.complete(slot, Err(Failure::Unreachable));
                continue;
            }
            for k in 0..TRIES {
                self.close_attempt(slot, k);
            }
            again.push(slot);
        }
        let mut old = std::mem::take(&mut self.groups).into_iter();
        for (route, servers) in groups.iter().enumerate() {
            let previous = old.next();
            self.groups.push(match previous {
                Some(group) if kept[route] => group,
                _ => Group::new(servers, route, health, config.rotate, &self.stats.upstreams),
            });
        }
        self.down = self.groups.iter().map(Group::all_down).collect();
        self.transports = (0..groups.len()).map(|r| config.transport_of(r).clone()).collect();
        self.rotate = config.rotate;
        self.budget = config.timeout;
        self.max_in_flight = config.max_in_flight.max(1);
        for slot in again {
            self.ask_again(slot, now);
        }
    }

    /// Starts a question over, on its route's current servers, keeping its clients and its
    /// deadline; the timers of its earlier tries no longer match it.
    fn ask_again(&mut self, slot: usize, now: Instant) {
        let serial = self.next_serial();
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let even_down = matches!(flight.purpose, Purpose::Refresh);
        let Some(first) = self.groups[flight.route].first(even_down, now) else {
            return self.complete(slot, Err(Failure::Unreachable));
        };
        flight.serial = serial;
        flight.tries = 0;
        flight.failures = 0;
        flight.bad_answer = false;
        flight.last = first;
        self.timers.push(Timer {
            at: flight.deadline,
            serial,
            slot,
            attempt: None,
        });
        self.advance(slot, Some(first), now);
    }

    /// Per route index: whether every upstream is down.
    pub fn down(&self) -> &[bool] {
        &self.down
    }

    /// Questions in flight (answered, failed or timed out ones are not), refreshes and probes
    /// included.
    pub fn in_flight(&self) -> usize {
        self.active
    }

    /// Whether questions ended that [`Machine::drain_done`] has not handed over yet.
    pub fn has_done(&self) -> bool {
        !self.done.is_empty()
    }

    /// When [`Machine::handle_timeout`] has something to do next: a try's or a question's
    /// timeout, or a health probe.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        // Timers of tries and questions that ended stay set until they are due; the
        // first ones are dropped here, so that the worker does not wake for them.
        while self.timers.peek().is_some_and(|t| !self.is_live(t)) {
            self.timers.pop();
        }
        let timer = self.timers.peek().map(|t| t.at);
        let probe = self
            .groups
            .iter()
            .flat_map(|g| g.upstreams.iter())
            .filter_map(|u| u.next_probe())
            .min();
        match (timer, probe) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether `timer` still has something to fire: its question is in flight under the same
    /// serial, or its try is open and has not timed out.
    fn is_live(&self, timer: &Timer) -> bool {
        let Some(flight) = self.flights.get(timer.slot).and_then(Option::as_ref) else {
            return false;
        };
        match timer.attempt {
            None => flight.serial == timer.serial,
            Some(k) => flight.attempts[k]
                .as_ref()
                .is_some_and(|a| a.serial == timer.serial && !a.timed_out),
        }
    }

    /// The next thing the socket layer must do, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Hands over the questions that ended.
    pub fn drain_done(&mut self, into: &mut Vec<Done<W>>) {
        into.append(&mut self.done);
    }

    /// Takes back the waiter list of a [`Done`] whose clients are answered, to hold the
    /// clients of a later question without allocating. Short lists only, and no more than
    /// questions may be in flight: a burst of merged clients must not stay allocated.
    pub fn recycle(&mut self, mut waiters: Vec<W>) {
        if waiters.capacity() <= SPARE_WAITERS_CAPACITY && self.spare_waiters.len() < self.max_in_flight {
            waiters.clear();
            self.spare_waiters.push(waiters);
        }
    }

    fn next_serial(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    /// Puts a question in flight, or adds `waiter` to the identical question already in
    /// flight. Fails when the table is full, the waiters of that question are too many, or
    /// the route has no upstream to ask; and, for a client with a stale answer at hand, when
    /// the question in flight has already failed a try (the client gets the stale answer now).
    pub fn submit(
        &mut self,
        key: &Key,
        route: Route,
        waiter: Option<W>,
        kind: Kind,
        now: Instant,
    ) -> Result<(), Failure> {
        self.submit_to(key, route.index(), waiter, kind.into(), now)
    }

    fn submit_to(
        &mut self,
        key: &Key,
        route: usize,
        waiter: Option<W>,
        purpose: Purpose,
        now: Instant,
    ) -> Result<(), Failure> {
        // Probes are never merged, nor indexed; nor is a question whose key's hash another
        // question in flight holds.
        let mut indexed = !matches!(purpose, Purpose::Probe(_));
        let hash = self.by_key.hasher().hash_one(key.bytes());
        if let Some(&slot) = self.by_key.get(&hash).filter(|_| indexed) {
            match self.flights[slot].as_mut() {
                Some(flight) if flight.key.bytes() == key.bytes() => {
                    if let Some(waiter) = waiter {
                        if matches!(purpose, Purpose::Clients { stale: true }) && flight.failures > 0 {
                            return Err(Failure::Unreachable);
                        }
                        if flight.waiters.len() >= MAX_WAITERS {
                            self.stats.forward_busy.incr();
                            return Err(Failure::Busy);
                        }
                        flight.waiters.push(waiter);
                        self.stats.forward_merged.incr();
                    }
                    return Ok(());
                }
                _ => indexed = false,
            }
        }
        if self.active >= self.max_in_flight {
            self.stats.forward_busy.incr();
            return Err(Failure::Busy);
        }
        let group = self.groups.get_mut(route).ok_or(Failure::Unreachable)?;
        let first = match purpose {
            Purpose::Probe(upstream) => Some(upstream),
            Purpose::Refresh => group.first(true, now),
            Purpose::Clients { .. } => group.first(false, now),
        }
        .ok_or(Failure::Unreachable)?;
        let serial = self.next_serial();
        let budget = match purpose {
            Purpose::Probe(_) => PROBE_BUDGET,
            _ => self.budget,
        };
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.flights.push(None);
                self.flights.len() - 1
            }
        };
        if indexed {
            self.by_key.insert(hash, slot);
        }
        let mut waiters = self.spare_waiters.pop().unwrap_or_default();
        waiters.extend(waiter);
        self.flights[slot] = Some(Flight {
            key: key.clone(),
            hash: indexed.then_some(hash),
            route,
            purpose,
            waiters,
            deadline: now + budget,
            serial,
            tries: 0,
            last: first,
            attempts: [None, None, None],
            bad_answer: false,
            failures: 0,
        });
        self.active += 1;
        self.timers.push(Timer {
            at: now + budget,
            serial,
            slot,
            attempt: None,
        });
        self.advance(slot, Some(first), now);
        Ok(())
    }

    /// Notes what other workers found out about the upstreams (health is shared), fires the
    /// timers due at `now` and sends the health probes due.
    pub fn handle_timeout(&mut self, cache: &Cache, now: Instant) {
        for route in 0..self.groups.len() {
            // Another worker may have found the route's last upstream dead.
            self.update_down(route);
        }
        while self.timers.peek().is_some_and(|t| t.at <= now) {
            if let Some(timer) = self.timers.pop() {
                self.expire(timer, cache, now);
            }
        }
        self.probe(now);
    }

    /// The slot and try number of try `id`, while it is open.
    fn open(&self, id: TryId) -> Option<(usize, usize)> {
        let (slot, k) = (id.slot(), id.attempt());
        let attempt = self.flights.get(slot)?.as_ref()?.attempts[k].as_ref()?;
        (attempt.serial == id.serial).then_some((slot, k))
    }

    /// Starts the next try of a question, on `candidate` or the next upstream that is up; gives
    /// the question up when no try is left.
    fn advance(&mut self, slot: usize, candidate: Option<usize>, now: Instant) {
        let Some(flight) = self.flights.get(slot).and_then(Option::as_ref) else {
            return;
        };
        let group = &self.groups[flight.route];
        let upstream = match candidate {
            Some(u) if flight.tries < TRIES => Some(u),
            _ if flight.tries >= TRIES || now >= flight.deadline => None,
            _ => match flight.purpose {
                Purpose::Probe(_) => None,
                Purpose::Refresh if group.all_down() => Some(flight.last),
                _ => group.after(flight.last),
            },
        };
        match upstream {
            Some(upstream) => self.start_try(slot, upstream, now),
            None => self.give_up(slot),
        }
    }

    /// Sends try number `flight.tries` of question `slot` to `upstream`, over UDP or the
    /// route's persistent connections.
    fn start_try(&mut self, slot: usize, upstream: usize, now: Instant) {
        let id = self.ids.u16();
        let serial = self.next_serial();
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let k = flight.tries;
        flight.tries += 1;
        flight.last = upstream;
        let server = &self.groups[flight.route].upstreams[upstream];
        server.counters.sent();
        let (protocol, tls) = match &self.transports[flight.route] {
            Transport::PreferUdp => (Protocol::Udp, None),
            Transport::ForceTcp => (Protocol::PooledTcp, None),
            Transport::Tls(tls) => (Protocol::Tls, Some(Arc::clone(tls))),
        };
        let mut timeout = server.rto(k as u32);
        if protocol.is_stream() {
            timeout = timeout.max(MIN_TCP_TIMEOUT);
        }
        flight.attempts[k] = Some(Attempt {
            upstream,
            id,
            serial,
            sent: now,
            timed_out: false,
            protocol,
            resent: false,
        });
        self.actions.push_back(Action::Transmit(transmit(
            TryId::new(slot, k, serial),
            server,
            protocol,
            tls,
            id,
            flight,
        )));
        self.timers.push(Timer {
            at: (now + timeout).min(flight.deadline),
            serial,
            slot,
            attempt: Some(k),
        });
    }

    /// Handles `msg`, received on try `id` at `now`: an answer ends the question, a truncated
    /// one moves the try to TCP, a failure (or an unreadable answer) moves the question to the
    /// next upstream, and a message that is not the reply awaited is counted and ignored, the
    /// try still listening.
    pub fn on_reply(&mut self, id: TryId, msg: &[u8], cache: &Cache, now: Instant) {
        let Some((slot, k)) = self.open(id) else {
            return;
        };
        let Some(flight) = self.flights[slot].as_ref() else {
            return;
        };
        let Some(attempt) = flight.attempts[k].as_ref() else {
            return;
        };
        let via_tcp = attempt.protocol.is_stream();
        let verdict = read_reply(msg, attempt.id, &flight.key, via_tcp, cache, now);
        let probe = matches!(flight.purpose, Purpose::Probe(_));
        let (route, upstream, rtt) = (
            flight.route,
            attempt.upstream,
            now.saturating_duration_since(attempt.sent),
        );
        if let Verdict::Mismatched(mismatch) = verdict {
            match mismatch {
                Mismatch::Id => self.stats.upstream_mismatched_id.incr(),
                Mismatch::Question => self.stats.upstream_mismatched_question.incr(),
            }
            return;
        }
        let code = msg.get(3).map_or(0, |flags| u16::from(flags & 0x0f));
        self.groups[route].upstreams[upstream].counters.answered(code, rtt);
        if self.groups[route].upstreams[upstream].succeeded(rtt) {
            tracing::info!(upstream = %self.groups[route].upstreams[upstream].addr, "upstream answers again");
        }
        self.update_down(route);
        match verdict {
            Verdict::Mismatched(_) => {}
            // A probe only asks whether the upstream answers at all; whatever it said, it did.
            _ if probe => self.complete(slot, Err(Failure::Unreachable)),
            Verdict::Truncated => self.retry_over_tcp(slot, k, now),
            Verdict::Answer(entry) => self.complete(slot, Ok(entry)),
            Verdict::Bad => {
                self.stats.upstream_bad_answers.incr();
                self.close_attempt(slot, k);
                if let Some(flight) = self.flights[slot].as_mut() {
                    flight.bad_answer = true;
                    if !flight.has_live_attempt() {
                        self.advance(slot, None, now);
                    }
                }
            }
        }
    }

    /// Try `id` failed after its query went out (a refused datagram, a reset or closed
    /// connection): its upstream is held to account and the next one asked at once.
    pub fn on_receive_error(&mut self, id: TryId, cache: &Cache, now: Instant) {
        let Some((slot, k)) = self.open(id) else {
            return;
        };
        self.stats.upstream_errors.incr();
        let Some(upstream) = self.flights[slot]
            .as_ref()
            .and_then(|f| f.attempts[k].as_ref())
            .map(|a| a.upstream)
        else {
            return;
        };
        self.close_attempt(slot, k);
        self.note_failure(slot, upstream, now);
        self.serve_stale_early(slot, cache, now);
        if self.flights[slot].as_ref().is_some_and(|f| !f.has_live_attempt()) {
            self.advance(slot, None, now);
        }
    }

    /// Try `id`'s query could not go out; the socket layer has closed what it opened for it,
    /// and no [`Action::Close`] follows unless one was already queued (the try had ended before
    /// its transmit was carried out; closing a try without a socket is nothing). Over UDP, an upstream that cannot be reached is held
    /// to account and the next one asked; a host out of sockets fails the question at once
    /// ([`Failure::Busy`]). A TCP retry that cannot connect makes way for the next upstream.
    pub fn on_send_error(&mut self, id: TryId, error: SendError, now: Instant) {
        let Some((slot, k)) = self.open(id) else {
            return;
        };
        self.stats.upstream_errors.incr();
        let Some(attempt) = self.flights[slot].as_mut().and_then(|f| f.attempts[k].take()) else {
            return;
        };
        match (attempt.protocol, error) {
            (Protocol::Tcp, _) => {}
            (_, SendError::Upstream(e)) => {
                tracing::debug!(error = %e, "sending an upstream query failed");
                self.note_failure(slot, attempt.upstream, now);
            }
            (_, SendError::Local(e)) => {
                if let Some(suppressed) = self.socket_warning.allow(now) {
                    tracing::warn!(error = %e, suppressed, "cannot open an upstream socket");
                }
                return self.complete(slot, Err(Failure::Busy));
            }
        }
        if self.flights[slot].as_ref().is_some_and(|f| !f.has_live_attempt()) {
            self.advance(slot, None, now);
        }
    }

    /// Try `id`'s persistent connection closed under it after carrying other replies: an
    /// upstream may close a connection at any time (RFC 7766 §6.2.3: idle, or busy), which
    /// says nothing against it. The query goes out once more, under the same ID, on another
    /// connection; a try whose second connection is lost as well fails
    /// ([`Machine::on_receive_error`]).
    pub fn on_connection_lost(&mut self, id: TryId, cache: &Cache, now: Instant) {
        let Some((slot, k)) = self.open(id) else {
            return;
        };
        let tls = match &self.flights[slot] {
            Some(flight) => match &self.transports[flight.route] {
                Transport::Tls(tls) => Some(Arc::clone(tls)),
                Transport::PreferUdp | Transport::ForceTcp => None,
            },
            None => return,
        };
        let Some(flight) = self.flights[slot].as_mut() else {
            return;
        };
        let Some(attempt) = flight.attempts[k].as_mut() else {
            return;
        };
        if attempt.resent || !matches!(attempt.protocol, Protocol::PooledTcp | Protocol::Tls) {
            return self.on_receive_error(id, cache, now);
        }
        attempt.resent = true;
        self.stats.upstream_resent.incr();
        let (protocol, query_id) = (attempt.protocol, attempt.id);
        let server = &self.groups[flight.route].upstreams[attempt.upstream];
        let flight = &*flight;
        self.actions
            .push_back(Action::Transmit(transmit(id, server, protocol, tls, query_id, flight)));
    }

    /// Asks try `k`'s question again over TCP, of the same upstream, with a new ID; the UDP
    /// try closes.
    fn retry_over_tcp(&mut self, slot: usize, k: usize, now: Instant) {
        self.stats.upstream_tcp_retries.incr();
        let id = self.ids.u16();
        let serial = self.next_serial();
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let Some(attempt) = flight.attempts[k].as_mut() else {
            return;
        };
        self.actions
            .push_back(Action::Close(TryId::new(slot, k, attempt.serial)));
        let server = &self.groups[flight.route].upstreams[attempt.upstream];
        server.counters.sent();
        let timeout = server.rto(1).max(MIN_TCP_TIMEOUT);
        attempt.id = id;
        attempt.serial = serial;
        attempt.sent = now;
        attempt.timed_out = false;
        attempt.protocol = Protocol::Tcp;
        attempt.resent = false;
        self.actions.push_back(Action::Transmit(transmit(
            TryId::new(slot, k, serial),
            server,
            Protocol::Tcp,
            None,
            id,
            flight,
        )));
        self.timers.push(Timer {
            at: (now + timeout).min(flight.deadline),
            serial,
            slot,
            attempt: Some(k),
        });
    }

    /// A timer fired: a try timed out, or the question's budget ran out.
    fn expire(&mut self, timer: Timer, cache: &Cache, now: Instant) {
        if !self.is_live(&timer) {
            return;
        }
        let Some(k) = timer.attempt else {
            return self.budget_spent(timer.slot, now);
        };
        let Some(attempt) = self.flights[timer.slot].as_mut().and_then(|f| f.attempts[k].as_mut()) else {
            return;
        };
        attempt.timed_out = true;
        let upstream = attempt.upstream;
        let over_tcp = attempt.protocol == Protocol::Tcp;
        self.stats.upstream_timeouts.incr();
        if over_tcp {
            self.close_attempt(timer.slot, k);
        }
        self.note_failure(timer.slot, upstream, now);
        self.serve_stale_early(timer.slot, cache, now);
        if self.flights[timer.slot].as_ref().is_some_and(|f| !f.has_live_attempt()) {
            self.advance(timer.slot, None, now);
        }
    }

    /// Counts a failure against `upstream` of question `slot`'s route.
    fn note_failure(&mut self, slot: usize, upstream: usize, now: Instant) {
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        flight.failures += 1;
        let route = flight.route;
        let checked = matches!(flight.purpose, Purpose::Probe(_));
        let server = &mut self.groups[route].upstreams[upstream];
        server.counters.failed();
        let went_down = if checked {
            server.check_failed(now)
        } else {
            server.failed(now)
        };
        if went_down {
            self.stats.upstreams_marked_down.incr();
            tracing::warn!(upstream = %server.addr, "upstream marked down after repeated failures");
        }
        self.update_down(route);
    }

    /// Every upstream of `route` is down now: clients still waiting on a try to one of them
    /// get their answer at once (stale where the cache can, else SERVFAIL), as a new question's
    /// clients would, instead of at that try's timeout, which after two retries is most of the
    /// budget. Refreshes and probes go on: they are how the route is found back.
    fn give_up_on_route(&mut self, route: usize) {
        for slot in 0..self.flights.len() {
            let waiting = self.flights[slot]
                .as_ref()
                .is_some_and(|f| f.route == route && matches!(f.purpose, Purpose::Clients { .. }));
            if waiting {
                self.give_up(slot);
            }
        }
    }

    /// After a failed try, clients of a question the cache can still answer (stale) get that
    /// answer now instead of waiting for the remaining tries (RFC 8767 §5's client response
    /// timer); the question goes on to refresh the cache.
    fn serve_stale_early(&mut self, slot: usize, cache: &Cache, now: Instant) {
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if flight.waiters.is_empty() || !cache.can_serve(flight.key.key_ref(), now) {
            return;
        }
        self.done.push(Done {
            key: flight.key.clone(),
            waiters: std::mem::take(&mut flight.waiters),
            result: Err(Failure::Unreachable),
            store: false,
        });
    }

    /// The question's budget ran out. A try still waiting had its timeout cut to the budget
    /// (a forwarding timeout shorter than the retry timeout cuts every one): its upstream did not
    /// answer within the time the clients could wait, which counts against it as a try's own
    /// timeout does, or a dead upstream would never be found and every client would wait the
    /// whole budget for it. A try sent too late to have had a chance is not held against its
    /// upstream.
    fn budget_spent(&mut self, slot: usize, now: Instant) {
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let budget = match flight.purpose {
            Purpose::Probe(_) => PROBE_BUDGET,
            Purpose::Clients { .. } | Purpose::Refresh => self.budget,
        };
        let mut unanswered = [None; TRIES];
        for (attempt, silent) in flight.attempts.iter_mut().flatten().zip(&mut unanswered) {
            if !attempt.timed_out && had_a_chance(now.saturating_duration_since(attempt.sent), budget) {
                attempt.timed_out = true;
                *silent = Some(attempt.upstream);
            }
        }
        for upstream in unanswered.into_iter().flatten() {
            self.stats.upstream_timeouts.incr();
            self.note_failure(slot, upstream, now);
        }
        self.give_up(slot);
    }

    fn give_up(&mut self, slot: usize) {
        let failure = match self.flights.get(slot).and_then(Option::as_ref) {
            Some(flight) if flight.bad_answer => Failure::BadAnswers,
            Some(_) => Failure::Unreachable,
            None => return,
        };
        self.complete(slot, Err(failure));
    }

    /// Ends try `k` of question `slot`, asking the socket layer to close its socket.
    fn close_attempt(&mut self, slot: usize, k: usize) {
        let Some(attempt) = self
            .flights
            .get_mut(slot)
            .and_then(Option::as_mut)
            .and_then(|f| f.attempts[k].take())
        else {
            return;
        };
        self.actions
            .push_back(Action::Close(TryId::new(slot, k, attempt.serial)));
    }

    /// Ends question `slot`: closes its tries and queues its clients' answers.
    fn complete(&mut self, slot: usize, result: Result<Entry, Failure>) {
        for k in 0..TRIES {
            self.close_attempt(slot, k);
        }
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.free.push(slot);
        self.active -= 1;
        match flight.purpose {
            Purpose::Probe(upstream) => self.groups[flight.route].upstreams[upstream].probing = false,
            Purpose::Clients { .. } | Purpose::Refresh => {
                if let Some(hash) = flight.hash {
                    self.by_key.remove(&hash);
                }
                if result.is_err() && !flight.waiters.is_empty() {
                    self.stats.forward_failures.incr();
                }
                let store = result.is_ok();
                if store || !flight.waiters.is_empty() {
                    self.done.push(Done {
                        key: flight.key,
                        waiters: flight.waiters,
                        result,
                        store,
                    });
                }
            }
        }
    }

    /// Sends its loop probe to every upstream that has one to send, and a health probe (`. NS`,
    /// or the set's health check) to every upstream whose probe is due: down ones, and every
    /// one of a set with health checks.
    fn probe(&mut self, now: Instant) {
        for route in 0..self.groups.len() {
            for upstream in 0..self.groups[route].upstreams.len() {
                if let Some(key) = self.groups[route].upstreams[upstream].claim_loop_probe() {
                    if self
                        .submit_to(&key, route, None, Purpose::Probe(upstream), now)
                        .is_err()
                    {
                        self.groups[route].upstreams[upstream].probing = false;
                    }
                    continue;
                }
                if !self.groups[route].upstreams[upstream].claim_probe(now) {
                    continue;
                }
                self.stats.upstream_probes.incr();
                if self.down.get(route).copied().unwrap_or(false) {
                    self.stats.upstreams_all_down.incr();
                }
                let key = self.groups[route].upstreams[upstream].probe_key();
                if self
                    .submit_to(&key, route, None, Purpose::Probe(upstream), now)
                    .is_err()
                {
                    self.groups[route].upstreams[upstream].probing = false;
                }
            }
        }
    }

    /// Reads whether every upstream of `route` is down (health is shared: any worker may have
    /// changed it); when that has just become so, gives up the questions waiting on it.
    fn update_down(&mut self, route: usize) {
        let (Some(flag), Some(group)) = (self.down.get_mut(route), self.groups.get(route)) else {
            return;
        };
        let was_down = std::mem::replace(flag, group.all_down());
        if *flag && !was_down {
            self.give_up_on_route(route);
        }
    }
}

/// The transmit of try `id` of `flight` to `upstream`, with query ID `query_id`; queries to a
/// stub zone's servers carry the loop guard, and those on persistent connections
/// edns-tcp-keepalive; a health check of a `no_rec` set goes without RD.
fn transmit<W>(
    id: TryId,
    upstream: &Upstream,
    protocol: Protocol,
    tls: Option<Arc<Tls>>,
    query_id: u16,
    flight: &Flight<W>,
) -> Transmit {
    let mut query = [0u8; MAX_QUERY_LEN];
    let keepalive = matches!(protocol, Protocol::PooledTcp | Protocol::Tls);
    let len = write_query(&mut query, query_id, &flight.key, flight.route != 0, keepalive);
    if matches!(flight.purpose, Purpose::Probe(_)) && !upstream.probe_recursion_desired(&flight.key) {
        without_recursion(&mut query);
    }
    Transmit {
        id,
        upstream: upstream.addr,
        protocol,
        tls,
        query,
        len,
    }
}
