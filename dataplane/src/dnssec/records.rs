//! The RRsets of a reply skyline wrote, read back in canonical form (RFC 4034 §6.2) so that
//! they can be signed, and written again with their signatures.

use crate::wire::rdata::{layout, Field};
use crate::wire::types::{class, rtype, HEADER_LEN};

/// One RRset of a reply: owner and names in its data lower-cased and uncompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    /// 0 answer, 1 authority, 2 additional.
    pub section: u8,
    /// Owner, lower-cased wire form.
    pub owner: Vec<u8>,
    /// Type.
    pub rtype: u16,
    /// The smallest TTL of its records, which all of them then carry (RFC 2181 §5.2).
    pub ttl: u32,
    /// Each record's data, in canonical form, in reply order.
    pub rdatas: Vec<Vec<u8>>,
}

/// The RRsets of the answer, authority and additional sections of `msg`, the OPT left out, in
/// order: consecutive records of one owner and type in one section form one set. `None` when
/// the message does not parse.
pub fn sets(msg: &[u8]) -> Option<Vec<Set>> {
    let count = |i: usize| usize::from(u16::from_be_bytes([msg[4 + 2 * i], msg[5 + 2 * i]]));
    if msg.len() < HEADER_LEN {
        return None;
    }
    let mut pos = HEADER_LEN;
    for _ in 0..count(0) {
        pos = name(msg, pos, &mut Vec::new())? + 4;
    }
    let mut sets: Vec<Set> = Vec::new();
    for section in 0..3u8 {
        for _ in 0..count(1 + usize::from(section)) {
            let mut owner = Vec::new();
            pos = name(msg, pos, &mut owner)?;
            let fixed = msg.get(pos..pos + 10)?;
            let rtype_ = u16::from_be_bytes([fixed[0], fixed[1]]);
            let rclass = u16::from_be_bytes([fixed[2], fixed[3]]);
            let ttl = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
            let len = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
            let start = pos + 10;
            pos = start + len;
            msg.get(start..pos)?;
            if rtype_ == rtype::OPT || rclass != class::IN {
                continue;
            }
            let rdata = canonical(msg, rtype_, start, pos)?;
            match sets.last_mut() {
                Some(set) if set.section == section && set.rtype == rtype_ && set.owner == owner => {
                    set.ttl = set.ttl.min(ttl);
                    set.rdatas.push(rdata);
                }
                _ => sets.push(Set {
                    section,
                    owner,
                    rtype: rtype_,
                    ttl,
                    rdatas: vec![rdata],
                }),
            }
        }
    }
    Some(sets)
}

/// The data of a record of type `rtype_` at `msg[start..end]` in canonical form: the names
/// its layout lower-cases decompressed and lower-cased, the rest as written. `None` when the
/// fields of its layout do not fill the data exactly.
fn canonical(msg: &[u8], rtype_: u16, start: usize, end: usize) -> Option<Vec<u8>> {
    let Some(fields) = layout(rtype_, class::IN) else {
        return Some(msg[start..end].to_vec());
    };
    let mut out = Vec::with_capacity(end - start);
    let mut pos = start;
    for field in fields {
        let next = match *field {
            Field::Name(rule) if rule.lowered() => {
                pos = name(msg, pos, &mut out)?;
                continue;
            }
            Field::Name(_) => name(msg, pos, &mut Vec::new())?,
            Field::Fixed(len) => pos + len,
            Field::Text => pos + 1 + usize::from(*msg.get(pos)?),
            Field::Rest => end,
        };
        out.extend_from_slice(msg.get(pos..next)?);
        pos = next;
    }
    (pos == end).then_some(out)
}

/// Reads the name at `pos`, following pointers, lower-cased onto `out`; returns the offset
/// past it where it starts.
pub fn name(msg: &[u8], mut pos: usize, out: &mut Vec<u8>) -> Option<usize> {
    let mut end = None;
    for _ in 0..128 {
        let len = *msg.get(pos)?;
        match len {
            0 => {
                out.push(0);
                return Some(end.unwrap_or(pos + 1));
            }
            0xC0..=0xFF => {
                let target = usize::from(u16::from_be_bytes([len, *msg.get(pos + 1)?]) & 0x3FFF);
                end.get_or_insert(pos + 2);
                pos = target;
            }
            1..=63 => {
                let label = msg.get(pos..pos + 1 + usize::from(len))?;
                out.extend(label.iter().map(u8::to_ascii_lowercase));
                pos += 1 + usize::from(len);
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply to `Web.Example. A` whose records, one per type, all own the question name.
    fn reply(records: &[(u16, &[u8])]) -> Vec<u8> {
        let mut msg = vec![0, 0, 0x84, 0, 0, 1, 0, records.len() as u8, 0, 0, 0, 0];
        msg.extend_from_slice(b"\x03Web\x07Example\x00\x00\x01\x00\x01");
        for (rtype_, rdata) in records {
            msg.extend_from_slice(&[0xC0, 12]);
            msg.extend_from_slice(&rtype_.to_be_bytes());
            msg.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
            msg.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            msg.extend_from_slice(rdata);
        }
        msg
    }

    #[test]
    fn canonical_data_lower_cases_and_expands_the_names_rfc_4034_lists_and_keeps_the_rest() {
        let web_example = [0xC0, 12];
        let example = [0xC0, 16];
        let msg = reply(&[
            (rtype::CNAME, b"\x02Ab\xC0\x0C"),
            (rtype::MX, b"\x00\x0A\xC0\x10"),
            (
                rtype::SOA,
                b"\x02Ns\xC0\x10\x04Host\xC0\x10\0\0\0\x01\0\0\0\x02\0\0\0\x03\0\0\0\x04\0\0\0\x05",
            ),
            (rtype::SRV, b"\x00\x01\x00\x02\x00\x50\x03Srv\x07Example\x00"),
            (rtype::DNAME, &example),
            (rtype::NSEC, b"\x03Web\x07Example\x00\x00\x01\x40"),
            (rtype::SVCB, b"\x00\x01\x03Svc\x00\x00\x03\x00\x02\x01\xBB"),
            (rtype::TXT, b"\x02Up"),
            (rtype::PTR, &web_example),
        ]);
        let sets = sets(&msg).unwrap();
        let data: Vec<(u16, &[u8])> = sets.iter().map(|set| (set.rtype, set.rdatas[0].as_slice())).collect();
        let soa = b"\x02ns\x07example\x00\x04host\x07example\x00\0\0\0\x01\0\0\0\x02\0\0\0\x03\0\0\0\x04\0\0\0\x05";
        let expected: [(u16, &[u8]); 9] = [
            (rtype::CNAME, b"\x02ab\x03web\x07example\x00"),
            (rtype::MX, b"\x00\x0A\x07example\x00"),
            (rtype::SOA, soa),
            (rtype::SRV, b"\x00\x01\x00\x02\x00\x50\x03srv\x07example\x00"),
            (rtype::DNAME, b"\x07example\x00"),
            (rtype::NSEC, b"\x03Web\x07Example\x00\x00\x01\x40"),
            (rtype::SVCB, b"\x00\x01\x03Svc\x00\x00\x03\x00\x02\x01\xBB"),
            (rtype::TXT, b"\x02Up"),
            (rtype::PTR, b"\x03web\x07example\x00"),
        ];
        assert_eq!(data, expected);
        assert!(sets.iter().all(|set| set.owner == b"\x03web\x07example\x00"));
    }

    #[test]
    fn data_its_layout_does_not_fill_does_not_parse() {
        assert_eq!(sets(&reply(&[(rtype::MX, b"\x00\x0A\xC0\x10\x00")])), None);
        assert_eq!(sets(&reply(&[(rtype::SOA, b"\x00\x00\x00")])), None);
        assert_eq!(sets(&reply(&[(rtype::A, b"\x0A\x00\x00")])), None);
    }
}
