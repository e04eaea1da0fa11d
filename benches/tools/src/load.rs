//! The load generator's engine: keep a window of queries outstanding against one server,
//! sent and received in batches through the data plane's [`PacketIo`], and account for every
//! query — answered (with its latency), lost, or answered wrongly.
//!
//! Batching is the point: one `sendmmsg` and one `recvmmsg` carry many queries, so the client
//! spends far less CPU per query than the server, and the server becomes the bottleneck.

use crate::histogram::Histogram;
use crate::inflight::Inflight;
use crate::pace::Pace;
use crate::query::{Query, QUESTION_START};
use mio::{Events, Interest, Poll, Token};
use skyline_dataplane::io::{Datagrams, KernelUdp, PacketIo, Peer};
use skyline_dataplane::sys::BATCH_SIZE;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

/// Receive slot size: replies to queries without EDNS fit in 512 bytes, with EDNS in the
/// advertised size; a bigger slot only costs memory.
const REPLY_SLOT_LEN: usize = 4096;
/// Socket buffers asked for: room for a whole window of replies arriving while the generator
/// is busy sending.
const SOCKET_BUFFER_LEN: usize = 4 << 20;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server to query.
    pub server: SocketAddr,
    /// How long to send for (ignored with `once`).
    pub duration: Duration,
    /// Most queries outstanding at once.
    pub window: usize,
    /// Most queries per send call (at most [`BATCH_SIZE`]).
    pub batch: usize,
    /// Target rate in queries per second; `None` sends as fast as the window allows.
    pub rate: Option<f64>,
    /// How long a query may wait for its reply before it counts as lost.
    pub timeout: Duration,
    /// Client sockets (source ports) used in turn; more than one spreads the load over the
    /// SO_REUSEPORT sockets of a multi-worker server.
    pub sockets: usize,
    /// Send every query of the file exactly once, then stop (for instruction counts).
    pub once: bool,
    /// Poll sockets without sleeping. Paced runs always do, so that a reply is stamped when it
    /// arrives rather than when a millisecond-granular wait ends.
    pub spin: bool,
    /// Seed of the ID order.
    pub seed: u64,
    /// The address the client sockets send from; `None`: the kernel's choice. A benchmark
    /// runs its legitimate client and its flood from different loopback addresses, so that
    /// the server tells them apart as it would two networks.
    pub source: Option<IpAddr>,
}

/// What happened during a run.
#[derive(Debug, Default)]
pub struct Report {
    /// Queries handed to the kernel.
    pub sent: u64,
    /// Replies matching an outstanding query's ID and question.
    pub answered: u64,
    /// Queries that got no reply within the timeout (or by the end of the run).
    pub lost: u64,
    /// Replies with an outstanding ID but a different question (case included).
    pub mismatched: u64,
    /// Replies whose ID was not outstanding: late after a timeout, or duplicates.
    pub unexpected: u64,
    /// Queries the kernel would not take.
    pub send_failures: u64,
    /// Answered replies per RCODE (the low four bits).
    pub rcodes: [u64; 16],
    /// Answered replies with the TC bit.
    pub truncated: u64,
    /// Bytes of answered replies.
    pub reply_bytes: u64,
    /// From the first send to the last.
    pub elapsed: Duration,
    /// This process's CPU time during the run, where `/proc` tells.
    pub client_cpu: Option<Duration>,
    /// Latency of every answered query, in nanoseconds.
    pub latency: Histogram,
}

impl Report {
    /// Answered queries per second of sending.
    pub fn qps(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.answered as f64 / secs
        } else {
            0.0
        }
    }

    /// One line of `key=value` pairs for scripts; latencies in microseconds.
    pub fn machine_line(&self) -> String {
        let us = |ns: u64| ns as f64 / 1e3;
        let client = match self.client_cpu {
            Some(cpu) if self.answered > 0 => {
                format!("{:.3}", cpu.as_secs_f64() * 1e6 / self.answered as f64)
            }
            _ => "nan".to_string(),
        };
        let r = &self.rcodes;
        format!(
            "RESULT qps={:.0} sent={} answered={} lost={} mismatched={} unexpected={} \
             send_failures={} avg_us={:.1} p50_us={:.1} p99_us={:.1} p999_us={:.1} max_us={:.1} \
             noerror={} nxdomain={} servfail={} refused={} other_rcode={} truncated={} \
             avg_reply_bytes={:.1} elapsed_s={:.3} client_cpu_us_per_query={}",
            self.qps(),
            self.sent,
            self.answered,
            self.lost,
            self.mismatched,
            self.unexpected,
            self.send_failures,
            self.latency.mean() / 1e3,
            us(self.latency.quantile(0.5)),
            us(self.latency.quantile(0.99)),
            us(self.latency.quantile(0.999)),
            us(self.latency.max()),
            r[0],
            r[3],
            r[2],
            r[5],
            self.answered - r[0] - r[2] - r[3] - r[5],
            self.truncated,
            if self.answered > 0 {
                self.reply_bytes as f64 / self.answered as f64
            } else {
                0.0
            },
            self.elapsed.as_secs_f64(),
            client,
        )
    }
}

/// A client socket of the server's family on an ephemeral port of `source` (any address when
/// `None`), connected to the server so that only its replies arrive and the kernel routes
/// each send without a lookup.
pub fn client_socket(server: SocketAddr, source: Option<IpAddr>) -> io::Result<KernelUdp> {
    let socket = Socket::new(Domain::for_address(server), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: smaller buffers only mean losses show up sooner under bursts.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_LEN);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER_LEN);
    let any = match server {
        SocketAddr::V4(_) => IpAddr::from(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::from(Ipv6Addr::UNSPECIFIED),
    };
    socket.bind(&SocketAddr::new(source.unwrap_or(any), 0).into())?;
    socket.connect(&server.into())?;
    KernelUdp::new(socket.into())
}

/// Runs the load described by `config` with `queries` (sent in file order, from the start
/// again when the file runs out) and reports what happened.
pub fn run(config: &Config, queries: &[Query]) -> io::Result<Report> {
    if queries.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no queries"));
    }
    let mut poll = Poll::new()?;
    let mut sockets = Vec::with_capacity(config.sockets.max(1));
    for i in 0..config.sockets.max(1) {
        let mut socket = client_socket(config.server, config.source)?;
        poll.registry().register(&mut socket, Token(i), Interest::READABLE)?;
        sockets.push(socket);
    }
    let longest = queries.iter().map(|q| q.message.len()).max().unwrap_or(0);
    let mut state = State {
        config,
        server: Peer::from(config.server),
        queries,
        inflight: Inflight::new(config.seed),
        replies: Datagrams::new(REPLY_SLOT_LEN),
        sends: Datagrams::new(longest),
        report: Report::default(),
        origin: Instant::now(),
        next: 0,
    };
    let cpu_before = crate::cpu::own();
    state.drive(&mut poll, &mut sockets)?;
    let cpu_after = crate::cpu::own();
    let mut report = state.report;
    report.client_cpu = cpu_before.zip(cpu_after).map(|(b, a)| a.saturating_sub(b));
    Ok(report)
}

struct State<'a> {
    config: &'a Config,
    /// The server in the form every send takes.
    server: Peer,
    queries: &'a [Query],
    inflight: Inflight,
    replies: Datagrams,
    sends: Datagrams,
    report: Report,
    origin: Instant,
    next: usize,
}

impl State<'_> {
    fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    fn drive(&mut self, poll: &mut Poll, sockets: &mut [KernelUdp]) -> io::Result<()> {
        let config = self.config;
        let timeout = config.timeout.as_nanos() as u64;
        let send_until = if config.once {
            u64::MAX
        } else {
            config.duration.as_nanos() as u64
        };
        let batch = config.batch.clamp(1, BATCH_SIZE);
        let mut pace = config.rate.map(|rate| Pace::new(rate, batch, 0));
        let spin = config.spin || pace.is_some();
        let mut events = Events::with_capacity(sockets.len().max(1));
        let mut stopped_at = None;
        let mut turn = 0;
        loop {
            let now = self.now();
            if now >= timeout {
                self.report.lost += self.inflight.expire(now - timeout) as u64;
            }
            let exhausted = config.once && self.next >= self.queries.len();
            let sending = now < send_until && !exhausted;
            if !sending {
                let stop = *stopped_at.get_or_insert(now);
                if self.inflight.outstanding() == 0 || now >= stop.saturating_add(timeout) {
                    self.report.lost += self.inflight.outstanding() as u64;
                    self.report.elapsed = Duration::from_nanos(stop);
                    return Ok(());
                }
            }
            let mut busy = false;
            if sending {
                let mut n = config.window.saturating_sub(self.inflight.outstanding());
                n = n.min(batch);
                if config.once {
                    n = n.min(self.queries.len() - self.next);
                }
                if let Some(pace) = &mut pace {
                    n = pace.take(now, n);
                }
                if n > 0 {
                    self.send(&mut sockets[turn % sockets.len()], n);
                    turn += 1;
                    busy = true;
                }
            }
            for socket in sockets.iter_mut() {
                busy |= self.receive(socket)?;
            }
            if !busy && !spin {
                let mut wake = stopped_at.map_or(send_until, |stop: u64| stop.saturating_add(timeout));
                if let Some(oldest) = self.inflight.oldest() {
                    wake = wake.min(oldest.saturating_add(timeout));
                }
                let wait = Duration::from_nanos(wake.saturating_sub(self.now()));
                match poll.poll(&mut events, Some(wait)) {
                    Err(e) if e.kind() != io::ErrorKind::Interrupted => return Err(e),
                    _ => {}
                }
            }
        }
    }

    /// Sends the next `n` queries of the file in one batch.
    fn send(&mut self, socket: &mut KernelUdp, n: usize) {
        let now = self.now();
        self.sends.clear();
        let mut ids = [0u16; BATCH_SIZE];
        for id in ids.iter_mut().take(n) {
            let index = self.next % self.queries.len();
            let Some(new) = self.inflight.begin(index as u32, now) else {
                break;
            };
            *id = new;
            let message = &self.queries[index].message;
            self.sends.push_with(&self.server, |out| {
                out[..message.len()].copy_from_slice(message);
                out[..2].copy_from_slice(&new.to_be_bytes());
                Some(message.len())
            });
            self.next += 1;
        }
        let batched = self.sends.len();
        let report = socket.send(&mut self.sends);
        self.report.sent += report.sent as u64;
        if report.dropped > 0 {
            self.report.send_failures += report.dropped as u64;
            // What was not sent is the tail of the batch: free those IDs.
            for &id in &ids[report.sent..batched] {
                self.inflight.cancel(id);
            }
        }
    }

    /// Receives every waiting reply on `socket`; returns whether any arrived.
    fn receive(&mut self, socket: &mut KernelUdp) -> io::Result<bool> {
        let mut any = false;
        loop {
            match socket.recv(&mut self.replies) {
                Ok(_) => {
                    any = true;
                    let now = self.now();
                    for i in 0..self.replies.len() {
                        if let Some((reply, _)) = self.replies.get(i) {
                            account(&mut self.report, &mut self.inflight, self.queries, reply, now);
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                // An ICMP error from an earlier send (the server not listening yet): the query
                // concerned times out on its own.
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Matches one reply to its query and counts it.
fn account(report: &mut Report, inflight: &mut Inflight, queries: &[Query], reply: &[u8], now: u64) {
    if reply.len() < QUESTION_START || reply[2] & 0x80 == 0 {
        report.unexpected += 1;
        return;
    }
    let id = u16::from_be_bytes([reply[0], reply[1]]);
    let Some(answered) = inflight.complete(id) else {
        report.unexpected += 1;
        return;
    };
    let question = queries[answered.query as usize].question();
    if reply.get(QUESTION_START..QUESTION_START + question.len()) != Some(question) {
        report.mismatched += 1;
        return;
    }
    report.answered += 1;
    report.rcodes[usize::from(reply[3] & 0x0F)] += 1;
    report.truncated += u64::from(reply[2] & 0x02 != 0);
    report.reply_bytes += reply.len() as u64;
    report.latency.record(now.saturating_sub(answered.sent_at));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{build, QueryOptions};

    fn queries() -> Vec<Query> {
        (0..50)
            .map(|i| build(&format!("h{i}.Svc.skydns.local"), 1, QueryOptions::default()).unwrap())
            .collect()
    }

    #[test]
    fn a_reply_is_matched_by_id_and_question() {
        let qs = queries();
        let mut report = Report::default();
        let mut inflight = Inflight::new(9);
        let id = inflight.begin(3, 1_000).unwrap();
        let mut reply = qs[3].message.clone();
        reply[..2].copy_from_slice(&id.to_be_bytes());
        reply[2] |= 0x80;
        reply[3] |= 3;
        account(&mut report, &mut inflight, &qs, &reply, 6_000);
        assert_eq!((report.answered, report.rcodes[3]), (1, 1));
        assert_eq!(report.latency.quantile(0.5), 5_000);
        account(&mut report, &mut inflight, &qs, &reply, 7_000);
        assert_eq!(report.unexpected, 1);
    }

    #[test]
    fn a_reply_with_another_case_in_the_question_is_a_mismatch() {
        let qs = queries();
        let mut report = Report::default();
        let mut inflight = Inflight::new(9);
        let id = inflight.begin(0, 0).unwrap();
        let mut reply = qs[0].message.clone();
        reply[..2].copy_from_slice(&id.to_be_bytes());
        reply[2] |= 0x80;
        reply[QUESTION_START..].make_ascii_lowercase();
        account(&mut report, &mut inflight, &qs, &reply, 1);
        assert_eq!((report.answered, report.mismatched), (0, 1));
        assert_eq!(inflight.outstanding(), 0);
    }

    #[test]
    fn queries_to_a_silent_port_are_lost_after_the_timeout() {
        let silent = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let config = Config {
            server: silent.local_addr().unwrap(),
            duration: Duration::from_millis(50),
            window: 10,
            batch: 4,
            rate: None,
            timeout: Duration::from_millis(50),
            sockets: 1,
            once: true,
            spin: false,
            seed: 1,
            source: None,
        };
        let report = run(&config, &queries()[..5]).unwrap();
        assert_eq!((report.sent, report.answered, report.lost), (5, 0, 5));
    }
}
