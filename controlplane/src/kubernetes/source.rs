//! The Kubernetes source: list+watch of Namespaces, Services, EndpointSlices (and Pods for
//! `pods verified`), a slim [`Mirror`] of them, and snapshots of the cluster zones published over
//! the SkyDNS snapshot.

use super::health::{KubernetesHealth, KubernetesReport, ServiceKind};
use super::mirror::Mirror;
use super::options::{ConnectError, KubernetesOptions};
use super::watch::{self, Change, Failures, Payload};
use crate::source::{Source, SourceReport};
use crate::state::{self, Persist, StateDir, StateHealth};
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use skyline_dataplane::snapshot::kubernetes::{self as model, Changes, Cluster, ObjectKey, Served};
use skyline_dataplane::snapshot::skydns::Config;
use skyline_dataplane::snapshot::{compose, publish, Snapshot};
use skyline_dataplane::SnapshotCell;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::time::{Instant, MissedTickBehavior};

/// How long after a change the snapshot is built, so that a burst of events (a rollout, a
/// page of a list) costs one build rather than one per event.
pub const DEBOUNCE: Duration = Duration::from_millis(20);

/// How often the SkyDNS snapshot below the cluster zones is checked for a new generation.
const BASE_POLL: Duration = Duration::from_millis(20);

/// Serves the cluster zones from the API server's objects, over the SkyDNS snapshot.
pub struct KubernetesSource {
    options: KubernetesOptions,
    config: model::Config,
    skydns: SnapshotCell,
    cell: SnapshotCell,
    /// The API server's client, made at start.
    client: kube::Client,
    /// The API server's URL: what names the cluster (the persisted snapshot's identity).
    api_server: String,
    health: Arc<KubernetesHealth>,
    mirror: Mirror,
    failing: Failures,
    /// The SkyDNS snapshot the served one was composed with: the next update carries over the
    /// names it shares with the SkyDNS snapshot then current, and writes those that differ.
    base: Option<Arc<Snapshot>>,
    /// The persisted snapshot, with `--state-dir`.
    persist: Option<Persist>,
    state_health: Arc<StateHealth>,
    /// Persisted data read back at start, with when it was current: served while the watches
    /// have not all listed, dropped once they have.
    restored: Option<(Cluster, SystemTime)>,
    /// The served cluster zones were built from persisted data current at this time.
    stale: Option<SystemTime>,
    /// EndpointSlice changes watched since the last publication, each with when its change
    /// happened and the Service it belongs to: timed once a snapshot answers with them.
    programming: Vec<(SystemTime, ObjectKey)>,
}

impl std::fmt::Debug for KubernetesSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesSource")
            .field("api_server", &self.api_server)
            .field("zones", &self.config.zones)
            .field("health", &self.health)
            .field("stale", &self.stale)
            .finish_non_exhaustive()
    }
}

/// The cluster zones as the process runs them: composed over the SkyDNS source's snapshot, which
/// comes before this source in the list.
impl Source for KubernetesSource {
    fn report(&self) -> Arc<dyn SourceReport> {
        Arc::new(KubernetesReport {
            health: Arc::clone(&self.health),
            state: Arc::clone(&self.state_health),
        })
    }

    /// Publishes at once the SkyDNS snapshot with the cluster zones answering SERVFAIL, then
    /// lists, watches and publishes. The cluster zones have settings of their own: `_settings`
    /// shape only the SkyDNS snapshot below them.
    fn serve(mut self: Box<Self>, _settings: &Config) -> BoxFuture<'static, ()> {
        self.publish();
        Box::pin(self.run())
    }
}

impl KubernetesSource {
    /// A source watching what `options` say and serving zones as `config` says, with its client
    /// made now, at start, so that a kubeconfig that cannot be used stops the start with its
    /// reason; nothing is sent to the API server yet, so a server that is not up only delays
    /// the first sync. `skydns` is where the SkyDNS sources publish; `cell` is what the data
    /// plane serves: the two composed. Must run within a tokio runtime.
    pub async fn connect(
        options: KubernetesOptions,
        config: model::Config,
        skydns: SnapshotCell,
        cell: SnapshotCell,
    ) -> Result<KubernetesSource, ConnectError> {
        let (client, api_server) = options.client().await?;
        tracing::info!(
            zones = %config.zones.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
            pods = ?config.pods,
            ttl = config.ttl,
            "serving Kubernetes cluster DNS"
        );
        Ok(KubernetesSource {
            options,
            config,
            skydns,
            cell,
            client,
            api_server,
            health: Arc::default(),
            mirror: Mirror::default(),
            failing: Failures::default(),
            base: None,
            persist: None,
            state_health: Arc::default(),
            restored: None,
            stale: None,
            programming: Vec::new(),
        })
    }

    /// Keeps the mirror's last complete data in `dir` (`kubernetes.state`), and serves it,
    /// stale, when the API server cannot be reached at start (see [`crate::state`]). The file
    /// belongs to this API server and these zones: one written for others is not served.
    pub fn persist_to(&mut self, dir: &StateDir) {
        let identity = state::kubernetes::identity(&self.api_server, &self.config.zones);
        let file = dir.file(state::Source::Kubernetes, identity);
        self.persist = Some(Persist::new(file, Arc::clone(&self.state_health)));
    }

    async fn run(mut self) {
        let mut changes = stream::select_all(watch::all(&self.client, &self.options, self.config.endpoint_pod_names));
        let mut poll = tokio::time::interval(BASE_POLL);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut due: Option<Instant> = None;
        loop {
            let deadline = due.unwrap_or_else(Instant::now);
            let complete = self.synced() && self.mirror.is_settled();
            let failing = self.failing.any();
            tokio::select! {
                change = changes.next() => {
                    let Some(change) = change else { return };
                    let failed = matches!(change, Change::Failed(..));
                    if self.apply(change) {
                        due.get_or_insert_with(|| Instant::now() + DEBOUNCE);
                        if let Some(persist) = self.persist.as_mut() {
                            persist.changed();
                        }
                    }
                    if failed && !self.synced() && self.restore().await {
                        due.get_or_insert_with(Instant::now);
                    }
                }
                () = state::due(self.persist.as_mut(), complete && !failing), if complete => self.write_state(),
                _ = poll.tick() => {
                    if !self.composed_with(&self.skydns.load()) {
                        due.get_or_insert_with(Instant::now);
                    }
                }
                () = tokio::time::sleep_until(deadline), if due.is_some() => {
                    due = if self.publish() { None } else { Some(Instant::now() + DEBOUNCE) };
                }
            }
        }
    }

    /// Applies one change to the mirror; true when answers may have changed.
    fn apply(&mut self, change: Change) -> bool {
        // Changes listed at start or re-listed happened before this process could serve them:
        // only watched ones are timed, as CoreDNS times them.
        if let Change::Put(key, Payload::Slice(Some(slice), Some(trigger))) = &change {
            if self.synced() && self.mirror.is_settled() {
                let service = ObjectKey::new(&key.namespace, &slice.service);
                self.programming.push((*trigger, service));
            }
        }
        match &change {
            Change::Put(..) | Change::Remove(..) => self.health.event(),
            Change::End(kind) => {
                self.health.listed();
                self.failing.listed(*kind);
            }
            Change::Failed(kind, error) => {
                self.health.error();
                self.failing.failed(*kind, error);
            }
            Change::Begin(_) | Change::Nameless => {}
        }
        watch::apply(&mut self.mirror, change)
    }

    /// A list or watch failed before every watch had listed: the persisted data, if there is a
    /// file to serve, serves until they have. True when it was read back.
    async fn restore(&mut self) -> bool {
        let Some(persist) = self.persist.as_mut() else {
            return false;
        };
        match persist.restore(state::kubernetes::decode).await {
            Some(restored) => {
                self.restored = Some(restored);
                true
            }
            None => false,
        }
    }

    /// Writes the mirror's complete data as it stands (a copy, encoded and written on the
    /// blocking pool).
    fn write_state(&mut self) {
        if let Some(persist) = self.persist.as_mut() {
            let cluster = self.mirror.cluster.clone();
            persist.write(move || state::kubernetes::encode(cluster));
        }
    }

    /// Whether the served snapshot was composed with `base`.
    fn composed_with(&self, base: &Arc<Snapshot>) -> bool {
        self.base.as_ref().is_some_and(|held| Arc::ptr_eq(held, base))
    }

    fn synced(&self) -> bool {
        watch::kinds(&self.options).all(|kind| self.mirror.is_listed(kind))
    }

    /// Counts the DNS programming of the slice changes the snapshot just published answers
    /// with (a Service gone since has nothing to count).
    fn time_programming(&mut self, synced: bool) {
        if !synced {
            return self.programming.clear();
        }
        let published = SystemTime::now();
        for (trigger, service) in self.programming.drain(..) {
            let kind = match self.mirror.cluster.services.get(&service).map(|s| &s.kind) {
                Some(model::ServiceKind::Headless) => ServiceKind::Headless,
                Some(model::ServiceKind::ClusterIp(_)) => ServiceKind::ClusterIp,
                Some(model::ServiceKind::ExternalName(_)) | None => continue,
            };
            let took = published.duration_since(trigger).unwrap_or_default();
            self.health.programmed(kind, took);
        }
    }

    /// Publishes the cluster zones (SERVFAIL until every watch has listed, or the persisted data
    /// read back at start meanwhile) over the current SkyDNS snapshot. Returns false,
    /// publishing nothing, while a re-list is under way: the objects not yet listed again would
    /// be missing.
    fn publish(&mut self) -> bool {
        let synced = self.synced();
        if synced && !self.mirror.is_settled() {
            return false;
        }
        if synced {
            self.restored = None;
        }
        let stale = self.restored.as_ref().map(|(_, current_at)| *current_at);
        let generation = self.cell.load().generation + 1;
        let now = SystemTime::now();
        let base = self.skydns.load_full();
        let from = if synced {
            let mut changes = self.mirror.take_changes();
            changes.full |= !self.health.is_ready() || self.stale.is_some();
            Some((&self.mirror.cluster, changes))
        } else {
            self.restored.as_ref().map(|(cluster, _)| {
                let changes = Changes {
                    full: self.stale.is_none(),
                    ..Changes::default()
                };
                (cluster, changes)
            })
        };
        let served = match from {
            Some((cluster, changes)) => {
                let previous = self.cell.load_full();
                let updated = self.base.as_deref().and_then(|before| {
                    let served = Served {
                        snapshot: &previous,
                        base: before,
                    };
                    model::update(&self.config, cluster, &changes, &base, served, generation, now)
                });
                updated.unwrap_or_else(|| {
                    self.health.built_whole();
                    compose(&base, model::build(&self.config, cluster, generation, now), generation)
                })
            }
            None => compose(&base, model::syncing(&self.config, generation, now), generation),
        };
        publish(&self.cell, Arc::new(served));
        self.time_programming(synced);
        self.base = Some(base);
        self.state_health.serving(stale);
        let was_stale = std::mem::replace(&mut self.stale, stale);
        if synced || stale.is_some() {
            self.health.built();
        }
        if synced && (!self.health.is_ready() || was_stale.is_some()) {
            self.health.set_ready();
            let cluster = &self.mirror.cluster;
            tracing::info!(
                namespaces = cluster.namespaces.len(),
                services = cluster.services.len(),
                slices = cluster.slices.len(),
                pods = cluster.pods.len(),
                "Kubernetes watches synced; serving the cluster zones"
            );
        } else if stale.is_some() {
            self.health.set_ready();
        }
        true
    }
}
