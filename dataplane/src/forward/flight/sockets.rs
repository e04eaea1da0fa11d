//! The socket layer under the forwarder's state machine: the only part of forwarding that
//! touches sockets. It carries out the machine's actions — a UDP try from a fresh source port
//! on a socket connected to its upstream, a TCP try over a connection of its own with the
//! length-prefixed framing of RFC 7766, a close when a try ends — and hands back what the
//! sockets receive, each under its try's [`TryId`].
//!
//! Every UDP try has a source port of the kernel's random choice of its own: a socket serves
//! one try, and when the try ends it gives the port up ([`sys::release_udp_port`]), so that an
//! off-path attacker learns nothing from one query's port about the next one's. A released
//! socket stays open and registered, and connecting it again binds it to a new random port:
//! three system calls in all (release, drain, connect) where closing the old socket and
//! opening, connecting and registering a new one cost five. Spare sockets — connected to an
//! upstream, registered, never used — wait for the next tries to that upstream, so that a cache
//! miss sends its query with no system call before it. Nothing that can wait is done between a
//! query leaving and its client being answered: the port of a finished try is released, and
//! spares are connected, in [`Sockets::tidy`], which the worker calls once the replies of its
//! turn are sent. Spares are made there when no try is in flight (an upstream on the same host
//! would otherwise wait for the CPU meanwhile), or after [`INLINE_OPENS`] tries found none (a
//! steady load that never leaves the forwarder idle), as many per upstream as the most tries it
//! got between two top-ups (at most [`SPARES_PER_UPSTREAM`], [`SPARE_SOCKETS`] in all, and as
//! many released sockets kept), and closed after [`SPARE_IDLE`] without a try to their
//! upstream. A try that finds none connects a released socket, or opens one, then.
//!
//! Tries over [`Protocol::PooledTcp`] and [`Protocol::Tls`] go on persistent connections
//! ([`Stream`]), a small pool per upstream and transport: a try takes the connection with the
//! fewest tries waiting, and another is opened only when every one has [`PIPELINE`] (up to
//! [`STREAMS_PER_UPSTREAM`]). A connection with no try waiting is closed after the configured
//! idle time (`expire`); one that fails, that its upstream closes, or on which tries waited
//! seconds without a byte from the upstream is dropped, and the tries
//! that waited on it go back to the machine: sent again on a new connection when the upstream
//! had answered on it, else held against the upstream.

use super::machine::{Action, Machine, Protocol, SendError, Transmit, TryId};
use super::stream::{take_frame, Progress, Stream};
use crate::answer::Transport;
use crate::cache::Cache;
use crate::forward::Tls;
use crate::observe::dnstap::Kind;
use crate::observe::Tap;
use crate::stats::WorkerStats;
use crate::sys;
use crate::wire::types::MAX_MESSAGE_LEN;
use mio::net::{TcpStream, UdpSocket};
use mio::{Interest, Registry, Token};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// First token of upstream sockets; tokens below are the worker's own.
const TOKEN_BASE: usize = 1 << (usize::BITS - 2);
/// Bytes read from a TCP upstream per read call.
const TCP_READ_LEN: usize = 4096;
/// How long the spare sockets of an upstream are kept while no try goes to it.
const SPARE_IDLE: Duration = Duration::from_secs(10);
/// Spare sockets kept per worker, all upstreams together.
const SPARE_SOCKETS: usize = 32;
/// Spare sockets kept for one upstream.
const SPARES_PER_UPSTREAM: usize = 16;
/// A try index with no socket.
const NO_SOCKET: usize = usize::MAX;
/// Tries that opened their own socket, for want of a spare, before spares are opened while
/// other tries are in flight.
const INLINE_OPENS: usize = 4;
/// Tries waiting on one persistent connection before another one to the same upstream is
/// opened: enough that one connection carries an ordinary load, few enough that a connection
/// lost costs few tries.
const PIPELINE: usize = 64;
/// Persistent connections kept to one upstream over one transport.
const STREAMS_PER_UPSTREAM: usize = 8;

/// One worker's upstream sockets.
pub(crate) struct Sockets {
    registry: Registry,
    /// By token (less [`TOKEN_BASE`]).
    open: Vec<Option<Open>>,
    free: Vec<usize>,
    /// By [`TryId::index`]: the socket of the open try with that index, or [`NO_SOCKET`].
    tries: Vec<usize>,
    spares: Vec<Spares>,
    /// Tries that opened their own socket since the spares were last topped up.
    inline_opens: usize,
    /// Sockets of ended tries, and the upstreams they were connected to, closed or released by
    /// [`Sockets::tidy`].
    ended: Vec<(usize, Link, SocketAddr)>,
    /// UDP sockets of ended tries with their port given up: connected again to an upstream
    /// of their family, each is the next spare or try.
    released: Vec<Released>,
    buf: Box<[u8]>,
    stats: Arc<WorkerStats>,
    /// Where queries and replies go to dnstap, when it is on.
    tap: Option<Tap>,
    /// Persistent connections, by upstream and transport.
    pools: Vec<Pool>,
    /// How long a persistent connection stays open with no try waiting.
    expire: Duration,
    /// How long the upstream may send nothing on a persistent connection that has queries out
    /// before it is given up: twice the forwarding timeout, by when every try on it has
    /// timed out, so that a slow upstream is not cut off while its tries still wait.
    stall: Duration,
    /// Persistent connections to read at the next [`Sockets::receive`] whatever the
    /// readiness: a write to them failed, or their upstream went silent.
    kicked: Vec<usize>,
    /// Tries of a connection that closed, handed back to the machine one by one.
    orphans: Vec<TryId>,
}

/// The persistent connections to one upstream over one transport.
struct Pool {
    upstream: SocketAddr,
    tls: Option<Arc<Tls>>,
    streams: Vec<usize>,
}

impl Pool {
    fn is_for(&self, upstream: SocketAddr, tls: Option<&Arc<Tls>>) -> bool {
        self.upstream == upstream
            && match (&self.tls, tls) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
                _ => false,
            }
    }
}

struct Open {
    link: Link,
    /// The upstream the socket is connected to.
    upstream: SocketAddr,
    /// The try the socket serves; `None` while it is a spare.
    serves: Option<TryId>,
}

enum Link {
    Udp(UdpSocket),
    Tcp(TcpLink),
    Stream(Box<Stream>),
}

/// A UDP socket whose port was given up ([`sys::release_udp_port`]), still registered under
/// its slot's token.
struct Released {
    socket: usize,
    udp: UdpSocket,
    ipv4: bool,
}

/// The spare sockets of one upstream.
struct Spares {
    upstream: SocketAddr,
    ready: Vec<usize>,
    /// Tries to the upstream since the spares were last topped up.
    taken: usize,
    /// How many to keep ready: the most tries it got between two top-ups.
    keep: usize,
    last_try: Instant,
}

impl Sockets {
    /// No sockets yet; they will be registered with `registry`, queries sent counted in
    /// `stats`, and queries and replies handed to `tap` when there is one.
    pub(crate) fn new(registry: Registry, stats: Arc<WorkerStats>, tap: Option<Tap>) -> Sockets {
        Sockets {
            registry,
            open: Vec::new(),
            free: Vec::new(),
            tries: Vec::new(),
            spares: Vec::new(),
            inline_opens: 0,
            ended: Vec::new(),
            released: Vec::new(),
            buf: vec![0; MAX_MESSAGE_LEN].into_boxed_slice(),
            stats,
            tap,
            pools: Vec::new(),
            expire: crate::forward::ForwardConfig::default().expire,
            stall: 2 * crate::forward::ForwardConfig::default().timeout,
            kicked: Vec::new(),
            orphans: Vec::new(),
        }
    }

    /// Persistent connections close after `expire` with no try waiting, and are given up
    /// after twice the forwarding `timeout` without a byte from their upstream while queries
    /// are out on them.
    pub(crate) fn set_timeouts(&mut self, expire: Duration, timeout: Duration) {
        self.expire = expire;
        self.stall = 2 * timeout;
    }

    /// Whether connections wait to be read whatever their readiness.
    pub(crate) fn has_work(&self) -> bool {
        !self.kicked.is_empty()
    }

    /// Whether `token` belongs to an upstream socket.
    pub(crate) fn owns(token: Token) -> bool {
        token.0 >= TOKEN_BASE
    }

    /// The socket `token` names, for [`Sockets::receive`].
    pub(crate) fn socket_of(token: Token) -> Option<usize> {
        token.0.checked_sub(TOKEN_BASE)
    }

    /// Carries out what `machine` asks, until it asks nothing more; a try that cannot be sent
    /// goes back to it as a send error.
    pub(crate) fn flush<W>(&mut self, machine: &mut Machine<W>, now: Instant) {
        while let Some(action) = machine.poll_action() {
            match action {
                Action::Transmit(transmit) => {
                    if let Err(e) = self.transmit(&transmit, now) {
                        machine.on_send_error(transmit.id, e, now);
                    }
                }
                Action::Close(id) => self.close_try(id),
            }
        }
    }

    /// Reads what `sockets` (from readiness events) received and hands it to `machine`.
    pub(crate) fn receive<W>(&mut self, sockets: &[usize], machine: &mut Machine<W>, cache: &Cache, now: Instant) {
        for &socket in sockets {
            self.service(socket, machine, cache, now);
        }
        while let Some(socket) = self.kicked.pop() {
            self.service(socket, machine, cache, now);
        }
    }

    /// What waits until the clients of a turn are answered: releases the ports of ended UDP
    /// tries (closing their sockets past [`SPARE_SOCKETS`]) and closes ended TCP tries, then
    /// tops up the spares when `in_flight` is 0 or tries had to open their own sockets.
    pub(crate) fn tidy(&mut self, in_flight: usize, now: Instant) {
        while let Some((socket, link, upstream)) = self.ended.pop() {
            match link {
                Link::Udp(udp)
                    if self.released.len() < SPARE_SOCKETS
                        && sys::release_udp_port(socket2::SockRef::from(&udp)).is_ok() =>
                {
                    self.released.push(Released {
                        socket,
                        udp,
                        ipv4: upstream.is_ipv4(),
                    });
                }
                link => {
                    self.deregister(link);
                    self.free.push(socket);
                }
            }
        }
        if in_flight == 0 || self.inline_opens >= INLINE_OPENS {
            self.top_up(now);
        }
        self.expire_streams(now);
    }

    /// Closes the persistent connections that had no try waiting for `expire`,
    /// and gives up those whose upstream left tries waiting without a byte for a while: their
    /// tries go back to the machine at the next [`Sockets::receive`].
    fn expire_streams(&mut self, now: Instant) {
        for p in 0..self.pools.len() {
            let mut i = 0;
            while i < self.pools[p].streams.len() {
                let socket = self.pools[p].streams[i];
                let Some(Link::Stream(stream)) =
                    self.open.get_mut(socket).and_then(Option::as_mut).map(|o| &mut o.link)
                else {
                    self.pools[p].streams.swap_remove(i);
                    continue;
                };
                if stream.is_stalled(now, self.stall) && !stream.is_broken() {
                    stream.give_up();
                    self.kicked.push(socket);
                }
                if stream.idle_for(now).is_some_and(|idle| idle >= self.expire) {
                    self.pools[p].streams.swap_remove(i);
                    self.close(socket);
                } else {
                    i += 1;
                }
            }
        }
        self.pools.retain(|pool| !pool.streams.is_empty());
    }

    /// Closes the spare sockets of upstreams no try went to for [`SPARE_IDLE`], and opens
    /// spares for those that had tries since the last call.
    fn top_up(&mut self, now: Instant) {
        self.inline_opens = 0;
        let mut i = 0;
        while i < self.spares.len() {
            if now.saturating_duration_since(self.spares[i].last_try) > SPARE_IDLE {
                for socket in self.spares.swap_remove(i).ready {
                    self.close(socket);
                }
            } else {
                i += 1;
            }
        }
        let mut kept: usize = self.spares.iter().map(|s| s.ready.len()).sum();
        for i in 0..self.spares.len() {
            let spares = &mut self.spares[i];
            spares.keep = spares.keep.max(spares.taken).min(SPARES_PER_UPSTREAM);
            spares.taken = 0;
            let upstream = spares.upstream;
            while self.spares[i].ready.len() < self.spares[i].keep && kept < SPARE_SOCKETS {
                // A host out of sockets now is one later: the try that needs one reports it.
                let Ok(socket) = self.open_udp(upstream) else {
                    return;
                };
                self.spares[i].ready.push(socket);
                kept += 1;
            }
        }
    }

    fn transmit(&mut self, transmit: &Transmit, now: Instant) -> Result<(), SendError> {
        let socket = match transmit.protocol {
            Protocol::Udp => self.send_udp(transmit, now)?,
            Protocol::Tcp => self.connect_tcp(transmit)?,
            Protocol::PooledTcp | Protocol::Tls => self.send_stream(transmit, now)?,
        };
        if let Some(open) = self.open[socket].as_mut() {
            if !matches!(open.link, Link::Stream(_)) {
                open.serves = Some(transmit.id);
            }
        }
        let index = transmit.id.index();
        if self.tries.len() <= index {
            self.tries.resize(index + 1, NO_SOCKET);
        }
        self.tries[index] = socket;
        self.stats.upstream_queries.incr();
        if let Some(tap) = self.tap.as_mut() {
            let transport = match transmit.protocol {
                Protocol::Udp => Transport::Udp,
                // dnstap's transport is the layer below DNS: TLS runs over TCP.
                Protocol::Tcp | Protocol::PooledTcp | Protocol::Tls => Transport::Tcp,
            };
            tap.forwarder(Kind::ForwarderQuery, transport, transmit.upstream, transmit.query());
        }
        Ok(())
    }

    fn send_udp(&mut self, transmit: &Transmit, now: Instant) -> Result<usize, SendError> {
        let socket = match self.take_spare(transmit.upstream, now) {
            Some(socket) => socket,
            None => {
                self.inline_opens += 1;
                self.open_udp(transmit.upstream)?
            }
        };
        let sent = match self.open[socket].as_ref().map(|o| &o.link) {
            Some(Link::Udp(udp)) => udp.send(transmit.query()).map(drop),
            _ => Err(io::ErrorKind::NotConnected.into()),
        };
        match sent {
            Ok(()) => Ok(socket),
            Err(e) => {
                self.close(socket);
                Err(SendError::Upstream(e))
            }
        }
    }

    /// Puts `transmit` on a persistent connection to its upstream: the one with the fewest
    /// tries waiting that has none with the same query ID, or a new one when each has
    /// [`PIPELINE`] tries waiting and the pool has room.
    fn send_stream(&mut self, transmit: &Transmit, now: Instant) -> Result<usize, SendError> {
        let query_id = transmit.query_id();
        let tls = transmit.tls.as_ref();
        let pool = match self.pools.iter().position(|p| p.is_for(transmit.upstream, tls)) {
            Some(p) => p,
            None => {
                self.pools.push(Pool {
                    upstream: transmit.upstream,
                    tls: tls.cloned(),
                    streams: Vec::new(),
                });
                self.pools.len() - 1
            }
        };
        let mut best: Option<(usize, usize)> = None;
        for &socket in &self.pools[pool].streams {
            if let Some(Open {
                link: Link::Stream(stream),
                ..
            }) = self.open.get(socket).and_then(Option::as_ref)
            {
                if stream.can_take(query_id) && best.is_none_or(|(_, load)| stream.load() < load) {
                    best = Some((socket, stream.load()));
                }
            }
        }
        let room = self.pools[pool].streams.len() < STREAMS_PER_UPSTREAM;
        let proto = usize::from(transmit.protocol == Protocol::Tls);
        let socket = match best {
            Some((socket, load)) if load < PIPELINE || !room => {
                self.stats.upstream_conn_reused[proto].incr();
                socket
            }
            None if !room => {
                return Err(SendError::Local(io::Error::other(
                    "every connection to the upstream has a query with this ID",
                )))
            }
            _ => {
                let stream = Stream::open(transmit.upstream, tls.map(|t| &**t), now)?;
                let socket = self.register(
                    Link::Stream(Box::new(stream)),
                    transmit.upstream,
                    Interest::READABLE | Interest::WRITABLE,
                )?;
                self.pools[pool].streams.push(socket);
                self.stats.upstream_conn_opened[proto].incr();
                socket
            }
        };
        if let Some(Open {
            link: Link::Stream(stream),
            ..
        }) = self.open[socket].as_mut()
        {
            stream.send(transmit.id, query_id, transmit.query(), now);
            if stream.is_broken() {
                self.kicked.push(socket);
            }
        }
        Ok(socket)
    }

    /// A spare socket to `upstream`, noting the try either way.
    fn take_spare(&mut self, upstream: SocketAddr, now: Instant) -> Option<usize> {
        let spares = match self.spares.iter().position(|s| s.upstream == upstream) {
            Some(i) => &mut self.spares[i],
            None => {
                self.spares.push(Spares {
                    upstream,
                    ready: Vec::new(),
                    taken: 0,
                    keep: 0,
                    last_try: now,
                });
                self.spares.last_mut()?
            }
        };
        spares.taken += 1;
        spares.last_try = now;
        spares.ready.pop()
    }

    /// A UDP socket connected to `upstream` from a port of the kernel's random choice: a
    /// released one connected again, or else a new one, registered.
    fn open_udp(&mut self, upstream: SocketAddr) -> Result<usize, SendError> {
        let ipv4 = upstream.is_ipv4();
        while let Some(i) = self.released.iter().rposition(|released| released.ipv4 == ipv4) {
            let Released { socket, udp, .. } = self.released.swap_remove(i);
            if udp.connect(upstream).is_ok() {
                self.open[socket] = Some(Open {
                    link: Link::Udp(udp),
                    upstream,
                    serves: None,
                });
                return Ok(socket);
            }
            self.deregister(Link::Udp(udp));
            self.free.push(socket);
        }
        let socket = sys::upstream_udp(upstream).map_err(|e| {
            if sys::is_resource_exhaustion(&e) {
                SendError::Local(e)
            } else {
                SendError::Upstream(e)
            }
        })?;
        self.register(Link::Udp(UdpSocket::from_std(socket)), upstream, Interest::READABLE)
    }

    /// Starts a connection to `transmit`'s upstream, its query framed and waiting to be written.
    fn connect_tcp(&mut self, transmit: &Transmit) -> Result<usize, SendError> {
        let stream = TcpStream::connect(transmit.upstream).map_err(|e| {
            if sys::is_resource_exhaustion(&e) {
                SendError::Local(e)
            } else {
                SendError::Upstream(e)
            }
        })?;
        let query = transmit.query();
        let mut out = Vec::with_capacity(2 + query.len());
        out.extend_from_slice(&(query.len() as u16).to_be_bytes());
        out.extend_from_slice(query);
        let link = TcpLink {
            stream,
            connected: false,
            out,
            written: 0,
            input: Vec::new(),
        };
        self.register(
            Link::Tcp(link),
            transmit.upstream,
            Interest::READABLE | Interest::WRITABLE,
        )
    }

    fn register(&mut self, mut link: Link, upstream: SocketAddr, interest: Interest) -> Result<usize, SendError> {
        let socket = self.free.pop().unwrap_or_else(|| {
            self.open.push(None);
            self.open.len() - 1
        });
        let token = Token(TOKEN_BASE + socket);
        let registered = match &mut link {
            Link::Udp(udp) => self.registry.register(udp, token, interest),
            Link::Tcp(tcp) => self.registry.register(&mut tcp.stream, token, interest),
            Link::Stream(stream) => self.registry.register(stream.socket(), token, interest),
        };
        if let Err(e) = registered {
            self.free.push(socket);
            return Err(SendError::Local(e));
        }
        self.open[socket] = Some(Open {
            link,
            upstream,
            serves: None,
        });
        Ok(socket)
    }

    fn close_try(&mut self, id: TryId) {
        let Some(&socket) = self.tries.get(id.index()) else {
            return;
        };
        if let Some(Open {
            link: Link::Stream(stream),
            ..
        }) = self.open.get_mut(socket).and_then(Option::as_mut)
        {
            stream.forget(id);
            self.tries[id.index()] = NO_SOCKET;
            return;
        }
        if self.open.get(socket).and_then(Option::as_ref).and_then(|o| o.serves) == Some(id) {
            self.tries[id.index()] = NO_SOCKET;
            // Out of the table at once, so that nothing more is read from it; closed later.
            if let Some(open) = self.open[socket].take() {
                self.ended.push((socket, open.link, open.upstream));
            }
        }
    }

    fn close(&mut self, socket: usize) {
        let Some(open) = self.open.get_mut(socket).and_then(Option::take) else {
            return;
        };
        self.deregister(open.link);
        self.free.push(socket);
    }

    /// Takes `link` out of the poll and closes it.
    fn deregister(&self, link: Link) {
        let _ = match link {
            Link::Udp(mut udp) => self.registry.deregister(&mut udp),
            Link::Tcp(mut tcp) => self.registry.deregister(&mut tcp.stream),
            Link::Stream(mut stream) => self.registry.deregister(stream.socket()),
        };
    }

    /// Reads everything `socket` has received.
    fn service<W>(&mut self, socket: usize, machine: &mut Machine<W>, cache: &Cache, now: Instant) {
        loop {
            let Sockets { open, buf, tap, .. } = self;
            let Some(open) = open.get_mut(socket).and_then(Option::as_mut) else {
                return;
            };
            if matches!(open.link, Link::Stream(_)) {
                return self.service_stream(socket, machine, cache, now);
            }
            let Some(id) = open.serves else {
                return self.drain_spare(socket);
            };
            let failed = match &mut open.link {
                Link::Udp(udp) => match udp.recv(buf) {
                    Ok(n) => {
                        if let Some(tap) = tap.as_mut() {
                            tap.forwarder(Kind::ForwarderResponse, Transport::Udp, open.upstream, &buf[..n]);
                        }
                        machine.on_reply(id, &buf[..n], cache, now);
                        false
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => true,
                },
                Link::Tcp(link) => match link.progress(buf) {
                    TcpProgress::Pending => return,
                    TcpProgress::Message(len) => {
                        if let Some(tap) = tap.as_mut() {
                            tap.forwarder(Kind::ForwarderResponse, Transport::Tcp, open.upstream, &buf[..len]);
                        }
                        machine.on_reply(id, &buf[..len], cache, now);
                        false
                    }
                    TcpProgress::Failed => true,
                },
                Link::Stream(_) => return,
            };
            if failed {
                machine.on_receive_error(id, cache, now);
                return self.flush(machine, now);
            }
            self.flush(machine, now);
            let still = self.open.get(socket).and_then(Option::as_ref).and_then(|o| o.serves);
            if still != Some(id) {
                return;
            }
        }
    }

    /// Reads every reply persistent connection `socket` has, handing each to the try waiting
    /// for its ID; once it closes, hands its waiting tries back to the machine.
    fn service_stream<W>(&mut self, socket: usize, machine: &mut Machine<W>, cache: &Cache, now: Instant) {
        loop {
            let Sockets {
                open, buf, tap, stats, ..
            } = self;
            let Some(Open {
                link: Link::Stream(stream),
                upstream,
                ..
            }) = open.get_mut(socket).and_then(Option::as_mut)
            else {
                return;
            };
            match stream.progress(buf, now) {
                Progress::Pending => return,
                Progress::Message(len) => {
                    let message = &buf[..len];
                    if let Some(tap) = tap.as_mut() {
                        tap.forwarder(Kind::ForwarderResponse, Transport::Tcp, *upstream, message);
                    }
                    let query_id = u16::from_be_bytes([message[0], message.get(1).copied().unwrap_or(0)]);
                    match stream.waiting_for(query_id) {
                        Some(id) => machine.on_reply(id, message, cache, now),
                        None => stats.upstream_mismatched_id.incr(),
                    }
                    self.flush(machine, now);
                }
                Progress::Closed => {
                    let answered = stream.has_answered();
                    let mut orphans = std::mem::take(&mut self.orphans);
                    stream.take_waiting(&mut orphans);
                    for pool in &mut self.pools {
                        pool.streams.retain(|&s| s != socket);
                    }
                    self.close(socket);
                    for id in orphans.drain(..) {
                        if let Some(t) = self.tries.get_mut(id.index()) {
                            *t = NO_SOCKET;
                        }
                        if answered {
                            machine.on_connection_lost(id, cache, now);
                        } else {
                            machine.on_receive_error(id, cache, now);
                        }
                    }
                    self.orphans = orphans;
                    return self.flush(machine, now);
                }
            }
        }
    }

    /// Discards what a spare socket received: no query has left it, so nothing it receives is
    /// a reply (it is counted as one with a wrong ID). A spare with an error is closed.
    fn drain_spare(&mut self, socket: usize) {
        loop {
            let Some(Open {
                link: Link::Udp(udp), ..
            }) = self.open.get(socket).and_then(Option::as_ref)
            else {
                return;
            };
            match udp.recv(&mut self.buf) {
                Ok(_) => self.stats.upstream_mismatched_id.incr(),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    for spares in &mut self.spares {
                        spares.ready.retain(|&s| s != socket);
                    }
                    return self.close(socket);
                }
            }
        }
    }
}

/// A TCP try: its connection, the framed query going out, and the bytes come back.
struct TcpLink {
    stream: TcpStream,
    connected: bool,
    out: Vec<u8>,
    written: usize,
    input: Vec<u8>,
}

/// What a TCP link has after being driven.
#[derive(Debug, PartialEq, Eq)]
enum TcpProgress {
    /// Waiting for readiness.
    Pending,
    /// A whole message of this length is in the buffer handed in, its prefix gone.
    Message(usize),
    /// The connection failed or closed early.
    Failed,
}

impl TcpLink {
    /// Finishes connecting, writes the query, reads until a whole message is in; that message
    /// is moved into `message`.
    fn progress(&mut self, message: &mut [u8]) -> TcpProgress {
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
            if let Some(len) = take_frame(&mut self.input, message) {
                return TcpProgress::Message(len);
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

#[cfg(test)]
mod tests;
