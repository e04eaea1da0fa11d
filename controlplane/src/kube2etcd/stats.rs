//! kube2etcd's counters, written by its two halves and read by `/metrics` and `/ready` with
//! atomic loads only.

use crate::http::{Endpoints, Families, Process};
use crate::source::Family;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The counters.
#[derive(Debug, Default)]
pub struct Stats {
    /// Every watch has listed once.
    pub synced: AtomicBool,
    /// This replica holds the leadership.
    pub leader: AtomicBool,
    /// Times this replica was elected.
    pub elected: AtomicU64,
    /// Keys wanted.
    pub keys: AtomicU64,
    /// Keys known to differ from etcd, not yet written.
    pub pending: AtomicU64,
    /// Keys written.
    pub puts: AtomicU64,
    /// Keys deleted.
    pub deletes: AtomicU64,
    /// Transactions committed.
    pub txns: AtomicU64,
    /// Reads of etcd followed by a write of the difference.
    pub resyncs: AtomicU64,
    /// Writes refused because a PTR changed under them.
    pub conflicts: AtomicU64,
    /// PTR keys held by someone else, left alone.
    pub foreign: AtomicU64,
    /// etcd sessions that ended in a failure.
    pub etcd_errors: AtomicU64,
    /// Failed lists and watches of the API server.
    pub kubernetes_errors: AtomicU64,
    /// Watch events applied.
    pub events: AtomicU64,
    /// From the last change's arrival to its last key written, in microseconds.
    lag_micros: AtomicU64,
}

impl Stats {
    /// A change took `lag` from its watch event's debounced arrival to etcd.
    pub fn lag(&self, lag: Duration) {
        let micros = u64::try_from(lag.as_micros()).unwrap_or(u64::MAX);
        self.lag_micros.store(micros, Ordering::Relaxed);
    }

    fn families(&self) -> Vec<Family> {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        vec![
            Family::gauge(
                "skyline_kube2etcd_synced",
                "1 once every watch of the API server has listed, else 0.",
                self.synced.load(Ordering::Relaxed),
            ),
            Family::gauge(
                "skyline_kube2etcd_leader",
                "1 while this replica holds the leadership and writes, else 0.",
                self.leader.load(Ordering::Relaxed),
            ),
            Family::counter(
                "skyline_kube2etcd_elected_total",
                "Times this replica was elected leader.",
                load(&self.elected),
            ),
            Family::gauge(
                "skyline_kube2etcd_keys",
                "Keys the cluster's records make in etcd.",
                load(&self.keys),
            ),
            Family::gauge(
                "skyline_kube2etcd_pending_keys",
                "Keys known to differ from etcd and not yet written.",
                load(&self.pending),
            ),
            Family::counter("skyline_kube2etcd_puts_total", "Keys written.", load(&self.puts)),
            Family::counter("skyline_kube2etcd_deletes_total", "Keys deleted.", load(&self.deletes)),
            Family::counter(
                "skyline_kube2etcd_txns_total",
                "Transactions committed.",
                load(&self.txns),
            ),
            Family::counter(
                "skyline_kube2etcd_resyncs_total",
                "Reads of etcd followed by a write of only the difference.",
                load(&self.resyncs),
            ),
            Family::counter(
                "skyline_kube2etcd_conflicts_total",
                "Transactions refused because a PTR changed under them.",
                load(&self.conflicts),
            ),
            Family::gauge(
                "skyline_kube2etcd_foreign_pointers",
                "PTR keys held by another writer, left alone.",
                load(&self.foreign),
            ),
            Family::counter(
                "skyline_kube2etcd_etcd_errors_total",
                "etcd sessions that ended in a failure.",
                load(&self.etcd_errors),
            ),
            Family::counter(
                "skyline_kube2etcd_kubernetes_errors_total",
                "Failed lists and watches of the API server.",
                load(&self.kubernetes_errors),
            ),
            Family::counter(
                "skyline_kube2etcd_events_total",
                "Watch events applied.",
                load(&self.events),
            ),
            Family::gauge(
                "skyline_kube2etcd_lag_seconds",
                "From the last change's arrival to its last key written in etcd.",
                Duration::from_micros(load(&self.lag_micros)),
            ),
        ]
    }
}

/// `/ready` once the watches have listed: a standby replica is ready too, so that a rollout
/// moves on; whether it leads is a metric.
impl Endpoints for std::sync::Arc<Stats> {
    fn readiness(&self) -> Result<Option<String>, String> {
        if self.synced.load(Ordering::Relaxed) {
            Ok(None)
        } else {
            Err("not ready: Kubernetes (no complete list yet)".into())
        }
    }

    fn metrics(&self) -> String {
        let mut text = Families(&self.families()).to_string();
        text.push_str(&Process::read().to_string());
        text
    }
}
