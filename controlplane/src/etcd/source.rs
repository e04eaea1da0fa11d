//! The etcd source's life: connect, read the whole prefix at one revision, watch from the next
//! one, publish a snapshot for every burst of changes, and survive every etcd fault without
//! changing what clients see.
//!
//! One task on the control-plane runtime owns all of it. Snapshot builds run on tokio's
//! blocking pool, one at a time; changes that arrive during a build wait in a queue and go into
//! the next build together, so a burst costs as many builds as fit in it, not one per change.
//! With `--dnssec`, a build also starts when the signatures come due for renewal
//! ([`crate::source::renewal`]), whether etcd is followed or out of reach.

use super::health::{EtcdReport, SourceHealth};
use super::lease::LeaseTtls;
use super::members::Members;
use super::options::{EtcdOptions, OptionsError};
use super::range::{self, RangeError, MAX_MESSAGE};
use super::state::{Changed, Put, State};
use super::stub::{stub_key_prefix, stub_zones, StubZone, Unusable};
use crate::backoff::Backoff;
use crate::skydns::{ConfigError, ConfigPatch};
use crate::source::{renewal, Overrides, Source, SourceReport, SourceStats, StartError};
use crate::state::{self, Persist, StateDir, StateHealth};
use etcd_client::{Client, ConnectOptions, EventType, WatchOptions, WatchResponse, WatchStream};
use futures::future::BoxFuture;
use skyline_dataplane::signer::{build_entries, update};
use skyline_dataplane::snapshot::skydns::Config;
use skyline_dataplane::snapshot::{publish, Snapshot, ZoneState};
use skyline_dataplane::SnapshotCell;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::task::{JoinError, JoinHandle, JoinSet};

/// How long the start waits for etcd's `/<prefix>/config` (its listen address and forwarder
/// settings apply only at start). An etcd that is down refuses at once; one that does not answer
/// costs this much, then the process starts without it and its zones answer SERVFAIL until
/// synced.
const CONFIG_WAIT: Duration = Duration::from_secs(1);

/// First pause after losing etcd.
const RETRY_FIRST: Duration = Duration::from_millis(100);
/// Longest pause: etcd's return shows in answers within about this long.
const RETRY_CAP: Duration = Duration::from_secs(3);

/// How long a burst of changes may gather before its snapshot is built: events of one client
/// writing several keys arrive within this, and no change waits longer for its build to start.
pub const DEBOUNCE: Duration = Duration::from_millis(2);

/// Longest wait for one etcd request (a page of the range read, a lease lookup, opening a
/// watch) before the attempt counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Lease lookups in flight at once.
const LEASE_LOOKUPS: usize = 64;

/// Shortest period between the rebuilds that count leased records' TTLs down.
const COUNTDOWN: Duration = Duration::from_secs(1);

/// The countdown period as a multiple of the last build's duration: with large data sets the
/// countdown takes at most a quarter of a core, and TTLs step by more than a second.
const COUNTDOWN_PER_BUILD: u32 = 4;

/// Longest a name with more than [`LARGE`](skyline_dataplane::snapshot::skydns::LARGE) records answers as it did before a change below it
/// (its compile is left to a catch-up, see [`update`]), and the catch-up period as a multiple of
/// the last build's duration: catch-ups take at most a fifth of a core.
const CATCH_UP: Duration = Duration::from_millis(250);
/// See [`CATCH_UP`].
const CATCH_UP_PER_BUILD: u32 = 4;

/// The settings of `/<prefix>/config` that only a restart applies, with their JSON names: the
/// listener, the forwarder and the features skyline does not offer.
const RESTART_ONLY: [&str; 12] = [
    "dns_addr",
    "nameservers",
    "ndot",
    "no_rec",
    "ns_rotate",
    "read_timeout",
    "rcache",
    "rcache_ttl",
    "scache",
    "dnssec",
    "systemd",
    "etcd3",
];

/// Why an attempt to read or follow etcd ended. None of these changes what is served: the last
/// snapshot stays in place and the source tries again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// The client reported an error: connection, TLS, authentication, or an etcd status.
    #[error("{}", super::plain::plain(.0))]
    Etcd(#[from] etcd_client::Error),
    /// etcd did not answer in time.
    #[error("etcd did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The watch stream ended without an error.
    #[error("the watch stream ended")]
    WatchEnded,
    /// etcd canceled the watch for a reason other than compaction (e.g. its member lost the
    /// leader).
    #[error("etcd canceled the watch: {0}")]
    WatchCanceled(String),
    /// The revision to resume from is compacted away: only a full read can catch up.
    #[error("revision {wanted} is compacted (etcd keeps revisions from {compacted} on); reading the prefix again")]
    Compacted {
        /// The revision the watch asked for.
        wanted: i64,
        /// The oldest revision etcd still has.
        compacted: i64,
    },
    /// etcd answered as another cluster, or behind the revision already served (restored from a
    /// backup): resuming could miss changes, so everything is read again.
    #[error("etcd is now cluster {cluster:x} at revision {revision}; reading the prefix again")]
    History {
        /// The cluster that answered.
        cluster: u64,
        /// Its revision.
        revision: i64,
    },
    /// The settings object read at start is invalid.
    #[error("settings under {key}: {source}")]
    Config {
        /// The settings key.
        key: String,
        /// What is wrong.
        #[source]
        source: ConfigError,
    },
}

impl SyncError {
    /// Whether the next attempt is a full read that should start at once: etcd is up, only the
    /// watch's history is gone.
    fn wants_full_sync(&self) -> bool {
        matches!(self, SyncError::Compacted { .. } | SyncError::History { .. })
    }
}

/// A change that arrived while a build held the records.
#[derive(Debug)]
enum Pending {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: i64,
        mod_revision: i64,
    },
    Delete {
        key: Vec<u8>,
        mod_revision: i64,
    },
}

/// What a finished build reports.
#[derive(Debug)]
struct Built {
    /// The snapshot published, with the settings it was built under: the next build starts
    /// from it.
    snapshot: Arc<Snapshot>,
    config: Config,
    generation: u64,
    revision: i64,
    records: usize,
    skipped: usize,
    took: Duration,
    /// The large names left stale by an update; `None` after a full build, which left none.
    stale: Option<Vec<Vec<u8>>>,
    /// Built from persisted data current at this time, not from etcd's.
    persisted: Option<SystemTime>,
}

/// The etcd v3 source: SkyDNS records under `/<prefix>/` in etcd, mirrored by a range read and a
/// watch into snapshots published on a [`SnapshotCell`].
pub struct EtcdSource {
    endpoints: Vec<String>,
    connect: ConnectOptions,
    path_prefix: String,
    /// `/<prefix>/`, the range read and watched.
    below: String,
    overrides: Overrides,
    /// The settings object in force when the process started (see [`EtcdSource::read_config`]).
    started: Option<ConfigPatch>,
    cell: SnapshotCell,
    stats: Arc<SourceStats>,
    health: Arc<SourceHealth>,
    client: Option<Client>,
    /// With `--discover`: the member list followed, and the endpoints it names.
    members: Option<Members>,
    /// `None` until the first full read.
    state: Option<State>,
    /// The next attempt must read everything (compaction, another cluster).
    full_sync_needed: bool,
    leases: LeaseTtls,
    pending: Vec<Pending>,
    build: Option<JoinHandle<Built>>,
    /// Changes not yet in a started build.
    dirty: bool,
    /// When the next build starts (armed by the first change of a burst).
    build_at: Option<Instant>,
    next_countdown: Instant,
    last_build: Duration,
    /// Large names whose changes the published snapshot does not answer with yet, and when the
    /// build that compiles them starts.
    stale: BTreeSet<Vec<u8>>,
    catch_up_at: Option<Instant>,
    /// The settings the snapshots are built with.
    config: Config,
    /// The last snapshot published and the settings it was built under: the next build
    /// compiles only what changed since, when the settings are the same.
    previous: Option<(Config, Arc<Snapshot>)>,
    /// Restart-only settings already reported as changed.
    restart_pending: Vec<&'static str>,
    stubs: (Vec<StubZone>, Vec<Unusable>),
    /// The persisted snapshot, with `--state-dir`.
    persist: Option<Persist>,
    state_health: Arc<StateHealth>,
    /// The state holds persisted data current at this time, read back at start because etcd
    /// could not be reached, until a full read replaces it.
    restored: Option<SystemTime>,
    /// [`EtcdSource::read_config`] could not reach etcd: the persisted data serves at once.
    unreachable_at_start: bool,
}

/// etcd as the process runs it: its settings read at start, waiting a second at most, then a
/// full read and a watch, forever.
impl Source for EtcdSource {
    fn report(&self) -> Arc<dyn SourceReport> {
        Arc::new(EtcdReport {
            stats: Arc::clone(&self.stats),
            health: Arc::clone(&self.health),
            state: Arc::clone(&self.state_health),
        })
    }

    /// An etcd out of reach does not stop the start: the zones answer SERVFAIL, or serve the
    /// persisted snapshot, until etcd is read.
    fn start(&mut self) -> BoxFuture<'_, Result<Option<ConfigPatch>, StartError>> {
        Box::pin(async move {
            match self.read_config(CONFIG_WAIT).await {
                Ok(config) => Ok(config),
                Err(error) => {
                    tracing::warn!(
                        %error,
                        "etcd settings not read at start; serving SERVFAIL for the domain (or the persisted snapshot, with --state-dir) until etcd is synced"
                    );
                    Ok(None)
                }
            }
        })
    }

    /// Publishes at once a snapshot of `settings` in which every zone answers SERVFAIL, then
    /// syncs with etcd and follows it; etcd's `/<prefix>/config` updates the settings live.
    fn serve(mut self: Box<Self>, settings: &Config) -> BoxFuture<'static, ()> {
        let generation = self.cell.load().generation + 1;
        let mut snapshot = build_entries(settings, &Arc::default(), generation, SystemTime::now());
        for zone in snapshot.zones.iter_mut() {
            zone.state = ZoneState::Syncing;
        }
        publish(&self.cell, Arc::new(snapshot));
        self.stats.generation.store(generation, Ordering::Relaxed);
        self.config = settings.clone();
        Box::pin(self.run())
    }
}

impl std::fmt::Debug for EtcdSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdSource")
            .field("endpoints", &self.endpoints)
            .field("below", &self.below)
            .field("connected", &self.client.is_some())
            .field("records", &self.state.as_ref().map(|s| s.records.len()))
            .field("revision", &self.state.as_ref().map(|s| s.revision))
            .field("health", &self.health)
            .finish_non_exhaustive()
    }
}

impl EtcdSource {
    /// A source for the etcd cluster `options` describe, serving keys under `/<path_prefix>/`.
    /// `overrides` are the operator's settings: they win over etcd's `/<prefix>/config`, and
    /// SkyDNS's defaults fill what neither sets; a reload that replaces them rebuilds the
    /// snapshot. Reads the TLS files; connects to nothing yet.
    pub fn new(
        options: &EtcdOptions,
        path_prefix: impl Into<String>,
        overrides: impl Into<Overrides>,
        cell: SnapshotCell,
    ) -> Result<EtcdSource, OptionsError> {
        let (endpoints, connect) = options.connect_options()?;
        let path_prefix = path_prefix.into();
        let config = Config {
            path_prefix: path_prefix.clone(),
            ..Config::default()
        };
        let members = options.discover.then(|| Members::new(&endpoints, options.uses_tls()));
        Ok(EtcdSource {
            members,
            endpoints,
            connect,
            below: format!("/{path_prefix}/"),
            path_prefix,
            overrides: overrides.into(),
            started: None,
            cell,
            stats: Arc::default(),
            health: Arc::default(),
            client: None,
            state: None,
            full_sync_needed: true,
            leases: LeaseTtls::default(),
            pending: Vec::new(),
            build: None,
            dirty: false,
            build_at: None,
            next_countdown: Instant::now(),
            last_build: Duration::ZERO,
            stale: BTreeSet::new(),
            catch_up_at: None,
            config,
            previous: None,
            restart_pending: Vec::new(),
            stubs: (Vec::new(), Vec::new()),
            persist: None,
            state_health: Arc::default(),
            restored: None,
            unreachable_at_start: false,
        })
    }

    /// The source's readiness, freshness and stub zones, shared with whoever follows them (the
    /// forwarder reads the stub zones).
    pub fn health(&self) -> Arc<SourceHealth> {
        Arc::clone(&self.health)
    }

    /// Keeps the last complete data in `dir` (`etcd.state`), and serves it, stale, when etcd
    /// cannot be reached at start (see [`crate::state`]). The file belongs to these endpoints
    /// and this prefix: one written for others is not served.
    pub fn persist_to(&mut self, dir: &StateDir) {
        let identity = state::etcd::identity(&self.endpoints, &self.path_prefix);
        let file = dir.file(state::Source::Etcd, identity);
        self.persist = Some(Persist::new(file, Arc::clone(&self.state_health)));
    }

    /// Reads `/<prefix>/config` once, giving up after `limit`: at start, so that the settings only
    /// a restart applies (the listen address, the forwarder's) are SkyDNS's from etcd when etcd
    /// is up. `Ok(None)` when the key does not exist. Must run within a tokio runtime.
    async fn read_config(&mut self, limit: Duration) -> Result<Option<ConfigPatch>, SyncError> {
        let key = format!("/{}/config", self.path_prefix);
        let read = async {
            let mut client = self.client().await?;
            let response = client.get(key.as_str(), None).await?;
            Ok::<_, SyncError>(response.kvs().first().map(|kv| kv.value().to_vec()))
        };
        let read = match tokio::time::timeout(limit, read).await {
            Ok(read) => read,
            Err(_) => Err(SyncError::Timeout(limit)),
        };
        self.unreachable_at_start = read.is_err();
        let patch = read?
            .map(|v| ConfigPatch::parse(&v))
            .transpose()
            .map_err(|source| SyncError::Config { key, source })?;
        self.started.clone_from(&patch);
        Ok(patch)
    }

    async fn run(mut self) {
        if self.unreachable_at_start {
            self.restore().await;
        }
        let mut backoff = Backoff::new(RETRY_FIRST, RETRY_CAP);
        let mut failing = false;
        loop {
            let error = match self.session(&mut backoff).await {
                Ok(never) => match never {},
                Err(error) => error,
            };
            if self.health.is_watching() {
                failing = false;
            }
            self.health.set_watching(false);
            self.flush().await;
            if error.wants_full_sync() {
                tracing::info!(%error, "etcd watch cannot resume");
                self.full_sync_needed = true;
                continue;
            }
            self.client = None;
            if let Some(members) = self.members.as_mut() {
                members.stop();
            }
            self.health.retried();
            let pause = backoff.next_pause();
            if failing {
                tracing::debug!(%error, pause_ms = pause.as_millis() as u64, "etcd still unavailable");
            } else {
                tracing::warn!(
                    %error,
                    pause_ms = pause.as_millis() as u64,
                    ready = self.health.is_ready(),
                    "etcd unavailable; the current snapshot keeps serving, retrying with backoff"
                );
            }
            failing = true;
            if self.state.is_none() {
                self.restore().await;
            }
            let until = tokio::time::Instant::now() + pause;
            loop {
                let renewal = self.renewal();
                tokio::select! {
                    () = tokio::time::sleep_until(until) => break,
                    () = state::due(self.persist.as_mut(), false) => self.write_state(),
                    () = renewal::sleep(renewal) => self.renew_unfollowed().await,
                }
            }
        }
    }

    /// etcd could not be reached before any complete read: serves the persisted data, if there
    /// is a file to serve, until a full read replaces it.
    async fn restore(&mut self) {
        let Some(persist) = self.persist.as_mut() else {
            return;
        };
        let (prefix, health) = (self.path_prefix.clone(), Arc::clone(&self.health));
        let decode = move |bytes: &[u8]| {
            let data = state::etcd::decode(bytes)?;
            Ok(State::restored(&prefix, &data, &health))
        };
        let Some((restored, written)) = persist.restore(decode).await else {
            return;
        };
        self.state = Some(restored);
        self.restored = Some(written);
        self.settings_changed();
        self.start_build(None).await;
        self.settle_build().await;
    }

    /// Writes the complete data as it stands; never persisted data read back, which would make
    /// it look current.
    fn write_state(&mut self) {
        let (Some(persist), Some(state), None) = (self.persist.as_mut(), self.state.as_ref(), self.restored) else {
            return;
        };
        let prefix = self.path_prefix.clone();
        let (revision, cluster) = (state.revision, state.cluster);
        let config = state.config_value.clone();
        let records = state.records.shared();
        persist.write(move || state::etcd::encode(&prefix, revision, cluster, config.as_deref(), &records));
    }

    /// One connection's worth of work: catch up (a full read, or a watch resumed from the last
    /// revision seen) and follow the watch until something breaks.
    async fn session(&mut self, backoff: &mut Backoff) -> Result<std::convert::Infallible, SyncError> {
        let client = self.client().await?;
        if self.full_sync_needed || self.state.is_none() {
            self.full_sync(&client).await?;
        } else {
            self.health.resumed();
        }
        let mut stream = self.open_watch(&client).await?;
        backoff.reset();
        self.health.set_watching(true);
        self.follow(&client, &mut stream).await
    }

    /// The client, connecting first if there is none.
    async fn client(&mut self) -> Result<Client, SyncError> {
        if let Some(client) = &self.client {
            return Ok(client.clone());
        }
        let endpoints = self
            .members
            .as_ref()
            .map_or_else(|| self.endpoints.clone(), Members::endpoints);
        let count = endpoints.len();
        let connect = Client::connect(endpoints, Some(self.connect.clone()));
        let client = within(REQUEST_TIMEOUT, connect).await?;
        self.health.set_endpoints(count);
        if let Some(members) = self.members.as_mut() {
            members.follow(&client, &self.health);
        }
        self.client = Some(client.clone());
        Ok(client)
    }

    /// Reads every key under the prefix at one revision into a fresh state, then swaps it in and
    /// builds its snapshot: the old snapshot serves until the new one replaces it whole.
    async fn full_sync(&mut self, client: &Client) -> Result<(), SyncError> {
        let started = Instant::now();
        let logged = self.state.as_ref().map(State::rejected).unwrap_or_default();
        let mut fresh = State::new(&self.path_prefix, logged);
        let health = &self.health;
        let read = range::read_prefix(client, self.below.as_bytes(), REQUEST_TIMEOUT, |kv| {
            let put = Put {
                key: kv.key(),
                value: kv.value(),
                lease: kv.lease(),
                mod_revision: kv.mod_revision(),
            };
            fresh.put(put, health);
        })
        .await?;
        self.health.contact();
        let revision = read.revision;
        fresh.cluster = read.cluster;
        fresh.revision = revision;
        fresh.read_complete();
        let read = started.elapsed();
        self.settle_build().await;
        self.pending.clear();
        self.state = Some(fresh);
        if self.restored.take().is_some() {
            tracing::info!("etcd answers: its data replaces the persisted data");
        }
        self.full_sync_needed = false;
        self.health.synced(revision);
        self.settings_changed();
        self.start_build(Some(client)).await;
        let records = self.state.as_ref().map_or(0, |s| s.records.len());
        tracing::info!(
            records,
            revision,
            read_ms = read.as_millis() as u64,
            "etcd prefix {} read; its snapshot is building",
            self.below
        );
        Ok(())
    }

    /// Opens the watch at the revision after the last one served, and checks that etcd still
    /// has that history.
    async fn open_watch(&mut self, client: &Client) -> Result<WatchStream, SyncError> {
        let (revision, cluster) = self.state.as_ref().map_or((0, 0), |s| (s.revision, s.cluster));
        let wanted = revision + 1;
        let mut watcher = client.watch_client().max_decoding_message_size(MAX_MESSAGE);
        let options = WatchOptions::new().with_prefix().with_start_revision(wanted);
        let mut stream = within(REQUEST_TIMEOUT, watcher.watch(self.below.as_str(), Some(options))).await?;
        let created = within(REQUEST_TIMEOUT, stream.message())
            .await?
            .ok_or(SyncError::WatchEnded)?;
        self.health.contact();
        if let Some(header) = created.header() {
            if header.cluster_id() != cluster || header.revision() < revision {
                return Err(SyncError::History {
                    cluster: header.cluster_id(),
                    revision: header.revision(),
                });
            }
        }
        self.on_response(&created, wanted)?;
        tracing::info!(from = wanted, "watching etcd prefix {}", self.below);
        Ok(stream)
    }

    /// Follows the watch: applies events, builds debounced snapshots, counts leases down.
    async fn follow(
        &mut self,
        client: &Client,
        stream: &mut WatchStream,
    ) -> Result<std::convert::Infallible, SyncError> {
        loop {
            let idle = self.build.is_none();
            let build_at = self.build_at.filter(|_| idle);
            let countdown = (idle && self.state.as_ref().is_some_and(State::has_leases)).then_some(self.next_countdown);
            let catch_up = self.catch_up_at.filter(|_| idle);
            let renewal = self.renewal().filter(|_| idle && self.build_at.is_none());
            tokio::select! {
                message = stream.message() => {
                    let response = message?.ok_or(SyncError::WatchEnded)?;
                    self.health.contact();
                    let wanted = self.state.as_ref().map_or(0, |s| s.revision) + 1;
                    self.on_response(&response, wanted)?;
                }
                built = join(&mut self.build) => self.finish_build(built),
                () = sleep_until(build_at) => self.start_build(Some(client)).await,
                () = sleep_until(catch_up) => self.start_build(Some(client)).await,
                () = sleep_until(countdown) => self.count_down(client).await,
                () = renewal::sleep(renewal) => self.renew(),
                () = self.overrides.changed() => self.overrides_changed(),
                () = state::due(self.persist.as_mut(), true) => self.write_state(),
            }
        }
    }

    /// Applies a watch response, or reports why the watch is over.
    fn on_response(&mut self, response: &WatchResponse, wanted: i64) -> Result<(), SyncError> {
        if response.compact_revision() > 0 {
            return Err(SyncError::Compacted {
                wanted,
                compacted: response.compact_revision(),
            });
        }
        if response.canceled() {
            return Err(SyncError::WatchCanceled(response.cancel_reason().to_owned()));
        }
        let events = response.events();
        if events.is_empty() {
            return Ok(());
        }
        self.health.received(events.len());
        for event in events {
            let Some(kv) = event.kv() else {
                continue;
            };
            let delete = event.event_type() == EventType::Delete;
            if self.build.is_some() {
                self.pending.push(if delete {
                    Pending::Delete {
                        key: kv.key().to_vec(),
                        mod_revision: kv.mod_revision(),
                    }
                } else {
                    Pending::Put {
                        key: kv.key().to_vec(),
                        value: kv.value().to_vec(),
                        lease: kv.lease(),
                        mod_revision: kv.mod_revision(),
                    }
                });
                self.dirty = true;
                continue;
            }
            let Some(state) = self.state.as_mut() else {
                continue;
            };
            let changed = if delete {
                state.delete(kv.key(), kv.mod_revision())
            } else {
                let put = Put {
                    key: kv.key(),
                    value: kv.value(),
                    lease: kv.lease(),
                    mod_revision: kv.mod_revision(),
                };
                state.put(put, &self.health)
            };
            self.changed(changed);
        }
        if self.dirty && self.build_at.is_none() {
            self.build_at = Some(Instant::now() + DEBOUNCE);
        }
        Ok(())
    }

    fn changed(&mut self, changed: Changed) {
        match changed {
            Changed::Nothing => {}
            Changed::Record => self.dirty = true,
            Changed::Config => {
                self.dirty = true;
                self.settings_changed();
            }
        }
    }

    /// Applies the changes that waited for a build.
    fn apply_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for change in pending {
            let Some(state) = self.state.as_mut() else {
                return;
            };
            let changed = match &change {
                Pending::Put {
                    key,
                    value,
                    lease,
                    mod_revision,
                } => {
                    let put = Put {
                        key,
                        value,
                        lease: *lease,
                        mod_revision: *mod_revision,
                    };
                    state.put(put, &self.health)
                }
                Pending::Delete { key, mod_revision } => state.delete(key, *mod_revision),
            };
            self.changed(changed);
        }
    }

    /// Starts building a snapshot of the current state on the blocking pool. With a client,
    /// leases never looked up are looked up first, so that a new leased record never answers
    /// with more than its lease.
    async fn start_build(&mut self, client: Option<&Client>) {
        let Some(leases) = self.state.as_ref().map(State::leases) else {
            return;
        };
        if let Some(client) = client {
            let unknown = self.leases.unknown(leases);
            self.look_up_leases(client, unknown).await;
        }
        let Some(state) = self.state.as_mut() else {
            return;
        };
        state.fold_leases(&self.leases, Instant::now());
        self.update_stub_zones();
        let Some(state) = self.state.as_mut() else {
            return;
        };
        let changed = state.records.take_changes();
        let records = state.records.shared();
        let catch_up: Vec<Vec<u8>> = match self.catch_up_at {
            Some(at) if at <= Instant::now() => {
                self.catch_up_at = None;
                std::mem::take(&mut self.stale).into_iter().collect()
            }
            _ => Vec::new(),
        };
        let revision = state.revision;
        self.stats
            .records_rejected
            .store(state.rejected_count() as u64, Ordering::Relaxed);
        let config = self.config.clone();
        let cell = Arc::clone(&self.cell);
        let health = Arc::clone(&self.health);
        let (state_health, persisted) = (Arc::clone(&self.state_health), self.restored);
        let generation = cell.load().generation + 1;
        let previous = self.previous.take().filter(|(built_with, _)| *built_with == config);
        self.dirty = false;
        self.build_at = None;
        self.build = Some(tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let now = SystemTime::now();
            let updated = match (&previous, &changed) {
                (Some((_, previous)), Some(changed)) => {
                    update(previous, &config, &records, changed, &catch_up, generation, now)
                }
                _ => None,
            };
            let (snapshot, stale) = match updated {
                Some(updated) => (updated.snapshot, Some(updated.stale)),
                None => (build_entries(&config, &records, generation, now), None),
            };
            let snapshot = Arc::new(snapshot);
            let skipped = snapshot.skydns.as_ref().map_or(0, |index| index.skipped());
            let took = started.elapsed();
            publish(&cell, Arc::clone(&snapshot));
            health.set_ready();
            state_health.serving(persisted);
            drop(previous);
            Built {
                snapshot,
                config,
                generation,
                revision,
                records: records.len(),
                skipped,
                took,
                stale,
                persisted,
            }
        }));
    }

    /// Takes a finished build's outcome, then lets the changes that waited for it in.
    fn finish_build(&mut self, built: Result<Built, JoinError>) {
        self.build = None;
        match built {
            Ok(built) => {
                self.previous = Some((built.config, built.snapshot));
                self.last_build = built.took;
                match built.stale {
                    Some(stale) => self.stale.extend(stale),
                    None => self.stale.clear(),
                }
                self.catch_up_at = match (self.stale.is_empty(), self.catch_up_at) {
                    (true, _) => None,
                    (false, Some(at)) => Some(at),
                    (false, None) => Some(Instant::now() + CATCH_UP.max(built.took * CATCH_UP_PER_BUILD)),
                };
                self.stats.records_loaded.store(built.records as u64, Ordering::Relaxed);
                self.stats.generation.store(built.generation, Ordering::Relaxed);
                let published = self.stats.reloads.fetch_add(1, Ordering::Relaxed) + 1;
                self.health.set_revision(built.revision);
                if let (Some(persist), None) = (self.persist.as_mut(), built.persisted) {
                    persist.changed();
                }
                if published == 1 && built.persisted.is_none() {
                    tracing::info!(
                        records = built.records,
                        revision = built.revision,
                        took_ms = built.took.as_millis() as u64,
                        "etcd data served"
                    );
                } else {
                    tracing::debug!(
                        generation = built.generation,
                        records = built.records,
                        skipped = built.skipped,
                        revision = built.revision,
                        took_ms = built.took.as_millis() as u64,
                        "snapshot published"
                    );
                }
            }
            Err(error) => {
                self.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(%error, "snapshot build did not complete; the current snapshot keeps serving");
                self.dirty = true;
            }
        }
        self.apply_pending();
        if self.dirty && self.build_at.is_none() {
            self.build_at = Some(Instant::now());
        }
    }

    /// Waits for the build in flight, if any, and takes its outcome.
    async fn settle_build(&mut self) {
        if self.build.is_some() {
            let built = join(&mut self.build).await;
            self.finish_build(built);
        }
    }

    /// After the watch broke: publishes what was received before, without waiting for etcd.
    async fn flush(&mut self) {
        self.settle_build().await;
        if self.dirty {
            self.start_build(None).await;
            self.settle_build().await;
        }
    }

    /// How long until the signatures of the last snapshot published come due for renewal;
    /// `None` when it holds none, or there are no records to build from.
    fn renewal(&self) -> Option<Duration> {
        self.state.as_ref()?;
        let (_, snapshot) = self.previous.as_ref()?;
        renewal::wait(snapshot, SystemTime::now())
    }

    /// While the watch is followed: a build, if the signatures are due (a build made from no
    /// change re-signs the whole domain when they are).
    fn renew(&mut self) {
        if self.renewal() == Some(Duration::ZERO) {
            self.build_at.get_or_insert_with(Instant::now);
        }
    }

    /// While etcd is out of reach: a build of the records received, if the signatures are due,
    /// so that they do not expire however long etcd stays away.
    async fn renew_unfollowed(&mut self) {
        if self.renewal() == Some(Duration::ZERO) {
            self.start_build(None).await;
            self.settle_build().await;
        }
    }

    /// Looks leases up again as they come due, and rebuilds when leased TTLs moved.
    async fn count_down(&mut self, client: &Client) {
        let now = Instant::now();
        self.next_countdown = now + COUNTDOWN.max(self.last_build * COUNTDOWN_PER_BUILD);
        let Some(leases) = self.state.as_ref().map(State::leases) else {
            return;
        };
        self.leases.retain(|lease| leases.contains(&lease));
        let due = self.leases.due(leases, now);
        self.look_up_leases(client, due).await;
        let Some(state) = self.state.as_mut() else {
            return;
        };
        if state.fold_leases(&self.leases, Instant::now()) {
            self.dirty = true;
            self.build_at.get_or_insert_with(Instant::now);
        }
    }

    /// Asks etcd for the remaining TTL of `leases`, a few at a time. A lookup that fails keeps
    /// what was known: the lease's TTL goes on counting down from its last report.
    async fn look_up_leases(&mut self, client: &Client, leases: Vec<i64>) {
        for batch in leases.chunks(LEASE_LOOKUPS) {
            let mut lookups = JoinSet::new();
            for &lease in batch {
                let mut client = client.clone();
                lookups.spawn(async move {
                    let response = within(REQUEST_TIMEOUT, client.lease_time_to_live(lease, None)).await;
                    (lease, response)
                });
            }
            while let Some(done) = lookups.join_next().await {
                match done {
                    Ok((lease, Ok(ttl))) => {
                        self.leases.record(lease, ttl.ttl(), ttl.granted_ttl(), Instant::now());
                    }
                    Ok((lease, Err(error))) => {
                        tracing::debug!(lease, %error, "lease lookup failed; its TTL counts down from the last report");
                    }
                    Err(error) => tracing::debug!(%error, "lease lookup did not complete"),
                }
            }
        }
    }

    /// Applies `/<prefix>/config` as it now stands: the settings that shape answers go into the
    /// next snapshot; the ones only a restart applies are reported when they change.
    fn settings_changed(&mut self) {
        let Some(state) = self.state.as_ref() else {
            return;
        };
        let key = state.config_key().to_owned();
        let stacked = self.stacked(state.config.as_ref());
        match stacked.skydns_config(&self.path_prefix) {
            Ok(config) if config != self.config => {
                tracing::info!(
                    domain = %config.domain,
                    ttl = config.ttl,
                    min_ttl = config.min_ttl,
                    priority = config.priority,
                    hostmaster = %config.hostmaster,
                    local = %config.local.as_ref().map_or_else(|| "none".to_owned(), ToString::to_string),
                    round_robin = config.round_robin,
                    "settings from {key} applied"
                );
                self.config = config;
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "settings from {key} not applied; the previous ones stay in force");
            }
        }
        let at_start = self.stacked(self.started.as_ref());
        let differing = restart_only_changes(&at_start, &stacked);
        if differing != self.restart_pending {
            if !differing.is_empty() {
                tracing::warn!(
                    settings = %differing.join(", "),
                    "settings from {key} differ from those in force and apply only at restart"
                );
            }
            self.restart_pending = differing;
        }
    }

    /// A reload handed in the operator's settings: they apply to the next snapshot, built at
    /// once (a reload is also a request to serve the data as it stands).
    fn overrides_changed(&mut self) {
        self.settings_changed();
        self.dirty = true;
        if self.build_at.is_none() {
            self.build_at = Some(Instant::now());
        }
    }

    /// The operator's settings over `etcd`'s.
    fn stacked(&self, etcd: Option<&ConfigPatch>) -> ConfigPatch {
        self.overrides.current().or(etcd.cloned().unwrap_or_default())
    }

    /// Reads the stub zones under the domain now served, and reports them when they change.
    fn update_stub_zones(&mut self) {
        let Some(state) = self.state.as_ref() else {
            return;
        };
        let prefix = stub_key_prefix(&self.path_prefix, &self.config.domain);
        let stubs = stub_zones(&prefix, state.records.with_prefix(&prefix));
        if stubs == self.stubs {
            return;
        }
        for unusable in stubs.1.iter().filter(|u| !self.stubs.1.contains(u)) {
            tracing::warn!(key = %unusable.key, reason = unusable.reason, "stub zone record not used");
        }
        let zones: Vec<String> = stubs.0.iter().map(ToString::to_string).collect();
        tracing::info!(zones = %zones.join(","), "stub zones read from {prefix}");
        self.health.set_stub_zones(stubs.0.clone());
        self.stubs = stubs;
    }
}

/// The settings only a restart applies that differ between `a` and `b`, by JSON name.
fn restart_only_changes(a: &ConfigPatch, b: &ConfigPatch) -> Vec<&'static str> {
    let differs = [
        a.dns_addr != b.dns_addr,
        a.nameservers != b.nameservers,
        a.ndots != b.ndots,
        a.no_rec != b.no_rec,
        a.ns_rotate != b.ns_rotate,
        a.read_timeout != b.read_timeout,
        a.rcache != b.rcache,
        a.rcache_ttl != b.rcache_ttl,
        a.scache != b.scache,
        a.dnssec != b.dnssec,
        a.systemd != b.systemd,
        a.etcd3 != b.etcd3,
    ];
    RESTART_ONLY
        .iter()
        .zip(differs)
        .filter_map(|(name, differs)| differs.then_some(*name))
        .collect()
}

/// Runs an etcd request with a deadline.
async fn within<T>(
    limit: Duration,
    request: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, SyncError> {
    Ok(range::within(limit, request).await?)
}

impl From<RangeError> for SyncError {
    fn from(error: RangeError) -> SyncError {
        match error {
            RangeError::Etcd(error) => SyncError::Etcd(error),
            RangeError::Timeout(limit) => SyncError::Timeout(limit),
        }
    }
}

/// The outcome of the build in flight; never completes when there is none.
async fn join(build: &mut Option<JoinHandle<Built>>) -> Result<Built, JoinError> {
    match build {
        Some(handle) => {
            let built = handle.await;
            *build = None;
            built
        }
        None => std::future::pending().await,
    }
}

/// Sleeps until `deadline`; never completes when there is none.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_only_settings_are_named_by_their_json_keys() {
        let a = ConfigPatch::parse(br#"{"dns_addr":"127.0.0.1:53","ttl":30,"ndot":3}"#).unwrap();
        let b = ConfigPatch::parse(br#"{"dns_addr":"127.0.0.1:54","ttl":60,"ndot":3,"no_rec":true}"#).unwrap();
        assert_eq!(restart_only_changes(&a, &b), ["dns_addr", "no_rec"]);
        assert!(restart_only_changes(&a, &a).is_empty());
    }
}
