//! Linux: one `recvmmsg` fills a whole batch of slots, one `sendmmsg` sends one.
//!
//! The message headers, I/O vectors and socket addresses live in a [`Headers`] per socket and
//! direction, allocated once. A send points the entries it hands to the kernel at that call's
//! buffers and leaves every other field as it was; a receive, whose buffers are the same from
//! call to call, rewrites them only when its buffers change.

use super::{RecvSlots, SendSlots, BATCH_SIZE};
use socket2::SockRef;
use std::fmt;
use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::ptr;

/// Calls a libc function and turns its `-1` into the thread's last OS error.
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)? )) => {{
        #[allow(unused_unsafe)]
        let res = unsafe { libc::$fn($($arg),*) };
        if res == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}

/// The message headers one socket's batches in one direction are described to the kernel
/// with, allocated once. Building all 32 headers on the stack for every call, however few
/// datagrams it brought, cost tens of instructions per query at common batch sizes; now a call
/// writes only each entry's buffer, length and address pointers.
pub struct Headers {
    names: Box<[libc::sockaddr_storage; BATCH_SIZE]>,
    iovs: Box<[libc::iovec; BATCH_SIZE]>,
    msgs: Box<[libc::mmsghdr; BATCH_SIZE]>,
    /// The receive buffers (address, length, slot length, slot count) the headers point at
    /// now. A socket receives into the same buffers every time, so a receive writes its
    /// headers only when these change, and resets afterwards just the address lengths the
    /// kernel overwrote.
    receiving_into: (usize, usize, usize, usize),
}

impl Default for Headers {
    fn default() -> Headers {
        // SAFETY: `sockaddr_storage`, `iovec` and `mmsghdr` are plain C structs for which
        // all-zero bytes are valid values (null pointers, zero lengths); zeroing also covers
        // the padding fields some libcs declare.
        let (names, iovs, msgs) = unsafe { (mem::zeroed(), mem::zeroed(), mem::zeroed()) };
        let mut headers = Headers {
            names: Box::new(names),
            iovs: Box::new(iovs),
            msgs: Box::new(msgs),
            receiving_into: (0, 0, 0, 0),
        };
        for msg in headers.msgs.iter_mut() {
            msg.msg_hdr.msg_iovlen = 1;
        }
        headers
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Headers").finish_non_exhaustive()
    }
}

// SAFETY: the raw pointers inside the headers point into the value's own boxes, which move with
// it, and at the buffers of a call's borrow: a send writes them anew, a receive first checks
// that they describe the buffers it borrows. Nothing reads them between calls, so the value may
// move to another thread.
unsafe impl Send for Headers {}

impl Headers {
    /// Points entry `i < count` of each header at its I/O vector and address buffer, with
    /// `name_len` bytes of address room. The base pointers are taken after every write through
    /// references, so that they stay valid until the system call.
    fn point(&mut self, count: usize, name_len: impl Fn(usize) -> usize) {
        let names = self.names.as_mut_ptr();
        let iovs = self.iovs.as_mut_ptr();
        for (i, msg) in self.msgs.iter_mut().take(count).enumerate() {
            msg.msg_hdr.msg_name = names.wrapping_add(i).cast();
            msg.msg_hdr.msg_namelen = name_len(i) as libc::socklen_t;
            msg.msg_hdr.msg_iov = iovs.wrapping_add(i);
        }
    }
}

/// Room for a peer's address in a received message's header.
const NAME_ROOM: usize = mem::size_of::<libc::sockaddr_storage>();

/// Receives up to `slots.capacity()` datagrams with one `recvmmsg`. Returns how many arrived
/// (at least one), or `WouldBlock` when none is waiting. A datagram larger than its slot is cut
/// to the slot's length.
pub fn recv_batch(socket: SockRef<'_>, slots: RecvSlots<'_>, headers: &mut Headers) -> io::Result<usize> {
    let count = slots.capacity();
    if count == 0 {
        return Ok(0);
    }
    let into = (slots.bufs.as_ptr() as usize, slots.bufs.len(), slots.slot_len, count);
    if headers.receiving_into != into {
        let chunks = slots.bufs.chunks_exact_mut(slots.slot_len);
        for (iov, chunk) in headers.iovs.iter_mut().zip(chunks).take(count) {
            *iov = libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: chunk.len(),
            };
        }
        headers.point(count, |_| NAME_ROOM);
        headers.receiving_into = into;
    }
    // SAFETY: the first `count` headers point at `count` distinct iovecs, each covering a
    // distinct slot of `slots.bufs` (written for a buffer at the same address, of the same
    // length and slot layout, so they cover exactly this borrow's slots), and at `count`
    // distinct address buffers of the size given in `msg_namelen` (reset after every call);
    // all of them outlive the call, and the kernel writes no more than those lengths. A null
    // timeout is allowed.
    let received = syscall!(recvmmsg(
        socket.as_raw_fd(),
        headers.msgs.as_mut_ptr(),
        count as libc::c_uint,
        0,
        ptr::null_mut(),
    ))? as usize;
    for i in 0..received.min(count) {
        let msg = &mut headers.msgs[i];
        slots.lens[i] = (msg.msg_len as usize).min(slots.slot_len);
        // SAFETY: the kernel wrote `msg_namelen` bytes of a socket address into `names[i]`.
        slots.peers[i] = unsafe { socket_addr(&headers.names[i], msg.msg_hdr.msg_namelen) };
        msg.msg_hdr.msg_namelen = NAME_ROOM as libc::socklen_t;
    }
    Ok(received)
}

/// Sends up to `slots.count()` datagrams with one `sendmmsg`. Returns how many the kernel took
/// (at least one); an error is about the first datagram.
pub fn send_batch(socket: SockRef<'_>, slots: SendSlots<'_>, headers: &mut Headers) -> io::Result<usize> {
    let count = slots.count();
    if count == 0 {
        return Ok(0);
    }
    let mut name_lens = [0usize; BATCH_SIZE];
    for (i, name_len_of) in name_lens.iter_mut().enumerate().take(count) {
        let payload = slots.payload(i);
        // The kernel only reads through `iov_base` for a send; the pointer is mutable because
        // `iovec` serves both directions.
        headers.iovs[i] = libc::iovec {
            iov_base: payload.as_ptr().cast_mut().cast(),
            iov_len: payload.len(),
        };
        let (name, name_len) = RawSocketAddr::new(slots.peers[i]);
        // SAFETY: `sockaddr_storage` is at least as large as, and aligned for, every socket
        // address type, so it holds either member of the union.
        unsafe { ptr::from_mut(&mut headers.names[i]).cast::<RawSocketAddr>().write(name) };
        *name_len_of = name_len;
    }
    headers.point(count, |i| name_lens[i]);
    // SAFETY: the first `count` headers point at initialised iovecs over live payload bytes and
    // at initialised socket addresses of the stated length; all outlive the call, and sendmmsg
    // only reads through them (it writes `msg_len`).
    let sent = syscall!(sendmmsg(
        socket.as_raw_fd(),
        headers.msgs.as_mut_ptr(),
        count as libc::c_uint,
        0
    ))?;
    Ok(sent as usize)
}

/// A destination address in the kernel's layout, big enough for either family.
#[repr(C)]
union RawSocketAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

impl RawSocketAddr {
    /// The kernel form of `addr` and the length of its meaningful part.
    fn new(addr: SocketAddr) -> (RawSocketAddr, usize) {
        match addr {
            SocketAddr::V4(a) => {
                let v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*a.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                (RawSocketAddr { v4 }, mem::size_of::<libc::sockaddr_in>())
            }
            SocketAddr::V6(a) => {
                let v6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                (RawSocketAddr { v6 }, mem::size_of::<libc::sockaddr_in6>())
            }
        }
    }
}

/// Reads the address the kernel stored for a received datagram. An address of an unexpected
/// family or length, which a UDP socket never reports, reads as the unspecified address.
///
/// # Safety
///
/// `name` must point at a `sockaddr_storage` whose first `len` bytes the kernel initialised
/// (`len` being the `msg_namelen` it returned).
unsafe fn socket_addr(name: *const libc::sockaddr_storage, len: libc::socklen_t) -> SocketAddr {
    let len = len as usize;
    if len < mem::size_of::<libc::sa_family_t>() {
        return SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
    }
    // SAFETY: the caller guarantees the family field, within the first `len >= 2` bytes, is
    // initialised; `addr_of!` reads it without creating a reference to the rest.
    let family = unsafe { ptr::addr_of!((*name).ss_family).read() } as libc::c_int;
    if family == libc::AF_INET && len >= mem::size_of::<libc::sockaddr_in>() {
        // SAFETY: the kernel wrote a whole `sockaddr_in` (family and length checked), and
        // `sockaddr_storage` is aligned for every socket address type.
        let sin = unsafe { name.cast::<libc::sockaddr_in>().read() };
        let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
        SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port)))
    } else if family == libc::AF_INET6 && len >= mem::size_of::<libc::sockaddr_in6>() {
        // SAFETY: as above, for a whole `sockaddr_in6`.
        let sin6 = unsafe { name.cast::<libc::sockaddr_in6>().read() };
        let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
        SocketAddr::V6(SocketAddrV6::new(
            ip,
            u16::from_be(sin6.sin6_port),
            sin6.sin6_flowinfo,
            sin6.sin6_scope_id,
        ))
    } else {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
    }
}
