//! A and AAAA answers with CNAME chasing (SkyDNS `AddressRecords`; docs/skydns-semantics.md, "A and
//! AAAA: CNAME chasing"), also used for the address glue of SRV and MX targets inside the domain.
//!
//! A record whose host is a name becomes `owner CNAME host` followed by the host's own address
//! records, resolved the same way. A chain holds at most 8 CNAMEs, never repeats a target, and an
//! alias whose target resolves to nothing inside the domain is left out, so that an unresolvable
//! chain vanishes. Targets outside the domain cannot be resolved here: their CNAME stands alone in
//! the snapshot, which records it ([`crate::snapshot::rrset::Beyond`]) for the answer path to
//! complete from the cache or upstream, or to drop.
//!
//! A CNAME never shares its owner with other records (RFC 1034 §3.6.2): where a name's records
//! hold an address as well as a name, the addresses answer and the names give no CNAME. SkyDNS
//! answered both at one owner.

use super::answers::{Abort, Answerer};
use super::entry::Host;
use super::section::{Rr, Section};
use super::select::{Class, Selection};
use crate::snapshot::rrset::Rdata;
use crate::snapshot::views::Prefix;
use crate::wire::Name;
use foldhash::fast::{FixedState, RandomState};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::rc::Rc;

/// Longest chain of CNAMEs SkyDNS follows (`len(previousRecords) > 7` stops it).
const MAX_CHAIN: usize = 8;

/// Which addresses an answer wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// A queries.
    V4,
    /// AAAA queries.
    V6,
    /// Glue for SRV/MX targets.
    Both,
}

/// What [`Answerer::chase`] remembers, by [`resolution_hash`]; a bucket holds the resolutions
/// whose hashes collide.
pub type Resolutions = HashMap<u64, Vec<Resolution>, RandomState>;

/// One remembered resolution of a target name.
#[derive(Debug)]
pub struct Resolution {
    target: Name,
    family: Family,
    /// The class of clients it was made for.
    class: Class,
    /// The prefixes of the view maps it read, noted again whenever it is used.
    seen: Box<[Prefix]>,
    /// Targets of the CNAMEs leading here, which a loop must not revisit.
    chain: Box<[Name]>,
    chased: Chased,
    /// Lookups resolving it took, nested ones included: what remembering it still charges.
    cost: usize,
}

fn resolution_hash(target: &Name, family: Family, chain: &[Name], class: Class) -> u64 {
    FixedState::default().hash_one((target, family, chain, class))
}

/// The outcome of resolving a target name.
#[derive(Debug, Clone)]
pub enum Chased {
    /// The name holds no records.
    Missing,
    /// The name's address records (with their own CNAMEs), possibly none.
    Found(Rc<[Rr]>),
    /// The records cannot fit in any message.
    TooLarge,
}

impl Answerer<'_> {
    /// The address records of the lookup `sel` of `query`, owned by `owner` (`None` = the query
    /// name as sent). `chain` holds the targets of the CNAMEs that led here.
    pub(super) fn addresses<'q>(
        &mut self,
        sel: &Selection<'_>,
        query: &'q Name,
        owner: Option<&Name>,
        family: Family,
        chain: &mut Vec<Name>,
    ) -> Result<Section<'q>, Abort> {
        let index = self.index;
        let addressed = sel
            .grouped()
            .iter()
            .any(|e| matches!(e.host(), Host::V4(_) | Host::V6(_)));
        // An owner keeps one CNAME, the first that leads somewhere, with its chain alone.
        let mut aliased = false;
        let mut out = if owner.is_none() {
            Section::for_query(query)
        } else {
            Section::default()
        };
        for &e in sel.grouped() {
            let rdata = match e.host() {
                Host::None => continue,
                Host::V4(ip) if family != Family::V6 => Rdata::A(ip),
                Host::V6(ip) if family != Family::V4 => Rdata::Aaaa(ip),
                Host::V4(_) | Host::V6(_) => continue,
                Host::Name(ref target) => {
                    if addressed || aliased || target == query || chain.len() >= MAX_CHAIN || chain.contains(target) {
                        continue;
                    }
                    chain.push(target.clone());
                    let chased = self.chase(target, family, chain);
                    chain.pop();
                    let cname = || Rr {
                        owner: owner.cloned(),
                        ttl: index.ttl_of(e),
                        rdata: Rdata::Cname(target.clone()),
                    };
                    match chased? {
                        Chased::Found(rrs) if !rrs.is_empty() => {
                            out.push(cname());
                            out.extend(&rrs);
                            aliased = true;
                        }
                        Chased::Missing if !target.is_within(&index.domain) => {
                            out.push(cname());
                            aliased = true;
                        }
                        Chased::TooLarge => return Err(Abort::TooLarge),
                        Chased::Found(_) | Chased::Missing => {}
                    }
                    if out.is_full() {
                        return Err(Abort::TooLarge);
                    }
                    continue;
                }
            };
            out.push(Rr {
                owner: owner.cloned(),
                ttl: index.ttl_of(e),
                rdata,
            });
            if out.is_full() {
                return Err(Abort::TooLarge);
            }
        }
        Ok(out)
    }

    /// Resolves `target` after the CNAMEs whose targets are `chain`, remembering the result.
    /// Every lookup spends one unit of the answer's budget, and a remembered resolution charges
    /// all the lookups it took, so that whether an answer fits its budget never depends on
    /// which answers were built before it (an update compiles names in another order than a
    /// full build, and must produce the same answers).
    pub(super) fn chase(&mut self, target: &Name, family: Family, chain: &[Name]) -> Result<Chased, Abort> {
        let class = self.audience.class;
        let hash = resolution_hash(target, family, chain, class);
        let mut known = self.memo.get(&hash).into_iter().flatten();
        let same =
            |r: &&Resolution| r.target == *target && r.family == family && *r.chain == *chain && r.class == class;
        if let Some(r) = known.find(same) {
            if self.budget < r.cost {
                // Resolving it afresh would have spent the whole budget before failing.
                self.budget = 0;
                return Err(self.exhausted(target));
            }
            self.budget -= r.cost;
            self.audience.seen.extend_from_slice(&r.seen);
            return Ok(r.chased.clone());
        }
        if self.budget == 0 {
            return Err(self.exhausted(target));
        }
        let before = self.budget;
        let seen_before = self.audience.seen.len();
        self.budget -= 1;
        let chased = match self.lookup(target) {
            None => Chased::Missing,
            Some(sel) => match self.addresses(&sel, target, Some(target), family, &mut chain.to_vec()) {
                Ok(section) => Chased::Found(section.into_rrs().into()),
                Err(Abort::TooLarge) => Chased::TooLarge,
                Err(Abort::Exhausted) => return Err(Abort::Exhausted),
            },
        };
        self.memo.entry(hash).or_default().push(Resolution {
            target: target.clone(),
            family,
            class,
            seen: self.audience.seen[seen_before..].into(),
            chain: chain.into(),
            chased: chased.clone(),
            cost: before - self.budget,
        });
        Ok(chased)
    }

    /// Address glue for an SRV/MX `target` (SkyDNS calls `AddressRecords` afresh, with both
    /// families). Targets outside the domain get none here: their addresses come from the
    /// forwarding cache when a reply is written (see [`crate::snapshot::rrset::Beyond`]).
    pub(super) fn glue(&mut self, target: &Name, additional: &mut Section<'_>) {
        if additional.is_full() || !target.is_within(&self.index.domain) {
            return;
        }
        if let Ok(Chased::Found(rrs)) = self.chase(target, Family::Both, &[]) {
            additional.extend(&rrs);
        }
    }
}
