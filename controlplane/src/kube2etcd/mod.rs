//! kube2etcd: the cluster's DNS names, from the API server's Services and EndpointSlices,
//! written into etcd as SkyDNS records, so that DNS servers that read etcd (skyline, SkyDNS,
//! CoreDNS's etcd plugin) answer the Kubernetes DNS specification's names without reaching the
//! API server.
//!
//! Two halves joined by a [`Plan`]: the Kubernetes half lists and watches as the Kubernetes
//! source does (the same [`Mirror`], the same reduction of objects) and, after each debounced
//! burst of events, recomputes the keys of the services the events reached ([`layout`]); the
//! etcd half ([`writer`]) writes the keys that changed while this replica leads. An API server
//! that cannot be reached leaves etcd as it is; nothing is written before every watch has
//! listed once, so a partial list never deletes the rest.

pub mod layout;
mod stats;
mod writer;

pub use layout::Layout;
pub use stats::Stats;
pub use writer::{Plan, WriterOptions};

use crate::etcd::{EtcdOptions, OptionsError};
use crate::kubernetes::watch::{self, Change, Failures};
use crate::kubernetes::{ConnectError, KubernetesOptions, Mirror, DEBOUNCE};
use futures::stream::{self, StreamExt};
use skyline_dataplane::snapshot::kubernetes::{self as model, service_views};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::watch as signal;
use tokio::time::Instant;
use writer::Writer;

/// Why kube2etcd cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// No client for the API server.
    #[error(transparent)]
    Kubernetes(#[from] ConnectError),
    /// The etcd settings cannot be used.
    #[error(transparent)]
    Etcd(#[from] OptionsError),
}

/// A running mirror of one cluster into one etcd subtree.
pub struct Kube2Etcd {
    options: KubernetesOptions,
    config: model::Config,
    layout: Layout,
    client: kube::Client,
    writer: Writer,
    plan: Arc<Plan>,
    stats: Arc<Stats>,
}

impl Kube2Etcd {
    /// Checks every setting and makes the API server's client now, so that a bad kubeconfig
    /// or etcd setting stops the start with its reason. `config` says which namespaces are
    /// served, whether endpoints are named after their pods and whether empty ClusterIP
    /// services are left out; `layout` where and how the records are written. Must run within
    /// a tokio runtime.
    pub async fn connect(
        options: KubernetesOptions,
        config: model::Config,
        layout: Layout,
        etcd: &EtcdOptions,
        writing: WriterOptions,
    ) -> Result<Kube2Etcd, StartError> {
        let plan = Arc::new(Plan::default());
        let stats = Arc::new(Stats::default());
        let writer = Writer::new(etcd, writing, layout.clone(), Arc::clone(&plan), Arc::clone(&stats))?;
        let (client, api_server) = options.client().await?;
        tracing::info!(%api_server, "kube2etcd: mirroring the cluster's DNS records into etcd");
        Ok(Kube2Etcd {
            options,
            config,
            layout,
            client,
            writer,
            plan,
            stats,
        })
    }

    /// The counters `/metrics` and `/ready` read.
    pub fn stats(&self) -> Arc<Stats> {
        Arc::clone(&self.stats)
    }

    /// Watches and writes until `shutdown` turns true; then the leader resigns.
    pub async fn run(self, mut shutdown: signal::Receiver<bool>) {
        let Kube2Etcd {
            options,
            config,
            layout,
            client,
            writer,
            plan,
            stats,
        } = self;
        let writing = tokio::spawn(writer.run(shutdown.clone()));
        let mut mirror = Mirror::default();
        let mut failing = Failures::default();
        let mut changes = stream::select_all(watch::all(&client, &options, config.endpoint_pod_names));
        let mut due: Option<Instant> = None;
        let mut relisted = false;
        let mirroring = Mirroring {
            options: &options,
            config: &config,
            layout: &layout,
            plan: &plan,
            stats: &stats,
        };
        loop {
            let deadline = due.unwrap_or_else(Instant::now);
            tokio::select! {
                change = changes.next() => {
                    let Some(change) = change else { break };
                    match &change {
                        Change::Begin(kind) => relisted |= mirror.is_listed(*kind),
                        Change::Put(..) | Change::Remove(..) => {
                            stats.events.fetch_add(1, Ordering::Relaxed);
                        }
                        Change::End(kind) => failing.listed(*kind),
                        Change::Failed(kind, error) => {
                            stats.kubernetes_errors.fetch_add(1, Ordering::Relaxed);
                            failing.failed(*kind, error);
                        }
                        Change::Nameless => {}
                    }
                    if watch::apply(&mut mirror, change) {
                        due.get_or_insert_with(|| Instant::now() + DEBOUNCE);
                    }
                }
                () = tokio::time::sleep_until(deadline), if due.is_some() => {
                    due = (!mirroring.publish(&mut mirror, &mut relisted)).then(|| Instant::now() + DEBOUNCE);
                }
                _ = shutdown.wait_for(|&stop| stop) => break,
            }
        }
        if writing.await.is_err() {
            tracing::warn!("kube2etcd: the etcd writer stopped abnormally");
        }
    }
}

/// What publishing the mirror into the plan reads.
struct Mirroring<'a> {
    options: &'a KubernetesOptions,
    config: &'a model::Config,
    layout: &'a Layout,
    plan: &'a Plan,
    stats: &'a Stats,
}

impl Mirroring<'_> {
    /// Recomputes the keys of the services the changes since the last call reached. Returns
    /// false, doing nothing, while a re-list is under way (the objects not yet listed again
    /// would be missing).
    fn publish(&self, mirror: &mut Mirror, relisted: &mut bool) -> bool {
        if !watch::kinds(self.options).all(|kind| mirror.is_listed(kind)) {
            return true;
        }
        if !mirror.is_settled() {
            return false;
        }
        let changes = mirror.take_changes();
        let cluster = &mirror.cluster;
        let mut plan = self.plan.lock();
        let plan = &mut *plan;
        let before = plan.dirty.len();
        let first = !plan.complete;
        if changes.full || first {
            let views = service_views(self.config, cluster, None);
            let live: BTreeSet<(Box<str>, Box<str>)> = views
                .iter()
                .map(|v| (v.key.namespace.clone(), v.key.name.clone()))
                .collect();
            let gone: Vec<(Box<str>, Box<str>)> = plan
                .desired
                .services()
                .filter(|id| !live.contains(*id))
                .cloned()
                .collect();
            for id in gone {
                plan.desired
                    .set_service(self.layout, id, Default::default(), &mut plan.dirty);
            }
            for view in &views {
                let id = (view.key.namespace.clone(), view.key.name.clone());
                plan.desired
                    .set_service(self.layout, id, self.layout.service(view), &mut plan.dirty);
            }
            let (key, value) = (self.layout.version_key(), self.layout.version_value());
            plan.desired.set_fixed(key, value, &mut plan.dirty);
        } else {
            let views = service_views(self.config, cluster, Some(&changes.services));
            let mut seen = BTreeSet::new();
            for view in &views {
                let id = (view.key.namespace.clone(), view.key.name.clone());
                seen.insert(id.clone());
                plan.desired
                    .set_service(self.layout, id, self.layout.service(view), &mut plan.dirty);
            }
            for key in &changes.services {
                let id = (key.namespace.clone(), key.name.clone());
                if !seen.contains(&id) {
                    plan.desired
                        .set_service(self.layout, id, Default::default(), &mut plan.dirty);
                }
            }
        }
        if plan.dirty.len() != before || first {
            plan.since.get_or_insert_with(Instant::now);
        }
        plan.resync |= std::mem::take(relisted) && !first;
        plan.complete = true;
        self.stats.keys.store(plan.desired.len() as u64, Ordering::Relaxed);
        self.stats.synced.store(true, Ordering::Relaxed);
        if first {
            tracing::info!(
                services = cluster.services.len(),
                slices = cluster.slices.len(),
                keys = plan.desired.len(),
                "kube2etcd: Kubernetes watches synced; writing the records"
            );
        }
        self.plan.changed();
        true
    }
}
