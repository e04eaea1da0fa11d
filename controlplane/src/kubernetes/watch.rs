//! The list+watch of each kind of object, reduced as it is decoded to the slim model and fed to
//! a [`Mirror`]: shared by the Kubernetes source, which serves the mirror, and by kube2etcd,
//! which writes it into etcd.

use super::convert;
use super::mirror::{Kind, Mirror};
use super::options::KubernetesOptions;
use crate::backoff::Backoff;
use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use skyline_dataplane::snapshot::kubernetes::{self as model, ObjectKey};
use std::fmt::Debug;
use std::time::{Duration, SystemTime};

/// First pause after a failed list or watch.
const RETRY_FIRST: Duration = Duration::from_millis(200);
/// Longest pause: the API server's return shows within about this long.
const RETRY_CAP: Duration = Duration::from_secs(5);

/// Objects per LIST page of EndpointSlices and Pods, each up to tens of kilobytes of JSON (a
/// slice holds up to 100 endpoints): a page is decoded whole, so it bounds the memory a list
/// takes on top of the mirror.
const LARGE_OBJECT_PAGE: u32 = 100;

/// [`Backoff`] as kube-runtime's watcher takes it: an iterator of pauses that can restart.
struct WatchBackoff(Backoff);

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.0.next_pause())
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.0.reset();
    }
}

/// A watched object, already reduced to what DNS needs.
pub(crate) enum Payload {
    Namespace,
    Service(Option<model::Service>),
    /// The slice, and when the change it carries happened (for the programming duration).
    Slice(Option<model::EndpointSlice>, Option<SystemTime>),
    Pod(Option<model::Pod>),
}

/// What one watch reported.
pub(crate) enum Change {
    /// A list starts.
    Begin(Kind),
    /// An object is listed, added or changed.
    Put(ObjectKey, Payload),
    /// An object is gone.
    Remove(Kind, ObjectKey),
    /// A list is complete.
    End(Kind),
    /// A list or watch failed; the watch retries after a backoff.
    Failed(Kind, watcher::Error),
    /// An object without a name: nothing to do.
    Nameless,
}

/// The kinds `options` watch.
pub(crate) fn kinds(options: &KubernetesOptions) -> impl Iterator<Item = Kind> + '_ {
    Kind::ALL.into_iter().filter(|kind| match kind {
        Kind::EndpointSlice => !options.noendpoints,
        Kind::Pod => options.pods,
        Kind::Namespace | Kind::Service => true,
    })
}

/// One watch per kind `options` ask for; `pod_names` keeps the endpoints' pod names.
pub(crate) fn all(
    client: &kube::Client,
    options: &KubernetesOptions,
    pod_names: bool,
) -> Vec<BoxStream<'static, Change>> {
    let labelled = |selector: &Option<String>| {
        let config = watcher::Config::default();
        match selector {
            Some(selector) => config.labels(selector),
            None => config,
        }
    };
    kinds(options)
        .map(|kind| match kind {
            Kind::Namespace => watch(
                Api::<Namespace>::all(client.clone()),
                labelled(&options.namespace_labels),
                kind,
                |_| Payload::Namespace,
            ),
            Kind::Service => watch(
                Api::<Service>::all(client.clone()),
                labelled(&options.labels),
                kind,
                |s| Payload::Service(convert::service(s)),
            ),
            Kind::EndpointSlice => watch(
                Api::<EndpointSlice>::all(client.clone()),
                watcher::Config::default().page_size(LARGE_OBJECT_PAGE),
                kind,
                move |s| Payload::Slice(convert::slice(s, pod_names), convert::last_change_trigger(s)),
            ),
            Kind::Pod => watch(
                Api::<Pod>::all(client.clone()),
                labelled(&options.labels)
                    .fields(convert::POD_FIELDS)
                    .page_size(LARGE_OBJECT_PAGE),
                kind,
                |p| Payload::Pod(convert::pod(p)),
            ),
        })
        .collect()
}

/// Applies what a watch reported to `mirror`; true when what DNS reads may have changed.
/// Failures change nothing: the caller reports them.
pub(crate) fn apply(mirror: &mut Mirror, change: Change) -> bool {
    match change {
        Change::Begin(kind) => {
            mirror.begin_list(kind);
            false
        }
        Change::Put(key, payload) => match payload {
            Payload::Namespace => mirror.put_namespace(key.name),
            Payload::Service(service) => mirror.put_service(key, service),
            Payload::Slice(slice, _) => mirror.put_slice(key, slice),
            Payload::Pod(pod) => mirror.put_pod(key, pod),
        },
        Change::Remove(kind, key) => mirror.remove(kind, &key),
        Change::End(kind) => {
            mirror.end_list(kind);
            true
        }
        Change::Failed(..) | Change::Nameless => false,
    }
}

/// Which watches are failing, so that a failure is logged once as a warning when it starts and
/// once more when it is over.
#[derive(Debug, Default)]
pub(crate) struct Failures([bool; 4]);

impl Failures {
    /// A list or watch of `kind` failed.
    pub(crate) fn failed(&mut self, kind: Kind, error: &watcher::Error) {
        let error = Causes(error);
        if !std::mem::replace(&mut self.0[kind as usize], true) {
            tracing::warn!(?kind, %error, "Kubernetes list or watch failed; retrying with backoff, keeping the last data");
        } else {
            tracing::debug!(?kind, %error, "Kubernetes list or watch failed again");
        }
    }

    /// A list of `kind` completed.
    pub(crate) fn listed(&mut self, kind: Kind) {
        if std::mem::take(&mut self.0[kind as usize]) {
            tracing::info!(?kind, "Kubernetes watch restored");
        }
    }

    /// Whether any watch is failing.
    pub(crate) fn any(&self) -> bool {
        self.0.iter().any(|&f| f)
    }
}

/// An error with every cause below it, `: `-separated. kube's errors name only their outer
/// layer (`ServiceError: client error (Connect)`); what an operator can act on, such as a server
/// certificate the kubeconfig's CA did not sign or a refused connection, is at the bottom of the
/// chain. A cause whose text its parent already shows is left out.
struct Causes<'a>(&'a dyn std::error::Error);

impl std::fmt::Display for Causes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut shown = self.0.to_string();
        f.write_str(&shown)?;
        let mut cause = self.0.source();
        while let Some(error) = cause {
            let text = error.to_string();
            if !shown.contains(&text) {
                write!(f, ": {text}")?;
            }
            shown = text;
            cause = error.source();
        }
        Ok(())
    }
}

/// The watch of one kind, reduced to [`Change`]s, retrying failures with [`Backoff`].
fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    kind: Kind,
    slim: impl Fn(&K) -> Payload + Send + 'static,
) -> BoxStream<'static, Change>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher::watcher(api, config)
        .backoff(WatchBackoff(Backoff::new(RETRY_FIRST, RETRY_CAP)))
        .map(move |item| match item {
            Ok(Event::Init) => Change::Begin(kind),
            Ok(Event::InitDone) => Change::End(kind),
            Ok(Event::InitApply(object) | Event::Apply(object)) => match convert::key(object.meta()) {
                Some(key) => {
                    let payload = slim(&object);
                    Change::Put(key, payload)
                }
                None => Change::Nameless,
            },
            Ok(Event::Delete(object)) => match convert::key(object.meta()) {
                Some(key) => Change::Remove(kind, key),
                None => Change::Nameless,
            },
            Err(error) => Change::Failed(kind, error),
        })
        .boxed()
}
