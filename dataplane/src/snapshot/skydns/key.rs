//! The etcd key layout (SkyDNS `msg.Path` / `msg.Domain`): the components of a key after the
//! prefix are the labels of a name, root side first. `/skydns/local/skydns/east/web` holds the
//! records of `web.east.skydns.local.`.
//!
//! Inside the snapshot builder a name is kept as a *path*: its labels root side first, each with
//! its length octet, without the root terminator. Paths compared component by component put
//! every name right before the names below it, so the records of a name and of everything below
//! it form one contiguous run of a sorted table.
//!
//! Two last components are not labels (docs/skydns-semantics.md, "`.self` and `.wildcards`"):
//! `.self` holds its directory's own record, and keeps its place in the directory's run;
//! `.wildcards` marks its directory and holds no record, and its path puts the component first
//! instead of last, so that every marker sorts outside the names, in a run of its own.

use crate::wire::name::{same_wire, word};
use crate::wire::types::{MAX_LABEL_LEN, MAX_NAME_LEN};
use crate::wire::{LowerName, Name};
use std::cmp::Ordering;

/// Why a key under the prefix does not name a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Two slashes in a row, or a trailing slash.
    #[error("empty path component")]
    EmptyComponent,
    /// A component with a dot can never be reached: `msg.Path` splits names on dots.
    #[error("path component contains a dot")]
    DotInComponent,
    /// A component longer than a DNS label may be.
    #[error("path component longer than 63 bytes")]
    LabelTooLong,
    /// The name would be longer than 255 bytes in wire form.
    #[error("name longer than 255 bytes")]
    NameTooLong,
}

/// The last component of a key holding its directory's own record.
pub(super) const OWN: &[u8] = b".self";

/// The last component of a key marking its directory as answering for what lies below it; the
/// first component of such a key's path.
pub(super) const WILDCARDS: &[u8] = b".wildcards";

/// What a key is, by its last component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// A key of a name: its record answers for the name and the names above it.
    Name,
    /// A `.self` key: its record is its directory's own answer, in place of the records below
    /// the directory.
    Own,
    /// A `.wildcards` key: marks its directory; its value is never a record.
    Wildcards,
}

/// Where a key sits among the records: the path of the name it holds records for, lower-cased,
/// and, when the key had upper-case letters, the path as written. Keys that differ only in case
/// share a path; the written form keeps them apart and orders them as their keys do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPath {
    path: Vec<u8>,
    written: Option<Vec<u8>>,
    kind: KeyKind,
}

impl KeyPath {
    /// The place of `key`; `Ok(None)` when the key is not below `/<prefix>/`.
    pub fn parse(key: &str, prefix: &str) -> Result<Option<KeyPath>, KeyError> {
        let Some(rest) = key
            .strip_prefix('/')
            .and_then(|k| k.strip_prefix(prefix))
            .and_then(|k| k.strip_prefix('/'))
        else {
            return Ok(None);
        };
        let mut written = Vec::with_capacity(rest.len() + 1);
        let mut kind = KeyKind::Name;
        let mut components = rest.split('/').peekable();
        while let Some(component) = components.next() {
            if component.is_empty() {
                return Err(KeyError::EmptyComponent);
            }
            if component.contains('.') {
                kind = match components.peek() {
                    None if component.as_bytes().eq_ignore_ascii_case(OWN) => KeyKind::Own,
                    None if component.as_bytes().eq_ignore_ascii_case(WILDCARDS) => KeyKind::Wildcards,
                    _ => return Err(KeyError::DotInComponent),
                };
            }
            if component.len() > MAX_LABEL_LEN {
                return Err(KeyError::LabelTooLong);
            }
            written.push(component.len() as u8);
            written.extend_from_slice(component.as_bytes());
        }
        if kind == KeyKind::Wildcards {
            written.rotate_right(1 + WILDCARDS.len());
        }
        if written.len() + 1 > MAX_NAME_LEN {
            return Err(KeyError::NameTooLong);
        }
        if !written.iter().any(u8::is_ascii_uppercase) {
            return Ok(Some(KeyPath {
                path: written,
                written: None,
                kind,
            }));
        }
        Ok(Some(KeyPath {
            path: written.to_ascii_lowercase(),
            written: Some(written),
            kind,
        }))
    }

    /// Where the key sorts among the records: the path of the name it holds records for, or,
    /// for a `.self` or `.wildcards` key, that path with the key's last component (first, for
    /// `.wildcards`).
    pub fn path(&self) -> &[u8] {
        &self.path
    }

    /// What the key is.
    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// The path of the name the key holds records for or marks.
    pub fn owner(&self) -> &[u8] {
        owner(&self.path, self.kind)
    }

    /// The path as the key writes it (the same as [`KeyPath::path`] without upper-case letters).
    pub fn written(&self) -> &[u8] {
        self.written.as_deref().unwrap_or(&self.path)
    }

    /// The path, taken.
    pub fn into_path(self) -> Vec<u8> {
        self.path
    }
}

/// The path of the name a key of `kind` at `path` holds records for or marks.
pub fn owner(path: &[u8], kind: KeyKind) -> &[u8] {
    match kind {
        KeyKind::Name => path,
        KeyKind::Own => &path[..path.len().saturating_sub(1 + OWN.len())],
        KeyKind::Wildcards => path.get(1 + WILDCARDS.len()..).unwrap_or_default(),
    }
}

/// The path of the `.self` key of the directory at `path`.
pub fn own_path(path: &[u8]) -> Vec<u8> {
    let mut own = Vec::with_capacity(path.len() + 1 + OWN.len());
    own.extend_from_slice(path);
    own.push(OWN.len() as u8);
    own.extend_from_slice(OWN);
    own
}

/// The path of the `.wildcards` key of the directory at `path`.
pub fn marker_path(path: &[u8]) -> Vec<u8> {
    let mut marker = Vec::with_capacity(path.len() + 1 + WILDCARDS.len());
    marker.push(WILDCARDS.len() as u8);
    marker.extend_from_slice(WILDCARDS);
    marker.extend_from_slice(path);
    marker
}

/// Whether a name's label is a key's last component and no label a name may be asked by.
pub fn is_special(label: &[u8]) -> bool {
    label.eq_ignore_ascii_case(OWN) || label.eq_ignore_ascii_case(WILDCARDS)
}

/// The order of records: component-wise by path (see [`cmp_paths`]), keys that differ only in
/// case by their bytes as written, which is the order of the keys themselves.
pub fn cmp_keys(path: &[u8], written: &[u8], other_path: &[u8], other_written: &[u8]) -> Ordering {
    cmp_paths(path, other_path).then_with(|| written.cmp(other_written))
}

/// The path of the name a key holds records for, lower-cased; `Ok(None)` when the key is not
/// below `/<prefix>/`. The tests' shorthand for [`KeyPath::parse`].
#[cfg(test)]
pub fn parse_key(key: &str, prefix: &str) -> Result<Option<Vec<u8>>, KeyError> {
    KeyPath::parse(key, prefix).map(|k| k.map(KeyPath::into_path))
}

/// The path of a name: its labels in reverse order.
pub fn path_of(name: &Name) -> Vec<u8> {
    let labels = &name.wire()[..name.wire().len().saturating_sub(1)];
    let mut path = vec![0; labels.len()];
    reverse_labels(labels, &mut path);
    path
}

/// The name a path stands for (SkyDNS `msg.Domain`).
pub fn name_of(path: &[u8]) -> Name {
    let mut wire = [0u8; MAX_NAME_LEN];
    wire_of(path, &mut wire).map_or_else(Name::root, |wire| {
        Name::from_wire(wire).unwrap_or_else(|_| Name::root())
    })
}

/// The wire form of the name a path stands for, written into `buf` without allocating; `None`
/// for a path too long to be a name's.
pub fn wire_of<'b>(path: &[u8], buf: &'b mut [u8; MAX_NAME_LEN]) -> Option<&'b [u8]> {
    if path.len() >= MAX_NAME_LEN {
        return None;
    }
    reverse_labels(path, &mut buf[..path.len()]);
    buf[path.len()] = 0;
    Some(&buf[..path.len() + 1])
}

/// Whether `path` is the path of `name` (both lower-cased), comparing label by label in place:
/// the answer path's test of a table entry, where converting either form would cost a copy.
/// A label of up to eight bytes is one comparison of two words shifted to hold it in their top
/// bytes: the path's word ending with the label (or its first eight bytes), and the name's
/// word starting with it, read from the name's buffer, which extends past the name.
/// The caller may already know that the name ends with the path's first `known` bytes (whole
/// components, such as a domain's apex, checked once for every candidate of a lookup): those
/// are not compared again.
#[inline(always)]
pub fn is_path_of(path: &[u8], known: usize, name: &LowerName) -> bool {
    let total = path.len();
    if name.wire().len() != total + 1 {
        return false;
    }
    let buf = name.buffer();
    if total < 8 || total + 8 > buf.len() {
        return is_path_of_slowly(path, name.wire());
    }
    let mut pos = known;
    while pos < total {
        let n = 1 + path[pos] as usize;
        let end = pos + n;
        if end > total {
            return false;
        }
        // The label at `path[pos..end]` sits at `wire[total - end..total - pos]`.
        let at = total - end;
        if n > 8 {
            if !same_wire(&path[pos..end], &buf[at..at + n]) {
                return false;
            }
        } else {
            let shift = 64 - 8 * n as u32;
            let in_path = if end >= 8 {
                word(path, end - 8)
            } else {
                word(path, 0) << (64 - 8 * end as u32)
            };
            if (in_path ^ (word(buf, at) << shift)) >> shift != 0 {
                return false;
            }
        }
        pos = end;
    }
    true
}

/// [`is_path_of`] for names too short or too long for its words.
#[cold]
#[inline(never)]
fn is_path_of_slowly(path: &[u8], wire: &[u8]) -> bool {
    let mut reversed = [0u8; MAX_NAME_LEN];
    reverse_labels(path, &mut reversed[..path.len()]);
    reversed[..path.len()] == wire[..path.len()]
}

/// The name of a path without its `strip` leftmost labels, or the whole name when it has no more
/// than `strip` labels (SkyDNS `targetstrip` on `msg.Domain(key)`).
pub fn stripped_name_of(path: &[u8], strip: usize) -> Name {
    let keep = depth(path).saturating_sub(strip);
    if strip == 0 || keep == 0 {
        return name_of(path);
    }
    let cut = components(path).take(keep).map(|label| 1 + label.len()).sum();
    name_of(&path[..cut])
}

/// Copies the length-prefixed labels of `src` into `dst` (of the same length) in reverse order:
/// a label at offset `pos` lands where as many bytes follow it as precede it in `src`.
fn reverse_labels(src: &[u8], dst: &mut [u8]) {
    let total = src.len().min(dst.len());
    let mut pos = 0;
    while pos < total {
        let end = (pos + 1 + src[pos] as usize).min(total);
        dst[total - end..total - pos].copy_from_slice(&src[pos..end]);
        pos = end;
    }
}

/// The components of a path, root side first.
pub fn components(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let len = *path.get(pos)? as usize;
        let label = path.get(pos + 1..pos + 1 + len)?;
        pos += 1 + len;
        Some(label)
    })
}

/// Number of components of a path.
pub fn depth(path: &[u8]) -> usize {
    components(path).count()
}

/// Component-wise order: a path sorts right before every path it is a prefix of, and the paths
/// below one name are never interleaved with others.
pub fn cmp_paths(a: &[u8], b: &[u8]) -> Ordering {
    // Equal bytes up to the first difference are equal labels; only the label holding the
    // difference needs comparing.
    let Some(diff) = a.iter().zip(b).position(|(x, y)| x != y) else {
        return a.len().cmp(&b.len());
    };
    let mut start = 0;
    loop {
        let next = start + 1 + a[start] as usize;
        if diff < next {
            break;
        }
        start = next;
    }
    label_at(a, start).cmp(label_at(b, start))
}

/// The label of `path` whose length octet is at `start`.
fn label_at(path: &[u8], start: usize) -> &[u8] {
    let len = path.get(start).map_or(0, |&l| l as usize);
    path.get(start + 1..(start + 1 + len).min(path.len()))
        .unwrap_or_default()
}

/// Whether `path` is `ancestor` or lies below it. Length octets make a byte prefix a component
/// prefix.
pub fn is_below(path: &[u8], ancestor: &[u8]) -> bool {
    path.starts_with(ancestor)
}

/// Whether a label is a SkyDNS query wildcard (`msg.PathWithWildcard`).
pub fn is_wildcard(label: &[u8]) -> bool {
    label == b"*" || label == b"any"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::from_dotted(s).unwrap()
    }

    #[test]
    fn a_key_names_its_components_in_reverse() {
        let path = parse_key("/skydns/local/skydns/East/web", "skydns").unwrap().unwrap();
        assert_eq!(name_of(&path), name("web.east.skydns.local."));
        assert_eq!(path, path_of(&name("web.east.skydns.local.")));
        assert_eq!(depth(&path), 4);
    }

    #[test]
    fn a_path_is_matched_against_a_wire_name_label_by_label() {
        let long = "l".repeat(63);
        let names = [
            "a.".to_string(),
            "web.east.skydns.local.".into(),
            "web.east.skydns.locam.".into(),
            "wec.east.skydns.local.".into(),
            "east.web.skydns.local.".into(),
            "h0.svc1.skydns.local.".into(),
            "h0.svc10.skydns.local.".into(),
            "h00.svc1.skydns.local.".into(),
            format!("{long}.x.{long}.skydns.local."),
            format!("{long}.x.{long}.skydns.locam."),
            format!("x.{long}.{long}.skydns.local."),
            "ab.cdefghijk.l.".into(),
            "abcdefghijk.l.".into(),
            "ab.cd.e.".into(),
            "abc.d.e.".into(),
            "ab.cd.f.".into(),
            "abcdefg.x.".into(),
            "abcdefgh.x.".into(),
            "abcdefgh.y.".into(),
            "abcdefghi.x.".into(),
            "abcdefghx.i.".into(),
            "a.b.".into(),
            "ab.c.".into(),
            format!("{long}.{long}.{long}.{}.", "a".repeat(61)),
            format!("{long}.{long}.{long}.{}.", "b".repeat(61)),
        ];
        // One name buffer for every name, as the answer path reuses it: what a longer name
        // left behind must not count.
        let mut lower = LowerName::default();
        for a in &names {
            let path = path_of(&name(a));
            let mut buf = [0; MAX_NAME_LEN];
            assert_eq!(wire_of(&path, &mut buf), Some(name(a).wire()));
            for b in &names {
                crate::wire::name::read_name(name(b).wire(), 0, Some(&mut lower)).unwrap();
                assert_eq!(is_path_of(&path, 0, &lower), a == b, "{a} against {b}");
                // Where `b` is known to end with some of `a`'s top components, the rest decide.
                let mut known = 0;
                for component in components(&path) {
                    known += 1 + component.len();
                    let mut top = [0; MAX_NAME_LEN];
                    if lower.wire().ends_with(wire_of(&path[..known], &mut top).unwrap()) {
                        assert_eq!(is_path_of(&path, known, &lower), a == b, "{a} against {b} past {known}");
                    }
                }
            }
        }
    }

    #[test]
    fn keys_outside_the_prefix_are_not_records() {
        assert_eq!(parse_key("/other/local/skydns/web", "skydns"), Ok(None));
        assert_eq!(parse_key("/skydnsx/local", "skydns"), Ok(None));
        assert_eq!(parse_key("/skydns", "skydns"), Ok(None));
    }

    #[test]
    fn malformed_keys_are_errors() {
        assert_eq!(parse_key("/skydns/local//web", "skydns"), Err(KeyError::EmptyComponent));
        assert_eq!(parse_key("/skydns/local/web/", "skydns"), Err(KeyError::EmptyComponent));
        assert_eq!(parse_key("/skydns/local/a.b", "skydns"), Err(KeyError::DotInComponent));
        let long = format!("/skydns/{}", "a".repeat(64));
        assert_eq!(parse_key(&long, "skydns"), Err(KeyError::LabelTooLong));
        let deep = format!("/skydns{}", "/abcdefgh".repeat(30));
        assert_eq!(parse_key(&deep, "skydns"), Err(KeyError::NameTooLong));
    }

    #[test]
    fn self_and_wildcards_keys_are_their_directorys_and_only_last() {
        let web = path_of(&name("web.local."));
        let own = KeyPath::parse("/skydns/local/Web/.Self", "skydns").unwrap().unwrap();
        assert_eq!((own.kind(), own.owner()), (KeyKind::Own, &web[..]));
        assert_eq!(own.path(), own_path(&web));
        let marker = KeyPath::parse("/skydns/local/web/.WILDCARDS", "skydns")
            .unwrap()
            .unwrap();
        assert_eq!((marker.kind(), marker.owner()), (KeyKind::Wildcards, &web[..]));
        assert_eq!(marker.path(), marker_path(&web));
        assert_eq!(marker.written(), b"\x0a.WILDCARDS\x05local\x03web");
        assert_eq!(
            KeyPath::parse("/skydns/local/web", "skydns").unwrap().unwrap().kind(),
            KeyKind::Name
        );
        for key in ["/skydns/a/.self/b", "/skydns/a/.other", "/skydns/.wildcards/a"] {
            assert_eq!(parse_key(key, "skydns"), Err(KeyError::DotInComponent), "{key}");
        }
        assert!(is_special(b".SELF") && is_special(b".wildcards") && !is_special(b"self"));
    }

    #[test]
    fn the_reverse_tree_maps_to_arpa_names() {
        let path = parse_key("/skydns/arpa/in-addr/10/0/0/1", "skydns").unwrap().unwrap();
        assert_eq!(name_of(&path), name("1.0.0.10.in-addr.arpa."));
    }

    #[test]
    fn paths_sort_component_wise_with_subtrees_contiguous() {
        let mut paths: Vec<Vec<u8>> = ["b.x.", "x.", "ab.x.", "c.b.x.", "a.c.x."]
            .iter()
            .map(|s| path_of(&name(s)))
            .collect();
        paths.sort_by(|a, b| cmp_paths(a, b));
        let sorted: Vec<String> = paths.iter().map(|p| name_of(p).to_string()).collect();
        assert_eq!(sorted, ["x.", "ab.x.", "b.x.", "c.b.x.", "a.c.x."]);
        assert!(is_below(&path_of(&name("c.b.x.")), &path_of(&name("b.x."))));
        assert!(!is_below(&path_of(&name("ab.x.")), &path_of(&name("b.x."))));
    }

    #[test]
    fn a_stripped_key_name_loses_its_leftmost_labels_unless_it_has_too_few() {
        let path = path_of(&name("a.web.x.skydns.test."));
        assert_eq!(stripped_name_of(&path, 1), name("web.x.skydns.test."));
        assert_eq!(stripped_name_of(&path, 4), name("test."));
        assert_eq!(stripped_name_of(&path, 5), name("a.web.x.skydns.test."));
    }
}
