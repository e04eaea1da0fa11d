//! The Kubernetes source: cluster DNS from the API server's Services, EndpointSlices, Namespaces
//! and (for `pods verified`) Pods, served from snapshots so that no query waits on the API
//! server and no API fault changes answers.
//!
//! - **Watches.** One kube-runtime watcher per kind: a paged LIST, then a WATCH from its
//!   resourceVersion, resumed from the last version or bookmark seen when the stream ends. Each
//!   object is reduced at once to the fields DNS needs ([`convert`]) and kept in a [`Mirror`].
//! - **Expiry.** A watch whose version has expired (an in-stream ERROR with code 410) is listed
//!   again; the re-list replaces the mirror's objects in place, never holding two copies.
//! - **Sync.** Until every watch has listed once, the cluster zones answer SERVFAIL and
//!   [`KubernetesHealth::is_ready`] is false; with a state directory and a list failing first,
//!   they serve the persisted cluster instead, stale ([`crate::state`]). Afterwards an unreachable API server freezes the
//!   data; failed lists and watches retry with capped, jittered backoff.
//! - **Publishing.** Changes are debounced by [`DEBOUNCE`], built into the cluster zones and
//!   composed with the SkyDNS snapshot (records file or etcd) into the one snapshot served. A
//!   watch event recompiles only the names it reaches (the service's, the PTRs of the addresses
//!   it touched) into a snapshot that shares every other name with the one served, SkyDNS's
//!   included, so it costs milliseconds at 100k endpoints. A new SkyDNS snapshot writes only
//!   the names whose SkyDNS node changed (the cluster's PTRs still win in the reverse zones),
//!   without building the cluster zones again. Events that change nothing DNS reads (status,
//!   annotations) publish nothing.

pub mod convert;
mod health;
pub mod mirror;
mod options;
mod source;
pub(crate) mod watch;

pub use health::KubernetesHealth;
pub use mirror::Mirror;
pub use options::{ConnectError, KubernetesOptions};
pub use source::{KubernetesSource, DEBOUNCE};
