//! DNS over TCP (RFC 7766) inside a worker's event loop.
//!
//! Each worker owns a listener per listening address and its connections. Everything is non-blocking and bounded so
//! that no client can hold up the worker's UDP traffic or other connections:
//! - messages are framed by a 2-byte length and answered in arrival order as soon as each is
//!   complete, several per connection (pipelining);
//! - a connection gets a bounded amount of work per turn of the event loop and is queued again
//!   if it has more;
//! - replies wait in a per-connection buffer; past a high-water mark the connection's queries
//!   are left unread, so the kernel's flow control pushes back on a client that does not read;
//! - a message or length prefix must arrive, and pending replies must make progress, within the
//!   I/O timeout; a connection with nothing to do is closed after the idle timeout, which
//!   shrinks when connections run short;
//! - connections are capped per worker (and per client address, when the operator asks for it);
//!   when a new connection finds no slot free, the connection idle the longest is closed to make
//!   room (RFC 7766 §6.2.3), and only when every connection is busy is the new one refused, at
//!   once.
//!
//! Timeouts are checked by a sweep driven from the poll loop's timeout, not by timers per
//! connection.

use crate::forward::Client;
use crate::io::Peer;
use crate::pipeline::{Fate, Turn};
use crate::stats::{RateLimitedWarning, WorkerStats};
use crate::wire::types::MAX_MESSAGE_LEN;
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::time::{Duration, Instant};

/// Limits and timeouts of DNS over TCP. The caps are per worker: the kernel spreads connections
/// over the workers' listeners, so the server as a whole holds up to `workers` times as many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpConfig {
    /// Open connections per worker: the real bound on what the worker holds. A new connection
    /// past it takes the slot of the connection idle the longest, or is refused at once when
    /// every connection is busy.
    pub max_connections: usize,
    /// Open connections per client address per worker, 0 for no such cap. Off by default: a
    /// forwarder's connection pool, a node-local cache or every pod behind one SNAT address
    /// opens hundreds from one address, and the worker cap already bounds what one client can
    /// take. Past it, the client's own idlest connection makes room, as for the worker cap.
    pub max_per_client: usize,
    /// How long a connection may sit with nothing to do before it is closed (RFC 7766 §6.2.3
    /// suggests seconds, not minutes). Advertised in edns-tcp-keepalive (RFC 7828).
    pub idle_timeout: Duration,
    /// How long a started message or length prefix may take to arrive, and pending replies may
    /// go without the client reading any of them.
    pub io_timeout: Duration,
}

impl Default for TcpConfig {
    fn default() -> TcpConfig {
        TcpConfig {
            max_connections: 1024,
            max_per_client: 0,
            idle_timeout: Duration::from_secs(10),
            io_timeout: Duration::from_secs(1),
        }
    }
}

/// The token of a worker's first listener; the others follow it. Far above any connection's
/// token, which counts up from [`FIRST_CONNECTION`].
const LISTENER_BASE: usize = 1 << (usize::BITS - 3);
/// Token of the first connection slot.
const FIRST_CONNECTION: usize = 3;

/// Pending reply bytes above which a connection's further queries wait for the client to read.
/// One reply of maximum size always fits on top, so the buffer stays below 128 KiB.
const OUTPUT_HIGH_WATER: usize = 64 * 1024;
/// Initial input buffer of a connection: room for many pipelined queries of usual size; it
/// grows to fit a larger message and shrinks back once that is answered.
const INITIAL_INPUT_LEN: usize = 2048;
/// Messages answered per connection per turn before other work gets its go.
const MESSAGES_PER_TURN: usize = 64;
/// Reads per connection per turn.
const READS_PER_TURN: usize = 8;
/// Connections accepted per turn.
const ACCEPTS_PER_TURN: usize = 64;
/// Idle connections looked at for eviction per new connection: one found to hold unread bytes
/// is passed over for the next idlest, a few times at most.
const EVICTION_TRIES: usize = 4;
/// How long accepting pauses after the listener fails (out of file descriptors, memory).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// Bounds on the interval of the timeout sweep: a quarter of the I/O timeout within these.
const MIN_SWEEP: Duration = Duration::from_millis(10);
const MAX_SWEEP: Duration = Duration::from_millis(100);
/// Length of the TCP framing prefix.
const PREFIX_LEN: usize = 2;

/// A worker's TCP side: its listeners and its connections.
pub(crate) struct TcpServer {
    listeners: Vec<TcpListener>,
    config: TcpConfig,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    active: usize,
    /// Open connections per client address; kept only when there is a per-client cap.
    per_client: HashMap<IpAddr, usize>,
    /// Connections with work to do in the next turn.
    ready: Vec<usize>,
    /// The list being worked through in the current turn (kept to reuse its allocation).
    serving: Vec<usize>,
    listener_ready: Vec<bool>,
    accept_paused_until: Option<Instant>,
    /// Reply buffer: a length prefix and a message of the largest size.
    scratch: Box<[u8]>,
    next_sweep: Instant,
    sweep_every: Duration,
    accept_warning: RateLimitedWarning,
    /// Number given to the next connection, so that a late answer for a connection that has
    /// since closed is not delivered to the one that took its slot.
    next_serial: u64,
}

/// What to do with a connection after serving it.
enum Next {
    /// Nothing until its next readiness event.
    Wait,
    /// It has more work: serve it again next turn.
    Again,
    /// Close it.
    Close,
}

impl TcpServer {
    pub(crate) fn new(listeners: Vec<TcpListener>, config: TcpConfig, now: Instant) -> TcpServer {
        let sweep_every = (config.io_timeout / 4).clamp(MIN_SWEEP, MAX_SWEEP);
        TcpServer {
            listener_ready: vec![true; listeners.len()],
            listeners,
            config,
            conns: Vec::new(),
            free: Vec::new(),
            active: 0,
            per_client: HashMap::new(),
            ready: Vec::new(),
            serving: Vec::new(),
            accept_paused_until: None,
            scratch: vec![0; PREFIX_LEN + MAX_MESSAGE_LEN].into_boxed_slice(),
            next_sweep: now + sweep_every,
            sweep_every,
            accept_warning: RateLimitedWarning::default(),
            next_serial: 0,
        }
    }

    /// Queues a reply that was waiting for an upstream on connection slot `conn`, if it still
    /// holds connection number `serial`; it is written on the connection's next turn.
    pub(crate) fn deliver(&mut self, conn: usize, serial: u64, reply: &[u8], now: Instant) {
        let Some(Some(c)) = self.conns.get_mut(conn) else {
            return;
        };
        if c.serial != serial {
            return;
        }
        let len = reply.len().min(MAX_MESSAGE_LEN);
        c.output.extend_from_slice(&(len as u16).to_be_bytes());
        c.output.extend_from_slice(&reply[..len]);
        c.outstanding = c.outstanding.saturating_sub(1);
        c.last_active = now;
        if !c.queued {
            c.queued = true;
            self.ready.push(conn);
        }
    }

    /// Registers the listeners in the worker's poll.
    pub(crate) fn register(&mut self, registry: &Registry) -> io::Result<()> {
        for (i, listener) in self.listeners.iter_mut().enumerate() {
            registry.register(listener, Token(LISTENER_BASE + i), Interest::READABLE)?;
        }
        Ok(())
    }

    /// Notes a readiness event for the listener or a connection; other tokens are ignored.
    /// `read_closed` is the event's word that the peer closed its side, which a read must see.
    pub(crate) fn on_event(&mut self, token: Token, read_closed: bool) {
        if let Some(ready) = token
            .0
            .checked_sub(LISTENER_BASE)
            .and_then(|i| self.listener_ready.get_mut(i))
        {
            *ready = self.accept_paused_until.is_none();
            return;
        }
        let Some(idx) = token.0.checked_sub(FIRST_CONNECTION) else {
            return;
        };
        if let Some(Some(conn)) = self.conns.get_mut(idx) {
            conn.read_closed |= read_closed;
            if !conn.queued {
                conn.queued = true;
                self.ready.push(idx);
            }
        }
    }

    /// Closes the listeners: connections not accepted yet are refused by the kernel, and the
    /// port goes to whichever process still listens on it.
    pub(crate) fn close_listeners(&mut self, registry: &Registry) {
        for listener in &mut self.listeners {
            let _ = registry.deregister(listener);
        }
        self.listeners.clear();
        self.listener_ready.clear();
        self.accept_paused_until = None;
    }

    /// While draining: closes every connection with nothing left to answer, read or write, and
    /// queues those whose queries have arrived unread, so that each query sent before the close
    /// is answered first.
    pub(crate) fn close_finished(&mut self, registry: &Registry) {
        for idx in 0..self.conns.len() {
            let Some(conn) = self.conns[idx].as_mut() else {
                continue;
            };
            if !conn.is_idle() {
                continue;
            }
            if conn.has_unread_bytes() {
                if !conn.queued {
                    conn.queued = true;
                    self.ready.push(idx);
                }
                continue;
            }
            self.close(registry, idx);
        }
    }

    /// Whether no connection is open.
    pub(crate) fn is_empty(&self) -> bool {
        self.active == 0
    }

    /// Whether work is waiting that needs no readiness event to continue.
    pub(crate) fn has_work(&self) -> bool {
        self.listener_ready.contains(&true) || !self.ready.is_empty()
    }

    /// When the poll loop must wake up next for the timeout sweep, if anything can time out.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        (self.active > 0 || self.accept_paused_until.is_some()).then_some(self.next_sweep)
    }

    /// Accepts waiting connections and serves the connections with work, each within its
    /// budget, every message through the worker's pipeline `turn`.
    pub(crate) fn turn(&mut self, registry: &Registry, turn: &mut Turn<'_>) {
        for i in 0..self.listeners.len() {
            if self.listener_ready[i] {
                self.listener_ready[i] = self.accept(i, registry, turn.stats, turn.now);
            }
        }
        let mut serving = std::mem::take(&mut self.serving);
        std::mem::swap(&mut serving, &mut self.ready);
        if !serving.is_empty() {
            if let Some(observer) = turn.observer.as_deref_mut() {
                observer.batch_received();
            }
        }
        let keepalive = keepalive(self.idle_timeout());
        // The clock's last reading in this turn: a message whose answer signed records is
        // charged the time from there to the reading after it.
        let mut read = turn.now;
        for idx in serving.drain(..) {
            let Some(Some(conn)) = self.conns.get_mut(idx) else {
                continue;
            };
            conn.queued = false;
            match conn.serve(&mut self.scratch, turn, &mut read, keepalive) {
                Next::Wait => {}
                Next::Again => {
                    conn.queued = true;
                    self.ready.push(idx);
                }
                Next::Close => self.close(registry, idx),
            }
        }
        self.serving = serving;
    }

    /// Closes connections past their timeouts, at most once per sweep interval.
    pub(crate) fn sweep(&mut self, registry: &Registry, stats: &WorkerStats, now: Instant) {
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + self.sweep_every;
        if self.accept_paused_until.is_some_and(|until| now >= until) {
            self.accept_paused_until = None;
            self.listener_ready.fill(true);
        }
        let idle = self.idle_timeout();
        let io = self.config.io_timeout;
        for idx in 0..self.conns.len() {
            let Some(conn) = &self.conns[idx] else {
                continue;
            };
            let late = |since: Option<Instant>| since.is_some_and(|t| now.saturating_duration_since(t) >= io);
            if late(conn.partial_since) || late(conn.stalled_since) {
                stats.tcp_io_timeouts.incr();
                self.close(registry, idx);
            } else if conn.is_idle() && now.saturating_duration_since(conn.last_active) >= idle {
                stats.tcp_idle_timeouts.incr();
                self.close(registry, idx);
            }
        }
    }

    /// The idle timeout in force: the configured one, or the I/O timeout once more than three
    /// quarters of the connection slots are taken, so that idle clients make room for new ones.
    fn idle_timeout(&self) -> Duration {
        if self.active * 4 > self.config.max_connections * 3 {
            self.config.idle_timeout.min(self.config.io_timeout)
        } else {
            self.config.idle_timeout
        }
    }

    /// Accepts up to a turn's worth of connections; returns whether more may be waiting.
    fn accept(&mut self, listener: usize, registry: &Registry, stats: &WorkerStats, now: Instant) -> bool {
        for _ in 0..ACCEPTS_PER_TURN {
            match self.listeners[listener].accept() {
                Ok((stream, peer)) => self.admit(registry, stream, peer, stats, now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
                Err(e) => {
                    // Typically out of file descriptors: the connection stays in the backlog;
                    // try again after a pause rather than spinning on the error.
                    if let Some(suppressed) = self.accept_warning.allow(now) {
                        tracing::warn!(error = %e, suppressed, "accepting a TCP connection failed");
                    }
                    self.accept_paused_until = Some(now + ACCEPT_PAUSE);
                    return false;
                }
            }
        }
        true
    }

    fn admit(
        &mut self,
        registry: &Registry,
        mut stream: TcpStream,
        peer: SocketAddr,
        stats: &WorkerStats,
        now: Instant,
    ) {
        let client = peer.ip().to_canonical();
        let per_client = self.config.max_per_client;
        if per_client > 0
            && self.per_client.get(&client).copied().unwrap_or(0) >= per_client
            && !self.evict_idlest(registry, Some(client), stats)
        {
            stats.tcp_refused_per_client.incr();
            return;
        }
        if self.active >= self.config.max_connections && !self.evict_idlest(registry, None, stats) {
            stats.tcp_refused_full.incr();
            return;
        }
        let idx = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Err(e) = registry.register(
            &mut stream,
            Token(FIRST_CONNECTION + idx),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            self.free.push(idx);
            if let Some(suppressed) = self.accept_warning.allow(now) {
                tracing::warn!(error = %e, suppressed, "registering a TCP connection failed");
            }
            return;
        }
        // Replies are written whole; coalescing them with later ones only adds latency.
        let _ = stream.set_nodelay(true);
        self.next_serial += 1;
        let conn = Conn::new(stream, SocketAddr::new(client, peer.port()), idx, self.next_serial, now);
        self.conns[idx] = Some(conn);
        self.active += 1;
        if per_client > 0 {
            *self.per_client.entry(client).or_insert(0) += 1;
        }
        stats.tcp_accepted.incr();
    }

    /// Closes the connection that has been idle the longest (of `client`'s, if given) so that
    /// a new one can take its place (RFC 7766 §6.2.3); false when every candidate is busy.
    /// A connection with nothing buffered may still hold a query the kernel has received and
    /// the worker not yet read: it is passed over, since closing it would lose that query.
    fn evict_idlest(&mut self, registry: &Registry, client: Option<IpAddr>, stats: &WorkerStats) -> bool {
        let mut busy = [usize::MAX; EVICTION_TRIES];
        for tried in 0..EVICTION_TRIES {
            let idlest = self
                .conns
                .iter()
                .enumerate()
                .filter_map(|(idx, conn)| Some((idx, conn.as_ref()?)))
                .filter(|(idx, conn)| {
                    conn.is_idle() && client.is_none_or(|c| c == conn.client) && !busy[..tried].contains(idx)
                })
                .min_by_key(|(_, conn)| conn.last_active)
                .map(|(idx, _)| idx);
            let Some(idx) = idlest else {
                return false;
            };
            if self.conns[idx].as_ref().is_some_and(Conn::has_unread_bytes) {
                busy[tried] = idx;
                continue;
            }
            stats.tcp_evicted.incr();
            self.close(registry, idx);
            return true;
        }
        false
    }

    fn close(&mut self, registry: &Registry, idx: usize) {
        let Some(mut conn) = self.conns[idx].take() else {
            return;
        };
        let _ = registry.deregister(&mut conn.stream);
        self.active -= 1;
        self.free.push(idx);
        if let Some(n) = self.per_client.get_mut(&conn.client) {
            *n -= 1;
            if *n == 0 {
                self.per_client.remove(&conn.client);
            }
        }
    }
}

/// The edns-tcp-keepalive value for an idle timeout, in units of 100 ms (RFC 7828 §3.1).
fn keepalive(idle: Duration) -> u16 {
    (idle.as_millis() / 100).min(u128::from(u16::MAX)) as u16
}

/// One client connection and its buffers.
struct Conn {
    stream: TcpStream,
    client: IpAddr,
    /// The client's address and port in the form the answer path takes it, made once.
    peer: Peer,
    /// Its slot in the server's table.
    slot: usize,
    /// Its connection number.
    serial: u64,
    /// Queries forwarded upstream whose answers have not come back yet.
    outstanding: u32,
    /// Received bytes are `input[in_start..in_end]`; the rest of `input` is free room.
    input: Vec<u8>,
    in_start: usize,
    in_end: usize,
    /// Replies not yet written are `output[out_start..]`.
    output: Vec<u8>,
    out_start: usize,
    /// When the last query was answered (or the connection opened).
    last_active: Instant,
    /// When the first byte of the message now arriving came, if one is incomplete.
    partial_since: Option<Instant>,
    /// Since when pending replies have gone without the client reading any.
    stalled_since: Option<Instant>,
    /// The client closed its side: answer what is buffered, then close.
    eof: bool,
    /// A readiness event said the client closed its side, which a read has yet to see.
    read_closed: bool,
    /// The connection is in the ready list.
    queued: bool,
}

impl Conn {
    fn new(stream: TcpStream, peer: SocketAddr, slot: usize, serial: u64, now: Instant) -> Conn {
        Conn {
            stream,
            client: peer.ip(),
            peer: Peer::from(peer),
            slot,
            serial,
            outstanding: 0,
            input: vec![0; INITIAL_INPUT_LEN],
            in_start: 0,
            in_end: 0,
            output: Vec::new(),
            out_start: 0,
            last_active: now,
            partial_since: None,
            stalled_since: None,
            eof: false,
            read_closed: false,
            queued: false,
        }
    }

    /// Answers, writes and reads within the turn's budget.
    fn serve(&mut self, scratch: &mut [u8], turn: &mut Turn<'_>, read: &mut Instant, keepalive: u16) -> Next {
        let next = self.serve_inner(scratch, turn, read, keepalive);
        if self.in_start < self.in_end {
            self.partial_since.get_or_insert(turn.now);
        } else {
            self.partial_since = None;
        }
        next
    }

    fn serve_inner(&mut self, scratch: &mut [u8], turn: &mut Turn<'_>, read: &mut Instant, keepalive: u16) -> Next {
        let mut messages = 0;
        let mut reads = 0;
        // A read that filled less than the room it had emptied the socket (epoll(7): for a
        // stream, a short read means the input is exhausted), and bytes arriving after it raise
        // a new readiness event; reading again would only be a system call that says so.
        let mut drained = false;
        loop {
            while messages < MESSAGES_PER_TURN && self.pending_output() < OUTPUT_HIGH_WATER {
                let Some(message) = self.next_message() else {
                    break;
                };
                self.answer(message, scratch, turn, read, keepalive);
                messages += 1;
            }
            if self.flush(turn.now).is_err() {
                return Next::Close;
            }
            if self.pending_output() >= OUTPUT_HIGH_WATER {
                // The write hit WouldBlock: a writable event resumes this connection.
                return Next::Wait;
            }
            if self.complete_message().is_some() {
                if messages < MESSAGES_PER_TURN {
                    continue;
                }
                return Next::Again;
            }
            if self.eof {
                return if self.pending_output() == 0 && self.outstanding == 0 {
                    Next::Close
                } else {
                    Next::Wait
                };
            }
            if drained && !self.read_closed {
                return Next::Wait;
            }
            if reads == READS_PER_TURN {
                return Next::Again;
            }
            reads += 1;
            match self.read() {
                Ok((0, _)) => self.eof = true,
                Ok((n, room)) => drained = n < room,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
    }

    /// Takes one message through the pipeline and queues its reply, timed (and its signing
    /// charged) by a clock reading of its own, `read` being the turn's last one: a
    /// connection's replies leave one by one.
    fn answer(
        &mut self,
        message: Range<usize>,
        scratch: &mut [u8],
        turn: &mut Turn<'_>,
        read: &mut Instant,
        keepalive: u16,
    ) {
        let client = Client::Tcp {
            conn: self.slot,
            serial: self.serial,
            peer: self.client,
        };
        let query = &self.input[message];
        match turn.query(client, &self.peer, keepalive, query, &mut scratch[PREFIX_LEN..]) {
            Fate::Reply(len) => {
                let len = len.min(MAX_MESSAGE_LEN);
                scratch[..PREFIX_LEN].copy_from_slice(&(len as u16).to_be_bytes());
                self.output.extend_from_slice(&scratch[..PREFIX_LEN + len]);
                let now = Instant::now();
                turn.stats.took(now.saturating_duration_since(turn.now), 1);
                let mut signing = turn.signing.borrow_mut();
                if signing.signed() {
                    signing.charge(now.saturating_duration_since(*read));
                }
                *read = now;
            }
            Fate::Later => self.outstanding += 1,
            Fate::Nothing => {}
        }
        self.last_active = turn.now;
    }

    /// The byte range of the complete message at the front of the input, if there is one.
    fn complete_message(&self) -> Option<Range<usize>> {
        let buffered = &self.input[self.in_start..self.in_end];
        let len = usize::from(u16::from_be_bytes([*buffered.first()?, *buffered.get(1)?]));
        let start = self.in_start + PREFIX_LEN;
        (buffered.len() >= PREFIX_LEN + len).then_some(start..start + len)
    }

    /// Takes the complete message at the front of the input, if there is one.
    fn next_message(&mut self) -> Option<Range<usize>> {
        let message = self.complete_message()?;
        self.in_start = message.end;
        self.partial_since = None;
        Some(message)
    }

    /// One read into the free room of the input buffer, made large enough for the message
    /// whose length prefix has arrived; the bytes read, and the room they had.
    fn read(&mut self) -> io::Result<(usize, usize)> {
        if self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
            if self.input.len() > INITIAL_INPUT_LEN {
                self.input = vec![0; INITIAL_INPUT_LEN];
            }
        } else if self.in_start > 0 {
            self.input.copy_within(self.in_start..self.in_end, 0);
            self.in_end -= self.in_start;
            self.in_start = 0;
        }
        if self.in_end >= PREFIX_LEN {
            let needed = PREFIX_LEN + usize::from(u16::from_be_bytes([self.input[0], self.input[1]]));
            if needed > self.input.len() {
                self.input.resize(needed, 0);
            }
        }
        let room = self.input.len() - self.in_end;
        let n = self.stream.read(&mut self.input[self.in_end..])?;
        self.in_end += n;
        Ok((n, room))
    }

    fn pending_output(&self) -> usize {
        self.output.len() - self.out_start
    }

    /// Writes pending replies until done or the socket is full.
    fn flush(&mut self, now: Instant) -> io::Result<()> {
        let mut progressed = false;
        while self.out_start < self.output.len() {
            match self.stream.write(&self.output[self.out_start..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.out_start += n;
                    progressed = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.out_start == self.output.len() {
            self.out_start = 0;
            self.output.clear();
            if self.output.capacity() > OUTPUT_HIGH_WATER {
                self.output = Vec::new();
            }
            self.stalled_since = None;
        } else if progressed || self.stalled_since.is_none() {
            self.stalled_since = Some(now);
        }
        Ok(())
    }

    /// Whether the kernel holds bytes of this connection not read yet, or its close: a peek,
    /// so that nothing is taken from the stream. An error counts as nothing to lose.
    fn has_unread_bytes(&self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.peek(&mut byte), Ok(1))
    }

    /// Nothing received, nothing to send, nothing awaited upstream: only the idle timeout
    /// applies.
    fn is_idle(&self) -> bool {
        self.in_start == self.in_end && self.pending_output() == 0 && self.outstanding == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keepalive_is_in_units_of_100_ms() {
        assert_eq!(keepalive(Duration::from_secs(10)), 100);
        assert_eq!(keepalive(Duration::from_millis(250)), 2);
        assert_eq!(keepalive(Duration::from_secs(100_000)), u16::MAX);
    }

    #[test]
    fn defaults_follow_rfc_7766_guidance() {
        let c = TcpConfig::default();
        assert!(c.io_timeout < c.idle_timeout);
        assert_eq!(c.max_per_client, 0, "no per-address cap unless asked for");
    }
}
