//! A and AAAA answers (SkyDNS `AddressRecords`; docs/skydns-semantics.md, "A and AAAA: names
//! pointing to names"), also used for the address glue of SRV and MX targets inside the domain.
//!
//! A record whose host is a name answers with the host's own address records, resolved the same
//! way, owned by the query name (flattened) with the smallest TTL along the way: a name is never
//! a CNAME beside its SRV, MX and TXT records, which a cache would follow for every type (RFC
//! 1034 §3.6.2, RFC 2181 §10.1). A chain of names holds at most 8 links and never repeats a
//! target; a directory answers the union of its records' addresses. Targets outside the domain
//! cannot be resolved here: the answer names them ([`crate::snapshot::rrset::Beyond`]) for the
//! answer path to complete from the cache or upstream.
//!
//! With `--cname-chains` the answer keeps SkyDNS's shape instead: `owner CNAME host` followed
//! by the host's records, one CNAME per owner, none where the records hold an address.

use super::answers::{Abort, Answerer};
use super::entry::Host;
use super::section::{Rr, Section};
use super::select::{Class, Selection};
use crate::snapshot::rrset::{Alias, Rdata};
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
    /// The name's address records (with CNAMEs of their own under `--cname-chains`), possibly
    /// none.
    Found(Rc<Found>),
    /// The records cannot fit in any message.
    TooLarge,
}

/// What a target name resolved to.
#[derive(Debug)]
pub struct Found {
    /// Its address records, owned by the target.
    pub rrs: Box<[Rr]>,
    /// Targets outside the domain its records lead to (flattened answers only).
    pub beyond: Box<[Alias]>,
}

/// The address records a lookup gives, with the targets outside the domain that a flattened
/// answer still needs (see [`Alias`]).
#[derive(Debug, Default)]
pub struct Addresses<'q> {
    /// The records.
    pub section: Section<'q>,
    /// Targets outside the domain, each once, with the smallest TTL of the names leading there.
    pub beyond: Vec<Alias>,
}

impl Addresses<'_> {
    /// Notes the target `target` reached with `ttl` at most.
    fn alias(&mut self, target: &Name, ttl: u32) {
        match self.beyond.iter_mut().find(|a| a.target == *target) {
            Some(known) => known.ttl = known.ttl.min(ttl),
            None => self.beyond.push(Alias {
                target: target.clone(),
                ttl,
            }),
        }
    }
}

impl Answerer<'_> {
    /// The address records of the lookup `sel` of `query`, owned by `owner` (`None` = the query
    /// name as sent), and the targets outside the domain whose addresses the answer path adds.
    /// `chain` holds the targets of the names that led here.
    pub(super) fn addresses<'q>(
        &mut self,
        sel: &Selection<'_>,
        query: &'q Name,
        owner: Option<&Name>,
        family: Family,
        chain: &mut Vec<Name>,
    ) -> Result<Addresses<'q>, Abort> {
        if self.index.cname_chains {
            return self.chained(sel, query, owner, family, chain);
        }
        let index = self.index;
        let mut out = Addresses {
            section: if owner.is_none() {
                Section::for_query(query)
            } else {
                Section::default()
            },
            beyond: Vec::new(),
        };
        for &e in sel.grouped() {
            let ttl = index.ttl_of(e);
            let rdata = match e.host() {
                Host::None => continue,
                Host::V4(ip) if family != Family::V6 => Rdata::A(ip),
                Host::V6(ip) if family != Family::V4 => Rdata::Aaaa(ip),
                Host::V4(_) | Host::V6(_) => continue,
                Host::Name(ref target) => {
                    if target == query || chain.len() >= MAX_CHAIN || chain.contains(target) {
                        continue;
                    }
                    chain.push(target.clone());
                    let chased = self.chase(target, family, chain);
                    chain.pop();
                    match chased? {
                        Chased::Found(found) => {
                            for rr in found.rrs.iter() {
                                out.section.push(Rr {
                                    owner: owner.cloned(),
                                    ttl: ttl.min(rr.ttl),
                                    rdata: rr.rdata.clone(),
                                });
                            }
                            for alias in found.beyond.iter() {
                                out.alias(&alias.target, ttl.min(alias.ttl));
                            }
                        }
                        Chased::Missing if !target.is_within(&index.domain) => out.alias(target, ttl),
                        Chased::TooLarge => return Err(Abort::TooLarge),
                        Chased::Missing => {}
                    }
                    if out.section.is_full() {
                        return Err(Abort::TooLarge);
                    }
                    continue;
                }
            };
            out.section.push(Rr {
                owner: owner.cloned(),
                ttl,
                rdata,
            });
            if out.section.is_full() {
                return Err(Abort::TooLarge);
            }
        }
        Ok(out)
    }

    /// [`Self::addresses`] with SkyDNS's CNAME chains (`--cname-chains`): a record whose host is
    /// a name becomes `owner CNAME host` followed by the host's own address records. An owner
    /// keeps one CNAME, the first that leads somewhere, and none when its records hold an
    /// address; a CNAME whose target lies outside the domain stands alone, for the answer path
    /// to complete.
    fn chained<'q>(
        &mut self,
        sel: &Selection<'_>,
        query: &'q Name,
        owner: Option<&Name>,
        family: Family,
        chain: &mut Vec<Name>,
    ) -> Result<Addresses<'q>, Abort> {
        let index = self.index;
        let addressed = sel
            .grouped()
            .iter()
            .any(|e| matches!(e.host(), Host::V4(_) | Host::V6(_)));
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
                        Chased::Found(found) if !found.rrs.is_empty() => {
                            out.push(cname());
                            out.extend(&found.rrs);
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
        Ok(Addresses {
            section: out,
            beyond: Vec::new(),
        })
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
                Ok(found) => Chased::Found(Rc::new(Found {
                    rrs: found.section.into_rrs().into(),
                    beyond: found.beyond.into(),
                })),
                Err(Abort::TooLarge) => Chased::TooLarge,
                Err(Abort::Exhausted) => {
                    // What a resolution that ran out read depends on where it ran out; as when it
                    // is remembered and found too costly, it notes nothing.
                    self.audience.seen.truncate(seen_before);
                    return Err(Abort::Exhausted);
                }
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
        if let Ok(Chased::Found(found)) = self.chase(target, Family::Both, &[]) {
            additional.extend(&found.rrs);
        }
    }
}
