//! Kubernetes cluster DNS (the Kubernetes DNS specification 1.1.0, and the behaviour of
//! CoreDNS's `kubernetes` plugin that clients rely on; see `spec/kubernetes-dns.md`): the
//! [`Cluster`] as DNS sees it, compiled by [`build`] into the nodes of the cluster zones and
//! their reverse zones.

mod build;
mod config;
mod model;
pub mod names;
mod service;
mod sets;

pub use build::{build, syncing, update};
pub use config::{is_reverse, Config, PodMode, DEFAULT_TTL, MAX_TTL, SCHEMA_VERSION, VERSION_TTL};
pub use model::{
    Changes, Cluster, Endpoint, EndpointSlice, Names, ObjectKey, Objects, Pod, Protocol, Service, ServiceKind,
    ServicePort,
};

#[cfg(test)]
mod tests;
