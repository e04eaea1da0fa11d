//! What the fuzz targets share: a snapshot with every record kind, built the way the server
//! builds it (record JSON through the control plane's parser, then the SkyDNS builder), the
//! properties every reply must have whatever the query was, and a simulated network for the
//! forwarder's state machine.
//!
//! The targets themselves live in `fuzz_targets/`; `scripts/fuzz.sh` runs them.

pub mod check;
pub mod fixture;
pub mod forwarded;
pub mod network;
pub mod query;
