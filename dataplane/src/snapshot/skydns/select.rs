//! What one SkyDNS lookup returns before any type is considered: the records of a name (or of a
//! wildcard pattern) with the per-lookup dedup and, for the types that use them, groups applied
//! (docs/skydns-semantics.md, "Duplicate records" and "Groups").

use super::group;
use super::index::Index;
use foldhash::fast::RandomState;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ops::Range;

/// The records one lookup sees, in key order.
#[derive(Debug)]
pub struct Selection {
    /// After the per-lookup dedup; MX reads these.
    deduped: Vec<u32>,
    /// After dedup and groups, when the groups dropped something.
    grouped: Option<Vec<u32>>,
    /// The lookup hit a directory, not a single key: CNAME queries get nothing
    /// (docs/skydns-semantics.md, "CNAME queries").
    pub directory: bool,
}

impl Selection {
    /// The lookup of a name whose records are the run `range`, the first `exact` of them at
    /// the name itself.
    pub fn from_range(index: &Index, range: Range<usize>, exact: usize) -> Selection {
        let directory = range.len() > exact;
        let deduped = dedup(index, range.map(|i| i as u32));
        Selection::grouping(index, deduped, directory)
    }

    /// The lookup of a wildcard pattern below a directory that matched `matched` (in key order).
    pub fn from_matches(index: &Index, matched: Vec<u32>) -> Selection {
        let deduped = dedup(index, matched);
        Selection::grouping(index, deduped, true)
    }

    fn grouping(index: &Index, deduped: Vec<u32>, directory: bool) -> Selection {
        // Without a grouped record anywhere the filter keeps everything: skip its scan.
        let grouped = match index.kinds.grouped {
            0 => None,
            _ => group::filter(&deduped, |i| {
                let e = &index.entries()[i as usize];
                (e.depth, e.group())
            }),
        };
        Selection {
            deduped,
            grouped,
            directory,
        }
    }

    /// Records after dedup only (MX ignores groups).
    pub fn deduped(&self) -> &[u32] {
        &self.deduped
    }

    /// Records after dedup and groups (A/AAAA, SRV, TXT, CNAME, NS).
    pub fn grouped(&self) -> &[u32] {
        self.grouped.as_deref().unwrap_or(&self.deduped)
    }
}

/// The records of a lookup, in key order, without those equal to an earlier one of the same
/// lookup. Only identities the index holds more than once are looked at.
fn dedup(index: &Index, records: impl IntoIterator<Item = u32>) -> Vec<u32> {
    let mut first: HashMap<u64, u32, RandomState> = HashMap::default();
    records
        .into_iter()
        .filter(|&i| {
            let e = &index.entries()[i as usize];
            if !index.is_repeated(e.identity) {
                return true;
            }
            match first.entry(e.identity) {
                Entry::Vacant(v) => {
                    v.insert(i);
                    true
                }
                Entry::Occupied(o) => !index.entries()[*o.get() as usize].same_record(e),
            }
        })
        .collect()
}
