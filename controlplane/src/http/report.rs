//! What the endpoints read: handles on the counters the data plane and the sources keep, and the
//! plain values read from them at one moment ([`Report`]), which `/ready` and `/metrics` are
//! pure functions of.

use crate::etcd::{EtcdSource, SourceHealth};
use crate::kubernetes::{KubernetesHealth, KubernetesSource};
use crate::source::{FileSource, SourceStats};
use skyline_dataplane::stats::{StatsReader, Totals};
use skyline_dataplane::SnapshotCell;
use std::sync::atomic::{AtomicBool, Ordering};
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
}

impl Observed {
    /// Reports on the data plane's counters, the snapshot it serves from `served`, and `sources`.
    pub fn new(dns: StatsReader, served: SnapshotCell, sources: Sources) -> Observed {
        Observed {
            dns,
            served,
            sources,
            draining: Arc::new(AtomicBool::new(false)),
        }
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
}

impl Sources {
    /// The SkyDNS data source in use, the records file or etcd (either may be absent: an empty
    /// zone); the Kubernetes source is added once it exists, with [`Sources::add_kubernetes`].
    pub fn new(records_file: Option<&FileSource>, etcd: Option<&EtcdSource>) -> Sources {
        Sources {
            records_file: records_file.map(FileSource::stats),
            etcd: etcd.map(|source| (source.stats(), source.health())),
            kubernetes: None,
        }
    }

    /// Reports on the Kubernetes source too.
    pub fn add_kubernetes(&mut self, source: &KubernetesSource) {
        self.kubernetes = Some(source.health());
    }
}

/// Every value the endpoints report, read at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Report {
    /// The process is shutting down: still answering, no longer taking new clients.
    pub(crate) draining: bool,
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
