//! SkyDNS semantics (see `docs/skydns-semantics.md`): typed records under their etcd keys, compiled
//! into snapshot nodes and [`Leaves`] by `build` (signed afterwards, with `--dnssec`, by
//! `crate::signer`, which the sources build through), and the slow path for `*`/`any` query
//! wildcards, [`wildcard()`], which reads the [`Index`] the snapshot keeps.

mod address;
mod answers;
mod build;
mod entry;
mod group;
mod index;
mod key;
mod leaves;
mod reverse;
mod section;
mod select;
pub mod service;
mod srv;
mod update;
mod wildcard;

pub(crate) use build::{build, build_entries};
pub use build::{typed, Stored};
pub use entry::{Entry, Host, ValueError, MAX_TEXT_LEN};
pub use index::Index;
pub use key::{KeyError, KeyKind, KeyPath};
pub use leaves::{Leaf, Leaves, MAX_LEAF_ANSWER};
pub use service::{Config, Service, Value, ViewKey};
pub(crate) use update::update;
pub use update::{Updated, LARGE};
pub use wildcard::{wildcard, WildcardAnswer};

#[cfg(test)]
mod tests;
