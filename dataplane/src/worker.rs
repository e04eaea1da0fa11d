//! The per-core workers: each one a thread with its own UDP socket, TCP listener and mio poll,
//! answering from the published snapshot.
//!
//! A worker's loop: wait for readiness (or for the next TCP timeout), then receive UDP
//! datagrams a batch at a time, answer the batch from one snapshot load into preallocated reply
//! slots, send the replies with one call, and give TCP its turn. Each kind of work has a budget
//! per turn; when a budget runs out the loop polls without waiting instead of sleeping, so
//! nothing starves and edge-triggered readiness is never lost.

use crate::answer::{answer, Context, Outcome, Transport};
use crate::io::{Datagrams, KernelUdp, PacketIo};
use crate::snapshot::{Snapshot, SnapshotCell};
use crate::stats::{RateLimitedWarning, Totals, WorkerStats};
use crate::sys;
use crate::tcp::{TcpServer, Turn};
use arc_swap::Cache;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use crate::tcp::TcpConfig;

/// Token of a worker's UDP socket.
const UDP: Token = Token(0);
/// Token of the waker that tells a worker to stop.
const WAKER: Token = Token(1);

/// Size of each receive slot. Queries are far smaller; a larger datagram is cut to this size
/// and answered FORMERR at worst.
const QUERY_SLOT_LEN: usize = 4096;
/// Size of each reply slot. UDP replies never exceed the advertised 1232 bytes (the answer
/// path truncates to the client's size); the slot leaves room above that so the limit stays
/// the answer path's to enforce.
const REPLY_SLOT_LEN: usize = 4096;
/// UDP batches handled per turn before TCP gets its go (`BATCH_SIZE` datagrams each).
const UDP_BATCHES_PER_TURN: usize = 16;
/// Readiness events taken per poll.
const EVENTS_PER_POLL: usize = 1024;
/// How many times binding to an ephemeral port is tried: the port the kernel picked for UDP
/// may already be taken for TCP.
const EPHEMERAL_BIND_ATTEMPTS: usize = 16;

/// How to run the data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerConfig {
    /// Address to serve UDP and TCP on; port 0 picks one free port for both.
    pub addr: SocketAddr,
    /// Worker threads; 0 means one per core this process may run on.
    pub workers: usize,
    /// Pin each worker to a core, so its sockets' data stays in that core's caches.
    pub pin: bool,
    /// DNS over TCP limits and timeouts.
    pub tcp: TcpConfig,
}

/// The running data plane: worker threads answering on one address until shut down.
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    stats: Vec<Arc<WorkerStats>>,
    wakers: Vec<Waker>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Binds every socket before returning (so bind errors surface to the caller), then
    /// spawns the worker threads.
    pub fn start(config: ServerConfig, snapshots: SnapshotCell) -> io::Result<Server> {
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        let count = match config.workers {
            0 if !cores.is_empty() => cores.len(),
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        };
        let (local_addr, sockets) = bind_all(config.addr, count)?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::with_capacity(count);
        let mut wakers = Vec::with_capacity(count);
        let mut stats = Vec::with_capacity(count);
        let now = Instant::now();
        for (udp, listener) in sockets {
            let poll = Poll::new()?;
            wakers.push(Waker::new(poll.registry(), WAKER)?);
            let mut io = KernelUdp::new(udp)?;
            poll.registry().register(&mut io, UDP, Interest::READABLE)?;
            listener.set_nonblocking(true)?;
            let mut tcp = TcpServer::new(TcpListener::from_std(listener), config.tcp, now);
            tcp.register(poll.registry())?;
            let worker_stats = Arc::new(WorkerStats::default());
            stats.push(Arc::clone(&worker_stats));
            workers.push(Worker::new(
                poll,
                io,
                tcp,
                Cache::new(Arc::clone(&snapshots)),
                worker_stats,
                Arc::clone(&stop),
            ));
        }
        let mut server = Server {
            local_addr,
            stats,
            wakers,
            stop,
            threads: Vec::with_capacity(count),
        };
        for (n, worker) in workers.into_iter().enumerate() {
            let core = if config.pin {
                cores.get(n % cores.len().max(1)).copied()
            } else {
                None
            };
            let thread = std::thread::Builder::new()
                .name(format!("skyline-worker-{n}"))
                .spawn(move || {
                    if let Some(core) = core {
                        if !core_affinity::set_for_current(core) {
                            tracing::warn!(worker = n, core = core.id, "pinning the worker to its core failed");
                        }
                    }
                    worker.run();
                })?;
            server.threads.push(thread);
        }
        tracing::info!(addr = %local_addr, workers = count, pinned = config.pin, "data plane serving");
        Ok(server)
    }

    /// The address actually bound (with the port the kernel chose when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Every worker's counters, summed now.
    pub fn stats(&self) -> Totals {
        let mut totals = Totals::default();
        for worker in &self.stats {
            worker.add_to(&mut totals);
        }
        totals
    }

    /// Stops the workers and waits for them to finish; their sockets and connections close.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if self.stop.swap(true, Ordering::AcqRel) {
            return;
        }
        for waker in &self.wakers {
            if let Err(e) = waker.wake() {
                tracing::warn!(error = %e, "waking a worker to stop failed");
            }
        }
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                tracing::error!("a worker thread panicked");
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

type Sockets = Vec<(std::net::UdpSocket, std::net::TcpListener)>;

/// Binds `count` UDP sockets and TCP listeners to one address. With port 0 the first UDP
/// socket picks the port and the rest follow it; if TCP cannot have that port, another is
/// tried.
fn bind_all(addr: SocketAddr, count: usize) -> io::Result<(SocketAddr, Sockets)> {
    let attempts = if addr.port() == 0 { EPHEMERAL_BIND_ATTEMPTS } else { 1 };
    let mut attempt = 1;
    loop {
        match bind_once(addr, count) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && attempt < attempts => attempt += 1,
            result => return result,
        }
    }
}

fn bind_once(addr: SocketAddr, count: usize) -> io::Result<(SocketAddr, Sockets)> {
    let first = sys::udp_socket(addr)?;
    let bound = first.local_addr()?;
    let mut sockets = Vec::with_capacity(count);
    sockets.push((first, sys::tcp_listener(bound)?));
    for _ in 1..count {
        sockets.push((sys::udp_socket(bound)?, sys::tcp_listener(bound)?));
    }
    Ok((bound, sockets))
}

/// One worker: its poll, its packet path, its TCP side, its reusable buffers.
struct Worker<P: PacketIo> {
    poll: Poll,
    io: P,
    tcp: TcpServer,
    snapshots: Cache<SnapshotCell, Arc<Snapshot>>,
    stats: Arc<WorkerStats>,
    stop: Arc<AtomicBool>,
    queries: Datagrams,
    replies: Datagrams,
    rotation: u32,
    recv_warning: RateLimitedWarning,
    send_warning: RateLimitedWarning,
}

impl<P: PacketIo> Worker<P> {
    fn new(
        poll: Poll,
        io: P,
        tcp: TcpServer,
        snapshots: Cache<SnapshotCell, Arc<Snapshot>>,
        stats: Arc<WorkerStats>,
        stop: Arc<AtomicBool>,
    ) -> Worker<P> {
        Worker {
            poll,
            io,
            tcp,
            snapshots,
            stats,
            stop,
            queries: Datagrams::new(QUERY_SLOT_LEN),
            replies: Datagrams::new(REPLY_SLOT_LEN),
            rotation: 0,
            recv_warning: RateLimitedWarning::default(),
            send_warning: RateLimitedWarning::default(),
        }
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(EVENTS_PER_POLL);
        // Datagrams may have arrived between binding and registering: look before waiting.
        let mut udp_ready = true;
        loop {
            let timeout = if udp_ready || self.tcp.has_work() {
                Some(Duration::ZERO)
            } else {
                self.tcp
                    .next_deadline()
                    .map(|at| at.saturating_duration_since(Instant::now()))
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(error = %e, "worker poll failed; the worker stops");
                return;
            }
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            for event in &events {
                match event.token() {
                    UDP => udp_ready = true,
                    WAKER => {}
                    token => self.tcp.on_event(token),
                }
            }
            if udp_ready {
                udp_ready = self.udp_turn();
            }
            let now = Instant::now();
            let mut turn = Turn {
                snapshot: self.snapshots.load(),
                stats: &self.stats,
                rotation: &mut self.rotation,
                now,
            };
            self.tcp.turn(self.poll.registry(), &mut turn);
            self.tcp.sweep(self.poll.registry(), &self.stats, now);
        }
    }

    /// Receives and answers up to a turn's worth of batches; returns whether datagrams may
    /// still be waiting.
    fn udp_turn(&mut self) -> bool {
        for _ in 0..UDP_BATCHES_PER_TURN {
            match self.io.recv(&mut self.queries) {
                Ok(_) => {
                    self.stats.udp_batches.incr();
                    self.answer_batch();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.stats.udp_receive_errors.incr();
                    if let Some(suppressed) = self.recv_warning.allow(Instant::now()) {
                        tracing::warn!(error = %e, suppressed, "receiving UDP datagrams failed");
                    }
                }
            }
        }
        true
    }

    /// Answers every received datagram from one snapshot load and sends the replies at once.
    fn answer_batch(&mut self) {
        let Worker {
            snapshots,
            stats,
            queries,
            replies,
            rotation,
            ..
        } = self;
        let snapshot = snapshots.load();
        replies.clear();
        for i in 0..queries.len() {
            let Some((query, peer)) = queries.get(i) else {
                break;
            };
            let ctx = Context {
                transport: Transport::Udp,
                rotation: *rotation,
                keepalive: 0,
            };
            *rotation = rotation.wrapping_add(1);
            replies.push_with(peer, |out| {
                let outcome = answer(query, snapshot, &ctx, out);
                stats.query(Transport::Udp, &outcome);
                match outcome {
                    Outcome::Reply(reply) => Some(reply.len),
                    Outcome::Drop(_) => None,
                }
            });
        }
        if replies.is_empty() {
            return;
        }
        let report = self.io.send(&self.replies);
        if report.dropped > 0 {
            self.stats.udp_send_failures.add(report.dropped as u64);
            if let Some(suppressed) = self.send_warning.allow(Instant::now()) {
                let error = report.error.map(|e| e.to_string()).unwrap_or_default();
                tracing::warn!(%error, dropped = report.dropped, suppressed, "sending UDP replies failed");
            }
        }
    }
}
