//! What the Kubernetes source reports about itself, readable from any thread while it runs.

use crate::source::{Family, SourceReport};
use crate::state::StateHealth;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

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

/// What `/ready` and `/metrics` read of the Kubernetes source: its state and its persisted
/// snapshot. It counts lists, events and builds rather than loads.
#[derive(Debug)]
pub(super) struct KubernetesReport {
    pub(super) health: Arc<KubernetesHealth>,
    pub(super) state: Arc<StateHealth>,
}

impl SourceReport for KubernetesReport {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    fn ready(&self) -> Result<(), &'static str> {
        if self.health.is_ready() {
            Ok(())
        } else {
            Err("kubernetes (not every watch has listed yet)")
        }
    }

    fn persisted(&self) -> Option<&StateHealth> {
        Some(&self.state)
    }

    fn families(&self, _now: SystemTime) -> Vec<Family> {
        let health = &self.health;
        vec![
            Family::counter(
                "skyline_kubernetes_lists_total",
                "Complete lists: one per kind at start, one per expired or restarted watch.",
                health.lists(),
            ),
            Family::counter(
                "skyline_kubernetes_events_total",
                "API objects received, listed or watched.",
                health.events(),
            ),
            Family::counter(
                "skyline_kubernetes_errors_total",
                "Failed lists or watches, each followed by a backoff.",
                health.errors(),
            ),
            Family::counter(
                "skyline_kubernetes_builds_total",
                "Snapshots of the cluster zones published.",
                health.builds(),
            ),
            Family::counter(
                "skyline_kubernetes_full_builds_total",
                "Of those, the ones the cluster zones were built whole for; the others changed only the names a change reached.",
                health.full_builds(),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Value;

    #[test]
    fn the_report_is_ready_once_every_watch_has_listed_and_counts_its_work() {
        let report = KubernetesReport {
            health: Arc::default(),
            state: Arc::default(),
        };
        assert_eq!(report.ready(), Err("kubernetes (not every watch has listed yet)"));
        report.health.listed();
        report.health.built();
        report.health.built_whole();
        report.health.set_ready();
        assert_eq!(report.ready(), Ok(()));
        assert!(report.loads().is_none() && report.persisted().is_some());
        let families = report.families(SystemTime::now());
        let value = |name| families.iter().find(|f| f.name == name).map(|f| f.value);
        assert_eq!(value("skyline_kubernetes_lists_total"), Some(Value::Unsigned(1)));
        assert_eq!(value("skyline_kubernetes_full_builds_total"), Some(Value::Unsigned(1)));
        assert_eq!(value("skyline_kubernetes_errors_total"), Some(Value::Unsigned(0)));
    }
}
