//! The response cache of one worker: upstream answers, positive and negative (RFC 2308), served
//! with TTLs counted down, kept past their lifetime for serve-stale (RFC 8767), within a hard
//! memory bound.
//!
//! Each worker owns its cache: a hit takes no lock and touches no cache line another core
//! writes, and is a hash lookup plus a copy, like an authoritative answer. The price is that
//! workers do not share entries; SO_REUSEPORT keeps a client's flow on one worker, so a client
//! mostly finds what it asked before.
//!
//! Eviction is S3-FIFO (Yang et al., SOSP 2023): new entries enter a small FIFO (a tenth of the
//! memory); those asked for again before they leave it move to the main FIFO, the rest leave a
//! hash in a ghost FIFO so that a quick return goes straight to main. A scan of names asked once
//! only churns the small FIFO and never pushes out the popular names in main.

mod entry;
mod index;
mod memo;
mod rdata;

pub use entry::{Age, Entry, RecordsError, Relocation, TtlCaps, Written, STALE_TTL};
pub use memo::{Asked, Memo, PLAIN_OPT_LEN};

use crate::wire::name::{is_within, name_hash, same_wire};
use crate::wire::types::MAX_NAME_LEN;
use crate::wire::{LowerName, Name};
use index::Index;
use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

/// Bytes of a key before the name: qtype, qclass, flag bits.
const KEY_PREFIX_LEN: usize = 5;
/// Longest key.
const KEY_MAX_LEN: usize = KEY_PREFIX_LEN + MAX_NAME_LEN;
/// Key flag bit: the client set DO, so the answer carries DNSSEC records.
const KEY_DO: u8 = 1;
/// Key flag bit: the client set CD, so the answer was not validated upstream.
const KEY_CD: u8 = 2;
/// Highest access count kept per entry (S3-FIFO uses two bits).
const MAX_FREQ: u8 = 3;
/// Share of the memory bound held by the small FIFO, in tenths.
const SMALL_TENTHS: usize = 1;
/// Bookkeeping per entry beyond its key and records: its slot, its queue entries, and the
/// index's 16-byte buckets, of which a table at most half full holds two to four per entry.
const ENTRY_OVERHEAD: usize = std::mem::size_of::<Stored>() + 64;
/// What a [`Memo`] adds to its entry's cost: the memo, its allocation's header, and its bits
/// in the filter.
const MEMO_COST: usize = std::mem::size_of::<Memo>() + 16 + 8;
/// A refresh (prefetch or stale recheck) of one name starts at most this often.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// Entries with a shorter lifetime are not prefetched: refreshing them would cost more than
/// the misses it saves.
const PREFETCH_MIN_LIFETIME: u32 = 10;
/// Hits an entry needs before it is worth prefetching.
const PREFETCH_MIN_HITS: u32 = 2;

/// Cache limits. Defaults: 16 MiB, TTLs capped at a day, negative answers at an hour and at
/// 5 s in `cluster.local.`, served stale for up to a day, prefetch on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// Memory bound of this cache, keys and records included.
    pub max_bytes: usize,
    /// Lowest lifetime given to a positive answer.
    pub min_ttl: u32,
    /// Highest lifetime given to a positive answer.
    pub max_ttl: u32,
    /// Highest lifetime given to a negative answer.
    pub negative_max_ttl: u32,
    /// Lower negative caps for names in given zones (the most specific zone wins): names of a
    /// cluster appear and disappear quickly, so their absence must not be remembered long.
    pub negative_zone_caps: Vec<(Name, u32)>,
    /// How long past its lifetime an entry may still be served when upstreams fail (RFC 8767
    /// §5 suggests 1 to 3 days); 0 turns serve-stale off.
    pub stale_for: u32,
    /// Refresh popular entries shortly before they expire, so that they never miss.
    pub prefetch: bool,
    /// Lower positive caps for names in given zones (the most specific zone wins); 0 keeps the
    /// zone's answers out of the cache (CoreDNS `disable success`).
    pub success_zone_caps: Vec<(Name, u32)>,
    /// Answer from the cache with the TTLs as received instead of counting them down (CoreDNS
    /// `keepttl`, for clients that do their own caching behind this one).
    pub keep_ttl: bool,
}

impl Default for CacheConfig {
    fn default() -> CacheConfig {
        CacheConfig {
            max_bytes: 16 << 20,
            min_ttl: 0,
            max_ttl: 86_400,
            negative_max_ttl: 3_600,
            negative_zone_caps: vec![(Name::from_dotted("cluster.local.").unwrap_or_else(|_| Name::root()), 5)],
            stale_for: 86_400,
            prefetch: true,
            success_zone_caps: Vec::new(),
            keep_ttl: false,
        }
    }
}

/// A cache key on the stack: qtype, qclass, the DO and CD bits, and the lower-cased name, so
/// that `WWW.Example.` and `www.example.` share an entry and DNSSEC answers do not mix with
/// plain ones.
#[derive(Clone)]
pub struct Key {
    bytes: [u8; KEY_MAX_LEN],
    len: u16,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("qtype", &self.qtype())
            .field("name", &self.name_wire())
            .finish()
    }
}

impl Key {
    /// The key of a question.
    pub fn new(qname: &LowerName, qtype: u16, qclass: u16, dnssec_ok: bool, checking_disabled: bool) -> Key {
        let mut bytes = [0u8; KEY_MAX_LEN];
        bytes[0..2].copy_from_slice(&qtype.to_be_bytes());
        bytes[2..4].copy_from_slice(&qclass.to_be_bytes());
        bytes[4] = if dnssec_ok { KEY_DO } else { 0 } | if checking_disabled { KEY_CD } else { 0 };
        let name = qname.wire();
        bytes[KEY_PREFIX_LEN..KEY_PREFIX_LEN + name.len()].copy_from_slice(name);
        Key {
            bytes,
            len: (KEY_PREFIX_LEN + name.len()) as u16,
        }
    }

    /// The key as bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The lower-cased question name in wire form.
    pub fn name_wire(&self) -> &[u8] {
        &self.bytes()[KEY_PREFIX_LEN..]
    }

    /// Query type.
    pub fn qtype(&self) -> u16 {
        u16::from_be_bytes([self.bytes[0], self.bytes[1]])
    }

    /// Query class.
    pub fn qclass(&self) -> u16 {
        u16::from_be_bytes([self.bytes[2], self.bytes[3]])
    }

    /// Whether the question asks for DNSSEC records (DO).
    pub fn dnssec_ok(&self) -> bool {
        self.bytes[4] & KEY_DO != 0
    }

    /// Whether the question disables validation (CD).
    pub fn checking_disabled(&self) -> bool {
        self.bytes[4] & KEY_CD != 0
    }

    /// The key as a [`KeyRef`].
    pub fn key_ref(&self) -> KeyRef<'_> {
        KeyRef::from_bytes(self.bytes())
    }
}

/// A key looked up without being assembled: its type, class and flag bits, and the name where
/// it already is (the query's folded name), so that a hit copies nothing to find its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef<'a> {
    prefix: [u8; KEY_PREFIX_LEN],
    name: &'a [u8],
    /// [`name_hash`] of the name: a query's comes with its name, read once.
    name_hash: u64,
}

impl<'a> KeyRef<'a> {
    /// The key of a question.
    pub fn new(qname: &'a LowerName, qtype: u16, qclass: u16, dnssec_ok: bool, checking_disabled: bool) -> KeyRef<'a> {
        let [t0, t1] = qtype.to_be_bytes();
        let [c0, c1] = qclass.to_be_bytes();
        let bits = if dnssec_ok { KEY_DO } else { 0 } | if checking_disabled { KEY_CD } else { 0 };
        KeyRef {
            prefix: [t0, t1, c0, c1, bits],
            name: qname.wire(),
            name_hash: qname.hash(),
        }
    }

    /// A key given as bytes (as [`Key::bytes`] lays them out).
    pub fn from_bytes(bytes: &'a [u8]) -> KeyRef<'a> {
        let mut prefix = [0u8; KEY_PREFIX_LEN];
        let cut = bytes.len().min(KEY_PREFIX_LEN);
        prefix[..cut].copy_from_slice(&bytes[..cut]);
        let name = &bytes[cut..];
        KeyRef {
            prefix,
            name,
            name_hash: name_hash(name),
        }
    }

    /// The owned key, for a question that goes upstream.
    pub fn to_key(&self) -> Key {
        let mut bytes = [0u8; KEY_MAX_LEN];
        let len = KEY_PREFIX_LEN + self.name.len().min(MAX_NAME_LEN);
        bytes[..KEY_PREFIX_LEN].copy_from_slice(&self.prefix);
        bytes[KEY_PREFIX_LEN..len].copy_from_slice(&self.name[..len - KEY_PREFIX_LEN]);
        Key { bytes, len: len as u16 }
    }

    #[inline(always)]
    fn matches(&self, stored: &[u8]) -> bool {
        stored
            .split_first_chunk::<KEY_PREFIX_LEN>()
            .is_some_and(|(prefix, name)| *prefix == self.prefix && same_wire(name, self.name))
    }
}

/// An entry found for a question.
#[derive(Debug)]
pub struct Hit<'a> {
    /// The cached response.
    pub entry: &'a Entry,
    /// How to rewrite its TTLs.
    pub age: Age,
    /// The entry should be refreshed from upstream now (prefetch, or the once-per-interval
    /// recheck of a name served stale); the cache has noted that a refresh started.
    pub refresh: bool,
}

/// The result of a lookup.
#[derive(Debug)]
pub enum Lookup<'a> {
    /// Within its lifetime.
    Fresh(Hit<'a>),
    /// Past its lifetime, within the stale window.
    Stale(Hit<'a>),
    /// Nothing usable.
    Miss,
}

/// What an insertion did, for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Inserted {
    /// The entry was stored (it may have replaced an older one).
    pub stored: bool,
    /// Entries evicted to make room.
    pub evicted: u64,
}

#[derive(Debug)]
struct Stored {
    key: Box<[u8]>,
    hash: u64,
    entry: Entry,
    /// Accesses since the entry entered its current queue, up to [`MAX_FREQ`].
    freq: u8,
    in_main: bool,
    /// Past its stale window: kept only until its queue reaches it.
    dead: bool,
    hits: u32,
    /// When the entry was stored, in [`Clock`] nanoseconds.
    stored_at: i64,
    /// When a refresh was last started, in [`Clock`] nanoseconds.
    last_refresh: Option<i64>,
    cost: usize,
    /// The reply made from the entry for one exact query, to replay (see [`Cache::replay`]).
    memo: Option<Box<Memo>>,
}

impl Stored {
    /// Whether a fresh hit `age` seconds after the entry was stored, counted among its hits,
    /// should start a prefetch at `now`: near the end of a lifetime worth refreshing, for an
    /// entry asked more than once, once per [`REFRESH_INTERVAL`].
    #[inline(always)]
    fn prefetch_due(&self, age: u64, now: i64) -> bool {
        let lifetime = self.entry.lifetime();
        let remaining = u64::from(lifetime).saturating_sub(age);
        remaining * 10 <= u64::from(lifetime)
            && self.hits.saturating_add(1) >= PREFETCH_MIN_HITS
            && lifetime >= PREFETCH_MIN_LIFETIME
            && refresh_due(self.last_refresh, now)
    }
}

/// The age a fresh hit `age` seconds after its entry was stored is served at: none with
/// `keep_ttl` (CoreDNS `keepttl`).
#[inline(always)]
fn fresh_age(age: u64, keep_ttl: bool) -> Age {
    Age::Fresh(if keep_ttl { 0 } else { age as u32 })
}

/// Whether a refresh last started at `last_refresh` leaves another due at `now`.
#[inline(always)]
fn refresh_due(last_refresh: Option<i64>, now: i64) -> bool {
    last_refresh.is_none_or(|at| now.saturating_sub(at) >= REFRESH_INTERVAL.as_nanos() as i64)
}

/// Times as signed nanoseconds from the cache's creation, read once per distinct `now`. A hit
/// needs the entry's age in seconds; subtracting two `Instant`s and converting the `Duration`
/// cost a hit more than a hundred instructions, one integer subtraction and division of
/// nanoseconds a handful. Every query of a worker's batch shares one `now`, so the
/// conversion of `now` is paid once a batch.
#[derive(Debug, Clone, Copy)]
struct Clock {
    epoch: Instant,
    last: (Instant, i64),
}

impl Clock {
    fn new(epoch: Instant) -> Clock {
        Clock {
            epoch,
            last: (epoch, 0),
        }
    }

    /// `at` in nanoseconds from the epoch; negative before it.
    fn nanos(&self, at: Instant) -> i64 {
        let since = |later: Instant, earlier: Instant| {
            i64::try_from(later.saturating_duration_since(earlier).as_nanos()).unwrap_or(i64::MAX)
        };
        if at >= self.epoch {
            since(at, self.epoch)
        } else {
            -since(self.epoch, at)
        }
    }

    /// As [`Clock::nanos`], remembering the answer for the next call with the same `now`.
    #[inline(always)]
    fn now(&mut self, now: Instant) -> i64 {
        if self.last.0 != now {
            self.last = (now, self.nanos(now));
        }
        self.last.1
    }
}

/// Whole seconds from `earlier` to `later` (nanoseconds), zero when `later` is not later: what
/// `later.saturating_duration_since(earlier).as_secs()` says of the same instants. Both are
/// readings of one clock, years from its epoch at most, so their difference never wraps.
#[inline(always)]
fn seconds_between(earlier: i64, later: i64) -> u64 {
    u64::try_from(later.wrapping_sub(earlier)).map_or(0, |nanos| nanos / 1_000_000_000)
}

/// One worker's response cache.
#[derive(Debug)]
pub struct Cache {
    config: CacheConfig,
    /// This cache's secret: the keys' hashes are keyed with it (see [`Cache::hash`]).
    secret: [u64; 2],
    /// The slot of each key's hash.
    index: Index,
    slots: Vec<Option<Stored>>,
    free: Vec<u32>,
    small: VecDeque<u32>,
    main: VecDeque<u32>,
    ghost: VecDeque<u64>,
    ghosts: HashSet<u64, PreHashed>,
    bytes: usize,
    small_bytes: usize,
    /// Entries whose answer is negative (NXDOMAIN, NODATA), for the metrics' `denial` kind.
    denials: usize,
    /// Entries with a [`Memo`].
    memos: usize,
    /// Entries evicted to make room for memos, not yet counted (see
    /// [`Cache::take_memo_evictions`]).
    memo_evictions: u64,
    /// The names that may have a memo.
    filter: memo::Filter,
    clock: Clock,
}

impl Cache {
    /// An empty cache bounded by `config`.
    pub fn new(config: CacheConfig) -> Cache {
        Cache {
            config,
            secret: {
                let random = foldhash::fast::RandomState::default();
                [random.hash_one(0u64), random.hash_one(1u64) | 1]
            },
            index: Index::default(),
            slots: Vec::new(),
            free: Vec::new(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghost: VecDeque::new(),
            ghosts: HashSet::default(),
            bytes: 0,
            small_bytes: 0,
            denials: 0,
            memos: 0,
            memo_evictions: 0,
            filter: memo::Filter::default(),
            clock: Clock::new(Instant::now()),
        }
    }

    /// The limits in force.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// Puts `config` in force: entries already stored keep the lifetimes they were given, and
    /// are evicted down to a smaller memory bound at once. Returns how many were evicted.
    pub fn reconfigure(&mut self, config: CacheConfig) -> u64 {
        self.config = config;
        self.evict()
    }

    /// Entries held (stale ones included).
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Entries held whose answer is negative (NXDOMAIN, NODATA), stale ones included.
    pub fn denials(&self) -> usize {
        self.denials
    }

    /// Bytes accounted against the memory bound.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The TTL caps for an answer about the lower-cased wire name `name`.
    pub fn caps_for(&self, name: &[u8]) -> TtlCaps {
        let zone_cap = |caps: &[(Name, u32)]| {
            caps.iter()
                .filter(|(zone, _)| is_within(name, zone.wire()))
                .max_by_key(|(zone, _)| zone.wire().len())
                .map(|&(_, cap)| cap)
        };
        let max =
            zone_cap(&self.config.success_zone_caps).map_or(self.config.max_ttl, |cap| cap.min(self.config.max_ttl));
        TtlCaps {
            min: self.config.min_ttl.min(max),
            max,
            negative_max: zone_cap(&self.config.negative_zone_caps).map_or(self.config.negative_max_ttl, |cap| {
                cap.min(self.config.negative_max_ttl)
            }),
        }
    }

    /// The hash of a key: its name's hash (a query's is computed as its name is read) and its
    /// other fields, keyed with this cache's secret. The names are the clients': the name hash
    /// is seeded with keys drawn at start, and the rest is keyed with a secret multiplier, so
    /// where a key lands cannot be foreseen and no client can pile keys into one probe sequence.
    #[inline(always)]
    fn hash(&self, key: KeyRef<'_>) -> u64 {
        let mut prefix = [0u8; 8];
        prefix[..KEY_PREFIX_LEN].copy_from_slice(&key.prefix);
        let mixed = key.name_hash ^ u64::from_le_bytes(prefix).rotate_left(29) ^ self.secret[0];
        let product = u128::from(mixed) * u128::from(self.secret[1]);
        (product as u64) ^ ((product >> 64) as u64)
    }

    /// Looks `key` up at time `now`. A fresh entry counts as a hit for eviction; a stale one is
    /// returned only inside the stale window. `upstreams_down` says the entry would be served
    /// stale because no upstream can be asked, which is when a stale recheck is due.
    #[inline(always)]
    pub fn lookup(&mut self, key: KeyRef<'_>, now: Instant, upstreams_down: bool) -> Lookup<'_> {
        let now = self.clock.now(now);
        let hash = self.hash(key);
        let Some(slot) = self.index.get(hash) else {
            return Lookup::Miss;
        };
        let stale_for = u64::from(self.config.stale_for);
        let prefetch = self.config.prefetch;
        let keep_ttl = self.config.keep_ttl;
        let Some(stored) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return Lookup::Miss;
        };
        if stored.dead || !key.matches(&stored.key) {
            return Lookup::Miss;
        }
        let age = seconds_between(stored.stored_at, now);
        let lifetime = u64::from(stored.entry.lifetime());
        if age < lifetime {
            let refresh = prefetch && stored.prefetch_due(age, now);
            stored.freq = (stored.freq + 1).min(MAX_FREQ);
            stored.hits = stored.hits.saturating_add(1);
            if refresh {
                stored.last_refresh = Some(now);
            }
            return Lookup::Fresh(Hit {
                entry: &stored.entry,
                age: fresh_age(age, keep_ttl),
                refresh,
            });
        }
        if age < lifetime + stale_for {
            let refresh = upstreams_down && refresh_due(stored.last_refresh, now);
            if refresh {
                stored.last_refresh = Some(now);
            }
            return Lookup::Stale(Hit {
                entry: &stored.entry,
                age: Age::Stale,
                refresh,
            });
        }
        stored.dead = true;
        Lookup::Miss
    }

    /// Whether some entry holds a [`Memo`]: until one does, no query need look for one.
    #[inline(always)]
    pub fn has_memos(&self) -> bool {
        self.memos > 0
    }

    /// Whether a name whose [`name_hash`] is `name_hash` may have a [`Memo`]: a name answered
    /// from the zones, which has none, learns it from one bit, and needs no [`Cache::replay`].
    #[inline(always)]
    pub fn may_replay(&self, name_hash: u64) -> bool {
        self.filter.may_hold(name_hash)
    }

    /// The fresh entry of `key` with its age and memo, counted as a hit as [`Cache::lookup`]
    /// counts one, when its memo passes `fits` and this hit would start no prefetch: a
    /// prefetch, a stale entry or a memo that does not fit are left to [`Cache::lookup`],
    /// which this call has then changed nothing for.
    #[inline(always)]
    pub fn replay(
        &mut self,
        key: KeyRef<'_>,
        now: Instant,
        fits: impl FnOnce(&Memo) -> bool,
    ) -> Option<(&Entry, Age, &Memo)> {
        let slot = self.index.get(self.hash(key))?;
        let now = self.clock.now(now);
        let prefetch = self.config.prefetch;
        let keep_ttl = self.config.keep_ttl;
        let stored = self.slots.get_mut(slot as usize)?.as_mut()?;
        if stored.dead || !key.matches(&stored.key) || !stored.memo.as_deref().is_some_and(fits) {
            return None;
        }
        let age = seconds_between(stored.stored_at, now);
        if age >= u64::from(stored.entry.lifetime()) || (prefetch && stored.prefetch_due(age, now)) {
            return None;
        }
        stored.freq = (stored.freq + 1).min(MAX_FREQ);
        stored.hits = stored.hits.saturating_add(1);
        Some((&stored.entry, fresh_age(age, keep_ttl), stored.memo.as_deref()?))
    }

    /// The fresh entry of `key` and its age, when it has no memo made under `stamp` and should
    /// be given one: what the reply just made from it is checked against before
    /// [`Cache::remember`] keeps it. Counts nothing.
    pub fn memo_wanted(&self, key: KeyRef<'_>, now: Instant, stamp: u64) -> Option<(&Entry, Age)> {
        let stored = self.slots[self.live_slot(key)?].as_ref()?;
        if stored.memo.as_ref().is_some_and(|memo| memo.stamp == stamp) {
            return None;
        }
        let age = seconds_between(stored.stored_at, self.clock.nanos(now));
        if age >= u64::from(stored.entry.lifetime()) {
            return None;
        }
        Some((&stored.entry, fresh_age(age, self.config.keep_ttl)))
    }

    /// The slot of `key`'s entry, when it holds one that is not past its stale window.
    fn live_slot(&self, key: KeyRef<'_>) -> Option<usize> {
        let slot = self.index.get(self.hash(key))? as usize;
        let stored = self.slots.get(slot)?.as_ref()?;
        (!stored.dead && key.matches(&stored.key)).then_some(slot)
    }

    /// Keeps `memo` with the entry of `key`, in place of an older one. A first memo adds to the
    /// entry's cost, and entries are evicted down to the memory bound (counted by
    /// [`Cache::take_memo_evictions`]).
    pub fn remember(&mut self, key: KeyRef<'_>, memo: Memo) {
        let Some(stored) = self.live_slot(key).and_then(|slot| self.slots[slot].as_mut()) else {
            return;
        };
        // A memo in place of another costs nothing more, and its name is in the filter already.
        if stored.memo.replace(Box::new(memo)).is_some() {
            return;
        }
        stored.cost += MEMO_COST;
        self.bytes += MEMO_COST;
        if !stored.in_main {
            self.small_bytes += MEMO_COST;
        }
        self.memos += 1;
        if self.filter.note(key.name_hash) {
            let names = self
                .slots
                .iter()
                .flatten()
                .filter(|stored| stored.memo.is_some())
                .map(|stored| name_hash(stored.key.get(KEY_PREFIX_LEN..).unwrap_or_default()));
            self.filter = memo::Filter::rebuilt(self.memos, names);
        }
        self.memo_evictions += self.evict();
    }

    /// Entries evicted to make room for memos since the last call: the worker adds them to its
    /// eviction counter once a turn.
    pub fn take_memo_evictions(&mut self) -> u64 {
        std::mem::take(&mut self.memo_evictions)
    }

    /// Whether `key` has an entry that [`Cache::lookup`] would return now, fresh or stale.
    pub fn can_serve(&self, key: KeyRef<'_>, now: Instant) -> bool {
        let Some(stored) = self
            .index
            .get(self.hash(key))
            .and_then(|slot| self.slots.get(slot as usize))
            .and_then(Option::as_ref)
        else {
            return false;
        };
        let age = seconds_between(stored.stored_at, self.clock.nanos(now));
        !stored.dead
            && key.matches(&stored.key)
            && age < u64::from(stored.entry.lifetime()) + u64::from(self.config.stale_for)
    }

    /// Stores `entry` under `key`, replacing what was there, unless it must not be cached (a
    /// zero lifetime, or larger than the whole cache). Evicts until the memory bound holds.
    pub fn insert(&mut self, key: &[u8], entry: Entry) -> Inserted {
        let cost = key.len() + entry.heap_bytes() + ENTRY_OVERHEAD;
        if entry.lifetime() == 0 || cost > self.config.max_bytes {
            return Inserted::default();
        }
        let hash = self.hash(KeyRef::from_bytes(key));
        let stored_at = self.clock.nanos(entry.stored());
        if let Some(slot) = self.index.get(hash) {
            if let Some(stored) = self.slots[slot as usize].as_mut() {
                let (old, in_main) = (stored.cost, stored.in_main);
                self.denials =
                    self.denials + usize::from(entry.is_negative()) - usize::from(stored.entry.is_negative());
                stored.key = key.into();
                stored.stored_at = stored_at;
                stored.entry = entry;
                stored.dead = false;
                stored.cost = cost;
                stored.last_refresh = None;
                if stored.memo.take().is_some() {
                    self.memos -= 1;
                }
                self.bytes = self.bytes - old + cost;
                if !in_main {
                    self.small_bytes = self.small_bytes - old + cost;
                }
                return Inserted {
                    stored: true,
                    evicted: self.evict(),
                };
            }
        }
        let in_main = self.ghosts.remove(&hash);
        self.denials += usize::from(entry.is_negative());
        let stored = Stored {
            key: key.into(),
            hash,
            entry,
            freq: 0,
            in_main,
            dead: false,
            hits: 0,
            stored_at,
            last_refresh: None,
            cost,
            memo: None,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(stored);
                slot
            }
            None => {
                self.slots.push(Some(stored));
                (self.slots.len() - 1) as u32
            }
        };
        self.index.set(hash, slot);
        self.bytes += cost;
        if in_main {
            self.main.push_back(slot);
        } else {
            self.small.push_back(slot);
            self.small_bytes += cost;
        }
        Inserted {
            stored: true,
            evicted: self.evict(),
        }
    }

    /// Evicts until the memory bound holds; returns how many entries left.
    fn evict(&mut self) -> u64 {
        let mut evicted = 0;
        let small_share = self.config.max_bytes / 10 * SMALL_TENTHS;
        while self.bytes > self.config.max_bytes {
            let progressed = if self.small_bytes > small_share || self.main.is_empty() {
                self.evict_small(&mut evicted)
            } else {
                self.evict_main(&mut evicted)
            };
            if !progressed {
                break;
            }
        }
        evicted
    }

    /// Takes the oldest entry of the small FIFO: asked again → main, else out (its hash to the
    /// ghost FIFO).
    fn evict_small(&mut self, evicted: &mut u64) -> bool {
        let Some(slot) = self.small.pop_front() else {
            return self.evict_main(evicted);
        };
        let Some(stored) = self.slots[slot as usize].as_mut() else {
            return true;
        };
        self.small_bytes -= stored.cost;
        if stored.freq > 0 && !stored.dead {
            stored.freq = 0;
            stored.in_main = true;
            self.main.push_back(slot);
        } else {
            let hash = stored.hash;
            self.remove(slot);
            self.remember_ghost(hash);
            *evicted += 1;
        }
        true
    }

    /// Takes the oldest entry of the main FIFO: asked since its last turn → another turn with
    /// one access less, else out.
    fn evict_main(&mut self, evicted: &mut u64) -> bool {
        let Some(slot) = self.main.pop_front() else {
            return false;
        };
        let Some(stored) = self.slots[slot as usize].as_mut() else {
            return true;
        };
        if stored.freq > 0 && !stored.dead {
            stored.freq -= 1;
            self.main.push_back(slot);
        } else {
            self.remove(slot);
            *evicted += 1;
        }
        true
    }

    fn remove(&mut self, slot: u32) {
        if let Some(stored) = self.slots[slot as usize].take() {
            self.bytes -= stored.cost;
            self.denials -= usize::from(stored.entry.is_negative());
            self.memos -= usize::from(stored.memo.is_some());
            self.index.remove(stored.hash, slot);
            self.free.push(slot);
        }
    }

    /// Remembers an evicted hash, as many as there are entries (S3-FIFO sizes the ghost FIFO
    /// like the main one).
    fn remember_ghost(&mut self, hash: u64) {
        if self.ghosts.insert(hash) {
            self.ghost.push_back(hash);
        }
        let cap = self.index.len().max(64);
        while self.ghost.len() > cap {
            if let Some(old) = self.ghost.pop_front() {
                self.ghosts.remove(&old);
            }
        }
    }
}

/// Hashes `u64` keys that already are well-mixed hashes by passing them through.
#[derive(Debug, Clone, Copy, Default)]
struct PreHashed;

impl BuildHasher for PreHashed {
    type Hasher = PassThrough;
    fn build_hasher(&self) -> PassThrough {
        PassThrough(0)
    }
}

/// The hasher of [`PreHashed`].
#[derive(Debug)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[cfg(test)]
mod tests;
