//! The signed SkyDNS domain a snapshot carries (`--dnssec`, docs/dnssec.md): for every name,
//! its answers with their RRSIGs and the NSEC3 records that deny what it does not have, made
//! when the snapshot is built (by `crate::signer`), so that answering a signed question signs
//! nothing.

use super::Nodes;
use crate::dnssec::rrsets::Records;
use crate::dnssec::rrsig::Validity;
use crate::dnssec::{Dnssec, SigningKey};
use crate::wire::{LowerName, Name};
use std::sync::Arc;
use std::time::SystemTime;

/// What a name of the signed zone answers a query with DO set.
#[derive(Debug, PartialEq, Eq)]
pub struct SignedName {
    /// By query type, the signed answer.
    pub(crate) answers: Box<[(u16, Records)]>,
    /// The NSEC3 record matching the name, signed: what denies the types it lacks (NODATA),
    /// and proves it the closest encloser of a name below it that does not exist.
    pub(crate) matching: Records,
    /// The NSEC3 record covering the wildcard below the name, signed: a name below it that does
    /// not exist is not answered by a wildcard either.
    pub(crate) wildcard: Records,
    /// For a name whose answers depend on the client (SkyDNS views), what each class of clients
    /// gets, in the order of the node's [`super::views::Views`] classes; empty for the other
    /// names.
    pub(crate) views: Box<[SignedName]>,
}

impl SignedName {
    /// The signed answer to `qtype`, if the name has one.
    pub fn answer(&self, qtype: u16) -> Option<&Records> {
        self.answers.iter().find(|(t, _)| *t == qtype).map(|(_, r)| r)
    }

    /// The first of its answers: what an ANY query gets (RFC 8482 §4.1 lets a server answer
    /// one RRset of the name).
    pub fn first(&self) -> Option<&Records> {
        self.answers.first().map(|(_, r)| r)
    }

    /// The signed NSEC3 record matching the name.
    pub fn matching(&self) -> &Records {
        &self.matching
    }

    /// The signed NSEC3 record covering `*.<name>`.
    pub fn wildcard(&self) -> &Records {
        &self.wildcard
    }

    /// What the clients of the views class `class` get (the name itself when it has no views).
    #[inline]
    pub fn for_class(&self, class: usize) -> &SignedName {
        self.views.get(class).unwrap_or(self)
    }
}

/// The signed SkyDNS domain of a snapshot.
#[derive(Debug)]
pub struct Signed {
    /// The settings it was signed with.
    pub(crate) dnssec: Dnssec,
    /// The apex of the signed zone.
    pub(crate) apex: Name,
    /// Every signed name: snapshots updated from one another share them as they share nodes.
    pub(crate) names: Nodes<Arc<SignedName>>,
    /// The zone's SOA with the negative TTL and its RRSIG, for the authority section of
    /// denials.
    pub(crate) soa: Records,
    /// The SOA RDATA `soa` was made from.
    pub(crate) soa_rdata: Box<[u8]>,
    /// The apex's DNSKEY and NSEC3PARAM RRsets without RRSIG, by type: what a query without DO
    /// gets, so that `dig DNSKEY <zone> | dnssec-dsfromkey` works as with any signed zone.
    pub(crate) apex_unsigned: Box<[(u16, Records)]>,
    /// The earliest expiring of the zone's signatures.
    pub(crate) oldest: Validity,
    /// The TTL of the SOA and NSEC3 records of denials.
    pub(crate) negative_ttl: u32,
}

impl Signed {
    /// The key the zone is signed with.
    pub fn key(&self) -> &Arc<SigningKey> {
        &self.dnssec.key
    }

    /// The settings it was signed with.
    pub fn dnssec(&self) -> &Dnssec {
        &self.dnssec
    }

    /// The apex of the signed zone.
    pub fn apex(&self) -> &Name {
        &self.apex
    }

    /// What the name `qname` answers, if it exists in the zone.
    #[inline]
    pub fn name(&self, qname: &LowerName) -> Option<&SignedName> {
        self.names.get_lower(qname).map(|n| &**n)
    }

    /// What the name of lower-cased wire form `wire` answers, if it exists in the zone.
    pub fn name_wire(&self, wire: &[u8]) -> Option<&SignedName> {
        self.names.get(wire).map(|n| &**n)
    }

    /// The apex's RRset of `qtype` (DNSKEY or NSEC3PARAM) without its RRSIG, for a query
    /// without DO; `None` for the other types, which the snapshot's nodes answer.
    pub fn apex_unsigned(&self, qtype: u16) -> Option<&Records> {
        self.apex_unsigned.iter().find(|(t, _)| *t == qtype).map(|(_, r)| r)
    }

    /// The signed SOA of denials.
    pub fn soa(&self) -> &Records {
        &self.soa
    }

    /// The TTL of the SOA and NSEC3 records of denials (RFC 5155 §3).
    pub fn negative_ttl(&self) -> u32 {
        self.negative_ttl
    }

    /// Whether a signature of the zone is due to be made again at `now`.
    pub fn due(&self, now: SystemTime) -> bool {
        self.oldest.due(now)
    }

    /// How long after `now` the oldest signature of the zone comes due (zero when one is): when
    /// a source builds again, for the renewal alone.
    pub fn due_in(&self, now: SystemTime) -> std::time::Duration {
        self.oldest.due_in(now)
    }

    /// Number of names signed.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no name is signed.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
