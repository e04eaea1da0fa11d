//! Sections of an answer under construction: SkyDNS's post-processing dedup
//! (docs/skydns-semantics.md, "Sections, round robin and truncation") applied as records arrive, a
//! cheap lower bound of the wire size so that answers too large for any message are recognised
//! without building them, and the final shaping into RRsets with the TTL rule ("TTLs").

use crate::snapshot::rrset::{AnswerSet, Rdata, Record, Rrset};
use crate::wire::types::rtype;
use crate::wire::Name;
use foldhash::fast::{FixedState, RandomState};
use std::collections::HashMap;
use std::hash::BuildHasher;

/// Largest section worth building: a DNS message cannot carry more.
pub const MAX_SECTION: usize = 65535;

/// One record with its owner; `None` is the query name as the client spelled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rr {
    /// Owner; `None` for the query name.
    pub owner: Option<Name>,
    /// Time to live.
    pub ttl: u32,
    /// Data.
    pub rdata: Rdata,
}

impl Rr {
    /// A record owned by the query name.
    pub fn at_query(ttl: u32, rdata: Rdata) -> Rr {
        Rr {
            owner: None,
            ttl,
            rdata,
        }
    }

    /// A lower bound of the record's wire length: names that may compress count as a pointer.
    fn min_len(&self) -> usize {
        let name = |n: &Name| n.wire().len().min(2);
        let owner = self.owner.as_ref().map_or(2, name);
        let rdata = match &self.rdata {
            Rdata::A(_) => 4,
            Rdata::Aaaa(_) => 16,
            Rdata::Cname(n) | Rdata::Ns(n) | Rdata::Ptr(n) => name(n),
            Rdata::Mx { exchange, .. } => 2 + name(exchange),
            Rdata::Srv { target, .. } => 6 + target.wire().len(),
            Rdata::Txt(strings) => strings.iter().map(|s| 1 + s.len()).sum(),
            Rdata::Soa { mname, rname, .. } => name(mname) + name(rname) + 20,
        };
        owner + 10 + rdata
    }
}

/// What SkyDNS `dedup` compares: the owner, the type, and the data except for CNAMEs, of which
/// an owner keeps one.
#[derive(PartialEq, Eq, Hash)]
struct Identity<'a> {
    owner: Option<&'a Name>,
    rtype: u16,
    data: Option<&'a Rdata>,
}

/// Sections up to this many records are searched linearly; larger ones through a hash index.
const LINEAR_LIMIT: usize = 16;

/// Records of one section, duplicates dropped as they arrive (the first one stays).
#[derive(Debug, Default)]
pub struct Section<'q> {
    /// The query name, when records arriving with it as their explicit owner are to be
    /// recognised as owned by the query (a CNAME chain may lead back to it).
    query: Option<&'q Name>,
    rrs: Vec<Rr>,
    /// Identity hash → index of the first record with it; filled once the section outgrows
    /// [`LINEAR_LIMIT`].
    seen: HashMap<u64, u32, RandomState>,
    min_len: usize,
}

impl<'q> Section<'q> {
    /// A section of an answer to `query`.
    pub fn for_query(query: &'q Name) -> Section<'q> {
        Section {
            query: Some(query),
            ..Section::default()
        }
    }

    fn identity<'a>(&self, rr: &'a Rr) -> Identity<'a> {
        let owner = rr.owner.as_ref().filter(|&o| Some(o) != self.query);
        let rtype_ = rr.rdata.rtype();
        Identity {
            owner,
            rtype: rtype_,
            data: (rtype_ != rtype::CNAME).then_some(&rr.rdata),
        }
    }

    fn identity_hash(&self, rr: &Rr) -> u64 {
        FixedState::default().hash_one(self.identity(rr))
    }

    /// Whether a record equal to `rr` is already there.
    fn contains(&self, rr: &Rr) -> bool {
        let identity = self.identity(rr);
        let linear = || self.rrs.iter().any(|x| self.identity(x) == identity);
        if self.seen.is_empty() {
            return linear();
        }
        match self.seen.get(&self.identity_hash(rr)) {
            // A hash hit is a duplicate unless two identities collided; then look at them all.
            Some(&first) => self.identity(&self.rrs[first as usize]) == identity || linear(),
            None => false,
        }
    }

    fn insert(&mut self, mut rr: Rr) {
        if rr.owner.is_some() && rr.owner.as_ref() == self.query {
            rr.owner = None;
        }
        self.min_len += rr.min_len();
        self.rrs.push(rr);
        if self.rrs.len() > LINEAR_LIMIT {
            let unindexed = if self.seen.is_empty() { 0 } else { self.rrs.len() - 1 };
            for i in unindexed..self.rrs.len() {
                let hash = self.identity_hash(&self.rrs[i]);
                self.seen.entry(hash).or_insert(i as u32);
            }
        }
    }

    /// Adds `rr` unless an equal record is already there.
    pub fn push(&mut self, rr: Rr) {
        if !self.contains(&rr) {
            self.insert(rr);
        }
    }

    /// Adds each of `rrs` as [`Section::push`] does.
    pub fn extend(&mut self, rrs: &[Rr]) {
        for rr in rrs {
            if !self.contains(rr) {
                self.insert(rr.clone());
            }
        }
    }

    /// The section can no longer fit in any message.
    pub fn is_full(&self) -> bool {
        self.min_len > MAX_SECTION
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.rrs.is_empty()
    }

    /// The records, in arrival order.
    pub fn into_rrs(self) -> Vec<Rr> {
        self.rrs
    }
}

/// Shapes two sections into RRsets. With more than one answer record every answer TTL becomes
/// the smallest of them, capped at `ttl_cap` (SkyDNS post-processing); a single record keeps its
/// own. Address RRsets of the answer section rotate when `rotate` is set.
pub fn answer_set(answer: Vec<Rr>, additional: Vec<Rr>, ttl_cap: u32, rotate: bool) -> AnswerSet {
    let mut answer = answer;
    if answer.len() > 1 {
        let ttl = answer.iter().map(|rr| rr.ttl).min().unwrap_or(ttl_cap).min(ttl_cap);
        answer.iter_mut().for_each(|rr| rr.ttl = ttl);
    }
    AnswerSet {
        flattened: Vec::new(),
        answer: rrsets(answer, rotate),
        additional: rrsets(additional, false),
    }
}

/// Gathers records into RRsets by owner and type, each set where its first record was.
fn rrsets(rrs: Vec<Rr>, rotate: bool) -> Vec<Rrset> {
    let mut sets: Vec<Rrset> = Vec::new();
    let mut types: Vec<u16> = Vec::new();
    // Filled once there are more sets than a linear search should visit.
    let mut at: HashMap<(Option<Name>, u16), usize, RandomState> = HashMap::default();
    for Rr { owner, ttl, rdata } in rrs {
        let key = (owner, rdata.rtype());
        let found = if at.is_empty() {
            (0..sets.len())
                .rev()
                .find(|&i| types[i] == key.1 && sets[i].owner == key.0)
        } else {
            at.get(&key).copied()
        };
        let i = match found {
            Some(i) => i,
            None => {
                let (owner, rtype_) = key;
                let address = rtype_ == rtype::A || rtype_ == rtype::AAAA;
                sets.push(Rrset {
                    owner,
                    records: Vec::new(),
                    rotate: rotate && address,
                });
                types.push(rtype_);
                if sets.len() > LINEAR_LIMIT {
                    let unindexed = if at.is_empty() { 0 } else { sets.len() - 1 };
                    for (j, set) in sets.iter().enumerate().skip(unindexed) {
                        at.insert((set.owner.clone(), types[j]), j);
                    }
                }
                sets.len() - 1
            }
        };
        sets[i].records.push(Record { ttl, rdata });
    }
    sets
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn a(owner: Option<&str>, ttl: u32, last: u8) -> Rr {
        Rr {
            owner: owner.map(|o| Name::from_dotted(o).unwrap()),
            ttl,
            rdata: Rdata::A(Ipv4Addr::new(10, 0, 0, last)),
        }
    }

    fn cname(owner: Option<&str>, target: &str) -> Rr {
        Rr {
            owner: owner.map(|o| Name::from_dotted(o).unwrap()),
            ttl: 60,
            rdata: Rdata::Cname(Name::from_dotted(target).unwrap()),
        }
    }

    #[test]
    fn equal_records_are_kept_once() {
        let mut s = Section::default();
        s.push(a(None, 60, 1));
        s.push(a(None, 30, 1));
        s.push(a(Some("x."), 60, 1));
        assert_eq!(s.into_rrs(), [a(None, 60, 1), a(Some("x."), 60, 1)]);
    }

    #[test]
    fn the_query_name_as_explicit_owner_is_the_query_owner() {
        let query = Name::from_dotted("q.").unwrap();
        let mut s = Section::for_query(&query);
        s.push(a(None, 60, 1));
        s.push(a(Some("q."), 60, 1));
        assert_eq!(s.into_rrs(), [a(None, 60, 1)]);
    }

    #[test]
    fn only_the_first_cname_of_an_owner_stays() {
        let mut s = Section::default();
        s.push(cname(None, "one."));
        s.push(cname(None, "two."));
        assert_eq!(s.into_rrs(), [cname(None, "one.")]);
    }

    #[test]
    fn a_single_answer_keeps_its_ttl() {
        let set = answer_set(vec![a(None, 7200, 1)], vec![], 3600, false);
        assert_eq!(set.answer[0].records[0].ttl, 7200);
    }

    #[test]
    fn several_answers_share_the_smallest_ttl_capped_at_the_default() {
        let set = answer_set(vec![a(None, 7200, 1), a(None, 7200, 2)], vec![], 3600, false);
        assert!(set.answer[0].records.iter().all(|r| r.ttl == 3600));
        let set = answer_set(
            vec![a(None, 30, 1), a(None, 7200, 2)],
            vec![a(Some("x."), 7200, 3)],
            3600,
            false,
        );
        assert!(set.answer[0].records.iter().all(|r| r.ttl == 30));
        assert_eq!(
            set.additional[0].records[0].ttl, 7200,
            "the additional section keeps its TTLs"
        );
    }

    #[test]
    fn records_gather_into_rrsets_by_owner_and_type() {
        let rrs = vec![a(None, 60, 1), cname(None, "t."), a(Some("t."), 60, 2), a(None, 60, 3)];
        let set = answer_set(rrs, vec![], 3600, true);
        let shape: Vec<(Option<String>, usize, bool)> = set
            .answer
            .iter()
            .map(|s| (s.owner.as_ref().map(|o| o.to_string()), s.records.len(), s.rotate))
            .collect();
        assert_eq!(shape, [(None, 2, true), (None, 1, false), (Some("t.".into()), 1, true)]);
    }

    #[test]
    fn a_section_is_full_past_the_largest_message() {
        let mut s = Section::default();
        for i in 0..4095u32 {
            s.push(Rr::at_query(60, Rdata::A(Ipv4Addr::from(i))));
        }
        assert!(!s.is_full(), "4095 A records take 65520 bytes");
        s.push(Rr::at_query(60, Rdata::A(Ipv4Addr::from(4095))));
        assert!(s.is_full());
    }
}
