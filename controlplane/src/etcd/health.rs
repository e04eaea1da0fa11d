//! What the etcd source reports about itself, readable from any thread while it runs: whether it
//! is ready (`/ready`), how fresh its data is, how often it had to retry or resync (`/metrics`),
//! and the stub zones it read.

use super::stub::StubZone;
use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The etcd source's state. Updated with `Relaxed` stores: it is for reporting, not for
/// synchronisation (the snapshot cell is that).
#[derive(Debug, Default)]
pub struct SourceHealth {
    ready: AtomicBool,
    watching: AtomicBool,
    revision: AtomicI64,
    last_sync_ms: AtomicU64,
    last_contact_ms: AtomicU64,
    full_syncs: AtomicU64,
    resumes: AtomicU64,
    retries: AtomicU64,
    events: AtomicU64,
    rejections: AtomicU64,
    stub_zones: ArcSwap<Vec<StubZone>>,
}

impl SourceHealth {
    /// Whether a snapshot of a complete read of etcd is being served. False until the first
    /// full sync is published (the zones answer SERVFAIL meanwhile); it stays true when etcd is
    /// lost afterwards, since the last data keeps serving.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Whether a watch is established, i.e. changes in etcd are being followed now. False while
    /// etcd is unreachable: answers are then frozen at [`SourceHealth::last_contact`].
    pub fn is_watching(&self) -> bool {
        self.watching.load(Ordering::Relaxed)
    }

    /// The etcd revision the served data reflects (0 before the first sync).
    pub fn revision(&self) -> i64 {
        self.revision.load(Ordering::Relaxed)
    }

    /// When the last full read of the prefix completed.
    pub fn last_sync(&self) -> Option<SystemTime> {
        from_millis(self.last_sync_ms.load(Ordering::Relaxed))
    }

    /// When etcd last answered (a read, a watch message): the age of the data's freshness.
    pub fn last_contact(&self) -> Option<SystemTime> {
        from_millis(self.last_contact_ms.load(Ordering::Relaxed))
    }

    /// Full reads of the prefix: the first sync, plus one per compaction or cluster change.
    pub fn full_syncs(&self) -> u64 {
        self.full_syncs.load(Ordering::Relaxed)
    }

    /// Watches resumed from the last revision seen after a broken watch, without a full read.
    pub fn resumes(&self) -> u64 {
        self.resumes.load(Ordering::Relaxed)
    }

    /// Failed attempts to connect, read or watch, each followed by a backoff.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Watch events received.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Values skipped as invalid (each logged once): records and settings objects.
    pub fn rejections(&self) -> u64 {
        self.rejections.load(Ordering::Relaxed)
    }

    /// The stub zones read from `dns/stub/` under the domain.
    pub fn stub_zones(&self) -> Arc<Vec<StubZone>> {
        self.stub_zones.load_full()
    }

    pub(super) fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    pub(super) fn set_watching(&self, watching: bool) {
        self.watching.store(watching, Ordering::Relaxed);
    }

    pub(super) fn set_revision(&self, revision: i64) {
        self.revision.store(revision, Ordering::Relaxed);
    }

    pub(super) fn synced(&self, revision: i64) {
        self.set_revision(revision);
        self.full_syncs.fetch_add(1, Ordering::Relaxed);
        self.last_sync_ms.store(now_millis(), Ordering::Relaxed);
        self.contact();
    }

    pub(super) fn contact(&self) {
        self.last_contact_ms.store(now_millis(), Ordering::Relaxed);
    }

    pub(super) fn resumed(&self) {
        self.resumes.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn received(&self, events: usize) {
        self.events.fetch_add(events as u64, Ordering::Relaxed);
    }

    pub(super) fn rejected(&self) {
        self.rejections.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn set_stub_zones(&self, zones: Vec<StubZone>) {
        self.stub_zones.store(Arc::new(zones));
    }
}

fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn from_millis(ms: u64) -> Option<SystemTime> {
    (ms != 0).then(|| UNIX_EPOCH + Duration::from_millis(ms))
}
