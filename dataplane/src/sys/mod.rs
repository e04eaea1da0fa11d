//! Everything that talks to the operating system below mio: batched datagram syscalls and
//! socket setup. This is the only module of the crate allowed to hold `unsafe` code; every
//! unsafe block says why it is sound, and nothing here knows about DNS.
//!
//! One file per platform behind this facade: `linux.rs` receives and sends a whole batch per
//! syscall with `recvmmsg`/`sendmmsg`; `fallback.rs` loops over `recv_from`/`send_to` where
//! those are not available, or where the build asks for it with `--cfg skyline_portable_io`
//! (how the test script compile-checks the fallback on Linux). `ascii.rs` lower-cases bytes with the CPU's vector instructions.
//! `inherit.rs` takes the listening sockets a service manager hands over at start.
//! `signal.rs` sends a signal to a process, for the workspace's tests, which may hold no unsafe
//! code of their own.
//! `frames.rs` holds the batches of datagrams a packet path lends a worker, in the worker's own
//! buffers or in memory shared with the kernel.
//! `xdp/` loads and attaches the BPF program that steers DNS packets to AF_XDP sockets, and
//! runs those sockets.
#![allow(unsafe_code)]

#[cfg(all(target_os = "linux", not(skyline_portable_io)))]
#[path = "linux.rs"]
mod imp;

#[cfg(any(not(target_os = "linux"), skyline_portable_io))]
#[path = "fallback.rs"]
mod imp;

mod ascii;
mod frames;
mod inherit;
mod peer;
mod signal;
#[cfg(all(target_os = "linux", not(skyline_portable_io)))]
pub mod xdp;

pub use ascii::lower16;
pub use frames::{Datagrams, Mapping};
pub use imp::{recv_batch, send_batch, Headers};
pub use inherit::{
    set_inheritable, take_listen_fds, take_upgrade_fds, take_upgrade_http_fd, InheritError, ListenPair, UPGRADE_FDS,
    UPGRADE_HTTP_FD, UPGRADE_XDP,
};
pub use peer::Peer;
pub use signal::{process_exists, send_signal, Signal};

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// Datagrams moved per receive or send call. A batch of 32 amortises the syscall over enough
/// queries to make its cost small next to answering (the kernel's per-datagram work dominates
/// past that), while the per-worker buffers stay within a few hundred KiB.
pub const BATCH_SIZE: usize = 32;

/// Socket buffer size requested for every UDP socket and TCP listener. Bursts of queries larger
/// than the default (about 200 KiB) would otherwise be dropped by the kernel before a worker
/// gets to them. The kernel caps the request at `net.core.rmem_max` / `wmem_max`.
pub const SOCKET_BUFFER_LEN: usize = 4 << 20;

/// Pending-connection queue length for TCP listeners.
pub const LISTEN_BACKLOG: i32 = 1024;

/// Receive slots as the batched receive fills them: equally sized buffers cut from one
/// allocation, and per slot the received length and the sender's address.
///
/// The number of usable slots is the smallest of `lens.len()`, `peers.len()`,
/// `bufs.len() / slot_len` and [`BATCH_SIZE`].
#[derive(Debug)]
pub struct RecvSlots<'a> {
    /// Consecutive buffers of `slot_len` bytes each.
    pub bufs: &'a mut [u8],
    /// Length of one buffer.
    pub slot_len: usize,
    /// Bytes received into each buffer.
    pub lens: &'a mut [usize],
    /// Sender of each datagram.
    pub peers: &'a mut [Peer],
}

impl RecvSlots<'_> {
    /// Number of datagrams one receive call may fill.
    pub fn capacity(&self) -> usize {
        usable(self.bufs.len(), self.slot_len, self.lens.len(), self.peers.len())
    }
}

/// Send slots: the datagrams to send, laid out as in [`RecvSlots`].
#[derive(Debug, Clone, Copy)]
pub struct SendSlots<'a> {
    /// Consecutive buffers of `slot_len` bytes each; datagram `i` starts at `i * slot_len`.
    pub bufs: &'a [u8],
    /// Length of one buffer.
    pub slot_len: usize,
    /// Length of each datagram (at most `slot_len`).
    pub lens: &'a [usize],
    /// Destination of each datagram.
    pub peers: &'a [Peer],
}

impl SendSlots<'_> {
    /// Number of datagrams described, capped at what one send call takes.
    pub fn count(&self) -> usize {
        usable(self.bufs.len(), self.slot_len, self.lens.len(), self.peers.len())
    }

    /// The payload of datagram `i`, clamped to its buffer.
    #[cfg(any(not(target_os = "linux"), skyline_portable_io))]
    fn payload(&self, i: usize) -> &[u8] {
        let start = i * self.slot_len;
        &self.bufs[start..start + self.lens[i].min(self.slot_len)]
    }
}

fn usable(bufs: usize, slot_len: usize, lens: usize, peers: usize) -> usize {
    match bufs.checked_div(slot_len) {
        Some(slots) => slots.min(lens).min(peers).min(BATCH_SIZE),
        None => 0,
    }
}

/// Creates a non-blocking UDP socket bound to `addr`, sharing the port with the other workers'
/// sockets (SO_REUSEPORT: the kernel spreads datagrams over them by flow hash).
pub fn udp_socket(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    prepare(&socket)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// Takes a listening UDP socket out of its port's SO_REUSEPORT group without closing it: once
/// connected (to its own address), the kernel steers only datagrams from that address to it and
/// spreads every other flow over the group's remaining sockets, while the datagrams already
/// queued on it stay readable and replies can still be sent from it. Closing it instead would
/// drop what the kernel queued on it between the last read and the close.
pub fn retire_udp(socket: socket2::SockRef<'_>) -> io::Result<()> {
    let mut own = socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket"))?;
    if own.ip().is_unspecified() {
        own.set_ip(match own {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    socket.connect(&own.into())
}

/// Creates a non-blocking TCP listener on `addr`, sharing the port with the other workers'
/// listeners (SO_REUSEPORT: the kernel spreads connections over them).
pub fn tcp_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    prepare(&socket)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// Binds `addr` for UDP and for TCP without SO_REUSEPORT, and lets go of both at once: fails
/// with [`io::ErrorKind::AddrInUse`] when another socket already holds the port for either.
///
/// The workers' sockets all set SO_REUSEPORT, and the kernel puts a socket with it into the
/// group of any other such socket of the same user on that address: binding them alone would
/// silently share the port with another process and split the queries between the two. A
/// socket without the option joins no group, so its bind tells whether anything is there;
/// called before this process binds its own, whatever holds the port is another process.
/// The TCP probe sets SO_REUSEADDR, as the listeners do, so that connections a previous
/// process left in TIME_WAIT do not count as a holder.
pub fn probe_unshared(addr: SocketAddr) -> io::Result<()> {
    let udp = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    udp.bind(&addr.into())?;
    let tcp = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    tcp.set_reuse_address(true)?;
    tcp.bind(&addr.into())
}

/// Creates a non-blocking UDP socket connected to the upstream server `upstream`, for one
/// upstream query. Connecting binds it to an ephemeral port the kernel picks at random (Linux
/// randomises UDP port selection within `ip_local_port_range`), makes the kernel discard
/// datagrams from any other address, and reports the ICMP "port unreachable" of a dead upstream
/// as a refused receive, so that the next upstream can be tried at once.
/// Every cache miss pays for this, so on Linux the socket is created non-blocking in the same
/// system call rather than with two more `fcntl`s.
pub fn upstream_udp(upstream: SocketAddr) -> io::Result<std::net::UdpSocket> {
    #[cfg(target_os = "linux")]
    let socket = Socket::new(
        Domain::for_address(upstream),
        Type::DGRAM.nonblocking(),
        Some(Protocol::UDP),
    )?;
    #[cfg(not(target_os = "linux"))]
    let socket = {
        let socket = Socket::new(Domain::for_address(upstream), Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_nonblocking(true)?;
        socket
    };
    socket.connect(&upstream.into())?;
    Ok(socket.into())
}

/// Most datagrams [`release_udp_port`] discards before it gives up on a socket.
const RELEASE_DRAIN_LIMIT: usize = 256;

/// Gives up the source port of `socket`, an upstream UDP socket whose try has ended, and
/// discards what it received and any error it holds, so that connecting it again binds it to
/// a new port of the kernel's random choice, as a new socket would be: with that connect, three
/// system calls instead of five (close, open, connect, and taking it out of and into the poll).
/// On Linux, dissolving a UDP socket's association (connecting it to `AF_UNSPEC`) also
/// releases a port it was not explicitly bound to; once released, nothing more arrives for the
/// old port. Elsewhere the port would stay, so this fails with `Unsupported` and the caller
/// closes the socket instead. Fails too when more than a few hundred datagrams were waiting.
pub fn release_udp_port(socket: socket2::SockRef<'_>) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: an all-zero `sockaddr` is a valid value of the plain C struct.
        let mut unspec: libc::sockaddr = unsafe { std::mem::zeroed() };
        unspec.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
        let len = std::mem::size_of::<libc::sockaddr>() as libc::socklen_t;
        // SAFETY: the descriptor is the open socket `socket` borrows, and `unspec` is a valid
        // sockaddr of `len` bytes that lives across the call, which only reads it.
        let rc = unsafe { libc::connect(socket.as_raw_fd(), &unspec, len) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut discard = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        for _ in 0..RELEASE_DRAIN_LIMIT {
            match socket.recv(&mut discard) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // A datagram (truncated to the one byte) or a pending error, now consumed.
                _ => {}
            }
        }
        Err(io::Error::other(
            "too many datagrams waiting on a released upstream socket",
        ))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Microseconds of `CLOCK_MONOTONIC`, the clock a service manager compares a reload
/// notification's `MONOTONIC_USEC` with (std's `Instant` reads it but does not expose it).
pub fn monotonic_usec() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always exists on the
    // platforms this builds for, and the call writes nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    if rc != 0 {
        return 0;
    }
    (now.tv_sec as u64).saturating_mul(1_000_000) + now.tv_nsec as u64 / 1_000
}

/// Hands the allocator's free pages back to the kernel. glibc keeps memory it has freed mapped
/// for reuse; after a snapshot of a large zone is built (its temporaries freed) or replaced,
/// that is resident memory nothing uses, a large share of the process's size. Elsewhere a
/// no-op.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only walks the allocator's own free lists, taking each arena's lock
    // itself; it may be called from any thread at any time, and frees nothing still in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Arenas the allocator may use (see [`limit_allocator_arenas`]).
pub const ALLOCATOR_ARENAS: i32 = 2;

/// Caps glibc's allocator at [`ALLOCATOR_ARENAS`] arenas, unless the operator set
/// `MALLOC_ARENA_MAX`. glibc gives each allocating thread an arena of its own, up to eight per
/// core, and each keeps the memory freed into it: the control plane's reads and builds then hold
/// about a megabyte more resident per thread they ran on. The workers allocate nothing per query,
/// so fewer arenas cost no contention where it would matter. Call it before any thread starts.
/// Elsewhere a no-op.
pub fn limit_allocator_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: `mallopt` only sets a parameter of the allocator, under its own lock; called
        // before other threads exist, it races with nothing.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ALLOCATOR_ARENAS);
        }
    }
}

/// Whether a socket call failed for lack of a local resource (file descriptors, buffer memory,
/// ephemeral ports) rather than because of the peer.
pub fn is_resource_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    ) || e.kind() == io::ErrorKind::AddrNotAvailable
}

/// Raises the soft limit on open files to the hard limit and returns the limit now in force.
/// Forwarding holds a socket per upstream try in flight on top of the TCP connections, which the
/// common default soft limit of 1024 does not cover.
pub fn raise_open_files_limit() -> io::Result<libc::rlim_t> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable `rlimit` for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == -1 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: `raised` is a valid `rlimit` that outlives the call, which only reads it.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == -1 {
            return Err(io::Error::last_os_error());
        }
        limit = raised;
    }
    Ok(limit.rlim_cur)
}

fn prepare(socket: &Socket) -> io::Result<()> {
    socket.set_nonblocking(true)?;
    #[cfg(all(unix, not(any(target_os = "solaris", target_os = "illumos"))))]
    socket.set_reuse_port(true)?;
    // Best effort: a smaller buffer than asked for still works, only with less burst room.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_LEN);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER_LEN);
    tracing::debug!(
        recv_buffer = socket.recv_buffer_size().unwrap_or(0),
        send_buffer = socket.send_buffer_size().unwrap_or(0),
        "socket buffers"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::SockRef;
    use std::net::{Ipv4Addr, UdpSocket};
    use std::time::{Duration, Instant};

    const SLOT: usize = 64;

    fn receive_some(socket: &UdpSocket, want: usize) -> (Vec<u8>, Vec<usize>, Vec<Peer>, usize) {
        let mut bufs = vec![0u8; SLOT * BATCH_SIZE];
        let mut lens = vec![0usize; BATCH_SIZE];
        let mut peers = vec![Peer::default(); BATCH_SIZE];
        let mut got = 0;
        let deadline = Instant::now() + Duration::from_secs(2);
        while got < want && Instant::now() < deadline {
            let slots = RecvSlots {
                bufs: &mut bufs[got * SLOT..],
                slot_len: SLOT,
                lens: &mut lens[got..],
                peers: &mut peers[got..],
            };
            match recv_batch(SockRef::from(socket), slots, &mut Headers::default()) {
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => panic!("receive failed: {e}"),
            }
        }
        (bufs, lens, peers, got)
    }

    #[test]
    fn a_batch_sent_in_one_call_arrives_with_lengths_and_sender() {
        let a = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let b = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        b.set_nonblocking(true).unwrap();
        let to = b.local_addr().unwrap();

        let mut bufs = vec![0u8; SLOT * 3];
        for (i, chunk) in bufs.chunks_mut(SLOT).enumerate() {
            chunk.fill(i as u8 + 1);
        }
        let lens = [5, SLOT, 1];
        let peers = [Peer::from(to); 3];
        let sent = send_batch(
            SockRef::from(&a),
            SendSlots {
                bufs: &bufs,
                slot_len: SLOT,
                lens: &lens,
                peers: &peers,
            },
            &mut Headers::default(),
        )
        .unwrap();
        assert!(sent >= 1);
        let mut rest = sent;
        while rest < 3 {
            let slots = SendSlots {
                bufs: &bufs[rest * SLOT..],
                slot_len: SLOT,
                lens: &lens[rest..],
                peers: &peers[rest..],
            };
            rest += send_batch(SockRef::from(&a), slots, &mut Headers::default()).unwrap();
        }

        let (got_bufs, got_lens, got_peers, got) = receive_some(&b, 3);
        assert_eq!(got, 3);
        assert_eq!(&got_lens[..3], &lens);
        for i in 0..3 {
            assert_eq!(got_peers[i].addr(), a.local_addr().unwrap());
            assert!(got_bufs[i * SLOT..i * SLOT + lens[i]].iter().all(|&b| b == i as u8 + 1));
        }
    }

    #[test]
    fn reused_headers_receive_into_the_buffers_of_each_call() {
        let a = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let b = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        b.set_nonblocking(true).unwrap();
        let mut headers = Headers::default();
        let mut first = vec![0u8; SLOT * 4];
        let mut second = vec![0u8; SLOT * 2];
        let mut lens = [0usize; 4];
        let mut peers = [Peer::default(); 4];
        let mut receive = |bufs: &mut [u8], slot_len: usize, fill: u8| {
            a.send_to(&[fill; 3], b.local_addr().unwrap()).unwrap();
            let deadline = Instant::now() + Duration::from_secs(2);
            loop {
                let slots = RecvSlots {
                    bufs: &mut *bufs,
                    slot_len,
                    lens: &mut lens,
                    peers: &mut peers,
                };
                match recv_batch(SockRef::from(&b), slots, &mut headers) {
                    Ok(n) => return (n, lens[0], peers[0].addr()),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    Err(e) => panic!("receive failed: {e}"),
                }
            }
        };
        let sender = a.local_addr().unwrap();
        assert_eq!(receive(&mut first, SLOT, 1), (1, 3, sender));
        assert_eq!(&first[..4], &[1, 1, 1, 0]);
        assert_eq!(receive(&mut first, SLOT, 2), (1, 3, sender));
        assert_eq!(&first[..4], &[2, 2, 2, 0]);
        assert_eq!(receive(&mut second, SLOT * 2, 3), (1, 3, sender));
        assert_eq!(&second[..4], &[3, 3, 3, 0]);
        assert_eq!(&first[..4], &[2, 2, 2, 0], "the earlier buffers are left alone");
    }

    #[test]
    fn reused_headers_send_from_the_buffers_and_to_the_peers_of_each_call() {
        let from = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let b = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let c = UdpSocket::bind(("::1", 0)).unwrap();
        for socket in [&b, &c] {
            socket.set_nonblocking(true).unwrap();
        }
        let (to_b, to_c) = (Peer::from(b.local_addr().unwrap()), Peer::from(c.local_addr().unwrap()));
        let v6 = UdpSocket::bind(("::", 0)).unwrap();
        let mut headers = Headers::default();
        let mut send = |socket: &UdpSocket, bufs: &[u8], lens: &[usize], peers: &[Peer]| {
            let slots = SendSlots {
                bufs,
                slot_len: SLOT,
                lens,
                peers,
            };
            assert_eq!(
                send_batch(SockRef::from(socket), slots, &mut headers).unwrap(),
                lens.len()
            );
        };
        let mut first = vec![0u8; SLOT * 3];
        for (i, chunk) in first.chunks_mut(SLOT).enumerate() {
            chunk.fill(10 + i as u8);
        }
        let second = vec![20u8; SLOT * 2];
        let mut peers = [to_b; 3];
        send(&from, &first, &[1, 2], &peers[..2]);
        send(&v6, &second, &[3], &[to_c]);
        send(&from, &first, &[4, 5, 6], &peers);
        peers[0] = to_c;
        first[0] = 30;
        send(&v6, &first, &[7], &peers[..1]);

        let at_b: Vec<(u8, usize)> = drain(&b).iter().map(|d| (d[0], d.len())).collect();
        assert_eq!(at_b, [(10, 1), (11, 2), (10, 4), (11, 5), (12, 6)]);
        let at_c: Vec<(u8, usize)> = drain(&c).iter().map(|d| (d[0], d.len())).collect();
        assert_eq!(at_c, [(20, 3), (30, 7)]);
    }

    /// Every datagram waiting on `socket`, or arriving within a short while.
    fn drain(socket: &UdpSocket) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = [0u8; SLOT];
        let deadline = Instant::now() + Duration::from_millis(300);
        while Instant::now() < deadline {
            match socket.recv(&mut buf) {
                Ok(n) => got.push(buf[..n].to_vec()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => panic!("receive failed: {e}"),
            }
        }
        got
    }

    #[test]
    fn an_empty_socket_reports_would_block() {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        socket.set_nonblocking(true).unwrap();
        let mut bufs = [0u8; SLOT];
        let mut lens = [0usize; 1];
        let mut peers = [Peer::default(); 1];
        let slots = RecvSlots {
            bufs: &mut bufs,
            slot_len: SLOT,
            lens: &mut lens,
            peers: &mut peers,
        };
        let err = recv_batch(SockRef::from(&socket), slots, &mut Headers::default()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn ipv6_peers_round_trip() {
        let Ok(a) = UdpSocket::bind("[::1]:0") else {
            return;
        };
        let b = UdpSocket::bind("[::1]:0").unwrap();
        b.set_nonblocking(true).unwrap();
        let payload = [7u8; 9];
        let peers = [Peer::from(b.local_addr().unwrap())];
        let sent = send_batch(
            SockRef::from(&a),
            SendSlots {
                bufs: &payload,
                slot_len: 9,
                lens: &[9],
                peers: &peers,
            },
            &mut Headers::default(),
        )
        .unwrap();
        assert_eq!(sent, 1);
        let (_, lens, got_peers, got) = receive_some(&b, 1);
        assert_eq!(got, 1);
        assert_eq!(lens[0], 9);
        assert_eq!(got_peers[0].addr(), a.local_addr().unwrap());
    }

    #[test]
    fn zero_sized_slots_hold_nothing() {
        assert_eq!(usable(100, 0, 4, 4), 0);
        assert_eq!(usable(100, 10, 4, 4), 4);
        assert_eq!(usable(100, 10, 40, 40), 10);
        assert_eq!(usable(100_000, 1, 1000, 1000), BATCH_SIZE);
    }

    #[test]
    fn the_open_files_limit_is_raised_to_the_hard_limit() {
        let limit = raise_open_files_limit().unwrap();
        assert!(limit >= 1024);
        assert_eq!(
            raise_open_files_limit().unwrap(),
            limit,
            "raising again changes nothing"
        );
    }

    #[test]
    fn running_out_of_descriptors_is_local() {
        assert!(is_resource_exhaustion(&io::Error::from_raw_os_error(libc::EMFILE)));
        assert!(!is_resource_exhaustion(&io::Error::from_raw_os_error(
            libc::ECONNREFUSED
        )));
    }

    #[test]
    fn a_retired_socket_leaves_new_flows_to_its_group_and_keeps_what_it_holds() {
        let (first, second) = (0..20)
            .find_map(|_| {
                let first = udp_socket(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).ok()?;
                let second = udp_socket(first.local_addr().ok()?).ok()?;
                Some((first, second))
            })
            .expect("no port to share");
        let addr = first.local_addr().unwrap();
        let senders: Vec<UdpSocket> = (0..64)
            .map(|_| UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap())
            .collect();
        for sender in &senders {
            sender.send_to(b"before", addr).unwrap();
        }
        let queued = drain(&first).len();
        assert!(queued > 0, "the kernel spread no flow over the first socket");
        for sender in &senders {
            sender.send_to(b"before", addr).unwrap();
        }
        retire_udp(SockRef::from(&first)).unwrap();
        assert_eq!(
            drain(&first).len(),
            queued,
            "what was queued before the retirement is kept"
        );
        assert_eq!(drain(&second).len(), 2 * senders.len() - 2 * queued);
        for sender in &senders {
            sender.send_to(b"after", addr).unwrap();
        }
        assert!(drain(&first).is_empty(), "a retired socket got a new flow");
        assert_eq!(drain(&second).len(), senders.len());
    }

    #[test]
    fn a_probe_finds_a_port_held_for_udp_or_tcp_and_holds_nothing_itself() {
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let held_udp = udp.local_addr().unwrap();
        assert_eq!(probe_unshared(held_udp).unwrap_err().kind(), io::ErrorKind::AddrInUse);
        let listener = tcp_listener(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let held_tcp = listener.local_addr().unwrap();
        assert_eq!(
            probe_unshared(held_tcp).unwrap_err().kind(),
            io::ErrorKind::AddrInUse,
            "a listener with SO_REUSEPORT still holds its port"
        );
        drop(listener);
        let free = (0..20)
            .find_map(|_| {
                let addr = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                    .ok()?
                    .local_addr()
                    .ok()?;
                probe_unshared(addr).ok().map(|()| addr)
            })
            .expect("no port free for both UDP and TCP");
        udp_socket(free).expect("the probe let go of the UDP port");
        tcp_listener(free).expect("the probe let go of the TCP port");
    }

    #[test]
    fn workers_can_share_a_port() {
        // The kernel's free UDP port may be taken for TCP by a test running beside this one.
        let (first, l1) = (0..20)
            .find_map(|_| {
                let udp = udp_socket(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
                let tcp = tcp_listener(udp.local_addr().unwrap()).ok()?;
                Some((udp, tcp))
            })
            .expect("no port free for both UDP and TCP");
        let addr = first.local_addr().unwrap();
        let second = udp_socket(addr).unwrap();
        assert_eq!(second.local_addr().unwrap(), addr);
        let l2 = tcp_listener(addr).unwrap();
        assert_eq!(l1.local_addr().unwrap(), l2.local_addr().unwrap());
    }
}
