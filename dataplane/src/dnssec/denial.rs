//! What a signed reply holds that depends on the query name, signed when a query needs it: the
//! NSEC3 record covering the hash of the next closer name of a denial (RFC 5155 §7.2.1), and the
//! records of the answer to a query wildcard (`*` or `any` labels). Each worker keeps the ones
//! it made in a bounded cache (`--scache`) and spends at most a tenth of its time making them,
//! so that a flood of random names cannot starve its other queries.

use super::nsec3::{self, Hash};
use super::records::Set;
use super::rrsig::{self, Validity};
use super::zone::{write_rr, Chunk, Records, Section, Signed};
use super::SigningKey;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

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

/// One worker's records signed per query name.
struct Denials {
    /// The key they are signed with: another key (a rollover) empties the cache.
    key: Arc<SigningKey>,
    capacity: usize,
    by_hash: HashMap<Hash, usize>,
    /// Entries in the order they were made; the oldest is replaced first.
    ring: Vec<(Hash, Records, Validity)>,
    next: usize,
    /// Signing time left to spend.
    budget: Duration,
    earned_at: Instant,
}

thread_local! {
    /// Each worker thread's own cache: workers share nothing on the query path.
    static DENIALS: RefCell<Option<Denials>> = const { RefCell::new(None) };
}

/// Hands `write` the signed NSEC3 record covering the hash of `name` (lower-cased wire form)
/// in `signed`'s zone, from this thread's cache or signed now.
pub fn covering(signed: &Signed, name: &[u8], write: impl FnOnce(&Records)) -> Covered {
    let hash = nsec3::hash_name(name);
    let ttl = signed.negative_ttl();
    let make = |key: &SigningKey, validity| {
        let apex = signed.apex().wire().to_ascii_lowercase();
        sign_covering(key, &apex, &hash, ttl, validity)
    };
    cached(signed, hash, make, write)
}

/// Hands `write` the records this thread's cache keeps under `id` (the NSEC3 hash of a name;
/// for anything else a SHA-1 digest of input that is not a name), or those `make` signs now
/// with the zone's key and a validity starting now, within the worker's budget.
pub fn cached(
    signed: &Signed,
    id: Hash,
    make: impl FnOnce(&SigningKey, Validity) -> Option<Records>,
    write: impl FnOnce(&Records),
) -> Covered {
    DENIALS.with(|cell| {
        let mut cell = cell.borrow_mut();
        let key = signed.key();
        let fresh = cell
            .as_ref()
            .is_none_or(|d| d.key != *key || d.capacity != signed.dnssec().cache.max(1));
        if fresh {
            *cell = Some(Denials {
                key: Arc::clone(key),
                capacity: signed.dnssec().cache.max(1),
                by_hash: HashMap::new(),
                ring: Vec::new(),
                next: 0,
                budget: BUDGET_BURST,
                earned_at: Instant::now(),
            });
        }
        let Some(denials) = cell.as_mut() else {
            return Covered::Failed;
        };
        denials.cached(id, make, write)
    })
}

impl Denials {
    fn cached(
        &mut self,
        id: Hash,
        make: impl FnOnce(&SigningKey, Validity) -> Option<Records>,
        write: impl FnOnce(&Records),
    ) -> Covered {
        let now = SystemTime::now();
        if let Some(&at) = self.by_hash.get(&id) {
            let (_, records, validity) = &self.ring[at];
            if !validity.due(now) {
                write(records);
                return Covered::Written;
            }
        }
        let started = Instant::now();
        self.earn(started);
        if self.budget.is_zero() {
            return Covered::OverBudget;
        }
        let validity = Validity::from(now);
        let Some(records) = make(&self.key, validity) else {
            return Covered::Failed;
        };
        self.budget = self.budget.saturating_sub(started.elapsed());
        write(&records);
        self.keep(id, records, validity);
        Covered::Written
    }

    /// Adds the signing time earned since it was last counted.
    fn earn(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.earned_at);
        self.earned_at = now;
        let earned = elapsed.mul_f64(BUDGET_PER_SECOND.as_secs_f64());
        self.budget = (self.budget + earned).min(BUDGET_BURST);
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
