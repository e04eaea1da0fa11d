//! What one SkyDNS lookup returns before any type is considered: the records of a name (or of a
//! wildcard pattern) with the per-lookup dedup (§5.1) and, for the types that use them, groups
//! (§5.2) applied.

use super::group;
use super::index::Index;
use foldhash::fast::RandomState;
use std::collections::HashSet;
use std::ops::Range;

/// The records one lookup sees, in key order.
#[derive(Debug)]
pub struct Selection {
    /// After the per-lookup dedup; MX reads these.
    deduped: Vec<u32>,
    /// After dedup and groups, when the groups dropped something.
    grouped: Option<Vec<u32>>,
    /// The lookup hit a directory, not a single key: CNAME queries get nothing (§6.4).
    pub directory: bool,
}

impl Selection {
    /// The lookup of a name whose records are the run `range`, the first `exact` of them at
    /// the name itself.
    pub fn from_range(index: &Index, range: Range<usize>, exact: usize) -> Selection {
        let lo = range.start as u32;
        let directory = range.len() > exact;
        // A record is a duplicate within the run iff its closest earlier equal lies in the run.
        let deduped = range
            .map(|i| i as u32)
            .filter(|&i| {
                let prev = index.entries[i as usize].prev_equal;
                prev == super::entry::NO_ENTRY || prev < lo
            })
            .collect();
        Selection::grouping(index, deduped, directory)
    }

    /// The lookup of a wildcard pattern below a directory that matched `matched` (in key order).
    pub fn from_matches(index: &Index, matched: Vec<u32>) -> Selection {
        let mut seen: HashSet<u32, RandomState> = HashSet::default();
        let deduped = matched
            .into_iter()
            .filter(|&i| seen.insert(index.entries[i as usize].class))
            .collect();
        Selection::grouping(index, deduped, true)
    }

    fn grouping(index: &Index, deduped: Vec<u32>, directory: bool) -> Selection {
        let grouped = group::filter(&deduped, |i| {
            let e = &index.entries[i as usize];
            (e.depth, e.group)
        });
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
