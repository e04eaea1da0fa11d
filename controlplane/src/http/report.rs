//! What the endpoints read: handles on the counters the data plane and the sources keep, and the
//! plain values read from them at one moment ([`Report`]), which `/ready` and `/metrics` are
//! pure functions of.

use crate::source::{Family, HistogramFamily, SourceReport, SourceStats};
use crate::state::StateHealth;
use skyline_dataplane::io::QueueTotals;
use skyline_dataplane::observe::topk::TopTalkers;
use skyline_dataplane::observe::ObserveReader;
use skyline_dataplane::stats::{StatsReader, Totals, UpstreamTotals};
use skyline_dataplane::SnapshotCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Everything the endpoints report on. Each part is shared with its owner (a worker, a source)
/// and only read here, with atomic loads, so that a scrape never waits on nor slows the owner.
#[derive(Debug, Clone)]
pub struct Observed {
    dns: StatsReader,
    observe: ObserveReader,
    served: SnapshotCell,
    sources: Vec<Arc<dyn SourceReport>>,
    draining: Arc<AtomicBool>,
    reloads: Arc<ReloadStats>,
    server: String,
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
    /// Reports on the data plane's counters, the snapshot it serves from `served`, and the
    /// configured `sources`, in their order: a source left out is not configured and does not
    /// count for `/ready`; none at all (an empty zone) is ready.
    pub fn new(dns: StatsReader, served: SnapshotCell, sources: Vec<Arc<dyn SourceReport>>) -> Observed {
        Observed {
            dns,
            observe: ObserveReader::default(),
            served,
            sources,
            draining: Arc::new(AtomicBool::new(false)),
            reloads: Arc::default(),
            server: String::new(),
        }
    }

    /// Reports what the observers count too: the dnstap and query-log writers, the top
    /// talkers.
    pub fn observing(mut self, observe: ObserveReader) -> Observed {
        self.observe = observe;
        self
    }

    /// Names the DNS listen addresses in the metrics' `server` label, as CoreDNS names a
    /// server (`dns://127.0.0.1:53`; several separated by spaces), so that dashboards that group
    /// or filter by server find one.
    pub fn serving(mut self, addrs: &[SocketAddr]) -> Observed {
        self.server = addrs.iter().map(|a| format!("dns://{a}")).collect::<Vec<_>>().join(" ");
        self
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
        Report {
            draining: self.draining.load(Ordering::Acquire),
            reloads: self.reloads.read(),
            dns: {
                let mut totals = self.dns.totals();
                self.observe.add_to(&mut totals);
                totals
            },
            upstreams: self.dns.upstreams(),
            server: self.server.clone(),
            top_talkers: self.observe.top_talkers(),
            xdp: self.dns.xdp_queues(),
            generation: self.served.load().generation,
            sources: self.sources.iter().map(|source| Status::read(&**source, now)).collect(),
        }
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
    /// The forwarder's counters per upstream, summed over the workers.
    pub(crate) upstreams: Vec<UpstreamTotals>,
    /// The DNS listen addresses as the `server` label names them.
    pub(crate) server: String,
    /// The heaviest clients and names over every worker, when they are counted.
    pub(crate) top_talkers: Option<TopTalkers>,
    /// The AF_XDP receive queues served, in queue order; none without `--xdp`.
    pub(crate) xdp: Vec<QueueTotals>,
    /// Generation of the snapshot the workers serve.
    pub(crate) generation: u64,
    /// The configured sources, in their order.
    pub(crate) sources: Vec<Status>,
}

/// One source, read at one moment (see [`SourceReport`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Status {
    /// The source's name, as metric labels give it.
    pub(crate) name: &'static str,
    /// Ready, or what `/ready` says is awaited.
    pub(crate) ready: Result<(), &'static str>,
    /// Its loads, for a source that counts them.
    pub(crate) loads: Option<Loads>,
    /// Its persisted snapshot, for a source that can keep one.
    pub(crate) persisted: Option<Persisted>,
    /// The families only it has.
    pub(crate) families: Vec<Family>,
    /// The histograms only it has.
    pub(crate) histograms: Vec<HistogramFamily>,
}

impl Status {
    fn read(source: &dyn SourceReport, now: SystemTime) -> Status {
        Status {
            name: source.name(),
            ready: source.ready(),
            loads: source.loads().map(Loads::read),
            persisted: source.persisted().map(|health| Persisted::read(health, now)),
            families: source.families(now),
            histograms: source.histograms(),
        }
    }
}

/// A source's persisted snapshot (see [`StateHealth`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Persisted {
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
    fn read(health: &StateHealth, now: SystemTime) -> Persisted {
        let stale_since = health.stale_since();
        Persisted {
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

/// What a source has loaded (see [`SourceStats`]).
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
