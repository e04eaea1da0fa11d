//! What a signed reply holds that depends on the query name, signed when a query needs it: the
//! NSEC3 record covering the hash of the next closer name of a denial (RFC 5155 §7.2.1), and the
//! records of the answer to a query wildcard (`*` or `any` labels). Each worker keeps the ones
//! it made in a bounded cache (`--scache`) and spends at most a tenth of its time making them,
//! so that a flood of random names cannot starve its other queries.
//!
//! The cache, its budget and the room the wildcard answers are made in are a [`Signing`] the
//! caller owns and lends each answer through the answer path's `Context`, with the time:
//! answering reads no clock, and keeps nothing between queries that its caller did not hand it.

use super::nsec3::{self, Hash};
use super::records::Set;
use super::rrsets::{write_rr, Chunk, Records, Section};
use super::rrsig::{self, Validity};
use super::{Dnssec, SigningKey};
use crate::wire::Name;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Signing time a worker earns per second.
const BUDGET_PER_SECOND: Duration = Duration::from_millis(100);

/// Signing time a worker may have saved up: a burst of new names after a quiet spell.
const BUDGET_BURST: Duration = Duration::from_millis(100);

/// What became of the records a reply needs signed per query name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Covered {
    /// They were written.
    Written,
    /// The worker has spent its signing time: the query is not answered with them.
    OverBudget,
    /// The key failed to sign.
    Failed,
}

/// One worker's records signed per query name, the signing time it has left, and the room the
/// unsigned answer to a query wildcard is written in before it is signed. Owned by the caller
/// (a worker has one, for UDP and TCP alike) and lent to every answer, so that the answer path
/// keeps no state of its own: an answer given none works on a fresh one, which signs within a
/// whole burst and keeps nothing. Answering only checks the budget; the caller, who reads the
/// clock, charges it with [`Signing::charge`] for the answers that [`Signing::signed`].
#[derive(Debug)]
pub struct Signing {
    denials: Option<Denials>,
    /// Signing time left to spend.
    budget: Duration,
    /// When the budget last earned time (the wall clock the caller passed); `None` before the
    /// first signing.
    earned_at: Option<SystemTime>,
    /// Records were signed since the caller last charged the budget.
    signed: bool,
    /// Room for the unsigned reply to a query wildcard, which the signed one is made from;
    /// empty until the first query wildcard needs it.
    unsigned: Vec<u8>,
}

impl Default for Signing {
    fn default() -> Signing {
        Signing::new()
    }
}

impl Signing {
    /// An empty cache with a whole burst of signing time; allocates nothing until a query
    /// needs records signed.
    pub fn new() -> Signing {
        Signing {
            denials: None,
            budget: BUDGET_BURST,
            earned_at: None,
            signed: false,
            unsigned: Vec::new(),
        }
    }

    /// Whether answers signed records since the last [`Signing::charge`]: the caller then
    /// charges the time it measured them taking.
    pub fn signed(&self) -> bool {
        self.signed
    }

    /// Charges the signing budget with `spent`, the time the answers that signed records took
    /// as the caller measured them (a batch of datagrams, a TCP message), when they did.
    pub fn charge(&mut self, spent: Duration) {
        if std::mem::take(&mut self.signed) {
            self.budget = self.budget.saturating_sub(spent);
        }
    }

    /// Adds the signing time earned since it was last counted: a wall clock set back earns
    /// nothing for the step, one set forward a burst at most.
    fn earn(&mut self, now: SystemTime) {
        if let Some(at) = self.earned_at {
            let elapsed = now.duration_since(at).unwrap_or_default();
            let earned = elapsed.mul_f64(BUDGET_PER_SECOND.as_secs_f64());
            self.budget = (self.budget + earned).min(BUDGET_BURST);
        }
        self.earned_at = Some(now);
    }

    /// Takes the room the unsigned reply to a query wildcard is written in, a whole message
    /// long; [`Signing::put_back`] returns it, so that the next one is not allocated again.
    pub(crate) fn take_unsigned(&mut self) -> Vec<u8> {
        let mut room = std::mem::take(&mut self.unsigned);
        room.resize(crate::wire::types::MAX_MESSAGE_LEN, 0);
        room
    }

    /// Returns the room [`Signing::take_unsigned`] took.
    pub(crate) fn put_back(&mut self, room: Vec<u8>) {
        self.unsigned = room;
    }

    /// Hands `write` the signed NSEC3 record covering the hash of `name` (lower-cased wire
    /// form) in the zone `apex` signed with `dnssec`, whose NSEC3 records live `ttl` seconds,
    /// from the cache or signed at `now`.
    pub fn covering(
        &mut self,
        dnssec: &Dnssec,
        apex: &Name,
        ttl: u32,
        name: &[u8],
        now: SystemTime,
        write: impl FnOnce(&Records),
    ) -> Covered {
        let hash = nsec3::hash_name(name);
        let make = |key: &SigningKey, validity| {
            let apex = apex.wire().to_ascii_lowercase();
            sign_covering(key, &apex, &hash, ttl, validity)
        };
        self.cached(dnssec, hash, now, make, write)
    }

    /// Hands `write` the records the cache keeps under `id` (the NSEC3 hash of a name; for
    /// anything else a SHA-1 digest of input that is not a name) while their signatures are
    /// good at `now`, or those `make` signs with `dnssec`'s key and a validity starting at
    /// `now`, within the budget; the cache keeps as many as `dnssec` says.
    pub fn cached(
        &mut self,
        dnssec: &Dnssec,
        id: Hash,
        now: SystemTime,
        make: impl FnOnce(&SigningKey, Validity) -> Option<Records>,
        write: impl FnOnce(&Records),
    ) -> Covered {
        let key = &dnssec.key;
        let capacity = dnssec.cache.max(1);
        let denials = match &mut self.denials {
            Some(denials) if denials.key == *key && denials.capacity == capacity => denials,
            other => other.insert(Denials::new(Arc::clone(key), capacity)),
        };
        if let Some(records) = denials.get(&id, now) {
            write(records);
            return Covered::Written;
        }
        self.earn(now);
        if self.budget.is_zero() {
            return Covered::OverBudget;
        }
        let validity = Validity::from(now);
        let Some(records) = make(key, validity) else {
            return Covered::Failed;
        };
        self.signed = true;
        write(&records);
        if let Some(denials) = &mut self.denials {
            denials.keep(id, records, validity);
        }
        Covered::Written
    }
}

/// The records signed per query name for one key, the oldest replaced first.
#[derive(Debug)]
struct Denials {
    /// The key they are signed with: another key (a rollover) empties the cache.
    key: Arc<SigningKey>,
    capacity: usize,
    by_hash: HashMap<Hash, usize>,
    /// Entries in the order they were made; the oldest is replaced first.
    ring: Vec<(Hash, Records, Validity)>,
    next: usize,
}

impl Denials {
    fn new(key: Arc<SigningKey>, capacity: usize) -> Denials {
        Denials {
            key,
            capacity,
            by_hash: HashMap::new(),
            ring: Vec::new(),
            next: 0,
        }
    }

    /// The records kept under `id`, unless their signatures are due to be made again at `now`.
    fn get(&self, id: &Hash, now: SystemTime) -> Option<&Records> {
        let &at = self.by_hash.get(id)?;
        let (_, records, validity) = &self.ring[at];
        (!validity.due(now)).then_some(records)
    }

    fn keep(&mut self, hash: Hash, records: Records, validity: Validity) {
        if let Some(&at) = self.by_hash.get(&hash) {
            self.ring[at] = (hash, records, validity);
            return;
        }
        if self.ring.len() < self.capacity {
            self.by_hash.insert(hash, self.ring.len());
            self.ring.push((hash, records, validity));
            return;
        }
        let at = self.next;
        self.next = (self.next + 1) % self.capacity;
        let (old, _, _) = self.ring[at];
        self.by_hash.remove(&old);
        self.by_hash.insert(hash, at);
        self.ring[at] = (hash, records, validity);
    }
}

/// The NSEC3 record of the zone `apex` covering `hash`, signed.
fn sign_covering(key: &SigningKey, apex: &[u8], hash: &Hash, ttl: u32, validity: Validity) -> Option<Records> {
    let (owner, rdata) = nsec3::covering(hash);
    let set = Set {
        section: 1,
        owner: nsec3::owner(&owner, apex),
        rtype: nsec3::NSEC3,
        ttl,
        rdatas: vec![rdata],
    };
    let mut rdatas = set.rdatas.clone();
    let rrsig = rrsig::sign(key, &set.owner, set.rtype, set.ttl, &mut rdatas, validity)?;
    let mut bytes = Vec::with_capacity(2 * (set.owner.len() + 10) + set.rdatas[0].len() + rrsig.len());
    write_rr(&mut bytes, &set.owner, &[], set.rtype, set.ttl, &set.rdatas[0]);
    write_rr(&mut bytes, &set.owner, &[], rrsig::RRSIG, set.ttl, &rrsig);
    Some(Records {
        chunks: Box::new([Chunk {
            end: bytes.len() as u32,
            count: 2,
            section: Section::Authority,
        }]),
        bytes: bytes.into_boxed_slice(),
    })
}
