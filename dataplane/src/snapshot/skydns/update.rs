//! A snapshot after a few keys changed, made from the previous one without compiling every
//! name again: what a source watching etcd publishes for each change.
//!
//! A name answers with the records at and below it, and with what the CNAME targets and SRV/MX
//! targets of those records resolve to. So a change at a path reaches that name and its
//! ancestors, and, through targets, the names holding a record whose target is the changed name
//! or one of its ancestors — and so on along chains. Exactly those names are compiled again; the
//! others keep their nodes, shared with the previous snapshot (see [`crate::snapshot::Nodes`]),
//! and the index shares every record the change did not touch.
//!
//! A name with more than [`LARGE`] records at and below it (the domain, a namespace of a large
//! cluster) costs tens of milliseconds to compile, and is reached by every change below it. Such
//! names are left as they were and reported [`Updated::stale`]; the source compiles them in a
//! later update ([`update`]'s `catch_up`), at most a few times a second, so that a change
//! answers from the names it touches at once whatever the size of the domain.

use super::answers::Answerer;
use super::build::{apex_answers, local_alias, local_alias_name, name_at, reverse_apexes, zones, Named};
use super::entry::Entry;
use super::index::{below, Index};
use super::key::{is_below, is_wildcard, name_of, path_of, KeyKind, KeyPath};
use super::reverse::ptr_nodes;
use super::service::Config;
use crate::snapshot::{Identity, Snapshot};
use crate::wire::name::is_within;
use crate::wire::Name;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

/// Records at and below a name past which an update leaves the name stale for a catch-up.
pub const LARGE: usize = 4096;

/// Rounds of following targets before the change is treated as reaching too far (chains are
/// at most 8 CNAMEs long; a fan-out beyond this is cheaper to build whole).
const MAX_ROUNDS: usize = 16;

/// What [`update`] made.
#[derive(Debug)]
pub struct Updated {
    /// The snapshot after the change.
    pub snapshot: Snapshot,
    /// Paths (wire form, labels reversed) of the names with more than [`LARGE`] records the
    /// change reached and did not compile: they answer as before until an update is given them
    /// as `catch_up`.
    pub stale: Vec<Vec<u8>>,
}

/// The snapshot `previous` becomes when the keys `changed` take the records they have in
/// `records`, the whole table after the change (in the order of [`Entry::cmp_order`]; a key
/// absent from it was deleted or holds a value that cannot serve), which the new index shares.
/// `changed` must name every key whose record differs from the table `previous` was made from;
/// `previous` must have been made by [`super::build()`], [`super::build_entries`] or this
/// function under the same `config`. The names at `catch_up`, stale from earlier updates, are
/// compiled whatever their size. Unsigned: the sources update through `crate::signer::update`,
/// which signs again the names given with it, those whose answers it compiled again when the
/// domain is signed (`config.dnssec`; none otherwise).
///
/// `None` when the change cannot be applied alone, and a build must run instead: keys that are
/// not names, keys that differ only in case, a domain inside a reverse zone, or a change that
/// reaches more than a quarter of the names. A key in the reverse trees recompiles only its own
/// name and the names above it that hold records ([`reverse_edits`]).
pub(crate) fn update(
    previous: &Snapshot,
    config: &Config,
    records: &Arc<Vec<Arc<Entry>>>,
    changed: &[String],
    catch_up: &[Vec<u8>],
    generation: u64,
    now: SystemTime,
) -> Option<(Updated, Vec<Name>)> {
    let index = previous.skydns.as_deref()?;
    if index.domain != config.domain || reverse_apexes().iter().any(|r| config.domain.is_within(r)) {
        return None;
    }
    let Edits {
        records: edits,
        names: mut roots,
        reverse,
    } = edits(config, index, changed)?;
    let zones = zones(config, &reverse_apexes(), now);
    if roots.is_empty() && catch_up.is_empty() {
        let mut nodes = previous.nodes.clone();
        reverse_edits(config, records, &zones, &reverse, &mut nodes);
        let snapshot = Snapshot {
            generation,
            zones: zones.into(),
            nodes,
            hosts: Default::default(),
            leaves: previous.leaves.clone(),
            identity: Identity::default(),
            skydns: previous.skydns.clone(),
            autopath: None,
            dnssec: None,
        };
        let updated = Updated {
            snapshot,
            stale: Vec::new(),
        };
        return Some((updated, Vec::new()));
    }
    let index = index.edited(records, &edits)?;
    // The `local` alias answers with another name's records: compiled again each time, with
    // the names above it that exist only for it.
    if let Some(alias) = config.local.as_ref().and(local_alias_name(config)) {
        roots.push(path_of(&alias));
    }
    let roots = reached(&index, roots)?;
    let mut names = with_ancestors(&index, &roots);
    let stale: Vec<Vec<u8>> = names
        .iter()
        .filter(|path| index.subtree(path).len() > LARGE && !catch_up.contains(path))
        .cloned()
        .collect();
    names.retain(|path| !stale.contains(path));
    names.extend(catch_up.iter().cloned());
    if names.len() > (previous.nodes.len() + previous.leaves.len()) / 4 + 64 {
        return None;
    }
    let zone = zones.iter().position(|z| z.apex == config.domain).unwrap_or(0) as u16;
    let mut nodes = previous.nodes.clone();
    let mut leaves = previous.leaves.clone();
    let mut answerer = Answerer::new(&index);
    for path in &names {
        let name = name_of(path);
        match name_at(&index, &mut answerer, path, zone) {
            Named::Leaf(entry) => {
                nodes.remove(&name);
                leaves.insert(entry);
            }
            Named::Node(mut node) => {
                if **path == *index.apex {
                    apex_answers(config, &mut node, now);
                }
                leaves.remove(path);
                nodes.insert(name, node);
            }
            Named::Absent => {
                leaves.remove(path);
                nodes.remove(&name);
            }
        }
    }
    if let Some(local) = &config.local {
        local_alias(config, local, &mut answerer, zone, &mut nodes, &mut leaves);
    }
    reverse_edits(config, records, &zones, &reverse, &mut nodes);
    tracing::debug!(
        generation,
        compiled = names.len(),
        stale = stale.len(),
        "updated SkyDNS snapshot"
    );
    let snapshot = Snapshot {
        generation,
        zones: zones.into(),
        nodes,
        hosts: Default::default(),
        leaves,
        identity: Identity::default(),
        skydns: Some(Arc::new(index)),
        autopath: None,
        dnssec: None,
    };
    let mut touched = Vec::new();
    if config.dnssec.is_some() {
        touched.extend(names.iter().map(|path| name_of(path)));
        if let Some(alias) = config.local.as_ref().and(local_alias_name(config)) {
            let mut name = alias;
            while name != config.domain && name.is_within(&config.domain) {
                let parent = name.parent();
                touched.push(name);
                name = parent;
            }
        }
    }
    Some((Updated { snapshot, stale }, touched))
}

/// What the keys `changed` reach.
struct Edits {
    /// The paths of their records below the domain, each once.
    records: Vec<Vec<u8>>,
    /// The paths of the names below the domain those keys hold records for or mark.
    names: Vec<Vec<u8>>,
    /// The paths of the names in the reverse trees those keys hold records for.
    reverse: Vec<Vec<u8>>,
}

/// The [`Edits`] of the keys `changed`.
fn edits(config: &Config, index: &Index, changed: &[String]) -> Option<Edits> {
    let reverse_trees: Vec<Vec<u8>> = reverse_apexes().iter().map(path_of).collect();
    let mut edits = Edits {
        records: Vec::with_capacity(changed.len()),
        names: Vec::with_capacity(changed.len()),
        reverse: Vec::new(),
    };
    for key in changed {
        let at = match KeyPath::parse(key, &config.path_prefix) {
            Ok(None) => continue,
            Ok(Some(at)) => at,
            Err(_) => return None,
        };
        if reverse_trees.iter().any(|r| is_below(at.owner(), r)) {
            edits.reverse.push(at.owner().to_vec());
            continue;
        }
        if !is_below(at.owner(), &index.apex) {
            continue;
        }
        edits.names.push(at.owner().to_vec());
        // A marker is no record: it lies outside the domain's records.
        if at.kind() != KeyKind::Wildcards {
            edits.records.push(at.into_path());
        }
    }
    // Keys that differ only in case share a path: each path is recounted once.
    for paths in [&mut edits.records, &mut edits.names, &mut edits.reverse] {
        paths.sort();
        paths.dedup();
    }
    Some(edits)
}

/// Entries at and below a name in the reverse trees past which it cannot answer PTR whatever
/// changed below it: only a key with one record and nothing below answers (or a directory's
/// `.self` key, which is then a change of its own).
const REVERSE_RUN_LIMIT: usize = 256;

/// Recompiles the PTR nodes of the reverse names `owners` changed, and of the names above them
/// that may answer: a key answers PTR only when it has nothing below it, so a name above a
/// changed key is read again only when few records lie at and below it.
fn reverse_edits(
    config: &Config,
    records: &[Arc<Entry>],
    zones: &[crate::snapshot::Zone],
    owners: &[Vec<u8>],
    nodes: &mut crate::snapshot::Nodes,
) {
    let apexes: Vec<(Vec<u8>, u16)> = reverse_apexes()
        .iter()
        .map(|apex| {
            let zone = zones.iter().position(|z| z.apex == *apex).unwrap_or(0) as u16;
            (path_of(apex), zone)
        })
        .collect();
    let mut names: BTreeSet<&[u8]> = BTreeSet::new();
    for owner in owners {
        let Some((apex, _)) = apexes.iter().find(|(apex, _)| is_below(owner, apex)) else {
            continue;
        };
        let mut end = apex.len();
        while end < owner.len() {
            end += 1 + owner[end] as usize;
            names.insert(&owner[..end.min(owner.len())]);
        }
    }
    let zone_of = |path: &[u8]| {
        apexes
            .iter()
            .find(|(apex, _)| is_below(path, apex))
            .map_or(0, |&(_, zone)| zone)
    };
    let mut skipped = 0;
    for path in names {
        let run = &records[below(records, path)];
        let own = owners.iter().any(|o| **o == *path);
        if !own && run.len() > REVERSE_RUN_LIMIT {
            continue;
        }
        let name = name_of(path);
        let entries: Vec<&Entry> = run.iter().map(|e| &**e).collect();
        let node = ptr_nodes(config, entries, zone_of, &mut skipped)
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, node)| node);
        match node {
            Some(node) => nodes.insert(name, node),
            None => nodes.remove(&name),
        };
    }
}

/// The paths whose records' answers change: the edited ones, then every record whose target
/// lookup sees one of those, until none is added. `None` past [`MAX_ROUNDS`].
fn reached(index: &Index, mut roots: Vec<Vec<u8>>) -> Option<Vec<Vec<u8>>> {
    let mut seen: BTreeSet<Vec<u8>> = roots.iter().cloned().collect();
    let mut fresh: Vec<Name> = roots.iter().map(|p| name_of(p)).collect();
    for _ in 0..MAX_ROUNDS {
        if fresh.is_empty() {
            return Some(roots);
        }
        let mut next = Vec::new();
        for e in index.entries() {
            // A view map's lists read what their records' hosts name.
            let records = e.views().iter().flat_map(|list| list.records.iter());
            let read = std::iter::once(&**e).chain(records).any(|record| {
                match record.host_name() {
                    Some(host) => fresh.iter().any(|changed| reads(host, record.target_strip, changed)),
                    // An address record's SRV glue is what the name a `targetstrip` leaves of
                    // its own answers.
                    None if record.target_strip > 0 => {
                        let own = e.name();
                        let target = strip_labels(own.wire(), record.target_strip as usize);
                        fresh.iter().any(|changed| is_within(changed.wire(), target))
                    }
                    None => false,
                }
            });
            if read && !seen.contains(e.owner()) {
                seen.insert(e.owner().to_vec());
                next.push(e.owner().to_vec());
            }
        }
        fresh = next.iter().map(|p| name_of(p)).collect();
        roots.extend(next);
    }
    None
}

/// Whether a record with the name host `host` (wire form) looks up records at or above
/// `changed`: its CNAME chase reads the host, its SRV/MX glue the host less `strip` labels, and
/// a lookup with wildcard labels reads everything below the part right of its last wildcard.
fn reads(host: &[u8], strip: u8, changed: &Name) -> bool {
    let read = |looked_up: &[u8]| is_within(changed.wire(), fixed_suffix(looked_up));
    read(host) || (strip > 0 && read(strip_labels(host, strip as usize)))
}

/// The wire name without its `n` leftmost labels, or whole when it has no more than `n`
/// ([`Name::strip_labels`] on the wire form).
fn strip_labels(wire: &[u8], n: usize) -> &[u8] {
    let mut pos = 0;
    for _ in 0..n {
        match wire.get(pos) {
            Some(&len) if len != 0 => pos += 1 + len as usize,
            _ => return wire,
        }
    }
    match wire.get(pos) {
        Some(&len) if len != 0 => &wire[pos..],
        _ => wire,
    }
}

/// The wire name right of its last wildcard label (all of it when it has none).
fn fixed_suffix(wire: &[u8]) -> &[u8] {
    let mut pos = 0;
    let mut fixed = 0;
    while pos < wire.len() && wire[pos] != 0 {
        let end = pos + 1 + wire[pos] as usize;
        if is_wildcard(wire.get(pos + 1..end).unwrap_or_default()) {
            fixed = end;
        }
        pos = end;
    }
    wire.get(fixed..).unwrap_or(&[0])
}

/// `roots` and each of their ancestors down to the apex, the apex included.
fn with_ancestors(index: &Index, roots: &[Vec<u8>]) -> BTreeSet<Vec<u8>> {
    let mut names = BTreeSet::new();
    names.insert(index.apex.to_vec());
    for path in roots {
        let mut end = index.apex.len();
        while end < path.len() {
            end += 1 + path[end] as usize;
            names.insert(path[..end.min(path.len())].to_vec());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::strip_labels;
    use crate::wire::Name;

    #[test]
    fn stripping_labels_of_a_wire_name_agrees_with_the_name() {
        let name = Name::from_dotted("a.b.c.").unwrap();
        for n in 0..5 {
            assert_eq!(strip_labels(name.wire(), n), name.strip_labels(n).wire(), "{n} labels");
        }
        assert_eq!(strip_labels(Name::root().wire(), 1), Name::root().wire());
    }
}
