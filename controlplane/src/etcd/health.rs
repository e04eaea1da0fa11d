//! What the etcd source reports about itself, readable from any thread while it runs: whether it
//! is ready (`/ready`), how fresh its data is, how often it had to retry or resync (`/metrics`),
//! and the stub zones it read.

use super::stub::StubZone;
use crate::source::{Family, SourceReport, SourceStats};
use crate::state::StateHealth;
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
    endpoints: AtomicU64,
    stub_zones: ArcSwap<Vec<StubZone>>,
}

impl SourceHealth {
    /// Records how many endpoints the connection uses.
    pub(crate) fn set_endpoints(&self, count: usize) {
        self.endpoints.store(count as u64, Ordering::Relaxed);
    }

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

/// What `/ready` and `/metrics` read of the etcd source: its loads, its state, its persisted
/// snapshot.
#[derive(Debug)]
pub(super) struct EtcdReport {
    pub(super) stats: Arc<SourceStats>,
    pub(super) health: Arc<SourceHealth>,
    pub(super) state: Arc<StateHealth>,
}

impl SourceReport for EtcdReport {
    fn name(&self) -> &'static str {
        "etcd"
    }

    fn ready(&self) -> Result<(), &'static str> {
        if self.health.is_ready() {
            Ok(())
        } else {
            Err("etcd (no complete read yet)")
        }
    }

    fn loads(&self) -> Option<&SourceStats> {
        Some(&self.stats)
    }

    fn persisted(&self) -> Option<&StateHealth> {
        Some(&self.state)
    }

    fn families(&self, now: SystemTime) -> Vec<Family> {
        self.health.families(now)
    }
}

impl SourceHealth {
    /// The `skyline_etcd_*` families. The ages are absent until etcd first answers (until the
    /// first complete read): an age since nothing would be a made-up number.
    fn families(&self, now: SystemTime) -> Vec<Family> {
        let age = |at: Option<SystemTime>| at.map(|at| now.duration_since(at).unwrap_or(Duration::ZERO));
        let mut families = vec![
            Family::gauge(
                "skyline_etcd_watching",
                "1 while a watch follows etcd's changes; 0 while etcd is unreachable and answers are frozen.",
                self.is_watching(),
            ),
            Family::gauge(
                "skyline_etcd_revision",
                "The etcd revision the served data reflects (0 before the first read).",
                self.revision(),
            ),
            Family::counter(
                "skyline_etcd_full_syncs_total",
                "Complete reads of the prefix: the first, then one per compaction or cluster change.",
                self.full_syncs(),
            ),
            Family::counter(
                "skyline_etcd_resumes_total",
                "Broken watches resumed from the last revision seen, without a complete read.",
                self.resumes(),
            ),
            Family::counter(
                "skyline_etcd_retries_total",
                "Failed attempts to connect, read or watch, each followed by a backoff.",
                self.retries(),
            ),
            Family::counter("skyline_etcd_events_total", "Watch events received.", self.events()),
            Family::gauge(
                "skyline_etcd_endpoints",
                "etcd client URLs the connection uses: those given, or with --discover the members' own.",
                self.endpoints.load(Ordering::Relaxed),
            ),
            Family::counter(
                "skyline_etcd_rejections_total",
                "Values skipped as invalid (records and settings objects), each logged once.",
                self.rejections(),
            ),
        ];
        if let Some(contact) = age(self.last_contact()) {
            families.push(Family::gauge(
                "skyline_etcd_last_contact_age_seconds",
                "Seconds since etcd last answered: how stale the served data may be.",
                contact,
            ));
        }
        if let Some(sync) = age(self.last_sync()) {
            families.push(Family::gauge(
                "skyline_etcd_last_sync_age_seconds",
                "Seconds since the last complete read of the prefix.",
                sync,
            ));
        }
        families
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Value;

    fn value(families: &[Family], name: &str) -> Option<Value> {
        families.iter().find(|f| f.name == name).map(|f| f.value)
    }

    #[test]
    fn ages_are_absent_before_etcd_first_answers() {
        let health = SourceHealth::default();
        let families = health.families(SystemTime::now());
        assert_eq!(value(&families, "skyline_etcd_watching"), Some(Value::Unsigned(0)));
        assert_eq!(value(&families, "skyline_etcd_revision"), Some(Value::Signed(0)));
        assert_eq!(value(&families, "skyline_etcd_last_contact_age_seconds"), None);
        assert_eq!(value(&families, "skyline_etcd_last_sync_age_seconds"), None);
    }

    #[test]
    fn a_synced_source_reports_its_revision_and_ages() {
        let health = SourceHealth::default();
        health.set_watching(true);
        health.synced(88);
        health.resumed();
        health.retried();
        health.received(40);
        let synced = health.last_sync().unwrap();
        let families = health.families(synced + Duration::from_millis(1500));
        assert_eq!(value(&families, "skyline_etcd_watching"), Some(Value::Unsigned(1)));
        assert_eq!(value(&families, "skyline_etcd_revision"), Some(Value::Signed(88)));
        assert_eq!(
            value(&families, "skyline_etcd_full_syncs_total"),
            Some(Value::Unsigned(1))
        );
        assert_eq!(value(&families, "skyline_etcd_events_total"), Some(Value::Unsigned(40)));
        assert_eq!(
            value(&families, "skyline_etcd_last_sync_age_seconds"),
            Some(Value::Seconds(Duration::from_millis(1500)))
        );
        assert!(value(&families, "skyline_etcd_last_contact_age_seconds").is_some());
    }

    #[test]
    fn the_report_is_ready_after_the_first_complete_read() {
        let report = EtcdReport {
            stats: Arc::default(),
            health: Arc::default(),
            state: Arc::default(),
        };
        assert_eq!(report.ready(), Err("etcd (no complete read yet)"));
        report.health.set_ready();
        assert_eq!(report.ready(), Ok(()));
        assert!(report.loads().is_some() && report.persisted().is_some());
        report.health.set_watching(false);
        report.health.retried();
        assert_eq!(report.ready(), Ok(()), "losing etcd after the first read stays ready");
    }
}
