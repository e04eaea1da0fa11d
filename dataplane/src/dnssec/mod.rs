//! DNSSEC for the SkyDNS domain (SkyDNS's `-dnssec`): the key, the signatures and NSEC3
//! records, and the signed records every reply with DO copies, below both the snapshot that
//! carries a signed zone and the answer path that reads it. Signing is done ahead of time: the
//! signer (`crate::signer`) signs every answer a name gives when a snapshot is built, so that a
//! query with DO set is answered by copying, as any other; only the denial of a name that does
//! not exist is signed per query name, within a per-worker budget and cache ([`denial`]).
//!
//! - [`key`]: the key pair, read from BIND's `.key` and `.private` files.
//! - [`rrsig`]: RRSIG records over canonical RRsets.
//! - [`nsec3`]: NSEC3 hashes and SkyDNS's "white lies".
//! - [`records`]: a written reply read back as RRsets to sign.
//! - [`rrsets`]: RRsets signed into records ready to copy.
//!
//! docs/dnssec.md says what a client sees.

pub(crate) mod base64;
pub mod denial;
pub mod key;
pub mod nsec3;
pub mod records;
pub mod rrsets;
pub mod rrsig;

pub use key::{KeyError, SigningKey};

use std::sync::Arc;

/// SkyDNS's default `-scache`: signed denials a worker keeps.
pub const DEFAULT_CACHE: usize = 10_000;

/// What the operator asked of signing: the key, and how many signed denials each worker
/// keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dnssec {
    /// The zone's key.
    pub key: Arc<SigningKey>,
    /// Signed denials each worker keeps (`--scache`).
    pub cache: usize,
}

#[cfg(test)]
mod tests;
