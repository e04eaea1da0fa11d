//! skyline's data plane: the DNS wire format, the immutable snapshot, the sans-I/O answer
//! function, and the per-core workers that feed it packets.
//!
//! Layering: [`wire`] never touches sockets; [`answer`] is a pure function over bytes and a
//! [`snapshot::Snapshot`]; only `sys` talks to the kernel, and only it holds `unsafe` code.

pub mod answer;
pub mod snapshot;
pub mod wire;

pub use answer::{answer, Context, Outcome, Reply, Transport};
pub use snapshot::{Snapshot, SnapshotCell};
