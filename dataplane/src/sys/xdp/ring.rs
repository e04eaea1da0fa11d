//! The four single-producer, single-consumer rings an AF_XDP socket shares with the kernel.
//!
//! Each ring is a power-of-two array of entries with a producer and a consumer index that only
//! ever grow (wrapping at 2³²). One side writes entries and then publishes them by storing the
//! producer index with release ordering; the other reads the producer index with acquire
//! ordering, reads the entries, and hands them back by storing the consumer index. skyline
//! produces on the fill and transmit rings and consumes the receive and completion rings.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// One mapped ring of entries `T` (`u64` frame addresses or `xdp_desc` descriptors).
pub(super) struct Ring<T> {
    map: NonNull<libc::c_void>,
    map_len: usize,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    /// This side's own index (the producer's for a ring it fills, the consumer's for one it
    /// reads), published with [`Ring::publish`].
    own: u32,
    /// The other side's index as last read; re-read only when the cached value says the ring
    /// is full (producing) or empty (consuming).
    other: u32,
}

// SAFETY: the ring's memory is a mapping the value owns (unmapped on drop); the kernel is the
// only other party, and it synchronises through the atomics. Moving the value to another thread
// moves the only user-space access with it.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps the ring of `size` entries that `socket` offers at page offset `pgoff`, laid out as
    /// `offsets` says; `producing` when this side writes its entries.
    pub(super) fn map(
        socket: BorrowedFd<'_>,
        pgoff: u64,
        offsets: &libc::xdp_ring_offset,
        size: u32,
        producing: bool,
    ) -> io::Result<Ring<T>> {
        let map_len = offsets.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: a shared mapping of the socket's ring at the offset the kernel documents for
        // it, of the length its offsets and the size we set give; the result is checked.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                socket.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = NonNull::new(map).ok_or_else(|| io::Error::other("mmap returned null"))?;
        let at = |offset: u64| map.cast::<u8>().as_ptr().wrapping_add(offset as usize);
        let (producer, consumer, flags, entries) = (
            at(offsets.producer).cast::<AtomicU32>(),
            at(offsets.consumer).cast::<AtomicU32>(),
            at(offsets.flags).cast::<AtomicU32>(),
            at(offsets.desc).cast::<T>(),
        );
        let nonnull = |p| NonNull::new(p).ok_or_else(|| io::Error::other("ring offset at null"));
        let mut ring = Ring {
            map,
            map_len,
            producer: nonnull(producer)?,
            consumer: nonnull(consumer)?,
            flags: nonnull(flags)?,
            entries: NonNull::new(entries).ok_or_else(|| io::Error::other("ring offset at null"))?,
            mask: size - 1,
            own: 0,
            other: 0,
        };
        ring.resync(producing);
        Ok(ring)
    }

    /// Takes this side's index and the other side's from the ring itself, as another process
    /// that used the ring before this one left them: how a ring is taken over in an upgrade.
    pub(super) fn resync(&mut self, producing: bool) {
        (self.own, self.other) = match producing {
            true => (self.load_producer(), self.load_consumer()),
            false => (self.load_consumer(), self.load_producer()),
        };
    }

    fn load_producer(&self) -> u32 {
        // SAFETY: `producer` points at the ring's producer index inside the live mapping; the
        // kernel only ever accesses it atomically.
        unsafe { self.producer.as_ref() }.load(Ordering::Acquire)
    }

    fn load_consumer(&self) -> u32 {
        // SAFETY: as for `load_producer`, for the consumer index.
        unsafe { self.consumer.as_ref() }.load(Ordering::Acquire)
    }

    /// Whether the kernel asked to be woken (`XDP_RING_NEED_WAKEUP`) before it looks at this
    /// ring again.
    pub(super) fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `load_producer`, for the flags word.
        unsafe { self.flags.as_ref() }.load(Ordering::Acquire) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    fn slot(&self, index: u32) -> *mut T {
        self.entries.as_ptr().wrapping_add((index & self.mask) as usize)
    }

    // Producing (fill and transmit rings).

    /// Entries that can be written now, at most `want`.
    pub(super) fn free(&mut self, want: u32) -> u32 {
        let size = self.mask + 1;
        let mut free = size - self.own.wrapping_sub(self.other);
        if free < want {
            self.other = self.load_consumer();
            free = size - self.own.wrapping_sub(self.other);
        }
        free.min(want)
    }

    /// Writes the next entry; the caller made room with [`Ring::free`]. Not visible to the
    /// kernel before [`Ring::publish`].
    pub(super) fn push(&mut self, entry: T) {
        // SAFETY: the slot lies inside the mapped entry array (the index is masked) and the
        // kernel does not read it until the producer index passes it, which `publish` does.
        unsafe { self.slot(self.own).write(entry) };
        self.own = self.own.wrapping_add(1);
    }

    /// Hands the pushed entries to the kernel.
    pub(super) fn publish(&self) {
        // SAFETY: as for `load_producer`; the release store orders the entries' writes before
        // the index that makes them visible.
        unsafe { self.producer.as_ref() }.store(self.own, Ordering::Release);
    }

    /// The entry pushed `back` entries before the producer index (1: the last one), as it was
    /// written: the kernel only reads the entries of a ring it consumes, and nothing
    /// overwrites one before this side pushes a ring's worth after it.
    pub(super) fn pushed(&self, back: u32) -> T {
        // SAFETY: the slot lies inside the mapped entry array (the index is masked); this side
        // is the only writer of the entries and the kernel only reads them, so the read sees
        // the entry as written.
        unsafe { self.slot(self.own.wrapping_sub(back)).read() }
    }

    /// This side's index: how many entries it has produced or consumed since the ring was
    /// made (wrapping).
    pub(super) fn index(&self) -> u32 {
        self.own
    }

    /// Entries pushed and not yet consumed by the kernel.
    pub(super) fn outstanding(&mut self) -> u32 {
        self.other = self.load_consumer();
        self.own.wrapping_sub(self.other)
    }

    // Consuming (receive and completion rings).

    /// Entries ready to be read, at most `want`.
    pub(super) fn ready(&mut self, want: u32) -> u32 {
        let mut ready = self.other.wrapping_sub(self.own);
        if ready < want {
            self.other = self.load_producer();
            ready = self.other.wrapping_sub(self.own);
        }
        ready.min(want)
    }

    /// Entry `i` past the consumer index; `i` below what [`Ring::ready`] said.
    pub(super) fn peek(&self, i: u32) -> T {
        // SAFETY: the kernel published this entry (the acquire load of its producer index in
        // `ready` orders its write before this read) and will not overwrite it before the
        // consumer index passes it.
        unsafe { self.slot(self.own.wrapping_add(i)).read() }
    }

    /// Hands `n` read entries back to the kernel.
    pub(super) fn release(&mut self, n: u32) {
        self.own = self.own.wrapping_add(n);
        // SAFETY: as for `load_producer`; the release store orders the reads before the index
        // that lets the kernel reuse the entries.
        unsafe { self.consumer.as_ref() }.store(self.own, Ordering::Release);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `map` with this length and nothing else unmaps it.
        unsafe {
            libc::munmap(self.map.as_ptr(), self.map_len);
        }
    }
}
