//! The packet I/O seam: how a worker receives and sends batches of datagrams.
//!
//! Workers see datagrams only through [`PacketIo`] and [`Datagrams`], so that another packet
//! path (AF_XDP, a test double) can replace the kernel UDP socket of [`KernelUdp`] without
//! touching answering.

mod udp;

pub use udp::KernelUdp;

pub use crate::sys::Peer;

use crate::sys::{RecvSlots, SendSlots, BATCH_SIZE};
use std::io;

/// A source and sink of datagrams, registered in a worker's `mio::Poll`.
///
/// Readiness is edge-triggered: after a readable event the worker calls [`PacketIo::recv`]
/// until it reports `WouldBlock` (or comes back to it on its next turn without waiting).
pub trait PacketIo: mio::event::Source {
    /// Receives as many waiting datagrams as fit into `batch`, replacing its contents. Returns
    /// the number received (at least one) or an error; `WouldBlock` means none was waiting.
    fn recv(&mut self, batch: &mut Datagrams) -> io::Result<usize>;

    /// Sends every datagram of `batch`, retrying what the kernel did not take at once as long
    /// as that makes progress, and reports what could not be sent.
    fn send(&mut self, batch: &Datagrams) -> SendReport;

    /// Stops new flows from reaching this path while what it already holds stays readable and
    /// replies can still go out: the last step of a drain, so that closing it loses nothing.
    fn retire(&mut self) -> io::Result<()>;
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

/// A batch of up to [`BATCH_SIZE`] datagrams with their peers, in buffers allocated once and
/// reused for every batch: receiving and replying allocate nothing per packet.
pub struct Datagrams {
    bufs: Box<[u8]>,
    slot_len: usize,
    lens: [usize; BATCH_SIZE],
    peers: [Peer; BATCH_SIZE],
    len: usize,
}

impl std::fmt::Debug for Datagrams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Datagrams")
            .field("slot_len", &self.slot_len)
            .field("len", &self.len)
            .finish()
    }
}

impl Datagrams {
    /// An empty batch whose datagrams may each hold up to `slot_len` bytes.
    pub fn new(slot_len: usize) -> Datagrams {
        Datagrams {
            bufs: vec![0; slot_len * BATCH_SIZE].into_boxed_slice(),
            slot_len,
            lens: [0; BATCH_SIZE],
            peers: [Peer::default(); BATCH_SIZE],
            len: 0,
        }
    }

    /// Number of datagrams held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no datagram.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether no further datagram fits.
    pub fn is_full(&self) -> bool {
        self.len == BATCH_SIZE
    }

    /// Empties the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Datagram `i`: its payload and its peer. The peer is lent, not copied: a reply's copy of
    /// it goes from memory to memory in two moves, where one taken apart into registers and
    /// put back together cost every query thirty.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<(&[u8], &Peer)> {
        if i >= self.len {
            return None;
        }
        let start = i * self.slot_len;
        Some((&self.bufs[start..start + self.lens[i]], &self.peers[i]))
    }

    /// Appends a datagram for `peer` written in place by `fill`, which gets the whole free slot
    /// and returns the length it wrote, or `None` to append nothing. Returns whether a
    /// datagram was appended (`false` also when the batch is full). Inlined into the
    /// worker's loop: as a call it cost every query a hundred instructions of moves.
    #[inline(always)]
    pub fn push_with(&mut self, peer: &Peer, fill: impl FnOnce(&mut [u8]) -> Option<usize>) -> bool {
        let Some(len) = self.free_slot().and_then(fill) else {
            return false;
        };
        self.commit(peer, len);
        true
    }

    /// The whole free slot the next datagram is written into, or `None` when the batch is
    /// full; [`Datagrams::commit`] appends what was written. For the answer loop, whose
    /// writing is too large for a closure the compiler would inline: called through one, it
    /// cost every query forty instructions of moving its captures and saving registers.
    #[inline(always)]
    pub fn free_slot(&mut self) -> Option<&mut [u8]> {
        if self.is_full() {
            return None;
        }
        let start = self.len * self.slot_len;
        Some(&mut self.bufs[start..start + self.slot_len])
    }

    /// Appends the datagram of `len` bytes written into [`Datagrams::free_slot`], for `peer`.
    /// Does nothing when the batch is full.
    #[inline(always)]
    pub fn commit(&mut self, peer: &Peer, len: usize) {
        if self.is_full() {
            return;
        }
        self.lens[self.len] = len.min(self.slot_len);
        self.peers[self.len] = *peer;
        self.len += 1;
    }

    /// Empties the batch and lends all of its slots to a receive call; follow with
    /// [`Datagrams::set_received`].
    pub fn recv_slots(&mut self) -> RecvSlots<'_> {
        self.len = 0;
        RecvSlots {
            bufs: &mut self.bufs,
            slot_len: self.slot_len,
            lens: &mut self.lens,
            peers: &mut self.peers,
        }
    }

    /// Records that a receive call filled the first `n` slots.
    pub fn set_received(&mut self, n: usize) {
        self.len = n.min(BATCH_SIZE);
        for len in &mut self.lens[..self.len] {
            *len = (*len).min(self.slot_len);
        }
    }

    /// The datagrams from index `from` on, as a send call takes them.
    pub fn send_slots(&self, from: usize) -> SendSlots<'_> {
        let from = from.min(self.len);
        SendSlots {
            bufs: &self.bufs[from * self.slot_len..],
            slot_len: self.slot_len,
            lens: &self.lens[from..self.len],
            peers: &self.peers[from..self.len],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(port: u16) -> Peer {
        Peer::from(std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)))
    }

    #[test]
    fn pushed_datagrams_read_back_with_their_peers() {
        let mut d = Datagrams::new(16);
        assert!(d.push_with(&peer(1), |buf| {
            buf[..3].copy_from_slice(b"abc");
            Some(3)
        }));
        assert!(!d.push_with(&peer(2), |_| None));
        assert!(d.push_with(&peer(3), |buf| Some(buf.len() + 100)));
        assert_eq!(d.len(), 2);
        assert_eq!(d.get(0), Some((&b"abc"[..], &peer(1))));
        assert_eq!(d.get(1).map(|(p, a)| (p.len(), *a)), Some((16, peer(3))));
        assert_eq!(d.get(2), None);
    }

    #[test]
    fn a_full_batch_takes_no_more() {
        let mut d = Datagrams::new(4);
        for i in 0..BATCH_SIZE {
            assert!(d.push_with(&peer(i as u16), |_| Some(1)));
        }
        assert!(d.is_full());
        assert!(!d.push_with(&peer(0), |_| Some(1)));
        d.clear();
        assert!(d.is_empty());
    }

    #[test]
    fn send_slots_start_at_the_requested_datagram() {
        let mut d = Datagrams::new(8);
        for i in 0..3u8 {
            d.push_with(&peer(i.into()), |buf| {
                buf[0] = i;
                Some(1)
            });
        }
        let rest = d.send_slots(1);
        assert_eq!(rest.count(), 2);
        assert_eq!(rest.bufs[0], 1);
        assert_eq!(rest.peers[0], peer(1));
        assert_eq!(d.send_slots(7).count(), 0);
    }

    #[test]
    fn received_lengths_are_clamped_to_the_slot() {
        let mut d = Datagrams::new(8);
        let slots = d.recv_slots();
        slots.lens[0] = 100;
        d.set_received(1);
        assert_eq!(d.get(0).map(|(p, _)| p.len()), Some(8));
    }
}
