//! The HTTP endpoints, on a tokio runtime of their own (`src/main.rs`), so that no source's
//! work delays a probe:
//!
//! - `GET /health`: 200 `OK` while the process runs (a liveness probe).
//! - `GET /ready`: 200 `OK` when every configured source serves complete data and the process
//!   is not draining, else 503 with a line naming why (a readiness probe); the 200 names the
//!   sources that serve persisted data, stale.
//! - `GET /metrics`: the data plane's counters and the sources' state in the Prometheus text
//!   format 0.0.4, under CoreDNS's names where a CoreDNS metric means the same thing.
//!
//! Other paths are 404, other methods 405. The handlers read atomics that the workers and the
//! sources write ([`Observed`]; each source through its
//! [`SourceReport`](crate::source::SourceReport), none by name); nothing here takes a lock the data plane takes, so a scrape,
//! a slow client or a flood of connections never delays a DNS answer.

mod metrics;
mod process;
mod ready;
mod report;
mod server;

pub use metrics::Families;
pub use process::Process;
pub use report::{Observed, ReloadStats};
pub use server::{Endpoints, HttpError, HttpServer};
