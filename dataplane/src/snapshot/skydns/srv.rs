//! SRV (SkyDNS `SRVRecords`) and MX (`MXRecords`; docs/skydns-semantics.md, "SRV" and "MX"): every
//! record with a host is a service location; `mail: true` records are also mail exchanges. Address
//! hosts are named by their key, name hosts are the target; both may lose leftmost labels
//! (`targetstrip`). The additional section carries the addresses of the targets.

use super::answers::{Abort, Answerer};
use super::entry::{Entry, Host, HostKind};
use super::section::{Rr, Section};
use super::select::Selection;
use crate::snapshot::rrset::Rdata;
use crate::wire::Name;
use foldhash::fast::RandomState;
use std::collections::{HashMap, HashSet};

/// SkyDNS's weight normalisation, in its exact float order: `floor((100 / sum) * weight)` with a
/// weight of 0 counting as 100, so that a lone weight-97 record gets 99.
pub fn normalised_weight(weight: u16, sum: u64) -> u16 {
    let w1 = 100.0 / sum as f64;
    (w1 * effective_weight(weight) as f64).floor() as u16
}

/// SkyDNS counts a weight of 0 as 100.
pub(super) fn effective_weight(weight: u16) -> u64 {
    if weight == 0 {
        100
    } else {
        weight as u64
    }
}

impl Answerer<'_> {
    /// SRV records of `sel` (grouped) with their glue. Weights are normalised per priority over
    /// the records that serve SRV; records without a host do not.
    pub(super) fn srv(&mut self, sel: &Selection<'_>) -> Result<(Section<'static>, Section<'static>), Abort> {
        let index = self.index;
        let served = || sel.grouped().iter().copied().filter(|e| e.host != HostKind::None);
        let mut sums: HashMap<u16, u64, RandomState> = HashMap::default();
        for e in served() {
            *sums.entry(index.priority_of(e)).or_default() += effective_weight(e.weight);
        }
        let mut answer = Section::default();
        let mut additional = Section::default();
        let mut looked_up: HashSet<Name, RandomState> = HashSet::default();
        for e in served() {
            let priority = index.priority_of(e);
            let weight = normalised_weight(e.weight, sums.get(&priority).copied().unwrap_or(1));
            let Some(target) = self.target(e, &mut additional, &mut looked_up, |target| target.clone()) else {
                continue;
            };
            answer.push(Rr::at_query(
                index.ttl_of(e),
                Rdata::Srv {
                    priority,
                    weight,
                    port: e.port,
                    target,
                },
            ));
            if answer.is_full() {
                return Err(Abort::TooLarge);
            }
        }
        Ok((answer, additional))
    }

    /// MX records of `sel`: `mail: true` records only, groups ignored.
    pub(super) fn mx(&mut self, sel: &Selection<'_>) -> Result<(Section<'static>, Section<'static>), Abort> {
        let index = self.index;
        let mut answer = Section::default();
        let mut additional = Section::default();
        let mut looked_up: HashSet<Name, RandomState> = HashSet::default();
        for &e in sel.deduped() {
            if !e.mail {
                continue;
            }
            // SkyDNS names an address host's glue by the unstripped key even when the exchange
            // itself is stripped; kept for compatibility.
            let Some(exchange) = self.target(e, &mut additional, &mut looked_up, |_| e.name()) else {
                continue;
            };
            answer.push(Rr::at_query(
                index.ttl_of(e),
                Rdata::Mx {
                    preference: index.priority_of(e),
                    exchange,
                },
            ));
            if answer.is_full() {
                return Err(Abort::TooLarge);
            }
        }
        Ok((answer, additional))
    }

    /// The SRV/MX target of `e`, adding its glue to `additional` once per distinct name: a name
    /// host's resolved addresses; for an address host, the addresses of the name the glue is owned
    /// by (`glue_owner` of the target), resolved as its own A and AAAA answers are. Never the
    /// record's address alone: a name a `targetstrip` shortened, or one with records below it,
    /// answers more addresses than this record's, and glue holding part of an RRset would be
    /// cached as the whole of it. A record without a host has no target.
    fn target(
        &mut self,
        e: &Entry,
        additional: &mut Section<'_>,
        looked_up: &mut HashSet<Name, RandomState>,
        glue_owner: impl FnOnce(&Name) -> Name,
    ) -> Option<Name> {
        let strip = e.target_strip as usize;
        let glue = match e.host() {
            Host::Name(host) => {
                let target = host.strip_labels(strip);
                if !looked_up.contains(&target) {
                    looked_up.insert(target.clone());
                    self.glue(&target, additional);
                }
                return Some(target);
            }
            Host::V4(ip) => Rdata::A(ip),
            Host::V6(ip) => Rdata::Aaaa(ip),
            Host::None => return None,
        };
        let target = super::key::stripped_name_of(e.owner(), strip);
        let owner = glue_owner(&target);
        if owner.is_within(&self.index.domain) {
            if !looked_up.contains(&owner) {
                looked_up.insert(owner.clone());
                self.glue(&owner, additional);
            }
        } else if !additional.is_full() {
            additional.push(Rr {
                owner: Some(owner),
                ttl: self.index.ttl_of(e),
                rdata: glue,
            });
        }
        Some(target)
    }
}
