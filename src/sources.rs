//! The data sources the settings configure, made in the order they start and serve: the SkyDNS
//! source (the records file or etcd), then the Kubernetes source, which composes its cluster
//! zones over it, then the hosts source, which lays its names under what those publish. Each
//! source publishes into the cell the next one reads, and the last into the cell that is
//! served. A new source is made here, from its settings; the start reads only the list.

use crate::config::{KubernetesSettings, Operator};
use skyline_controlplane::etcd::{EtcdSource, OptionsError, SourceHealth};
use skyline_controlplane::hosts::{HostsOptions, HostsSource};
use skyline_controlplane::kubernetes::{ConnectError, KubernetesSource};
use skyline_controlplane::source::{FileSource, Overrides, OverridesSender, Source};
use skyline_controlplane::state::StateDir;
use skyline_dataplane::snapshot::{self, SnapshotCell};
use std::sync::Arc;

/// Why a configured source could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourcesError {
    #[error(transparent)]
    Etcd(#[from] OptionsError),
    #[error(transparent)]
    Kubernetes(#[from] ConnectError),
}

/// The sources made, with what the start does besides serving them.
pub(crate) struct Configured {
    /// The sources, in the order they start and serve.
    pub sources: Vec<Box<dyn Source>>,
    /// Where the SkyDNS snapshot is published: the start stores an empty one there when no
    /// SkyDNS source is configured, so that the sources above it have something to compose on.
    pub skydns_cell: SnapshotCell,
    /// Whether a records file or etcd publishes into `skydns_cell`.
    pub skydns_source: bool,
    /// The etcd source's health, which the stub zones read from its records follow.
    pub etcd_health: Option<Arc<SourceHealth>>,
    /// Where a reload hands the operator's settings over the data's to the SkyDNS source.
    pub reload_overrides: OverridesSender,
}

/// The sources of these settings, publishing at last into `served`. Connecting to the
/// Kubernetes API runs on `runtime`.
pub(crate) fn configured(
    operator: &Operator,
    kubernetes: Option<KubernetesSettings>,
    hosts: Option<HostsOptions>,
    state: Option<&StateDir>,
    served: &SnapshotCell,
    runtime: &tokio::runtime::Runtime,
) -> Result<Configured, SourcesError> {
    let cluster_cell = match hosts {
        Some(_) => snapshot::empty_cell(),
        None => Arc::clone(served),
    };
    let skydns_cell = match kubernetes {
        Some(_) => snapshot::empty_cell(),
        None => Arc::clone(&cluster_cell),
    };
    let (reload_overrides, overrides) = Overrides::channel(operator.overrides.clone());
    let mut sources: Vec<Box<dyn Source>> = Vec::new();
    if let Some(path) = &operator.records {
        let records = FileSource::new(path, &operator.path_prefix, overrides.clone(), Arc::clone(&skydns_cell));
        sources.push(Box::new(records));
    }
    let mut etcd_health = None;
    if let Some(options) = &operator.etcd {
        let mut etcd = EtcdSource::new(options, &operator.path_prefix, overrides, Arc::clone(&skydns_cell))?;
        if let Some(state) = state {
            etcd.persist_to(state);
        }
        etcd_health = Some(etcd.health());
        sources.push(Box::new(etcd));
    }
    let skydns_source = !sources.is_empty();
    if let Some(kubernetes) = kubernetes {
        let connect = KubernetesSource::connect(
            kubernetes.options,
            kubernetes.zones,
            Arc::clone(&skydns_cell),
            Arc::clone(&cluster_cell),
        );
        let mut cluster = runtime.block_on(connect)?;
        if let Some(state) = state {
            cluster.persist_to(state);
        }
        sources.push(Box::new(cluster));
    }
    if let Some(hosts) = hosts {
        sources.push(Box::new(HostsSource::new(hosts, cluster_cell, Arc::clone(served))));
    }
    Ok(Configured {
        sources,
        skydns_cell,
        skydns_source,
        etcd_health,
        reload_overrides,
    })
}
