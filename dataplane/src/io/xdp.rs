//! The AF_XDP path: UDP DNS to one address of one interface, received and answered through an
//! AF_XDP socket per receive queue, past the kernel's network stack.
//!
//! [`XdpAttachment`] attaches the steering program to the interface and opens the socket of
//! each queue; each worker then serves its queue's as a [`XdpUdp`] ([`XdpAttachment::serve`])
//! beside its kernel sockets, which still get everything the program passes on (fragments,
//! other ports, ARP, ICMP) and, for the same address, TCP. A query is read where the kernel put
//! it in the shared frames and its answer written into the frame it leaves in.

use super::{Datagrams, PacketIo, QueueStats, SendReport, XdpConfig, XdpMode};
use crate::sys::xdp::{self, Interface, Local, Program, SocketConfig, XdpError, XdpSocket};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

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
    sockets: Vec<Option<XdpSocket>>,
    stats: Vec<Arc<QueueStats>>,
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
        let mut sockets = Vec::with_capacity(count as usize);
        let mut stats = Vec::with_capacity(count as usize);
        for queue in 0..count {
            let socket = XdpSocket::open(SocketConfig {
                ifindex: iface.index,
                queue,
                frames: config.frames,
                force_copy: program.mode() == xdp::Mode::Generic,
                mtu: iface.mtu,
                local: Local { mac: iface.mac, addr },
            })
            .map_err(|source| XdpStartError::Socket { iface: name(), source })?;
            program.steer(queue, socket.as_fd()).map_err(fail)?;
            stats.push(Arc::new(QueueStats::new(
                queue,
                socket.zero_copy(),
                socket.as_fd().try_clone_to_owned().ok(),
            )));
            sockets.push(Some(socket));
        }
        tracing::info!(
            iface = %iface.name,
            mode = %program.mode(),
            queues = count,
            zero_copy = stats.iter().all(|s| s.zero_copy),
            %addr,
            "AF_XDP attached"
        );
        Ok(XdpAttachment {
            iface,
            program,
            sockets,
            stats,
        })
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
        let Some(socket) = self.sockets.get_mut(queue).and_then(Option::take) else {
            return Ok(None);
        };
        kernel.set_nonblocking(true)?;
        Ok(Some(XdpUdp {
            socket,
            kernel,
            stats: Arc::clone(&self.stats[queue]),
        }))
    }

    /// Every queue's counters, for the metrics.
    pub fn stats(&self) -> Vec<Arc<QueueStats>> {
        self.stats.clone()
    }
}

impl Drop for XdpAttachment {
    fn drop(&mut self) {
        tracing::info!(iface = %self.iface.name, mode = %self.program.mode(), "AF_XDP detached");
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
#[derive(Debug)]
pub struct XdpUdp {
    socket: XdpSocket,
    kernel: std::net::UdpSocket,
    stats: Arc<QueueStats>,
}

impl XdpUdp {
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
        self.socket.query_batch()
    }

    fn reply_batch(&mut self) -> Datagrams {
        self.socket.reply_batch()
    }

    fn recv(&mut self, batch: &mut Datagrams) -> io::Result<usize> {
        let received = self.socket.recv(batch);
        if received.is_ok() {
            self.publish();
        }
        received
    }

    fn send(&mut self, batch: &mut Datagrams) -> SendReport {
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
        self.socket.busy()
    }

    /// Nothing to retire: the program steers the queue to this socket alone, and the kernel
    /// socket beside it is retired with the others.
    fn retire(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl mio::event::Source for XdpUdp {
    fn register(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        SourceFd(&self.socket.as_raw_fd()).register(registry, token, interests)
    }

    fn reregister(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        SourceFd(&self.socket.as_raw_fd()).reregister(registry, token, interests)
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        SourceFd(&self.socket.as_raw_fd()).deregister(registry)
    }
}
