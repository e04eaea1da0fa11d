//! skyline's data plane: the DNS wire format, the immutable snapshot, the sans-I/O answer
//! function, and the per-core workers that feed it packets.
//!
//! Layering: [`wire`] never touches sockets; [`answer()`] is a pure function over bytes, a
//! [`snapshot::Snapshot`] and a [`Context`] that carries the time and the state the caller keeps
//! between queries (and, for names outside the zones, a worker's [`cache::Cache`]); the
//! [`forward`] side owns each worker's upstream sockets; only `sys` talks to the kernel, and only
//! it holds `unsafe` code.

pub mod answer;
pub mod cache;
pub mod cookie;
pub mod dnssec;
pub mod forward;
pub mod io;
pub mod observe;
mod pipeline;
pub mod reply;
pub mod rewrite;
pub mod rrl;
pub mod signer;
pub mod snapshot;
pub mod stats;
pub mod sys;
pub mod tcp;
pub mod wire;
pub mod worker;

pub use answer::{answer, Context, Outcome, Reply, Transport};
pub use forward::{answer_recursive, Recursion, Resolution};
pub use snapshot::{Snapshot, SnapshotCell};
