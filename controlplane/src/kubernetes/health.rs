//! What the Kubernetes source reports about itself, readable from any thread while it runs.

use crate::source::{Family, HistogramFamily, SourceReport};
use crate::state::StateHealth;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The kinds of Service whose DNS programming is timed, with the `service_kind` label CoreDNS
/// gives them. A selectorless headless Service's EndpointSlices carry no trigger time, so
/// CoreDNS's third kind (`headless_without_selector`) is never measured, there as here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServiceKind {
    /// A Service with a cluster IP.
    ClusterIp = 0,
    /// A headless Service (with a selector: its slices are the endpoints controller's).
    Headless = 1,
}

const SERVICE_KINDS: [(ServiceKind, &str); 2] = [
    (ServiceKind::ClusterIp, "cluster_ip"),
    (ServiceKind::Headless, "headless_with_selector"),
];

/// Upper bounds of the programming-duration buckets, in seconds: CoreDNS's, 1 ms doubling 20
/// times (to about 524 s).
const PROGRAMMING_BOUNDS: [f64; 20] = {
    let mut bounds = [0.0; 20];
    let mut i = 0;
    let mut bound = 0.001;
    while i < bounds.len() {
        bounds[i] = bound;
        bound *= 2.0;
        i += 1;
    }
    bounds
};

/// One service kind's programming durations: a count per bucket (the last `+Inf`) and their
/// sum in nanoseconds.
#[derive(Debug)]
struct Programming {
    buckets: [AtomicU64; PROGRAMMING_BOUNDS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Default for Programming {
    fn default() -> Programming {
        Programming {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_nanos: AtomicU64::new(0),
        }
    }
}

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
    programming: [Programming; 2],
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

    /// Counts the DNS programming of a Service of `kind`: `took` from the change its
    /// EndpointSlice records (`endpoints.kubernetes.io/last-change-trigger-time`) to the
    /// publication of the snapshot that answers with it.
    pub(super) fn programmed(&self, kind: ServiceKind, took: Duration) {
        let seconds = took.as_secs_f64();
        let slot = PROGRAMMING_BOUNDS
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(PROGRAMMING_BOUNDS.len());
        let programming = &self.programming[kind as usize];
        programming.buckets[slot].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        programming.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// `coredns_kubernetes_dns_programming_duration_seconds`, both service kinds.
    fn programming(&self) -> HistogramFamily {
        HistogramFamily {
            name: "coredns_kubernetes_dns_programming_duration_seconds",
            help: "Time from the change an EndpointSlice records (its last-change-trigger-time) to the publication of the snapshot that answers with it, by kind of Service.",
            label: "service_kind",
            bounds: &PROGRAMMING_BOUNDS,
            series: SERVICE_KINDS
                .iter()
                .map(|&(kind, label)| {
                    let programming = &self.programming[kind as usize];
                    let counts = programming.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
                    let sum = programming.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
                    (label, counts, sum)
                })
                .collect(),
        }
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

    fn histograms(&self) -> Vec<HistogramFamily> {
        vec![self.health.programming()]
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

    #[test]
    fn programming_durations_fall_in_coredns_buckets_by_service_kind() {
        let health = KubernetesHealth::default();
        health.programmed(ServiceKind::ClusterIp, Duration::from_millis(1));
        health.programmed(ServiceKind::ClusterIp, Duration::from_millis(3));
        health.programmed(ServiceKind::Headless, Duration::from_secs(600));
        let family = health.programming();
        assert_eq!(family.name, "coredns_kubernetes_dns_programming_duration_seconds");
        assert_eq!((family.bounds[0], family.bounds[19]), (0.001, 524.288));
        let (label, counts, sum) = &family.series[0];
        assert_eq!(*label, "cluster_ip");
        assert_eq!(
            (counts[0], counts[2], counts.iter().sum::<u64>()),
            (1, 1, 2),
            "1 ms and 3 ms"
        );
        assert!((sum - 0.004).abs() < 1e-9);
        let (label, counts, _) = &family.series[1];
        assert_eq!(*label, "headless_with_selector");
        assert_eq!(counts[20], 1, "past the last bound: +Inf");
    }
}
