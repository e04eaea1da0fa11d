//! Linux: one `recvmmsg` fills a whole batch of slots, one `sendmmsg` sends one.
//!
//! The message headers, I/O vectors and socket addresses live in a [`Headers`] per socket and
//! direction, allocated once. Both directions use the same buffers from call to call, so the
//! headers are pointed at them only when they change; a call writes just the lengths.

use super::peer::NAME_ROOM;
use super::{RecvSlots, SendSlots, BATCH_SIZE};
use socket2::SockRef;
use std::fmt;
use std::io;
use std::mem;
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
/// datagrams it brought, cost tens of instructions per query at common batch sizes, and so did
/// pointing each entry at its buffer and address on every send; now a call writes only each
/// entry's lengths. The addresses are the slots' own [`super::Peer`]s, which the kernel reads
/// and writes in place.
pub struct Headers {
    iovs: Box<[libc::iovec; BATCH_SIZE]>,
    msgs: Box<[libc::mmsghdr; BATCH_SIZE]>,
    /// The receive buffers (address, length, slot length, slot count, peers' address) the
    /// headers point at now. A socket receives into the same buffers every time, so a receive
    /// writes its headers only when these change, and resets afterwards just the address
    /// lengths the kernel overwrote.
    receiving_into: (usize, usize, usize, usize, usize),
    /// The send buffers (address, slot length, peers' address) the first `.3` headers point at
    /// now: a worker sends its replies from the same buffers every time.
    sending_from: (usize, usize, usize, usize),
}

impl Default for Headers {
    fn default() -> Headers {
        // SAFETY: `iovec` and `mmsghdr` are plain C structs for which all-zero bytes are valid
        // values (null pointers, zero lengths); zeroing also covers the padding fields some
        // libcs declare.
        let (iovs, msgs) = unsafe { (mem::zeroed(), mem::zeroed()) };
        let mut headers = Headers {
            iovs: Box::new(iovs),
            msgs: Box::new(msgs),
            receiving_into: (0, 0, 0, 0, 0),
            sending_from: (0, 0, 0, 0),
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
// it, and at the buffers and peers of a call's borrow: a send writes them anew, a receive first
// checks that they describe the buffers and peers it borrows. Nothing reads them between calls,
// so the value may move to another thread.
unsafe impl Send for Headers {}

impl Headers {
    /// Points entry `i < count` of each header at its I/O vector and at the address `name(i)`
    /// gives, with its length. The I/O vectors' base pointer is taken after every write
    /// through references, so that it stays valid until the system call.
    fn point(&mut self, count: usize, mut name: impl FnMut(usize) -> (*mut libc::c_void, libc::socklen_t)) {
        let iovs = self.iovs.as_mut_ptr();
        for (i, msg) in self.msgs.iter_mut().take(count).enumerate() {
            (msg.msg_hdr.msg_name, msg.msg_hdr.msg_namelen) = name(i);
            msg.msg_hdr.msg_iov = iovs.wrapping_add(i);
        }
    }
}

/// Receives up to `slots.capacity()` datagrams with one `recvmmsg`. Returns how many arrived
/// (at least one), or `WouldBlock` when none is waiting. A datagram larger than its slot is cut
/// to the slot's length.
pub fn recv_batch(socket: SockRef<'_>, slots: RecvSlots<'_>, headers: &mut Headers) -> io::Result<usize> {
    let count = slots.capacity();
    if count == 0 {
        return Ok(0);
    }
    let peers = slots.peers.as_mut_ptr();
    let into = (
        slots.bufs.as_ptr() as usize,
        slots.bufs.len(),
        slots.slot_len,
        count,
        peers as usize,
    );
    if headers.receiving_into != into {
        let chunks = slots.bufs.chunks_exact_mut(slots.slot_len);
        for (iov, chunk) in headers.iovs.iter_mut().zip(chunks).take(count) {
            *iov = libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: chunk.len(),
            };
        }
        // The kernel writes each sender's address into its slot's peer.
        headers.point(count, |i| (peers.wrapping_add(i).cast(), NAME_ROOM));
        headers.receiving_into = into;
    }
    // SAFETY: the first `count` headers point at `count` distinct iovecs, each covering a
    // distinct slot of `slots.bufs` (written for a buffer at the same address, of the same
    // length and slot layout, so they cover exactly this borrow's slots), and at the `count`
    // distinct peers of `slots.peers` (written for peers at the same address), each as large as
    // the `msg_namelen` given (reset after every call); all of them outlive the call, and the
    // kernel writes no more than those lengths. A null timeout is allowed.
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
        slots.peers[i].set_len(msg.msg_hdr.msg_namelen);
        msg.msg_hdr.msg_namelen = NAME_ROOM;
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
    let (bufs, peers) = (slots.bufs.as_ptr(), slots.peers.as_ptr());
    let from = (bufs as usize, slots.slot_len, peers as usize);
    let (bufs_then, slot_len_then, peers_then, pointed) = headers.sending_from;
    if (bufs_then, slot_len_then, peers_then) != from || pointed < count {
        for (i, iov) in headers.iovs.iter_mut().enumerate().take(count) {
            // The kernel only reads through `iov_base` for a send; the pointer is mutable
            // because `iovec` serves both directions.
            iov.iov_base = bufs.wrapping_add(i * slots.slot_len).cast_mut().cast();
        }
        headers.point(count, |i| slots.peers[i].name());
        headers.sending_from = (from.0, from.1, from.2, count);
    }
    for i in 0..count {
        headers.iovs[i].iov_len = slots.lens[i].min(slots.slot_len);
        headers.msgs[i].msg_hdr.msg_namelen = slots.peers[i].name().1;
    }
    // SAFETY: the first `count` headers point at initialised iovecs (written for buffers and
    // peers at the same addresses and slot layout, so over this borrow's slots, each at most a
    // slot long: `count` slots fit in `slots.bufs`) and at the `count` peers of `slots.peers`,
    // initialised socket addresses of the stated length; all outlive the call, and sendmmsg
    // only reads through them (it writes `msg_len`).
    let sent = syscall!(sendmmsg(
        socket.as_raw_fd(),
        headers.msgs.as_mut_ptr(),
        count as libc::c_uint,
        0
    ))?;
    Ok(sent as usize)
}
