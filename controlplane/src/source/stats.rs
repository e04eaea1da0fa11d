//! Counters a source keeps about its loads, readable from any thread while it runs.

use std::sync::atomic::AtomicU64;

/// What a source has loaded and how its reloads went. Loads update these with `Relaxed` stores:
/// they are for metrics and tests, not for synchronisation (the snapshot cell is that).
#[derive(Debug, Default)]
pub struct SourceStats {
    /// Records in the snapshot currently published (a gauge).
    pub records_loaded: AtomicU64,
    /// Records skipped as invalid in the load that produced the current snapshot (a gauge): each
    /// was logged with its key and reason.
    pub records_rejected: AtomicU64,
    /// Loads that published a snapshot, the first one included (a counter).
    pub reloads: AtomicU64,
    /// Loads that failed and kept the previous snapshot (a counter).
    pub reload_failures: AtomicU64,
    /// Generation of the last snapshot this source published (0 before the first).
    pub generation: AtomicU64,
}
