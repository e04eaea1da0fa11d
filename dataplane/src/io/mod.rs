//! The packet I/O seam: how a worker receives and sends batches of datagrams.
//!
//! Workers see datagrams only through [`PacketIo`] and [`Datagrams`], so that one packet path
//! can replace another without touching answering: the kernel's UDP sockets ([`KernelUdp`])
//! or AF_XDP sockets ([`XdpUdp`], Linux). A path lends the worker the batches it works in,
//! in the path's own memory: the worker reads a query where the path received it and writes
//! the answer where the path sends it from, so nothing is copied in between.

mod udp;
#[cfg(all(target_os = "linux", not(skyline_portable_io)))]
mod xdp;

pub use udp::KernelUdp;
#[cfg(all(target_os = "linux", not(skyline_portable_io)))]
pub use xdp::{XdpAttachment, XdpStartError, XdpUdp};

pub use crate::sys::{Datagrams, Peer};

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source and sink of datagrams, registered in a worker's `mio::Poll`.
///
/// Readiness is edge-triggered: after a readable event the worker calls [`PacketIo::recv`]
/// until it reports `WouldBlock` (or comes back to it on its next turn without waiting).
pub trait PacketIo: mio::event::Source {
    /// A batch to receive queries into, in this path's memory.
    fn query_batch(&mut self) -> Datagrams;

    /// A batch to write replies into, in the memory this path sends from.
    fn reply_batch(&mut self) -> Datagrams;

    /// Receives as many waiting datagrams as fit into `batch`, replacing its contents. Returns
    /// the number received or an error; `WouldBlock` means none was waiting.
    fn recv(&mut self, batch: &mut Datagrams) -> io::Result<usize>;

    /// Sends every datagram of `batch`, retrying what the path did not take at once as long as
    /// that makes progress, reports what could not be sent, and empties the batch for the next
    /// replies.
    fn send(&mut self, batch: &mut Datagrams) -> SendReport;

    /// Whether replies are still on their way out and need the worker to come back without
    /// waiting for a packet (a path that sends only when asked to).
    fn busy(&mut self) -> bool {
        false
    }

    /// Stops new flows from reaching this path while what it already holds stays readable and
    /// replies can still go out: the last step of a drain, so that closing it loses nothing.
    fn retire(&mut self) -> io::Result<()>;

    /// Lets the process an in-place upgrade started take this path over, for a path that only
    /// one process at a time may read (an AF_XDP socket's rings): gives back what `lent` (the
    /// path's batches) hold and stops reading. Replies still to come (from an upstream) leave
    /// through the kernel afterwards. Nothing to do for a kernel socket, which both processes
    /// read at once.
    fn hand_over(&mut self, lent: &mut [&mut Datagrams]) {
        let _ = lent;
    }
}

/// How to serve UDP DNS through AF_XDP (`--xdp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpConfig {
    /// The interface whose receive queues are served; the served address must be one of its.
    pub interface: String,
    /// How the steering program is attached.
    pub mode: XdpMode,
    /// UMEM frames per receive queue (4 KiB each), half for queries and half for replies.
    pub frames: u32,
    /// Serve on kernel sockets alone, with a logged warning, when AF_XDP cannot start.
    pub fallback: bool,
}

/// What `--check-config` can tell of `config` without attaching anything: the interface
/// exists, `addr` can be steered to, `workers` fits its receive queues. Returns how many queues
/// (workers) would be served.
pub fn check_xdp(config: &XdpConfig, addr: std::net::SocketAddr, workers: usize) -> io::Result<u32> {
    #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
    return XdpAttachment::check(config, addr, workers)
        .map(|(_, queues)| queues)
        .map_err(io::Error::from);
    #[cfg(not(all(target_os = "linux", not(skyline_portable_io))))]
    {
        let _ = (config, addr, workers);
        Err(io::Error::new(io::ErrorKind::Unsupported, "AF_XDP needs Linux"))
    }
}

/// How the XDP program is attached to the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// The driver's own XDP hook where it has one, else the generic one.
    #[default]
    Auto,
    /// The driver's hook (zero-copy where the driver offers it); an error where there is none.
    Native,
    /// The generic hook every interface has, after the kernel has built its packet buffer:
    /// slower, copy mode only.
    Generic,
}

impl std::str::FromStr for XdpMode {
    type Err = String;

    fn from_str(s: &str) -> Result<XdpMode, String> {
        match s {
            "auto" => Ok(XdpMode::Auto),
            "native" => Ok(XdpMode::Native),
            "generic" => Ok(XdpMode::Generic),
            other => Err(format!("unknown XDP mode {other:?}: expected auto, native or generic")),
        }
    }
}

impl std::fmt::Display for XdpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            XdpMode::Auto => "auto",
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        })
    }
}

/// One receive queue's counters: written by its worker after every batch, read by the
/// metrics; with the kernel's own counters of the socket, read when asked.
#[derive(Debug, Default)]
pub struct QueueStats {
    /// The receive queue.
    pub queue: u32,
    /// Whether the driver moves frames without copying them.
    pub zero_copy: bool,
    socket: Option<std::os::fd::OwnedFd>,
    pub(super) received: AtomicU64,
    pub(super) sent: AtomicU64,
    pub(super) sent_by_kernel: AtomicU64,
    pub(super) dropped_malformed: AtomicU64,
    pub(super) dropped_tx_full: AtomicU64,
    pub(super) dropped_kernel_send: AtomicU64,
}

/// A queue's counters at one moment.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueTotals {
    /// The receive queue.
    pub queue: u32,
    /// Whether the driver moves frames without copying them.
    pub zero_copy: bool,
    /// Queries received through the socket.
    pub received: u64,
    /// Replies sent through the socket.
    pub sent: u64,
    /// Replies larger than the MTU, sent through the kernel instead.
    pub sent_by_kernel: u64,
    /// Frames that were not UDP to the served address (dropped).
    pub dropped_malformed: u64,
    /// Replies dropped because the transmit ring stayed full.
    pub dropped_tx_full: u64,
    /// Large replies the kernel socket refused.
    pub dropped_kernel_send: u64,
    /// Packets the kernel dropped for the socket for want of a fill-ring frame to put them in,
    /// or because they did not fit one (`XDP_STATISTICS`).
    pub kernel_rx_dropped: u64,
    /// Packets the kernel dropped because the receive ring was full; not among the others
    /// (the full `xdp_statistics` keeps them apart).
    pub kernel_rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub kernel_fill_ring_empty: u64,
    /// Invalid descriptors the kernel saw on the rings.
    pub kernel_invalid_descs: u64,
}

impl QueueStats {
    /// Counters for `queue`, whose socket's kernel counters are read through `socket`.
    pub fn new(queue: u32, zero_copy: bool, socket: Option<std::os::fd::OwnedFd>) -> QueueStats {
        QueueStats {
            queue,
            zero_copy,
            socket,
            ..QueueStats::default()
        }
    }

    /// The counters now, the kernel's included.
    pub fn totals(&self) -> QueueTotals {
        let kernel = self.kernel_counts();
        QueueTotals {
            queue: self.queue,
            zero_copy: self.zero_copy,
            received: self.received.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            sent_by_kernel: self.sent_by_kernel.load(Ordering::Relaxed),
            dropped_malformed: self.dropped_malformed.load(Ordering::Relaxed),
            dropped_tx_full: self.dropped_tx_full.load(Ordering::Relaxed),
            dropped_kernel_send: self.dropped_kernel_send.load(Ordering::Relaxed),
            kernel_rx_dropped: kernel.0,
            kernel_rx_ring_full: kernel.1,
            kernel_fill_ring_empty: kernel.2,
            kernel_invalid_descs: kernel.3,
        }
    }

    /// The kernel's counters of the socket: dropped, of those for a full receive ring, times
    /// the fill ring was empty, invalid descriptors. Zero where they cannot be read.
    fn kernel_counts(&self) -> (u64, u64, u64, u64) {
        #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
        if let Some(Ok(k)) = self
            .socket
            .as_ref()
            .map(|fd| crate::sys::xdp::kernel_counts(std::os::fd::AsFd::as_fd(fd)))
        {
            return (k.rx_dropped, k.rx_ring_full, k.rx_fill_ring_empty, k.invalid_descs);
        }
        let _ = &self.socket;
        (0, 0, 0, 0)
    }
}

/// What became of a batch handed to [`PacketIo::send`].
#[derive(Debug, Default)]
pub struct SendReport {
    /// Datagrams the kernel accepted.
    pub sent: usize,
    /// Datagrams given up on.
    pub dropped: usize,
    /// Of `dropped`, those given up on because the send buffer stayed full (the rest the kernel
    /// refused one by one: an unreachable or invalid peer). Counted apart, so that a flood that
    /// outruns the link shows as such rather than as bad peers.
    pub full: usize,
    /// The last error seen, for a (rate-limited) log line.
    pub error: Option<io::Error>,
}

/// The packet paths a worker may have, one per listening address: a kernel socket, or an
/// AF_XDP socket on one receive queue. One type, so that a worker's paths sit in one list and
/// a call costs a branch, not an indirect call.
#[derive(Debug)]
pub enum Path {
    /// A kernel UDP socket.
    Kernel(KernelUdp),
    /// An AF_XDP socket.
    #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
    Xdp(Box<XdpUdp>),
}

macro_rules! each_path {
    ($self:expr, $io:ident => $call:expr) => {
        match $self {
            Path::Kernel($io) => $call,
            #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
            Path::Xdp($io) => $call,
        }
    };
}

impl PacketIo for Path {
    fn query_batch(&mut self) -> Datagrams {
        each_path!(self, io => io.query_batch())
    }

    fn reply_batch(&mut self) -> Datagrams {
        each_path!(self, io => io.reply_batch())
    }

    #[inline]
    fn recv(&mut self, batch: &mut Datagrams) -> io::Result<usize> {
        each_path!(self, io => io.recv(batch))
    }

    #[inline]
    fn send(&mut self, batch: &mut Datagrams) -> SendReport {
        each_path!(self, io => io.send(batch))
    }

    fn busy(&mut self) -> bool {
        each_path!(self, io => io.busy())
    }

    fn hand_over(&mut self, lent: &mut [&mut Datagrams]) {
        each_path!(self, io => io.hand_over(lent))
    }

    fn retire(&mut self) -> io::Result<()> {
        each_path!(self, io => io.retire())
    }
}

impl mio::event::Source for Path {
    fn register(&mut self, registry: &mio::Registry, token: mio::Token, interests: mio::Interest) -> io::Result<()> {
        each_path!(self, io => io.register(registry, token, interests))
    }

    fn reregister(&mut self, registry: &mio::Registry, token: mio::Token, interests: mio::Interest) -> io::Result<()> {
        each_path!(self, io => io.reregister(registry, token, interests))
    }

    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        each_path!(self, io => io.deregister(registry))
    }
}
