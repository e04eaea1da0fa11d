//! What the Kubernetes source reports about itself, readable from any thread while it runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The source's state. Updated with `Relaxed` stores: it is for reporting (`/ready`, metrics,
/// tests), not for synchronisation (the snapshot cell is that).
#[derive(Debug, Default)]
pub struct KubernetesHealth {
    ready: AtomicBool,
    lists: AtomicU64,
    events: AtomicU64,
    errors: AtomicU64,
    builds: AtomicU64,
    full_builds: AtomicU64,
}

impl KubernetesHealth {
    /// Whether every watch has listed once and the cluster zones are served from that data.
    /// False before (the zones answer SERVFAIL); stays true when the API server is lost later,
    /// since the last data keeps serving.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Complete lists of any kind: one per kind at start, one more per watch expired (410 Gone)
    /// or restarted after an outage.
    pub fn lists(&self) -> u64 {
        self.lists.load(Ordering::Relaxed)
    }

    /// Objects received, listed or watched.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Failed lists or watches, each followed by a backoff.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Snapshots of the cluster zones published.
    pub fn builds(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }

    /// Of [`KubernetesHealth::builds`], those that built the cluster zones whole: the first
    /// sync. Every other one (a watch event, a re-list, a Namespace that comes or goes, a new
    /// SkyDNS snapshot) compiled only the names its change reached; this tells the two apart,
    /// since a whole build costs a large cluster a hundred times more.
    pub fn full_builds(&self) -> u64 {
        self.full_builds.load(Ordering::Relaxed)
    }

    pub(super) fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    pub(super) fn listed(&self) {
        self.lists.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn event(&self) {
        self.events.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn built(&self) {
        self.builds.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn built_whole(&self) {
        self.full_builds.fetch_add(1, Ordering::Relaxed);
    }
}
