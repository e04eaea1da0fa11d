//! An AF_XDP socket on one receive queue: its UMEM (the frames the kernel and skyline share),
//! its four rings, and the frames' bookkeeping.
//!
//! The UMEM is split in two, most of it for receiving (see [`receive_frames`]). Receive frames
//! circulate between the fill ring, the receive ring and the batch of queries they are lent
//! to; each goes back to the fill ring when the next batch is received, so the kernel always
//! has all of them but one batch's worth. Transmit frames circulate between a free list, the
//! batch of replies they are lent to (the answer is written straight into them), the transmit
//! ring and the completion ring, which hands them back to the free list. No frame is ever in two of those places at once: that is what makes
//! the slices the batches lend out of the shared mapping safe (see `sys/frames.rs`).

use super::ring::Ring;
use crate::sys::frames::{Datagrams, Mapping};
use crate::sys::{Peer, BATCH_SIZE};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// Bytes per UMEM frame: a page, the aligned chunk size every driver supports.
const FRAME_LEN: usize = 4096;
/// Where the kernel places a received packet in its frame (`XDP_PACKET_HEADROOM`).
const RX_HEADROOM: usize = 256;
const ETHERNET_LEN: usize = 14;
const IPV4_LEN: usize = 20;
const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;
/// Where a reply's payload starts in its transmit frame: after room for the longest headers
/// (Ethernet, IPv6, UDP: 62 bytes), which are written in front of it once it is known.
const TX_PAYLOAD: usize = 64;
/// The longest payload a receive frame holds after the headroom and the longest headers.
const RX_SLOT_LEN: usize = FRAME_LEN - RX_HEADROOM - ETHERNET_LEN - IPV6_LEN - UDP_LEN;
/// The longest reply a transmit frame holds.
const TX_SLOT_LEN: usize = FRAME_LEN - TX_PAYLOAD;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_UDP: u8 = 17;
/// Hop limit of replies, as the kernel's default for UDP.
const TTL: u8 = 64;
/// The fewest frames a socket may have: a batch of each kind lent out, and as much again for
/// the rings.
const MIN_FRAMES: u32 = 4 * BATCH_SIZE as u32;
/// The fewest transmit frames: a batch of replies being written and one being sent.
const MIN_TX_FRAMES: u32 = 2 * BATCH_SIZE as u32;

/// How many of a UMEM's `frames` (a power of two, at least [`MIN_FRAMES`]) receive queries:
/// all but an eighth, and never fewer than half.
///
/// Received frames wait in the receive ring until the worker reads them, so they are what
/// rides out a burst that comes faster than the worker answers, or a stretch in which it does
/// not run: 3,584 of the default 4,096 frames are 24 ms at 150,000 q/s, where halves gave
/// 13.4 ms, and a flood's generator stopped and resumed by the kernel's scheduler bursts that
/// much (benches/results/xdp/README.md). Transmit frames come back as soon as the kernel has
/// sent them, within the `sendto` that has it send in copy mode, after the NIC's completion in
/// zero-copy mode, so an eighth (512 of 4,096: sixteen batches in flight) is plenty.
pub fn receive_frames(frames: u32) -> u32 {
    frames - (frames / 8).max(MIN_TX_FRAMES).min(frames / 2)
}

/// Why an AF_XDP socket could not be opened. Each names the cause for the operator.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The process may not open AF_XDP sockets.
    #[error("opening an AF_XDP socket was refused: it needs CAP_NET_RAW and CAP_NET_ADMIN (or root)")]
    NoPermission,
    /// The kernel was built without AF_XDP.
    #[error("this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)")]
    Unsupported,
    /// Another AF_XDP socket holds the queue.
    #[error("receive queue {queue} is busy: another AF_XDP socket is bound to it")]
    QueueBusy {
        /// The queue asked for.
        queue: u32,
    },
    /// The interface has no such queue, or refuses the socket on it.
    #[error("binding an AF_XDP socket to receive queue {queue} failed (no such queue?): {source}")]
    Bind {
        /// The queue asked for.
        queue: u32,
        /// What the kernel said.
        source: io::Error,
    },
    /// Any other step failed.
    #[error("{what} failed: {source}")]
    Os {
        /// The step.
        what: &'static str,
        /// What the kernel said.
        source: io::Error,
    },
}

fn os(what: &'static str) -> impl FnOnce(io::Error) -> SocketError {
    move |source| SocketError::Os { what, source }
}

/// Where replies come from: the interface's link-layer address and the served IP address and
/// port.
#[derive(Debug, Clone, Copy)]
pub struct Local {
    /// The interface's Ethernet address.
    pub mac: [u8; 6],
    /// The address queries are steered for.
    pub addr: SocketAddr,
}

/// How one socket opens.
#[derive(Debug, Clone, Copy)]
pub struct SocketConfig {
    /// Interface index.
    pub ifindex: u32,
    /// Receive queue.
    pub queue: u32,
    /// UMEM frames ([`FRAME_LEN`] bytes each), split between receiving and sending by
    /// [`receive_frames`]; at least [`MIN_FRAMES`], rounded up to a power of two.
    pub frames: u32,
    /// Copy mode forced (generic XDP can only copy); otherwise zero-copy where the driver
    /// offers it.
    pub force_copy: bool,
    /// The interface's MTU: a reply whose IP packet would be larger leaves through the kernel,
    /// which fragments it.
    pub mtu: u32,
    /// Where replies come from.
    pub local: Local,
}

/// What happened on the socket, counted where it happened (plain counters: one worker owns
/// the socket).
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Queries received.
    pub received: u64,
    /// Replies handed to the transmit ring.
    pub sent: u64,
    /// Replies larger than the MTU, sent through the kernel socket instead.
    pub sent_by_kernel: u64,
    /// Frames steered to the socket that were not well-formed UDP to the served address.
    pub dropped_malformed: u64,
    /// Replies dropped because the transmit ring stayed full.
    pub dropped_tx_full: u64,
    /// Replies the kernel socket refused.
    pub dropped_kernel_send: u64,
}

/// The kernel's own counters of the socket (`XDP_STATISTICS`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KernelCounts {
    /// Packets dropped for lack of a fill-ring frame, or too large for one.
    pub rx_dropped: u64,
    /// Packets dropped because the receive ring was full: not counted in `rx_dropped`, which
    /// includes them only for a caller of the shorter, older `xdp_statistics`.
    pub rx_ring_full: u64,
    /// Times the fill ring was found empty.
    pub rx_fill_ring_empty: u64,
    /// Invalid descriptors on the receive and transmit rings.
    pub invalid_descs: u64,
}

/// An AF_XDP socket bound to one receive queue, with its UMEM and rings.
pub struct XdpSocket {
    fd: OwnedFd,
    /// The memory file the UMEM is mapped from, for the process an upgrade hands it to.
    umem_file: OwnedFd,
    umem: Arc<Mapping>,
    fill: Ring<u64>,
    completion: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    /// Transmit frames owned by nobody.
    free: Vec<u64>,
    /// Transmit frames handed to the kernel and not yet completed.
    in_flight: u32,
    /// Per transmit frame, whether it is handed to the kernel: a completion is taken only for
    /// a frame that is, so no frame enters the free list twice, whatever the completion ring
    /// holds after a takeover.
    sending: Vec<bool>,
    /// Frames `0..receive` receive queries, the rest carry replies.
    receive: u32,
    zero_copy: bool,
    config: SocketConfig,
    /// Identification field of the next IPv4 reply.
    ip_id: u16,
    /// Counts of what happened on the socket.
    pub counts: Counts,
}

impl std::fmt::Debug for XdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpSocket")
            .field("queue", &self.config.queue)
            .field("zero_copy", &self.zero_copy)
            .finish_non_exhaustive()
    }
}

fn setsockopt<T>(fd: BorrowedFd<'_>, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a valid, initialised `T` for the duration of the call and its size is
    // passed with it; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads option `name` into a zeroed `T`. Only for plain C structs, for which zero bytes are a
/// valid value.
fn getsockopt<T: Copy>(fd: BorrowedFd<'_>, name: libc::c_int, zero: T) -> io::Result<T> {
    let mut value = zero;
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is a writable `T` of the size passed in `len`; the kernel writes at most
    // `len` bytes of plain data into it.
    let rc = unsafe { libc::getsockopt(fd.as_raw_fd(), libc::SOL_XDP, name, (&raw mut value).cast(), &mut len) };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

impl XdpSocket {
    /// Opens an AF_XDP socket on `config.queue` of the interface, with its UMEM and rings, its
    /// receive frames handed to the kernel. Packets reach it once the XDP program steers the
    /// queue to it.
    pub fn open(config: SocketConfig) -> Result<XdpSocket, SocketError> {
        // SAFETY: plain socket creation; the result is checked and owned at once.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw == -1 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM | libc::EACCES) => SocketError::NoPermission,
                Some(libc::EAFNOSUPPORT) => SocketError::Unsupported,
                _ => SocketError::Os {
                    what: "creating an AF_XDP socket",
                    source: e,
                },
            });
        }
        // SAFETY: `raw` is a descriptor just created and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let frames = config.frames.max(MIN_FRAMES).next_power_of_two();
        let receive = receive_frames(frames);
        let (umem_file, umem) =
            Mapping::memory_file(frames as usize * FRAME_LEN, c"skyline-umem").map_err(os("mapping the UMEM"))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.base().as_ptr() as u64,
            len: umem.len() as u64,
            chunk_size: FRAME_LEN as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(fd.as_fd(), libc::XDP_UMEM_REG, &reg).map_err(os("registering the UMEM"))?;
        let sizes = RingSizes::of(frames, receive);
        for (name, size, what) in [
            (libc::XDP_UMEM_FILL_RING, sizes.receive, "sizing the fill ring"),
            (
                libc::XDP_UMEM_COMPLETION_RING,
                sizes.transmit,
                "sizing the completion ring",
            ),
            (libc::XDP_RX_RING, sizes.receive, "sizing the receive ring"),
            (libc::XDP_TX_RING, sizes.transmit, "sizing the transmit ring"),
        ] {
            setsockopt(fd.as_fd(), name, &size).map_err(os(what))?;
        }
        let (mut fill, completion, rx, tx) = map_rings(fd.as_fd(), sizes)?;
        let room = fill.free(receive);
        for frame in 0..room {
            fill.push(u64::from(frame) * FRAME_LEN as u64);
        }
        fill.publish();
        let free = (receive..frames)
            .map(|frame| u64::from(frame) * FRAME_LEN as u64)
            .collect();
        let mut flags = libc::XDP_USE_NEED_WAKEUP;
        if config.force_copy {
            flags |= libc::XDP_COPY;
        }
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: config.ifindex,
            sxdp_queue_id: config.queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `addr` is a valid `sockaddr_xdp` of the size passed, read by the kernel only.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc == -1 {
            let source = io::Error::last_os_error();
            return Err(match source.raw_os_error() {
                Some(libc::EBUSY) => SocketError::QueueBusy { queue: config.queue },
                Some(libc::EPERM | libc::EACCES) => SocketError::NoPermission,
                _ => SocketError::Bind {
                    queue: config.queue,
                    source,
                },
            });
        }
        let options = getsockopt(fd.as_fd(), libc::XDP_OPTIONS, libc::xdp_options { flags: 0 })
            .map_err(os("reading the socket's options"))?;
        Ok(XdpSocket {
            fd,
            umem_file,
            umem,
            fill,
            completion,
            rx,
            tx,
            free,
            in_flight: 0,
            sending: vec![false; (frames - receive) as usize],
            receive,
            zero_copy: options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0,
            config: SocketConfig { frames, ..config },
            ip_id: 0,
            counts: Counts::default(),
        })
    }

    /// Takes over the socket `fd`, bound and serving in the process this one replaces, with
    /// the memory file `umem_file` its UMEM was registered from: maps both as that process
    /// did. The socket is not to be used before [`XdpSocket::resume`], which follows once
    /// that process has let go of its rings ([`XdpSocket::release`]). `config` says how replies
    /// are written; the frames are the UMEM's, of which `receive` receive queries as that
    /// process had it (`None`: half of them, as a skyline that did not say split them).
    pub fn adopt(
        fd: OwnedFd,
        umem_file: OwnedFd,
        config: SocketConfig,
        receive: Option<u32>,
    ) -> Result<XdpSocket, SocketError> {
        let umem = Mapping::of_file(umem_file.as_fd()).map_err(os("mapping the handed-over UMEM"))?;
        let frames = u32::try_from(umem.len() / FRAME_LEN).unwrap_or(0);
        if frames < MIN_FRAMES || !frames.is_power_of_two() || umem.len() != frames as usize * FRAME_LEN {
            return Err(SocketError::Os {
                what: "taking over an AF_XDP socket",
                source: io::Error::other(format!("its UMEM of {} bytes is not one skyline made", umem.len())),
            });
        }
        let receive = receive.unwrap_or(frames / 2);
        if receive < frames / 2 || receive >= frames || !(frames - receive).is_power_of_two() {
            return Err(SocketError::Os {
                what: "taking over an AF_XDP socket",
                source: io::Error::other(format!(
                    "{receive} of its {frames} frames receiving is not a split skyline makes"
                )),
            });
        }
        let (fill, completion, rx, tx) = map_rings(fd.as_fd(), RingSizes::of(frames, receive))?;
        let options = getsockopt(fd.as_fd(), libc::XDP_OPTIONS, libc::xdp_options { flags: 0 })
            .map_err(os("reading the handed-over socket's options"))?;
        Ok(XdpSocket {
            fd,
            umem_file,
            umem,
            fill,
            completion,
            rx,
            tx,
            free: Vec::new(),
            in_flight: 0,
            sending: vec![false; (frames - receive) as usize],
            receive,
            zero_copy: options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0,
            config: SocketConfig { frames, ..config },
            ip_id: 0,
            counts: Counts::default(),
        })
    }

    /// Starts using an adopted socket's rings where the process before left them. Every
    /// receive frame is then in the fill ring or the receive ring (that process gave back the
    /// ones it held); every transmit frame is free but those still being sent: the last ones
    /// put on the transmit ring and not yet taken from the completion ring, which the kernel
    /// completes in order. Normally none: the process before waited for its completions.
    pub fn resume(&mut self) {
        self.fill.resync(true);
        self.completion.resync(false);
        self.rx.resync(false);
        self.tx.resync(true);
        let (receive, frames) = (self.receive, self.config.frames);
        let owed = self
            .tx
            .index()
            .wrapping_sub(self.completion.index())
            .min(frames - receive);
        for back in 1..=owed {
            let frame = frame_of(self.tx.pushed(back).addr);
            if let Some(sending) = self.tx_slot(frame).and_then(|i| self.sending.get_mut(i)) {
                *sending = true;
            }
        }
        self.in_flight = self.sending.iter().filter(|&&s| s).count() as u32;
        let sending = &self.sending;
        self.free = (receive..frames)
            .filter(|&frame| !sending[(frame - receive) as usize])
            .map(|frame| u64::from(frame) * FRAME_LEN as u64)
            .collect();
    }

    /// Lets go of the rings for the process an upgrade hands the socket to: gives the frames
    /// lent to `lent` (this socket's batches) back, receive frames to the fill ring and
    /// transmit frames to the free list, and waits up to `patience` for every reply handed to
    /// the kernel to complete, so that the next process finds every transmit frame free.
    /// Returns whether they all did. Afterwards the socket must not be used again.
    pub fn release(&mut self, lent: &mut [&mut Datagrams], patience: std::time::Duration) -> bool {
        let receive_end = u64::from(self.receive) * FRAME_LEN as u64;
        let (fill, free) = (&mut self.fill, &mut self.free);
        for batch in lent {
            batch.take_back(|start| {
                let frame = frame_of(start as u64);
                if frame < receive_end {
                    fill.push(frame);
                } else {
                    free.push(frame);
                }
            });
        }
        self.fill.publish();
        let deadline = std::time::Instant::now() + patience;
        loop {
            self.complete();
            if self.in_flight == 0 {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            self.kick();
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    /// The memory file of the UMEM, for handing the socket over.
    pub fn umem_file(&self) -> BorrowedFd<'_> {
        self.umem_file.as_fd()
    }

    /// How many of the UMEM's frames receive queries, for handing the socket over.
    pub fn receiving(&self) -> u32 {
        self.receive
    }

    /// The index among the transmit frames of the frame at `frame`, if it is one.
    fn tx_slot(&self, frame: u64) -> Option<usize> {
        let index = usize::try_from(frame / FRAME_LEN as u64).ok()?;
        index.checked_sub(self.receive as usize)
    }

    /// Whether the driver moves frames without a copy.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// A batch for received queries: it gets its frames from [`XdpSocket::recv`].
    pub fn query_batch(&self) -> Datagrams {
        Datagrams::over(Arc::clone(&self.umem), RX_SLOT_LEN)
    }

    /// A batch for replies, lent as many transmit frames as are free.
    pub fn reply_batch(&mut self) -> Datagrams {
        let mut batch = Datagrams::over(Arc::clone(&self.umem), TX_SLOT_LEN);
        self.lend(&mut batch);
        batch
    }

    /// A batch for replies with no frame lent yet: it gets them on its first send, for a
    /// socket whose transmit frames are not yet this process's to lend (see
    /// [`XdpSocket::adopt`]).
    pub fn unlent_reply_batch(&self) -> Datagrams {
        Datagrams::over(Arc::clone(&self.umem), TX_SLOT_LEN)
    }

    /// Gives the frames of the last batch received back to the kernel, then receives up to a
    /// batch of queries into `batch`, in place. `WouldBlock` when none is waiting. Frames that
    /// are not well-formed UDP to the served address go straight back, counted.
    pub fn recv(&mut self, batch: &mut Datagrams) -> io::Result<usize> {
        self.recycle(batch);
        self.complete();
        if self.tx.outstanding() > 0 {
            self.kick();
        }
        let ready = self.rx.ready(BATCH_SIZE as u32);
        if ready == 0 {
            if self.fill.needs_wakeup() {
                self.wake_receive();
            }
            return Err(io::ErrorKind::WouldBlock.into());
        }
        for i in 0..ready {
            let desc = self.rx.peek(i);
            let placed = self
                .parse(desc.addr as usize, desc.len as usize)
                .is_some_and(|(start, len, peer)| batch.place_received(start, len, peer));
            if !placed {
                self.counts.dropped_malformed += 1;
                self.fill.push(frame_of(desc.addr));
            }
        }
        self.rx.release(ready);
        self.fill.publish();
        self.counts.received += batch.len() as u64;
        Ok(batch.len())
    }

    /// Writes the headers in front of every reply of `batch`, hands them to the transmit ring
    /// and has the kernel send them; replies too large for the MTU go through `kernel` (a
    /// socket bound to the served address). Empties the batch and lends it fresh frames.
    /// Returns (sent, dropped, the last error of the kernel socket).
    pub fn send(&mut self, batch: &mut Datagrams, kernel: &std::net::UdpSocket) -> (usize, usize, Option<io::Error>) {
        self.complete();
        let mut room = self.tx.free(batch.len() as u32);
        if (room as usize) < batch.len() {
            self.kick();
            self.complete();
            room = self.tx.free(batch.len() as u32);
        }
        let mut queued = [false; BATCH_SIZE];
        let (mut sent, mut dropped, mut error) = (0, 0, None);
        let ip_len = match self.config.local.addr {
            SocketAddr::V4(_) => IPV4_LEN,
            SocketAddr::V6(_) => IPV6_LEN,
        };
        let headers = ETHERNET_LEN + ip_len + UDP_LEN;
        for (i, (start, len, peer)) in batch.held().enumerate() {
            if ip_len + UDP_LEN + len > self.config.mtu as usize {
                match kernel.send_to(self.payload(start, len), peer.addr()) {
                    Ok(_) => {
                        sent += 1;
                        self.counts.sent_by_kernel += 1;
                    }
                    Err(e) => {
                        dropped += 1;
                        self.counts.dropped_kernel_send += 1;
                        error = Some(e);
                    }
                }
                continue;
            }
            if room == 0 {
                dropped += 1;
                self.counts.dropped_tx_full += 1;
                continue;
            }
            if !self.write_headers(start, len, peer) {
                dropped += 1;
                self.counts.dropped_malformed += 1;
                continue;
            }
            let frame = frame_of((start - headers) as u64);
            if let Some(sending) = self.tx_slot(frame).and_then(|i| self.sending.get_mut(i)) {
                *sending = true;
            }
            self.tx.push(libc::xdp_desc {
                addr: (start - headers) as u64,
                len: (headers + len) as u32,
                options: 0,
            });
            room -= 1;
            queued[i] = true;
            sent += 1;
        }
        let handed = queued.iter().filter(|&&q| q).count() as u32;
        if handed > 0 {
            self.tx.publish();
            self.in_flight += handed;
            self.counts.sent += u64::from(handed);
            self.kick();
        }
        let mut i = 0;
        let free = &mut self.free;
        batch.take_back(|start| {
            if !queued.get(i).copied().unwrap_or(false) {
                free.push(frame_of(start as u64));
            }
            i += 1;
        });
        self.complete();
        self.lend(batch);
        (sent, dropped, error)
    }

    /// Whether replies are still on their way out: the worker must come back without waiting
    /// for a packet, so that the kernel is kicked again.
    pub fn busy(&mut self) -> bool {
        self.complete();
        self.tx.outstanding() > 0
    }

    /// Returns the frames of the batch received last to the fill ring.
    fn recycle(&mut self, batch: &mut Datagrams) {
        let room = self.fill.free(BATCH_SIZE as u32);
        let fill = &mut self.fill;
        let mut pushed = 0;
        batch.take_back(|start| {
            // The fill ring is as large as the receive frames are many: it always has room.
            if pushed < room {
                fill.push(frame_of(start as u64));
                pushed += 1;
            }
        });
        if pushed > 0 {
            fill.publish();
        }
    }

    /// Moves completed transmit frames to the free list.
    fn complete(&mut self) {
        let done = self.completion.ready(self.in_flight);
        for i in 0..done {
            let frame = frame_of(self.completion.peek(i));
            let slot = self.tx_slot(frame).and_then(|i| self.sending.get_mut(i));
            if let Some(sending) = slot.filter(|sending| **sending) {
                *sending = false;
                self.free.push(frame);
                self.in_flight -= 1;
            }
        }
        self.completion.release(done);
    }

    /// Lends `batch` free transmit frames up to a full batch.
    fn lend(&mut self, batch: &mut Datagrams) {
        while batch.capacity() < BATCH_SIZE {
            let Some(frame) = self.free.pop() else {
                return;
            };
            if !batch.lend(frame as usize + TX_PAYLOAD) {
                self.free.push(frame);
                return;
            }
        }
    }

    /// Has the kernel transmit what the ring holds. In copy mode the kernel sends only during
    /// this call; in zero-copy mode only when it asked to be woken.
    fn kick(&mut self) {
        if self.zero_copy && !self.tx.needs_wakeup() {
            return;
        }
        // SAFETY: a send of no data to no address on our own socket; the kernel reads nothing.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        // EAGAIN, EBUSY, ENOBUFS: the device could not take everything now; what is left is
        // kicked again on the next turn (`busy` keeps the worker coming back).
        let _ = rc;
    }

    /// Wakes a driver that stopped filling the receive ring for want of frames.
    fn wake_receive(&self) {
        // SAFETY: a receive of no data on our own socket; the kernel writes nothing.
        let _ = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// The bytes of a received frame: `len` bytes at `addr`, within the UMEM.
    fn frame(&self, addr: usize, len: usize) -> Option<&[u8]> {
        let end = addr.checked_add(len)?;
        if end > self.umem.len() || end > frame_of(addr as u64) as usize + FRAME_LEN {
            return None;
        }
        // SAFETY: the range lies inside the UMEM (checked above) and inside one frame, which the
        // receive ring just handed to us: it is in no ring and lent to no batch until
        // `place_received` lends it, and `&self` keeps the socket from changing that meanwhile.
        Some(unsafe { std::slice::from_raw_parts(self.umem.base().as_ptr().add(addr), len) })
    }

    /// The payload of a reply lent to a batch: `len` bytes at `start`.
    fn payload(&self, start: usize, len: usize) -> &[u8] {
        self.frame(start, len).unwrap_or(&[])
    }

    /// Reads a received frame's Ethernet, IP and UDP headers: the payload's window and the
    /// peer, or `None` for anything but UDP to the served address and port.
    fn parse(&self, addr: usize, len: usize) -> Option<(usize, usize, Peer)> {
        let frame = self.frame(addr, len)?;
        let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
        let mac: [u8; 6] = frame.get(6..12)?.try_into().ok()?;
        let local = self.config.local.addr;
        let (src, udp_at, udp_end) = match (ethertype, local.ip()) {
            (ETHERTYPE_IPV4, IpAddr::V4(ours)) => {
                let ip = frame.get(ETHERNET_LEN..ETHERNET_LEN + IPV4_LEN)?;
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                let fragmented = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
                let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
                if ip[0] != 0x45 || ip[9] != PROTO_UDP || fragmented || dst != ours || total < IPV4_LEN {
                    return None;
                }
                let src = IpAddr::from([ip[12], ip[13], ip[14], ip[15]]);
                (src, ETHERNET_LEN + IPV4_LEN, ETHERNET_LEN + total)
            }
            (ETHERTYPE_IPV6, IpAddr::V6(ours)) => {
                let ip = frame.get(ETHERNET_LEN..ETHERNET_LEN + IPV6_LEN)?;
                let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
                let dst: [u8; 16] = ip[24..40].try_into().ok()?;
                if ip[0] >> 4 != 6 || ip[6] != PROTO_UDP || Ipv6Addr::from(dst) != ours {
                    return None;
                }
                let src: [u8; 16] = ip[8..24].try_into().ok()?;
                (
                    IpAddr::from(src),
                    ETHERNET_LEN + IPV6_LEN,
                    ETHERNET_LEN + IPV6_LEN + payload,
                )
            }
            _ => return None,
        };
        let udp = frame.get(udp_at..udp_end)?;
        let header = udp.get(..UDP_LEN)?;
        let (sport, dport) = (
            u16::from_be_bytes([header[0], header[1]]),
            u16::from_be_bytes([header[2], header[3]]),
        );
        let udp_len = usize::from(u16::from_be_bytes([header[4], header[5]]));
        if dport != local.port() || udp_len < UDP_LEN || udp_len > udp.len() {
            return None;
        }
        let start = addr + udp_at + UDP_LEN;
        // The query's slot must stay inside its frame, whatever headroom the driver left.
        if start - frame_of(addr as u64) as usize + RX_SLOT_LEN > FRAME_LEN {
            return None;
        }
        Some((
            start,
            udp_len - UDP_LEN,
            Peer::with_link(SocketAddr::new(src, sport), mac),
        ))
    }

    /// Writes Ethernet, IP and UDP headers for a reply of `len` bytes at `start` to `peer`,
    /// in the frame's room before it. Returns `false` for a peer of the other address family.
    fn write_headers(&mut self, start: usize, len: usize, peer: &Peer) -> bool {
        let local = self.config.local;
        let ip_len = match local.addr {
            SocketAddr::V4(_) => IPV4_LEN,
            SocketAddr::V6(_) => IPV6_LEN,
        };
        let at = start - ETHERNET_LEN - ip_len - UDP_LEN;
        let to = peer.addr();
        let mut headers = [0u8; ETHERNET_LEN + IPV6_LEN + UDP_LEN];
        headers[0..6].copy_from_slice(&peer.link());
        headers[6..12].copy_from_slice(&local.mac);
        let udp_len = (UDP_LEN + len) as u16;
        let payload_sum = sum(self.payload(start, len));
        let udp_at = ETHERNET_LEN + ip_len;
        let pseudo = match (local.addr.ip(), to.ip()) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                headers[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                let ip = &mut headers[ETHERNET_LEN..ETHERNET_LEN + IPV4_LEN];
                ip[0] = 0x45;
                ip[2..4].copy_from_slice(&(IPV4_LEN as u16 + udp_len).to_be_bytes());
                ip[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
                ip[6] = 0x40;
                ip[8] = TTL;
                ip[9] = PROTO_UDP;
                ip[12..16].copy_from_slice(&src.octets());
                ip[16..20].copy_from_slice(&dst.octets());
                let check = !fold(sum(ip));
                ip[10..12].copy_from_slice(&check.to_ne_bytes());
                self.ip_id = self.ip_id.wrapping_add(1);
                sum(&src.octets()) + sum(&dst.octets()) + word(u16::from(PROTO_UDP)) + word(udp_len)
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                headers[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
                let ip = &mut headers[ETHERNET_LEN..ETHERNET_LEN + IPV6_LEN];
                ip[0] = 0x60;
                ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
                ip[6] = PROTO_UDP;
                ip[7] = TTL;
                ip[8..24].copy_from_slice(&src.octets());
                ip[24..40].copy_from_slice(&dst.octets());
                sum(&src.octets()) + sum(&dst.octets()) + word(u16::from(PROTO_UDP)) + word(udp_len)
            }
            _ => return false,
        };
        let udp = &mut headers[udp_at..udp_at + UDP_LEN];
        udp[0..2].copy_from_slice(&local.addr.port().to_be_bytes());
        udp[2..4].copy_from_slice(&to.port().to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        let check = match !fold(pseudo + sum(udp) + payload_sum) {
            // An all-zero UDP checksum means "none"; a computed zero is sent as all ones.
            0 => 0xffff,
            check => check,
        };
        udp[6..8].copy_from_slice(&check.to_ne_bytes());
        let written = udp_at + UDP_LEN;
        // SAFETY: `at..start` is the room in front of a slot this socket lent to the batch being
        // sent (`start - TX_PAYLOAD` is the frame's start, and `written <= TX_PAYLOAD`), inside
        // the UMEM; no batch's slot covers it and the kernel does not hold the frame until the
        // descriptor is published after this.
        unsafe {
            std::ptr::copy_nonoverlapping(headers.as_ptr(), self.umem.base().as_ptr().add(at), written);
        }
        true
    }
}

impl AsRawFd for XdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for XdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Entries of the rings of a socket: the fill and receive rings hold every receive frame, the
/// transmit and completion rings every transmit frame; the kernel wants powers of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RingSizes {
    receive: u32,
    transmit: u32,
}

impl RingSizes {
    fn of(frames: u32, receive: u32) -> RingSizes {
        RingSizes {
            receive: receive.next_power_of_two(),
            transmit: (frames - receive).next_power_of_two(),
        }
    }
}

/// Maps the fill, completion, receive and transmit rings of `fd`, of the sizes they were set to.
fn map_rings(fd: BorrowedFd<'_>, sizes: RingSizes) -> Result<RingSet, SocketError> {
    let zero_ring = libc::xdp_ring_offset {
        producer: 0,
        consumer: 0,
        desc: 0,
        flags: 0,
    };
    let offsets = getsockopt(
        fd,
        libc::XDP_MMAP_OFFSETS,
        libc::xdp_mmap_offsets {
            rx: zero_ring,
            tx: zero_ring,
            fr: zero_ring,
            cr: zero_ring,
        },
    )
    .map_err(os("reading the ring offsets"))?;
    let RingSizes { receive, transmit } = sizes;
    let fill = Ring::map(fd, libc::XDP_UMEM_PGOFF_FILL_RING, &offsets.fr, receive, true)
        .map_err(os("mapping the fill ring"))?;
    let completion = Ring::map(fd, libc::XDP_UMEM_PGOFF_COMPLETION_RING, &offsets.cr, transmit, false)
        .map_err(os("mapping the completion ring"))?;
    let rx = Ring::map(fd, libc::XDP_PGOFF_RX_RING as u64, &offsets.rx, receive, false)
        .map_err(os("mapping the receive ring"))?;
    let tx = Ring::map(fd, libc::XDP_PGOFF_TX_RING as u64, &offsets.tx, transmit, true)
        .map_err(os("mapping the transmit ring"))?;
    Ok((fill, completion, rx, tx))
}

/// The fill, completion, receive and transmit rings.
type RingSet = (Ring<u64>, Ring<u64>, Ring<libc::xdp_desc>, Ring<libc::xdp_desc>);

/// The kernel's counters of an AF_XDP socket; any thread may read them through its own
/// descriptor of the socket.
pub fn kernel_counts(socket: BorrowedFd<'_>) -> io::Result<KernelCounts> {
    let zero = libc::xdp_statistics {
        rx_dropped: 0,
        rx_invalid_descs: 0,
        tx_invalid_descs: 0,
        rx_ring_full: 0,
        rx_fill_ring_empty_descs: 0,
        tx_ring_empty_descs: 0,
    };
    let stats = getsockopt(socket, libc::XDP_STATISTICS, zero)?;
    Ok(KernelCounts {
        rx_dropped: stats.rx_dropped,
        rx_ring_full: stats.rx_ring_full,
        rx_fill_ring_empty: stats.rx_fill_ring_empty_descs,
        invalid_descs: stats.rx_invalid_descs + stats.tx_invalid_descs,
    })
}

/// The frame an address inside it belongs to.
fn frame_of(addr: u64) -> u64 {
    addr & !(FRAME_LEN as u64 - 1)
}

/// The one's-complement sum of `bytes`, not yet folded, eight bytes at a time. The words are
/// read in the machine's byte order, which the sum does not depend on but for a final swap
/// (RFC 1071, 2(B)): folded and stored back in that order with `to_ne_bytes`, it is the checksum
/// in network order. At most 34 bits, so a few sums add up in a `u64` without overflow.
fn sum(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    let (mut total, mut carries) = (0u64, 0u64);
    let mut add = |word: u64| {
        let (t, carry) = total.overflowing_add(word);
        total = t;
        carries += u64::from(carry);
    };
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        add(u64::from_ne_bytes(word));
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    add(u64::from_ne_bytes(tail));
    // A carry out of 64 bits is worth one, as 2^64 is 1 modulo 0xffff.
    (total & 0xffff_ffff) + (total >> 32) + carries
}

/// Folds a sum into 16 bits of one's complement, without a loop.
fn fold(total: u64) -> u16 {
    let t = (total & 0xffff_ffff) + (total >> 32);
    let t = (t & 0xffff) + (t >> 16);
    let t = (t & 0xffff) + (t >> 16);
    ((t & 0xffff) + (t >> 16)) as u16
}

/// A 16-bit field as [`sum`] reads it from a packet, given its value.
fn word(value: u16) -> u64 {
    u64::from(u16::from_ne_bytes(value.to_be_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_a_known_ipv4_header() {
        // The example header of RFC 1071's errata-free illustrations: 4500 0073 0000 4000 4011
        // [b861] c0a8 0001 c0a8 00c7.
        let header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!((!fold(sum(&header))).to_ne_bytes(), [0xb8, 0x61]);
    }

    #[test]
    fn an_odd_length_is_padded_with_zero() {
        assert_eq!(fold(sum(&[0x01, 0x02, 0x03])).to_ne_bytes(), [0x04, 0x02]);
        assert_eq!(fold(sum(&[0xff; 6])), 0xffff);
        assert_eq!(fold(sum(&[0x12, 0x34]) + word(0x0001)).to_ne_bytes(), [0x12, 0x35]);
    }

    /// The checksum sum the slow way, two bytes at a time, in network order.
    fn reference(bytes: &[u8]) -> u16 {
        let mut total: u64 = 0;
        for pair in bytes.chunks(2) {
            total += u64::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
        }
        while total > 0xffff {
            total = (total & 0xffff) + (total >> 16);
        }
        total as u16
    }

    #[test]
    fn long_sums_carry_around() {
        // 0xffff words in every position of many 8-byte chunks: every add carries.
        let ones = [0xffu8; 1001];
        assert_eq!(fold(sum(&ones)).to_ne_bytes(), reference(&ones).to_be_bytes());
        let mixed: Vec<u8> = (0..1500u32).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(fold(sum(&mixed)).to_ne_bytes(), reference(&mixed).to_be_bytes());
    }

    #[test]
    fn most_frames_receive_and_an_eighth_transmit() {
        assert_eq!(receive_frames(4096), 3584);
        assert_eq!(receive_frames(16384), 14336);
        // Small UMEMs keep a batch being written and one being sent, and never go below half.
        assert_eq!(receive_frames(1024), 896);
        assert_eq!(receive_frames(256), 192);
        assert_eq!(receive_frames(MIN_FRAMES), MIN_FRAMES / 2);
        for shift in 7..20 {
            let frames = 1u32 << shift;
            let receive = receive_frames(frames);
            assert!(
                (frames - receive).is_power_of_two(),
                "{frames}: the transmit ring is exactly full"
            );
            assert!(receive >= frames / 2 && frames - receive >= MIN_TX_FRAMES);
        }
    }

    #[test]
    fn the_fill_ring_holds_every_receive_frame() {
        assert_eq!(
            RingSizes::of(4096, 3584),
            RingSizes {
                receive: 4096,
                transmit: 512
            }
        );
        // As a skyline that split in halves set them: an upgrade from one maps its rings alike.
        assert_eq!(
            RingSizes::of(4096, 2048),
            RingSizes {
                receive: 2048,
                transmit: 2048
            }
        );
    }

    #[test]
    fn frames_are_found_from_any_address_inside_them() {
        assert_eq!(frame_of(0), 0);
        assert_eq!(frame_of(4095), 0);
        assert_eq!(frame_of(4096 + 256 + 42), 4096);
    }
}
