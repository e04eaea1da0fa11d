//! The signed zone a snapshot carries: for every name of the SkyDNS domain, its answers with
//! their RRSIGs and the NSEC3 records that deny what it does not have, made when the snapshot
//! is built, so that answering a signed question signs nothing.

use super::key::{SigningKey, DNSKEY};
use super::nsec3::{self, Hash};
use super::records::{self, Set};
use super::rrsig::{self, Validity, RRSIG};
use super::Dnssec;
use crate::answer::{answer_inside, Context, Outcome, Transport};
use crate::snapshot::views::Views;
use crate::snapshot::{Found, Nodes, Slot, Snapshot, Zone};
use crate::wire::types::{class, rtype, HEADER_LEN, MAX_MESSAGE_LEN};
use crate::wire::{LowerName, Name};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::SystemTime;

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
    fn then(&self, more: &Records) -> Records {
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

/// What a name of the signed zone answers a query with DO set.
#[derive(Debug, PartialEq, Eq)]
pub struct SignedName {
    /// By query type, the signed answer.
    answers: Box<[(u16, Records)]>,
    /// The NSEC3 record matching the name, signed: what denies the types it lacks (NODATA),
    /// and proves it the closest encloser of a name below it that does not exist.
    matching: Records,
    /// The NSEC3 record covering the wildcard below the name, signed: a name below it that does
    /// not exist is not answered by a wildcard either.
    wildcard: Records,
    /// For a name whose answers depend on the client (SkyDNS views), what each class of clients
    /// gets, in the order of the node's [`crate::snapshot::views::Views`] classes; empty for
    /// the other names.
    views: Box<[SignedName]>,
}

impl SignedName {
    /// The signed answer to `qtype`, if the name has one.
    pub fn answer(&self, qtype: u16) -> Option<&Records> {
        self.answers.iter().find(|(t, _)| *t == qtype).map(|(_, r)| r)
    }

    /// The first of its answers: what an ANY query gets (RFC 8482 §4.1 lets a server answer
    /// one RRset of the name).
    pub fn first(&self) -> Option<&Records> {
        self.answers.first().map(|(_, r)| r)
    }

    /// The signed NSEC3 record matching the name.
    pub fn matching(&self) -> &Records {
        &self.matching
    }

    /// The signed NSEC3 record covering `*.<name>`.
    pub fn wildcard(&self) -> &Records {
        &self.wildcard
    }

    /// What the clients of the views class `class` get (the name itself when it has no views).
    #[inline]
    pub fn for_class(&self, class: usize) -> &SignedName {
        self.views.get(class).unwrap_or(self)
    }
}

/// The signed SkyDNS domain of a snapshot.
#[derive(Debug)]
pub struct Signed {
    dnssec: Dnssec,
    apex: Name,
    names: Nodes<Arc<SignedName>>,
    /// The zone's SOA with the negative TTL and its RRSIG, for the authority section of
    /// denials.
    soa: Records,
    /// The SOA RDATA `soa` was made from.
    soa_rdata: Box<[u8]>,
    /// The apex's DNSKEY and NSEC3PARAM RRsets without RRSIG, by type: what a query without DO
    /// gets, so that `dig DNSKEY <zone> | dnssec-dsfromkey` works as with any signed zone.
    apex_unsigned: Box<[(u16, Records)]>,
    /// The earliest expiring of the zone's signatures.
    oldest: Validity,
    /// The TTL of the SOA and NSEC3 records of denials.
    negative_ttl: u32,
}

impl Signed {
    /// The key the zone is signed with.
    pub fn key(&self) -> &Arc<SigningKey> {
        &self.dnssec.key
    }

    /// The settings it was signed with.
    pub fn dnssec(&self) -> &Dnssec {
        &self.dnssec
    }

    /// The apex of the signed zone.
    pub fn apex(&self) -> &Name {
        &self.apex
    }

    /// What the name `qname` answers, if it exists in the zone.
    #[inline]
    pub fn name(&self, qname: &LowerName) -> Option<&SignedName> {
        self.names.get_lower(qname).map(|n| &**n)
    }

    /// What the name of lower-cased wire form `wire` answers, if it exists in the zone.
    pub fn name_wire(&self, wire: &[u8]) -> Option<&SignedName> {
        self.names.get(wire).map(|n| &**n)
    }

    /// The apex's RRset of `qtype` (DNSKEY or NSEC3PARAM) without its RRSIG, for a query
    /// without DO; `None` for the other types, which the snapshot's nodes answer.
    pub fn apex_unsigned(&self, qtype: u16) -> Option<&Records> {
        self.apex_unsigned.iter().find(|(t, _)| *t == qtype).map(|(_, r)| r)
    }

    /// The signed SOA of denials.
    pub fn soa(&self) -> &Records {
        &self.soa
    }

    /// The TTL of the SOA and NSEC3 records of denials (RFC 5155 §3).
    pub fn negative_ttl(&self) -> u32 {
        self.negative_ttl
    }

    /// Whether a signature of the zone is due to be made again at `now`.
    pub fn due(&self, now: SystemTime) -> bool {
        self.oldest.due(now)
    }

    /// How long after `now` the oldest signature of the zone comes due (zero when one is): when
    /// a source builds again, for the renewal alone.
    pub fn due_in(&self, now: SystemTime) -> std::time::Duration {
        self.oldest.due_in(now)
    }

    /// Number of names signed.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no name is signed.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Signs the SkyDNS domain of `snapshot` with `dnssec`'s key. With `previous`, the zone signed
/// for the snapshot this one was updated from, only the names of `touched` are signed again
/// (and every name when a signature of `previous` is due or the key changed); without it,
/// every name. `None` when the snapshot has no zone of the key's owner.
pub fn sign(
    snapshot: &Snapshot,
    dnssec: &Dnssec,
    previous: Option<(&Signed, &[Name])>,
    now: SystemTime,
) -> Option<Signed> {
    let apex = dnssec.key.owner().clone();
    let zone = snapshot.zones.iter().find(|z| z.apex == apex)?;
    let validity = Validity::from(now);
    let mut signer = Signer {
        snapshot,
        key: &dnssec.key,
        zone,
        apex: apex.wire().to_ascii_lowercase(),
        validity,
        made: HashMap::new(),
        out: vec![0; MAX_MESSAGE_LEN],
    };
    let soa_rdata: Box<[u8]> = zone.soa_rdata.clone().unwrap_or_default();
    let reusable = previous.filter(|(p, _)| p.dnssec == *dnssec && p.apex == apex && !p.oldest.due(now));
    let soa = match reusable {
        Some((previous, _)) if previous.soa_rdata == soa_rdata => previous.soa.clone(),
        _ => signer.records(
            &[Set {
                section: 1,
                owner: signer.apex.clone(),
                rtype: rtype::SOA,
                ttl: zone.negative_ttl,
                rdatas: vec![soa_rdata.to_vec()],
            }],
            &[],
            Section::Authority,
        )?,
    };
    let (mut names, touched): (Nodes<Arc<SignedName>>, Vec<Name>) = match reusable {
        Some((previous, touched)) => (previous.names.clone(), touched.to_vec()),
        None => (Nodes::default(), zone_names(snapshot, &apex)),
    };
    let mut oldest = match reusable {
        Some((previous, _)) => previous.oldest,
        None => validity,
    };
    for name in touched {
        let lower = name.wire().to_ascii_lowercase();
        let Ok(qname) = LowerName::from_wire(&lower) else {
            continue;
        };
        let Ok(key) = Name::from_wire(&lower) else {
            continue;
        };
        match signer.name(&qname) {
            Some(signed) => {
                names.insert(key, Arc::new(signed));
            }
            None => {
                names.remove(&key);
            }
        }
    }
    if reusable.is_some() {
        oldest = earliest(oldest, validity);
    }
    tracing::debug!(
        names = names.len(),
        signatures = signer.made.len(),
        "signed the SkyDNS domain"
    );
    let apex_unsigned = apex_sets(&dnssec.key, &signer.apex, zone.default_ttl)
        .into_iter()
        .map(|set| (set.rtype, unsigned_answer(&set)))
        .collect();
    Some(Signed {
        dnssec: dnssec.clone(),
        apex,
        names,
        soa,
        soa_rdata,
        apex_unsigned,
        oldest,
        negative_ttl: zone.negative_ttl,
    })
}

/// The signed records of the reply `msg` (made by [`unsigned`]) to a query wildcard `qname`
/// (`*` or `any` labels) and `qtype` asked by `client`: its RRsets with their RRSIGs, or for a
/// NODATA reply the SOA and an NSEC3 record matching `qname` whose bitmap lists the types the
/// query wildcard answers that client. Signed per query name (see [`super::denial::Signing::cached`]).
pub fn sign_query(
    snapshot: &Snapshot,
    signed: &Signed,
    key: &SigningKey,
    validity: Validity,
    question: (&LowerName, u16, IpAddr),
    msg: &[u8],
) -> Option<Records> {
    let (qname, qtype, client) = question;
    let zone = snapshot.zones.iter().find(|z| z.apex == signed.apex)?;
    let mut signer = Signer {
        snapshot,
        key,
        zone,
        apex: signed.apex.wire().to_ascii_lowercase(),
        validity,
        made: HashMap::new(),
        out: vec![0; MAX_MESSAGE_LEN],
    };
    if msg.get(6..8)? != [0, 0] {
        return signer.records(&records::sets(msg)?, qname.wire(), Section::Answer);
    }
    let mut types = vec![RRSIG];
    for other in Slot::QTYPES.into_iter().filter(|t| *t != qtype) {
        let sets = signer.answer(qname, other, client);
        if sets.is_some_and(|sets| {
            sets.iter()
                .any(|s| s.section == 0 && s.owner == qname.wire() && s.rtype == other)
        }) {
            types.push(other);
        }
    }
    let hash = nsec3::hash_name(qname.wire());
    let (owner, rdata) = nsec3::matching(&hash, &nsec3::type_bitmap(&types));
    Some(signed.soa.then(&signer.nsec3(&owner, rdata)?))
}

/// The RRsets only the apex of a signed zone has: its DNSKEY and its NSEC3PARAM (RFC 5155 §4),
/// with the zone's default TTL. `apex` is its lower-cased wire form.
fn apex_sets(key: &SigningKey, apex: &[u8], ttl: u32) -> [Set; 2] {
    let set = |rtype, rdata| Set {
        section: 0,
        owner: apex.to_vec(),
        rtype,
        ttl,
        rdatas: vec![rdata],
    };
    [
        set(DNSKEY, key.dnskey_rdata()),
        set(nsec3::NSEC3PARAM, nsec3::param_rdata()),
    ]
}

/// `set`, an RRset of one record owned by the question's name, ready to copy as an answer
/// without signature.
fn unsigned_answer(set: &Set) -> Records {
    let mut bytes = Vec::new();
    for rdata in &set.rdatas {
        write_rr(&mut bytes, &set.owner, &set.owner, set.rtype, set.ttl, rdata);
    }
    Records {
        chunks: Box::new([Chunk {
            end: bytes.len() as u32,
            count: set.rdatas.len() as u16,
            section: Section::Answer,
        }]),
        bytes: bytes.into_boxed_slice(),
    }
}

/// Of two validities, the one expiring first.
fn earliest(a: Validity, b: Validity) -> Validity {
    if (b.expiration.wrapping_sub(a.expiration) as i32) < 0 {
        b
    } else {
        a
    }
}

/// Every name of the zone `apex` in `snapshot`: its nodes and SkyDNS leaves.
fn zone_names(snapshot: &Snapshot, apex: &Name) -> Vec<Name> {
    let mut names: Vec<Name> = snapshot
        .nodes
        .keys()
        .filter(|name| name.is_within(apex))
        .cloned()
        .collect();
    names.extend(snapshot.leaves.names().filter(|name| name.is_within(apex)));
    names
}

/// An RRset as a signature covers it: owner, type, TTL and sorted data.
type SetId = (Vec<u8>, u16, u32, Vec<Vec<u8>>);

/// Signs names of one snapshot.
struct Signer<'s> {
    snapshot: &'s Snapshot,
    key: &'s SigningKey,
    zone: &'s Zone,
    /// The apex, lower-cased wire form.
    apex: Vec<u8>,
    validity: Validity,
    /// RRSIG RDATA made in this pass, by RRset: a set several names answer with (a CNAME
    /// target's addresses, glue) is signed once.
    made: HashMap<SetId, Vec<u8>>,
    out: Vec<u8>,
}

impl Signer<'_> {
    /// What the name `qname` answers signed; `None` when it does not exist. A name with views
    /// is signed once per class of clients, as a client of that class.
    fn name(&mut self, qname: &LowerName) -> Option<SignedName> {
        let members = match self.snapshot.find(qname) {
            Found::Node(node, _) => node.views().map(Views::members),
            Found::Leaf(..) => None,
            _ => return None,
        };
        let unspecified = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        let mut name = self.as_client(qname, unspecified)?;
        if let Some(members) = members {
            let mut views = Vec::with_capacity(members.len());
            for member in members {
                views.push(self.as_client(qname, member.unwrap_or(unspecified))?);
            }
            name.views = views.into_boxed_slice();
        }
        Some(name)
    }

    /// What the name `qname` answers `client`, signed.
    fn as_client(&mut self, qname: &LowerName, client: IpAddr) -> Option<SignedName> {
        let mut answers = Vec::new();
        let mut types = vec![RRSIG];
        for qtype in Slot::QTYPES {
            let Some(sets) = self.answer(qname, qtype, client) else {
                continue;
            };
            if sets
                .iter()
                .any(|s| s.section == 0 && s.owner == qname.wire() && s.rtype == qtype)
                && qtype != rtype::CNAME
            {
                types.push(qtype);
            }
            answers.push((qtype, self.records(&sets, qname.wire(), Section::Answer)?));
        }
        if qname.wire() == self.apex {
            for set in apex_sets(self.key, &self.apex, self.zone.default_ttl) {
                types.push(set.rtype);
                answers.push((set.rtype, self.records(&[set], qname.wire(), Section::Answer)?));
            }
        }
        let hash = nsec3::hash_name(qname.wire());
        let (owner, rdata) = nsec3::matching(&hash, &nsec3::type_bitmap(&types));
        let matching = self.nsec3(&owner, rdata)?;
        let mut star = b"\x01*".to_vec();
        star.extend_from_slice(qname.wire());
        let (owner, rdata) = nsec3::covering(&nsec3::hash_name(&star));
        let wildcard = self.nsec3(&owner, rdata)?;
        Some(SignedName {
            answers: answers.into_boxed_slice(),
            matching,
            wildcard,
            views: Box::default(),
        })
    }

    /// The RRsets of the unsigned answer to `qname` and `qtype` asked by `client`, or `None`
    /// when it has no answer records (NODATA, or an answer too large for any message).
    fn answer(&mut self, qname: &LowerName, qtype: u16, client: IpAddr) -> Option<Vec<Set>> {
        let len = unsigned(self.snapshot, qname.wire(), qtype, client, &mut self.out)?;
        let msg = &self.out[..len];
        let ancount = u16::from_be_bytes([msg[6], msg[7]]);
        if msg[3] & 0x0F != 0 || ancount == 0 {
            return None;
        }
        records::sets(msg)
    }

    /// The NSEC3 record owned by the hash `owner` with `rdata`, signed, for the authority
    /// section; its TTL is the SOA minimum (RFC 5155 §3).
    fn nsec3(&mut self, owner: &Hash, rdata: Vec<u8>) -> Option<Records> {
        let set = Set {
            section: 1,
            owner: nsec3::owner(owner, &self.apex),
            rtype: nsec3::NSEC3,
            ttl: self.zone.negative_ttl,
            rdatas: vec![rdata],
        };
        self.records(&[set], &[], Section::Authority)
    }

    /// `sets` with an RRSIG after each one inside the zone, written for replies to `qname`
    /// (wire form; empty for records that answer several names); the sets of the answer
    /// section go in `first`.
    fn records(&mut self, sets: &[Set], qname: &[u8], first: Section) -> Option<Records> {
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

    /// The RRSIG RDATA over `set`, made once per pass.
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

/// Writes in `out` the unsigned reply to `qname` (wire form) and `qtype` asked by `client` over
/// TCP, as the zones alone answer it; its length, or `None` when it was dropped or truncated.
pub(crate) fn unsigned(snapshot: &Snapshot, qname: &[u8], qtype: u16, client: IpAddr, out: &mut [u8]) -> Option<usize> {
    let mut query = [0u8; HEADER_LEN + crate::wire::types::MAX_NAME_LEN + 4];
    query[5] = 1;
    let end = HEADER_LEN + qname.len();
    query.get_mut(HEADER_LEN..end)?.copy_from_slice(qname);
    query[end..end + 2].copy_from_slice(&qtype.to_be_bytes());
    query[end + 2..end + 4].copy_from_slice(&class::IN.to_be_bytes());
    let ctx = Context::new(Transport::Tcp).with_client(client);
    match answer_inside(&query[..end + 4], snapshot, &ctx, out) {
        Outcome::Reply(reply) if !reply.truncated => Some(reply.len),
        _ => None,
    }
}

/// Appends one record: its owner a pointer to the question when it is `qname`, else whole.
pub(crate) fn write_rr(out: &mut Vec<u8>, owner: &[u8], qname: &[u8], rtype_: u16, ttl: u32, rdata: &[u8]) {
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
