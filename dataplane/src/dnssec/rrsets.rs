//! RRsets signed into records ready to copy after a question: what the signed zone a snapshot
//! carries holds (signed when the snapshot is built) and what answers sign per query name, both
//! made by one [`RrsetSigner`].

use super::key::SigningKey;
use super::nsec3::{self, Hash};
use super::records::Set;
use super::rrsig::{self, Validity, RRSIG};
use crate::wire::types::{class, HEADER_LEN};
use std::collections::HashMap;

/// Where a run of signed records goes in a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The answer section: sent whole or not at all.
    Answer,
    /// The authority section (denials): sent whole or not at all.
    Authority,
    /// The additional section: each RRset sent if it fits.
    Additional,
}

/// One RRset and its RRSIG, the unit a reply keeps or leaves out whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// End offset of its bytes in [`Records::bytes`].
    pub end: u32,
    /// Records it holds, RRSIG included.
    pub count: u16,
    /// Its section.
    pub section: Section,
}

/// Records ready to copy after a question: owners that are the question's name are pointers
/// to it, every other name is written whole, so the bytes fit any question of that name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Records {
    /// Every record, back to back.
    pub bytes: Box<[u8]>,
    /// The runs of `bytes`, in order.
    pub chunks: Box<[Chunk]>,
}

impl Records {
    /// `self`'s records, then `more`'s.
    pub fn then(&self, more: &Records) -> Records {
        let offset = self.bytes.len() as u32;
        let chunks = more.chunks.iter().map(|c| Chunk {
            end: c.end + offset,
            ..*c
        });
        Records {
            bytes: [&self.bytes[..], &more.bytes[..]].concat().into_boxed_slice(),
            chunks: self.chunks.iter().copied().chain(chunks).collect(),
        }
    }
}

/// An RRset as a signature covers it: owner, type, TTL and sorted data.
type SetId = (Vec<u8>, u16, u32, Vec<Vec<u8>>);

/// Signs RRsets of one zone with its key into [`Records`], each RRset once per signer: a set
/// several names answer with (a CNAME target's addresses, glue) is signed once.
#[derive(Debug)]
pub struct RrsetSigner<'k> {
    key: &'k SigningKey,
    /// The apex, lower-cased wire form.
    apex: Vec<u8>,
    validity: Validity,
    /// The TTL of the zone's NSEC3 records: its negative TTL (RFC 5155 §3).
    negative_ttl: u32,
    /// RRSIG RDATA made by this signer, by RRset.
    made: HashMap<SetId, Vec<u8>>,
}

impl<'k> RrsetSigner<'k> {
    /// A signer of the zone `apex` (lower-cased wire form) with `key`, its signatures valid
    /// for `validity`.
    pub fn new(key: &'k SigningKey, apex: Vec<u8>, validity: Validity, negative_ttl: u32) -> RrsetSigner<'k> {
        RrsetSigner {
            key,
            apex,
            validity,
            negative_ttl,
            made: HashMap::new(),
        }
    }

    /// The zone's apex, lower-cased wire form.
    pub fn apex(&self) -> &[u8] {
        &self.apex
    }

    /// The key it signs with.
    pub fn key(&self) -> &'k SigningKey {
        self.key
    }

    /// Signatures made so far.
    pub fn signatures(&self) -> usize {
        self.made.len()
    }

    /// The NSEC3 record owned by the hash `owner` with `rdata`, signed, for the authority
    /// section; its TTL is the SOA minimum (RFC 5155 §3).
    pub fn nsec3(&mut self, owner: &Hash, rdata: Vec<u8>) -> Option<Records> {
        let set = Set {
            section: 1,
            owner: nsec3::owner(owner, &self.apex),
            rtype: nsec3::NSEC3,
            ttl: self.negative_ttl,
            rdatas: vec![rdata],
        };
        self.records(&[set], &[], Section::Authority)
    }

    /// `sets` with an RRSIG after each one inside the zone, written for replies to `qname`
    /// (wire form; empty for records that answer several names); the sets of the answer
    /// section go in `first`.
    pub fn records(&mut self, sets: &[Set], qname: &[u8], first: Section) -> Option<Records> {
        let mut bytes = Vec::new();
        let mut chunks = Vec::with_capacity(sets.len());
        for set in sets {
            let section = match set.section {
                0 => first,
                1 => Section::Authority,
                _ => Section::Additional,
            };
            let section = if first == Section::Authority {
                Section::Authority
            } else {
                section
            };
            for rdata in &set.rdatas {
                write_rr(&mut bytes, &set.owner, qname, set.rtype, set.ttl, rdata);
            }
            let mut count = set.rdatas.len() as u16;
            if crate::wire::name::is_within(&set.owner, &self.apex) {
                let rrsig = self.rrsig(set)?;
                write_rr(&mut bytes, &set.owner, qname, RRSIG, set.ttl, &rrsig);
                count += 1;
            }
            chunks.push(Chunk {
                end: bytes.len() as u32,
                count,
                section,
            });
        }
        Some(Records {
            bytes: bytes.into_boxed_slice(),
            chunks: chunks.into_boxed_slice(),
        })
    }

    /// The RRSIG RDATA over `set`, made once per signer.
    fn rrsig(&mut self, set: &Set) -> Option<Vec<u8>> {
        let mut rdatas = set.rdatas.clone();
        rdatas.sort();
        rdatas.dedup();
        let id = (set.owner.clone(), set.rtype, set.ttl, rdatas);
        if let Some(made) = self.made.get(&id) {
            return Some(made.clone());
        }
        let mut rdatas = id.3.clone();
        let made = rrsig::sign(self.key, &set.owner, set.rtype, set.ttl, &mut rdatas, self.validity)?;
        self.made.insert(id, made.clone());
        Some(made)
    }
}

/// Appends one record: its owner a pointer to the question when it is `qname`, else whole.
pub fn write_rr(out: &mut Vec<u8>, owner: &[u8], qname: &[u8], rtype_: u16, ttl: u32, rdata: &[u8]) {
    if !qname.is_empty() && owner == qname {
        out.extend_from_slice(&[0xC0, HEADER_LEN as u8]);
    } else {
        out.extend_from_slice(owner);
    }
    out.extend_from_slice(&rtype_.to_be_bytes());
    out.extend_from_slice(&class::IN.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    out.extend_from_slice(rdata);
}
