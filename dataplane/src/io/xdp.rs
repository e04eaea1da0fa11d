//! The AF_XDP path: UDP DNS to one address of one interface, received and answered through an
//! AF_XDP socket per receive queue, past the kernel's network stack.
//!
//! [`XdpAttachment`] attaches the steering program to the interface and opens the socket of
//! each queue; each worker then serves its queue's as a [`XdpUdp`] ([`XdpAttachment::serve`])
//! beside its kernel sockets, which still get everything the program passes on (fragments,
//! other ports, ARP, ICMP) and, for the same address, TCP. A query is read where the kernel put
//! it in the shared frames and its answer written into the frame it leaves in.

use super::{Datagrams, PacketIo, QueueStats, SendReport, XdpConfig, XdpMode};
use crate::sys::xdp::{self, Handover, Interface, Local, Program, QueueFds, SocketConfig, XdpError, XdpSocket};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::io::{self, PipeReader, PipeWriter, Read};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a worker handing its socket over waits for the replies it gave the kernel to
/// leave: in copy mode the kernel sends them while it is asked to, within microseconds.
const HAND_OVER_PATIENCE: Duration = Duration::from_millis(500);
/// Slot length of the batches a path works in once its socket is handed over, as a kernel
/// socket's.
const KERNEL_SLOT_LEN: usize = 4096;

/// Why the AF_XDP path could not start: each names its cause for the operator.
#[derive(Debug, thiserror::Error)]
pub enum XdpStartError {
    /// The interface, the program or a socket failed.
    #[error("AF_XDP on {iface}: {source}")]
    Xdp {
        /// The interface asked for.
        iface: String,
        /// What failed.
        source: XdpError,
    },
    /// A socket of one queue failed.
    #[error("AF_XDP on {iface}: {source}")]
    Socket {
        /// The interface asked for.
        iface: String,
        /// What failed.
        source: xdp::SocketError,
    },
    /// The served address is not one the program can steer.
    #[error("--xdp {iface} needs --addr set to an IP address of {iface} (not {addr})")]
    Address {
        /// The interface asked for.
        iface: String,
        /// The address given.
        addr: SocketAddr,
    },
    /// The attachment handed over in an upgrade is not the one this process is configured for.
    #[error(
        "the upgraded process was handed AF_XDP on {handed_iface} for {handed_addr}, not on {iface} for {addr}: \
         an in-place upgrade keeps --xdp and --addr (restart to change them)"
    )]
    HandoverMismatch {
        /// The interface asked for.
        iface: String,
        /// The address asked for.
        addr: SocketAddr,
        /// The interface handed over.
        handed_iface: String,
        /// The address handed over.
        handed_addr: SocketAddr,
    },
    /// A pipe for handing a socket over could not be made.
    #[error("AF_XDP on {iface}: making the handover pipe of a queue failed: {source}")]
    Pipe {
        /// The interface asked for.
        iface: String,
        /// What failed.
        source: io::Error,
    },
    /// More workers were asked for than the interface has queues.
    #[error("--workers {workers} is more than the {queues} receive queues of {iface}: each worker serves one queue")]
    TooManyWorkers {
        /// The interface asked for.
        iface: String,
        /// Workers asked for.
        workers: usize,
        /// The interface's receive queues.
        queues: u32,
    },
}

impl From<XdpStartError> for io::Error {
    fn from(e: XdpStartError) -> io::Error {
        io::Error::other(e)
    }
}

/// The steering program attached to the interface, and the AF_XDP socket of every queue
/// served, opened before any worker starts so that every failure stops the start at once.
/// Dropping it detaches the program; so does the process's end, however it ends (the
/// attachment is a BPF link the process owns).
#[derive(Debug)]
pub struct XdpAttachment {
    iface: Interface,
    program: Program,
    addr: SocketAddr,
    sockets: Vec<Option<Queue>>,
    stats: Vec<Arc<QueueStats>>,
    /// What the process replacing this one in an upgrade takes, per queue.
    handover: Vec<QueueHandover>,
    /// Set once a worker has handed its socket over: the program then stays attached, held by
    /// the process that took it.
    handed_over: Arc<AtomicBool>,
}

/// One queue's socket before its worker takes it.
#[derive(Debug)]
struct Queue {
    socket: XdpSocket,
    /// Closed when the worker hands the socket over.
    successor: PipeWriter,
    /// The replaced process's pipe, closed once it let go of the socket; `None` for a socket
    /// this process opened.
    predecessor: Option<PipeReader>,
}

/// One queue's descriptors for the process replacing this one: this process's own copies, so
/// that they stay open whoever holds the socket.
#[derive(Debug)]
struct QueueHandover {
    queue: u32,
    /// How many of its UMEM's frames receive queries.
    receive_frames: u32,
    socket: OwnedFd,
    umem: OwnedFd,
    released: PipeReader,
}

impl XdpAttachment {
    /// Looks up the interface of `config`, settles how many workers serve it (one per receive
    /// queue: all of them when `workers` is 0), attaches the program for UDP to `addr` and
    /// opens the socket of each queue served.
    pub fn attach(config: &XdpConfig, addr: SocketAddr, workers: usize) -> Result<XdpAttachment, XdpStartError> {
        let (iface, count) = XdpAttachment::check(config, addr, workers)?;
        let name = || config.interface.clone();
        let fail = |source| XdpStartError::Xdp { iface: name(), source };
        let program = Program::attach(&iface, config.mode.into(), addr).map_err(fail)?;
        let mut attachment = XdpAttachment::new(iface, program, addr, count as usize);
        for queue in 0..count {
            let socket = XdpSocket::open(attachment.socket_config(queue, config.frames))
                .map_err(|source| XdpStartError::Socket { iface: name(), source })?;
            attachment.program.steer(queue, socket.as_fd()).map_err(fail)?;
            attachment
                .add(socket, None)
                .map_err(|source| XdpStartError::Pipe { iface: name(), source })?;
        }
        attachment.log("AF_XDP attached");
        Ok(attachment)
    }

    /// Takes over the attachment the process this one replaces handed over: its program stays
    /// attached and its sockets, with the queries waiting in them, become this process's. Each
    /// worker starts reading its socket once the old process has let go of it. The interface
    /// and address must be those of `config` and `addr`: an upgrade does not change them.
    pub fn adopt(config: &XdpConfig, addr: SocketAddr, handover: Handover) -> Result<XdpAttachment, XdpStartError> {
        let name = || config.interface.clone();
        if handover.iface != config.interface || handover.addr != addr {
            return Err(XdpStartError::HandoverMismatch {
                iface: name(),
                addr,
                handed_iface: handover.iface,
                handed_addr: handover.addr,
            });
        }
        let iface =
            Interface::by_name(&config.interface).map_err(|source| XdpStartError::Xdp { iface: name(), source })?;
        if iface.index != handover.ifindex {
            return Err(XdpStartError::Xdp {
                iface: name(),
                source: XdpError::UnknownInterface { name: name() },
            });
        }
        let program = Program::adopt(&iface, handover.mode, handover.link, handover.map);
        let mut attachment = XdpAttachment::new(iface, program, addr, handover.queues.len());
        for handed in handover.queues {
            let socket = XdpSocket::adopt(
                handed.socket,
                handed.umem,
                attachment.socket_config(handed.queue, config.frames),
                handover.receive_frames,
            )
            .map_err(|source| XdpStartError::Socket { iface: name(), source })?;
            let predecessor = PipeReader::from(handed.released);
            socket2::SockRef::from(&predecessor)
                .set_nonblocking(true)
                .map_err(|source| XdpStartError::Pipe { iface: name(), source })?;
            attachment
                .add(socket, Some(predecessor))
                .map_err(|source| XdpStartError::Pipe { iface: name(), source })?;
        }
        attachment.log("AF_XDP taken over from the replaced process");
        Ok(attachment)
    }

    fn new(iface: Interface, program: Program, addr: SocketAddr, count: usize) -> XdpAttachment {
        XdpAttachment {
            iface,
            program,
            addr,
            sockets: Vec::with_capacity(count),
            stats: Vec::with_capacity(count),
            handover: Vec::with_capacity(count),
            handed_over: Arc::default(),
        }
    }

    fn socket_config(&self, queue: u32, frames: u32) -> SocketConfig {
        SocketConfig {
            ifindex: self.iface.index,
            queue,
            frames,
            force_copy: self.program.mode() == xdp::Mode::Generic,
            mtu: self.iface.mtu,
            local: Local {
                mac: self.iface.mac,
                addr: self.addr,
            },
        }
    }

    /// Adds the next queue's socket, with the pipe that tells the process replacing this one
    /// when it may take the socket.
    fn add(&mut self, socket: XdpSocket, predecessor: Option<PipeReader>) -> io::Result<()> {
        let queue = self.stats.len() as u32;
        let (released, successor) = io::pipe()?;
        self.handover.push(QueueHandover {
            queue,
            receive_frames: socket.receiving(),
            socket: socket.as_fd().try_clone_to_owned()?,
            umem: socket.umem_file().try_clone_to_owned()?,
            released,
        });
        self.stats.push(Arc::new(QueueStats::new(
            queue,
            socket.zero_copy(),
            socket.as_fd().try_clone_to_owned().ok(),
        )));
        self.sockets.push(Some(Queue {
            socket,
            successor,
            predecessor,
        }));
        Ok(())
    }

    fn log(&self, what: &str) {
        tracing::info!(
            iface = %self.iface.name,
            mode = %self.program.mode(),
            queues = self.sockets.len(),
            zero_copy = self.stats.iter().all(|s| s.zero_copy),
            addr = %self.addr,
            "{what}"
        );
    }

    /// Marks the descriptors the process replacing this one takes over inheritable across
    /// `exec` (or, with `false`, no longer), and returns the value of
    /// [`xdp::UPGRADE_XDP`] that names them.
    pub fn set_handover_inheritable(&self, inheritable: bool) -> io::Result<String> {
        let (link, map) = self.program.descriptors();
        let queues: Vec<QueueFds<'_>> = self
            .handover
            .iter()
            .map(|q| QueueFds {
                queue: q.queue,
                socket: q.socket.as_fd(),
                umem: q.umem.as_fd(),
                released: q.released.as_fd(),
            })
            .collect();
        let fds = [link, map]
            .into_iter()
            .chain(queues.iter().flat_map(|q| [q.socket, q.umem, q.released]));
        for fd in fds {
            crate::sys::set_inheritable(fd, inheritable)?;
        }
        // Every queue's socket is opened, or was taken over, alike.
        let receive_frames = self.handover.first().map_or(0, |q| q.receive_frames);
        Ok(xdp::encode(
            &self.iface,
            self.program.mode(),
            self.addr,
            link,
            map,
            receive_frames,
            &queues,
        ))
    }

    /// Everything [`XdpAttachment::attach`] can know before attaching: the interface exists,
    /// the address can be steered to, the workers fit its queues. Returns the interface and the
    /// number of queues to serve.
    pub fn check(config: &XdpConfig, addr: SocketAddr, workers: usize) -> Result<(Interface, u32), XdpStartError> {
        let name = || config.interface.clone();
        let iface =
            Interface::by_name(&config.interface).map_err(|source| XdpStartError::Xdp { iface: name(), source })?;
        if addr.ip().is_unspecified() || addr.port() == 0 {
            return Err(XdpStartError::Address { iface: name(), addr });
        }
        // Queries to an address of another interface never arrive on this one: the program
        // would steer nothing and every query would go to the kernel sockets unnoticed.
        match Interface::holding(addr.ip()) {
            Ok(holder) if holder.index == iface.index => {}
            Ok(_) | Err(XdpError::NotLocal { .. }) => return Err(XdpStartError::Address { iface: name(), addr }),
            Err(source) => return Err(XdpStartError::Xdp { iface: name(), source }),
        }
        let count = match workers {
            0 => iface.queues,
            n if n > iface.queues as usize => {
                return Err(XdpStartError::TooManyWorkers {
                    iface: name(),
                    workers: n,
                    queues: iface.queues,
                })
            }
            n => n as u32,
        };
        Ok((iface, count))
    }

    /// Workers the attachment needs: one per queue served.
    pub fn queues(&self) -> usize {
        self.sockets.len()
    }

    /// The path of queue `queue`, for its worker; `kernel` is a kernel UDP socket bound to the
    /// served address, through which replies larger than the MTU leave. `None` once taken.
    pub fn serve(&mut self, queue: usize, kernel: std::net::UdpSocket) -> io::Result<Option<XdpUdp>> {
        let Some(Queue {
            socket,
            successor,
            predecessor,
        }) = self.sockets.get_mut(queue).and_then(Option::take)
        else {
            return Ok(None);
        };
        kernel.set_nonblocking(true)?;
        Ok(Some(XdpUdp {
            socket,
            kernel,
            stats: Arc::clone(&self.stats[queue]),
            predecessor,
            successor: Some(successor),
            handed_over: Arc::clone(&self.handed_over),
        }))
    }

    /// Every queue's counters, for the metrics.
    pub fn stats(&self) -> Vec<Arc<QueueStats>> {
        self.stats.clone()
    }
}

impl Drop for XdpAttachment {
    fn drop(&mut self) {
        if self.handed_over.load(Ordering::Relaxed) {
            tracing::info!(iface = %self.iface.name, "AF_XDP handed over; the new process holds the program");
        } else {
            tracing::info!(iface = %self.iface.name, mode = %self.program.mode(), "AF_XDP detached");
        }
    }
}

impl From<XdpMode> for xdp::Mode {
    fn from(mode: XdpMode) -> xdp::Mode {
        match mode {
            XdpMode::Auto => xdp::Mode::Auto,
            XdpMode::Native => xdp::Mode::Native,
            XdpMode::Generic => xdp::Mode::Generic,
        }
    }
}

/// One receive queue's AF_XDP socket as a worker's packet path.
///
/// Only one process at a time uses a socket's rings. A socket taken over in an upgrade is not
/// touched until the old process closes its end of the queue's pipe (`predecessor`); one
/// handed over is not touched again, and the path then sends what is left through the kernel.
#[derive(Debug)]
pub struct XdpUdp {
    socket: XdpSocket,
    kernel: std::net::UdpSocket,
    stats: Arc<QueueStats>,
    /// While the replaced process still holds the socket: its end of the pipe it closes when
    /// it lets go.
    predecessor: Option<PipeReader>,
    /// This process's end of the pipe for the process replacing it; closed (`None`) once the
    /// socket is handed over.
    successor: Option<PipeWriter>,
    handed_over: Arc<AtomicBool>,
}

impl XdpUdp {
    /// Whether this process may use the socket's rings now: not before the replaced process
    /// let go of them (which this notices, and takes them then), nor after handing them over.
    fn holds_rings(&mut self) -> bool {
        if self.successor.is_none() {
            return false;
        }
        let Some(predecessor) = self.predecessor.as_mut() else {
            return true;
        };
        let mut byte = [0u8; 1];
        match predecessor.read(&mut byte) {
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => false,
            // End of file, as the old process closes its end (or ends): the rings are free.
            _ => {
                self.predecessor = None;
                self.socket.resume();
                tracing::info!(queue = self.stats.queue, "AF_XDP socket taken over: serving its queue");
                true
            }
        }
    }

    /// Sends `batch` (in this path's own memory) through the kernel socket.
    fn send_by_kernel(&mut self, batch: &mut Datagrams) -> SendReport {
        let mut report = SendReport::default();
        for i in 0..batch.len() {
            let Some((payload, peer)) = batch.get(i) else { break };
            match self.kernel.send_to(payload, peer.addr()) {
                Ok(_) => {
                    report.sent += 1;
                    self.socket.counts.sent_by_kernel += 1;
                }
                Err(e) => {
                    report.dropped += 1;
                    self.socket.counts.dropped_kernel_send += 1;
                    report.error = Some(e);
                }
            }
        }
        batch.clear();
        self.publish();
        report
    }

    fn publish(&self) {
        let counts = &self.socket.counts;
        let stats = &self.stats;
        stats.received.store(counts.received, Ordering::Relaxed);
        stats.sent.store(counts.sent, Ordering::Relaxed);
        stats.sent_by_kernel.store(counts.sent_by_kernel, Ordering::Relaxed);
        stats
            .dropped_malformed
            .store(counts.dropped_malformed, Ordering::Relaxed);
        stats.dropped_tx_full.store(counts.dropped_tx_full, Ordering::Relaxed);
        stats
            .dropped_kernel_send
            .store(counts.dropped_kernel_send, Ordering::Relaxed);
    }
}

impl PacketIo for XdpUdp {
    fn query_batch(&mut self) -> Datagrams {
        match self.successor {
            Some(_) => self.socket.query_batch(),
            None => Datagrams::new(KERNEL_SLOT_LEN),
        }
    }

    fn reply_batch(&mut self) -> Datagrams {
        match self.successor {
            // Lent frames only once the rings are this process's: until then every transmit
            // frame may be the replaced process's, and the batch gets them on its first send.
            Some(_) if self.predecessor.is_none() => self.socket.reply_batch(),
            Some(_) => self.socket.unlent_reply_batch(),
            None => Datagrams::new(KERNEL_SLOT_LEN),
        }
    }

    fn recv(&mut self, batch: &mut Datagrams) -> io::Result<usize> {
        if !self.holds_rings() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let received = self.socket.recv(batch);
        if received.is_ok() {
            self.publish();
        }
        received
    }

    fn send(&mut self, batch: &mut Datagrams) -> SendReport {
        if !self.holds_rings() {
            return self.send_by_kernel(batch);
        }
        let full_before = self.socket.counts.dropped_tx_full;
        let (sent, dropped, error) = self.socket.send(batch, &self.kernel);
        self.publish();
        SendReport {
            sent,
            dropped,
            full: (self.socket.counts.dropped_tx_full - full_before) as usize,
            error,
        }
    }

    fn busy(&mut self) -> bool {
        self.successor.is_some() && self.predecessor.is_none() && self.socket.busy()
    }

    fn hand_over(&mut self, lent: &mut [&mut Datagrams]) {
        if self.successor.is_none() {
            return;
        }
        if let Some(predecessor) = self.predecessor.as_mut() {
            // Never took the rings: the process before still holds them. The next process may
            // have them once that one lets go, so this one waits for that before saying so.
            let deadline = std::time::Instant::now() + HAND_OVER_PATIENCE;
            let mut byte = [0u8; 1];
            while std::time::Instant::now() < deadline {
                match predecessor.read(&mut byte) {
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    _ => break,
                }
            }
            self.successor = None;
            return;
        }
        let completed = self.socket.release(lent, HAND_OVER_PATIENCE);
        self.publish();
        self.successor = None;
        self.handed_over.store(true, Ordering::Relaxed);
        if completed {
            tracing::info!(queue = self.stats.queue, "AF_XDP socket handed over");
        } else {
            tracing::warn!(
                queue = self.stats.queue,
                "AF_XDP socket handed over with replies still in the kernel's hands; the new process leaves their frames alone"
            );
        }
    }

    /// Nothing to retire: the program steers the queue to this socket alone, and the kernel
    /// socket beside it is retired with the others.
    fn retire(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The socket, and while the replaced process holds it its pipe, under one token: the pipe's
/// end of file wakes the worker to take the rings (and what waits in them) over.
impl mio::event::Source for XdpUdp {
    fn register(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        if let Some(predecessor) = &self.predecessor {
            SourceFd(&predecessor.as_raw_fd()).register(registry, token, Interest::READABLE)?;
        }
        SourceFd(&self.socket.as_raw_fd()).register(registry, token, interests)
    }

    fn reregister(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        if let Some(predecessor) = &self.predecessor {
            SourceFd(&predecessor.as_raw_fd()).reregister(registry, token, Interest::READABLE)?;
        }
        SourceFd(&self.socket.as_raw_fd()).reregister(registry, token, interests)
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        if let Some(predecessor) = &self.predecessor {
            SourceFd(&predecessor.as_raw_fd()).deregister(registry)?;
        }
        SourceFd(&self.socket.as_raw_fd()).deregister(registry)
    }
}
