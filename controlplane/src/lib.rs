//! skyline's control plane: the sources that read service records (the records file, etcd v3,
//! the Kubernetes API, a hosts file), the decoding and checking of SkyDNS's JSON schema, and the publishing of
//! compiled snapshots to the data plane through its [`skyline_dataplane::SnapshotCell`], and the
//! HTTP endpoints that report on both (`/health`, `/ready`, `/metrics`), and the persisted
//! snapshot that lets a start during a source's outage serve its last data.
//!
//! Everything here runs on a tokio runtime on threads of its own, never on the query path: a
//! slow or failing source delays new data, it never slows or changes answers already served.

#![forbid(unsafe_code)]

pub mod backoff;
pub mod etcd;
pub mod hosts;
pub mod http;
pub mod kube2etcd;
pub mod kubernetes;
pub mod skydns;
pub mod source;
pub mod state;
