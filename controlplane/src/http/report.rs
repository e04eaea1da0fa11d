//! What the endpoints read: handles on the counters the data plane and the sources keep, and the
//! plain values read from them at one moment ([`Report`]), which `/ready` and `/metrics` are
//! pure functions of.

use crate::etcd::{EtcdSource, SourceHealth};
use crate::kubernetes::{KubernetesHealth, KubernetesSource};
use crate::source::{FileSource, SourceStats};
use crate::state::StateHealth;
use skyline_dataplane::stats::{StatsReader, Totals};
use skyline_dataplane::SnapshotCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Everything the endpoints report on. Each part is shared with its owner (a worker, a source)
/// and only read here, with atomic loads, so that a scrape never waits on nor slows the owner.
#[derive(Debug, Clone)]
pub struct Observed {
    dns: StatsReader,
    served: SnapshotCell,
    sources: Sources,
    draining: Arc<AtomicBool>,
    reloads: Arc<ReloadStats>,
}

/// What came of the SIGHUP reloads of the configuration, kept by whoever reloads.
#[derive(Debug)]
pub struct ReloadStats {
    applied: AtomicU64,
    rejected: AtomicU64,
    last_applied: AtomicU64,
    restart_pending: AtomicBool,
}

impl Default for ReloadStats {
    fn default() -> ReloadStats {
        ReloadStats {
            applied: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            last_applied: AtomicU64::new(unix_seconds(SystemTime::now())),
            restart_pending: AtomicBool::new(false),
        }
    }
}

impl ReloadStats {
    /// A reload put its settings in force; `restart_pending` says some changed setting still
    /// waits for a restart.
    pub fn applied(&self, restart_pending: bool) {
        self.applied.fetch_add(1, Ordering::Relaxed);
        self.last_applied
            .store(unix_seconds(SystemTime::now()), Ordering::Relaxed);
        self.restart_pending.store(restart_pending, Ordering::Relaxed);
    }

    /// A reload found the configuration invalid and kept the settings in force.
    pub fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> Reloads {
        Reloads {
            applied: self.applied.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            last_applied: self.last_applied.load(Ordering::Relaxed),
            restart_pending: self.restart_pending.load(Ordering::Relaxed),
        }
    }
}

fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Observed {
    /// Reports on the data plane's counters, the snapshot it serves from `served`, and `sources`.
    pub fn new(dns: StatsReader, served: SnapshotCell, sources: Sources) -> Observed {
        Observed {
            dns,
            served,
            sources,
            draining: Arc::new(AtomicBool::new(false)),
            reloads: Arc::default(),
        }
    }

    /// Where reloads of the configuration are counted (the process start counts as the first
    /// settings applied).
    pub fn reloads(&self) -> Arc<ReloadStats> {
        Arc::clone(&self.reloads)
    }

    /// The switch that makes `/ready` say not ready from the moment the process starts to
    /// drain, so that load balancers and Kubernetes endpoints stop sending it clients while it
    /// still answers the ones already on their way.
    pub fn draining(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.draining)
    }

    /// Reads every counter now; ages are measured against `now`.
    pub(crate) fn report(&self, now: SystemTime) -> Report {
        let age = |at: Option<SystemTime>| at.map(|at| now.duration_since(at).unwrap_or(Duration::ZERO));
        Report {
            draining: self.draining.load(Ordering::Acquire),
            reloads: self.reloads.read(),
            dns: self.dns.totals(),
            generation: self.served.load().generation,
            records_file: self.sources.records_file.as_deref().map(Loads::read),
            etcd: self.sources.etcd.as_ref().map(|(stats, health)| Etcd {
                loads: Loads::read(stats),
                ready: health.is_ready(),
                watching: health.is_watching(),
                revision: health.revision(),
                full_syncs: health.full_syncs(),
                resumes: health.resumes(),
                retries: health.retries(),
                events: health.events(),
                rejections: health.rejections(),
                last_contact_age: age(health.last_contact()),
                last_sync_age: age(health.last_sync()),
            }),
            kubernetes: self.sources.kubernetes.as_deref().map(|health| Kubernetes {
                ready: health.is_ready(),
                lists: health.lists(),
                events: health.events(),
                errors: health.errors(),
                builds: health.builds(),
                full_builds: health.full_builds(),
            }),
            state: self
                .sources
                .state
                .iter()
                .map(|(source, health)| Persisted::read(source, health, now))
                .collect(),
        }
    }
}

/// The configured sources, as far as the endpoints need them: a source left out is not
/// configured, and does not count for `/ready`.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    records_file: Option<Arc<SourceStats>>,
    etcd: Option<(Arc<SourceStats>, Arc<SourceHealth>)>,
    kubernetes: Option<Arc<KubernetesHealth>>,
    /// The persisted snapshots of the sources that have one, by source name.
    state: Vec<(&'static str, Arc<StateHealth>)>,
}

impl Sources {
    /// The SkyDNS data source in use, the records file or etcd (either may be absent: an empty
    /// zone); the Kubernetes source is added once it exists, with [`Sources::add_kubernetes`].
    pub fn new(records_file: Option<&FileSource>, etcd: Option<&EtcdSource>) -> Sources {
        Sources {
            records_file: records_file.map(FileSource::stats),
            etcd: etcd.map(|source| (source.stats(), source.health())),
            kubernetes: None,
            state: etcd.map(|source| ("etcd", source.state_health())).into_iter().collect(),
        }
    }

    /// Reports on the Kubernetes source too.
    pub fn add_kubernetes(&mut self, source: &KubernetesSource) {
        self.kubernetes = Some(source.health());
        self.state.push(("kubernetes", source.state_health()));
    }
}

/// Every value the endpoints report, read at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Report {
    /// The process is shutting down: still answering, no longer taking new clients.
    pub(crate) draining: bool,
    /// The configuration reloads.
    pub(crate) reloads: Reloads,
    /// The data plane's counters, summed over the workers.
    pub(crate) dns: Totals,
    /// Generation of the snapshot the workers serve.
    pub(crate) generation: u64,
    /// The records file source, when configured.
    pub(crate) records_file: Option<Loads>,
    /// The etcd source, when configured.
    pub(crate) etcd: Option<Etcd>,
    /// The Kubernetes source, when configured.
    pub(crate) kubernetes: Option<Kubernetes>,
    /// The persisted snapshots of the configured etcd and Kubernetes sources.
    pub(crate) state: Vec<Persisted>,
}

/// A source's persisted snapshot (see [`StateHealth`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Persisted {
    /// The source's name, as metric labels give it.
    pub(crate) source: &'static str,
    /// A state directory is configured.
    pub(crate) persisting: bool,
    /// When the persisted data the source serves (stale) was current; `None` while it serves
    /// its own.
    pub(crate) stale_since: Option<SystemTime>,
    /// How old that data is.
    pub(crate) stale_age: Option<Duration>,
    pub(crate) writes: u64,
    pub(crate) write_failures: u64,
    /// When the data in the last file written was current.
    pub(crate) last_write: Option<SystemTime>,
}

impl Persisted {
    fn read(source: &'static str, health: &StateHealth, now: SystemTime) -> Persisted {
        let stale_since = health.stale_since();
        Persisted {
            source,
            persisting: health.is_persisting(),
            stale_since,
            stale_age: stale_since.map(|at| now.duration_since(at).unwrap_or(Duration::ZERO)),
            writes: health.writes(),
            write_failures: health.write_failures(),
            last_write: health.last_write(),
        }
    }
}

/// The configuration reloads (see [`ReloadStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Reloads {
    pub(crate) applied: u64,
    pub(crate) rejected: u64,
    /// When settings were last put in force (the start, or the last applied reload), in Unix
    /// seconds.
    pub(crate) last_applied: u64,
    pub(crate) restart_pending: bool,
}

/// What a SkyDNS source has loaded (see [`SourceStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Loads {
    pub(crate) records: u64,
    pub(crate) rejected: u64,
    pub(crate) loads: u64,
    pub(crate) failures: u64,
    pub(crate) generation: u64,
}

impl Loads {
    fn read(stats: &SourceStats) -> Loads {
        Loads {
            records: stats.records_loaded.load(Ordering::Relaxed),
            rejected: stats.records_rejected.load(Ordering::Relaxed),
            loads: stats.reloads.load(Ordering::Relaxed),
            failures: stats.reload_failures.load(Ordering::Relaxed),
            generation: stats.generation.load(Ordering::Relaxed),
        }
    }
}

/// The etcd source's state (see [`SourceHealth`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Etcd {
    pub(crate) loads: Loads,
    pub(crate) ready: bool,
    pub(crate) watching: bool,
    pub(crate) revision: i64,
    pub(crate) full_syncs: u64,
    pub(crate) resumes: u64,
    pub(crate) retries: u64,
    pub(crate) events: u64,
    pub(crate) rejections: u64,
    /// Time since etcd last answered; `None` before it ever did.
    pub(crate) last_contact_age: Option<Duration>,
    /// Time since the last full read completed; `None` before the first.
    pub(crate) last_sync_age: Option<Duration>,
}

/// The Kubernetes source's state (see [`KubernetesHealth`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Kubernetes {
    pub(crate) ready: bool,
    pub(crate) lists: u64,
    pub(crate) events: u64,
    pub(crate) errors: u64,
    pub(crate) builds: u64,
    pub(crate) full_builds: u64,
}
