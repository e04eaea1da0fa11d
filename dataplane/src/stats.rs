//! Per-worker counters, summed only when scraped.
//!
//! Each worker owns one set of counters on its own cache line and is its only writer, so a count
//! is a relaxed load and store on a line no other core writes: no locked instruction and no
//! cache-line ping-pong on the query path. A scrape reads every worker's counters into
//! [`Totals`]; it may see one worker a few queries ahead of another, never a torn value.

use crate::answer::{Outcome, Reply, Transport};
use crate::io::{QueueStats, QueueTotals};
use crate::observe::topk::TopTalkers;
use crate::observe::ObserveReader;
use crate::wire::types::rcode;
use crate::wire::DropReason;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts of everything a worker did, summed over all workers at scrape time. Every field
/// counts since the server started and only ever grows.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Datagrams received on the UDP sockets (each is one query, answered or not).
    pub queries_udp: u64,
    /// Messages received on TCP connections.
    pub queries_tcp: u64,
    /// Receive calls that returned datagrams; `queries_udp / udp_batches` is the mean batch
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
    /// Queries for names outside the zones answered from the cache (stale ones included).
    pub cache_hits: u64,
    /// Answers served past their TTL because upstreams failed (RFC 8767).
    pub cache_stale_answers: u64,
    /// Queries for names outside the zones the cache could not answer: forwarded.
    pub cache_misses: u64,
    /// Background refreshes started: prefetches of popular entries, rechecks of stale ones.
    pub cache_refreshes: u64,
    /// Upstream answers stored in the cache.
    pub cache_inserts: u64,
    /// Entries evicted to keep the cache within its memory bound.
    pub cache_evictions: u64,
    /// Entries held now, all workers together (a gauge).
    pub cache_entries: u64,
    /// Bytes held now against the memory bound, all workers together (a gauge).
    pub cache_bytes: u64,
    /// Queries sent to upstreams (each try, each TCP retry, each probe).
    pub upstream_queries: u64,
    /// Truncated upstream answers asked again over TCP.
    pub upstream_tcp_retries: u64,
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
    /// How long upstreams took to answer a try, from its send to its reply.
    pub forward_duration: Histogram<DURATION_SLOTS>,
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

/// The size bucket of a message of `len` bytes.
#[inline]
fn size_slot(len: usize) -> usize {
    match len {
        0..=400 => len.div_ceil(100),
        401..=511 => 5,
        512..=1023 => 6,
        1024..=2047 => 7,
        2048..=4095 => 8,
        4096..=8291 => 9,
        8292..=16000 => 10,
        16001..=32000 => 11,
        32001..=48000 => 12,
        48001..=64000 => 13,
        _ => 14,
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
    pub(crate) queries_udp: Counter,
    pub(crate) queries_tcp: Counter,
    pub(crate) udp_batches: Counter,
    replies: [Counter; RCODE_BUCKETS],
    truncated: Counter,
    dropped_too_short: Counter,
    dropped_response: Counter,
    ignored_records: Counter,
    trailing_bytes: Counter,
    pub(crate) udp_send_failures: Counter,
    pub(crate) udp_send_buffer_full: Counter,
    pub(crate) udp_receive_errors: Counter,
    pub(crate) tcp_accepted: Counter,
    pub(crate) tcp_refused_full: Counter,
    pub(crate) tcp_refused_per_client: Counter,
    pub(crate) tcp_evicted: Counter,
    pub(crate) tcp_io_timeouts: Counter,
    pub(crate) tcp_idle_timeouts: Counter,
    pub(crate) cache_hits: Counter,
    pub(crate) cache_stale_answers: Counter,
    pub(crate) cache_misses: Counter,
    pub(crate) cache_refreshes: Counter,
    pub(crate) cache_inserts: Counter,
    pub(crate) cache_evictions: Counter,
    pub(crate) cache_entries: Counter,
    pub(crate) cache_bytes: Counter,
    pub(crate) upstream_queries: Counter,
    pub(crate) upstream_tcp_retries: Counter,
    pub(crate) upstream_timeouts: Counter,
    pub(crate) upstream_errors: Counter,
    pub(crate) upstream_bad_answers: Counter,
    pub(crate) upstream_mismatched_id: Counter,
    pub(crate) upstream_mismatched_question: Counter,
    pub(crate) upstream_probes: Counter,
    pub(crate) upstreams_marked_down: Counter,
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
    forward_duration: Counts<DURATION_SLOTS>,
}

/// Reply counters by rcode: the eight named ones, then "other".
const RCODE_BUCKETS: usize = 9;

fn rcode_bucket(code: u16) -> usize {
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
    /// Counts one message received on `transport`, whose outcome may come later.
    #[inline]
    pub(crate) fn received(&self, transport: Transport) {
        match transport {
            Transport::Udp => self.queries_udp.incr(),
            Transport::Tcp => self.queries_tcp.incr(),
        }
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

    /// Counts an upstream's answer to a try, `rtt` after it was sent.
    pub(crate) fn upstream_answered(&self, rtt: Duration) {
        let nanos = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX);
        self.forward_duration.observe(duration_slot(rtt), nanos, 1);
    }

    /// Counts what answering a message on `transport` produced.
    #[inline]
    pub(crate) fn outcome(&self, transport: Transport, outcome: &Outcome) {
        match outcome {
            Outcome::Reply(reply) => {
                self.response_size[transport as usize].observe(size_slot(reply.len), reply.len as u64, 1);
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

    fn reply(&self, reply: &Reply) {
        self.replies[rcode_bucket(reply.rcode)].incr();
        if reply.truncated {
            self.truncated.incr();
        }
        if reply.ignored_records {
            self.ignored_records.incr();
        }
        if reply.trailing {
            self.trailing_bytes.incr();
        }
    }

    /// Adds this worker's counters to `totals`.
    pub(crate) fn add_to(&self, totals: &mut Totals) {
        let r = |code: u16| self.replies[rcode_bucket(code)].get();
        totals.queries_udp += self.queries_udp.get();
        totals.queries_tcp += self.queries_tcp.get();
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
        totals.udp_send_failures += self.udp_send_failures.get();
        totals.udp_send_buffer_full += self.udp_send_buffer_full.get();
        totals.udp_receive_errors += self.udp_receive_errors.get();
        totals.tcp_accepted += self.tcp_accepted.get();
        totals.tcp_refused_full += self.tcp_refused_full.get();
        totals.tcp_refused_per_client += self.tcp_refused_per_client.get();
        totals.tcp_evicted += self.tcp_evicted.get();
        totals.tcp_io_timeouts += self.tcp_io_timeouts.get();
        totals.tcp_idle_timeouts += self.tcp_idle_timeouts.get();
        totals.cache_hits += self.cache_hits.get();
        totals.cache_stale_answers += self.cache_stale_answers.get();
        totals.cache_misses += self.cache_misses.get();
        totals.cache_refreshes += self.cache_refreshes.get();
        totals.cache_inserts += self.cache_inserts.get();
        totals.cache_evictions += self.cache_evictions.get();
        totals.cache_entries += self.cache_entries.get();
        totals.cache_bytes += self.cache_bytes.get();
        totals.upstream_queries += self.upstream_queries.get();
        totals.upstream_tcp_retries += self.upstream_tcp_retries.get();
        totals.upstream_timeouts += self.upstream_timeouts.get();
        totals.upstream_errors += self.upstream_errors.get();
        totals.upstream_bad_answers += self.upstream_bad_answers.get();
        totals.upstream_mismatched_id += self.upstream_mismatched_id.get();
        totals.upstream_mismatched_question += self.upstream_mismatched_question.get();
        totals.upstream_probes += self.upstream_probes.get();
        totals.upstreams_marked_down += self.upstreams_marked_down.get();
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
        totals.forward_duration.add(&self.forward_duration);
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
    observe: ObserveReader,
    xdp: Arc<[Arc<QueueStats>]>,
}

impl StatsReader {
    pub(crate) fn new(
        workers: Vec<Arc<WorkerStats>>,
        observe: ObserveReader,
        xdp: Vec<Arc<QueueStats>>,
    ) -> StatsReader {
        StatsReader {
            workers: workers.into(),
            observe,
            xdp: xdp.into(),
        }
    }

    /// The counters of every AF_XDP receive queue served (none without `--xdp`).
    pub fn xdp_queues(&self) -> Vec<QueueTotals> {
        self.xdp.iter().map(|queue| queue.totals()).collect()
    }

    /// Every worker's counters, and the dnstap and query-log writers', summed now.
    pub fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for worker in self.workers.iter() {
            worker.add_to(&mut totals);
        }
        if let Some(dnstap) = &self.observe.dnstap {
            totals.dnstap_sent += dnstap.sent.load(Ordering::Relaxed);
            totals.dnstap_dropped += dnstap.dropped.load(Ordering::Relaxed);
        }
        if let Some(log) = &self.observe.query_log {
            totals.query_log_lines += log.sent.load(Ordering::Relaxed);
            totals.query_log_suppressed += log.dropped.load(Ordering::Relaxed);
        }
        totals
    }

    /// The top client addresses and query names over every worker, when they are counted
    /// (`--top-talkers`).
    pub fn top_talkers(&self) -> Option<TopTalkers> {
        self.observe.top_talkers()
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

    fn query(stats: &WorkerStats, transport: Transport, outcome: &Outcome) {
        stats.received(transport);
        stats.outcome(transport, outcome);
    }

    fn reply(code: u16) -> Outcome {
        Outcome::Reply(Reply {
            len: 12,
            rcode: code,
            truncated: false,
            ignored_records: false,
            trailing: false,
            valid_cookie: false,
            question_end: 0,
            name_hash: 0,
        })
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
            &Outcome::Reply(Reply {
                len: 12,
                rcode: 0,
                truncated: true,
                ignored_records: true,
                trailing: true,
                valid_cookie: false,
                question_end: 0,
                name_hash: 0,
            }),
        );
        query(&stats, Transport::Udp, &Outcome::Drop(DropReason::TooShort));
        query(&stats, Transport::Tcp, &Outcome::Drop(DropReason::Response));
        let mut t = Totals::default();
        stats.add_to(&mut t);
        assert_eq!((t.queries_udp, t.queries_tcp), (10, 2));
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
    }

    #[test]
    fn histograms_count_and_sum_per_transport() {
        let stats = WorkerStats::default();
        stats.request(Transport::Udp, 40);
        stats.request(Transport::Tcp, 300);
        stats.outcome(Transport::Udp, &reply(0));
        stats.took(Duration::from_micros(15), 3);
        stats.upstream_answered(Duration::from_millis(2));
        let mut t = Totals::default();
        stats.add_to(&mut t);
        assert_eq!((t.request_size[0].counts[1], t.request_size[0].sum), (1, 40));
        assert_eq!((t.request_size[1].counts[3], t.request_size[1].sum), (1, 300));
        assert_eq!((t.response_size[0].counts[1], t.response_size[0].sum), (1, 12));
        assert_eq!((t.request_duration.counts[1], t.request_duration.count()), (3, 3));
        assert_eq!(t.request_duration.sum, 45_000);
        assert_eq!(t.forward_duration.count(), 1);
    }

    #[test]
    fn a_slipped_reply_counts_as_a_response_of_its_rcode_and_of_the_size_it_left_with() {
        let stats = WorkerStats::default();
        let Outcome::Reply(built) = reply(rcode::NXDOMAIN) else {
            unreachable!("a reply")
        };
        // Built with 380 bytes, sent as its header, question and OPT: 40.
        stats.slipped(&Reply { len: 380, ..built }, 40);
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
