//! One worker's questions in flight to upstreams, in two layers as quinn splits a QUIC
//! connection: [`machine`], the sans-I/O state machine that decides every try, timeout, retry
//! and failover with the time passed in, and `sockets`, the thin layer that carries its tries
//! over real sockets. [`Forwarder`] joins them for the worker's event loop.

pub mod machine;
mod sockets;
mod stream;
mod timers;

pub(crate) use machine::Kind;

use super::{Client, ForwardConfig, Route};
use crate::answer::{Context, Transport};
use crate::cache::{Cache, Key};
use crate::forward::upstream::SharedHealth;
use crate::forward::ClientQuery;
use crate::forward::Failure;
use crate::io::Peer;
use crate::observe::Tap;
use crate::stats::WorkerStats;
use machine::{Entropy, Machine};
use mio::{Registry, Token};
use sockets::Sockets;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// A client waiting for a question.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// Where the answer goes.
    pub(crate) client: Client,
    /// The client's transport and keepalive; the cookie secrets, the time and the signing
    /// state are the worker's when the reply is made (see [`Waiting::context`]).
    pub(crate) ctx: Waiting,
    /// The client's query, reduced.
    pub(crate) query: ClientQuery,
    /// When the query arrived: its reply's duration counts from here.
    pub(crate) since: Instant,
    /// Its place under its route's `max_concurrent`, given back when the waiter is dropped.
    pub(crate) _held: Option<super::Held>,
}

/// What a waiting client's [`Context`] holds of its own; the rest is the worker's when the
/// client is answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waiting {
    /// Transport of the query.
    pub(crate) transport: Transport,
    /// The rotation of round-robin RRsets the query drew.
    pub(crate) rotation: u32,
    /// The edns-tcp-keepalive timeout to advertise.
    pub(crate) keepalive: u16,
    /// The client's address.
    pub(crate) client: Peer,
}

impl Waiting {
    /// What of `ctx` a client keeps while it waits.
    pub(crate) fn of(ctx: &Context) -> Waiting {
        Waiting {
            transport: ctx.transport,
            rotation: ctx.rotation,
            keepalive: ctx.keepalive,
            client: ctx.client,
        }
    }

    /// The context its reply is made in: the client's own facts with the worker's `lent`
    /// (cookie secrets, time, signing state).
    pub(crate) fn context<'k>(&self, lent: Context<'k>) -> Context<'k> {
        Context {
            transport: self.transport,
            rotation: self.rotation,
            keepalive: self.keepalive,
            client: self.client,
            ..lent
        }
    }
}

/// A question that ended, with the clients that waited for it.
pub(crate) type Done = machine::Done<Waiter>;

/// One worker's questions in flight, its view of the upstreams, and its upstream sockets.
pub(crate) struct Forwarder {
    machine: Machine<Waiter>,
    sockets: Sockets,
    /// Sockets with readiness not handled yet.
    ready: Vec<usize>,
}

impl Forwarder {
    /// A forwarder over `groups` of upstreams (route index → servers), registering its sockets
    /// with `registry`; with `tap`, its queries and their replies go to dnstap.
    pub(crate) fn new(
        registry: Registry,
        groups: &[&[SocketAddr]],
        config: &ForwardConfig,
        health: &SharedHealth,
        stats: Arc<WorkerStats>,
        tap: Option<Tap>,
    ) -> Forwarder {
        let mut sockets = Sockets::new(registry, stats.clone(), tap);
        sockets.set_timeouts(config.expire, config.timeout);
        Forwarder {
            machine: Machine::with_stats(groups, config, health, Entropy::default(), stats),
            sockets,
            ready: Vec::new(),
        }
    }

    /// Switches to new `groups` of upstreams under `config` ([`Machine::replace`]).
    pub(crate) fn replace(
        &mut self,
        groups: &[&[SocketAddr]],
        config: &ForwardConfig,
        health: &SharedHealth,
        now: Instant,
    ) {
        self.machine.replace(groups, config, health, now);
        self.sockets.set_timeouts(config.expire, config.timeout);
        self.sockets.flush(&mut self.machine, now);
    }

    /// Per route index: whether every upstream is down.
    pub(crate) fn down(&self) -> &[bool] {
        self.machine.down()
    }

    /// Whether `token` belongs to an upstream socket.
    pub(crate) fn owns(token: Token) -> bool {
        Sockets::owns(token)
    }

    /// Notes a readiness event of an upstream socket, for the next [`Forwarder::turn`].
    pub(crate) fn on_event(&mut self, token: Token) {
        if let Some(socket) = Sockets::socket_of(token) {
            self.ready.push(socket);
        }
    }

    /// Questions in flight, refreshes and probes included.
    pub(crate) fn in_flight(&self) -> usize {
        self.machine.in_flight()
    }

    /// Whether a turn has something to do without waiting: readiness to handle, or questions
    /// that ended to hand over.
    pub(crate) fn has_work(&self) -> bool {
        !self.ready.is_empty() || self.machine.has_done() || self.sockets.has_work()
    }

    /// When the next timeout or health probe is due.
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        self.machine.poll_timeout()
    }

    /// Puts a question in flight and sends its first try ([`Machine::submit`]).
    pub(crate) fn submit(
        &mut self,
        key: &Key,
        route: Route,
        waiter: Option<Waiter>,
        kind: Kind,
        now: Instant,
    ) -> Result<(), Failure> {
        let submitted = self.machine.submit(key, route, waiter, kind, now);
        self.sockets.flush(&mut self.machine, now);
        submitted
    }

    /// Reads what upstream sockets received, fires due timers, sends due probes and retries,
    /// and hands over the questions that ended into `done`.
    pub(crate) fn turn(&mut self, cache: &Cache, now: Instant, done: &mut Vec<Done>) {
        self.sockets.receive(&self.ready, &mut self.machine, cache, now);
        self.ready.clear();
        self.machine.handle_timeout(cache, now);
        self.sockets.flush(&mut self.machine, now);
        self.machine.drain_done(done);
    }

    /// Takes back the waiter list of a question whose clients are answered
    /// ([`Machine::recycle`]).
    pub(crate) fn recycle(&mut self, waiters: Vec<Waiter>) {
        self.machine.recycle(waiters);
    }

    /// Once the clients of the turn are answered: closes the sockets of ended tries and tops up
    /// the spare sockets ([`Sockets::tidy`]).
    pub(crate) fn tidy(&mut self, now: Instant) {
        self.sockets.tidy(self.machine.in_flight(), now);
    }
}
