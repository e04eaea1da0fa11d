//! What one SkyDNS lookup returns before any type is considered: the records of a name (or of a
//! wildcard pattern), each view map replaced by the list the clients being answered get, with the
//! per-lookup dedup and, for the types that use them, groups applied (docs/skydns-semantics.md,
//! "Views", "Duplicate records" and "Groups").

use super::entry::Entry;
use super::group;
use super::index::Index;
use super::service::ViewKey;
use crate::snapshot::views::Prefix;
use foldhash::fast::RandomState;
use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;

/// Whom answers are built for: the clients whose longest match among the prefixes that matter
/// is this prefix (a single client is the prefix of its address alone), or, for `None`, the
/// clients no prefix holds.
pub type Class = Option<Prefix>;

/// The class answers are being built for, and every prefix of the view maps they read: what
/// tells the builder whether a name's answers depend on the client, and for which classes.
#[derive(Debug, Default)]
pub struct Audience {
    /// The class answered.
    pub class: Class,
    /// The prefixes of the view maps read since it was last emptied, repeats included.
    pub seen: Vec<Prefix>,
}

impl AsMut<Audience> for Audience {
    fn as_mut(&mut self) -> &mut Audience {
        self
    }
}

/// The records one lookup sees, in key order.
#[derive(Debug)]
pub struct Selection<'i> {
    /// After the per-lookup dedup; MX reads these.
    deduped: Vec<&'i Entry>,
    /// After dedup and groups, when the groups dropped something.
    grouped: Option<Vec<&'i Entry>>,
    /// The lookup hit a directory, not a single key: CNAME queries get nothing
    /// (docs/skydns-semantics.md, "CNAME queries").
    pub directory: bool,
}

impl<'i> Selection<'i> {
    /// The lookup whose keys hold `entries`, in key order, for `audience`'s class; `directory`
    /// when they are a directory's.
    pub fn of(
        index: &Index,
        entries: impl IntoIterator<Item = &'i Entry>,
        directory: bool,
        audience: &mut Audience,
    ) -> Selection<'i> {
        let mut records = Vec::new();
        for entry in entries {
            expand(entry, audience, &mut records);
        }
        let deduped = dedup(index, records);
        // Without a grouped record anywhere the filter keeps everything: skip its scan.
        let grouped = match index.kinds.grouped {
            0 => None,
            _ => group::filter(&deduped, |e: &Entry| (e.depth, e.group())),
        };
        Selection {
            deduped,
            grouped,
            directory,
        }
    }

    /// Records after dedup only (MX ignores groups).
    pub fn deduped(&self) -> &[&'i Entry] {
        &self.deduped
    }

    /// Records after dedup and groups (A/AAAA, SRV, TXT, CNAME, NS).
    pub fn grouped(&self) -> &[&'i Entry] {
        self.grouped.as_deref().unwrap_or(&self.deduped)
    }
}

/// Adds the records `entry` stands for, for `audience`'s class, to `out`: the entry itself, or
/// of its view map the list of the longest prefix that covers the class, else the `default`
/// list, else every list. The map's prefixes are noted in the audience.
pub(super) fn expand<'e>(entry: &'e Entry, audience: &mut Audience, out: &mut Vec<&'e Entry>) {
    if !entry.has_views() {
        out.push(entry);
        return;
    }
    let views = entry.views();
    let mut best: Option<(u8, usize)> = None;
    let mut default = None;
    for (i, list) in views.iter().enumerate() {
        match list.key {
            ViewKey::Default => default = Some(i),
            ViewKey::Prefix(prefix) => {
                audience.seen.push(prefix);
                let covers = audience.class.is_some_and(|class| prefix.covers(&class));
                if covers && best.is_none_or(|(length, _)| prefix.length() > length) {
                    best = Some((prefix.length(), i));
                }
            }
        }
    }
    match best.map(|(_, i)| i).or(default) {
        Some(i) => out.extend(views[i].records.iter()),
        None => out.extend(views.iter().flat_map(|list| list.records.iter())),
    }
}

/// The records of a lookup, in key order, without those equal to an earlier one of the same
/// lookup. Only identities the index holds more than once are looked at.
fn dedup<'i>(index: &Index, records: Vec<&'i Entry>) -> Vec<&'i Entry> {
    let mut first: HashMap<u64, &Entry, RandomState> = HashMap::default();
    let mut records = records;
    records.retain(|&e| {
        if !index.is_repeated(e.identity) {
            return true;
        }
        match first.entry(e.identity) {
            Slot::Vacant(v) => {
                v.insert(e);
                true
            }
            Slot::Occupied(o) => !o.get().same_record(e),
        }
    });
    records
}
