//! Questions in flight to upstreams: one table per worker, one entry per distinct question
//! (single-flight), each try with a fresh ID, timers in a heap.
//!
//! A try's socket is connected to its upstream. The socket of a try that brought an answer is
//! kept for a later try to the same upstream, for at most [`SOCKET_USES`] tries and
//! [`SPARE_IDLE`] idle: opening, connecting, registering and closing a socket per try cost a
//! miss a quarter of its CPU time, which is latency on every miss. The port then serves several
//! questions, each still under its own random ID and checked against its question; a try that
//! failed or timed out never hands its socket on.
//!
//! A question is tried at most [`TRIES`] times within the time budget, moving to the next
//! healthy upstream each time. A try that timed out keeps its socket open until the question
//! ends, so that a late answer still counts (and tells that the upstream is alive). A refused
//! datagram (the upstream's port is closed) fails its try at once. A truncated answer is asked
//! again over TCP from the same upstream.

use super::entropy::Entropy;
use super::message::{read_reply, write_query, Mismatch, Verdict, MAX_QUERY_LEN};
use super::upstream::{had_a_chance, Group, SharedHealth};
use super::{Client, ForwardConfig};
use crate::answer::{ClientQuery, Context};
use crate::cache::{Cache, Entry, Key};
use crate::forward::Failure;
use crate::stats::{RateLimitedWarning, WorkerStats};
use crate::sys;
use crate::wire::types::{class, rtype, MAX_MESSAGE_LEN};
use crate::wire::LowerName;
use mio::net::{TcpStream, UdpSocket};
use mio::{Interest, Registry, Token};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// First token of upstream sockets; tokens below are the worker's own.
const TOKEN_BASE: usize = 1 << (usize::BITS - 2);
/// Tries per question: SkyDNS makes at most n + 1 for n upstreams; three cover the common one
/// or two upstreams and bound the work a question that never resolves can cause.
const TRIES: usize = 3;
/// Clients that may wait on one question; more get SERVFAIL at once.
const MAX_WAITERS: usize = 256;
/// How long a health probe may take.
const PROBE_BUDGET: Duration = Duration::from_secs(1);
/// Floor of the timeout of a TCP retry, which costs a handshake more than the UDP try.
const MIN_TCP_TIMEOUT: Duration = Duration::from_millis(500);
/// Bytes read from a TCP upstream per read call.
const TCP_READ_LEN: usize = 4096;
/// Tries one upstream socket serves before it is closed.
const SOCKET_USES: u32 = 64;
/// How long an unused upstream socket is kept.
const SPARE_IDLE: Duration = Duration::from_secs(10);
/// Unused upstream sockets kept per worker.
const SPARE_SOCKETS: usize = 32;

/// Why a question is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Clients wait for it; `stale` says the cache holds a stale answer for it.
    Clients {
        /// A stale answer is at hand.
        stale: bool,
    },
    /// A prefetch or stale recheck: only the cache waits. When every upstream is down it goes
    /// anyway and doubles as a probe.
    Refresh,
    /// A health probe (`. NS`) of one down upstream.
    Probe(usize),
}

/// A client waiting for a question.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// Where the answer goes.
    pub(crate) client: Client,
    /// The client's transport and keepalive.
    pub(crate) ctx: Context,
    /// The client's query, reduced.
    pub(crate) query: ClientQuery,
}

/// A question that ended (or whose waiters get a stale answer while it goes on).
#[derive(Debug)]
pub(crate) struct Done {
    /// The question.
    pub(crate) key: Key,
    /// Clients to answer.
    pub(crate) waiters: Vec<Waiter>,
    /// The answer, or why there is none.
    pub(crate) result: Result<Entry, Failure>,
    /// The answer should be cached.
    pub(crate) store: bool,
}

struct Flight {
    key: Key,
    route: usize,
    kind: Kind,
    waiters: Vec<Waiter>,
    deadline: Instant,
    serial: u64,
    tries: usize,
    last: usize,
    attempts: [Option<Attempt>; TRIES],
    bad_answer: bool,
    /// Tries that timed out or failed so far.
    failures: u32,
}

impl Flight {
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
    link: Link,
    /// Tries the UDP socket served before this one.
    uses: u32,
}

/// A connected upstream socket that brought an answer, kept for the next try to its upstream.
struct Spare {
    upstream: SocketAddr,
    socket: UdpSocket,
    uses: u32,
    since: Instant,
}

enum Link {
    Udp(UdpSocket),
    Tcp(TcpLink),
}

struct TcpLink {
    stream: TcpStream,
    connected: bool,
    out: Vec<u8>,
    written: usize,
    input: Vec<u8>,
}

/// What a TCP link has after being driven.
enum TcpProgress {
    /// Waiting for readiness.
    Pending,
    /// A whole reply of this length is at the front of the input, after its prefix.
    Message(usize),
    /// The connection failed or closed early.
    Failed,
}

impl TcpLink {
    fn progress(&mut self) -> TcpProgress {
        if !self.connected {
            match self.stream.take_error() {
                Ok(None) => {}
                Ok(Some(_)) | Err(_) => return TcpProgress::Failed,
            }
            match self.stream.peer_addr() {
                Ok(_) => self.connected = true,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return TcpProgress::Pending,
                Err(_) => return TcpProgress::Failed,
            }
        }
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return TcpProgress::Failed,
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return TcpProgress::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return TcpProgress::Failed,
            }
        }
        let mut chunk = [0u8; TCP_READ_LEN];
        loop {
            if self.input.len() >= 2 {
                let len = usize::from(u16::from_be_bytes([self.input[0], self.input[1]]));
                if self.input.len() >= 2 + len {
                    return TcpProgress::Message(len);
                }
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return TcpProgress::Failed,
                Ok(n) => self.input.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return TcpProgress::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return TcpProgress::Failed,
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    at: Instant,
    serial: u64,
    slot: usize,
    /// The try that times out, or `None` for the question's whole budget.
    attempt: Option<usize>,
}

/// Why a try could not be sent.
enum SendError {
    /// This host ran out of something (file descriptors, memory, ports).
    Local(io::Error),
    /// The upstream cannot be reached (no route, refused).
    Upstream(io::Error),
}

impl SendError {
    /// Socket setup fails on this host's limits, or because the upstream's address cannot be
    /// connected to.
    fn classify(e: io::Error) -> SendError {
        if sys::is_resource_exhaustion(&e) {
            SendError::Local(e)
        } else {
            SendError::Upstream(e)
        }
    }
}

/// One worker's questions in flight and upstream health.
pub(crate) struct Forwarder {
    registry: Registry,
    groups: Vec<Group>,
    down: Vec<bool>,
    flights: Vec<Option<Flight>>,
    free: Vec<usize>,
    active: usize,
    max_in_flight: usize,
    by_key: HashMap<Box<[u8]>, usize, foldhash::fast::RandomState>,
    timers: BinaryHeap<Reverse<Timer>>,
    ready: Vec<usize>,
    serial: u64,
    entropy: Entropy,
    budget: Duration,
    buf: Box<[u8]>,
    done: Vec<Done>,
    stats: Arc<WorkerStats>,
    socket_warning: RateLimitedWarning,
    rotate: bool,
    spare: Vec<Spare>,
}

impl Forwarder {
    /// A forwarder over `groups` of upstreams (route index → servers).
    pub(crate) fn new(
        registry: Registry,
        groups: &[&[SocketAddr]],
        config: &ForwardConfig,
        health: &SharedHealth,
        stats: Arc<WorkerStats>,
    ) -> Forwarder {
        let groups: Vec<Group> = groups
            .iter()
            .enumerate()
            .map(|(route, g)| Group::new(g, route, health, config.rotate))
            .collect();
        Forwarder {
            registry,
            down: groups.iter().map(Group::all_down).collect(),
            groups,
            flights: Vec::new(),
            free: Vec::new(),
            active: 0,
            max_in_flight: config.max_in_flight.max(1),
            by_key: HashMap::default(),
            timers: BinaryHeap::new(),
            ready: Vec::new(),
            serial: 0,
            entropy: Entropy::default(),
            budget: config.timeout,
            buf: vec![0; MAX_MESSAGE_LEN].into_boxed_slice(),
            done: Vec::new(),
            stats,
            socket_warning: RateLimitedWarning::default(),
            rotate: config.rotate,
            spare: Vec::new(),
        }
    }

    /// Switches to `groups` of upstreams (route index → servers) under `config`, their servers'
    /// health in `health`. A route whose servers are the same keeps its group, health and
    /// questions in flight. A question in flight on a route whose servers changed is asked
    /// again of the new servers within what is left of its budget, its clients still waiting;
    /// one on a route that is gone, or a probe of a server that is gone, ends unanswered.
    pub(crate) fn replace(
        &mut self,
        groups: &[&[SocketAddr]],
        config: &ForwardConfig,
        health: &SharedHealth,
        now: Instant,
    ) {
        let rotate_changed = self.rotate != config.rotate;
        let kept: Vec<bool> = groups
            .iter()
            .enumerate()
            .map(|(route, servers)| {
                !rotate_changed
                    && self
                        .groups
                        .get(route)
                        .is_some_and(|g| g.addrs().eq(servers.iter().copied()))
            })
            .collect();
        let mut again = Vec::new();
        for slot in 0..self.flights.len() {
            let Some(flight) = self.flights[slot].as_mut() else {
                continue;
            };
            if kept.get(flight.route).copied().unwrap_or(false) {
                continue;
            }
            if matches!(flight.kind, Kind::Probe(_)) || flight.route >= groups.len() {
                self.complete(slot, Err(Failure::Unreachable));
                continue;
            }
            for attempt in flight.attempts.iter_mut().filter_map(Option::take) {
                close(&self.registry, attempt.link);
            }
            again.push(slot);
        }
        let mut old = std::mem::take(&mut self.groups).into_iter();
        for (route, servers) in groups.iter().enumerate() {
            let previous = old.next();
            self.groups.push(match previous {
                Some(group) if kept[route] => group,
                _ => Group::new(servers, route, health, config.rotate),
            });
        }
        self.down = self.groups.iter().map(Group::all_down).collect();
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
        let even_down = matches!(flight.kind, Kind::Refresh);
        let Some(first) = self.groups[flight.route].first(even_down, now) else {
            return self.complete(slot, Err(Failure::Unreachable));
        };
        flight.serial = serial;
        flight.tries = 0;
        flight.failures = 0;
        flight.bad_answer = false;
        flight.last = first;
        self.timers.push(Reverse(Timer {
            at: flight.deadline,
            serial,
            slot,
            attempt: None,
        }));
        self.advance(slot, Some(first), now);
    }

    /// Per route index: whether every upstream is down.
    pub(crate) fn down(&self) -> &[bool] {
        &self.down
    }

    pub(crate) fn owns(token: Token) -> bool {
        token.0 >= TOKEN_BASE
    }

    pub(crate) fn on_event(&mut self, token: Token) {
        if let Some(offset) = token.0.checked_sub(TOKEN_BASE) {
            self.ready.push(offset);
        }
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.active
    }

    pub(crate) fn has_work(&self) -> bool {
        !self.ready.is_empty() || !self.done.is_empty()
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let timer = self.timers.peek().map(|Reverse(t)| t.at);
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

    fn next_serial(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    /// Puts a question in flight, or adds `waiter` to the identical question already in
    /// flight. Fails when the table is full, the waiters of that question are too many, or
    /// the route has no upstream to ask; and, for a client with a stale answer at hand, when
    /// the question in flight has already failed a try (the client gets the stale answer now).
    pub(crate) fn submit(
        &mut self,
        key: Key,
        route: crate::forward::Route,
        waiter: Option<Waiter>,
        kind: Kind,
        now: Instant,
    ) -> Result<(), Failure> {
        self.submit_to(key, route.index(), waiter, kind, now)
    }

    fn submit_to(
        &mut self,
        key: Key,
        route: usize,
        waiter: Option<Waiter>,
        kind: Kind,
        now: Instant,
    ) -> Result<(), Failure> {
        if !matches!(kind, Kind::Probe(_)) {
            if let Some(&slot) = self.by_key.get(key.bytes()) {
                if let (Some(waiter), Some(flight)) = (waiter, self.flights[slot].as_mut()) {
                    if matches!(kind, Kind::Clients { stale: true }) && flight.failures > 0 {
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
        }
        if self.active >= self.max_in_flight {
            self.stats.forward_busy.incr();
            return Err(Failure::Busy);
        }
        let group = self.groups.get_mut(route).ok_or(Failure::Unreachable)?;
        let first = match kind {
            Kind::Probe(upstream) => Some(upstream),
            Kind::Refresh => group.first(true, now),
            Kind::Clients { .. } => group.first(false, now),
        }
        .ok_or(Failure::Unreachable)?;
        let serial = self.next_serial();
        let budget = match kind {
            Kind::Probe(_) => PROBE_BUDGET,
            _ => self.budget,
        };
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.flights.push(None);
                self.flights.len() - 1
            }
        };
        if !matches!(kind, Kind::Probe(_)) {
            self.by_key.insert(key.bytes().into(), slot);
        }
        self.flights[slot] = Some(Flight {
            key,
            route,
            kind,
            waiters: waiter.into_iter().collect(),
            deadline: now + budget,
            serial,
            tries: 0,
            last: first,
            attempts: [None, None, None],
            bad_answer: false,
            failures: 0,
        });
        self.active += 1;
        self.timers.push(Reverse(Timer {
            at: now + budget,
            serial,
            slot,
            attempt: None,
        }));
        self.advance(slot, Some(first), now);
        Ok(())
    }

    /// Hands over the questions that ended.
    pub(crate) fn drain_done(&mut self, into: &mut Vec<Done>) {
        into.append(&mut self.done);
    }

    /// Reads what upstream sockets received, fires due timers, sends due probes.
    pub(crate) fn turn(&mut self, cache: &Cache, now: Instant, done: &mut Vec<Done>) {
        for route in 0..self.groups.len() {
            // Another worker may have found the route's last upstream dead.
            self.update_down(route);
        }
        let mut ready = std::mem::take(&mut self.ready);
        for &offset in &ready {
            self.service(offset / TRIES, offset % TRIES, cache, now);
        }
        ready.clear();
        self.ready = ready;
        while self.timers.peek().is_some_and(|Reverse(t)| t.at <= now) {
            if let Some(Reverse(timer)) = self.timers.pop() {
                self.expire(timer, cache, now);
            }
        }
        self.probe(now);
        self.drain_done(done);
    }

    /// Starts the next try of a question, on `candidate` or the next upstream that is up; gives
    /// the question up when no try is left.
    fn advance(&mut self, slot: usize, mut candidate: Option<usize>, now: Instant) {
        loop {
            let Some(flight) = self.flights.get(slot).and_then(Option::as_ref) else {
                return;
            };
            let group = &self.groups[flight.route];
            let upstream = match candidate.take() {
                Some(u) if flight.tries < TRIES => Some(u),
                _ if flight.tries >= TRIES || now >= flight.deadline => None,
                _ => match flight.kind {
                    Kind::Probe(_) => None,
                    Kind::Refresh if group.all_down() => Some(flight.last),
                    _ => group.after(flight.last),
                },
            };
            let Some(upstream) = upstream else {
                return self.give_up(slot);
            };
            match self.send_udp(slot, upstream, now) {
                Ok(()) => return,
                Err(SendError::Upstream(e)) => {
                    self.stats.upstream_errors.incr();
                    tracing::debug!(error = %e, "sending an upstream query failed");
                    self.note_failure(slot, upstream, now);
                }
                Err(SendError::Local(e)) => {
                    // Out of sockets or file descriptors: the upstream is not at fault, and
                    // trying others would fail alike.
                    self.stats.upstream_errors.incr();
                    if let Some(suppressed) = self.socket_warning.allow(now) {
                        tracing::warn!(error = %e, suppressed, "cannot open an upstream socket");
                    }
                    return self.complete(slot, Err(Failure::Busy));
                }
            }
        }
    }

    fn send_udp(&mut self, slot: usize, upstream: usize, now: Instant) -> Result<(), SendError> {
        let id = self.entropy.u16();
        let serial = self.next_serial();
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return Ok(());
        };
        let k = flight.tries;
        flight.tries += 1;
        flight.last = upstream;
        let server = &self.groups[flight.route].upstreams[upstream];
        let mut query = [0u8; MAX_QUERY_LEN];
        let len = write_query(&mut query, id, &flight.key, flight.route != 0);
        let token = Token(TOKEN_BASE + slot * TRIES + k);
        let (mut socket, uses) = match take_spare(&mut self.spare, &self.registry, server.addr, now) {
            Some(spare) => {
                let mut socket = spare.socket;
                if let Err(e) = self.registry.reregister(&mut socket, token, Interest::READABLE) {
                    let _ = self.registry.deregister(&mut socket);
                    return Err(SendError::Local(e));
                }
                (socket, spare.uses)
            }
            None => {
                let mut socket = UdpSocket::from_std(sys::upstream_udp(server.addr).map_err(SendError::classify)?);
                self.registry
                    .register(&mut socket, token, Interest::READABLE)
                    .map_err(SendError::Local)?;
                (socket, 0)
            }
        };
        if let Err(e) = socket.send(&query[..len]) {
            let _ = self.registry.deregister(&mut socket);
            return Err(SendError::Upstream(e));
        }
        let at = (now + server.rto(k as u32)).min(flight.deadline);
        flight.attempts[k] = Some(Attempt {
            upstream,
            id,
            serial,
            sent: now,
            timed_out: false,
            link: Link::Udp(socket),
            uses,
        });
        self.timers.push(Reverse(Timer {
            at,
            serial,
            slot,
            attempt: Some(k),
        }));
        self.stats.upstream_queries.incr();
        Ok(())
    }

    /// Reads everything try `k` of question `slot` has received.
    fn service(&mut self, slot: usize, k: usize, cache: &Cache, now: Instant) {
        loop {
            let Forwarder { flights, buf, .. } = self;
            let Some(attempt) = flights
                .get_mut(slot)
                .and_then(Option::as_mut)
                .and_then(|f| f.attempts.get_mut(k))
                .and_then(Option::as_mut)
            else {
                return;
            };
            let (len, via_tcp) = match &mut attempt.link {
                Link::Udp(socket) => match socket.recv(buf) {
                    Ok(n) => (n, false),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        self.stats.upstream_errors.incr();
                        return self.attempt_failed(slot, k, cache, now);
                    }
                },
                Link::Tcp(link) => match link.progress() {
                    TcpProgress::Pending => return,
                    TcpProgress::Failed => {
                        self.stats.upstream_errors.incr();
                        return self.attempt_failed(slot, k, cache, now);
                    }
                    TcpProgress::Message(len) => {
                        buf[..len].copy_from_slice(&link.input[2..2 + len]);
                        (len, true)
                    }
                },
            };
            if !self.on_message(slot, k, len, via_tcp, cache, now) {
                return;
            }
        }
    }

    /// Handles a message of `len` bytes (in the receive buffer) on try `k`; returns whether
    /// the try goes on listening.
    fn on_message(&mut self, slot: usize, k: usize, len: usize, via_tcp: bool, cache: &Cache, now: Instant) -> bool {
        let Some(flight) = self.flights.get(slot).and_then(Option::as_ref) else {
            return false;
        };
        let Some(attempt) = flight.attempts[k].as_ref() else {
            return false;
        };
        let verdict = read_reply(&self.buf[..len], attempt.id, &flight.key, via_tcp, cache, now);
        let probe = matches!(flight.kind, Kind::Probe(_));
        let (route, upstream, rtt) = (
            flight.route,
            attempt.upstream,
            now.saturating_duration_since(attempt.sent),
        );
        match verdict {
            Verdict::Mismatched(Mismatch::Id) => {
                self.stats.upstream_mismatched_id.incr();
                return true;
            }
            Verdict::Mismatched(Mismatch::Question) => {
                self.stats.upstream_mismatched_question.incr();
                return true;
            }
            _ => {}
        }
        if self.groups[route].upstreams[upstream].succeeded(rtt) {
            tracing::info!(upstream = %self.groups[route].upstreams[upstream].addr, "upstream answers again");
        }
        self.update_down(route);
        match verdict {
            Verdict::Mismatched(_) => true,
            // A probe only asks whether the upstream answers at all; whatever it said, it did.
            _ if probe => {
                self.complete(slot, Err(Failure::Unreachable));
                false
            }
            Verdict::Truncated => {
                self.retry_over_tcp(slot, k, now);
                false
            }
            Verdict::Answer(entry) => {
                if !via_tcp {
                    self.keep_socket(slot, k, now);
                }
                self.complete(slot, Ok(entry));
                false
            }
            Verdict::Bad => {
                self.stats.upstream_bad_answers.incr();
                self.close_attempt(slot, k);
                if let Some(flight) = self.flights[slot].as_mut() {
                    flight.bad_answer = true;
                    if !flight.has_live_attempt() {
                        self.advance(slot, None, now);
                    }
                }
                false
            }
        }
    }

    /// Asks try `k`'s question again over TCP, of the same upstream, with a new ID.
    fn retry_over_tcp(&mut self, slot: usize, k: usize, now: Instant) {
        self.stats.upstream_tcp_retries.incr();
        let id = self.entropy.u16();
        let serial = self.next_serial();
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let Some(attempt) = flight.attempts[k].as_mut() else {
            return;
        };
        let server = &self.groups[flight.route].upstreams[attempt.upstream];
        let mut query = [0u8; MAX_QUERY_LEN];
        let len = write_query(&mut query, id, &flight.key, flight.route != 0);
        let mut framed = Vec::with_capacity(2 + len);
        framed.extend_from_slice(&(len as u16).to_be_bytes());
        framed.extend_from_slice(&query[..len]);
        let token = Token(TOKEN_BASE + slot * TRIES + k);
        let connected = TcpStream::connect(server.addr).and_then(|mut stream| {
            self.registry
                .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
                .map(|()| stream)
        });
        let stream = match connected {
            Ok(stream) => stream,
            Err(_) => {
                self.stats.upstream_errors.incr();
                self.close_attempt(slot, k);
                if self.flights[slot].as_ref().is_some_and(|f| !f.has_live_attempt()) {
                    self.advance(slot, None, now);
                }
                return;
            }
        };
        let timeout = server.rto(1).max(MIN_TCP_TIMEOUT);
        if let Link::Udp(socket) = &mut attempt.link {
            let _ = self.registry.deregister(socket);
        }
        attempt.link = Link::Tcp(TcpLink {
            stream,
            connected: false,
            out: framed,
            written: 0,
            input: Vec::new(),
        });
        attempt.id = id;
        attempt.serial = serial;
        attempt.sent = now;
        attempt.timed_out = false;
        self.timers.push(Reverse(Timer {
            at: (now + timeout).min(flight.deadline),
            serial,
            slot,
            attempt: Some(k),
        }));
        self.stats.upstream_queries.incr();
    }

    /// A timer fired: a try timed out, or the question's budget ran out.
    fn expire(&mut self, timer: Timer, cache: &Cache, now: Instant) {
        let Some(flight) = self.flights.get_mut(timer.slot).and_then(Option::as_mut) else {
            return;
        };
        let Some(k) = timer.attempt else {
            if flight.serial == timer.serial {
                self.budget_spent(timer.slot, now);
            }
            return;
        };
        let Some(attempt) = flight.attempts[k].as_mut() else {
            return;
        };
        if attempt.serial != timer.serial || attempt.timed_out {
            return;
        }
        attempt.timed_out = true;
        let upstream = attempt.upstream;
        let over_tcp = matches!(attempt.link, Link::Tcp(_));
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

    /// Try `k` failed outright (refused, reset).
    fn attempt_failed(&mut self, slot: usize, k: usize, cache: &Cache, now: Instant) {
        let Some(upstream) = self
            .flights
            .get(slot)
            .and_then(Option::as_ref)
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

    /// Counts a failure against `upstream` of question `slot`'s route.
    fn note_failure(&mut self, slot: usize, upstream: usize, now: Instant) {
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        flight.failures += 1;
        let route = flight.route;
        let server = &mut self.groups[route].upstreams[upstream];
        if server.failed(now) {
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
                .is_some_and(|f| f.route == route && matches!(f.kind, Kind::Clients { .. }));
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
        let budget = match flight.kind {
            Kind::Probe(_) => PROBE_BUDGET,
            Kind::Clients { .. } | Kind::Refresh => self.budget,
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

    fn close_attempt(&mut self, slot: usize, k: usize) {
        let Some(attempt) = self
            .flights
            .get_mut(slot)
            .and_then(Option::as_mut)
            .and_then(|f| f.attempts[k].take())
        else {
            return;
        };
        close(&self.registry, attempt.link);
    }

    /// Keeps the socket of try `k`, whose answer just arrived, for a later try to the same
    /// upstream, unless it has served its share of tries or enough sockets are kept.
    fn keep_socket(&mut self, slot: usize, k: usize, now: Instant) {
        let Some(flight) = self.flights.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let Some(attempt) = flight.attempts[k].take() else {
            return;
        };
        let upstream = self.groups[flight.route].upstreams[attempt.upstream].addr;
        match attempt.link {
            Link::Udp(socket) if attempt.uses + 1 < SOCKET_USES && self.spare.len() < SPARE_SOCKETS => {
                self.spare.push(Spare {
                    upstream,
                    socket,
                    uses: attempt.uses + 1,
                    since: now,
                });
            }
            link => close(&self.registry, link),
        }
    }

    /// Ends question `slot`: closes its sockets and queues its clients' answers.
    fn complete(&mut self, slot: usize, result: Result<Entry, Failure>) {
        let Some(mut flight) = self.flights.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.free.push(slot);
        self.active -= 1;
        for attempt in flight.attempts.iter_mut().filter_map(Option::take) {
            close(&self.registry, attempt.link);
        }
        match flight.kind {
            Kind::Probe(upstream) => self.groups[flight.route].upstreams[upstream].probing = false,
            Kind::Clients { .. } | Kind::Refresh => {
                self.by_key.remove(flight.key.bytes());
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

    /// Sends a `. NS` probe to every down upstream whose probe is due.
    fn probe(&mut self, now: Instant) {
        for route in 0..self.groups.len() {
            for upstream in 0..self.groups[route].upstreams.len() {
                if !self.groups[route].upstreams[upstream].claim_probe(now) {
                    continue;
                }
                self.stats.upstream_probes.incr();
                let root = Key::new(&LowerName::default(), rtype::NS, class::IN, false, false);
                if self.submit_to(root, route, None, Kind::Probe(upstream), now).is_err() {
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

fn close(registry: &Registry, link: Link) {
    let _ = match link {
        Link::Udp(mut socket) => registry.deregister(&mut socket),
        Link::Tcp(mut link) => registry.deregister(&mut link.stream),
    };
}

/// The most recently kept socket to `upstream`, closing on the way those idle too long.
fn take_spare(spare: &mut Vec<Spare>, registry: &Registry, upstream: SocketAddr, now: Instant) -> Option<Spare> {
    let mut i = 0;
    while i < spare.len() {
        if now.saturating_duration_since(spare[i].since) > SPARE_IDLE {
            close(registry, Link::Udp(spare.swap_remove(i).socket));
        } else {
            i += 1;
        }
    }
    let at = spare.iter().rposition(|s| s.upstream == upstream)?;
    Some(spare.remove(at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CacheConfig;
    use crate::forward::upstream::MAX_FAILS;
    use crate::forward::Route;
    use crate::wire::Name;

    /// A forwarder to one upstream on 127.0.0.1 that holds its port and never answers, with a
    /// forwarding timeout of `timeout`.
    fn forwarder_to_silent(timeout: Duration, now: Instant) -> (Forwarder, std::net::UdpSocket, mio::Poll) {
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let upstream = silent.local_addr().unwrap();
        let poll = mio::Poll::new().unwrap();
        let config = ForwardConfig {
            upstreams: vec![upstream],
            timeout,
            ..ForwardConfig::default()
        };
        let forwarder = Forwarder::new(
            poll.registry().try_clone().unwrap(),
            &[&[upstream]],
            &config,
            &config.health(now),
            Arc::new(WorkerStats::default()),
        );
        (forwarder, silent, poll)
    }

    fn question(i: u32) -> Key {
        let name = Name::from_dotted(&format!("q{i}.example.org.")).unwrap();
        Key::new(
            &LowerName::from_wire(name.wire()).unwrap(),
            rtype::A,
            class::IN,
            false,
            false,
        )
    }

    /// Answers the query `upstream` receives next with one A record; returns the port it came
    /// from.
    fn answer_next(upstream: &std::net::UdpSocket) -> u16 {
        let mut buf = [0u8; 512];
        let (len, from) = upstream.recv_from(&mut buf).unwrap();
        let mut reply = buf[..len].to_vec();
        reply[2] |= 0x80;
        reply[3] = 0x80;
        reply[6..8].copy_from_slice(&1u16.to_be_bytes());
        reply[10..12].copy_from_slice(&0u16.to_be_bytes());
        let question_end = 12 + crate::wire::name::skip_name(&reply, 12).unwrap() - 12 + 4;
        reply.truncate(question_end);
        reply.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        upstream.send_to(&reply, from).unwrap();
        from.port()
    }

    /// Waits for the forwarder's sockets to become readable and lets it read them.
    fn receive(forwarder: &mut Forwarder, poll: &mut mio::Poll, cache: &Cache, now: Instant, done: &mut Vec<Done>) {
        let mut events = mio::Events::with_capacity(8);
        poll.poll(&mut events, Some(Duration::from_secs(2))).unwrap();
        for event in &events {
            forwarder.on_event(event.token());
        }
        forwarder.turn(cache, now, done);
    }

    #[test]
    fn the_socket_of_an_answered_try_serves_the_next_one_and_a_silent_try_hands_none_on() {
        let start = Instant::now();
        let timeout = Duration::from_millis(300);
        let (mut forwarder, upstream, mut poll) = forwarder_to_silent(timeout, start);
        upstream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let cache = Cache::new(CacheConfig::default());
        let mut done = Vec::new();
        let clients = Kind::Clients { stale: false };

        forwarder
            .submit(question(1), Route::DEFAULT, None, clients, start)
            .unwrap();
        let first = answer_next(&upstream);
        receive(&mut forwarder, &mut poll, &cache, start, &mut done);
        assert!(matches!(done.as_slice(), [Done { result: Ok(_), .. }]));
        assert_eq!(forwarder.spare.len(), 1, "the answered try's socket is kept");

        forwarder
            .submit(question(2), Route::DEFAULT, None, clients, start)
            .unwrap();
        assert!(forwarder.spare.is_empty(), "the second question takes the kept socket");
        let second = answer_next(&upstream);
        assert_eq!(second, first, "the second question leaves from the first one's port");
        done.clear();
        receive(&mut forwarder, &mut poll, &cache, start, &mut done);
        assert!(matches!(done.as_slice(), [Done { result: Ok(_), .. }]));

        forwarder
            .submit(question(3), Route::DEFAULT, None, clients, start)
            .unwrap();
        let mut buf = [0u8; 512];
        upstream.recv_from(&mut buf).unwrap();
        done.clear();
        forwarder.turn(&cache, start + timeout, &mut done);
        assert_eq!(forwarder.active, 0, "the unanswered question ended with its budget");
        assert!(
            forwarder.spare.is_empty(),
            "a try that got no answer hands its socket on to none"
        );
    }

    #[test]
    fn kept_sockets_go_to_their_own_upstream_and_close_when_idle_too_long() {
        let poll = mio::Poll::new().unwrap();
        let start = Instant::now();
        let (a, b): (SocketAddr, SocketAddr) = ("127.0.0.1:53".parse().unwrap(), "127.0.0.2:53".parse().unwrap());
        let spare_to = |upstream: SocketAddr, since: Instant| Spare {
            upstream,
            socket: UdpSocket::from_std(sys::upstream_udp(upstream).unwrap()),
            uses: 1,
            since,
        };
        let mut spare = vec![spare_to(a, start), spare_to(b, start), spare_to(a, start + SPARE_IDLE)];
        let taken = take_spare(&mut spare, poll.registry(), a, start + SPARE_IDLE).unwrap();
        assert_eq!(
            (taken.upstream, taken.since),
            (a, start + SPARE_IDLE),
            "the most recent first"
        );
        assert_eq!(spare.len(), 2);
        let later = start + SPARE_IDLE + Duration::from_millis(1);
        assert!(take_spare(&mut spare, poll.registry(), a, later).is_none());
        assert!(spare.is_empty(), "sockets idle longer than {SPARE_IDLE:?} are closed");
    }

    /// The bug: with a forwarding timeout below the first retry timeout (500 ms before the
    /// round-trip time is known), every try's timer was cut to the question's budget, the
    /// budget's timer fired first and ended the question, and the try's timeout was never
    /// counted: a dead upstream stayed up, and every client waited the whole timeout for it.
    #[test]
    fn an_upstream_silent_for_whole_budgets_shorter_than_its_retry_timeout_goes_down() {
        let start = Instant::now();
        let timeout = Duration::from_millis(300);
        let (mut forwarder, _silent, _poll) = forwarder_to_silent(timeout, start);
        let cache = Cache::new(CacheConfig::default());
        let mut done = Vec::new();
        let mut now = start;
        for i in 0..MAX_FAILS {
            assert!(!forwarder.down()[0], "down after {i} questions");
            forwarder
                .submit(question(i), Route::DEFAULT, None, Kind::Clients { stale: false }, now)
                .unwrap();
            now += timeout;
            forwarder.turn(&cache, now, &mut done);
        }
        assert!(
            forwarder.down()[0],
            "{MAX_FAILS} questions unanswered within their budget"
        );
        assert_eq!(
            forwarder.submit(question(99), Route::DEFAULT, None, Kind::Clients { stale: false }, now),
            Err(Failure::Unreachable),
            "the next client fails fast"
        );
    }

    /// Two questions whose first tries timed out at 500 ms are on their retries (1 s timeout)
    /// when a third question's try fails 600 ms into the run of failures: the upstream is down,
    /// and the two end then, not at 1.5 s.
    #[test]
    fn questions_waiting_on_an_upstream_end_when_it_goes_down() {
        let start = Instant::now();
        let (mut forwarder, _silent, _poll) = forwarder_to_silent(Duration::from_secs(5), start);
        let cache = Cache::new(CacheConfig::default());
        let mut done = Vec::new();
        let clients = Kind::Clients { stale: false };
        for i in 0..2 {
            forwarder
                .submit(question(i), Route::DEFAULT, None, clients, start)
                .unwrap();
        }
        forwarder.turn(&cache, start + Duration::from_millis(500), &mut done);
        assert_eq!(forwarder.active, 2, "both retried");
        let third = start + Duration::from_millis(600);
        forwarder
            .submit(question(2), Route::DEFAULT, None, clients, third)
            .unwrap();
        forwarder.turn(&cache, third + Duration::from_millis(500), &mut done);
        assert!(forwarder.down()[0], "three failures over 600 ms");
        let waiting = forwarder.flights.iter().flatten().filter(|f| f.kind == clients).count();
        assert_eq!(waiting, 0, "no question waits on a down upstream");
    }

    /// Health is shared: once one worker has found the upstream dead, another worker's clients
    /// waiting on a retry are answered at its next turn, not at that retry's timeout.
    #[test]
    fn questions_of_another_worker_end_when_one_finds_the_upstream_dead() {
        let start = Instant::now();
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let upstream = silent.local_addr().unwrap();
        let poll = mio::Poll::new().unwrap();
        let config = ForwardConfig {
            upstreams: vec![upstream],
            timeout: Duration::from_secs(5),
            ..ForwardConfig::default()
        };
        let health = config.health(start);
        let worker = || {
            Forwarder::new(
                poll.registry().try_clone().unwrap(),
                &[&[upstream]],
                &config,
                &health,
                Arc::new(WorkerStats::default()),
            )
        };
        let (mut one, mut two) = (worker(), worker());
        let cache = Cache::new(CacheConfig::default());
        let mut done = Vec::new();
        let clients = Kind::Clients { stale: false };
        for i in 0..2 {
            one.submit(question(i), Route::DEFAULT, None, clients, start).unwrap();
        }
        two.submit(question(2), Route::DEFAULT, None, clients, start).unwrap();
        let first_timeouts = start + Duration::from_millis(500);
        one.turn(&cache, first_timeouts, &mut done);
        two.turn(&cache, first_timeouts, &mut done);
        let later = start + Duration::from_millis(600);
        one.submit(question(3), Route::DEFAULT, None, clients, later).unwrap();
        let dead = later + Duration::from_millis(500);
        one.turn(&cache, dead, &mut done);
        assert!(one.down()[0], "found dead by the first worker");
        two.turn(&cache, dead, &mut done);
        let waiting = two.flights.iter().flatten().filter(|f| f.kind == clients).count();
        assert_eq!(waiting, 0, "the second worker's retry, due at 1.5 s, is not waited for");
    }

    /// With a 600 ms budget the first try times out on its own at 500 ms and the retry has 100
    /// ms left: too little for a busy upstream, so only the first counts.
    #[test]
    fn a_retry_cut_short_by_the_budget_is_not_held_against_its_upstream() {
        let start = Instant::now();
        let timeout = Duration::from_millis(600);
        let (mut forwarder, _silent, _poll) = forwarder_to_silent(timeout, start);
        let cache = Cache::new(CacheConfig::default());
        let mut done = Vec::new();
        for i in 0..MAX_FAILS - 1 {
            let asked = start + timeout * i;
            forwarder
                .submit(question(i), Route::DEFAULT, None, Kind::Clients { stale: false }, asked)
                .unwrap();
            forwarder.turn(&cache, asked + Duration::from_millis(500), &mut done);
            forwarder.turn(&cache, asked + timeout, &mut done);
        }
        assert!(!forwarder.down()[0], "one failure per question, not two");
    }
}
