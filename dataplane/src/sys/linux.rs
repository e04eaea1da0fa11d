//! Linux: one `recvmmsg` fills a whole batch of slots, one `sendmmsg` sends one.
//!
//! The message headers, I/O vectors and socket addresses live in stack arrays of
//! [`BATCH_SIZE`] `MaybeUninit` entries; only the entries handed to the kernel are written.

use super::{RecvSlots, SendSlots, BATCH_SIZE};
use socket2::SockRef;
use std::io;
use std::mem::{self, MaybeUninit};
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

/// Receives up to `slots.capacity()` datagrams with one `recvmmsg`. Returns how many arrived
/// (at least one), or `WouldBlock` when none is waiting. A datagram larger than its slot is cut
/// to the slot's length.
pub fn recv_batch(socket: SockRef<'_>, slots: RecvSlots<'_>) -> io::Result<usize> {
    let count = slots.capacity();
    if count == 0 {
        return Ok(0);
    }
    let mut names = [const { MaybeUninit::<libc::sockaddr_storage>::uninit() }; BATCH_SIZE];
    let mut iovs = [const { MaybeUninit::<libc::iovec>::uninit() }; BATCH_SIZE];
    let mut msgs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; BATCH_SIZE];
    let chunks = slots.bufs.chunks_exact_mut(slots.slot_len);
    for (i, chunk) in chunks.take(count).enumerate() {
        let iov = iovs[i].write(libc::iovec {
            iov_base: chunk.as_mut_ptr().cast(),
            iov_len: chunk.len(),
        });
        let hdr = message_header(
            names[i].as_mut_ptr().cast(),
            mem::size_of::<libc::sockaddr_storage>(),
            iov,
        );
        msgs[i].write(libc::mmsghdr {
            msg_hdr: hdr,
            msg_len: 0,
        });
    }
    // SAFETY: the first `count` entries of `msgs` are initialised and point at `count` distinct
    // iovecs, each covering a distinct slot of `slots.bufs`, and at `count` distinct address
    // buffers of the size given in `msg_namelen`; all of them outlive the call, and the kernel
    // writes no more than those lengths. A null timeout is allowed.
    let received = syscall!(recvmmsg(
        socket.as_raw_fd(),
        msgs.as_mut_ptr().cast::<libc::mmsghdr>(),
        count as libc::c_uint,
        0,
        ptr::null_mut(),
    ))? as usize;
    for i in 0..received.min(count) {
        // SAFETY: entry `i < count` was initialised above; the kernel only updated its lengths.
        let msg = unsafe { msgs[i].assume_init_ref() };
        slots.lens[i] = (msg.msg_len as usize).min(slots.slot_len);
        // SAFETY: the kernel wrote `msg_namelen` bytes of a socket address into `names[i]`.
        slots.peers[i] = unsafe { socket_addr(names[i].as_ptr(), msg.msg_hdr.msg_namelen) };
    }
    Ok(received)
}

/// Sends up to `slots.count()` datagrams with one `sendmmsg`. Returns how many the kernel took
/// (at least one); the rest are for the caller to retry. An error means the first datagram
/// could not be sent.
pub fn send_batch(socket: SockRef<'_>, slots: SendSlots<'_>) -> io::Result<usize> {
    let count = slots.count();
    if count == 0 {
        return Ok(0);
    }
    let mut names = [const { MaybeUninit::<RawSocketAddr>::uninit() }; BATCH_SIZE];
    let mut iovs = [const { MaybeUninit::<libc::iovec>::uninit() }; BATCH_SIZE];
    let mut msgs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; BATCH_SIZE];
    for i in 0..count {
        let payload = slots.payload(i);
        // The kernel only reads through `iov_base` for a send; the pointer is mutable because
        // `iovec` serves both directions.
        let iov = iovs[i].write(libc::iovec {
            iov_base: payload.as_ptr().cast_mut().cast(),
            iov_len: payload.len(),
        });
        let (name, name_len) = RawSocketAddr::new(slots.peers[i]);
        let name = names[i].write(name);
        let hdr = message_header(ptr::from_mut(name).cast(), name_len, iov);
        msgs[i].write(libc::mmsghdr {
            msg_hdr: hdr,
            msg_len: 0,
        });
    }
    // SAFETY: the first `count` entries of `msgs` are initialised and point at initialised
    // iovecs over live payload bytes and at initialised socket addresses of the stated length;
    // all outlive the call, and sendmmsg only reads through them (it writes `msg_len`).
    let sent = syscall!(sendmmsg(
        socket.as_raw_fd(),
        msgs.as_mut_ptr().cast::<libc::mmsghdr>(),
        count as libc::c_uint,
        0
    ))?;
    Ok(sent as usize)
}

/// A message header with one I/O vector and an address buffer, and no control data.
fn message_header(name: *mut libc::c_void, name_len: usize, iov: &mut libc::iovec) -> libc::msghdr {
    // SAFETY: `msghdr` is a plain C struct for which all-zero bytes are a valid value (null
    // pointers, zero lengths); zeroing also covers the padding fields some libcs declare.
    let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
    hdr.msg_name = name;
    hdr.msg_namelen = name_len as libc::socklen_t;
    hdr.msg_iov = iov;
    hdr.msg_iovlen = 1;
    hdr
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
