//! The RRsets of a reply skyline wrote, read back in canonical form (RFC 4034 §6.2) so that
//! they can be signed, and written again with their signatures.

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

/// The data of a record of type `rtype_` at `msg[start..end]`, its names decompressed and
/// lower-cased.
fn canonical(msg: &[u8], rtype_: u16, start: usize, end: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(end - start);
    match rtype_ {
        rtype::CNAME | rtype::NS | rtype::PTR => {
            name(msg, start, &mut out)?;
        }
        rtype::MX => {
            out.extend_from_slice(msg.get(start..start + 2)?);
            name(msg, start + 2, &mut out)?;
        }
        rtype::SRV => {
            out.extend_from_slice(msg.get(start..start + 6)?);
            name(msg, start + 6, &mut out)?;
        }
        rtype::SOA => {
            let next = name(msg, start, &mut out)?;
            let next = name(msg, next, &mut out)?;
            out.extend_from_slice(msg.get(next..next + 20)?);
        }
        _ => out.extend_from_slice(&msg[start..end]),
    }
    Some(out)
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
