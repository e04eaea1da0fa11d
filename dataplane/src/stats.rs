//! Per-worker counters, summed only when scraped.
//!
//! Each worker owns one set of counters on its own cache line and is its only writer, so a count
//! is a relaxed load and store on a line no other core writes: no locked instruction and no
//! cache-line ping-pong on the query path. A scrape reads every worker's counters into
//! [`Totals`]; it may see one worker a few queries ahead of another, never a torn value.

use crate::answer::{Outcome, Reply, Transport};
use crate::io::{QueueStats, QueueTotals};
use crate::wire::types::{rcode, rtype};
use crate::wire::DropReason;
use crossbeam_utils::CachePadded;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Counts of everything a worker did, summed over all workers at scrape time. Every field
/// counts since the server started and only ever grows.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Requests by the client's address family, transport and question type: every message
    /// received, counted once its fate is known (answered, dropped, or left unanswered).
    pub requests: Requests,
    /// Receive calls that returned datagrams; UDP requests over `udp_batches` is the mean batch
    /// size, which shows how much each syscall is amortised.
    pub udp_batches: u64,
    /// Replies with rcode NOERROR (answers and NODATA).
    pub replies_noerror: u64,
    /// Replies with rcode NXDOMAIN.
    pub replies_nxdomain: u64,
    /// Replies with rcode SERVFAIL (zones not yet synced, answers too large even for TCP).
    pub replies_servfail: u64,
    /// Replies with rcode FORMERR (malformed queries).
    pub replies_formerr: u64,
    /// Replies with rcode NOTIMP (unsupported opcodes and meta types).
    pub replies_notimp: u64,
    /// Replies with rcode REFUSED (names outside every zone, unknown classes).
    pub replies_refused: u64,
    /// Replies with extended rcode BADVERS (EDNS version above 0).
    pub replies_badvers: u64,
    /// Replies with extended rcode BADCOOKIE (a UDP query whose server cookie is not this
    /// server's, RFC 7873 §5.2.3).
    pub replies_badcookie: u64,
    /// Replies with any other rcode.
    pub replies_other: u64,
    /// Replies sent with TC=1 because the answer did not fit the client's UDP size.
    pub truncated: u64,
    /// Messages dropped unanswered because they were shorter than a DNS header.
    pub dropped_too_short: u64,
    /// Messages dropped unanswered because they were responses (QR=1).
    pub dropped_response: u64,
    /// Queries that claimed answer or authority records, which were ignored.
    pub ignored_records: u64,
    /// Queries followed by trailing bytes, which were ignored.
    pub trailing_bytes: u64,
    /// Answers a pod's search list gave (autopath, docs/kubernetes.md "Autopath").
    pub autopath_success: u64,
    /// UDP replies dropped because the kernel refused them (send buffer full past the retries,
    /// unreachable peer).
    pub udp_send_failures: u64,
    /// Of `udp_send_failures`, the replies dropped because the send buffer stayed full past the
    /// retries; the rest were refused for their peer.
    pub udp_send_buffer_full: u64,
    /// Failed UDP receive calls other than "nothing waiting".
    pub udp_receive_errors: u64,
    /// TCP connections accepted and served.
    pub tcp_accepted: u64,
    /// TCP connections closed at once because the worker was at its connection cap.
    pub tcp_refused_full: u64,
    /// TCP connections closed at once because their client was at its per-client cap.
    pub tcp_refused_per_client: u64,
    /// Idle TCP connections closed to make room for a new one when slots ran out.
    pub tcp_evicted: u64,
    /// TCP connections closed because a message, a length prefix, or a reply stalled past the
    /// I/O timeout.
    pub tcp_io_timeouts: u64,
    /// TCP connections closed after the idle timeout.
    pub tcp_idle_timeouts: u64,
    /// Queries for names outside the zones answered from the cache (stale ones included), by
    /// what the answer says: [`CacheKind::Success`] (records), [`CacheKind::Denial`]
    /// (NXDOMAIN, NODATA or another failure rcode).
    pub cache_hits: [u64; 2],
    /// Answers served past their TTL because upstreams failed (RFC 8767).
    pub cache_stale_answers: u64,
    /// Queries for names outside the zones the cache could not answer: forwarded.
    pub cache_misses: u64,
    /// Background refreshes started: prefetches of popular entries, rechecks of stale ones,
    /// glue fetched for answers.
    pub cache_refreshes: u64,
    /// Of `cache_refreshes`, the prefetches: popular entries fetched again before they expire.
    pub cache_prefetches: u64,
    /// Upstream answers stored in the cache.
    pub cache_inserts: u64,
    /// Entries evicted to keep the cache within its memory bound.
    pub cache_evictions: u64,
    /// Entries held now, all workers together, by [`CacheKind`] (a gauge).
    pub cache_entries: [u64; 2],
    /// Bytes held now against the memory bound, all workers together (a gauge).
    pub cache_bytes: u64,
    /// Queries sent to upstreams (each try, each TCP retry, each probe).
    pub upstream_queries: u64,
    /// Truncated upstream answers asked again over TCP.
    pub upstream_tcp_retries: u64,
    /// Persistent upstream connections opened, plain TCP `[0]` and TLS `[1]`.
    pub upstream_conn_opened: [u64; 2],
    /// Upstream tries that went on a persistent connection already open, plain TCP `[0]` and
    /// TLS `[1]`.
    pub upstream_conn_reused: [u64; 2],
    /// Upstream tries sent again because the upstream closed their connection after answering
    /// on it.
    pub upstream_resent: u64,
    /// Upstream tries that timed out.
    pub upstream_timeouts: u64,
    /// Upstream tries that failed outright (refused, reset, socket errors).
    pub upstream_errors: u64,
    /// Upstream answers with a failure rcode or unreadable records.
    pub upstream_bad_answers: u64,
    /// Datagrams on upstream sockets dropped because their ID (or QR) did not match the query.
    pub upstream_mismatched_id: u64,
    /// Datagrams on upstream sockets dropped because their question did not match the query's.
    pub upstream_mismatched_question: u64,
    /// Health probes sent to down upstreams.
    pub upstream_probes: u64,
    /// Times an upstream was marked down after repeated failures.
    pub upstreams_marked_down: u64,
    /// Health probes sent while every upstream of their route was down: grows for as long as
    /// a route has no upstream left.
    pub upstreams_all_down: u64,
    /// Client questions merged into an identical one already in flight (single-flight).
    pub forward_merged: u64,
    /// Client questions refused at once because too many were in flight.
    pub forward_busy: u64,
    /// Client questions refused at once because their client had its share of the questions
    /// in flight (`max_in_flight_per_client`).
    pub forward_client_limited: u64,
    /// Questions for names outside the zones refused (EDE 18, Prohibited) because the client
    /// is outside the recursion ACL.
    pub recursion_refused: u64,
    /// Forwarded questions whose clients got SERVFAIL because no upstream answered usably.
    pub forward_failures: u64,
    /// Stub-zone queries dropped because they carried the SkyDNS loop guard.
    pub stub_loops_dropped: u64,
    /// dnstap messages written to the reader.
    pub dnstap_sent: u64,
    /// dnstap messages lost: a worker's queue was full (a slow or absent reader), or the
    /// writer could not write them.
    pub dnstap_dropped: u64,
    /// Query-log lines written.
    pub query_log_lines: u64,
    /// Query-log lines left out: past the rate limit, or their queue was full.
    pub query_log_suppressed: u64,
    /// UDP replies over the rate limit, not sent.
    pub rrl_dropped: u64,
    /// UDP replies over the rate limit, sent truncated with no records ("slipped").
    pub rrl_slipped: u64,
    /// How long replies took, from the query's arrival (the receive call that returned it) to
    /// the reply's send, in [`DURATION_BOUNDS`] buckets.
    pub request_duration: Histogram<DURATION_SLOTS>,
    /// Sizes of the queries received, UDP then TCP, in [`SIZE_BOUNDS`] buckets.
    pub request_size: [Histogram<SIZE_SLOTS>; 2],
    /// Sizes of the replies sent, UDP then TCP.
    pub response_size: [Histogram<SIZE_SLOTS>; 2],
}

/// Upper bounds of the duration buckets, in nanoseconds: 10 µs doubling up to about 5 s, then
/// the `+Inf` slot. Fine at the bottom, where answers from the snapshot and the cache fall.
pub const DURATION_BOUNDS: [u64; DURATION_SLOTS - 1] = {
    let mut bounds = [0; DURATION_SLOTS - 1];
    let mut i = 0;
    while i < bounds.len() {
        bounds[i] = 10_000 << i;
        i += 1;
    }
    bounds
};

/// Duration buckets, `+Inf` included.
pub const DURATION_SLOTS: usize = 21;

/// Upper bounds of the size buckets, in bytes: CoreDNS's, so that its dashboards read them.
pub const SIZE_BOUNDS: [u64; SIZE_SLOTS - 1] = [
    0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16000, 32000, 48000, 64000,
];

/// Size buckets, `+Inf` included.
pub const SIZE_SLOTS: usize = 15;

/// A histogram as scraped: observations per bucket (not cumulative; the last is `+Inf`) and
/// their sum (nanoseconds or bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Histogram<const S: usize> {
    /// Observations that fell in each bucket.
    pub counts: [u64; S],
    /// The sum of the observed values.
    pub sum: u64,
}

impl<const S: usize> Default for Histogram<S> {
    fn default() -> Histogram<S> {
        Histogram { counts: [0; S], sum: 0 }
    }
}

impl<const S: usize> Histogram<S> {
    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn add(&mut self, other: &Counts<S>) {
        for (total, slot) in self.counts.iter_mut().zip(&other.slots) {
            *total += slot.get();
        }
        self.sum += other.sum.get();
    }
}

/// A worker's histogram: a counter per bucket and one for the sum.
#[derive(Debug)]
pub(crate) struct Counts<const S: usize> {
    slots: [Counter; S],
    sum: Counter,
}

impl<const S: usize> Default for Counts<S> {
    fn default() -> Counts<S> {
        Counts {
            slots: std::array::from_fn(|_| Counter::default()),
            sum: Counter::default(),
        }
    }
}

impl<const S: usize> Counts<S> {
    /// Adds `n` observations of `value` to bucket `slot`.
    #[inline]
    fn observe(&self, slot: usize, value: u64, n: u64) {
        if let Some(counter) = self.slots.get(slot) {
            counter.add(n);
        }
        self.sum.add(value.wrapping_mul(n));
    }
}

/// The duration bucket of `elapsed`.
#[inline]
fn duration_slot(elapsed: Duration) -> usize {
    let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    if nanos <= DURATION_BOUNDS[0] {
        return 0;
    }
    let units = nanos.div_ceil(DURATION_BOUNDS[0]);
    let slot = (u64::BITS - (units - 1).leading_zeros()) as usize;
    slot.min(DURATION_SLOTS - 1)
}

/// The size buckets of the lengths below 512 bytes, where nearly every message falls: their
/// bucket is one load instead of a walk over the bounds.
const SMALL_SIZE_SLOTS: [u8; 512] = {
    let mut slots = [0; 512];
    let mut len = 0;
    while len < slots.len() {
        slots[len] = bounded_size_slot(len) as u8;
        len += 1;
    }
    slots
};

/// The size bucket of a message of `len` bytes.
#[inline(always)]
fn size_slot(len: usize) -> usize {
    match SMALL_SIZE_SLOTS.get(len) {
        Some(&slot) => usize::from(slot),
        None => bounded_size_slot(len),
    }
}

/// The first size bucket whose bound holds `len`, found by walking [`SIZE_BOUNDS`].
const fn bounded_size_slot(len: usize) -> usize {
    let mut slot = 0;
    while slot < SIZE_BOUNDS.len() {
        if len as u64 <= SIZE_BOUNDS[slot] {
            return slot;
        }
        slot += 1;
    }
    SIZE_SLOTS - 1
}

/// The question types counted by name, as CoreDNS counts them (its `monitorType` list, in
/// `plugin/metrics/vars/monitor.go`), with their mnemonics ([`rtype::MNEMONICS`]) as the names
/// its `type` label gives them; every other type counts as [`OTHER_TYPE`]. All are below 256,
/// so a type's slot is one table lookup.
pub const QUESTION_TYPES: [(u16, &str); 19] = with_mnemonics([
    rtype::A,
    rtype::NS,
    rtype::CNAME,
    rtype::SOA,
    rtype::PTR,
    rtype::MX,
    rtype::TXT,
    rtype::AAAA,
    rtype::SRV,
    rtype::DS,
    rtype::RRSIG,
    rtype::NSEC,
    rtype::DNSKEY,
    rtype::NSEC3,
    rtype::SVCB,
    rtype::HTTPS,
    rtype::IXFR,
    rtype::AXFR,
    rtype::ANY,
]);

/// Each of `types` with its mnemonic; a type without one fails the build.
const fn with_mnemonics<const N: usize>(types: [u16; N]) -> [(u16, &'static str); N] {
    let mut named = [(0, ""); N];
    let mut i = 0;
    while i < N {
        named[i] = match rtype::mnemonic(types[i]) {
            Some(mnemonic) => (types[i], mnemonic),
            None => panic!("a counted question type without a mnemonic"),
        };
        i += 1;
    }
    named
}

/// The `type` label of the question types not in [`QUESTION_TYPES`], and of messages with no
/// readable question.
pub const OTHER_TYPE: &str = "other";

/// Question-type slots: one per [`QUESTION_TYPES`] entry, then "other".
pub const TYPE_SLOTS: usize = QUESTION_TYPES.len() + 1;

/// The slot of each type below 256; 256 bytes, so that counting a request's type costs one
/// load and no search.
const TYPE_SLOT: [u8; 256] = {
    let mut slots = [QUESTION_TYPES.len() as u8; 256];
    let mut i = 0;
    while i < QUESTION_TYPES.len() {
        slots[QUESTION_TYPES[i].0 as usize] = i as u8;
        i += 1;
    }
    slots
};

/// The slot of question type `qtype`.
#[inline(always)]
fn type_slot(qtype: u16) -> usize {
    match TYPE_SLOT.get(usize::from(qtype)) {
        Some(&slot) => usize::from(slot),
        None => TYPE_SLOTS - 1,
    }
}

/// A client's address family, as CoreDNS's `family` label numbers it: 1 for IPv4 (an
/// IPv4-mapped IPv6 address included), 2 for IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressFamily {
    /// IPv4, label value `1`.
    V4 = 0,
    /// IPv6, label value `2`.
    V6 = 1,
}

impl AddressFamily {
    /// The family of an address.
    #[inline]
    pub fn of(ip: std::net::IpAddr) -> AddressFamily {
        if ip.to_canonical().is_ipv4() {
            AddressFamily::V4
        } else {
            AddressFamily::V6
        }
    }

    /// The family of a datagram's peer, read from its socket address without converting it.
    #[inline(always)]
    pub(crate) fn of_peer(peer: &crate::sys::Peer) -> AddressFamily {
        if peer.ip_raw().1 {
            AddressFamily::V4
        } else {
            AddressFamily::V6
        }
    }

    /// The `family` label's value.
    pub fn label(self) -> &'static str {
        match self {
            AddressFamily::V4 => "1",
            AddressFamily::V6 => "2",
        }
    }
}

/// Request slots: family × transport × question type.
const REQUEST_SLOTS: usize = 2 * 2 * TYPE_SLOTS;

/// The slot of a request.
#[inline(always)]
fn request_slot(family: AddressFamily, transport: Transport, qtype: u16) -> usize {
    (family as usize * 2 + transport as usize) * TYPE_SLOTS + type_slot(qtype)
}

/// Requests by family, transport and question type, as scraped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requests {
    counts: [u64; REQUEST_SLOTS],
}

impl Default for Requests {
    fn default() -> Requests {
        Requests {
            counts: [0; REQUEST_SLOTS],
        }
    }
}

impl Requests {
    /// Requests from `family` over `transport` whose question type is slot `type_slot` of
    /// [`QUESTION_TYPES`] (`TYPE_SLOTS - 1`: any other).
    pub fn get(&self, family: AddressFamily, transport: Transport, type_slot: usize) -> u64 {
        let base = (family as usize * 2 + transport as usize) * TYPE_SLOTS;
        self.counts.get(base + type_slot).copied().unwrap_or(0)
    }

    /// Requests over `transport`, all families and types together.
    pub fn over(&self, transport: Transport) -> u64 {
        [AddressFamily::V4, AddressFamily::V6]
            .into_iter()
            .flat_map(|family| (0..TYPE_SLOTS).map(move |slot| self.get(family, transport, slot)))
            .sum()
    }

    /// Counts `n` requests of question type `qtype` (a test's way to fill a report).
    pub fn add(&mut self, family: AddressFamily, transport: Transport, qtype: u16, n: u64) {
        self.counts[request_slot(family, transport, qtype)] += n;
    }
}

/// What a cached answer says, as CoreDNS's cache labels it (`type`): records, or their denial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheKind {
    /// An answer with records: `type="success"`.
    Success = 0,
    /// NXDOMAIN, NODATA, or another failure rcode: `type="denial"`.
    Denial = 1,
}

impl CacheKind {
    /// The `type` label's value.
    pub fn label(self) -> &'static str {
        match self {
            CacheKind::Success => "success",
            CacheKind::Denial => "denial",
        }
    }

    /// What the reply `reply` (as written, `facts` its facts) says: a denial unless it is a
    /// NOERROR with at least one answer record.
    #[inline]
    fn of_reply(reply: &[u8], facts: &Reply) -> CacheKind {
        let answers = reply.get(6..8).map_or(0, |c| u16::from_be_bytes([c[0], c[1]]));
        if facts.rcode() == rcode::NOERROR && answers > 0 {
            CacheKind::Success
        } else {
            CacheKind::Denial
        }
    }
}

/// Where a request's question type is read when it is counted.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Asked<'a> {
    /// The reply written for it, whose facts carry the type of the question it echoes.
    Reply(&'a Reply),
    /// The query itself, for a request that got no reply (dropped, or never answered): its
    /// name is walked to find the type. Off the answer path.
    Query(&'a [u8]),
}

impl<'a> Asked<'a> {
    /// The reply when `outcome` is one, else `query`.
    #[inline]
    pub(crate) fn of(outcome: &'a Outcome, query: &'a [u8]) -> Asked<'a> {
        match outcome {
            Outcome::Reply(reply) => Asked::Reply(reply),
            Outcome::Drop(_) => Asked::Query(query),
        }
    }

    /// The question type; 0 (counted as other) when there is no readable question.
    #[inline]
    fn qtype(self) -> u16 {
        match self {
            Asked::Reply(reply) => reply.qtype(),
            Asked::Query(query) => query_type(query),
        }
    }
}

/// A DNS header's length.
const HEADER_LEN: usize = 12;

/// The type of a query's first question, found by walking its name; 0 when there is none or
/// it cannot be read (too short, a compression pointer, a label past the end).
fn query_type(query: &[u8]) -> u16 {
    let questions = query.get(4..6).map_or(0, |c| u16::from_be_bytes([c[0], c[1]]));
    if questions == 0 {
        return 0;
    }
    let mut at = HEADER_LEN;
    loop {
        match query.get(at) {
            Some(0) => break,
            Some(&len) if len < 64 => at += 1 + usize::from(len),
            _ => return 0,
        }
    }
    query
        .get(at + 1..at + 3)
        .map_or(0, |t| u16::from_be_bytes([t[0], t[1]]))
}

/// One upstream's counters as one worker sees it: the tries sent to it, its answers by rcode
/// with how long each took, and the failures held against it. The worker that asks is their
/// only writer; they sit on lines of their own, apart from every other worker's.
#[derive(Debug, Default)]
pub(crate) struct UpstreamCounters {
    sent: Counter,
    failures: Counter,
    answers: [Counts<DURATION_SLOTS>; RCODE_BUCKETS],
    loops: Counter,
}

impl UpstreamCounters {
    /// Counts a try sent to the upstream.
    #[inline]
    pub(crate) fn sent(&self) {
        self.sent.incr();
    }

    /// Counts a failure held against the upstream's health (a timeout, a refusal, a reset).
    pub(crate) fn failed(&self) {
        self.failures.incr();
    }

    /// Counts the detection of a forwarding loop through the upstream (once per server,
    /// whichever worker received the probe back).
    pub(crate) fn looped(&self) {
        self.loops.incr();
    }

    /// Counts an answer with rcode `code`, `rtt` after its try was sent.
    #[inline]
    pub(crate) fn answered(&self, code: u16, rtt: Duration) {
        let nanos = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX);
        self.answers[rcode_bucket(code)].observe(duration_slot(rtt), nanos, 1);
    }
}

/// A worker's upstream counters by address: found or made when the worker builds its view
/// of an upstream (at start and on a reload, never per query), so that an upstream's counts
/// go on across reloads that keep it.
#[derive(Debug, Default)]
pub(crate) struct UpstreamTable(Mutex<Vec<(SocketAddr, Arc<CachePadded<UpstreamCounters>>)>>);

impl UpstreamTable {
    /// The counters of the upstream at `addr`.
    pub(crate) fn get(&self, addr: SocketAddr) -> Arc<CachePadded<UpstreamCounters>> {
        let mut table = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, counters)) = table.iter().find(|(a, _)| *a == addr) {
            return Arc::clone(counters);
        }
        let counters = Arc::default();
        table.push((addr, Arc::clone(&counters)));
        counters
    }

    pub(crate) fn add_to(&self, totals: &mut Vec<UpstreamTotals>) {
        let table = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for (addr, counters) in table.iter() {
            let at = match totals.iter().position(|t| t.addr == *addr) {
                Some(at) => at,
                None => {
                    totals.push(UpstreamTotals::new(*addr));
                    totals.len() - 1
                }
            };
            let total = &mut totals[at];
            total.sent += counters.sent.get();
            total.failures += counters.failures.get();
            total.loops += counters.loops.get();
            for (answers, counts) in total.answers.iter_mut().zip(&counters.answers) {
                answers.add(counts);
            }
        }
    }
}

/// The rcode names of the reply counters' buckets, in bucket order ([`rcode_bucket`]);
/// `OTHER` for any rcode not named.
pub const RCODE_NAMES: [&str; RCODE_BUCKETS] = [
    "NOERROR",
    "NXDOMAIN",
    "SERVFAIL",
    "FORMERR",
    "NOTIMP",
    "REFUSED",
    "BADVERS",
    "BADCOOKIE",
    "OTHER",
];

/// One upstream's counters, all workers together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamTotals {
    /// Its address.
    pub addr: SocketAddr,
    /// Tries sent to it: each try, each TCP retry, each health probe.
    pub sent: u64,
    /// Failures held against its health: tries that timed out, were refused or reset.
    pub failures: u64,
    /// Forwarding loops detected through it: 1 once its loop probe came back.
    pub loops: u64,
    /// Its answers by rcode bucket (named by [`RCODE_NAMES`]), each with how long the try
    /// waited for it.
    pub answers: [Histogram<DURATION_SLOTS>; RCODE_BUCKETS],
}

impl UpstreamTotals {
    /// An upstream with nothing counted yet.
    pub fn new(addr: SocketAddr) -> UpstreamTotals {
        UpstreamTotals {
            addr,
            sent: 0,
            failures: 0,
            loops: 0,
            answers: Default::default(),
        }
    }
}

/// A counter with a single writer: its worker.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds one. Only the owning worker calls this, so load-then-store loses nothing and avoids
    /// the locked read-modify-write of `fetch_add`.
    #[inline]
    pub(crate) fn incr(&self) {
        self.add(1);
    }

    /// Adds `n`.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0
            .store(self.0.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Sets a gauge.
    #[inline]
    pub(crate) fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One worker's counters, padded so that no two workers' counters share a cache line, nor the
/// pair of lines the adjacent-line prefetcher fetches together (128 bytes on x86-64, which is
/// what `CachePadded` aligns to there; a hand-written 64-byte alignment left workers sharing
/// pairs).
#[derive(Debug, Default)]
pub(crate) struct WorkerStats(CachePadded<Counters>);

impl std::ops::Deref for WorkerStats {
    type Target = Counters;

    fn deref(&self) -> &Counters {
        &self.0
    }
}

/// The counters themselves, each written by its worker only.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    requests: RequestCounters,
    pub(crate) udp_batches: Counter,
    replies: [Counter; RCODE_BUCKETS],
    truncated: Counter,
    dropped_too_short: Counter,
    dropped_response: Counter,
    ignored_records: Counter,
    trailing_bytes: Counter,
    autopath_success: Counter,
    pub(crate) udp_send_failures: Counter,
    pub(crate) udp_send_buffer_full: Counter,
    pub(crate) udp_receive_errors: Counter,
    pub(crate) tcp_accepted: Counter,
    pub(crate) tcp_refused_full: Counter,
    pub(crate) tcp_refused_per_client: Counter,
    pub(crate) tcp_evicted: Counter,
    pub(crate) tcp_io_timeouts: Counter,
    pub(crate) tcp_idle_timeouts: Counter,
    cache_hits: [Counter; 2],
    pub(crate) cache_stale_answers: Counter,
    pub(crate) cache_misses: Counter,
    pub(crate) cache_refreshes: Counter,
    pub(crate) cache_prefetches: Counter,
    pub(crate) cache_inserts: Counter,
    pub(crate) cache_evictions: Counter,
    pub(crate) cache_entries: Counter,
    pub(crate) cache_denials: Counter,
    pub(crate) cache_bytes: Counter,
    pub(crate) upstream_queries: Counter,
    pub(crate) upstream_tcp_retries: Counter,
    pub(crate) upstream_conn_opened: [Counter; 2],
    pub(crate) upstream_conn_reused: [Counter; 2],
    pub(crate) upstream_resent: Counter,
    pub(crate) upstream_timeouts: Counter,
    pub(crate) upstream_errors: Counter,
    pub(crate) upstream_bad_answers: Counter,
    pub(crate) upstream_mismatched_id: Counter,
    pub(crate) upstream_mismatched_question: Counter,
    pub(crate) upstream_probes: Counter,
    pub(crate) upstreams_marked_down: Counter,
    pub(crate) upstreams_all_down: Counter,
    pub(crate) upstreams: UpstreamTable,
    pub(crate) forward_merged: Counter,
    pub(crate) forward_busy: Counter,
    pub(crate) forward_client_limited: Counter,
    pub(crate) recursion_refused: Counter,
    pub(crate) forward_failures: Counter,
    pub(crate) stub_loops_dropped: Counter,
    pub(crate) dnstap_dropped: Counter,
    pub(crate) query_log_suppressed: Counter,
    pub(crate) rrl_dropped: Counter,
    pub(crate) rrl_slipped: Counter,
    request_duration: Counts<DURATION_SLOTS>,
    request_size: [Counts<SIZE_SLOTS>; 2],
    response_size: [Counts<SIZE_SLOTS>; 2],
}

/// The request counters, one per [`request_slot`].
#[derive(Debug)]
struct RequestCounters([Counter; REQUEST_SLOTS]);

impl Default for RequestCounters {
    fn default() -> RequestCounters {
        RequestCounters(std::array::from_fn(|_| Counter::default()))
    }
}

/// Reply counters by rcode: the eight named ones, then "other" ([`RCODE_NAMES`]).
pub const RCODE_BUCKETS: usize = 9;

/// The reply counter of each response code below 24 (BADCOOKIE, the highest named), so that
/// counting a reply is one load.
const RCODE_BUCKET: [u8; 24] = {
    let mut buckets = [0; 24];
    let mut code = 0;
    while code < buckets.len() {
        buckets[code] = named_rcode_bucket(code as u16) as u8;
        code += 1;
    }
    buckets
};

#[inline(always)]
fn rcode_bucket(code: u16) -> usize {
    match RCODE_BUCKET.get(usize::from(code)) {
        Some(&bucket) => usize::from(bucket),
        None => RCODE_BUCKETS - 1,
    }
}

const fn named_rcode_bucket(code: u16) -> usize {
    match code {
        rcode::NOERROR => 0,
        rcode::NXDOMAIN => 1,
        rcode::SERVFAIL => 2,
        rcode::FORMERR => 3,
        rcode::NOTIMP => 4,
        rcode::REFUSED => 5,
        rcode::BADVERS => 6,
        rcode::BADCOOKIE => 7,
        _ => 8,
    }
}

impl Counters {
    /// Counts a request from `family` over `transport` once its fate is known (a reply
    /// written, a drop, a question left unanswered), by the question type `asked` names.
    #[inline]
    pub(crate) fn requested(&self, transport: Transport, family: AddressFamily, asked: Asked<'_>) {
        self.requests.0[request_slot(family, transport, asked.qtype())].incr();
    }

    /// Counts an answer from the cache, written into `reply` with `outcome`.
    #[inline]
    pub(crate) fn cache_hit(&self, outcome: &Outcome, reply: &[u8]) {
        let kind = match outcome {
            Outcome::Reply(facts) => CacheKind::of_reply(reply, facts),
            Outcome::Drop(_) => CacheKind::Denial,
        };
        self.cache_hits[kind as usize].incr();
    }

    /// Counts a query of `len` bytes received on `transport`.
    #[inline]
    pub(crate) fn request(&self, transport: Transport, len: usize) {
        self.request_size[transport as usize].observe(size_slot(len), len as u64, 1);
    }

    /// Counts `n` replies that took `elapsed` from their query's arrival to their send.
    #[inline]
    pub(crate) fn took(&self, elapsed: Duration, n: u64) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.request_duration.observe(duration_slot(elapsed), nanos, n);
    }

    /// Counts what answering a message on `transport` produced.
    #[inline]
    pub(crate) fn outcome(&self, transport: Transport, outcome: &Outcome) {
        match outcome {
            Outcome::Reply(reply) => {
                self.response_size[transport as usize].observe(size_slot(reply.len()), reply.len() as u64, 1);
                self.reply(reply);
            }
            Outcome::Drop(DropReason::TooShort) => self.dropped_too_short.incr(),
            Outcome::Drop(DropReason::Response) => self.dropped_response.incr(),
        }
    }

    /// Counts a UDP reply that response rate limiting sent truncated ([`crate::rrl::slip`]),
    /// `len` bytes as it left: it is a response the client receives, so it counts by the rcode
    /// it keeps and in the size histogram with its slipped size, as it counts in the duration
    /// histogram. `skyline_rrl_limited_total` counts it apart as well.
    #[inline]
    pub(crate) fn slipped(&self, reply: &Reply, len: usize) {
        self.response_size[Transport::Udp as usize].observe(size_slot(len), len as u64, 1);
        self.reply(reply);
    }

    #[inline(always)]
    fn reply(&self, reply: &Reply) {
        self.replies[rcode_bucket(reply.rcode())].incr();
        if reply.truncated() | reply.ignored_records() | reply.trailing() | reply.searched() {
            self.reply_notes(reply);
        }
    }

    /// Counts what is rare in a reply, out of the common path.
    #[cold]
    fn reply_notes(&self, reply: &Reply) {
        if reply.truncated() {
            self.truncated.incr();
        }
        if reply.ignored_records() {
            self.ignored_records.incr();
        }
        if reply.trailing() {
            self.trailing_bytes.incr();
        }
        if reply.searched() {
            self.autopath_success.incr();
        }
    }

    /// Adds this worker's counters to `totals`.
    pub(crate) fn add_to(&self, totals: &mut Totals) {
        let r = |code: u16| self.replies[rcode_bucket(code)].get();
        for (total, counter) in totals.requests.counts.iter_mut().zip(&self.requests.0) {
            *total += counter.get();
        }
        totals.udp_batches += self.udp_batches.get();
        totals.replies_noerror += r(rcode::NOERROR);
        totals.replies_nxdomain += r(rcode::NXDOMAIN);
        totals.replies_servfail += r(rcode::SERVFAIL);
        totals.replies_formerr += r(rcode::FORMERR);
        totals.replies_notimp += r(rcode::NOTIMP);
        totals.replies_refused += r(rcode::REFUSED);
        totals.replies_badvers += r(rcode::BADVERS);
        totals.replies_badcookie += r(rcode::BADCOOKIE);
        totals.replies_other += self.replies[RCODE_BUCKETS - 1].get();
        totals.truncated += self.truncated.get();
        totals.dropped_too_short += self.dropped_too_short.get();
        totals.dropped_response += self.dropped_response.get();
        totals.ignored_records += self.ignored_records.get();
        totals.trailing_bytes += self.trailing_bytes.get();
        totals.autopath_success += self.autopath_success.get();
        totals.udp_send_failures += self.udp_send_failures.get();
        totals.udp_send_buffer_full += self.udp_send_buffer_full.get();
        totals.udp_receive_errors += self.udp_receive_errors.get();
        totals.tcp_accepted += self.tcp_accepted.get();
        totals.tcp_refused_full += self.tcp_refused_full.get();
        totals.tcp_refused_per_client += self.tcp_refused_per_client.get();
        totals.tcp_evicted += self.tcp_evicted.get();
        totals.tcp_io_timeouts += self.tcp_io_timeouts.get();
        totals.tcp_idle_timeouts += self.tcp_idle_timeouts.get();
        totals.cache_hits[0] += self.cache_hits[0].get();
        totals.cache_hits[1] += self.cache_hits[1].get();
        totals.cache_stale_answers += self.cache_stale_answers.get();
        totals.cache_misses += self.cache_misses.get();
        totals.cache_refreshes += self.cache_refreshes.get();
        totals.cache_prefetches += self.cache_prefetches.get();
        totals.cache_inserts += self.cache_inserts.get();
        totals.cache_evictions += self.cache_evictions.get();
        let (entries, denials) = (self.cache_entries.get(), self.cache_denials.get());
        totals.cache_entries[CacheKind::Success as usize] += entries.saturating_sub(denials);
        totals.cache_entries[CacheKind::Denial as usize] += denials;
        totals.cache_bytes += self.cache_bytes.get();
        totals.upstream_queries += self.upstream_queries.get();
        totals.upstream_tcp_retries += self.upstream_tcp_retries.get();
        for proto in 0..2 {
            totals.upstream_conn_opened[proto] += self.upstream_conn_opened[proto].get();
            totals.upstream_conn_reused[proto] += self.upstream_conn_reused[proto].get();
        }
        totals.upstream_resent += self.upstream_resent.get();
        totals.upstream_timeouts += self.upstream_timeouts.get();
        totals.upstream_errors += self.upstream_errors.get();
        totals.upstream_bad_answers += self.upstream_bad_answers.get();
        totals.upstream_mismatched_id += self.upstream_mismatched_id.get();
        totals.upstream_mismatched_question += self.upstream_mismatched_question.get();
        totals.upstream_probes += self.upstream_probes.get();
        totals.upstreams_marked_down += self.upstreams_marked_down.get();
        totals.upstreams_all_down += self.upstreams_all_down.get();
        totals.forward_merged += self.forward_merged.get();
        totals.forward_busy += self.forward_busy.get();
        totals.forward_client_limited += self.forward_client_limited.get();
        totals.recursion_refused += self.recursion_refused.get();
        totals.forward_failures += self.forward_failures.get();
        totals.stub_loops_dropped += self.stub_loops_dropped.get();
        totals.dnstap_dropped += self.dnstap_dropped.get();
        totals.query_log_suppressed += self.query_log_suppressed.get();
        totals.rrl_dropped += self.rrl_dropped.get();
        totals.rrl_slipped += self.rrl_slipped.get();
        totals.request_duration.add(&self.request_duration);
        for t in 0..2 {
            totals.request_size[t].add(&self.request_size[t]);
            totals.response_size[t].add(&self.response_size[t]);
        }
    }
}

/// Every worker's counters, readable from any thread: what the metrics endpoint scrapes. Cloning
/// it is cheap and reading it only loads atomics, so a scrape never blocks a worker; it costs a
/// worker at most one cache miss per counter line on its next count.
#[derive(Debug, Clone)]
pub struct StatsReader {
    workers: Arc<[Arc<WorkerStats>]>,
    xdp: Arc<[Arc<QueueStats>]>,
}

impl StatsReader {
    pub(crate) fn new(workers: Vec<Arc<WorkerStats>>, xdp: Vec<Arc<QueueStats>>) -> StatsReader {
        StatsReader {
            workers: workers.into(),
            xdp: xdp.into(),
        }
    }

    /// Every upstream's counters, all workers together, in the order the workers first asked
    /// them (none without forwarding).
    pub fn upstreams(&self) -> Vec<UpstreamTotals> {
        let mut totals = Vec::new();
        for worker in self.workers.iter() {
            worker.upstreams.add_to(&mut totals);
        }
        totals
    }

    /// The counters of every AF_XDP receive queue served (none without `--xdp`).
    pub fn xdp_queues(&self) -> Vec<QueueTotals> {
        self.xdp.iter().map(|queue| queue.totals()).collect()
    }

    /// Every worker's counters, summed now (the dnstap and query-log writers' are the
    /// observation's: [`crate::observe::ObserveReader::add_to`]).
    pub fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for worker in self.workers.iter() {
            worker.add_to(&mut totals);
        }
        totals
    }
}

/// How often a repeating data-path warning may be logged.
pub(crate) const WARN_INTERVAL: Duration = Duration::from_secs(10);

/// Lets a data-path warning through at most once per [`WARN_INTERVAL`], so that a flood of
/// failing packets cannot turn into a flood of log lines; the next warning says how many were
/// held back.
#[derive(Debug, Default)]
pub(crate) struct RateLimitedWarning {
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimitedWarning {
    /// Whether to log now; `Some(n)` with the number of warnings suppressed since the last one.
    pub(crate) fn allow(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.saturating_duration_since(last) < WARN_INTERVAL => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::note;

    fn query(stats: &WorkerStats, transport: Transport, outcome: &Outcome) {
        stats.requested(transport, AddressFamily::V4, Asked::of(outcome, &[]));
        stats.outcome(transport, outcome);
    }

    /// A query for `name` (dotted, without the root) of type `qtype`, as a client sends it.
    fn wire_query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.').filter(|l| !l.is_empty()) {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&1u16.to_be_bytes());
        q
    }

    fn reply(code: u16) -> Outcome {
        Outcome::Reply(Reply::new(12, code, 0, 0, 0))
    }

    #[test]
    fn replies_are_counted_by_rcode_and_transport() {
        let stats = WorkerStats::default();
        for code in [0, 1, 2, 3, 4, 5, 16, 23, 9] {
            query(&stats, Transport::Udp, &reply(code));
        }
        query(
            &stats,
            Transport::Tcp,
            &Outcome::Reply(Reply::new(
                12,
                0,
                0,
                0,
                note::TRUNCATED | note::IGNORED_RECORDS | note::TRAILING,
            )),
        );
        query(&stats, Transport::Udp, &Outcome::Drop(DropReason::TooShort));
        query(&stats, Transport::Tcp, &Outcome::Drop(DropReason::Response));
        let mut t = Totals::default();
        stats.add_to(&mut t);
        assert_eq!(
            (t.requests.over(Transport::Udp), t.requests.over(Transport::Tcp)),
            (10, 2)
        );
        assert_eq!(t.replies_noerror, 2);
        for n in [
            t.replies_formerr,
            t.replies_servfail,
            t.replies_nxdomain,
            t.replies_notimp,
            t.replies_refused,
            t.replies_badvers,
            t.replies_badcookie,
            t.replies_other,
        ] {
            assert_eq!(n, 1);
        }
        assert_eq!((t.truncated, t.ignored_records, t.trailing_bytes), (1, 1, 1));
        assert_eq!((t.dropped_too_short, t.dropped_response), (1, 1));
    }

    #[test]
    fn requests_are_counted_by_family_transport_and_coredns_question_type() {
        let stats = WorkerStats::default();
        let slot = |name: &str| QUESTION_TYPES.iter().position(|(_, n)| *n == name).unwrap();
        let aaaa = wire_query("web.example.org", rtype::AAAA);
        // The reply's facts carry the type of the question it echoes.
        let facts = Reply::new(aaaa.len(), rcode::NOERROR, aaaa.len() as u16, rtype::AAAA, 0);
        stats.requested(Transport::Udp, AddressFamily::V4, Asked::Reply(&facts));
        stats.requested(
            Transport::Tcp,
            AddressFamily::V6,
            Asked::Query(&wire_query("x.org", 65)),
        );
        stats.requested(
            Transport::Udp,
            AddressFamily::V4,
            Asked::Query(&wire_query("a.b.c", rtype::HINFO)),
        );
        stats.requested(Transport::Udp, AddressFamily::V4, Asked::Query(&[0; 5]));
        stats.requested(
            Transport::Udp,
            AddressFamily::V6,
            Asked::Query(&wire_query("", rtype::ANY)),
        );
        let mut t = Totals::default();
        stats.add_to(&mut t);
        let r = t.requests;
        assert_eq!(r.get(AddressFamily::V4, Transport::Udp, slot("AAAA")), 1);
        assert_eq!(r.get(AddressFamily::V6, Transport::Tcp, slot("HTTPS")), 1);
        assert_eq!(r.get(AddressFamily::V6, Transport::Udp, slot("ANY")), 1);
        assert_eq!(
            r.get(AddressFamily::V4, Transport::Udp, TYPE_SLOTS - 1),
            2,
            "HINFO and a short message"
        );
        assert_eq!((r.over(Transport::Udp), r.over(Transport::Tcp)), (4, 1));
    }

    #[test]
    fn every_coredns_question_type_has_its_own_slot() {
        assert_eq!(
            QUESTION_TYPES.map(|(_, name)| name),
            [
                "A", "NS", "CNAME", "SOA", "PTR", "MX", "TXT", "AAAA", "SRV", "DS", "RRSIG", "NSEC", "DNSKEY", "NSEC3",
                "SVCB", "HTTPS", "IXFR", "AXFR", "ANY"
            ],
            "the type label's values of CoreDNS"
        );
        for (i, &(qtype, _)) in QUESTION_TYPES.iter().enumerate() {
            assert_eq!(type_slot(qtype), i);
        }
        for other in [0, 13, 99, 256, 257, 32769, u16::MAX] {
            assert_eq!(type_slot(other), TYPE_SLOTS - 1, "{other}");
        }
        assert_eq!(AddressFamily::of("::ffff:10.0.0.1".parse().unwrap()), AddressFamily::V4);
        assert_eq!(AddressFamily::of("2001:db8::1".parse().unwrap()), AddressFamily::V6);
    }

    #[test]
    fn cache_hits_are_split_into_success_and_denial() {
        let stats = WorkerStats::default();
        let mut reply = wire_query("a.org", rtype::A);
        let facts = |code| Reply::new(reply.len(), code, 0, 0, 0);
        let (noerror, nxdomain) = (facts(rcode::NOERROR), facts(rcode::NXDOMAIN));
        stats.cache_hit(&Outcome::Reply(noerror), &reply);
        stats.cache_hit(&Outcome::Reply(nxdomain), &reply);
        reply[7] = 1;
        stats.cache_hit(&Outcome::Reply(noerror), &reply);
        let mut t = Totals::default();
        stats.add_to(&mut t);
        assert_eq!(t.cache_hits, [1, 2], "NODATA and NXDOMAIN are denials");
    }

    #[test]
    fn upstream_counters_are_summed_per_address_over_workers() {
        let workers = [WorkerStats::default(), WorkerStats::default()];
        let (a, b): (SocketAddr, SocketAddr) = ("127.0.0.1:53".parse().unwrap(), "[::1]:53".parse().unwrap());
        for w in &workers {
            let counters = w.upstreams.get(a);
            counters.sent();
            counters.answered(rcode::NOERROR, Duration::from_micros(15));
        }
        workers[1].upstreams.get(b).failed();
        workers[1]
            .upstreams
            .get(b)
            .answered(rcode::SERVFAIL, Duration::from_millis(3));
        let mut totals = Vec::new();
        for w in &workers {
            w.upstreams.add_to(&mut totals);
        }
        assert_eq!(totals.len(), 2);
        assert_eq!((totals[0].addr, totals[0].sent, totals[0].failures), (a, 2, 0));
        assert_eq!(totals[0].answers[0].counts[1], 2);
        assert_eq!((totals[1].addr, totals[1].sent, totals[1].failures), (b, 0, 1));
        assert_eq!(totals[1].answers[rcode_bucket(rcode::SERVFAIL)].count(), 1);
        assert_eq!(RCODE_NAMES[rcode_bucket(rcode::SERVFAIL)], "SERVFAIL");
    }

    #[test]
    fn durations_and_sizes_fall_in_the_first_bucket_that_holds_them() {
        let micros = Duration::from_micros;
        for (elapsed, slot) in [
            (Duration::ZERO, 0),
            (micros(10), 0),
            (Duration::from_nanos(10_001), 1),
            (micros(20), 1),
            (micros(21), 2),
            (micros(640), 6),
            (micros(641), 7),
            (Duration::from_secs(5), 19),
            (Duration::from_secs(6), 20),
            (Duration::MAX, 20),
        ] {
            assert_eq!(duration_slot(elapsed), slot, "{elapsed:?}");
            if slot < DURATION_SLOTS - 1 {
                assert!(elapsed.as_nanos() <= u128::from(DURATION_BOUNDS[slot]));
            }
        }
        for (len, slot) in [
            (0, 0),
            (1, 1),
            (100, 1),
            (101, 2),
            (400, 4),
            (401, 5),
            (511, 5),
            (512, 6),
            (8291, 9),
            (64_000, 13),
            (65_535, 14),
        ] {
            assert_eq!(size_slot(len), slot, "{len}");
        }
        for (slot, &bound) in SIZE_BOUNDS.iter().enumerate() {
            assert_eq!(size_slot(bound as usize), slot, "a bound is in its own bucket");
        }
        for len in 0..=usize::from(u16::MAX) {
            let first_holding = SIZE_BOUNDS.iter().position(|&bound| len as u64 <= bound);
            assert_eq!(size_slot(len), first_holding.unwrap_or(SIZE_SLOTS - 1), "{len}");
        }
    }

    #[test]
    fn every_response_code_counts_in_its_named_bucket_or_as_other() {
        for code in 0..4096u16 {
            assert_eq!(rcode_bucket(code), named_rcode_bucket(code), "{code}");
        }
        assert_eq!(rcode_bucket(rcode::BADCOOKIE), 7);
        assert_eq!(rcode_bucket(rcode::BADCOOKIE + 1), RCODE_BUCKETS - 1);
    }

    #[test]
    fn histograms_count_and_sum_per_transport() {
        let stats = WorkerStats::default();
        stats.request(Transport::Udp, 40);
        stats.request(Transport::Tcp, 300);
        stats.outcome(Transport::Udp, &reply(0));
        stats.took(Duration::from_micros(15), 3);
        let mut t = Totals::default();
        stats.add_to(&mut t);
        assert_eq!((t.request_size[0].counts[1], t.request_size[0].sum), (1, 40));
        assert_eq!((t.request_size[1].counts[3], t.request_size[1].sum), (1, 300));
        assert_eq!((t.response_size[0].counts[1], t.response_size[0].sum), (1, 12));
        assert_eq!((t.request_duration.counts[1], t.request_duration.count()), (3, 3));
        assert_eq!(t.request_duration.sum, 45_000);
    }

    #[test]
    fn a_slipped_reply_counts_as_a_response_of_its_rcode_and_of_the_size_it_left_with() {
        let stats = WorkerStats::default();
        let Outcome::Reply(built) = reply(rcode::NXDOMAIN) else {
            unreachable!("a reply")
        };
        // Built with 380 bytes, sent as its header, question and OPT: 40.
        stats.slipped(
            &Reply::new(380, built.rcode(), built.question_end(), built.qtype(), built.notes()),
            40,
        );
        let mut t = Totals::default();
        stats.add_to(&mut t);
        assert_eq!(t.replies_nxdomain, 1);
        assert_eq!(t.response_size[0].count(), 1);
        assert_eq!((t.response_size[0].counts[1], t.response_size[0].sum), (1, 40));
        assert_eq!(t.response_size[1].count(), 0);
        assert_eq!(t.truncated, 0, "truncated by rate limiting, not for the client's size");
    }

    #[test]
    fn totals_sum_over_workers() {
        let workers = [WorkerStats::default(), WorkerStats::default()];
        workers[0].tcp_accepted.add(3);
        workers[1].tcp_accepted.incr();
        let mut t = Totals::default();
        for w in &workers {
            w.add_to(&mut t);
        }
        assert_eq!(t.tcp_accepted, 4);
    }

    #[test]
    fn each_worker_has_its_own_pair_of_cache_lines() {
        let line = if cfg!(target_arch = "x86_64") { 128 } else { 64 };
        assert!(std::mem::align_of::<WorkerStats>() >= line);
        assert_eq!(std::mem::size_of::<WorkerStats>() % line, 0);
    }

    #[test]
    fn warnings_pass_once_per_interval_and_report_what_was_held_back() {
        let mut w = RateLimitedWarning::default();
        let t0 = Instant::now();
        assert_eq!(w.allow(t0), Some(0));
        assert_eq!(w.allow(t0 + Duration::from_secs(1)), None);
        assert_eq!(w.allow(t0 + Duration::from_secs(2)), None);
        assert_eq!(w.allow(t0 + WARN_INTERVAL), Some(2));
    }
}
