//! One pipeline per query: the steps around answering, written once for every transport.
//!
//! A query read from UDP (a kernel socket or AF_XDP, `worker.rs`) or TCP (`tcp.rs`), and the
//! reply to a query that waited for an upstream (`Worker::resolver_turn`), go through the same
//! steps: count the request, answer it (cookies are checked and made while answering) or hand
//! it to the forwarder, rate-limit the reply, count what became of it, and tell the observers
//! (dnstap, the query log, the top talkers). The transports keep their own I/O: where a query
//! is read from and its reply written to, when replies leave, and the clock readings that time
//! them. Where transports differ, the difference is a property of the transport stated here
//! once ([`rate_limited`]), not a copy of the steps that leaves one out.
//!
//! This is the answer loop of every UDP batch: everything here is inlined into its caller,
//! generic over nothing that is not known where it is called, and allocates nothing.

use crate::answer::{answer, Context, Outcome, Transport};
use crate::cookie::CookieSecrets;
use crate::dnssec::denial::Signing;
use crate::forward::{Answered, Client, Late, Resolver};
use crate::io::Peer;
use crate::observe::Observer;
use crate::rewrite::Plugins;
use crate::rrl::{self, Action, Limiter};
use crate::snapshot::{Snapshot, SnapshotCell};
use crate::stats::{AddressFamily, Asked, WorkerStats};
use arc_swap::Cache;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// A worker's view of the cookie secrets.
pub(crate) type CookieReader = Cache<Arc<arc_swap::ArcSwap<CookieSecrets>>, Arc<CookieSecrets>>;

/// Whether replies sent on `transport` go through response rate limiting, and so may be
/// dropped or leave slipped (truncated): only a datagram's source address can be forged to
/// reflect replies at a victim; a TCP client has completed a handshake (docs/abuse.md).
#[inline(always)]
pub(crate) const fn rate_limited(transport: Transport) -> bool {
    matches!(transport, Transport::Udp)
}

/// What a worker owns for answering, whatever the transport: where it reads the snapshot and
/// the cookie secrets, its counters, rate limiter, observers and forwarding side, and the
/// state it lends every answer (the rotation, the records signed per query name).
pub(crate) struct Pipeline {
    pub(crate) snapshots: Cache<SnapshotCell, Arc<Snapshot>>,
    pub(crate) cookies: Option<CookieReader>,
    /// Response rate limiting, when on; see [`rate_limited`] for the transports it applies to.
    pub(crate) rrl: Option<Limiter>,
    /// The plugins lent to every answer, when configured.
    pub(crate) plugins: Option<Arc<Plugins>>,
    pub(crate) stats: Arc<WorkerStats>,
    pub(crate) rotation: u32,
    /// The records the worker signed per query name and its budget for signing them, lent to
    /// every answer it gives (UDP, TCP and the replies that waited for an upstream).
    pub(crate) signing: RefCell<Signing>,
    /// dnstap, the query log and the top talkers: `None` unless something is observed.
    pub(crate) observer: Option<Box<Observer>>,
    /// The forwarding side, when the worker forwards.
    pub(crate) resolver: Option<Resolver>,
    /// Where the snapshot of the last turn lives, and how many different ones the worker has
    /// loaded: what the resolver's replayed replies are checked against. The snapshot at that
    /// address is held by `snapshots` until a newer one is loaded, and that one was made while
    /// it lived, so a changed snapshot always shows as a changed address.
    pub(crate) seen: (usize, u64),
}

impl Pipeline {
    /// The pipeline lent for one turn (a UDP batch, a TCP turn, a resolver turn), reading the
    /// snapshot and the cookie secrets once for all of its queries. `now` is the turn's clock
    /// reading, `wall` the wall clock at it.
    #[inline(always)]
    pub(crate) fn turn(&mut self, now: Instant, wall: SystemTime) -> Turn<'_> {
        let Pipeline {
            snapshots,
            cookies,
            rrl,
            plugins,
            stats,
            rotation,
            signing,
            observer,
            resolver,
            seen,
        } = self;
        let signing = &*signing;
        let snapshot = snapshots.load();
        let at = Arc::as_ptr(snapshot) as usize;
        if at != seen.0 {
            *seen = (at, seen.1 + 1);
        }
        if let Some(resolver) = resolver.as_mut() {
            resolver.follow_snapshot(seen.1);
        }
        Turn {
            snapshot,
            lent: Context {
                cookies: cookies.as_mut().map(|c| &**c.load()),
                plugins: plugins.as_deref(),
                ..Context::new(Transport::Udp).at(wall).with_signing(signing)
            },
            now,
            rrl: rrl.as_mut().map(|limiter| RateLimit {
                second: limiter.second(now),
                limiter,
            }),
            stats,
            rotation,
            signing,
            observer: observer.as_deref_mut(),
            resolver: resolver.as_mut(),
        }
    }
}

/// The rate limiter and the second a turn charges its buckets in.
pub(crate) struct RateLimit<'a> {
    limiter: &'a mut Limiter,
    second: u64,
}

/// The pipeline as one turn borrows it: what every query of the turn shares.
pub(crate) struct Turn<'a> {
    /// The snapshot loaded for this turn.
    pub(crate) snapshot: &'a Snapshot,
    /// The worker's counters.
    pub(crate) stats: &'a WorkerStats,
    rotation: &'a mut u32,
    /// The time of this turn, from which the replies of on-time answers are timed.
    pub(crate) now: Instant,
    /// What every answer of the turn is lent: the wall clock at [`Turn::now`] (for cookies and
    /// signatures), the cookie secrets, the plugins and the signing state. Each query sets its
    /// own transport, rotation, keepalive and client on it, so that the shared part is written
    /// once a turn rather than once a query.
    lent: Context<'a>,
    /// The worker's records signed per query name, lent to every answer; the transport
    /// charges the time of the answers that signed.
    pub(crate) signing: &'a RefCell<Signing>,
    /// dnstap, the query log and the top talkers, if anything is observed.
    pub(crate) observer: Option<&'a mut Observer>,
    resolver: Option<&'a mut Resolver>,
    rrl: Option<RateLimit<'a>>,
}

/// What the transport does with a query once the pipeline is through with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Send the reply written into the output buffer, this many bytes of it.
    Reply(usize),
    /// Nothing now: the query went upstream, and its reply comes from
    /// [`Turn::late_replies`].
    Later,
    /// Nothing at all: the query was dropped (malformed, a response, a loop, or its reply
    /// rate-limited away).
    Nothing,
}

/// How a reply fared in the steps after answering.
enum Settled {
    /// It leaves as written, this long.
    Sent(usize),
    /// Response rate limiting truncated it to this length (`rrl::slip`).
    Slipped(usize),
    /// Response rate limiting dropped it.
    Limited,
    /// There was no reply to send (`Outcome::Drop`).
    Dropped,
}

impl Turn<'_> {
    /// Takes a query from its transport to its fate: counts it, answers it into `out` (or hands
    /// it to the forwarder), rate-limits the reply, counts the outcome and tells the observers.
    /// `client` says where a late reply goes (and the transport); `peer` is the client's
    /// address as the transport holds it; `keepalive` the edns-tcp-keepalive to advertise.
    #[inline(always)]
    pub(crate) fn query(
        &mut self,
        client: Client<&Peer>,
        peer: &Peer,
        keepalive: u16,
        query: &[u8],
        out: &mut [u8],
    ) -> Fate {
        let transport = client.transport();
        self.stats.request(transport, query.len());
        let ctx = &mut self.lent;
        ctx.transport = transport;
        ctx.rotation = *self.rotation;
        ctx.keepalive = keepalive;
        ctx.client = *peer;
        let ctx = &*ctx;
        *self.rotation = self.rotation.wrapping_add(1);
        let outcome = match self.resolver.as_deref_mut() {
            Some(resolver) => match resolver.answer(query, self.snapshot, ctx, client, self.now, out) {
                Answered::Now(outcome) => outcome,
                Answered::Later => {
                    if let Some(observer) = self.observer.as_deref_mut() {
                        observer.forwarded(transport, query, peer.addr());
                    }
                    return Fate::Later;
                }
                Answered::Dropped => {
                    self.stats
                        .requested(transport, AddressFamily::of_peer(peer), Asked::Query(query));
                    return Fate::Nothing;
                }
            },
            None => answer(query, self.snapshot, ctx, out),
        };
        // Each arm ends in its fate, so that the caller's match on it folds into this one.
        match self.settle(&client, AddressFamily::of_peer(peer), query, outcome, out) {
            Settled::Sent(len) => {
                if let Some(observer) = self.observer.as_deref_mut() {
                    observer.exchange(transport, query, out.get(..len), peer, self.now);
                }
                Fate::Reply(len)
            }
            Settled::Dropped => {
                if let Some(observer) = self.observer.as_deref_mut() {
                    observer.exchange(transport, query, None, peer, self.now);
                }
                Fate::Nothing
            }
            Settled::Slipped(len) => Fate::Reply(len),
            Settled::Limited => Fate::Nothing,
        }
    }

    /// Lets the resolver read upstream answers and fire its timers, and takes every query whose
    /// answer is now due through the same steps as [`Turn::query`], timed from its arrival:
    /// `deliver` gets each reply that is to leave, with its client, for the transport to send.
    /// The resolver's `tidy` must follow once the transports have sent them.
    pub(crate) fn late_replies(&mut self, mut deliver: impl FnMut(Client, &[u8])) {
        let Some(resolver) = self.resolver.take() else {
            return;
        };
        let lent = Context {
            transport: Transport::Udp,
            ..self.lent
        };
        let (snapshot, now) = (self.snapshot, self.now);
        resolver.turn(snapshot, lent, now, |mut late| {
            if let Some(len) = self.late(&mut late) {
                deliver(late.client, &late.out[..len]);
            }
        });
        self.resolver = Some(resolver);
    }

    /// The steps of [`Turn::query`] after answering, for a query that waited for an upstream:
    /// its request was counted, and the observers told of it, when it went upstream. Returns
    /// the length of the reply to send, if one is.
    fn late(&mut self, late: &mut Late<'_>) -> Option<usize> {
        let transport = late.client.transport();
        let family = late.client.family();
        let Some(outcome) = late.outcome else {
            self.stats.requested(transport, family, Asked::Query(late.query));
            return None;
        };
        let len = match self.settle(&late.client, family, late.query, outcome, late.out) {
            Settled::Sent(len) => {
                if let Some(observer) = self.observer.as_deref_mut() {
                    let addr = match late.client {
                        Client::Udp { peer, .. } => peer.addr(),
                        Client::Tcp { peer, .. } => SocketAddr::new(peer, 0),
                    };
                    observer.late_reply(transport, &late.out[..len], addr, late.since);
                }
                len
            }
            Settled::Slipped(len) => len,
            Settled::Limited | Settled::Dropped => return None,
        };
        self.stats.took(self.now.saturating_duration_since(late.since), 1);
        Some(len)
    }

    /// Counts the request by what answering it produced, rate-limits the reply where the
    /// transport is (unless the query showed a valid server cookie), and counts the outcome.
    #[inline(always)]
    fn settle<P: std::borrow::Borrow<Peer>>(
        &mut self,
        client: &Client<P>,
        family: AddressFamily,
        query: &[u8],
        outcome: Outcome,
        out: &mut [u8],
    ) -> Settled {
        let transport = client.transport();
        self.stats.requested(transport, family, Asked::of(&outcome, query));
        let reply = match outcome {
            Outcome::Reply(reply) => reply,
            Outcome::Drop(_) => {
                self.stats.outcome(transport, &outcome);
                return Settled::Dropped;
            }
        };
        if let (true, Some(rrl), Client::Udp { peer, .. }) = (rate_limited(transport), self.rrl.as_mut(), client) {
            if !reply.valid_cookie() {
                match rrl
                    .limiter
                    .judge(peer.borrow(), &out[..reply.len()], &reply, rrl.second)
                {
                    Action::Send => {}
                    Action::Drop => {
                        self.stats.rrl_dropped.incr();
                        return Settled::Limited;
                    }
                    Action::Slip => {
                        self.stats.rrl_slipped.incr();
                        let len = rrl::slip(out, reply.len());
                        self.stats.slipped(&reply, len);
                        return Settled::Slipped(len);
                    }
                }
            }
        }
        self.stats.outcome(transport, &outcome);
        Settled::Sent(reply.len())
    }
}
