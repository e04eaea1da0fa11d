//! The layout of each record type's data: which fields are domain names, how each name is
//! written and put in canonical form, and which fields have a fixed length. Adding a record
//! type with names or a fixed length is one row of [`layout`]; the cache reads it to check an
//! upstream's names (`cache/rdata.rs`), the writer to move the pointers of the names it
//! compresses ([`super::writer`]), the signer to put data in canonical form
//! (`dnssec/records.rs`).

use super::types::{class, rtype};

/// How a domain name in a record's data is written and how DNSSEC signs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// May be compressed: the well-known types of RFC 1035 that RFC 3597 §4 lists. Lower-cased
    /// in canonical form (RFC 4034 §6.2).
    Compressed,
    /// Never compressed (RFC 3597 §4), lower-cased in canonical form: the later types that
    /// RFC 4034 §6.2 lists.
    Lowered,
    /// Never compressed, and kept as written in canonical form: the types RFC 4034 §6.2 does
    /// not list (RFC 3597 §7), and NSEC, listed there by mistake (RFC 6840 §5.1).
    Verbatim,
}

impl NameRule {
    /// Whether canonical form lower-cases the name.
    pub const fn lowered(self) -> bool {
        matches!(self, NameRule::Compressed | NameRule::Lowered)
    }
}

/// One field of a record's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// A domain name.
    Name(NameRule),
    /// So many bytes.
    Fixed(usize),
    /// A character string: a length byte and that many bytes.
    Text,
    /// Whatever is left (parameters, signatures, type bitmaps); always the last field.
    Rest,
}

/// The fields of the data of a record of type `rtype` and class `rclass`, for the types whose
/// data holds names or has a fixed length; `None` for the others, whose data is opaque.
pub const fn layout(rtype: u16, rclass: u16) -> Option<&'static [Field]> {
    use Field::{Fixed, Name, Rest, Text};
    use NameRule::{Compressed, Lowered, Verbatim};
    Some(match rtype {
        // RFC 1035 §3.4.1: the Internet class's address; CHAOS A records hold a name.
        rtype::A if rclass == class::IN => &[Fixed(4)],
        rtype::AAAA if rclass == class::IN => &[Fixed(16)],
        rtype::NS | rtype::MD | rtype::MF | rtype::CNAME | rtype::MB | rtype::MG | rtype::MR | rtype::PTR => {
            &[Name(Compressed)]
        }
        rtype::SOA => &[Name(Compressed), Name(Compressed), Fixed(20)],
        rtype::MINFO => &[Name(Compressed), Name(Compressed)],
        rtype::MX => &[Fixed(2), Name(Compressed)],
        rtype::DNAME => &[Name(Lowered)],
        rtype::RP => &[Name(Lowered), Name(Lowered)],
        rtype::AFSDB | rtype::RT | rtype::KX => &[Fixed(2), Name(Lowered)],
        rtype::PX => &[Fixed(2), Name(Lowered), Name(Lowered)],
        // RFC 2782: the target is never compressed.
        rtype::SRV => &[Fixed(6), Name(Lowered)],
        rtype::NAPTR => &[Fixed(4), Text, Text, Text, Name(Lowered)],
        rtype::RRSIG => &[Fixed(18), Name(Lowered), Rest],
        rtype::NSEC => &[Name(Verbatim), Rest],
        // RFC 9460 §2.2: the target name is never compressed.
        rtype::SVCB | rtype::HTTPS => &[Fixed(2), Name(Verbatim), Rest],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The types whose names may be compressed (RFC 3597 §4).
    const COMPRESSIBLE: [u16; 11] = [
        rtype::NS,
        rtype::MD,
        rtype::MF,
        rtype::CNAME,
        rtype::SOA,
        rtype::MB,
        rtype::MG,
        rtype::MR,
        rtype::PTR,
        rtype::MINFO,
        rtype::MX,
    ];

    /// The types whose names canonical form lower-cases (RFC 4034 §6.2 item 3, which lists
    /// HINFO, SIG, NXT and A6 too, and NSEC, taken out again by RFC 6840 §5.1).
    const LOWERED: [u16; 24] = [
        rtype::NS,
        rtype::MD,
        rtype::MF,
        rtype::CNAME,
        rtype::SOA,
        rtype::MB,
        rtype::MG,
        rtype::MR,
        rtype::PTR,
        rtype::HINFO,
        rtype::MINFO,
        rtype::MX,
        rtype::RP,
        rtype::AFSDB,
        rtype::RT,
        rtype::SIG,
        rtype::PX,
        rtype::NXT,
        rtype::NAPTR,
        rtype::KX,
        rtype::SRV,
        rtype::DNAME,
        rtype::A6,
        rtype::RRSIG,
    ];

    fn names(rtype: u16) -> Vec<NameRule> {
        let fields = layout(rtype, class::IN).unwrap_or(&[]);
        fields
            .iter()
            .filter_map(|field| match field {
                Field::Name(rule) => Some(*rule),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn names_are_compressed_exactly_in_the_types_rfc_3597_lists() {
        for rtype in 0..=u16::MAX {
            for rule in names(rtype) {
                assert_eq!(
                    rule == NameRule::Compressed,
                    COMPRESSIBLE.contains(&rtype),
                    "type {rtype}"
                );
            }
        }
        for rtype in COMPRESSIBLE {
            assert!(!names(rtype).is_empty(), "type {rtype}");
        }
    }

    #[test]
    fn names_are_lower_cased_exactly_in_the_types_rfc_4034_lists_but_nsec() {
        for rtype in 0..=u16::MAX {
            for rule in names(rtype) {
                assert_eq!(rule.lowered(), LOWERED.contains(&rtype), "type {rtype}");
            }
        }
        assert_eq!(names(rtype::NSEC), [NameRule::Verbatim]);
        assert_eq!(names(rtype::SVCB), [NameRule::Verbatim]);
        assert!(names(rtype::HINFO).is_empty(), "HINFO holds character strings, no name");
    }

    #[test]
    fn fields_after_the_first_rest_do_not_exist() {
        for rtype in 0..=u16::MAX {
            for rclass in [class::IN, class::CH] {
                if let Some(fields) = layout(rtype, rclass) {
                    assert!(!fields.is_empty(), "type {rtype}");
                    let rest = fields.iter().position(|field| *field == Field::Rest);
                    assert!(rest.is_none_or(|at| at == fields.len() - 1), "type {rtype}");
                }
            }
        }
    }

    #[test]
    fn addresses_have_a_fixed_length_in_the_internet_class_only() {
        assert_eq!(layout(rtype::A, class::IN), Some(&[Field::Fixed(4)][..]));
        assert_eq!(layout(rtype::AAAA, class::IN), Some(&[Field::Fixed(16)][..]));
        assert_eq!(layout(rtype::A, class::CH), None);
        assert_eq!(layout(rtype::TXT, class::IN), None);
    }
}
