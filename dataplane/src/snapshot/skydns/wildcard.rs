//! SkyDNS query wildcards (SkyDNS `PathWithWildcard`; docs/skydns-semantics.md, "Query wildcards"):
//! a `*` or `any` label matches any label at its position. The lookup starts at the fixed part
//! right of the rightmost wildcard label: missing → NXDOMAIN; a single key → that key's records,
//! whatever the wildcards say; a directory → every key below it that matches the whole name
//! position by position, keys shorter than the name skipped, longer ones matching by their leading
//! components. A `.self` key makes the fixed part answer as a single key does; under
//! `--wildcards-marker`, an unmarked fixed part lets nothing below it match, its `.self` key
//! included: its own records answer, or, when it has none, nothing does (NXDOMAIN).
//!
//! Matching walks the sorted index: a literal label narrows the run by binary search, a wildcard
//! label visits each child run once, so selective patterns never scan the whole zone.

use super::answers::{Abort, Answerer};
use super::index::Index;
use super::key::{components, is_special, is_wildcard};
use super::select::{Audience, Selection};
use crate::snapshot::rrset::{AnswerSet, CompiledAnswer};
use crate::snapshot::views::Prefix;
use crate::snapshot::Slot;
use crate::wire::types::rtype;
use crate::wire::{LowerName, Name};
use std::net::IpAddr;
use std::ops::Range;

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

/// Answers a query from `client` whose name holds `*` or `any` labels below the SkyDNS domain,
/// with the query name as the owner of every record; view maps give the lists of `client`.
/// Qtype ANY gets an empty answer when anything matched, for the caller to answer minimally.
pub fn wildcard(index: &Index, qname: &LowerName, qtype: u16, client: IpAddr) -> WildcardAnswer {
    let Ok(name) = Name::from_wire(qname.wire()) else {
        return WildcardAnswer::NxDomain;
    };
    let mut answerer = Answerer::new(index);
    answerer.audience.class = Some(Prefix::host(client));
    let Some(sel) = answerer.lookup(&name) else {
        return WildcardAnswer::NxDomain;
    };
    if sel.deduped().is_empty() {
        return WildcardAnswer::NoData;
    }
    if qtype == rtype::ANY {
        return WildcardAnswer::Answer(CompiledAnswer::compile(qname, &AnswerSet::default()));
    }
    let Some(slot) = Slot::for_qtype(qtype) else {
        return WildcardAnswer::NoData;
    };
    match answerer.answer(&sel, &name, slot) {
        Ok(None) => WildcardAnswer::NoData,
        Ok(Some(set)) => WildcardAnswer::Answer(CompiledAnswer::compile(qname, &set)),
        Err(Abort::TooLarge | Abort::Exhausted) => WildcardAnswer::Answer(CompiledAnswer::overflowing()),
    }
}

/// The records the wildcard pattern `path` (a name's path, with wildcard components below the
/// domain) selects for `audience`, or `None` when its fixed part does not exist.
pub(super) fn select<'i>(index: &'i Index, path: &[u8], audience: &mut Audience) -> Option<Selection<'i>> {
    let mut fixed = index.apex.len();
    for label in components(&path[fixed..]) {
        if is_wildcard(label) {
            break;
        }
        fixed += 1 + label.len();
    }
    let fixed_path = &path[..fixed];
    let range = index.subtree(fixed_path);
    if range.is_empty() {
        return None;
    }
    let exact = index.exact_count(range.clone(), fixed);
    if exact == range.len() {
        return index.select(fixed_path, range, audience);
    }
    if index.unmarked(fixed_path) {
        // Nothing below an unmarked directory matches, the apex's included, nor its `.self`.
        if exact == 0 {
            return None;
        }
        return index.select(fixed_path, range, audience);
    }
    if !index.own(fixed_path, range.clone()).is_empty() {
        return index.select(fixed_path, range, audience);
    }
    let pattern: Vec<&[u8]> = components(&path[fixed..]).collect();
    let mut matched = Vec::new();
    descend(index, range, fixed, &pattern, &mut matched);
    let entries = index.entries();
    Some(Selection::of(
        index,
        matched.into_iter().map(|i| &*entries[i]),
        true,
        audience,
    ))
}

/// Collects the entries of `run` (all below a common prefix of `prefix_len` bytes) whose next
/// components match `pattern`.
fn descend(index: &Index, run: Range<usize>, prefix_len: usize, pattern: &[&[u8]], matched: &mut Vec<usize>) {
    let Some((&label, rest)) = pattern.split_first() else {
        matched.extend(run);
        return;
    };
    // Entries exactly at the prefix are shorter than the pattern.
    let start = run.start + index.exact_count(run.clone(), prefix_len);
    let Some(first) = index.entries().get(start..run.end).and_then(|r| r.first()) else {
        return;
    };
    if is_wildcard(label) {
        let mut i = start;
        while i < run.end {
            let path = index.entries()[i].path();
            let child = &path[..prefix_len + 1 + path[prefix_len] as usize];
            let sub = index.subtree_within(i..run.end, child);
            let next = sub.end;
            // A `.self` key is its directory's record, shorter than the pattern.
            if !is_special(&child[prefix_len + 1..]) {
                descend(index, sub, child.len(), rest, matched);
            }
            i = next;
        }
    } else {
        let mut child = first.path()[..prefix_len].to_vec();
        child.push(label.len() as u8);
        child.extend_from_slice(label);
        let sub = index.subtree_within(start..run.end, &child);
        descend(index, sub, child.len(), rest, matched);
    }
}
