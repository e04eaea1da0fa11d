//! SkyDNS semantics: typed records under their etcd keys, compiled into snapshot nodes.

pub mod service;

pub use service::{Config, Service};

use super::rrset::CompiledAnswer;
use crate::wire::LowerName;

/// Typed SkyDNS records kept for wildcard queries.
#[derive(Debug, Default)]
pub struct Index {}

/// The outcome of a wildcard query.
#[derive(Debug)]
pub enum WildcardAnswer {
    /// The fixed part of the name does not exist.
    NxDomain,
    /// Something matched the name but nothing of the asked type.
    NoData,
    /// Records matched.
    Answer(CompiledAnswer),
}

/// Answers a query whose name holds `*` or `any` labels.
pub fn wildcard(_index: &Index, _qname: &LowerName, _qtype: u16) -> WildcardAnswer {
    WildcardAnswer::NxDomain
}
