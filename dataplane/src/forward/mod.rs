//! Forwarding of names outside the zones, from each worker over its own non-blocking sockets,
//! with the worker's response cache in front (docs/robustness.md, "Forwarding under failure").
//!
//! A [`Resolver`] belongs to one worker. A query for a name outside the zones goes through
//! [`answer_recursive`]: a cache hit is answered at once; a miss becomes an
//! upstream question, merged with any identical one in flight (single-flight), sent with a
//! random ID from a socket of its own, connected to the upstream, with a random source port
//! (every try has a fresh port, given up when the try ends), retried on timeout on the next
//! upstream, over TCP when the answer was truncated. The decisions are made by a sans-I/O
//! state machine ([`machine`]) under a thin socket layer. When it resolves, every client that asked
//! is answered by running its query through the answer path again, now with the result in
//! hand, and the answer is cached. All upstreams failing gives the clients a stale answer if there is
//! one (RFC 8767), else SERVFAIL with an Extended DNS Error (RFC 8914), within a bounded time.

mod acl;
mod entropy;
mod flight;
mod message;
mod options;
mod plan;
mod recursive;
mod replay;
pub mod resolv_conf;
mod route;
mod transport;
mod upstream;

use crate::rewrite::Plugins;
use acl::Admission;
pub use acl::{Acl, Prefix, PrefixError};
pub use flight::machine;
pub use message::{read_reply, Mismatch, Verdict};
pub use options::{ForwardOptions, HealthCheck, Policy, UnknownPolicy};
pub use plan::Forwarding;
pub use recursive::{answer_recursive, ClientQuery, Forward, Recursion, Refresh, Resolution, Resolved};
use recursive::{plugged, resolve};
pub use route::{Failure, Route, Routes};
pub use transport::{Tls, TlsError, Transport, TLS_PORT};
pub use upstream::{SharedHealth, UpstreamSet, MAX_FAILS, PROBE_INTERVAL};

use crate::answer::{Context, Outcome, Transport as AnswerTransport};
use crate::cache::{Cache, CacheConfig};
use crate::io::Peer;
use crate::observe::Tap;
use crate::snapshot::Snapshot;
use crate::stats::{AddressFamily, WorkerStats};
use crate::wire::types::MAX_MESSAGE_LEN;
use crate::wire::{LowerName, Name};
use flight::{Done, Forwarder, Kind, Waiter, Waiting};
use mio::{Registry, Token};
use std::borrow::Borrow;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A zone whose names go to given servers instead of the default resolvers (SkyDNS stub
/// zones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubZone {
    /// The zone apex.
    pub zone: Name,
    /// Its servers.
    pub servers: Vec<SocketAddr>,
    /// How they are used.
    pub options: ForwardOptions,
    /// How they are asked.
    pub transport: Transport,
}

impl StubZone {
    /// A zone forwarded to `servers` over UDP with the default options.
    pub fn new(zone: Name, servers: Vec<SocketAddr>) -> StubZone {
        StubZone {
            zone,
            servers,
            options: ForwardOptions::default(),
            transport: Transport::PreferUdp,
        }
    }
}

/// How names outside the zones are resolved.
///
/// | setting | default | why |
/// |---|---|---|
/// | `timeout` | 1.5 s | below the 2 s a stub resolver typically waits before its own retry |
/// | `max_in_flight` | 512 per worker | one socket each; bounded so that a flood cannot take every file descriptor |
/// | `max_in_flight_per_client` | 128 per worker | a quarter of the default `max_in_flight`: one client's flood of names to resolve leaves the rest to the others |
/// | `acl` | loopback, link-local, private | a node-local cache must not be an open resolver |
/// | `ndots` | 2 | SkyDNS |
/// | `rotate` | on | SkyDNS `ns_rotate` |
/// | `loop_detect` | off | CoreDNS `loop` is a plugin of its own, configured apart |
/// | `transport` | UDP, TCP after truncation | CoreDNS `prefer_udp`: the cheapest for an upstream near by |
/// | `expire` | 10 s | CoreDNS `expire`: an idle connection to an upstream is closed after it |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardConfig {
    /// Default resolvers.
    pub upstreams: Vec<SocketAddr>,
    /// How the default resolvers are used (stub zones have their own).
    pub options: ForwardOptions,
    /// Send every upstream a probe for a random name of its own once, and stop forwarding to
    /// an upstream that hands it back to this server (CoreDNS `loop`, without the exit).
    pub loop_detect: bool,
    /// How the default resolvers are asked.
    pub transport: Transport,
    /// Stub zones with their own servers.
    pub stub_zones: Vec<StubZone>,
    /// Start successive questions at successive upstreams.
    pub rotate: bool,
    /// Labels a name needs before it goes to the default resolvers.
    pub ndots: u32,
    /// How long a question may take, all tries together, before its clients get a stale
    /// answer or SERVFAIL.
    pub timeout: Duration,
    /// Upstream questions in flight per worker; more get SERVFAIL at once.
    pub max_in_flight: usize,
    /// Questions one client address may have waiting on upstreams per worker (0: no limit
    /// but `max_in_flight`); more get SERVFAIL at once.
    pub max_in_flight_per_client: usize,
    /// Who may use forwarding.
    pub acl: Acl,
    /// How long a persistent connection to an upstream stays open without a query in flight.
    pub expire: Duration,
    /// The response cache, for the whole server: each worker gets an equal share of its
    /// memory bound.
    pub cache: CacheConfig,
}

impl Default for ForwardConfig {
    fn default() -> ForwardConfig {
        ForwardConfig {
            upstreams: Vec::new(),
            options: ForwardOptions::default(),
            loop_detect: false,
            transport: Transport::PreferUdp,
            stub_zones: Vec::new(),
            rotate: true,
            ndots: 2,
            timeout: Duration::from_millis(1500),
            max_in_flight: 512,
            max_in_flight_per_client: 128,
            acl: Acl::default(),
            expire: Duration::from_secs(10),
            cache: CacheConfig::default(),
        }
    }
}

impl ForwardConfig {
    /// Whether there is anywhere to forward to.
    pub fn is_enabled(&self) -> bool {
        !self.upstreams.is_empty() || self.stub_zones.iter().any(|s| !s.servers.is_empty())
    }

    /// How the upstreams of `route` are asked: route 0 is the default resolvers, `i + 1` the
    /// `i`-th configured stub zone; stub zones learnt from records (after the configured ones)
    /// are asked over UDP.
    pub fn transport_of(&self, route: usize) -> &Transport {
        const UDP: &Transport = &Transport::PreferUdp;
        match route.checked_sub(1) {
            None => &self.transport,
            Some(i) => self.stub_zones.get(i).map_or(UDP, |z| &z.transport),
        }
    }

    /// Fresh health state for these upstreams, to be shared by every worker's resolver.
    pub fn health(&self, now: Instant) -> SharedHealth {
        let token = self.loop_detect.then(upstream::loop_token);
        SharedHealth::with_options(self.sets(&self.stub_zones), None, token.as_ref(), now)
    }

    /// Every set of upstreams: the default resolvers, then `zones`' servers.
    pub(crate) fn sets<'a>(&'a self, zones: &'a [StubZone]) -> impl Iterator<Item = UpstreamSet<'a>> {
        std::iter::once(UpstreamSet {
            zone: None,
            servers: &self.upstreams,
            options: &self.options,
        })
        .chain(zones.iter().map(|z| UpstreamSet {
            zone: Some(&z.zone),
            servers: &z.servers,
            options: &z.options,
        }))
    }
}

/// A client query counted against its route's `max_concurrent` until it is answered: the
/// count goes down when the waiter holding it is dropped, however its question ended.
#[derive(Debug)]
pub(crate) struct Held(Arc<AtomicUsize>);

impl Held {
    /// One more query on `count`, unless it holds `limit` already.
    fn take(count: &Arc<AtomicUsize>, limit: usize) -> Option<Held> {
        count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < limit).then_some(n + 1))
            .ok()
            .map(|_| Held(Arc::clone(count)))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One worker's share of the cache: the memory bound is the whole server's.
fn worker_share(cache: &CacheConfig, workers: usize) -> CacheConfig {
    CacheConfig {
        max_bytes: cache.max_bytes / workers.max(1),
        ..cache.clone()
    }
}

/// Who asked, so that a late answer finds its way back. A query being answered names its UDP
/// peer by reference (`Client<&Peer>`), in the receive batch where it arrived: only a query
/// that waits for an upstream takes a copy ([`Client::owned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client<P = Peer> {
    /// Over UDP, on the worker's listening socket `socket`, from `peer`.
    Udp { socket: usize, peer: P },
    /// Over TCP, on connection slot `conn` while it holds connection number `serial`.
    Tcp { conn: usize, serial: u64, peer: IpAddr },
}

impl<P: Borrow<Peer>> Client<P> {
    fn ip(&self) -> IpAddr {
        match self {
            Client::Udp { peer, .. } => peer.borrow().ip(),
            Client::Tcp { peer, .. } => *peer,
        }
    }

    /// Whether the client passes the recursion access list `acl`.
    #[inline(always)]
    fn allowed_by(&self, acl: &mut Admission) -> bool {
        match self {
            Client::Udp { peer, .. } => acl.allows_peer(peer.borrow()),
            Client::Tcp { peer, .. } => acl.allows(*peer),
        }
    }

    /// The transport the query came on.
    #[inline(always)]
    pub(crate) fn transport(&self) -> AnswerTransport {
        match self {
            Client::Udp { .. } => AnswerTransport::Udp,
            Client::Tcp { .. } => AnswerTransport::Tcp,
        }
    }

    /// The client's address family, for the request counters.
    pub(crate) fn family(&self) -> AddressFamily {
        match self {
            Client::Udp { peer, .. } => AddressFamily::of_peer(peer.borrow()),
            Client::Tcp { peer, .. } => AddressFamily::of(*peer),
        }
    }

    /// The client with its own copy of the peer, to wait for an upstream's answer.
    fn owned(&self) -> Client {
        match *self {
            Client::Udp { socket, ref peer } => Client::Udp {
                socket,
                peer: *peer.borrow(),
            },
            Client::Tcp { conn, serial, peer } => Client::Tcp { conn, serial, peer },
        }
    }
}

/// A query that waited for an upstream, answered now that its question has ended: what
/// [`Resolver::turn`] hands the worker, whose pipeline counts it, rate-limits it and sends it.
#[derive(Debug)]
pub(crate) struct Late<'a> {
    /// Where the reply goes.
    pub(crate) client: Client,
    /// The client's query, reduced (its question, for the counters).
    pub(crate) query: &'a [u8],
    /// What answering it produced, written into `out`; `None` when it is left unanswered (the
    /// answer would need another upstream question, or its name loops).
    pub(crate) outcome: Option<Outcome>,
    /// The reply's bytes, when there is one; rate limiting may slip it in place.
    pub(crate) out: &'a mut [u8],
    /// When the query arrived: its reply's duration counts from here.
    pub(crate) since: Instant,
}

/// What became of a query handed to [`Resolver::answer`]. A tag byte of its own, as
/// [`recursive::Flow`] has.
#[derive(Debug)]
#[repr(u8)]
pub(crate) enum Answered {
    /// Answered (or dropped) now, as [`crate::answer::answer`] would report it.
    Now(Outcome),
    /// The client will be answered when its question resolves.
    Later,
    /// Dropped on purpose (stub loop guard); nothing will be sent.
    Dropped,
}

/// One worker's forwarding side: cache, upstream sockets, questions in flight.
pub(crate) struct Resolver {
    acl: Admission,
    routes: Routes,
    /// The forwarding plan in force, and where newer ones appear.
    plan: Arc<plan::Plan>,
    plan_updates: arc_swap::Cache<Arc<arc_swap::ArcSwap<plan::Plan>>, Arc<plan::Plan>>,
    /// Workers sharing the cache's memory bound.
    workers: usize,
    cache: Cache,
    forwarder: Forwarder,
    stats: Arc<WorkerStats>,
    scratch: Box<[u8]>,
    /// The query name of the query being answered, kept from query to query so that none pays
    /// for clearing it.
    qname: LowerName,
    /// The questions that ended in the last turn. The last one's answer is stored in the cache
    /// by [`Resolver::tidy`], once the turn's replies are sent: a client waiting for a miss is
    /// not kept waiting for the store.
    done: Vec<Done>,
    /// Clients by address with how many of their questions wait on upstreams, for
    /// `max_in_flight_per_client`.
    waiting: HashMap<IpAddr, usize, foldhash::fast::RandomState>,
    /// What the cache's memos are made and replayed under (`replay.rs`): a new value with every
    /// snapshot and every forwarding plan, so that none outlives what its reply depended on.
    stamp: u64,
    /// The worker's count of the snapshots it loaded, as of its last turn (see
    /// [`Resolver::follow_snapshot`]).
    snapshot_epoch: u64,
}

impl Resolver {
    /// A resolver for one of `workers` workers, registering its sockets with `registry`;
    /// `forwarding` is shared by all of them and carries the upstreams' shared health.
    pub(crate) fn new(
        workers: usize,
        forwarding: &Forwarding,
        registry: &Registry,
        stats: Arc<WorkerStats>,
        tap: Option<Tap>,
    ) -> io::Result<Resolver> {
        let plan = forwarding.current();
        let config = &plan.config;
        let forwarder = Forwarder::new(
            registry.try_clone()?,
            &plan.groups(),
            config,
            &plan.health,
            Arc::clone(&stats),
            tap,
        );
        Ok(Resolver {
            acl: Admission::new(config.acl.clone()),
            routes: plan.routes(),
            cache: Cache::new(worker_share(&config.cache, workers)),
            plan_updates: arc_swap::Cache::new(forwarding.cell()),
            plan,
            workers,
            forwarder,
            stats,
            scratch: vec![0; MAX_MESSAGE_LEN].into_boxed_slice(),
            qname: LowerName::default(),
            done: Vec::new(),
            waiting: HashMap::default(),
            stamp: 0,
            snapshot_epoch: 0,
        })
    }

    /// Voids the cache's memos, whose replies a snapshot may change, when the worker has loaded
    /// another one: `epoch` is its count of the snapshots it has loaded. Called once a turn.
    #[inline(always)]
    pub(crate) fn follow_snapshot(&mut self, epoch: u64) {
        if epoch != self.snapshot_epoch {
            self.snapshot_epoch = epoch;
            self.stamp += 1;
        }
    }

    /// Answers `query` from `client`: authoritative names and cache hits now, misses later.
    #[inline(always)]
    pub(crate) fn answer(
        &mut self,
        query: &[u8],
        snapshot: &Snapshot,
        ctx: &Context,
        client: Client<&Peer>,
        now: Instant,
        out: &mut [u8],
    ) -> Answered {
        if let Some(plugins) = ctx.plugins {
            return self.answer_plugged(plugins, query, snapshot, ctx, client, now, out);
        }
        let allowed = client.allowed_by(&mut self.acl);
        let mut rec = Recursion {
            cache: &mut self.cache,
            routes: &self.routes,
            down: self.forwarder.down(),
            allowed,
            prohibited: false,
            now,
            resolved: None,
        };
        // Two copies of the answer path: the one without memos has none of the replay's code, so
        // that a server with nothing to replay (or one answering only from its zones) answers as
        // it did before replays existed.
        let stamp = Some(self.stamp);
        let resolution = if rec.cache.has_memos() {
            resolve(query, snapshot, ctx, &mut rec, &mut self.qname, stamp, true, out)
        } else {
            resolve(query, snapshot, ctx, &mut rec, &mut self.qname, stamp, false, out)
        };
        let prohibited = rec.prohibited;
        self.answered(resolution, prohibited, query, snapshot, ctx, client, now, out)
    }

    /// [`Resolver::answer`] with the plugins run ahead (docs/rewrite.md): a path of its own, so
    /// that the common one builds its resolution where it is used instead of moving it.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn answer_plugged(
        &mut self,
        plugins: &Plugins,
        query: &[u8],
        snapshot: &Snapshot,
        ctx: &Context,
        client: Client<&Peer>,
        now: Instant,
        out: &mut [u8],
    ) -> Answered {
        let allowed = client.allowed_by(&mut self.acl);
        let mut rec = Recursion {
            cache: &mut self.cache,
            routes: &self.routes,
            down: self.forwarder.down(),
            allowed,
            prohibited: false,
            now,
            resolved: None,
        };
        let resolution = plugged(plugins, query, snapshot, ctx, &mut rec, &mut self.qname, out);
        let prohibited = rec.prohibited;
        self.answered(resolution, prohibited, query, snapshot, ctx, client, now, out)
    }

    /// What becomes of a query's `resolution`: the reply now, or the question sent upstream.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn answered(
        &mut self,
        resolution: Resolution,
        prohibited: bool,
        query: &[u8],
        snapshot: &Snapshot,
        ctx: &Context,
        client: Client<&Peer>,
        now: Instant,
        out: &mut [u8],
    ) -> Answered {
        if prohibited {
            self.stats.recursion_refused.incr();
        }
        match resolution {
            Resolution::Done(outcome) => Answered::Now(outcome),
            Resolution::Cached {
                outcome,
                stale,
                refresh,
            } => {
                self.stats.cache_hit(&outcome, out);
                if stale {
                    self.stats.cache_stale_answers.incr();
                }
                if let Some(refresh) = refresh {
                    self.stats.cache_refreshes.incr();
                    if !stale {
                        self.stats.cache_prefetches.incr();
                    }
                    let _ = self
                        .forwarder
                        .submit(&refresh.key, refresh.route, None, Kind::Refresh, now);
                }
                Answered::Now(outcome)
            }
            Resolution::Forward(forward) => {
                self.stats.cache_misses.incr();
                let ip = client.ip();
                let held = self.waiting.get(&ip).copied().unwrap_or(0);
                let limit = self.plan.config.max_in_flight_per_client;
                let concurrent = match self.plan.concurrency.get(forward.route.index()) {
                    Some(Some((count, limit))) => Some(Held::take(count, *limit)),
                    _ => None,
                };
                let submitted = if self.plan.health.detects_loops() && self.came_back(forward.key.name_wire()) {
                    Err(Failure::Unreachable)
                } else if limit != 0 && held >= limit {
                    self.stats.forward_client_limited.incr();
                    Err(Failure::Busy)
                } else if let Some(None) = concurrent {
                    self.stats.forward_busy.incr();
                    Err(Failure::OverConcurrent)
                } else {
                    let waiter = Waiter {
                        client: client.owned(),
                        ctx: Waiting::of(ctx),
                        query: forward.query,
                        since: now,
                        _held: concurrent.flatten(),
                    };
                    self.forwarder.submit(
                        &forward.key,
                        forward.route,
                        Some(waiter),
                        Kind::Clients { stale: forward.stale },
                        now,
                    )
                };
                match submitted {
                    Ok(()) => {
                        *self.waiting.entry(ip).or_default() += 1;
                        Answered::Later
                    }
                    Err(failure) => {
                        let mut rec = Recursion {
                            cache: &mut self.cache,
                            routes: &self.routes,
                            down: self.forwarder.down(),
                            allowed: true,
                            prohibited: false,
                            now,
                            resolved: Some(Resolved::Failed(forward.key.key_ref(), failure)),
                        };
                        match answer_recursive(query, snapshot, ctx, &mut rec, &mut self.qname, out) {
                            Resolution::Done(outcome)
                            | Resolution::Cached { outcome, .. }
                            | Resolution::Fetch { outcome, .. } => Answered::Now(outcome),
                            Resolution::Forward(_) | Resolution::Looped => Answered::Dropped,
                        }
                    }
                }
            }
            Resolution::Looped => {
                if self.plan.health.detects_loops() {
                    self.came_back(self.qname.wire());
                }
                self.stats.stub_loops_dropped.incr();
                Answered::Dropped
            }
            Resolution::Fetch { outcome, fetch } => {
                for refresh in fetch {
                    self.stats.cache_refreshes.incr();
                    let _ = self
                        .forwarder
                        .submit(&refresh.key, refresh.route, None, Kind::Refresh, now);
                }
                Answered::Now(outcome)
            }
        }
    }

    /// Whether `qname` (wire form) is the loop probe of one of the upstreams: this server
    /// sent it to that upstream only, so receiving it means forwarding there comes back here.
    /// The upstream is cut for good (until its set's servers change), and the probe is answered
    /// SERVFAIL, never forwarded again, which breaks the loop.
    #[cold]
    fn came_back(&self, qname: &[u8]) -> bool {
        let Some((route, upstream, health)) = self.plan.health.loop_probe_of(qname) else {
            return false;
        };
        if upstream::mark_looping(&health) {
            let addr = self.plan.health.addr(route, upstream);
            if let Some(addr) = addr {
                self.stats.upstreams.get(addr).looped();
            }
            tracing::error!(
                upstream = ?addr,
                "forwarding loop: queries sent to this upstream come back to this server; no longer forwarding to it"
            );
        }
        true
    }

    /// Whether `token` belongs to one of the resolver's upstream sockets.
    pub(crate) fn owns(token: Token) -> bool {
        Forwarder::owns(token)
    }

    /// Notes a readiness event of an upstream socket.
    pub(crate) fn on_event(&mut self, token: Token) {
        self.forwarder.on_event(token);
    }

    /// Questions sent upstream and not finished yet (answered, failed or timed out), refreshes
    /// included: a draining worker waits for them.
    pub(crate) fn in_flight(&self) -> usize {
        self.forwarder.in_flight()
    }

    /// Stores the turn's last answer, closes what ended and opens spare sockets: called once
    /// the replies a turn produced are sent, so that none of it stands between a client and
    /// its answer.
    pub(crate) fn tidy(&mut self, now: Instant) {
        settle(&mut self.cache, &self.stats, &mut self.done);
        self.stats.cache_evictions.add(self.cache.take_memo_evictions());
        self.stats.cache_entries.set(self.cache.len() as u64);
        self.stats.cache_denials.set(self.cache.denials() as u64);
        self.stats.cache_bytes.set(self.cache.bytes() as u64);
        self.forwarder.tidy(now);
    }

    /// Whether upstream sockets have readiness to be handled without waiting.
    pub(crate) fn has_work(&self) -> bool {
        self.forwarder.has_work()
    }

    /// When the worker must wake up next for a timeout or a health probe.
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        self.forwarder.next_deadline()
    }

    /// Switches to the forwarding plan a reload or a data source handed in since the last call,
    /// if any. The worker calls it once per turn, before answering.
    pub(crate) fn follow_plan(&mut self) {
        let latest = self.plan_updates.load();
        if Arc::ptr_eq(latest, &self.plan) {
            return;
        }
        let latest = Arc::clone(latest);
        if !Arc::ptr_eq(&latest.config, &self.plan.config) {
            self.acl = Admission::new(latest.config.acl.clone());
            let evicted = self.cache.reconfigure(worker_share(&latest.config.cache, self.workers));
            self.stats.cache_evictions.add(evicted);
        }
        self.routes = latest.routes();
        self.stamp += 1;
        self.forwarder
            .replace(&latest.groups(), &latest.config, &latest.health, Instant::now());
        self.plan = latest;
    }

    /// Reads upstream replies, handles timeouts and probes, and hands every waiting client whose
    /// question ended to `send`, answered (or left unanswered) as a [`Late`]. Each reply is
    /// made in the client's own context with what the worker `lent` now (its cookie secrets,
    /// wall clock and signing state). `send` counts the request and its outcome, as for a query
    /// answered at once (response rate limiting may drop the reply or send it truncated, which
    /// only the sender knows). Once those replies are sent, [`Resolver::tidy`] must follow: it
    /// stores the last answer.
    pub(crate) fn turn(
        &mut self,
        snapshot: &Snapshot,
        lent: Context<'_>,
        now: Instant,
        mut send: impl FnMut(Late<'_>),
    ) {
        let Resolver {
            routes,
            cache,
            forwarder,
            stats,
            scratch,
            qname,
            done,
            waiting,
            ..
        } = self;
        forwarder.turn(cache, now, done);
        for i in 0..done.len() {
            // The clients of this question may be answered from an earlier one's answer (the
            // target of a CNAME): that one is stored first.
            if let Some(earlier) = i.checked_sub(1) {
                store(cache, stats, &mut done[earlier]);
            }
            let Done {
                key, waiters, result, ..
            } = &mut done[i];
            let resolved = match &*result {
                Ok(entry) => Resolved::Answer(key.key_ref(), entry),
                Err(failure) => Resolved::Failed(key.key_ref(), *failure),
            };
            for waiter in waiters.iter() {
                release(waiting, waiter.client.ip());
                let mut rec = Recursion {
                    cache,
                    routes,
                    down: forwarder.down(),
                    allowed: true,
                    prohibited: false,
                    now,
                    resolved: Some(resolved),
                };
                let ctx = waiter.ctx.context(lent);
                let query = waiter.query.bytes();
                let outcome = match answer_recursive(query, snapshot, &ctx, &mut rec, qname, scratch) {
                    // A waiter asked an address or an outside name: no glue to fetch.
                    Resolution::Done(outcome) | Resolution::Fetch { outcome, .. } => Some(outcome),
                    Resolution::Cached { outcome, stale, .. } => {
                        if stale {
                            stats.cache_stale_answers.incr();
                        }
                        Some(outcome)
                    }
                    Resolution::Forward(_) | Resolution::Looped => None,
                };
                send(Late {
                    client: waiter.client,
                    query,
                    outcome,
                    out: scratch,
                    since: waiter.since,
                });
            }
            forwarder.recycle(std::mem::take(waiters));
        }
    }
}

/// Stores the answer of the last question in `done` that is still to be stored, and lets go
/// of them all.
fn settle(cache: &mut Cache, stats: &WorkerStats, done: &mut Vec<Done>) {
    if let Some(last) = done.last_mut() {
        store(cache, stats, last);
    }
    done.clear();
}

/// Stores the answer of question `done` in the cache, if it has one to store (once: the entry
/// moves into the cache).
fn store(cache: &mut Cache, stats: &WorkerStats, done: &mut Done) {
    if !std::mem::take(&mut done.store) {
        return;
    }
    if let Ok(entry) = std::mem::replace(&mut done.result, Err(Failure::Unreachable)) {
        let inserted = cache.insert(done.key.bytes(), entry);
        if inserted.stored {
            stats.cache_inserts.incr();
        }
        stats.cache_evictions.add(inserted.evicted);
    }
}

/// One question of the client at `ip` no longer waits on upstreams.
fn release(waiting: &mut HashMap<IpAddr, usize, foldhash::fast::RandomState>, ip: IpAddr) {
    if let Some(held) = waiting.get_mut(&ip) {
        *held -= 1;
        if *held == 0 {
            waiting.remove(&ip);
        }
    }
}
