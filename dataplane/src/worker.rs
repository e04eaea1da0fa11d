//! The per-core workers: each one a thread with its own UDP sockets, TCP listeners (one of each
//! per listening address), upstream sockets and mio poll, answering from the published snapshot
//! and, for names outside the zones, from its cache and upstreams.
//!
//! A worker's loop: wait for readiness (or for the next TCP or upstream timeout), then receive
//! UDP datagrams a batch at a time, answer the batch from one snapshot load into preallocated
//! reply slots, send the replies with one call, read upstream answers and send the replies that
//! waited for them, and give TCP its turn. Each kind of work has a budget per turn; when a
//! budget runs out the loop polls without waiting instead of sleeping, so nothing starves and
//! edge-triggered readiness is never lost.

use crate::answer::Transport;
use crate::cookie::CookieCell;
use crate::dnssec::denial::Signing;
use crate::forward::{Client, ForwardConfig, Forwarding, Resolver};
use crate::io::{Datagrams, KernelUdp, PacketIo, Path, XdpConfig};
use crate::observe::{Observation, ObserveConfig, ObserveReader};
use crate::pipeline::{Fate, Pipeline};
use crate::rewrite::Plugins;
use crate::rrl::{Limiter, RrlConfig};
use crate::snapshot::SnapshotCell;
use crate::stats::{RateLimitedWarning, StatsReader, Totals, WorkerStats};
use crate::sys;
use crate::tcp::TcpServer;
use arc_swap::Cache;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

pub use crate::tcp::TcpConfig;

/// Token of a worker's first UDP socket; the sockets of further listening addresses follow.
/// Apart from connection tokens (counting up from 3) and the listeners' and upstream sockets'
/// (higher still).
const UDP_BASE: usize = 1 << (usize::BITS - 4);
/// Token of the waker that tells a worker its state changed.
const WAKER: Token = Token(1);

/// What the workers are asked to do, in this order: answer; close the TCP listeners and finish
/// what is in flight, still answering UDP; stop at once.
const SERVING: u8 = 0;
const CLOSING: u8 = 1;
const STOPPING: u8 = 2;
/// How often a drain looks whether every worker has finished.
const DRAIN_POLL: Duration = Duration::from_millis(5);
/// How long a retired UDP socket is still read before it closes: datagrams the kernel steered
/// to it just before the retirement may reach its queue a moment after.
const RETIRE_QUIET: Duration = Duration::from_millis(20);

/// UDP batches handled per turn before TCP gets its go (`BATCH_SIZE` datagrams each).
const UDP_BATCHES_PER_TURN: usize = 16;
/// How long a worker derives the wall clock from its monotonic readings before it reads the
/// wall clock again (see [`WallClock`]).
const WALL_CLOCK_REREAD: Duration = Duration::from_secs(1);
/// Readiness events taken per poll.
const EVENTS_PER_POLL: usize = 1024;
/// How many times binding to an ephemeral port is tried: the port the kernel picked for UDP
/// may already be taken for TCP.
const EPHEMERAL_BIND_ATTEMPTS: usize = 16;

/// Longest a worker sleeps with nothing to do: on waking it reloads the snapshot cell, letting
/// go of a replaced snapshot so that the retiring thread can free it (see `snapshot::publish`).
const IDLE_WAKE: Duration = Duration::from_secs(1);

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

/// What a server does beyond answering on one address: more listening addresses (a node-local
/// cache on a link-local address and a cluster IP), and forwarding with a cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Further addresses to serve UDP and TCP on, beside [`ServerConfig::addr`].
    pub extra_addrs: Vec<SocketAddr>,
    /// Forwarding of names outside the zones; `None` (or no upstream) answers them REFUSED.
    pub forward: Option<ForwardConfig>,
    /// dnstap, the query log and the top talkers; all off by default.
    pub observe: ObserveConfig,
    /// The secrets of DNS Cookies (RFC 7873); `None` ignores COOKIE options.
    pub cookies: Option<CookieCell>,
    /// Response rate limiting of UDP replies; off by default.
    pub rrl: RrlConfig,
    /// UDP to [`ServerConfig::addr`] through AF_XDP sockets instead of the kernel's stack.
    pub xdp: Option<XdpConfig>,
    /// `rewrite`, `template`, `whoami` and `chaos` (docs/rewrite.md); `None` leaves answering
    /// as it is.
    pub plugins: Option<Arc<Plugins>>,
}

/// An AF_XDP attachment handed over in an upgrade, where the platform has one.
#[cfg(all(target_os = "linux", not(skyline_portable_io)))]
pub type XdpHandover = crate::sys::xdp::Handover;
/// An AF_XDP attachment handed over in an upgrade: none where the platform has no AF_XDP.
#[cfg(not(all(target_os = "linux", not(skyline_portable_io))))]
pub type XdpHandover = std::convert::Infallible;

/// Takes the AF_XDP attachment the skyline this one replaces handed over
/// ([`sys::UPGRADE_XDP`]), if any. Call once, at start, before other threads exist.
pub fn take_xdp_handover() -> io::Result<Option<XdpHandover>> {
    #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
    return crate::sys::xdp::take_handover().map_err(io::Error::other);
    #[cfg(not(all(target_os = "linux", not(skyline_portable_io))))]
    return Ok(None);
}

/// The AF_XDP attachment a server holds, where the platform has one.
#[cfg(all(target_os = "linux", not(skyline_portable_io)))]
type Attachment = crate::io::XdpAttachment;
#[cfg(not(all(target_os = "linux", not(skyline_portable_io))))]
type Attachment = std::convert::Infallible;

/// The running data plane: worker threads answering on its addresses until shut down.
#[derive(Debug)]
pub struct Server {
    forwarding: Option<Forwarding>,
    cookies: Option<CookieCell>,
    local_addrs: Vec<SocketAddr>,
    stats: StatsReader,
    /// What the dnstap and query-log writers and the top talkers count.
    observe: ObserveReader,
    wakers: Vec<Waker>,
    orders: Arc<Orders>,
    threads: Vec<JoinHandle<()>>,
    /// The dnstap and query-log writers, which end once every worker has.
    writers: Vec<JoinHandle<()>>,
    /// A descriptor of every listening socket, for handing them over in an upgrade; closed
    /// with the server.
    handover: Sockets,
    /// The AF_XDP program and sockets, when serving through them: dropped (detached) after
    /// the workers have stopped.
    xdp: Option<Attachment>,
}

/// What the server asks of its workers, read by each at every turn.
#[derive(Debug, Default)]
struct Orders {
    /// `SERVING`, `CLOSING` or `STOPPING`; only ever raised.
    state: AtomicU8,
    /// Set by a drain whose UDP sockets no other process holds: see [`AfterDrain::Retire`].
    retire: AtomicBool,
    /// Set by a drain after an upgrade: see [`AfterDrain::HandedOver`].
    hand_over: AtomicBool,
}

/// Whether a drain's UDP sockets are taken out of their SO_REUSEPORT groups before they close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterDrain {
    /// Another process holds the same sockets (the service manager that activated them): they
    /// must stay as they are, and only this process's descriptors close.
    Shared,
    /// The skyline an upgrade started holds the same sockets, as for [`AfterDrain::Shared`],
    /// and takes over the AF_XDP sockets, whose rings only one process may use: each worker
    /// lets go of its AF_XDP socket at once, and the new process goes on reading it.
    HandedOver,
    /// Only this process holds them, while other processes may have sockets of their own on
    /// the port (the pod an update starts beside this one): once everything else is done each
    /// is retired, so the kernel steers new flows to the others, read until quiet, then closed.
    /// Closing it at once would drop the datagrams queued on it since the last read.
    Retire,
}

impl Server {
    /// Binds every socket before returning (so bind errors surface to the caller), then
    /// spawns the worker threads. Names outside the zones are REFUSED.
    pub fn start(config: ServerConfig, snapshots: SnapshotCell) -> io::Result<Server> {
        Server::start_with(config, Options::default(), snapshots)
    }

    /// As [`Server::start`], with more listening addresses and forwarding.
    pub fn start_with(config: ServerConfig, options: Options, snapshots: SnapshotCell) -> io::Result<Server> {
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        let xdp = attach_xdp(&config, &options, None)?;
        let count = xdp_queues(&xdp).unwrap_or_else(|| worker_count(config.workers, &cores));
        let mut addrs = vec![config.addr];
        addrs.extend(options.extra_addrs.iter().copied());
        let mut local_addrs = Vec::with_capacity(addrs.len());
        let mut per_worker: Vec<Sockets> = (0..count).map(|_| Vec::with_capacity(addrs.len())).collect();
        for addr in addrs {
            let (bound, sockets) = bind_all(addr, count)?;
            local_addrs.push(bound);
            for (worker, pair) in per_worker.iter_mut().zip(sockets) {
                worker.push(pair);
            }
        }
        Server::spawn(config, &options, snapshots, &cores, local_addrs, per_worker, xdp)
    }

    /// As [`Server::start_with`], serving on sockets handed over at start (socket activation,
    /// or the sockets of the skyline this one replaces) instead of binding `config.addr` and
    /// `options.extra_addrs`. An address's sockets are dealt out over the workers; a worker
    /// left without one reads a socket another worker reads too (through its own descriptor),
    /// and a worker may read several, so that every socket handed over is read.
    ///
    /// `xdp` is the AF_XDP attachment the replaced skyline handed over, taken over instead of
    /// attaching anew when `options.xdp` asks for AF_XDP.
    pub fn start_inherited(
        config: ServerConfig,
        options: Options,
        pairs: Vec<sys::ListenPair>,
        xdp: Option<XdpHandover>,
        snapshots: SnapshotCell,
    ) -> io::Result<Server> {
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        let xdp = attach_xdp(&config, &options, xdp)?;
        let count = xdp_queues(&xdp).unwrap_or_else(|| worker_count(config.workers, &cores));
        let mut by_addr: Vec<(SocketAddr, Sockets)> = Vec::new();
        for pair in pairs {
            match by_addr.iter_mut().find(|(addr, _)| *addr == pair.addr) {
                Some((_, sockets)) => sockets.push((pair.udp, pair.tcp)),
                None => by_addr.push((pair.addr, vec![(pair.udp, pair.tcp)])),
            }
        }
        let local_addrs = by_addr.iter().map(|(addr, _)| *addr).collect();
        let mut per_worker: Vec<Sockets> = (0..count).map(|_| Vec::new()).collect();
        for (_, sockets) in by_addr {
            for worker in sockets.len()..count {
                let (udp, tcp) = &sockets[worker % sockets.len()];
                per_worker[worker].push((udp.try_clone()?, tcp.try_clone()?));
            }
            for (i, pair) in sockets.into_iter().enumerate() {
                per_worker[i % count].push(pair);
            }
        }
        Server::spawn(config, &options, snapshots, &cores, local_addrs, per_worker, xdp)
    }

    /// Marks every listening socket inheritable by the next process this one starts (or, with
    /// `false`, no longer) and returns their descriptors: for handing them to the skyline that
    /// replaces this one, through [`sys::UPGRADE_FDS`].
    pub fn set_handover_inheritable(&self, inheritable: bool) -> io::Result<Vec<std::os::fd::RawFd>> {
        use std::os::fd::AsFd as _;
        use std::os::fd::AsRawFd as _;
        let mut fds = Vec::with_capacity(self.handover.len() * 2);
        for (udp, tcp) in &self.handover {
            sys::set_inheritable(udp.as_fd(), inheritable)?;
            sys::set_inheritable(tcp.as_fd(), inheritable)?;
            fds.push(udp.as_raw_fd());
            fds.push(tcp.as_raw_fd());
        }
        Ok(fds)
    }

    /// Marks the AF_XDP program's link and map and every queue's socket, UMEM and release
    /// pipe inheritable by the next process this one starts (or, with `false`, no longer) and
    /// returns the value of [`sys::UPGRADE_XDP`] naming them; `None` without AF_XDP.
    pub fn set_xdp_handover_inheritable(&self, inheritable: bool) -> io::Result<Option<String>> {
        #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
        return self
            .xdp
            .as_ref()
            .map(|xdp| xdp.set_handover_inheritable(inheritable))
            .transpose();
        #[cfg(not(all(target_os = "linux", not(skyline_portable_io))))]
        {
            let _ = inheritable;
            Ok(self.xdp.as_ref().map(|never| match *never {}))
        }
    }

    fn spawn(
        config: ServerConfig,
        options: &Options,
        snapshots: SnapshotCell,
        cores: &[core_affinity::CoreId],
        local_addrs: Vec<SocketAddr>,
        per_worker: Vec<Sockets>,
        mut xdp: Option<Attachment>,
    ) -> io::Result<Server> {
        let count = per_worker.len();
        let mut handover = Vec::new();
        for (udp, tcp) in per_worker.iter().flatten() {
            handover.push((udp.try_clone()?, tcp.try_clone()?));
        }
        let forward = options.forward.as_ref().filter(|f| f.is_enabled());
        let now = Instant::now();
        let forwarding = forward.map(|f| Forwarding::new(f, now));
        let orders = Arc::new(Orders::default());
        let mut workers = Vec::with_capacity(count);
        let mut wakers = Vec::with_capacity(count);
        let stats: Vec<Arc<WorkerStats>> = (0..count).map(|_| Arc::default()).collect();
        let (observation, observers) = Observation::start(&options.observe, &stats)?;
        for (n, ((sockets, worker_stats), mut observer)) in
            per_worker.into_iter().zip(&stats).zip(observers).enumerate()
        {
            let poll = Poll::new()?;
            wakers.push(Waker::new(poll.registry(), WAKER)?);
            let mut ios = Vec::with_capacity(sockets.len() + 1);
            let mut listeners = Vec::with_capacity(sockets.len());
            for (udp, listener) in sockets {
                if ios.is_empty() {
                    ios.extend(xdp_path(&mut xdp, n, &udp)?);
                }
                ios.push(Path::Kernel(KernelUdp::new(udp)?));
                listener.set_nonblocking(true)?;
                listeners.push(TcpListener::from_std(listener));
            }
            for (i, io) in ios.iter_mut().enumerate() {
                poll.registry().register(io, Token(UDP_BASE + i), Interest::READABLE)?;
            }
            let mut tcp = TcpServer::new(listeners, config.tcp, now);
            tcp.register(poll.registry())?;
            let upstream_tap = observer.as_mut().and_then(|o| o.take_upstream_tap());
            let resolver = forwarding
                .as_ref()
                .map(|forwarding| {
                    Resolver::new(
                        count,
                        forwarding,
                        poll.registry(),
                        Arc::clone(worker_stats),
                        upstream_tap,
                    )
                })
                .transpose()?;
            let forwarding = resolver.is_some();
            let pipeline = Pipeline {
                snapshots: Cache::new(Arc::clone(&snapshots)),
                cookies: options.cookies.as_ref().map(CookieCell::reader),
                rrl: Limiter::new(&options.rrl, random_seed(), now),
                plugins: options.plugins.clone(),
                stats: Arc::clone(worker_stats),
                rotation: 0,
                signing: RefCell::new(Signing::new()),
                observer,
                resolver,
                seen: (0, 0),
            };
            workers.push(Worker::new(poll, ios, forwarding, tcp, pipeline, Arc::clone(&orders)));
        }
        let local_addr = local_addrs[0];
        let mut server = Server {
            forwarding,
            cookies: options.cookies.clone(),
            local_addrs,
            stats: StatsReader::new(stats, xdp_stats(&xdp)),
            observe: observation.reader,
            wakers,
            orders,
            threads: Vec::with_capacity(count),
            writers: observation.threads,
            handover,
            xdp,
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
        tracing::info!(
            addr = %local_addr,
            workers = count,
            pinned = config.pin,
            forwarding = forward.is_some(),
            "data plane serving"
        );
        Ok(server)
    }

    /// The first address actually bound (with the port the kernel chose when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addrs[0]
    }

    /// Where a reload hands in new cookie secrets; `None` when the server does no cookies.
    pub fn cookies(&self) -> Option<CookieCell> {
        self.cookies.clone()
    }

    /// Where a reload hands in new forwarding settings and a data source the stub zones it
    /// reads (SkyDNS `dns/stub/` records); `None` when the server does not forward.
    pub fn forwarding(&self) -> Option<Forwarding> {
        self.forwarding.clone()
    }

    /// Every address bound, in the order given.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// Every worker's counters, and the dnstap and query-log writers', summed now.
    pub fn stats(&self) -> Totals {
        let mut totals = self.stats.totals();
        self.observe.add_to(&mut totals);
        totals
    }

    /// A handle on the workers' counters that outlives this borrow: for the metrics endpoint,
    /// which runs on the control plane's runtime while the server is owned elsewhere.
    pub fn stats_reader(&self) -> StatsReader {
        self.stats.clone()
    }

    /// A handle on what the observers count (the dnstap and query-log writers, the top
    /// talkers), for the metrics endpoint beside [`Server::stats_reader`].
    pub fn observe_reader(&self) -> ObserveReader {
        self.observe.clone()
    }

    /// Stops the workers and waits for them to finish; their sockets and connections close.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    /// Ends serving without dropping what was already asked: the TCP listeners close, each
    /// query in flight upstream gets its answer, and each open TCP connection is closed once
    /// the queries sent on it before the close are answered and written. UDP is answered until
    /// then (the sockets close with the workers), so that datagrams the kernel still steers to
    /// them are not lost; `after` says whether they are retired first. Past `limit`, what is
    /// left is abandoned. Returns whether everything finished within it.
    pub fn drain(mut self, limit: Duration, after: AfterDrain) -> bool {
        // Closed first, so that the listeners really close with the workers' descriptors.
        self.handover.clear();
        self.orders.retire.store(after == AfterDrain::Retire, Ordering::Relaxed);
        self.orders
            .hand_over
            .store(after == AfterDrain::HandedOver, Ordering::Relaxed);
        self.set_state(CLOSING);
        let deadline = Instant::now() + limit;
        let finished = loop {
            if self.threads.iter().all(JoinHandle::is_finished) {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
            std::thread::sleep(DRAIN_POLL);
        };
        self.stop_and_join();
        finished
    }

    fn set_state(&self, state: u8) {
        self.orders.state.fetch_max(state, Ordering::AcqRel);
        for waker in &self.wakers {
            if let Err(e) = waker.wake() {
                tracing::warn!(error = %e, "waking a worker failed");
            }
        }
    }

    fn stop_and_join(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.set_state(STOPPING);
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                tracing::error!("a worker thread panicked");
            }
        }
        for thread in self.writers.drain(..) {
            if thread.join().is_err() {
                tracing::error!("a dnstap or query-log writer panicked");
            }
        }
        // Detached only now: until the workers stopped, their queues still had queries.
        let _ = self.xdp.take();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

type Sockets = Vec<(std::net::UdpSocket, std::net::TcpListener)>;

/// A seed for a worker's rate-limiting hash, from the kernel's generator; a fixed one if that
/// fails, which only makes the buckets' layout guessable.
fn random_seed() -> u64 {
    let mut seed = [0u8; 8];
    if getrandom::getrandom(&mut seed).is_err() {
        tracing::warn!("no random seed for rate limiting; a fixed one is used");
    }
    u64::from_le_bytes(seed)
}

/// Attaches AF_XDP when asked to, to the first address (its port as given: the program must
/// know it before anything is bound). When it cannot start, the start fails with the cause,
/// or with `fallback` goes on with kernel sockets alone after a warning.
fn attach_xdp(config: &ServerConfig, options: &Options, handed: Option<XdpHandover>) -> io::Result<Option<Attachment>> {
    let Some(xdp) = &options.xdp else {
        return Ok(None);
    };
    #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
    let attached = match handed {
        Some(handover) => crate::io::XdpAttachment::adopt(xdp, config.addr, handover),
        None => crate::io::XdpAttachment::attach(xdp, config.addr, config.workers),
    }
    .map_err(io::Error::from);
    #[cfg(not(all(target_os = "linux", not(skyline_portable_io))))]
    let attached: io::Result<Attachment> = {
        let _ = (config, handed);
        Err(io::Error::new(io::ErrorKind::Unsupported, "AF_XDP needs Linux"))
    };
    match attached {
        Ok(attachment) => Ok(Some(attachment)),
        Err(e) if xdp.fallback => {
            tracing::warn!(error = %e, "AF_XDP could not start; serving on kernel sockets alone (--xdp-fallback)");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The counters of every AF_XDP queue served.
fn xdp_stats(xdp: &Option<Attachment>) -> Vec<Arc<crate::io::QueueStats>> {
    #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
    return xdp.as_ref().map(Attachment::stats).unwrap_or_default();
    #[cfg(not(all(target_os = "linux", not(skyline_portable_io))))]
    return xdp.as_ref().map(|never| match *never {}).unwrap_or_default();
}

/// The AF_XDP path of worker `n` (its receive queue's), when serving through AF_XDP; `udp` is
/// the worker's kernel socket on the same address, through which replies larger than the MTU
/// leave.
fn xdp_path(xdp: &mut Option<Attachment>, n: usize, udp: &std::net::UdpSocket) -> io::Result<Option<Path>> {
    #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
    if let Some(attachment) = xdp.as_mut() {
        return Ok(attachment
            .serve(n, udp.try_clone()?)?
            .map(|path| Path::Xdp(Box::new(path))));
    }
    let _ = (xdp, n, udp);
    Ok(None)
}

/// Workers an AF_XDP attachment needs, one per queue it serves.
fn xdp_queues(xdp: &Option<Attachment>) -> Option<usize> {
    #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
    return xdp.as_ref().map(Attachment::queues);
    #[cfg(not(all(target_os = "linux", not(skyline_portable_io))))]
    return xdp.as_ref().map(|never| match *never {});
}

/// Workers to run: as asked, or one per core this process may run on.
fn worker_count(asked: usize, cores: &[core_affinity::CoreId]) -> usize {
    match asked {
        0 if !cores.is_empty() => cores.len(),
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
}

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

/// One worker: its poll, its packet paths (one per listening address), its TCP side, and the
/// one pipeline every query goes through, whichever of them it came on.
struct Worker<P: PacketIo> {
    poll: Poll,
    /// The packet paths, one per listening address (and the AF_XDP socket of the worker's
    /// queue), each with the batches it lent.
    paths: Vec<Listening<P>>,
    tcp: TcpServer,
    /// The steps around answering, with the state they keep (counters, rate limiter,
    /// observers, the forwarding side).
    pipeline: Pipeline,
    orders: Arc<Orders>,
    /// The listeners are closed: the worker finishes what it holds, then ends.
    closed: bool,
    /// When the retired UDP sockets close, if they have been retired.
    retired_until: Option<Instant>,
    /// The wall clock the answers of a batch are given.
    wall: WallClock,
    recv_warning: RateLimitedWarning,
    send_warning: RateLimitedWarning,
}

/// One packet path of a worker and the batches it lent: queries are read and replies written
/// in the path's own memory.
struct Listening<P: PacketIo> {
    io: P,
    /// Datagrams may be waiting (or replies still leaving): serve it without waiting.
    ready: bool,
    queries: Datagrams,
    replies: Datagrams,
    /// Replies that waited for an upstream, when forwarding.
    late: Option<Datagrams>,
}

impl<P: PacketIo> Listening<P> {
    fn new(mut io: P, forwarding: bool) -> Listening<P> {
        Listening {
            queries: io.query_batch(),
            replies: io.reply_batch(),
            late: forwarding.then(|| io.reply_batch()),
            // Datagrams may have arrived between binding and registering: look before waiting.
            ready: true,
            io,
        }
    }
}

impl<P: PacketIo> Worker<P> {
    /// A worker on the packet paths `io` (with a batch for late replies on each when
    /// `forwarding`), the TCP side `tcp`, answering through `pipeline`.
    fn new(
        poll: Poll,
        io: Vec<P>,
        forwarding: bool,
        tcp: TcpServer,
        pipeline: Pipeline,
        orders: Arc<Orders>,
    ) -> Worker<P> {
        Worker {
            poll,
            paths: io.into_iter().map(|io| Listening::new(io, forwarding)).collect(),
            tcp,
            pipeline,
            orders,
            closed: false,
            retired_until: None,
            wall: WallClock::new(Instant::now()),
            recv_warning: RateLimitedWarning::default(),
            send_warning: RateLimitedWarning::default(),
        }
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(EVENTS_PER_POLL);
        loop {
            let busy = self.paths.iter().any(|path| path.ready)
                || self.tcp.has_work()
                || self.pipeline.resolver.as_ref().is_some_and(Resolver::has_work);
            let timeout = if busy {
                Some(Duration::ZERO)
            } else {
                let upstream = self.pipeline.resolver.as_mut().and_then(Resolver::next_deadline);
                let deadline = [self.tcp.next_deadline(), upstream, self.retired_until]
                    .into_iter()
                    .flatten()
                    .min();
                let wait = deadline.map_or(IDLE_WAKE, |at| at.saturating_duration_since(Instant::now()));
                Some(wait.min(IDLE_WAKE))
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(error = %e, "worker poll failed; the worker stops");
                return;
            }
            match self.orders.state.load(Ordering::Acquire) {
                SERVING => {}
                CLOSING if !self.closed => self.close_listeners(),
                CLOSING => {}
                _ => return,
            }
            for event in &events {
                match event.token() {
                    WAKER => {}
                    token if Resolver::owns(token) => {
                        if let Some(resolver) = self.pipeline.resolver.as_mut() {
                            resolver.on_event(token);
                        }
                    }
                    token => match token.0.checked_sub(UDP_BASE).and_then(|i| self.paths.get_mut(i)) {
                        Some(path) => path.ready = true,
                        None => self.tcp.on_event(token, event.is_read_closed()),
                    },
                }
            }
            if let Some(resolver) = self.pipeline.resolver.as_mut() {
                resolver.follow_plan();
            }
            for socket in 0..self.paths.len() {
                if self.paths[socket].ready {
                    self.paths[socket].ready = self.udp_turn(socket);
                }
            }
            let now = Instant::now();
            let wall = self.wall.at(now);
            self.resolver_turn(now, wall);
            self.tcp.turn(self.poll.registry(), &mut self.pipeline.turn(now, wall));
            let signing = self.pipeline.signing.get_mut();
            if signing.signed() {
                // A reply that waited for an upstream signed, and no TCP reply since read the
                // clock: the turn is charged as one batch.
                signing.charge(now.elapsed());
            }
            self.tcp.sweep(self.poll.registry(), &self.pipeline.stats, now);
            if let Some(observer) = self.pipeline.observer.as_mut() {
                observer.publish(now);
            }
            if self.closed && self.finished() && self.udp_done(now) {
                return;
            }
        }
    }

    /// Once everything else is done: whether the UDP sockets may close. When they are to be
    /// retired, that happens now, and they are read for [`RETIRE_QUIET`] more.
    fn udp_done(&mut self, now: Instant) -> bool {
        if !self.orders.retire.load(Ordering::Relaxed) {
            return true;
        }
        match self.retired_until {
            Some(until) => now >= until && !self.paths.iter().any(|path| path.ready),
            None => {
                for path in &mut self.paths {
                    if let Err(e) = path.io.retire() {
                        tracing::debug!(error = %e, "retiring a UDP socket failed; it closes as it is");
                    }
                    path.ready = true;
                }
                self.retired_until = Some(now + RETIRE_QUIET);
                false
            }
        }
    }

    /// Closes the TCP listeners. The UDP sockets are read and answered on until the worker
    /// ends: they must stay open to send the replies that wait for an upstream, and while one
    /// is open the kernel keeps steering datagrams to it (another process's sockets on the same
    /// port share the flows with it), which would be lost unread.
    fn close_listeners(&mut self) {
        self.closed = true;
        self.tcp.close_listeners(self.poll.registry());
        if self.orders.hand_over.load(Ordering::Relaxed) {
            for path in &mut self.paths {
                let Listening {
                    io,
                    queries,
                    replies,
                    late,
                    ..
                } = path;
                let mut lent: Vec<&mut Datagrams> = vec![queries, replies];
                lent.extend(late.as_mut());
                io.hand_over(&mut lent);
                *queries = io.query_batch();
                *replies = io.reply_batch();
                if let Some(late) = late {
                    *late = io.reply_batch();
                }
            }
        }
    }

    /// While closed: closes the TCP connections with nothing left to do, and tells whether
    /// nothing is left at all.
    fn finished(&mut self) -> bool {
        self.tcp.close_finished(self.poll.registry());
        self.tcp.is_empty() && self.pipeline.resolver.as_ref().is_none_or(|r| r.in_flight() == 0)
    }

    /// Receives and answers up to a turn's worth of batches on listening socket `socket`;
    /// returns whether datagrams may still be waiting. A batch that did not fill up and sent a
    /// question upstream ends the turn at once: the socket was empty, and an upstream on the
    /// same core gets it sooner, the kernel signalling what arrives meanwhile to the
    /// edge-triggered poll. Otherwise the socket is read until empty, which costs fewer
    /// instructions per answer than another turn of the loop.
    fn udp_turn(&mut self, socket: usize) -> bool {
        for _ in 0..UDP_BATCHES_PER_TURN {
            let path = &mut self.paths[socket];
            match path.io.recv(&mut path.queries) {
                Ok(n) => {
                    self.pipeline.stats.udp_batches.incr();
                    let forwarded = self.answer_batch(socket);
                    if forwarded && n < sys::BATCH_SIZE {
                        return self.paths[socket].io.busy();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.paths[socket].io.busy(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.pipeline.stats.udp_receive_errors.incr();
                    if let Some(suppressed) = self.recv_warning.allow(Instant::now()) {
                        tracing::warn!(error = %e, suppressed, "receiving UDP datagrams failed");
                    }
                }
            }
        }
        true
    }

    /// Answers every received datagram through the pipeline, from one snapshot load, and sends
    /// the replies at once. Queries that go upstream are answered later, from
    /// [`Worker::resolver_turn`]; returns whether there was one.
    fn answer_batch(&mut self, socket: usize) -> bool {
        let Worker {
            pipeline,
            paths,
            send_warning,
            wall,
            ..
        } = self;
        let Listening {
            io, queries, replies, ..
        } = &mut paths[socket];
        let now = Instant::now();
        let mut turn = pipeline.turn(now, wall.at(now));
        let stats = turn.stats;
        if let Some(observer) = turn.observer.as_deref_mut() {
            observer.batch_received();
        }
        let mut forwarded = false;
        let mut answered = 0;
        for i in 0..queries.len() {
            let Some((query, peer)) = queries.get(i) else {
                break;
            };
            if replies.is_full() {
                // Only a path that lends fewer frames than a batch gets here: send what is
                // written to get fresh ones.
                answered += replies.len();
                send(io, replies, stats, send_warning);
            }
            let Some(out) = replies.free_slot() else {
                // Received, with no frame to answer into.
                stats.request(Transport::Udp, query.len());
                stats.udp_send_failures.incr();
                continue;
            };
            match turn.query(Client::Udp { socket, peer }, peer, 0, query, out) {
                Fate::Reply(len) => replies.commit(peer, len),
                Fate::Later => forwarded = true,
                Fate::Nothing => {}
            }
        }
        answered += replies.len();
        if !replies.is_empty() {
            send(io, replies, stats, send_warning);
        }
        let signing = pipeline.signing.get_mut();
        if answered > 0 || signing.signed() {
            // One clock read serves the latency counter and the signing budget: a batch whose
            // answers signed is charged whole (docs/dnssec.md, "Cost").
            let took = now.elapsed();
            if answered > 0 {
                pipeline.stats.took(took, answered as u64);
            }
            signing.charge(took);
        }
        forwarded
    }

    /// Lets the resolver read upstream answers and fire its timers, and sends the replies that
    /// waited for them, as the pipeline lets them leave: UDP ones in batches per listening
    /// socket, TCP ones to their connection.
    fn resolver_turn(&mut self, now: Instant, wall: SystemTime) {
        let Worker {
            pipeline,
            tcp,
            paths,
            send_warning,
            ..
        } = self;
        if pipeline.resolver.is_none() {
            return;
        }
        let mut turn = pipeline.turn(now, wall);
        let stats = turn.stats;
        turn.late_replies(|client, reply| match client {
            Client::Udp { socket, peer } => {
                let Some(Listening {
                    io, late: Some(batch), ..
                }) = paths.get_mut(socket)
                else {
                    return;
                };
                if batch.is_full() {
                    send(io, batch, stats, send_warning);
                }
                let pushed = batch.push_with(&peer, |out| {
                    let len = reply.len().min(out.len());
                    out[..len].copy_from_slice(&reply[..len]);
                    Some(len)
                });
                if !pushed {
                    stats.udp_send_failures.incr();
                }
            }
            Client::Tcp { conn, serial, .. } => tcp.deliver(conn, serial, reply, now),
        });
        for path in paths.iter_mut() {
            if let Some(batch) = path.late.as_mut().filter(|batch| !batch.is_empty()) {
                send(&mut path.io, batch, stats, send_warning);
            }
        }
        if let Some(resolver) = pipeline.resolver.as_mut() {
            resolver.tidy(now);
        }
    }
}

/// The wall clock as a worker's answers see it (cookie timestamps, signature validity): derived
/// from the monotonic reading each batch already takes, and read again once
/// [`WALL_CLOCK_REREAD`] has passed, so that a batch pays no second clock read and a clock the
/// operator sets is followed within that time.
struct WallClock {
    /// The monotonic reading `wall` was read with.
    read_at: Instant,
    wall: SystemTime,
}

impl WallClock {
    fn new(now: Instant) -> WallClock {
        WallClock {
            read_at: now,
            wall: SystemTime::now(),
        }
    }

    /// The wall clock at the monotonic reading `now`.
    fn at(&mut self, now: Instant) -> SystemTime {
        let since = now.saturating_duration_since(self.read_at);
        if since < WALL_CLOCK_REREAD {
            return self.wall + since;
        }
        *self = WallClock::new(now);
        self.wall
    }
}

/// Sends a batch of replies (which empties it), counting and (rate-limited) logging what the
/// path refused.
fn send<P: PacketIo>(io: &mut P, batch: &mut Datagrams, stats: &WorkerStats, warning: &mut RateLimitedWarning) {
    let report = io.send(batch);
    if report.dropped > 0 {
        stats.udp_send_failures.add(report.dropped as u64);
        stats.udp_send_buffer_full.add(report.full as u64);
        if let Some(suppressed) = warning.allow(Instant::now()) {
            let error = report.error.map(|e| e.to_string()).unwrap_or_default();
            tracing::warn!(%error, dropped = report.dropped, suppressed, "sending UDP replies failed");
        }
    }
}
