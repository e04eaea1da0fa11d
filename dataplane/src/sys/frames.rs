//! Batches of datagrams in memory a packet path owns: the worker's own buffers for kernel
//! sockets, or frames of an AF_XDP UMEM that the kernel reads and writes directly.
//!
//! A batch is a list of slots, each a fixed-size window at some offset of its memory. For a
//! batch in its own buffer the slots are consecutive and never move. For a batch over a shared
//! mapping (an AF_XDP UMEM) the packet path lends it frames: which slot sits where changes from
//! batch to batch, and only `sys::xdp` may say so, because only it knows which frames the
//! kernel holds at the moment. That is what keeps the slots of every batch over one mapping
//! apart from each other and from the kernel's, and why the lending calls are private to `sys`.

use super::{Peer, RecvSlots, SendSlots, BATCH_SIZE};
use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

/// A batch of up to [`BATCH_SIZE`] datagrams with their peers, in memory allocated once and
/// reused for every batch: receiving and replying allocate nothing per packet.
pub struct Datagrams {
    /// Start of `memory`: every slot is `slot_len` bytes at `base + starts[i]`.
    base: NonNull<u8>,
    memory: Memory,
    slot_len: usize,
    starts: [usize; BATCH_SIZE],
    lens: [usize; BATCH_SIZE],
    peers: [Peer; BATCH_SIZE],
    len: usize,
    /// Slots that have a place in memory: all of them for a batch in its own buffer, those
    /// lent so far for one over a mapping.
    capacity: usize,
}

/// Who owns a batch's memory. The batch keeps it alive: a mapping shared with a packet path
/// stays mapped for as long as any batch over it exists.
enum Memory {
    Own(Box<[u8]>),
    #[cfg_attr(not(all(target_os = "linux", not(skyline_portable_io))), allow(dead_code))]
    Shared(Arc<Mapping>),
}

// SAFETY: `base` points into `memory`, which the value owns (or shares through an `Arc` of a
// `Send + Sync` mapping); every access through it goes through `&self` or `&mut self`, so moving
// the batch to another thread moves the only access to its slots with it.
unsafe impl Send for Datagrams {}

impl fmt::Debug for Datagrams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Datagrams")
            .field("slot_len", &self.slot_len)
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl Datagrams {
    /// An empty batch in a buffer of its own, whose datagrams may each hold up to `slot_len`
    /// bytes.
    pub fn new(slot_len: usize) -> Datagrams {
        let mut bufs = vec![0; slot_len * BATCH_SIZE].into_boxed_slice();
        let base = NonNull::new(bufs.as_mut_ptr()).unwrap_or(NonNull::dangling());
        Datagrams {
            base,
            memory: Memory::Own(bufs),
            slot_len,
            starts: std::array::from_fn(|i| i * slot_len),
            lens: [0; BATCH_SIZE],
            peers: [Peer::default(); BATCH_SIZE],
            len: 0,
            capacity: BATCH_SIZE,
        }
    }

    /// An empty batch over `mapping` with no slot yet: the packet path lends it frames with
    /// [`Datagrams::lend`].
    #[cfg_attr(not(all(target_os = "linux", not(skyline_portable_io))), allow(dead_code))]
    pub(super) fn over(mapping: Arc<Mapping>, slot_len: usize) -> Datagrams {
        Datagrams {
            base: mapping.base,
            memory: Memory::Shared(mapping),
            slot_len,
            starts: [0; BATCH_SIZE],
            lens: [0; BATCH_SIZE],
            peers: [Peer::default(); BATCH_SIZE],
            len: 0,
            capacity: 0,
        }
    }

    /// Number of datagrams held.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no datagram.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether no further datagram fits.
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// Empties the batch, keeping its memory.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Datagram `i`: its payload and its peer. The peer is lent, not copied: a reply's copy of
    /// it goes from memory to memory in a few moves, where one taken apart into registers and
    /// put back together cost every query thirty.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<(&[u8], &Peer)> {
        if i >= self.len {
            return None;
        }
        // SAFETY: slot `i < len <= capacity` was placed by `new` or `lend`, both of which keep
        // `starts[i] + slot_len` within the memory, and `lens[i] <= slot_len`; the slot overlaps
        // no other batch's slot and no frame the kernel holds (see the module's comment), and
        // `&self` keeps this batch from writing it meanwhile.
        let payload = unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(self.starts[i]), self.lens[i]) };
        Some((payload, &self.peers[i]))
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
        // SAFETY: as in `get`, for slot `len < capacity`; `&mut self` makes the borrow the
        // only one of this batch's memory.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(self.starts[self.len]), self.slot_len) })
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
    /// [`Datagrams::set_received`]. A batch over a mapping has no consecutive slots to lend:
    /// it gets none, and the receive returns nothing.
    pub fn recv_slots(&mut self) -> RecvSlots<'_> {
        self.len = 0;
        let bufs: &mut [u8] = match &mut self.memory {
            Memory::Own(bufs) => bufs,
            Memory::Shared(_) => &mut [],
        };
        RecvSlots {
            bufs,
            slot_len: self.slot_len,
            lens: &mut self.lens,
            peers: &mut self.peers,
        }
    }

    /// Records that a receive call filled the first `n` slots.
    pub fn set_received(&mut self, n: usize) {
        self.len = n.min(self.capacity);
        for len in &mut self.lens[..self.len] {
            *len = (*len).min(self.slot_len);
        }
    }

    /// The datagrams from index `from` on, as a send call takes them. A batch over a mapping
    /// offers none: its datagrams leave through the path that lent its frames.
    pub fn send_slots(&self, from: usize) -> SendSlots<'_> {
        let from = from.min(self.len);
        let bufs: &[u8] = match &self.memory {
            Memory::Own(bufs) => &bufs[from * self.slot_len..],
            Memory::Shared(_) => &[],
        };
        SendSlots {
            bufs,
            slot_len: self.slot_len,
            lens: &self.lens[from..self.len],
            peers: &self.peers[from..self.len],
        }
    }

    /// Slots that have a place in memory (see the field).
    #[cfg_attr(not(all(target_os = "linux", not(skyline_portable_io))), allow(dead_code))]
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Lends the batch the window at `start` of its mapping as slot `i`, which must be the
    /// next slot without one. Returns `false`, changing nothing, when the window would not fit
    /// the mapping or the batch already has all its slots. The caller promises that the window
    /// overlaps no other lent window and no frame the kernel holds until it takes it back.
    #[cfg_attr(not(all(target_os = "linux", not(skyline_portable_io))), allow(dead_code))]
    pub(super) fn lend(&mut self, start: usize) -> bool {
        let Memory::Shared(mapping) = &self.memory else {
            return false;
        };
        let fits = start.checked_add(self.slot_len).is_some_and(|end| end <= mapping.len);
        if !fits || self.capacity == BATCH_SIZE {
            return false;
        }
        self.starts[self.capacity] = start;
        self.capacity += 1;
        true
    }

    /// Takes every lent slot back, empties the batch, and hands the slots' windows to `take`.
    #[cfg_attr(not(all(target_os = "linux", not(skyline_portable_io))), allow(dead_code))]
    pub(super) fn take_back(&mut self, mut take: impl FnMut(usize)) {
        if let Memory::Shared(_) = self.memory {
            for &start in &self.starts[..self.capacity] {
                take(start);
            }
            self.capacity = 0;
        }
        self.len = 0;
    }

    /// Places received datagram `i` (the next one) at `start` of the mapping, `len` bytes from
    /// `peer`, taking the window as slot `i`. Returns `false`, changing nothing, when it would
    /// not fit the mapping or the batch is full. The same promise as for [`Datagrams::lend`].
    #[cfg_attr(not(all(target_os = "linux", not(skyline_portable_io))), allow(dead_code))]
    pub(super) fn place_received(&mut self, start: usize, len: usize, peer: Peer) -> bool {
        if self.capacity != self.len || !self.lend(start) {
            return false;
        }
        self.lens[self.len] = len.min(self.slot_len);
        self.peers[self.len] = peer;
        self.len += 1;
        true
    }

    /// The windows of the datagrams held, with their lengths and peers, for a packet path that
    /// writes headers in front of them.
    #[cfg_attr(not(all(target_os = "linux", not(skyline_portable_io))), allow(dead_code))]
    pub(super) fn held(&self) -> impl Iterator<Item = (usize, usize, &Peer)> + '_ {
        (0..self.len).map(|i| (self.starts[i], self.lens[i], &self.peers[i]))
    }
}

/// Memory mapped for a packet path and shared by its batches: page-aligned, zeroed, resident
/// from the start, unmapped when the last batch and the path are gone.
pub struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; who may touch which part of it is settled by the
// batches' lending (see the module's comment), not by the thread that holds it.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` gives no access to the memory by itself.
unsafe impl Sync for Mapping {}

impl fmt::Debug for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapping").field("len", &self.len).finish()
    }
}

impl Mapping {
    /// Maps `len` bytes of anonymous memory, faulted in at once so that the first packets do
    /// not pay for it.
    pub fn anonymous(len: usize) -> io::Result<Arc<Mapping>> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty mapping"));
        }
        #[cfg(target_os = "linux")]
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        #[cfg(not(target_os = "linux"))]
        let flags = libc::MAP_PRIVATE | libc::MAP_ANON;
        // SAFETY: an anonymous private mapping at an address the kernel picks touches no
        // existing memory; the result is checked before use.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(addr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Arc::new(Mapping { base, len }))
    }

    /// Maps `len` bytes of a new memory file, shared, and returns the file with the mapping:
    /// memory that another process can map too through the file's descriptor, which is how an
    /// AF_XDP UMEM outlives the process that registered it (see `sys/xdp/handover.rs`).
    #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
    pub fn memory_file(len: usize, name: &std::ffi::CStr) -> io::Result<(std::os::fd::OwnedFd, Arc<Mapping>)> {
        use std::os::fd::FromRawFd;
        // SAFETY: `name` is a NUL-terminated string that outlives the call; the result is
        // checked and owned at once.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if raw == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor just created and owned by nothing else.
        let file = std::fs::File::from(unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) });
        file.set_len(len as u64)?;
        let file = std::os::fd::OwnedFd::from(file);
        let mapping = Mapping::of_file(std::os::fd::AsFd::as_fd(&file))?;
        Ok((file, mapping))
    }

    /// Maps the whole of the memory file `file`, shared: the same pages the process that
    /// made it (and any other holding it) sees. Faulted in at once, as an anonymous mapping is.
    #[cfg(all(target_os = "linux", not(skyline_portable_io)))]
    pub fn of_file(file: std::os::fd::BorrowedFd<'_>) -> io::Result<Arc<Mapping>> {
        use std::os::fd::AsRawFd;
        let len = std::fs::File::from(file.try_clone_to_owned()?).metadata()?.len();
        let len = usize::try_from(len).map_err(|_| io::Error::other("a memory file larger than memory"))?;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty memory file"));
        }
        // SAFETY: a shared mapping of the whole file at an address the kernel picks touches no
        // existing memory of this process; the result is checked before use.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(addr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Arc::new(Mapping { base, len }))
    }

    /// The mapping's first byte, for handing it to the kernel.
    #[cfg_attr(not(all(target_os = "linux", not(skyline_portable_io))), allow(dead_code))]
    pub(super) fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (it never is: an empty mapping cannot be made).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base..base + len` is a mapping this value made and nothing else unmaps; no
        // batch over it is left (each holds an `Arc` of it).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn peer(port: u16) -> Peer {
        Peer::from(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)))
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

    #[test]
    fn a_batch_over_a_mapping_uses_only_the_windows_lent_to_it() {
        let mapping = Mapping::anonymous(4 * 4096).unwrap();
        let mut batch = Datagrams::over(Arc::clone(&mapping), 100);
        assert!(batch.is_full(), "no window lent yet");
        assert_eq!(batch.recv_slots().capacity(), 0);
        assert!(batch.lend(4096 + 64));
        assert!(!batch.lend(4 * 4096 - 50), "a window past the mapping's end");
        assert!(batch.push_with(&peer(7), |out| {
            assert_eq!(out.len(), 100);
            out[..2].copy_from_slice(b"hi");
            Some(2)
        }));
        assert!(batch.is_full());
        assert_eq!(batch.get(0), Some((&b"hi"[..], &peer(7))));
        assert_eq!(
            batch.held().map(|(start, len, _)| (start, len)).collect::<Vec<_>>(),
            [(4096 + 64, 2)]
        );
        assert_eq!(batch.send_slots(0).count(), 0, "a mapped batch leaves through its path");
        let mut back = Vec::new();
        batch.take_back(|start| back.push(start));
        assert_eq!(back, [4096 + 64]);
        assert!(batch.is_empty() && batch.is_full());
    }

    #[test]
    fn received_datagrams_are_placed_where_they_arrived() {
        let mapping = Mapping::anonymous(2 * 4096).unwrap();
        let mut batch = Datagrams::over(mapping, 64);
        assert!(batch.place_received(300, 5, peer(1)));
        assert!(batch.place_received(4096 + 300, 500, peer(2)));
        assert_eq!(batch.len(), 2);
        assert_eq!(
            batch.get(1).map(|(p, a)| (p.len(), *a)),
            Some((64, peer(2))),
            "cut to the slot"
        );
        assert!(!batch.place_received(2 * 4096 - 10, 5, peer(3)), "past the end");
        assert_eq!(batch.len(), 2);
    }
}
