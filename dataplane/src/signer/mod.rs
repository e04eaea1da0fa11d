//! Build time DNSSEC (`--dnssec`, docs/dnssec.md): the SkyDNS domain of a snapshot signed as
//! the snapshot is built, every answer a name gives with its RRSIGs and the NSEC3 records that
//! deny what it does not have, so that a query with DO set is answered by copying, as any
//! other.
//!
//! The signer finds what a name answers by asking the answer path ([`mod@crate::answer`]), so it
//! sits above answering, which sits above the snapshot it reads: the SkyDNS builders
//! (`snapshot::skydns`) compile a snapshot and know nothing of signing, and the sources build
//! through [`build`], [`build_entries`] and [`update`] here, which compile and then sign.

use crate::answer::unsigned_sets;
use crate::dnssec::key::{SigningKey, DNSKEY};
use crate::dnssec::nsec3;
use crate::dnssec::records::Set;
use crate::dnssec::rrsets::{write_rr, Chunk, Records, RrsetSigner, Section};
use crate::dnssec::rrsig::{Validity, RRSIG};
use crate::dnssec::Dnssec;
use crate::snapshot::skydns::{self, Config, Entry, Stored, Updated};
use crate::snapshot::views::Views;
use crate::snapshot::{Found, Nodes, Signed, SignedName, Slot, Snapshot, Zone};
use crate::wire::types::{rtype, MAX_MESSAGE_LEN};
use crate::wire::{LowerName, Name};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::SystemTime;

/// Builds the snapshot of `records` (etcd key, typed value) under `config`, as
/// [`skydns::build`](crate::snapshot::skydns) compiles it, and signs its domain with
/// `config.dnssec`'s key when it has one. `now` sets the SOA serial and the signatures'
/// validity.
pub fn build<V: Stored>(config: &Config, records: &[(String, V)], generation: u64, now: SystemTime) -> Snapshot {
    signed(skydns::build(config, records, generation, now), config, None, now)
}

/// Builds the snapshot of `entries`, the records below `/<path_prefix>/` in the order of
/// [`Entry::cmp_order`], sharing the table, and signs its domain as [`build`] does.
pub fn build_entries(config: &Config, entries: &Arc<Vec<Arc<Entry>>>, generation: u64, now: SystemTime) -> Snapshot {
    signed(
        skydns::build_entries(config, entries, generation, now),
        config,
        None,
        now,
    )
}

/// The snapshot `previous` becomes when the keys `changed` take the records they have in
/// `records` (see `snapshot::skydns::update` for what each argument must be, and when it
/// gives `None`), signed: only the names the change touched are signed again when `previous`
/// was signed with the same key and none of its signatures is due (docs/dnssec.md, "Cost").
pub fn update(
    previous: &Snapshot,
    config: &Config,
    records: &Arc<Vec<Arc<Entry>>>,
    changed: &[String],
    catch_up: &[Vec<u8>],
    generation: u64,
    now: SystemTime,
) -> Option<Updated> {
    let (updated, touched) = skydns::update(previous, config, records, changed, catch_up, generation, now)?;
    let before = previous.dnssec.as_deref().map(|signed| (signed, &touched[..]));
    Some(Updated {
        snapshot: signed(updated.snapshot, config, before, now),
        stale: updated.stale,
    })
}

/// `snapshot` with its domain signed with `config`'s key, when it has one.
fn signed(mut snapshot: Snapshot, config: &Config, previous: Option<(&Signed, &[Name])>, now: SystemTime) -> Snapshot {
    if let Some(dnssec) = &config.dnssec {
        snapshot.dnssec = sign(&snapshot, dnssec, previous, now).map(Arc::new);
    }
    snapshot
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
        rrsets: RrsetSigner::new(
            &dnssec.key,
            apex.wire().to_ascii_lowercase(),
            validity,
            zone.negative_ttl,
        ),
        zone,
        out: vec![0; MAX_MESSAGE_LEN],
    };
    let soa_rdata: Box<[u8]> = zone.soa_rdata.clone().unwrap_or_default();
    let reusable = previous.filter(|(p, _)| p.dnssec == *dnssec && p.apex == apex && !p.oldest.due(now));
    let soa = match reusable {
        Some((previous, _)) if previous.soa_rdata == soa_rdata => previous.soa.clone(),
        _ => signer.rrsets.records(
            &[Set {
                section: 1,
                owner: signer.rrsets.apex().to_vec(),
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
        signatures = signer.rrsets.signatures(),
        "signed the SkyDNS domain"
    );
    let apex_unsigned = apex_sets(&dnssec.key, signer.rrsets.apex(), zone.default_ttl)
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

/// Signs names of one snapshot.
struct Signer<'s> {
    snapshot: &'s Snapshot,
    rrsets: RrsetSigner<'s>,
    zone: &'s Zone,
    /// Room for the unsigned reply a name's answer is read from.
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
            let Some(sets) = unsigned_sets(self.snapshot, qname, qtype, client, &mut self.out) else {
                continue;
            };
            if sets
                .iter()
                .any(|s| s.section == 0 && s.owner == qname.wire() && s.rtype == qtype)
                && qtype != rtype::CNAME
            {
                types.push(qtype);
            }
            answers.push((qtype, self.rrsets.records(&sets, qname.wire(), Section::Answer)?));
        }
        if qname.wire() == self.rrsets.apex() {
            for set in apex_sets(self.rrsets.key(), self.rrsets.apex(), self.zone.default_ttl) {
                types.push(set.rtype);
                answers.push((set.rtype, self.rrsets.records(&[set], qname.wire(), Section::Answer)?));
            }
        }
        let hash = nsec3::hash_name(qname.wire());
        let (owner, rdata) = nsec3::matching(&hash, &nsec3::type_bitmap(&types));
        let matching = self.rrsets.nsec3(&owner, rdata)?;
        let mut star = b"\x01*".to_vec();
        star.extend_from_slice(qname.wire());
        let (owner, rdata) = nsec3::covering(&nsec3::hash_name(&star));
        let wildcard = self.rrsets.nsec3(&owner, rdata)?;
        Some(SignedName {
            answers: answers.into_boxed_slice(),
            matching,
            wildcard,
            views: Box::default(),
        })
    }
}
