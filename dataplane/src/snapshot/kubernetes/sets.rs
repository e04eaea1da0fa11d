//! Shaping cluster records into answer sets: address RRsets split by family, SRV sets with their
//! glue, and the SRV weight CoreDNS gives.

use crate::snapshot::rrset::{AnswerSet, Rdata, Record, Rrset};
use crate::wire::Name;
use foldhash::fast::RandomState;
use std::collections::HashSet;
use std::net::IpAddr;

/// Address lists up to this long are de-duplicated by scanning them.
const SMALL: usize = 16;

/// The A and the AAAA answer of `addresses` (either may be empty), owned by the query name.
pub fn address_answers(ttl: u32, addresses: &[IpAddr]) -> (Option<AnswerSet>, Option<AnswerSet>) {
    let (v4, v6) = address_rrsets(None, ttl, addresses);
    let answer = |set: Option<Rrset>| {
        set.map(|set| AnswerSet {
            flattened: Vec::new(),
            answer: vec![set],
            additional: Vec::new(),
        })
    };
    (answer(v4), answer(v6))
}

/// The A and AAAA RRsets of `addresses` owned by `owner` (`None`: the query name), duplicates
/// removed, in the order given.
pub fn address_rrsets(owner: Option<&Name>, ttl: u32, addresses: &[IpAddr]) -> (Option<Rrset>, Option<Rrset>) {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    // Most names hold a handful of addresses: a hash set pays off only for large services.
    let mut seen: HashSet<IpAddr, RandomState> = HashSet::default();
    for (i, &address) in addresses.iter().enumerate() {
        let repeated = if addresses.len() <= SMALL {
            addresses[..i].contains(&address)
        } else {
            !seen.insert(address)
        };
        if repeated {
            continue;
        }
        match address {
            IpAddr::V4(a) => v4.push(Record {
                ttl,
                rdata: Rdata::A(a),
            }),
            IpAddr::V6(a) => v6.push(Record {
                ttl,
                rdata: Rdata::Aaaa(a),
            }),
        }
    }
    let set = |records: Vec<Record>| {
        (!records.is_empty()).then(|| Rrset {
            owner: owner.cloned(),
            records,
            rotate: true,
        })
    };
    (set(v4), set(v6))
}

/// One SRV record before de-duplication: its port and target, and the target's addresses for
/// the additional section.
#[derive(Debug, Clone)]
pub struct SrvEntry<'a> {
    /// Port.
    pub port: u16,
    /// Target.
    pub target: Name,
    /// Addresses of the target.
    pub addresses: &'a [IpAddr],
}

/// CoreDNS's SRV weight for `entries` records of priority 0: 100 split evenly, at least 1.
pub fn weight(entries: usize) -> u16 {
    (100 / entries.max(1)).max(1) as u16
}

/// The SRV answer of `entries`: duplicates by (target, port) removed, the weight computed from
/// the count before removal, each target's A/AAAA in the additional section once.
pub fn srv_answer(ttl: u32, entries: &[SrvEntry<'_>]) -> Option<AnswerSet> {
    srv_weighted(ttl, weight(entries.len()), entries)
}

/// The SRV answer of `entries` with every record weighing `weight`: [`srv_answer`] of entries
/// whose duplicates were removed before (the weight counts them).
pub fn srv_weighted(ttl: u32, weight: u16, entries: &[SrvEntry<'_>]) -> Option<AnswerSet> {
    if entries.is_empty() {
        return None;
    }
    let mut records: Vec<Record> = Vec::with_capacity(entries.len());
    let mut additional = Vec::new();
    let mut seen: HashSet<(u16, &Name), RandomState> = HashSet::default();
    let mut glued: HashSet<&Name, RandomState> = HashSet::default();
    for entry in entries {
        if !seen.insert((entry.port, &entry.target)) {
            continue;
        }
        let rdata = Rdata::Srv {
            priority: 0,
            weight,
            port: entry.port,
            target: entry.target.clone(),
        };
        records.push(Record { ttl, rdata });
        if glued.insert(&entry.target) {
            let (v4, v6) = address_rrsets(Some(&entry.target), ttl, entry.addresses);
            additional.extend(v4.into_iter().chain(v6));
        }
    }
    Some(AnswerSet {
        flattened: Vec::new(),
        answer: vec![Rrset {
            owner: None,
            records,
            rotate: false,
        }],
        additional,
    })
}

/// An answer of one record owned by the query name.
pub fn single(ttl: u32, rdata: Rdata) -> AnswerSet {
    AnswerSet {
        flattened: Vec::new(),
        answer: vec![Rrset {
            owner: None,
            records: vec![Record { ttl, rdata }],
            rotate: false,
        }],
        additional: Vec::new(),
    }
}
