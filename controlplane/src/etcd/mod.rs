//! The etcd v3 source: SkyDNS records kept in etcd under `/<prefix>/`, mirrored in memory and
//! served from snapshots, so that no query ever waits on etcd and no etcd fault changes answers.
//!
//! - **Sync.** A range read of `/<prefix>/` at one revision R (paged, every page at R), then a
//!   prefix watch from R + 1. Each put or delete changes one entry of the source's state (a map
//!   from key to typed record) and reaches answers through a new snapshot; bursts are debounced
//!   by [`DEBOUNCE`] and by the build in flight, so a burst costs a few builds, not one per event.
//! - **Faults.** A broken watch resumes from the last revision seen, through any endpoint that
//!   answers; a revision etcd has compacted away, or a cluster that is not the one read from,
//!   forces a full read built aside and swapped in whole. Retries back off exponentially with
//!   jitter, capped at a few seconds. Until the first full read the zones answer SERVFAIL (or,
//!   with a state directory and etcd out of reach at start, serve the persisted data, stale:
//!   [`crate::state`]); after it, losing etcd freezes the data, never removes it.
//! - **Leases.** A leased record answers with min(record ttl, remaining lease TTL), counting down
//!   with periodic rebuilds; when the lease expires etcd deletes the key and the record goes.
//! - **Settings.** `/<prefix>/config` is followed like any key: what shapes answers applies live,
//!   the rest is reported as needing a restart. Stub-zone records are read into
//!   [`SourceHealth::stub_zones`].
//! - **Members.** With `--discover` the client follows the cluster's member list (`members`),
//!   so the endpoints given only seed the first connection.
//! - **Bad values.** A value that is not a valid record is skipped, logged once and counted; its
//!   neighbours keep serving.

mod health;
mod lease;
mod members;
mod options;
pub(crate) mod plain;
pub(crate) mod range;
mod records;
mod source;
mod state;
mod stub;

pub use health::SourceHealth;
pub use members::DISCOVER_EVERY;
pub use options::{EtcdOptions, OptionsError};
pub use range::RangeError;
pub use source::{EtcdSource, DEBOUNCE};
pub use stub::StubZone;
