//! What the hosts source reports about itself, under CoreDNS's names for the same metrics.

use crate::source::{Family, SourceReport};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The source's state, written as it loads and read by `/metrics`. `Relaxed`: for reporting,
/// not for synchronisation.
#[derive(Debug, Default)]
pub struct HostsHealth {
    entries: AtomicU64,
    reloaded_millis: AtomicU64,
}

impl HostsHealth {
    /// The data now served holds `entries` records (file and inline), loaded at `at`.
    pub fn loaded(&self, entries: usize, at: SystemTime) {
        self.entries.store(entries as u64, Ordering::Relaxed);
        let millis = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        self.reloaded_millis.store(millis, Ordering::Relaxed);
    }

    /// The records served: (name, address) pairs of the file and the inline entries.
    pub fn entries(&self) -> u64 {
        self.entries.load(Ordering::Relaxed)
    }

    /// When the data served was last loaded, as a time since the Unix epoch.
    pub fn reloaded(&self) -> Duration {
        Duration::from_millis(self.reloaded_millis.load(Ordering::Relaxed))
    }
}

/// The hosts source as `/ready` and `/metrics` see it: ready from the start, since its data is
/// read before the process serves.
#[derive(Debug)]
pub struct HostsReport {
    /// The source's state.
    pub health: Arc<HostsHealth>,
}

impl SourceReport for HostsReport {
    fn name(&self) -> &'static str {
        "hosts"
    }

    fn ready(&self) -> Result<(), &'static str> {
        Ok(())
    }

    /// CoreDNS's two families of its `hosts` plugin, under its names, so that dashboards made
    /// for CoreDNS read them.
    fn families(&self, _now: SystemTime) -> Vec<Family> {
        vec![
            Family::gauge(
                "coredns_hosts_entries",
                "The combined number of entries in hosts and Corefile.",
                self.health.entries(),
            ),
            Family::gauge(
                "coredns_hosts_reload_timestamp_seconds",
                "The timestamp of the last reload of hosts file.",
                self.health.reloaded(),
            ),
        ]
    }
}
