//! Names as the rules read and write them: lower-cased dotted text ending in a dot, the form
//! CoreDNS's rules match (`state.Name()`), kept on the stack so that matching a name allocates
//! nothing. Also the mnemonics of types, classes and response codes a rule may name.

use crate::wire::types::{class, rcode, rtype, MAX_LABEL_LEN, MAX_NAME_LEN};

/// Room for a name's text and what a rule makes of it; a result past it is no name.
const TEXT_ROOM: usize = 512;

/// A name as dotted text (`www.example.org.`), or a rule's output on its way to becoming one.
#[derive(Clone)]
pub(crate) struct Text {
    bytes: [u8; TEXT_ROOM],
    len: usize,
}

impl Text {
    /// Empty text.
    pub(crate) fn new() -> Text {
        Text {
            bytes: [0; TEXT_ROOM],
            len: 0,
        }
    }

    /// `text`, if it fits.
    pub(crate) fn of(text: &str) -> Option<Text> {
        let mut out = Text::new();
        out.push(text).then_some(out)
    }

    /// The dotted text of an uncompressed wire name, lower-cased; `None` when a label holds a
    /// byte dotted text cannot spell unambiguously (a dot, a backslash, a space, a control or
    /// non-ASCII byte): such a name matches no rule.
    pub(crate) fn of_wire(wire: &[u8]) -> Option<Text> {
        let mut out = Text::new();
        let mut pos = 0;
        loop {
            let len = usize::from(*wire.get(pos)?);
            if len == 0 {
                break;
            }
            let label = wire.get(pos + 1..pos + 1 + len)?;
            if label.iter().any(|&b| !b.is_ascii_graphic() || b == b'.' || b == b'\\') {
                return None;
            }
            for &b in label {
                out.push_byte(b.to_ascii_lowercase())?;
            }
            out.push_byte(b'.')?;
            pos += 1 + len;
        }
        if out.len == 0 {
            out.push_byte(b'.')?;
        }
        Some(out)
    }

    fn push_byte(&mut self, b: u8) -> Option<()> {
        *self.bytes.get_mut(self.len)? = b;
        self.len += 1;
        Some(())
    }

    /// Appends `text`; `false` (and the text cut short) when it does not fit.
    pub(crate) fn push(&mut self, text: &str) -> bool {
        text.bytes().all(|b| self.push_byte(b).is_some())
    }

    /// The text. Only ASCII is ever pushed but through [`Text::push`], which takes a `str`.
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }

    /// The lower-cased wire form of the text read as a name (a missing final dot added), into
    /// `out`; its length, or `None` when it is no valid name (an empty label, a label over 63
    /// bytes, a name over 255).
    pub(crate) fn to_wire(&self, out: &mut [u8; MAX_NAME_LEN]) -> Option<usize> {
        wire_of(self.as_str(), out)
    }
}

/// The lower-cased wire form of the dotted name `text` (absolute whether or not it ends in a
/// dot), into `out`; its length, or `None` when it is no valid name.
pub(crate) fn wire_of(text: &str, out: &mut [u8; MAX_NAME_LEN]) -> Option<usize> {
    let text = text.strip_suffix('.').unwrap_or(text);
    let mut pos = 0;
    if !text.is_empty() {
        for label in text.split('.') {
            if label.is_empty() || label.len() > MAX_LABEL_LEN || pos + 1 + label.len() >= MAX_NAME_LEN {
                return None;
            }
            out[pos] = label.len() as u8;
            for (i, b) in label.bytes().enumerate() {
                out[pos + 1 + i] = b.to_ascii_lowercase();
            }
            pos += 1 + label.len();
        }
    }
    out[pos] = 0;
    Some(pos + 1)
}

/// Whether the dotted name `name` is `zone` or below it, both lower-cased and ending in a dot.
pub(crate) fn within(name: &str, zone: &str) -> bool {
    zone == "." || name == zone || (name.ends_with(zone) && name.as_bytes()[name.len() - zone.len() - 1] == b'.')
}

/// `text` lower-cased and ending in a dot, as a zone or an exact name is compared.
pub(crate) fn absolute(text: &str) -> String {
    let mut out = text.to_ascii_lowercase();
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}

/// Class mnemonics, besides `CLASSnnn`.
const CLASSES: &[(u16, &str)] = &[(class::IN, "IN"), (class::CH, "CH"), (4, "HS"), (255, "ANY")];

/// Response codes a template may answer with (the names miekg/dns gives them).
const RCODES: &[(&str, u16)] = &[
    ("NOERROR", rcode::NOERROR),
    ("SUCCESS", rcode::NOERROR),
    ("FORMERR", rcode::FORMERR),
    ("SERVFAIL", rcode::SERVFAIL),
    ("NXDOMAIN", rcode::NXDOMAIN),
    ("NOTIMP", rcode::NOTIMP),
    ("REFUSED", rcode::REFUSED),
];

fn lookup(table: &[(u16, &str)], generic: &str, text: &str) -> Option<u16> {
    let upper = text.to_ascii_uppercase();
    if let Some(&(value, _)) = table.iter().find(|(_, name)| *name == upper) {
        return Some(value);
    }
    upper.strip_prefix(generic)?.parse().ok()
}

fn mnemonic(table: &[(u16, &str)], generic: &str, value: u16) -> String {
    match table.iter().find(|&&(v, _)| v == value) {
        Some((_, name)) => (*name).to_owned(),
        None => format!("{generic}{value}"),
    }
}

/// The type `text` names (`AAAA`, `TYPE65`).
pub(crate) fn rtype_of(text: &str) -> Option<u16> {
    lookup(&rtype::MNEMONICS, "TYPE", text)
}

/// The class `text` names (`IN`, `CH`, `CLASS3`).
pub(crate) fn class_of(text: &str) -> Option<u16> {
    lookup(CLASSES, "CLASS", text)
}

/// The response code `text` names (`NXDOMAIN`).
pub(crate) fn rcode_of(text: &str) -> Option<u16> {
    RCODES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(text))
        .map(|&(_, v)| v)
}

/// The mnemonic of a type, as templates spell `.Type`.
pub(crate) fn rtype_name(value: u16) -> String {
    mnemonic(&rtype::MNEMONICS, "TYPE", value)
}

/// The mnemonic of a class, as templates spell `.Class`.
pub(crate) fn class_name(value: u16) -> String {
    mnemonic(CLASSES, "CLASS", value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_read_as_lower_cased_dotted_text_and_back() {
        let text = Text::of_wire(b"\x03WwW\x07example\x03org\x00").unwrap();
        assert_eq!(text.as_str(), "www.example.org.");
        let mut wire = [0u8; MAX_NAME_LEN];
        let len = text.to_wire(&mut wire).unwrap();
        assert_eq!(&wire[..len], b"\x03www\x07example\x03org\x00");
        assert_eq!(Text::of_wire(b"\x00").unwrap().as_str(), ".");
    }

    #[test]
    fn a_label_holding_a_dot_matches_no_rule() {
        assert!(Text::of_wire(b"\x03a.b\x03org\x00").is_none());
    }

    #[test]
    fn text_that_is_no_name_has_no_wire_form() {
        let mut wire = [0u8; MAX_NAME_LEN];
        assert!(wire_of("a..b.", &mut wire).is_none());
        assert!(wire_of(&"x".repeat(64), &mut wire).is_none());
        assert_eq!(wire_of("a.b", &mut wire), Some(5));
    }

    #[test]
    fn zones_contain_names_at_label_boundaries() {
        assert!(within("a.example.org.", "example.org."));
        assert!(within("example.org.", "example.org."));
        assert!(!within("anexample.org.", "example.org."));
        assert!(within("anything.", "."));
    }

    #[test]
    fn mnemonics_and_generic_forms_name_types_and_classes() {
        assert_eq!(rtype_of("aaaa"), Some(rtype::AAAA));
        assert_eq!(rtype_of("TYPE65"), Some(65));
        assert_eq!(class_of("ch"), Some(class::CH));
        assert_eq!(rtype_name(99), "TYPE99");
        assert_eq!(rcode_of("nxdomain"), Some(rcode::NXDOMAIN));
        assert_eq!(rtype_of("BOGUS"), None);
    }
}
