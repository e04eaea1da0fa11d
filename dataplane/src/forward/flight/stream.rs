//! One persistent connection to an upstream, plain TCP or TLS, that carries many tries at once
//! (RFC 7766 §6.2.1.1): queries are written one after the other as they come, each framed by
//! its 2-byte length, and replies are read in whatever order the upstream sends them and
//! matched to their try by ID ([`Stream::waiting_for`]); the machine then checks the question.
//! Two tries on one connection never share an ID ([`Stream::can_take`]), so a reply names one
//! try. Under TLS, rustls's `ClientConnection` does the record layer without I/O of its own:
//! bytes go between it and the socket in [`Stream::progress`], so the worker's event loop
//! drives the handshake as it drives the rest. Queries written before the handshake ends wait
//! inside rustls and leave only once the certificate is checked: a server that fails the
//! check never sees one.

use super::machine::{SendError, TryId};
use crate::forward::Tls;
use crate::sys;
use mio::net::TcpStream;
use rustls::ClientConnection;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Bytes read from a connection per read call.
const READ_LEN: usize = 4096;

/// A persistent connection to an upstream and the tries waiting on it.
pub(super) struct Stream {
    tcp: TcpStream,
    tls: Option<ClientConnection>,
    connected: bool,
    /// Framed queries not written yet (plain TCP; under TLS they are handed to rustls at once).
    out: Vec<u8>,
    written: usize,
    /// Bytes read and not yet taken as messages.
    input: Vec<u8>,
    /// Tries whose reply has not come, with their query ID.
    waiting: Vec<(TryId, u16)>,
    /// Replies it carried.
    answered: u64,
    /// When a query last went out or a reply last came in.
    active: Instant,
    /// When the first query went out that the upstream has sent no byte since.
    unheard_since: Option<Instant>,
    /// A write failed: the connection is of no more use.
    broken: bool,
}

/// What a connection has after being driven.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Progress {
    /// Waiting for readiness.
    Pending,
    /// A whole message of this length is in the buffer handed in, its prefix gone.
    Message(usize),
    /// The connection failed, was closed, or its TLS handshake failed.
    Closed,
}

impl Stream {
    /// Starts connecting to `upstream`, under `tls` when given.
    pub(super) fn open(upstream: SocketAddr, tls: Option<&Tls>, now: Instant) -> Result<Stream, SendError> {
        let tls = tls
            .map(|tls| tls.connect(upstream))
            .transpose()
            .map_err(|e| SendError::Upstream(io::Error::other(e)))?
            .map(|mut tls| {
                // Queries wait inside rustls until the handshake ends; the pipeline bounds them.
                tls.set_buffer_limit(None);
                tls
            });
        let tcp = TcpStream::connect(upstream).map_err(|e| {
            if sys::is_resource_exhaustion(&e) {
                SendError::Local(e)
            } else {
                SendError::Upstream(e)
            }
        })?;
        // Queries are small and each one waits for its answer: Nagle would hold the second of
        // two back until the first is acknowledged.
        let _ = tcp.set_nodelay(true);
        Ok(Stream {
            tcp,
            tls,
            connected: false,
            out: Vec::new(),
            written: 0,
            input: Vec::new(),
            waiting: Vec::new(),
            answered: 0,
            active: now,
            unheard_since: None,
            broken: false,
        })
    }

    /// The socket, to register with the poll.
    pub(super) fn socket(&mut self) -> &mut TcpStream {
        &mut self.tcp
    }

    /// Whether a write failed: reading it will find it closed.
    pub(super) fn is_broken(&self) -> bool {
        self.broken
    }

    /// Tries waiting on it.
    pub(super) fn load(&self) -> usize {
        self.waiting.len()
    }

    /// Whether a try with query ID `query_id` may go on it: it is not broken and no try
    /// waiting on it has that ID.
    pub(super) fn can_take(&self, query_id: u16) -> bool {
        !self.broken && self.waiting.iter().all(|&(_, id)| id != query_id)
    }

    /// Whether it carried replies: a connection that did and then closes was closed by its
    /// upstream in the ordinary way, not refused.
    pub(super) fn has_answered(&self) -> bool {
        self.answered > 0
    }

    /// How long it has had nothing to wait for, if it has nothing.
    pub(super) fn idle_for(&self, now: Instant) -> Option<Duration> {
        self.waiting
            .is_empty()
            .then(|| now.saturating_duration_since(self.active))
    }

    /// Whether the upstream has sent nothing for `stall` since a query went out on it: a
    /// handshake that never ends, a server wedged on this connection. Tries that time out
    /// one after the other leave it without one waiting now and then, so the time counts from
    /// the first query not heard back from, not from the tries waiting now.
    pub(super) fn is_stalled(&self, now: Instant, stall: Duration) -> bool {
        self.unheard_since
            .is_some_and(|since| now.saturating_duration_since(since) >= stall)
    }

    /// Gives it up: the next [`Stream::progress`] finds it closed.
    pub(super) fn give_up(&mut self) {
        self.broken = true;
    }

    /// Queues try `id`'s `query` (ID `query_id`) and writes what it can.
    pub(super) fn send(&mut self, id: TryId, query_id: u16, query: &[u8], now: Instant) {
        self.unheard_since.get_or_insert(now);
        self.waiting.push((id, query_id));
        self.active = now;
        let prefix = (query.len() as u16).to_be_bytes();
        match self.tls.as_mut() {
            Some(tls) => {
                let mut writer = tls.writer();
                if writer
                    .write_all(&prefix)
                    .and_then(|()| writer.write_all(query))
                    .is_err()
                {
                    self.broken = true;
                }
            }
            None => {
                self.out.extend_from_slice(&prefix);
                self.out.extend_from_slice(query);
            }
        }
        if self.connected && !self.flush() {
            self.broken = true;
        }
    }

    /// The try waiting for the reply with ID `query_id`.
    pub(super) fn waiting_for(&self, query_id: u16) -> Option<TryId> {
        self.waiting.iter().find(|&&(_, id)| id == query_id).map(|&(t, _)| t)
    }

    /// Try `id` ended: a reply for it is no longer awaited.
    pub(super) fn forget(&mut self, id: TryId) {
        if let Some(i) = self.waiting.iter().position(|&(t, _)| t == id) {
            self.waiting.swap_remove(i);
        }
    }

    /// Takes the tries waiting on it, once it is closed.
    pub(super) fn take_waiting(&mut self, into: &mut Vec<TryId>) {
        into.extend(self.waiting.drain(..).map(|(t, _)| t));
    }

    /// Finishes connecting, goes on with the handshake, writes what is queued and reads until
    /// a whole message is in, moving it into `message`.
    pub(super) fn progress(&mut self, message: &mut [u8], now: Instant) -> Progress {
        if self.broken {
            return Progress::Closed;
        }
        if !self.connected {
            match self.tcp.take_error() {
                Ok(None) => {}
                Ok(Some(_)) | Err(_) => return Progress::Closed,
            }
            match self.tcp.peer_addr() {
                Ok(_) => self.connected = true,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Progress::Pending,
                Err(_) => return Progress::Closed,
            }
        }
        if !self.flush() {
            return Progress::Closed;
        }
        loop {
            if let Some(len) = take_frame(&mut self.input, message) {
                self.answered += 1;
                self.active = now;
                return Progress::Message(len);
            }
            match self.fill() {
                Fill::More => self.unheard_since = None,
                Fill::Blocked => return Progress::Pending,
                Fill::Closed => return Progress::Closed,
            }
        }
    }

    /// Writes what is queued until done or the socket is full; false when the connection
    /// failed.
    fn flush(&mut self) -> bool {
        match self.tls.as_mut() {
            Some(tls) => {
                while tls.wants_write() {
                    match tls.write_tls(&mut self.tcp) {
                        Ok(0) => return false,
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => return false,
                    }
                }
                true
            }
            None => {
                while self.written < self.out.len() {
                    match self.tcp.write(&self.out[self.written..]) {
                        Ok(0) => return false,
                        Ok(n) => self.written += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => return false,
                    }
                }
                self.out.clear();
                self.written = 0;
                true
            }
        }
    }

    /// Reads more of the upstream's bytes into `input`.
    fn fill(&mut self) -> Fill {
        let mut chunk = [0u8; READ_LEN];
        let Some(tls) = self.tls.as_mut() else {
            return match self.tcp.read(&mut chunk) {
                Ok(0) => Fill::Closed,
                Ok(n) => {
                    self.input.extend_from_slice(&chunk[..n]);
                    Fill::More
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Fill::Blocked,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => Fill::More,
                Err(_) => Fill::Closed,
            };
        };
        match tls.reader().read(&mut chunk) {
            Ok(0) => return Fill::Closed,
            Ok(n) => {
                self.input.extend_from_slice(&chunk[..n]);
                return Fill::More;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return Fill::Closed,
        }
        match tls.read_tls(&mut self.tcp) {
            Ok(0) => Fill::Closed,
            Ok(_) => {
                if let Err(e) = tls.process_new_packets() {
                    tracing::debug!(error = %e, "TLS with an upstream failed");
                    // The alert that says why, if the socket takes it.
                    let _ = tls.write_tls(&mut self.tcp);
                    return Fill::Closed;
                }
                // The handshake's next flight, or the queries it held back.
                if self.flush() {
                    Fill::More
                } else {
                    Fill::Closed
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Fill::Blocked,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Fill::More,
            Err(_) => Fill::Closed,
        }
    }
}

enum Fill {
    More,
    Blocked,
    Closed,
}

/// Moves the first whole length-prefixed message of `input` into `message` and returns its
/// length; `None` while it is not all in. What follows it stays in `input` for the next call.
pub(super) fn take_frame(input: &mut Vec<u8>, message: &mut [u8]) -> Option<usize> {
    let prefix = input.get(..2)?;
    let len = usize::from(u16::from_be_bytes([prefix[0], prefix[1]]));
    let body = input.get(2..2 + len)?;
    message.get_mut(..len)?.copy_from_slice(body);
    input.drain(..2 + len);
    Some(len)
}
