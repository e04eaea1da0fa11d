//! Platforms without `recvmmsg`/`sendmmsg`: one `recv_from` / `send_to` per datagram, with the
//! same batch interface so that callers do not care which one they got.

use super::{Peer, RecvSlots, SendSlots};
use socket2::{SockAddr, SockRef};
use std::io;
use std::mem::MaybeUninit;

/// What the batched system calls of Linux keep between calls; nothing here.
#[derive(Debug, Default)]
pub struct Headers;

/// Receives datagrams one at a time until the slots are full or none is waiting. Returns how
/// many arrived (at least one), or `WouldBlock` when none was waiting.
pub fn recv_batch(socket: SockRef<'_>, slots: RecvSlots<'_>, _headers: &mut Headers) -> io::Result<usize> {
    let count = slots.capacity();
    let chunks = slots.bufs.chunks_exact_mut(slots.slot_len);
    let mut received = 0;
    for chunk in chunks.take(count) {
        let len = chunk.len();
        // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and `recv_from` only ever writes
        // initialised bytes into the buffer, so `chunk` stays fully initialised.
        let buf = unsafe { &mut *(chunk as *mut [u8] as *mut [MaybeUninit<u8>]) };
        match socket.recv_from(buf) {
            Ok((n, from)) => {
                slots.lens[received] = n.min(len);
                slots.peers[received] = from.as_socket().map(Peer::from).unwrap_or_default();
                received += 1;
            }
            Err(e) if received == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(received)
}

/// Sends datagrams one at a time. Returns how many were sent (at least one), stopping at the
/// first failure; an error means the first datagram could not be sent.
pub fn send_batch(socket: SockRef<'_>, slots: SendSlots<'_>, _headers: &mut Headers) -> io::Result<usize> {
    let mut sent = 0;
    for i in 0..slots.count() {
        match socket.send_to(slots.payload(i), &SockAddr::from(slots.peers[i].addr())) {
            Ok(_) => sent += 1,
            Err(e) if sent == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(sent)
}
