//! Domain names: reading them from messages (with bounded compression), and the owned,
//! lower-cased wire form used as lookup keys.

use super::bytes::copy_short;
use super::error::WireError;
use super::types::{MAX_LABEL_LEN, MAX_NAME_LEN, MAX_POINTER_HOPS};
use crate::sys::lower16;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// A name read from a message, lower-cased into a fixed stack buffer so that lookups hash it
/// without allocating. Also records where each label starts, for suffix (zone) matching.
#[derive(Clone)]
pub struct LowerName {
    bytes: [u8; MAX_NAME_LEN],
    len: u8,
    label_starts: [u8; 128],
    labels: u8,
    /// [`name_hash`] of the name, computed from the words lower-cased as it is read.
    hash: u64,
}

impl Default for LowerName {
    fn default() -> Self {
        LowerName {
            bytes: [0; MAX_NAME_LEN],
            len: 1,
            label_starts: [0; 128],
            labels: 0,
            hash: name_hash(&[0]),
        }
    }
}

impl LowerName {
    /// The lower-cased name in uncompressed wire form, root label included.
    pub fn wire(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The whole buffer the name is read into: the name, then what earlier names left. For
    /// comparisons eight bytes a step that may read past the name's end.
    #[inline(always)]
    pub fn buffer(&self) -> &[u8; MAX_NAME_LEN] {
        &self.bytes
    }

    /// Number of labels, not counting the root.
    pub fn label_count(&self) -> usize {
        self.labels as usize
    }

    /// [`name_hash`] of the name, already computed: a lookup by this name hashes nothing.
    #[inline]
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Offset in `wire()` where label `i` (0 = leftmost) starts.
    pub fn label_start(&self, i: usize) -> usize {
        self.label_starts[i] as usize
    }

    /// The name with its `skip` leftmost labels removed.
    pub fn suffix(&self, skip: usize) -> &[u8] {
        if skip >= self.labels as usize {
            return &[0];
        }
        &self.wire()[self.label_start(skip)..]
    }

    /// The bytes of label `i` without its length octet.
    pub fn label(&self, i: usize) -> &[u8] {
        let start = self.label_start(i);
        let len = self.bytes[start] as usize;
        &self.bytes[start + 1..start + 1 + len]
    }

    /// Whether label `i` is `*` or `any`, SkyDNS's query wildcards: its length octet and three
    /// bytes read as one word, so that the question every answer from a name's node asks of
    /// each of its labels is one load and two comparisons.
    #[inline(always)]
    pub fn is_wildcard_label(&self, i: usize) -> bool {
        const STAR: u32 = u32::from_le_bytes([1, b'*', 0, 0]);
        const ANY: u32 = u32::from_le_bytes([3, b'a', b'n', b'y']);
        let start = self.label_start(i);
        match self.bytes.get(start..start + 4) {
            Some(&[len, a, b, c]) => {
                let word = u32::from_le_bytes([len, a, b, c]);
                word & 0xFFFF == STAR || word == ANY
            }
            _ => matches!(self.label(i), b"*" | b"any"),
        }
    }

    /// Whether the name equals the lower-case wire name `zone` or lies below it. Every query
    /// asks this of each zone: the labels' offsets are at hand, so it is one comparison of the
    /// tail and a look at where the tail starts.
    #[inline(always)]
    pub fn is_within(&self, zone: &[u8]) -> bool {
        let name = self.wire();
        let Some(at) = name.len().checked_sub(zone.len()) else {
            return false;
        };
        if !same_wire(&name[at..], zone) {
            return false;
        }
        zone.len() == 1
            || self.label_starts[..self.labels as usize]
                .iter()
                .rev()
                .take_while(|&&start| usize::from(start) >= at)
                .any(|&start| usize::from(start) == at)
    }

    /// Builds from an already valid lower-case wire name.
    pub fn from_wire(wire: &[u8]) -> Result<LowerName, WireError> {
        let mut out = LowerName::default();
        read_name(wire, 0, Some(&mut out))?;
        Ok(out)
    }
}

/// Reads the (possibly compressed) name at `pos`, returning the offset just past where it
/// appears at `pos`. When `out` is given the name is stored there lower-cased.
///
/// Every query pays for this. A question name has no compression pointer, so that case takes
/// [`read_plain`]; the general walk follows pointers. Both walk only the length octets and then
/// copy each run of labels between pointers at once, lower-cased eight bytes at a time. Length
/// octets (at most 63) are never letters, so lower-casing them is harmless.
#[inline]
pub fn read_name(msg: &[u8], pos: usize, out: Option<&mut LowerName>) -> Result<usize, WireError> {
    match out {
        Some(out) => match read_plain(msg, pos, out) {
            Some(result) => result,
            None => read_compressed(msg, pos, Some(out)),
        },
        None => read_compressed(msg, pos, None),
    }
}

/// Reads a name that has no compression pointer into `out`; `None` when it meets a pointer, a
/// bad label type, the end of the message or more bytes than a name may have, which the general
/// walk then reads (and reports) alone. Every length octet is read from a window of at most
/// [`MAX_NAME_LEN`] bytes, so the name's length needs no check of its own: a root label found in
/// the window ends a name short enough. Each label takes two bytes or more, so at most 127 fit,
/// and the label index never leaves `label_starts`.
#[inline(always)]
fn read_plain(msg: &[u8], start: usize, out: &mut LowerName) -> Option<Result<usize, WireError>> {
    let rest = msg.get(start..)?;
    let window = &rest[..rest.len().min(MAX_NAME_LEN)];
    let mut pos = 0;
    let mut labels = 0usize;
    loop {
        let &b = window.get(pos)?;
        if b == 0 {
            out.hash = copy_lower(&mut out.bytes, &window[..pos]);
            out.bytes[pos] = 0;
            out.len = (pos + 1) as u8;
            out.labels = labels as u8;
            return Some(Ok(start + pos + 1));
        }
        if b > MAX_LABEL_LEN as u8 {
            return None;
        }
        out.label_starts[labels & 0x7F] = pos as u8;
        labels += 1;
        pos += 1 + usize::from(b);
    }
}

fn read_compressed(msg: &[u8], mut pos: usize, mut out: Option<&mut LowerName>) -> Result<usize, WireError> {
    let mut end = None;
    let mut hops = 0;
    let mut len = 0usize;
    let mut labels = 0usize;
    let mut run = pos;
    let mut run_at = 0usize;
    loop {
        let &b = msg.get(pos).ok_or(WireError::Truncated)?;
        match b & 0xC0 {
            0x00 => {
                let l = b as usize;
                if l == 0 {
                    len += 1;
                    if len > MAX_NAME_LEN {
                        return Err(WireError::NameTooLong);
                    }
                    if let Some(o) = out.as_deref_mut() {
                        o.bytes[run_at..len - 1].copy_from_slice(&msg[run..pos]);
                        let raw = o.bytes;
                        o.hash = copy_lower(&mut o.bytes, &raw[..len - 1]);
                        o.bytes[len - 1] = 0;
                        o.len = len as u8;
                        o.labels = labels as u8;
                    }
                    return Ok(end.unwrap_or(pos + 1));
                }
                if pos + 1 + l > msg.len() {
                    return Err(WireError::Truncated);
                }
                if len + 1 + l + 1 > MAX_NAME_LEN {
                    return Err(WireError::NameTooLong);
                }
                if let Some(o) = out.as_deref_mut() {
                    o.label_starts[labels] = len as u8;
                }
                labels += 1;
                len += 1 + l;
                pos += 1 + l;
            }
            0xC0 => {
                let &lo = msg.get(pos + 1).ok_or(WireError::Truncated)?;
                let target = (((b & 0x3F) as usize) << 8) | lo as usize;
                hops += 1;
                if hops > MAX_POINTER_HOPS || target >= pos {
                    return Err(WireError::PointerLoop);
                }
                if let Some(o) = out.as_deref_mut() {
                    o.bytes[run_at..len].copy_from_slice(&msg[run..pos]);
                }
                end.get_or_insert(pos + 2);
                pos = target;
                run = pos;
                run_at = len;
            }
            _ => return Err(WireError::BadLabel),
        }
    }
}

/// Copies `src`, a name without its root label, to the start of `dst` lower-casing ASCII
/// letters, sixteen bytes a step, and returns the [`name_hash`] of the lower-cased name, folded
/// from the very bytes written. A name shorter than sixteen bytes is written as one step, with
/// zeros after it up to the sixteenth byte.
#[inline(always)]
fn copy_lower(dst: &mut [u8; MAX_NAME_LEN], src: &[u8]) -> u64 {
    lower_chunks(src, |at, [lo, hi]| {
        dst[at..at + 8].copy_from_slice(&lo.to_le_bytes());
        dst[at + 8..at + CHUNK].copy_from_slice(&hi.to_le_bytes());
    })
}

/// The keys every name hash is seeded with, drawn once per process from the randomness std
/// draws for its own hash maps: the hashes agree in every snapshot and every worker, and no
/// client can foresee them. Clients' names key the response cache, and with a known seed names
/// whose hashes collide are a short computation away.
fn keys() -> [u64; 2] {
    static KEYS: OnceLock<[u64; 2]> = OnceLock::new();
    *KEYS.get_or_init(|| {
        let random = RandomState::new();
        [random.hash_one(0u64), random.hash_one(1u64)]
    })
}

/// Odd multiplier of the final fold (digits of pi): any bit of the state reaches every bit of
/// the product's two halves.
const FINISH: u64 = 0x1319_8a2e_0370_7344 | 1;

/// Bytes lower-cased and hashed per step.
const CHUNK: usize = 16;

/// The 128-bit product's halves folded together.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// Walks a name without its root label (`body`) sixteen lower-cased bytes a step, the last step
/// overlapping the one before (a name under sixteen bytes is one step, padded with zeros),
/// handing each step's bytes and offset to `put`, and returns the hash folded from them, one
/// multiplication a step: reading a query name and hashing it are one pass.
#[inline(always)]
fn lower_chunks(body: &[u8], mut put: impl FnMut(usize, [u64; 2])) -> u64 {
    let [seed, key] = keys();
    let n = body.len();
    let mut h = seed ^ (n as u64 + 1);
    if n < CHUNK {
        let mut padded = [0u8; CHUNK];
        copy_short(&mut padded, body);
        return fold(step(h, key, 0, &padded, &mut put), FINISH);
    }
    let mut at = 0;
    while at + CHUNK < n {
        h = step(h, key, at, chunk_at(body, at), &mut put);
        at += CHUNK;
    }
    fold(step(h, key, n - CHUNK, chunk_at(body, n - CHUNK), &mut put), FINISH)
}

/// One step of [`lower_chunks`]: the chunk at `at` lower-cased, handed to `put`, and folded
/// into the state `h`, its first half against its second half and the key.
#[inline(always)]
fn step(h: u64, key: u64, at: usize, chunk: &[u8; CHUNK], put: &mut impl FnMut(usize, [u64; 2])) -> u64 {
    let [lo, hi] = lower16(chunk);
    put(at, [lo, hi]);
    fold(h ^ lo, hi ^ key)
}

/// The sixteen bytes of `bytes` from `at`.
#[inline(always)]
fn chunk_at(bytes: &[u8], at: usize) -> &[u8; CHUNK] {
    bytes[at..at + CHUNK].try_into().expect("sixteen bytes")
}

/// The hash of a lower-cased wire name (root label included) that tables of names are keyed
/// by. Every query's name gets it while it is read ([`LowerName::hash`]); this is the same
/// function for names from elsewhere.
#[inline]
pub fn name_hash(wire: &[u8]) -> u64 {
    let body = wire.split_last().map_or(wire, |(_, body)| body);
    lower_chunks(body, |_, _| {})
}

/// Eight bytes of `wire` from `at`, little-endian: the step of the word-at-a-time comparisons
/// of names.
#[inline(always)]
pub fn word(wire: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(wire[at..at + 8].try_into().expect("eight bytes"))
}

/// Byte equality of two wire names, sixteen bytes a step (the last step overlapping the one
/// before): names are short, and a call to `memcmp` costs more than comparing them inline.
/// The last bytes go first: they hold the top-level labels, where a name outside a zone
/// differs from the zone's apex, so most mismatches cost one step.
#[inline(always)]
pub fn same_wire(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a == b;
    }
    if n <= CHUNK {
        return word(a, n - 8) == word(b, n - 8) && word(a, 0) == word(b, 0);
    }
    if wide(a, n - CHUNK) != wide(b, n - CHUNK) {
        return false;
    }
    let mut at = 0;
    while at + CHUNK < n {
        if wide(a, at) != wide(b, at) {
            return false;
        }
        at += CHUNK;
    }
    true
}

/// Sixteen bytes of `wire` from `at`, as one number to compare.
#[inline(always)]
fn wide(wire: &[u8], at: usize) -> u128 {
    u128::from_le_bytes(*chunk_at(wire, at))
}

/// Skips the name at `pos` without decoding it, returning the offset just past it.
pub fn skip_name(msg: &[u8], mut pos: usize) -> Result<usize, WireError> {
    loop {
        let &b = msg.get(pos).ok_or(WireError::Truncated)?;
        match b & 0xC0 {
            0x00 if b == 0 => return Ok(pos + 1),
            0x00 => pos += 1 + b as usize,
            0xC0 => {
                if pos + 2 > msg.len() {
                    return Err(WireError::Truncated);
                }
                return Ok(pos + 2);
            }
            _ => return Err(WireError::BadLabel),
        }
    }
}

/// Whether the names at `a` and `b` of `msg`, each possibly compressed, are the same name
/// (letters compared without regard to case), without copying either: the records of one
/// reply are grouped into RRsets by owner, and most owners are pointers to the same place.
/// Anything malformed compares unequal; the walk ends within a bounded number of steps.
pub fn same_name_at(msg: &[u8], mut a: usize, mut b: usize) -> bool {
    // A name has at most 127 labels; with a pointer before each, 256 steps read any two.
    for _ in 0..256 {
        let (Some(&la), Some(&lb)) = (msg.get(a), msg.get(b)) else {
            return false;
        };
        if la & 0xC0 == 0xC0 || lb & 0xC0 == 0xC0 {
            if la & 0xC0 == 0xC0 {
                let Some(&low) = msg.get(a + 1) else { return false };
                a = usize::from(la & 0x3F) << 8 | usize::from(low);
            }
            if lb & 0xC0 == 0xC0 {
                let Some(&low) = msg.get(b + 1) else { return false };
                b = usize::from(lb & 0x3F) << 8 | usize::from(low);
            }
            continue;
        }
        if a == b {
            return true;
        }
        if la != lb || la & 0xC0 != 0 {
            return false;
        }
        if la == 0 {
            return true;
        }
        let len = 1 + usize::from(la);
        match (msg.get(a + 1..a + len), msg.get(b + 1..b + len)) {
            (Some(x), Some(y)) if x.eq_ignore_ascii_case(y) => {}
            _ => return false,
        }
        a += len;
        b += len;
    }
    false
}

/// An owned domain name: lower-cased, uncompressed wire form. The key type of every lookup table,
/// so that a query name read into a [`LowerName`] finds it by plain byte comparison.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Box<[u8]>);

impl Name {
    /// The root name `.`.
    pub fn root() -> Name {
        Name(Box::new([0]))
    }

    /// Parses presentation form (`web.skydns.local.` or without the final dot), lower-casing it.
    /// Escapes are not supported: service-discovery names are plain hostnames.
    pub fn from_dotted(text: &str) -> Result<Name, WireError> {
        let text = text.strip_suffix('.').unwrap_or(text);
        let mut wire = Vec::with_capacity(text.len() + 2);
        if !text.is_empty() {
            for label in text.split('.') {
                if label.is_empty() || label.len() > MAX_LABEL_LEN {
                    return Err(WireError::BadText);
                }
                wire.push(label.len() as u8);
                wire.extend(label.bytes().map(|b| b.to_ascii_lowercase()));
            }
        }
        wire.push(0);
        if wire.len() > MAX_NAME_LEN {
            return Err(WireError::NameTooLong);
        }
        Ok(Name(wire.into_boxed_slice()))
    }

    /// Builds a name from labels given leftmost first.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = &'a str>) -> Result<Name, WireError> {
        let mut text = String::new();
        for l in labels {
            if l.is_empty() {
                return Err(WireError::BadText);
            }
            text.push_str(l);
            text.push('.');
        }
        Name::from_dotted(&text)
    }

    /// Wraps a lower-case, uncompressed wire name, checking it.
    pub fn from_wire(wire: &[u8]) -> Result<Name, WireError> {
        let parsed = LowerName::from_wire(wire)?;
        Ok(Name(parsed.wire().into()))
    }

    /// The wire form.
    pub fn wire(&self) -> &[u8] {
        &self.0
    }

    /// The labels, leftmost first, without length octets.
    pub fn labels(&self) -> Labels<'_> {
        Labels { wire: &self.0, pos: 0 }
    }

    /// Number of labels, not counting the root.
    pub fn label_count(&self) -> usize {
        self.labels().count()
    }

    /// The name without its leftmost label; the root stays the root.
    pub fn parent(&self) -> Name {
        if self.0.len() <= 1 {
            return Name::root();
        }
        Name(self.0[1 + self.0[0] as usize..].into())
    }

    /// The name with its `n` leftmost labels removed, or itself when it has no more than `n`
    /// labels (SkyDNS `targetstrip` semantics).
    pub fn strip_labels(&self, n: usize) -> Name {
        if n == 0 || n >= self.label_count() {
            return self.clone();
        }
        let mut pos = 0;
        for _ in 0..n {
            pos += 1 + self.0[pos] as usize;
        }
        Name(self.0[pos..].into())
    }

    /// Whether `self` equals `zone` or lies below it.
    pub fn is_within(&self, zone: &Name) -> bool {
        is_within(&self.0, &zone.0)
    }

    /// Prepends one label.
    pub fn prepend(&self, label: &str) -> Result<Name, WireError> {
        if label.is_empty() || label.len() > MAX_LABEL_LEN || self.0.len() + 1 + label.len() > MAX_NAME_LEN {
            return Err(WireError::BadText);
        }
        let mut wire = Vec::with_capacity(self.0.len() + 1 + label.len());
        wire.push(label.len() as u8);
        wire.extend(label.bytes().map(|b| b.to_ascii_lowercase()));
        wire.extend_from_slice(&self.0);
        Ok(Name(wire.into_boxed_slice()))
    }
}

/// Whether the wire name `name` equals `zone` or lies below it, on label boundaries.
pub fn is_within(name: &[u8], zone: &[u8]) -> bool {
    if zone.len() > name.len() {
        return false;
    }
    let mut pos = 0;
    loop {
        if name.len() - pos == zone.len() {
            return &name[pos..] == zone;
        }
        if name.len() - pos < zone.len() || name[pos] == 0 {
            return false;
        }
        pos += 1 + name[pos] as usize;
    }
}

impl std::borrow::Borrow<[u8]> for Name {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

/// Iterator over the labels of a [`Name`].
pub struct Labels<'a> {
    wire: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Labels<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let l = *self.wire.get(self.pos)? as usize;
        if l == 0 {
            return None;
        }
        let label = &self.wire[self.pos + 1..self.pos + 1 + l];
        self.pos += 1 + l;
        Some(label)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() == 1 {
            return f.write_str(".");
        }
        for label in self.labels() {
            for &b in label {
                if b.is_ascii_graphic() && b != b'.' && b != b'\\' {
                    write!(f, "{}", b as char)?;
                } else {
                    write!(f, "\\{:03}", b)?;
                }
            }
            f.write_str(".")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_through_pointers_and_case() {
        // 0: www.Example.org.  17: pointer to 0  19: WWW + pointer to 4  25: ftp + pointer to 4
        // 31: www.example.net.  48: a pointer to itself  50: a pointer past the end
        let mut msg = b"\x03www\x07Example\x03org\x00".to_vec();
        msg.extend_from_slice(&[0xC0, 0]);
        msg.extend_from_slice(b"\x03WWW\xC0\x04");
        msg.extend_from_slice(b"\x03ftp\xC0\x04");
        msg.extend_from_slice(b"\x03www\x07example\x03net\x00");
        msg.extend_from_slice(&[0xC0, 48, 0xC0, 0xFF]);
        for (a, b) in [(0, 0), (0, 17), (17, 19), (19, 0)] {
            assert!(same_name_at(&msg, a, b), "{a} and {b}");
        }
        for (a, b) in [(0, 25), (19, 25), (0, 31), (0, 48), (48, 48), (0, 50), (0, 60)] {
            assert!(!same_name_at(&msg, a, b), "{a} and {b}");
        }
    }

    #[test]
    fn copies_of_every_length_lower_case_as_one_at_a_time() {
        let src: Vec<u8> = (0..=254u8)
            .map(|i| if i % 3 == 0 { b'A' + i % 26 } else { b'a' + i % 26 })
            .collect();
        for n in 0..src.len() {
            let mut dst = [0xFFu8; MAX_NAME_LEN];
            let hash = copy_lower(&mut dst, &src[..n]);
            assert_eq!(dst[..n], src[..n].to_ascii_lowercase(), "length {n}");
            let mut wire = dst[..n].to_vec();
            wire.push(0);
            assert_eq!(hash, name_hash(&wire), "length {n}");
        }
    }

    #[test]
    fn names_that_differ_in_one_byte_or_in_length_hash_apart() {
        let base = b"\x05abcde\x0bsvc-a-b-c-d\x07default\x03svc\x07cluster\x05local".to_vec();
        let mut seen = std::collections::HashSet::new();
        for n in 0..=base.len() {
            let mut wire = base[..n].to_vec();
            wire.push(0);
            assert!(seen.insert(name_hash(&wire)), "length {n}");
            for at in 0..n {
                let mut changed = wire.clone();
                changed[at] ^= 0x01;
                assert_ne!(name_hash(&changed), name_hash(&wire), "length {n}, byte {at}");
            }
        }
    }

    #[test]
    fn a_read_name_carries_the_hash_of_its_lower_cased_wire_form() {
        let mut seen = std::collections::HashSet::new();
        for text in [
            ".",
            "a.",
            "Ab.",
            "sevenxy.",
            "eightxyz.",
            "Web.SkyDNS.local.",
            "h0.svc1853.skydns.local.",
        ] {
            let name = Name::from_dotted(text).unwrap();
            let lower = LowerName::from_wire(name.wire()).unwrap();
            assert_eq!(lower.hash(), name_hash(lower.wire()), "{text}");
            assert!(seen.insert(lower.hash()), "{text}");
        }
        let upper = LowerName::from_wire(Name::from_dotted("WEB.SKYDNS.LOCAL.").unwrap().wire()).unwrap();
        let lower = LowerName::from_wire(Name::from_dotted("web.skydns.local.").unwrap().wire()).unwrap();
        assert_eq!(upper.hash(), lower.hash());
        // Read through a pointer, the name is hashed after it is assembled: the same hash.
        let mut msg = b"\x03WEB\x06skydns\x00".to_vec();
        msg.extend_from_slice(b"\x01x\xC0\x00");
        let mut out = LowerName::default();
        read_name(&msg, 12, Some(&mut out)).unwrap();
        let plain = LowerName::from_wire(Name::from_dotted("x.web.skydns.").unwrap().wire()).unwrap();
        assert_eq!(out.wire(), plain.wire());
        assert_eq!(out.hash(), plain.hash());
        assert_eq!(LowerName::default().hash(), name_hash(&[0]));
    }

    #[test]
    fn plain_and_compressed_spellings_read_alike() {
        for text in [
            "a.",
            "Web.SkyDNS.local.",
            "h0.svc1853.skydns.local.",
            "x.y.z.w.v.u.t.s.r.q.p.o.n.m.",
        ] {
            let wire = Name::from_dotted(text).unwrap().wire().to_vec();
            let mut plain = LowerName::default();
            let mut message = vec![0u8; 12];
            message.extend_from_slice(&text.split('.').fold(Vec::new(), |mut w, l| {
                w.push(l.len() as u8);
                w.extend_from_slice(l.as_bytes());
                w
            }));
            assert_eq!(read_name(&message, 12, Some(&mut plain)), Ok(message.len()));
            assert_eq!(plain.wire(), wire);
            let behind_pointer = [message.clone(), vec![0xC0, 12]].concat();
            let mut followed = LowerName::default();
            assert_eq!(
                read_name(&behind_pointer, message.len(), Some(&mut followed)),
                Ok(message.len() + 2)
            );
            assert_eq!(followed.wire(), wire);
            assert_eq!(followed.label_count(), plain.label_count());
            for i in 0..plain.label_count() {
                assert_eq!(followed.label(i), plain.label(i));
            }
        }
    }

    #[test]
    fn a_bad_length_octet_anywhere_in_a_name_is_refused_however_the_walk_lands() {
        // A label type 0x40 or 0x80, or a length over 63, ahead of bytes that would read as a
        // name ending in a root label once the walk jumps over them.
        for bad in [0x40u8, 0x41, 0x7F, 0x80, 0xBF] {
            for lead in [&b""[..], b"\x03www", b"\x01a\x02bc"] {
                let mut msg = lead.to_vec();
                msg.push(bad);
                msg.extend(std::iter::repeat_n(b'x', usize::from(bad)));
                msg.extend_from_slice(b"\x03org\x00");
                let mut out = LowerName::default();
                assert_eq!(
                    read_name(&msg, 0, Some(&mut out)),
                    Err(WireError::BadLabel),
                    "{bad:#x} after {lead:?}"
                );
                assert_eq!(
                    read_name(&msg, 0, None),
                    Err(WireError::BadLabel),
                    "{bad:#x} after {lead:?}"
                );
            }
        }
    }

    #[test]
    fn only_star_and_any_labels_are_wildcard_labels_wherever_they_start() {
        let labels: [&[u8]; 9] = [b"*", b"any", b"an", b"anyx", b"a", b"**", b"*a", b"xany", b"any-"];
        for label in labels {
            let expected = matches!(label, b"*" | b"any");
            // One- and two-byte labels ahead of it move the label to every offset a name allows,
            // up to the last bytes of the buffer, where its word cannot be read whole.
            for lead in [&b""[..], b"\x02xx"] {
                for filler in 0.. {
                    let mut wire = lead.to_vec();
                    wire.extend(std::iter::repeat_n(*b"\x01x", filler).flatten());
                    wire.push(label.len() as u8);
                    wire.extend_from_slice(label);
                    wire.push(0);
                    if wire.len() > MAX_NAME_LEN {
                        break;
                    }
                    let name = LowerName::from_wire(&wire).unwrap();
                    let i = name.label_count() - 1;
                    assert_eq!(
                        name.is_wildcard_label(i),
                        expected,
                        "{label:?} at {}",
                        name.label_start(i)
                    );
                }
            }
        }
    }

    #[test]
    fn a_query_name_is_within_zones_on_label_boundaries_only() {
        let name = |wire: &[u8]| LowerName::from_wire(wire).unwrap();
        let zone = b"\x05local\x00";
        assert!(name(b"\x03web\x05local\x00").is_within(zone));
        assert!(name(zone).is_within(zone));
        assert!(name(b"\x03web\x05local\x00").is_within(b"\x00"));
        assert!(name(b"\x00").is_within(b"\x00"));
        assert!(!name(b"\x00").is_within(zone));
        assert!(!name(b"\x06xlocal\x00").is_within(zone));
        // The zone's bytes inside one label: `x\x05local` is a single label of seven bytes.
        assert!(!name(b"\x07x\x05local\x00").is_within(b"\x05local\x00"));
        assert!(!name(b"\x06x\x04loca\x00").is_within(b"\x04loca\x00"));
    }

    #[test]
    fn names_compare_equal_only_byte_for_byte() {
        let long = b"\x0bsvc-a-b-c-d\x07default\x03svc\x07cluster\x05local\x00";
        for n in 0..long.len() {
            assert!(same_wire(&long[..n], &long[..n]));
            for at in 0..n {
                let mut other = long[..n].to_vec();
                other[at] ^= 1;
                assert!(!same_wire(&long[..n], &other), "length {n}, byte {at}");
            }
        }
        assert!(!same_wire(&long[..9], &long[..10]));
    }

    #[test]
    fn a_name_split_by_pointers_is_read_whole_and_lower_cased() {
        // "ExAmple.COM." at 2, then "WwW-Longer-Label" + pointer to it at 15.
        let mut msg = vec![0u8, 0];
        msg.extend_from_slice(b"\x07ExAmple\x03COM\x00");
        let at = msg.len();
        msg.extend_from_slice(b"\x10WwW-Longer-Label\xC0\x02");
        let mut name = LowerName::default();
        assert_eq!(read_name(&msg, at, Some(&mut name)), Ok(msg.len()));
        assert_eq!(name.wire(), b"\x10www-longer-label\x07example\x03com\x00");
        assert_eq!(name.label_count(), 3);
        assert_eq!(name.label(1), b"example");
        assert_eq!(read_name(&msg, 2, Some(&mut name)), Ok(at));
        assert_eq!(name.wire(), b"\x07example\x03com\x00");
        assert_eq!(read_name(&msg[..at - 2], 2, None), Err(WireError::Truncated));
    }

    #[test]
    fn dotted_round_trip_lower_cases() {
        let n = Name::from_dotted("Web.SkyDNS.local.").unwrap();
        assert_eq!(n.to_string(), "web.skydns.local.");
        assert_eq!(n.label_count(), 3);
        assert_eq!(n.parent().to_string(), "skydns.local.");
        assert_eq!(n.strip_labels(1).to_string(), "skydns.local.");
        assert_eq!(n.strip_labels(3).to_string(), "web.skydns.local.");
    }

    #[test]
    fn within_is_on_label_boundaries() {
        let zone = Name::from_dotted("skydns.local").unwrap();
        assert!(Name::from_dotted("a.skydns.local").unwrap().is_within(&zone));
        assert!(zone.is_within(&zone));
        assert!(!Name::from_dotted("askydns.local").unwrap().is_within(&zone));
        assert!(Name::from_dotted("x").unwrap().is_within(&Name::root()));
    }

    #[test]
    fn pointer_loops_are_rejected() {
        let msg = [0xC0, 0x00];
        assert_eq!(read_name(&msg, 0, None), Err(WireError::PointerLoop));
        let msg = [1, b'a', 0xC0, 0x00];
        assert_eq!(read_name(&msg, 0, None), Err(WireError::PointerLoop));
    }

    #[test]
    fn compressed_names_are_read_lower_cased() {
        let msg = [3, b'C', b'o', b'M', 0, 1, b'X', 0xC0, 0x00];
        let mut out = LowerName::default();
        let end = read_name(&msg, 5, Some(&mut out)).unwrap();
        assert_eq!(end, 9);
        assert_eq!(out.wire(), &[1, b'x', 3, b'c', b'o', b'm', 0]);
        assert_eq!(out.label_count(), 2);
        assert_eq!(out.suffix(1), &[3, b'c', b'o', b'm', 0]);
    }

    #[test]
    fn overlong_labels_and_names_fail() {
        let mut msg = vec![64];
        msg.extend([b'a'; 64]);
        msg.push(0);
        assert_eq!(read_name(&msg, 0, None), Err(WireError::BadLabel));
        let mut msg = Vec::new();
        for _ in 0..5 {
            msg.push(63);
            msg.extend([b'a'; 63]);
        }
        msg.push(0);
        assert_eq!(read_name(&msg, 0, None), Err(WireError::NameTooLong));
    }
}
