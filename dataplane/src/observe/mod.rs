//! What the workers let others see of the queries they answer, when asked: dnstap messages over
//! Frame Streams ([`dnstap`], [`fstrm`]), a rate-limited query log ([`querylog`]), and the top
//! talkers, the heaviest client addresses and query names ([`topk`]).
//!
//! All of it is off by default, and then a worker holds no [`Observer`] and its answer path
//! pays one branch per query. When on, a worker does the cheap part itself (a sample counter, a
//! sketch update, copying the message into a record) and hands records to a writer thread
//! through a bounded queue that never blocks it ([`sink`]): a full queue drops the record and
//! counts it.

pub mod dnstap;
pub mod fstrm;
pub mod querylog;
pub mod sink;
pub mod topk;

use crate::answer::Transport;
use crate::io::Peer;
use crate::stats::{Totals, WorkerStats};
use arc_swap::ArcSwap;
use dnstap::{Event, Kind};
use sink::{Feed, SinkStats};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime};
use topk::{Published, TopCounter, TopReader};

/// What to observe; everything `None` (the default) observes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObserveConfig {
    /// Stream dnstap messages to a Frame Streams reader.
    pub dnstap: Option<DnstapConfig>,
    /// Write one line per query.
    pub query_log: Option<QueryLogConfig>,
    /// Count the heaviest clients and names.
    pub top_talkers: Option<TopConfig>,
}

impl ObserveConfig {
    /// Whether anything is observed.
    pub fn is_enabled(&self) -> bool {
        self.dnstap.is_some() || self.query_log.is_some() || self.top_talkers.is_some()
    }
}

/// dnstap settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnstapConfig {
    /// The reader's unix socket; it need not exist yet (the writer connects when it appears).
    pub socket: PathBuf,
    /// `Dnstap.identity`: which server sent a message; empty leaves it out.
    pub identity: String,
    /// `Dnstap.version`; empty leaves it out.
    pub version: String,
    /// One query in this many (and its response) is sent; 1 sends every one.
    pub sample: u32,
}

/// Where the query log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryLogTarget {
    /// The process's standard error, beside its log.
    Stderr,
    /// A file, appended to (created if missing).
    File(PathBuf),
}

/// Query log settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryLogConfig {
    /// Where lines go.
    pub target: QueryLogTarget,
    /// Lines per second at most, all workers together; the excess is counted as suppressed.
    pub rate: u32,
}

/// Top-talker settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopConfig {
    /// Entries exported per family.
    pub k: usize,
    /// One query in this many is counted.
    pub sample: u32,
}

/// The name and type of a message's question, the name in wire form as sent; `None` when the
/// message has no readable question (a compression pointer there is not followed).
pub(crate) fn question(message: &[u8]) -> Option<(&[u8], u16)> {
    if message.len() < 12 || message[4..6] == [0, 0] {
        return None;
    }
    let mut at = 12;
    loop {
        let len = usize::from(*message.get(at)?);
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        at += 1 + len;
    }
    let name = message.get(12..=at)?;
    let qtype = u16::from_be_bytes([*message.get(at + 1)?, *message.get(at + 2)?]);
    Some((name, qtype))
}

/// A worker's dnstap side: its queue and its sample counter. The forwarder of the worker
/// holds one of its own, with its own queue, for upstream messages.
#[derive(Debug)]
pub(crate) struct Tap {
    feed: Feed,
    identity: Arc<[u8]>,
    version: Arc<[u8]>,
    sample: u32,
    seen: u32,
    stats: Arc<WorkerStats>,
}

impl Tap {
    /// Whether the next message is sampled.
    #[inline]
    fn sampled(&mut self) -> bool {
        self.seen += 1;
        if self.seen < self.sample {
            return false;
        }
        self.seen = 0;
        true
    }

    /// Encodes `event` and queues it, counting it dropped when the queue is full.
    fn send(&self, event: &Event<'_>) {
        let mut record = self.feed.buffer();
        dnstap::encode(event, &self.identity, &self.version, &mut record);
        if !self.feed.offer(record) {
            self.stats.dnstap_dropped.incr();
        }
    }

    /// A query to, or a reply from, `upstream`, if sampled.
    pub(crate) fn forwarder(&mut self, kind: Kind, transport: Transport, upstream: SocketAddr, message: &[u8]) {
        if !self.sampled() {
            return;
        }
        self.send(&Event {
            kind,
            transport,
            query_addr: None,
            response_addr: Some(upstream),
            message,
            time: SystemTime::now(),
        });
    }
}

/// A worker's query log side.
#[derive(Debug)]
struct QueryLog {
    feed: Feed,
    limit: Arc<querylog::RateLimit>,
    stats: Arc<WorkerStats>,
}

/// What a worker observes of its queries; only workers of a server with something to observe
/// have one.
#[derive(Debug)]
pub(crate) struct Observer {
    tap: Option<Tap>,
    /// The forwarder's tap, until the forwarder takes it.
    upstream_tap: Option<Tap>,
    log: Option<QueryLog>,
    top: Option<TopCounter>,
    /// Lower-cased query name, reused from query to query.
    name: Vec<u8>,
    /// When the messages now being answered were received, on the wall clock: their
    /// `CLIENT_QUERY` time. Read once per receive batch, and only with dnstap on, so that a
    /// query's message never comes after the `FORWARDER_QUERY` it caused, stamped as it left.
    received: SystemTime,
}

impl Observer {
    /// The dnstap side of the worker's forwarder.
    pub(crate) fn take_upstream_tap(&mut self) -> Option<Tap> {
        self.upstream_tap.take()
    }

    /// A batch of messages was just received (a receive call returned datagrams, or a TCP
    /// turn is about to read and answer its connections): stamps their `CLIENT_QUERY` time.
    /// One clock read a batch rather than one a query, and none without dnstap.
    #[inline]
    pub(crate) fn batch_received(&mut self) {
        if self.tap.is_some() {
            self.received = SystemTime::now();
        }
    }

    /// A query from `client` arrived on `transport` and was answered with `reply` (`None`:
    /// dropped) `since` its arrival.
    pub(crate) fn exchange(
        &mut self,
        transport: Transport,
        query: &[u8],
        reply: Option<&[u8]>,
        client: &Peer,
        since: Instant,
    ) {
        let client = client.addr();
        self.count(query, client);
        let tapped = self.tap.as_mut().is_some_and(Tap::sampled);
        if tapped {
            self.tap_client(Kind::ClientQuery, transport, client, query, self.received);
            if let Some(reply) = reply {
                self.tap_client(Kind::ClientResponse, transport, client, reply, SystemTime::now());
            }
        }
        if let Some(reply) = reply {
            self.log(transport, reply, client, since);
        }
    }

    /// A query from `client` went upstream; its reply comes to [`Observer::late_reply`].
    pub(crate) fn forwarded(&mut self, transport: Transport, query: &[u8], client: SocketAddr) {
        self.count(query, client);
        if self.tap.as_mut().is_some_and(Tap::sampled) {
            self.tap_client(Kind::ClientQuery, transport, client, query, self.received);
        }
    }

    /// The reply to a query that waited for an upstream.
    pub(crate) fn late_reply(&mut self, transport: Transport, reply: &[u8], client: SocketAddr, since: Instant) {
        if self.tap.as_mut().is_some_and(Tap::sampled) {
            self.tap_client(Kind::ClientResponse, transport, client, reply, SystemTime::now());
        }
        self.log(transport, reply, client, since);
    }

    /// Publishes the top talkers for the scrape, at most every [`topk::PUBLISH_INTERVAL`].
    pub(crate) fn publish(&mut self, now: Instant) {
        if let Some(top) = self.top.as_mut() {
            top.publish(now);
        }
    }

    fn count(&mut self, query: &[u8], client: SocketAddr) {
        let Some(top) = self.top.as_mut() else {
            return;
        };
        if !top.sampled() {
            return;
        }
        let name = question(query).map(|(name, _)| {
            self.name.clear();
            self.name.extend(name.iter().map(u8::to_ascii_lowercase));
            self.name.as_slice()
        });
        top.count(client.ip(), name);
    }

    fn tap_client(&self, kind: Kind, transport: Transport, client: SocketAddr, message: &[u8], time: SystemTime) {
        if let Some(tap) = &self.tap {
            tap.send(&Event {
                kind,
                transport,
                query_addr: Some(client),
                response_addr: None,
                message,
                time,
            });
        }
    }

    fn log(&self, transport: Transport, reply: &[u8], client: SocketAddr, since: Instant) {
        let Some(log) = &self.log else {
            return;
        };
        let now = Instant::now();
        if !log.limit.allow(now) {
            log.stats.query_log_suppressed.incr();
            return;
        }
        let mut line = log.feed.buffer();
        if querylog::line(
            reply,
            client,
            transport,
            now.saturating_duration_since(since),
            &mut line,
        )
        .is_none()
        {
            return;
        }
        if !log.feed.offer(line) {
            log.stats.query_log_suppressed.incr();
        }
    }
}

/// The writer threads and scrape handles of a server's observation, and each worker's
/// [`Observer`] until the worker takes it.
#[derive(Debug, Default)]
pub(crate) struct Observation {
    /// The writer threads; they end once every worker has.
    pub(crate) threads: Vec<JoinHandle<()>>,
    /// What the metrics endpoint reads.
    pub(crate) reader: ObserveReader,
}

/// What the metrics endpoint reads of the observation.
#[derive(Debug, Clone, Default)]
pub struct ObserveReader {
    pub(crate) dnstap: Option<Arc<SinkStats>>,
    pub(crate) query_log: Option<Arc<SinkStats>>,
    pub(crate) top: Option<TopReader>,
}

impl ObserveReader {
    /// The merged top talkers, when they are counted.
    pub fn top_talkers(&self) -> Option<topk::TopTalkers> {
        self.top.as_ref().map(TopReader::read)
    }

    /// Adds the dnstap and query-log writers' counters to `totals`.
    pub fn add_to(&self, totals: &mut Totals) {
        if let Some(dnstap) = &self.dnstap {
            totals.dnstap_sent += dnstap.sent.load(Ordering::Relaxed);
            totals.dnstap_dropped += dnstap.dropped.load(Ordering::Relaxed);
        }
        if let Some(log) = &self.query_log {
            totals.query_log_lines += log.sent.load(Ordering::Relaxed);
            totals.query_log_suppressed += log.dropped.load(Ordering::Relaxed);
        }
    }
}

impl Observation {
    /// Starts the writer threads `config` needs, and makes an observer for each worker (with
    /// its counters); `None` observers when nothing is observed.
    pub(crate) fn start(
        config: &ObserveConfig,
        workers: &[Arc<WorkerStats>],
    ) -> io::Result<(Observation, Vec<Option<Box<Observer>>>)> {
        let mut observation = Observation::default();
        if !config.is_enabled() {
            return Ok((observation, workers.iter().map(|_| None).collect()));
        }
        let count = workers.len();
        // Two dnstap queues a worker, its own and its forwarder's: each side recycles its
        // buffers through a queue it alone feeds.
        let mut taps: Vec<Option<(Feed, Feed)>> = (0..count).map(|_| None).collect();
        if let Some(d) = &config.dnstap {
            let writer = fstrm::FstrmWriter::new(d.socket.clone(), dnstap::CONTENT_TYPE);
            let (feeds, thread, stats) = sink::spawn("skyline-dnstap", 2 * count, writer)?;
            let mut feeds = feeds.into_iter();
            taps = (0..count).map(|_| feeds.next().zip(feeds.next())).collect();
            observation.threads.push(thread);
            observation.reader.dnstap = Some(stats);
        }
        let mut logs: Vec<Option<Feed>> = (0..count).map(|_| None).collect();
        let limit = config
            .query_log
            .as_ref()
            .map(|q| Arc::new(querylog::RateLimit::new(u64::from(q.rate))));
        if let Some(q) = &config.query_log {
            let out: Box<dyn io::Write + Send> = match &q.target {
                QueryLogTarget::Stderr => Box::new(io::stderr()),
                QueryLogTarget::File(path) => Box::new(io::BufWriter::new(
                    std::fs::OpenOptions::new().create(true).append(true).open(path)?,
                )),
            };
            let (feeds, thread, stats) = sink::spawn("skyline-querylog", count, querylog::LineWriter(out))?;
            logs = feeds.into_iter().map(Some).collect();
            observation.threads.push(thread);
            observation.reader.query_log = Some(stats);
        }
        let cells: Vec<Arc<ArcSwap<Published>>> = match config.top_talkers {
            Some(_) => workers.iter().map(|_| Arc::default()).collect(),
            None => Vec::new(),
        };
        if let Some(top) = config.top_talkers {
            observation.reader.top = Some(TopReader::new(top.k, cells.clone()));
        }
        let identity: Arc<[u8]> = config
            .dnstap
            .as_ref()
            .map_or(&b""[..], |d| d.identity.as_bytes())
            .into();
        let version: Arc<[u8]> = config.dnstap.as_ref().map_or(&b""[..], |d| d.version.as_bytes()).into();
        let sample = config.dnstap.as_ref().map_or(1, |d| d.sample.max(1));
        let observers = workers
            .iter()
            .zip(taps.into_iter().zip(logs))
            .enumerate()
            .map(|(i, (stats, (taps, log)))| {
                let tap = |feed| Tap {
                    feed,
                    identity: Arc::clone(&identity),
                    version: Arc::clone(&version),
                    sample,
                    seen: 0,
                    stats: Arc::clone(stats),
                };
                let (tap, upstream_tap) = match taps {
                    Some((own, upstream)) => (Some(tap(own)), Some(tap(upstream))),
                    None => (None, None),
                };
                Some(Box::new(Observer {
                    tap,
                    upstream_tap,
                    log: log.zip(limit.clone()).map(|(feed, limit)| QueryLog {
                        feed,
                        limit,
                        stats: Arc::clone(stats),
                    }),
                    top: config.top_talkers.map(|t| {
                        let counters = (t.k * topk::COUNTERS_PER_ENTRY).max(topk::MIN_COUNTERS);
                        TopCounter::new(counters, t.sample, Arc::clone(&cells[i]))
                    }),
                    name: Vec::with_capacity(256),
                    received: SystemTime::UNIX_EPOCH,
                }))
            })
            .collect();
        Ok((observation, observers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_is_read_from_a_message() {
        let q = b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01a\x02bc\x00\x00\x01\x00\x01";
        assert_eq!(question(q), Some((&b"\x01a\x02bc\x00"[..], 1)));
        assert_eq!(question(&q[..14]), None);
        assert_eq!(question(&q[..12]), None);
    }
}
