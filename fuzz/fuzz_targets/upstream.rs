//! Any bytes as an upstream's reply to a forwarded question, through what a worker does with
//! one. Two clients miss the cache and share one question of the forwarder's state machine
//! (`forward::machine`), which a script of network events drives with simulated time: the reply
//! on a try (over UDP, or over TCP once a truncated reply asked for it), canned answers,
//! truncations and failures, refused tries, failed sends, timeouts, more clients and
//! questions, refreshes, reconfigurations. Whatever the machine finishes, its clients are
//! answered through the answer path and its answers cached, as the worker does; after the
//! script, time runs until no client waits, a third client asks some seconds later (fresh or
//! stale from the cache), and a reconfiguration to no upstream at all ends everything.
//!
//! The input is five control bytes, a script length `n`, `n` script bytes, then the reply:
//!
//! | byte | chooses |
//! |---|---|
//! | 0 | the question's type, from [`QTYPES`] |
//! | 1 | its name, from [`NAMES`] (spelled differently by each client) |
//! | 2 | bit 0 DO, bit 1 CD, bit 2 TCP for the clients of the script, bit 3 the upstreams are down when the third client asks, bits 4–6 TCP for each of the three clients, bit 7 rotation |
//! | 3 | the EDNS sizes of the clients, from [`UDP_SIZES`]: low nibble the first, high the second, both XORed the third |
//! | 4 | seconds between the end of the script and the third client |
//!
//! A script byte's high nibble is the event, its low nibble `k` an argument; "try `k`" is the
//! `k`-th open try counting from the oldest, round:
//!
//! | event | what happens |
//! |---|---|
//! | 0 | the reply reaches try `k`, its ID that of the try's query when the reply's is 0x5eed (else as far from it as from 0x5eed) |
//! | 1 | a canned NODATA (an SOA living `10 k` s) reaches try `k` |
//! | 2 | a canned truncated reply reaches try `k` |
//! | 3 | a canned SERVFAIL reaches try `k` |
//! | 4 | a canned answer with the wrong ID reaches try `k` |
//! | 5 | try `k` is refused |
//! | 6 | the next try cannot be sent: the host is out of sockets (`k` odd) or the upstream unreachable |
//! | 7 | time runs to the machine's next timeout |
//! | 8 | `50 (k + 1)` ms pass |
//! | 9 | another client asks the question |
//! | 10 | a client asks another name, from [`NAMES`] |
//! | 11 | a reconfiguration: the same (`k % 4` = 0), other default servers (1), no stub zone (2), rotation switched (3) |
//! | 12 | the question is refreshed, no client waiting |
//! | 13–15 | nothing |
//!
//! Checked: nothing panics; a message hickory-proto reads as anything but a response to the
//! question asked, with its ID, is judged mismatched by `forward::read_reply`; the machine's
//! actions keep the rules of `skyline_fuzz::network` (well-formed queries, TCP only after TC,
//! closes only of open tries, nothing left open); questions in flight stay within the bound;
//! every client is answered exactly once, and no later than its question's budget (the machine
//! never asks to be woken past it); a question ends with an answer only when a reply that is one
//! came, and for the fuzzed reply only when `read_reply` takes it; an answer's lifetime keeps
//! the cache's caps and is cached exactly when it may live; every reply a client gets keeps the
//! properties of `skyline_fuzz::forwarded` (its ID and question, QR, its size), has the
//! upstream's rcode and records, counts TTLs down from the entry's lifetime or reads 30 when
//! stale; a SERVFAIL says why in an Extended DNS Error; the third client is served stale only
//! while the upstreams are down and exactly past the lifetime.

#![no_main]

use hickory_proto::op::{Message, MessageType, OpCode};
use hickory_proto::rr::{DNSClass, RecordType};
use libfuzzer_sys::fuzz_target;
use skyline_dataplane::cache::{Cache, CacheConfig, Entry, Key, STALE_TTL};
use skyline_dataplane::forward::machine::{Entropy, Kind, Machine, Protocol, Transmit};
use skyline_dataplane::forward::{read_reply, Failure, ForwardConfig, Resolved, Route, Routes, StubZone, Verdict};
use skyline_dataplane::wire::types::{ede, rcode, rtype, MAX_MESSAGE_LEN};
use skyline_dataplane::wire::{LowerName, Name};
use skyline_dataplane::{answer_recursive, Context, Outcome, Recursion, Resolution, Transport};
use skyline_fuzz::fixture;
use skyline_fuzz::forwarded::{self, Client};
use skyline_fuzz::network::{canned, query_id, with_id, Network, Unsent};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The ID of the upstream query the reply answers.
const UPSTREAM_ID: u16 = 0x5eed;
/// Control bytes before the script's length.
const CONTROL_LEN: usize = 5;
/// The forwarding timeout: how long a client may wait.
const BUDGET: Duration = Duration::from_millis(1500);
/// Questions in flight at most: few, so that scripts reach the bound.
const MAX_IN_FLIGHT: usize = 4;
/// Timeouts run after the script, more than any question needs to end.
const SETTLE_ROUNDS: usize = 64;

/// Names outside the fixture's zones, as the first client spells them: the root, mixed case,
/// digits, a name in `cluster.local.` (negative answers capped at 5 s), one in a reverse zone
/// with no record there, one in a stub zone, many labels, and 255 bytes.
const NAMES: &[&str] = &[
    ".",
    "Example.COM.",
    "wWw.ExAmPlE.oRg.",
    "_Sip._Udp.Svc.Cluster.Local.",
    "1.2.0.192.In-Addr.Arpa.",
    "Host.Corp.Example.",
    "0123456789.Digits.Test.",
    "a.B.c.D.e.F.g.H.i.J.k.L.m.N.o.P.Example.Net.",
    "xn--Bcher-kva.Example.",
    concat!(
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.",
        "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.",
        "CcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcC.",
        "ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd."
    ),
];

/// Question types: the common ones, those with names in their data, meta types a forwarder
/// still forwards, and an unknown one.
const QTYPES: [u16; 16] = [
    rtype::A,
    rtype::AAAA,
    rtype::CNAME,
    rtype::SRV,
    rtype::MX,
    rtype::TXT,
    rtype::PTR,
    rtype::NS,
    rtype::SOA,
    rtype::NAPTR,
    rtype::DNAME,
    rtype::SVCB,
    rtype::HTTPS,
    rtype::CAA,
    rtype::ANY,
    65280,
];

/// EDNS sizes a client may ask for; `None` is a query without an OPT (512 bytes).
const UDP_SIZES: [Option<u16>; 16] = [
    None,
    Some(512),
    Some(1232),
    Some(4096),
    Some(0),
    Some(100),
    Some(700),
    Some(1400),
    Some(65535),
    Some(513),
    Some(1024),
    Some(1231),
    None,
    Some(600),
    Some(2048),
    Some(900),
];

/// `dotted` in uncompressed wire form, keeping its case.
fn wire(dotted: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for label in dotted.split('.').filter(|l| !l.is_empty()) {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out
}

/// The same name in other letters' case (length bytes are below 64, never letters).
fn swap_case(wire: &[u8]) -> Vec<u8> {
    wire.iter()
        .map(|&b| match b {
            b'a'..=b'z' => b.to_ascii_uppercase(),
            b'A'..=b'Z' => b.to_ascii_lowercase(),
            _ => b,
        })
        .collect()
}

/// Upstream server `i`: 1 and 2 are the default resolvers, 3 the stub zone's, 4 the one a
/// reconfiguration brings in.
fn server(i: u8) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, i], 53))
}

/// Whether `reply` is, as hickory-proto reads it, a response with the upstream query's ID to
/// the question `dotted` `qtype` IN (the name in any case).
fn answers(reply: &Message, dotted: &str, qtype: u16) -> bool {
    let question = match reply.queries() {
        [question] => question,
        _ => return false,
    };
    reply.id() == UPSTREAM_ID
        && reply.message_type() == MessageType::Response
        && reply.op_code() == OpCode::Query
        && question.name().to_ascii().eq_ignore_ascii_case(dotted)
        && question.query_type() == RecordType::from(qtype)
        && question.query_class() == DNSClass::IN
}

/// A SERVFAIL that says why (when the client sent an OPT to carry it).
fn servfail(client: &Client, reply: &[u8], why: Failure) {
    let parsed = forwarded::hickory(reply);
    assert_eq!(u16::from(parsed.response_code()), rcode::SERVFAIL);
    if parsed.extensions().is_some() {
        assert_eq!(forwarded::ede(&parsed), Some(why.ede()), "{client:?}");
    }
}

/// Every TTL of a served reply (its OPT aside) is at most `bound`, or exactly `bound` when
/// `exact`.
fn ttls(served: &Message, bound: u32, exact: bool) {
    let records = served
        .answers()
        .iter()
        .chain(served.name_servers())
        .chain(served.additionals());
    for record in records {
        let ttl = record.ttl();
        assert!(
            if exact { ttl == bound } else { ttl <= bound },
            "TTL {ttl} against {bound}: {record:?}"
        );
    }
}

/// A stale reply reads [`STALE_TTL`] and says so in an Extended DNS Error.
fn stale(reply: &[u8], upstream: &Message) {
    let served = forwarded::relayed(reply, upstream);
    ttls(&served, STALE_TTL, true);
    if served.extensions().is_some() {
        let code = if u16::from(served.response_code()) == rcode::NXDOMAIN {
            ede::STALE_NXDOMAIN
        } else {
            ede::STALE_ANSWER
        };
        assert_eq!(forwarded::ede(&served), Some(code));
    }
}

/// The reply an outcome wrote into `out`, checked against `client`.
fn sent<'a>(client: &Client, outcome: Outcome, out: &'a [u8]) -> &'a [u8] {
    let Outcome::Reply(reply) = outcome else {
        panic!("a client of the forwarder gets no reply: {outcome:?}");
    };
    let bytes = &out[..reply.len()];
    forwarded::reply(client, bytes);
    bytes
}

/// A client of the simulated worker.
struct Asked {
    client: Client,
    /// When its question's budget runs out at the latest.
    deadline: Instant,
    waiting: bool,
}

/// What the cache holds for a key, as far as the checks need.
struct Stored {
    lifetime: u32,
    at: Instant,
    /// The upstream's message, as hickory-proto reads it.
    message: Option<Message>,
}

/// A message being handed to a try.
struct Delivery {
    bytes: Vec<u8>,
    /// It is the fuzzed reply.
    fuzzed: bool,
    protocol: Protocol,
}

/// One worker's forwarding, with the network and the clock simulated.
struct Sim<'a> {
    reply: &'a [u8],
    /// The first question, and whether `read_reply` takes the fuzzed reply as an answer to it
    /// over UDP and over TCP.
    key: Option<Key>,
    takes: [bool; 2],
    qtype: u16,
    name: Vec<u8>,
    control: [u8; CONTROL_LEN],
    cache: Cache,
    routes: Routes,
    config: ForwardConfig,
    machine: Machine<usize>,
    network: Network,
    out: Vec<u8>,
    clients: Vec<Asked>,
    stored: HashMap<Vec<u8>, Stored>,
    delivery: Option<Delivery>,
    now: Instant,
}

impl Sim<'_> {
    fn bit(&self, n: u8) -> bool {
        self.control[2] & (1 << n) != 0
    }

    fn transport(&self, n: u8) -> Transport {
        if self.bit(n) {
            Transport::Tcp
        } else {
            Transport::Udp
        }
    }

    /// DO travels in the OPT: with DO every client sends one, so that all share a key.
    fn edns(&self, sizes: u8) -> Option<(u16, bool)> {
        let dnssec_ok = self.bit(0);
        match (UDP_SIZES[usize::from(sizes & 0x0F)], dnssec_ok) {
            (Some(size), _) => Some((size, dnssec_ok)),
            (None, true) => Some((0, true)),
            (None, false) => None,
        }
    }

    /// A client asking the question, spelled `name`, with ID `id`.
    fn client(&self, id: u16, name: &[u8], sizes: u8, tcp_bit: u8) -> Client {
        Client::new(
            id,
            name,
            self.qtype,
            self.bit(1),
            self.edns(sizes),
            self.transport(tcp_bit),
        )
    }

    /// The answer path for `client` at `now`, with `down` per route.
    fn run(&mut self, client: usize, down: &[bool], resolved: Option<Resolved<'_>>) -> Resolution {
        let mut rec = Recursion {
            cache: &mut self.cache,
            routes: &self.routes,
            down,
            allowed: true,
            prohibited: false,
            now: self.now,
            resolved,
        };
        let client = &self.clients[client].client;
        answer_recursive(
            &client.query,
            fixture::snapshot(),
            &Context::new(client.transport),
            &mut rec,
            &mut LowerName::default(),
            &mut self.out,
        )
    }

    /// A new client asks, as the worker answers a query: from the cache, or by submitting its
    /// question (answered at once when it cannot be submitted). Returns the question it
    /// submitted.
    fn ask(&mut self, client: Client) -> Option<Key> {
        let at = self.clients.len();
        self.clients.push(Asked {
            client,
            deadline: self.now + BUDGET,
            waiting: false,
        });
        let down = self.machine.down().to_vec();
        match self.run(at, &down, None) {
            Resolution::Forward(forward) => {
                let key = forward.key.clone();
                let kind = Kind::Clients { stale: forward.stale };
                match self
                    .machine
                    .submit(&forward.key, forward.route, Some(at), kind, self.now)
                {
                    Ok(()) => self.clients[at].waiting = true,
                    Err(why) => self.answer(at, &key, Err(why)),
                }
                self.step();
                Some(key)
            }
            Resolution::Cached {
                outcome,
                stale: served_stale,
                refresh,
            } => {
                let reply = sent(&self.clients[at].client, outcome, &self.out);
                let key = refresh.as_ref().map(|r| r.key.bytes());
                if let Some(upstream) = key.and_then(|k| self.stored.get(k)).and_then(|s| s.message.as_ref()) {
                    if served_stale {
                        stale(reply, upstream);
                    }
                }
                if let Some(refresh) = refresh {
                    let _ = self
                        .machine
                        .submit(&refresh.key, refresh.route, None, Kind::Refresh, self.now);
                    self.step();
                }
                None
            }
            Resolution::Done(outcome) => {
                sent(&self.clients[at].client, outcome, &self.out);
                None
            }
            Resolution::Looped => panic!("no stub loop guard was sent"),
            Resolution::Fetch { .. } => panic!("an outside name has no glue to fetch"),
        }
    }

    /// Answers client `at`, who waited for `key`, with `result`.
    fn answer(&mut self, at: usize, key: &Key, result: Result<&Entry, Failure>) {
        let resolved = match result {
            Ok(entry) => Resolved::Answer(key.key_ref(), entry),
            Err(why) => Resolved::Failed(key.key_ref(), why),
        };
        let down = self.machine.down().to_vec();
        let resolution = self.run(at, &down, Some(resolved));
        let client = &self.clients[at].client;
        match (resolution, result) {
            (Resolution::Done(outcome), Ok(entry)) => {
                let reply = sent(client, outcome, &self.out);
                assert_eq!(u16::from(reply[3] & 0x0F), entry.rcode());
                if let Some(upstream) = self.delivery.as_ref().and_then(|d| Message::from_vec(&d.bytes).ok()) {
                    ttls(&forwarded::relayed(reply, &upstream), entry.lifetime(), false);
                }
            }
            (Resolution::Done(outcome), Err(why)) => servfail(client, sent(client, outcome, &self.out), why),
            (
                Resolution::Cached {
                    outcome,
                    stale: served_stale,
                    ..
                },
                Err(_),
            ) => {
                let reply = sent(client, outcome, &self.out);
                let upstream = self.stored.get(key.bytes()).and_then(|s| s.message.as_ref());
                if let (Some(upstream), true) = (upstream, served_stale) {
                    stale(reply, upstream);
                }
            }
            (resolution, result) => panic!("a client that waited gets {resolution:?} for {result:?}"),
        }
    }

    /// Carries out the machine's actions, then answers the clients of the questions that
    /// ended and caches their answers, as the worker's turn does.
    fn step(&mut self) {
        self.network.step(&mut self.machine, self.now);
        let mut done = Vec::new();
        self.machine.drain_done(&mut done);
        for finished in done {
            let message = match &finished.result {
                Ok(entry) => {
                    let delivery = self.delivery.as_ref().expect("an answer arrives with a reply");
                    let first = self.key.as_ref().is_some_and(|k| k.bytes() == finished.key.bytes());
                    if delivery.fuzzed && first {
                        let over_tcp = delivery.protocol.is_stream();
                        assert!(self.takes[usize::from(over_tcp)], "an answer read_reply does not take");
                    }
                    assert!(matches!(entry.rcode(), rcode::NOERROR | rcode::NXDOMAIN));
                    let caps = self.cache.caps_for(finished.key.name_wire());
                    let cap = if entry.is_negative() {
                        caps.negative_max
                    } else {
                        caps.max.max(caps.min)
                    };
                    assert!(entry.lifetime() <= cap, "an answer over its cap");
                    Message::from_vec(&delivery.bytes).ok()
                }
                Err(_) => None,
            };
            for &at in &finished.waiters {
                assert!(self.clients[at].waiting, "a client answered twice");
                self.clients[at].waiting = false;
                self.answer(at, &finished.key, finished.result.as_ref().map_err(|&why| why));
            }
            if let (Ok(entry), true) = (finished.result, finished.store) {
                let (lifetime, at) = (entry.lifetime(), entry.stored());
                let inserted = self.cache.insert(finished.key.bytes(), entry);
                assert_eq!(inserted.stored, lifetime > 0, "cached exactly when it may live");
                if inserted.stored {
                    let stored = Stored { lifetime, at, message };
                    self.stored.insert(finished.key.bytes().to_vec(), stored);
                }
            }
        }
        assert!(self.machine.in_flight() <= MAX_IN_FLIGHT, "past the in-flight bound");
        let waiting = self.clients.iter().filter(|c| c.waiting).map(|c| c.deadline).min();
        if let Some(deadline) = waiting {
            assert!(deadline > self.now, "a client waits past its budget");
            let due = self.machine.poll_timeout().expect("a client waits: a timer is set");
            assert!(due <= deadline, "the machine sleeps past a client's budget");
        }
    }

    /// Lets time run to `to`.
    fn advance(&mut self, to: Instant) {
        self.now = self.now.max(to);
        self.machine.handle_timeout(&self.cache, self.now);
        self.step();
    }

    /// Hands `bytes` to open try `k`.
    fn deliver(&mut self, k: u8, fuzzed: bool, bytes: impl FnOnce(&Transmit) -> Vec<u8>) {
        let Some(to) = self.network.pick(usize::from(k)) else {
            return;
        };
        let bytes = bytes(&to);
        self.network
            .deliver(&mut self.machine, &to, &bytes, &self.cache, self.now);
        self.delivery = Some(Delivery {
            bytes,
            fuzzed,
            protocol: to.protocol,
        });
        self.step();
        self.delivery = None;
    }

    /// Switches to the forwarding of variant `k`, as a reload does.
    fn reconfigure(&mut self, k: u8) {
        let mut config = self.config.clone();
        match k % 4 {
            0 => {}
            1 => config.upstreams = vec![server(2), server(4)],
            2 => config.stub_zones.clear(),
            _ => config.rotate = !config.rotate,
        }
        let mut groups = vec![config.upstreams.as_slice()];
        groups.extend(config.stub_zones.iter().map(|z| z.servers.as_slice()));
        self.machine
            .replace(&groups, &config, &config.health(self.now), self.now);
        let stubs = config.stub_zones.iter().map(|z| z.zone.clone()).collect();
        self.routes = Routes::new(0, true, stubs);
        self.config = config;
        self.step();
    }

    fn event(&mut self, event: u8, n: usize) {
        let k = event & 0x0F;
        match event >> 4 {
            0 => {
                let reply = self.reply;
                self.deliver(k, true, |to| match reply.get(..2) {
                    Some(id) => {
                        let distance = u16::from_be_bytes([id[0], id[1]]) ^ UPSTREAM_ID;
                        with_id(reply, query_id(to) ^ distance)
                    }
                    None => reply.to_vec(),
                });
            }
            1 => self.deliver(k, false, |to| canned(to.query(), 0, false, 10 * u32::from(k))),
            2 => self.deliver(k, false, |to| canned(to.query(), 0, true, 60)),
            3 => self.deliver(k, false, |to| canned(to.query(), 2, false, 60)),
            4 => self.deliver(k, false, |to| {
                let wrong = query_id(to) ^ (u16::from(k) + 1);
                with_id(&canned(to.query(), 0, false, 60), wrong)
            }),
            5 => {
                if let Some(to) = self.network.pick(usize::from(k)) {
                    self.network.refuse(&mut self.machine, &to, &self.cache, self.now);
                    self.step();
                }
            }
            6 => {
                self.network.fail_next = Some(if k % 2 == 1 { Unsent::Local } else { Unsent::Upstream });
            }
            7 => {
                if let Some(due) = self.machine.poll_timeout() {
                    self.advance(due);
                }
            }
            8 => self.advance(self.now + Duration::from_millis(50 * (u64::from(k) + 1))),
            9 => {
                let (name, sizes) = match k & 1 {
                    0 => (self.name.clone(), self.control[3]),
                    _ => (swap_case(&self.name), self.control[3] >> 4),
                };
                let client = self.client(0xD000 + n as u16, &name, sizes, 2);
                self.ask(client);
            }
            10 => {
                let index = (usize::from(self.control[1]) + 1 + usize::from(k)) % NAMES.len();
                let client = self.client(0xE000 + n as u16, &wire(NAMES[index]), self.control[3], 2);
                self.ask(client);
            }
            11 => self.reconfigure(k),
            12 => {
                let Some(key) = self.key.clone() else {
                    return;
                };
                let lower = LowerName::from_wire(key.name_wire()).expect("a key holds a name");
                if let Some(route) = self.routes.route(&lower) {
                    let _ = self.machine.submit(&key, route, None, Kind::Refresh, self.now);
                    self.step();
                }
            }
            _ => {}
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((control, rest)) = data.split_at_checked(CONTROL_LEN) else {
        return;
    };
    let Some((&script_len, rest)) = rest.split_first() else {
        return;
    };
    let (script, reply) = rest.split_at(usize::from(script_len).min(rest.len()));
    let control: [u8; CONTROL_LEN] = control.try_into().expect("five bytes");
    let qtype = QTYPES[usize::from(control[0]) % QTYPES.len()];
    let dotted = NAMES[usize::from(control[1]) % NAMES.len()];
    let name = wire(dotted);
    let down_later = control[2] & 0x08 != 0;
    let age = u64::from(control[4]);

    let start = Instant::now();
    let corp = Name::from_dotted("corp.example.").expect("static name");
    let config = ForwardConfig {
        upstreams: vec![server(1), server(2)],
        stub_zones: vec![StubZone::new(corp.clone(), vec![server(3)])],
        rotate: control[2] & 0x80 != 0,
        timeout: BUDGET,
        max_in_flight: MAX_IN_FLIGHT,
        ..ForwardConfig::default()
    };
    let groups = [config.upstreams.as_slice(), config.stub_zones[0].servers.as_slice()];
    let seed = u64::from_le_bytes([control[0], control[1], control[2], control[3], control[4], 0, 0, 0]);
    let mut sim = Sim {
        reply,
        key: None,
        takes: [false; 2],
        qtype,
        name: name.clone(),
        control,
        cache: Cache::new(CacheConfig {
            max_bytes: 1 << 20,
            ..CacheConfig::default()
        }),
        routes: Routes::new(0, true, vec![corp]),
        machine: Machine::new(&groups, &config, &config.health(start), Entropy::seeded(seed)),
        config,
        network: Network::default(),
        out: vec![0u8; MAX_MESSAGE_LEN],
        clients: Vec::new(),
        stored: HashMap::new(),
        delivery: None,
        now: start,
    };

    // Two clients miss the cache; the second merges into the first one's question.
    let first = sim.client(0xA1A1, &name, control[3], 4);
    let second = sim.client(0xB2B2, &swap_case(&name), control[3] >> 4, 5);
    let key = sim
        .ask(first)
        .expect("a name outside the zones, not cached, goes upstream");
    let merged = sim
        .ask(second)
        .expect("the same name, differently spelled, goes upstream");
    assert_eq!(merged.bytes(), key.bytes(), "one question for both");
    assert!(sim.clients.iter().all(|c| c.waiting), "both wait");
    assert_eq!(sim.machine.in_flight(), 1);
    assert_eq!(sim.network.open.len(), 1, "one try for the question");

    // The reply, judged directly as the worker's read_reply does.
    let upstream = Message::from_vec(reply).ok();
    for (over_tcp, takes) in [false, true].into_iter().zip(&mut sim.takes) {
        let verdict = read_reply(reply, UPSTREAM_ID, &key, over_tcp, &sim.cache, start);
        *takes = matches!(verdict, Verdict::Answer(_));
        assert!(
            !over_tcp || !matches!(verdict, Verdict::Truncated),
            "a reply over TCP is never truncated"
        );
        if upstream.as_ref().is_some_and(|m| !answers(m, dotted, qtype)) {
            assert!(
                matches!(verdict, Verdict::Mismatched(_)),
                "hickory reads another message than the reply awaited, skyline takes it: {verdict:?}"
            );
        }
    }
    sim.key = Some(key.clone());

    for (n, &event) in script.iter().enumerate() {
        sim.event(event, n);
    }
    for _ in 0..SETTLE_ROUNDS {
        if !sim.clients.iter().any(|c| c.waiting) {
            break;
        }
        let due = sim.machine.poll_timeout().expect("a client waits: a timer is set");
        sim.advance(due);
    }
    assert!(sim.clients.iter().all(|c| !c.waiting), "clients still wait");

    // A third client, later: served from the cache, fresh or (upstreams down) stale.
    sim.now += Duration::from_secs(age);
    let third = sim.client(0xC3C3, &name.to_ascii_lowercase(), control[3] ^ (control[3] >> 4), 6);
    let at = sim.clients.len();
    sim.clients.push(Asked {
        client: third,
        deadline: sim.now + BUDGET,
        waiting: false,
    });
    let lower = LowerName::from_wire(key.name_wire()).expect("a key holds a name");
    let route = sim.routes.route(&lower).map(Route::index);
    let mut down = sim.machine.down().to_vec();
    if down_later {
        down.iter_mut().for_each(|d| *d = true);
    }
    let route_down = route.and_then(|r| down.get(r).copied()).unwrap_or(false);
    let stored = sim.stored.remove(key.bytes());
    let elapsed = stored
        .as_ref()
        .map(|s| sim.now.saturating_duration_since(s.at).as_secs());
    let fresh = stored
        .as_ref()
        .zip(elapsed)
        .is_some_and(|(s, e)| e < u64::from(s.lifetime));
    match sim.run(at, &down, None) {
        Resolution::Cached {
            outcome,
            stale: served_stale,
            ..
        } => {
            let (stored, elapsed) = stored.zip(elapsed).expect("served from an empty cache");
            assert_eq!(served_stale, !fresh, "stale exactly past the lifetime");
            assert!(!served_stale || route_down, "stale only while the upstreams are down");
            let reply = sent(&sim.clients[at].client, outcome, &sim.out);
            if let Some(upstream) = &stored.message {
                if served_stale {
                    stale(reply, upstream);
                } else {
                    let left = stored.lifetime - elapsed as u32;
                    ttls(&forwarded::relayed(reply, upstream), left, false);
                }
            }
        }
        Resolution::Done(outcome) => {
            assert!(
                route_down && stored.is_none(),
                "a miss answered without asking upstream"
            );
            servfail(
                &sim.clients[at].client,
                sent(&sim.clients[at].client, outcome, &sim.out),
                Failure::Unreachable,
            );
        }
        Resolution::Forward(_) => {
            assert!(!route_down, "forwarded while every upstream is down");
            assert!(!fresh, "a fresh entry missed");
        }
        Resolution::Looped => panic!("no stub loop guard was sent"),
        Resolution::Fetch { .. } => panic!("an outside name has no glue to fetch"),
    }

    // No upstream at all: whatever is still in flight (refreshes, probes) ends, every try closed.
    let none = ForwardConfig {
        upstreams: Vec::new(),
        stub_zones: Vec::new(),
        ..sim.config.clone()
    };
    sim.machine.replace(&[], &none, &none.health(sim.now), sim.now);
    sim.step();
    assert_eq!(sim.machine.in_flight(), 0, "questions outlive their routes");
    assert!(sim.network.open.is_empty());
});
