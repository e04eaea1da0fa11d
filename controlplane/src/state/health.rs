//! What a source reports about its persisted snapshot, readable from any thread: whether it
//! serves persisted data (stale) and since when that data is, and how its writes go.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source's persisted snapshot, for `/ready` and `/metrics`. Updated with `Relaxed` stores:
/// it is for reporting, not for synchronisation.
#[derive(Debug, Default)]
pub struct StateHealth {
    /// A state directory is configured: the data is written.
    persisting: AtomicBool,
    /// When the persisted data being served was current, in Unix milliseconds; 0 while the
    /// source serves its own data (or nothing).
    stale_since_ms: AtomicU64,
    writes: AtomicU64,
    write_failures: AtomicU64,
    last_write_ms: AtomicU64,
}

impl StateHealth {
    /// Whether the source's data is written to a state directory.
    pub fn is_persisting(&self) -> bool {
        self.persisting.load(Ordering::Relaxed)
    }

    /// When the persisted data the source serves was current: `Some` while it serves data read
    /// back at start (stale) rather than its own, `None` otherwise.
    pub fn stale_since(&self) -> Option<SystemTime> {
        from_millis(self.stale_since_ms.load(Ordering::Relaxed))
    }

    /// Files written.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Writes that failed (the previous file stays); each is logged.
    pub fn write_failures(&self) -> u64 {
        self.write_failures.load(Ordering::Relaxed)
    }

    /// When the data in the last file written was current.
    pub fn last_write(&self) -> Option<SystemTime> {
        from_millis(self.last_write_ms.load(Ordering::Relaxed))
    }

    pub(crate) fn set_persisting(&self) {
        self.persisting.store(true, Ordering::Relaxed);
    }

    /// The data now served is persisted data current at `since`, or (`None`) the source's own.
    pub(crate) fn serving(&self, since: Option<SystemTime>) {
        self.stale_since_ms
            .store(since.map_or(0, |at| millis(at).max(1)), Ordering::Relaxed);
    }

    pub(crate) fn written(&self, current_at: SystemTime) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.last_write_ms.store(millis(current_at), Ordering::Relaxed);
    }

    pub(crate) fn write_failed(&self) {
        self.write_failures.fetch_add(1, Ordering::Relaxed);
    }
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn from_millis(ms: u64) -> Option<SystemTime> {
    (ms != 0).then(|| UNIX_EPOCH + Duration::from_millis(ms))
}
