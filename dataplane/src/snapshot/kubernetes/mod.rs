//! Kubernetes cluster DNS (the Kubernetes DNS specification 1.1.0, and the behaviour of
//! CoreDNS's `kubernetes` plugin that clients rely on; see `docs/kubernetes-dns.md`): the
//! [`Cluster`] as DNS sees it, compiled by [`build()`] into the nodes of the cluster zones and
//! their reverse zones, and kept current by [`update()`], which compiles only what a change
//! (of the cluster, or of the SkyDNS snapshot composed with it) reaches.

mod autopath;
mod build;
mod config;
mod hosts;
mod model;
pub mod names;
mod service;
mod sets;
mod update;

pub use autopath::Autopath;
pub use build::{build, service_views, syncing};
pub use config::{is_reverse, Config, PodMode, DEFAULT_TTL, MAX_TTL, SCHEMA_VERSION, VERSION_TTL};
pub use hosts::{Compact, Host, Hosts, MAX_ANSWER};
pub use model::{
    Before, Changes, Cluster, Endpoint, EndpointSlice, Names, ObjectKey, Objects, Pod, Protocol, Service, ServiceKind,
    ServicePort,
};
pub use service::{Labelled, ReadyEndpoint, ServiceView};
pub use update::{update, Served};

#[cfg(test)]
mod tests;
