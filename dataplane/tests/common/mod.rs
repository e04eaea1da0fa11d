//! Shared fixtures for the data plane's integration tests: a hand-made snapshot and raw query
//! builders, so that malformed messages can be expressed byte by byte.

#![allow(dead_code)]

use hickory_proto::op::Message;
use skyline_dataplane::snapshot::rrset::{AnswerSet, CompiledAnswer, Rdata, Record, Rrset};
use skyline_dataplane::snapshot::{Identity, Node, Slot, Snapshot, Zone, ZoneKind, ZoneState};
use skyline_dataplane::wire::{LowerName, Name};
use skyline_dataplane::{answer, Context, Outcome, Transport};
use std::net::Ipv4Addr;

pub const ZONE: &str = "skydns.test.";

fn name(s: &str) -> Name {
    Name::from_dotted(s).unwrap()
}

fn soa_rdata() -> Box<[u8]> {
    let mut rdata = Vec::new();
    rdata.extend_from_slice(name("ns.dns.skydns.test.").wire());
    rdata.extend_from_slice(name("hostmaster.skydns.test.").wire());
    for v in [1_700_000_000u32, 28800, 7200, 604800, 60] {
        rdata.extend_from_slice(&v.to_be_bytes());
    }
    rdata.into()
}

fn node(owner: &str, slots: &[(Slot, AnswerSet)]) -> (Name, Node) {
    let n = name(owner);
    let q = LowerName::from_wire(n.wire()).unwrap();
    let mut node = Node::default();
    for (slot, set) in slots {
        node.set_answer(*slot, Some(CompiledAnswer::compile(&q, set)));
    }
    (n, node)
}

fn a_set(owner: Option<&str>, ips: impl IntoIterator<Item = Ipv4Addr>, ttl: u32) -> Rrset {
    Rrset {
        owner: owner.map(name),
        records: ips
            .into_iter()
            .map(|ip| Record {
                ttl,
                rdata: Rdata::A(ip),
            })
            .collect(),
        rotate: true,
    }
}

/// A zone `skydns.test.` holding:
/// - `web.skydns.test.` A 10.0.0.1, 10.0.0.2 (rotated);
/// - `big.skydns.test.` A ×40 (too big for 512 bytes, fits 1232);
/// - `srv.skydns.test.` SRV ×2 with 30 A glue records each for its two targets;
/// - the apex with SOA.
pub fn snapshot() -> Snapshot {
    let mut snap = Snapshot {
        generation: 1,
        zones: vec![Zone::new(
            name(ZONE),
            ZoneKind::Authoritative,
            ZoneState::Ready,
            Some(soa_rdata()),
            60,
            3600,
        )]
        .into(),
        ..Snapshot::default()
    };
    let soa = AnswerSet {
        flattened: Vec::new(),
        answer: vec![Rrset {
            owner: None,
            records: vec![Record {
                ttl: 3600,
                rdata: Rdata::Soa {
                    mname: name("ns.dns.skydns.test."),
                    rname: name("hostmaster.skydns.test."),
                    serial: 1_700_000_000,
                    timers: [28800, 7200, 604800, 60],
                },
            }],
            rotate: false,
        }],
        additional: vec![],
    };
    let web = AnswerSet {
        flattened: Vec::new(),
        answer: vec![a_set(
            None,
            [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)],
            3600,
        )],
        additional: vec![],
    };
    let big = AnswerSet {
        flattened: Vec::new(),
        answer: vec![a_set(None, (0..40).map(|i| Ipv4Addr::new(10, 1, 0, i)), 60)],
        additional: vec![],
    };
    let targets = ["t1.skydns.test.", "t2.skydns.test."];
    let srv = AnswerSet {
        flattened: Vec::new(),
        answer: vec![Rrset {
            owner: None,
            records: targets
                .iter()
                .map(|t| Record {
                    ttl: 60,
                    rdata: Rdata::Srv {
                        priority: 10,
                        weight: 50,
                        port: 80,
                        target: name(t),
                    },
                })
                .collect(),
            rotate: false,
        }],
        additional: targets
            .iter()
            .enumerate()
            .map(|(n, t)| a_set(Some(t), (0..30).map(|i| Ipv4Addr::new(10, 2, n as u8, i)), 60))
            .collect(),
    };
    for (n, node) in [
        node(ZONE, &[(Slot::Soa, soa)]),
        node("web.skydns.test.", &[(Slot::A, web)]),
        node("big.skydns.test.", &[(Slot::A, big)]),
        node("srv.skydns.test.", &[(Slot::Srv, srv)]),
    ] {
        snap.nodes.insert(n, node);
    }
    snap
}

/// The same snapshot, with CHAOS identity configured.
pub fn snapshot_with_identity() -> Snapshot {
    let mut snap = snapshot();
    snap.identity = Identity {
        version: Some(b"skyline test".as_slice().into()),
        id: Some(b"node-1".as_slice().into()),
    };
    snap
}

/// Raw query bytes: header fields given explicitly, then the body.
pub struct RawQuery {
    pub id: u16,
    pub flags: u16,
    pub counts: [u16; 4],
    pub body: Vec<u8>,
}

impl RawQuery {
    /// A standard query (RD set) for `qname`/`qtype`/IN.
    pub fn new(qname: &str, qtype: u16) -> RawQuery {
        let mut q = RawQuery {
            id: 0xBEEF,
            flags: 0x0100,
            counts: [0; 4],
            body: Vec::new(),
        };
        q.question(qname, qtype, 1);
        q
    }

    pub fn empty() -> RawQuery {
        RawQuery {
            id: 0xBEEF,
            flags: 0x0100,
            counts: [0; 4],
            body: Vec::new(),
        }
    }

    /// Appends a question with the name spelled exactly as given (case kept).
    pub fn question(&mut self, qname: &str, qtype: u16, qclass: u16) -> &mut Self {
        let qname = qname.trim_end_matches('.');
        if !qname.is_empty() {
            for label in qname.split('.') {
                self.body.push(label.len() as u8);
                self.body.extend_from_slice(label.as_bytes());
            }
        }
        self.body.push(0);
        self.body.extend_from_slice(&qtype.to_be_bytes());
        self.body.extend_from_slice(&qclass.to_be_bytes());
        self.counts[0] += 1;
        self
    }

    /// Appends an OPT record to the additional section.
    pub fn opt(&mut self, udp_size: u16, version: u8, options: &[(u16, &[u8])]) -> &mut Self {
        let mut rdata = Vec::new();
        for (code, data) in options {
            rdata.extend_from_slice(&code.to_be_bytes());
            rdata.extend_from_slice(&(data.len() as u16).to_be_bytes());
            rdata.extend_from_slice(data);
        }
        self.body.extend_from_slice(&[0, 0, 41]);
        self.body.extend_from_slice(&udp_size.to_be_bytes());
        self.body.extend_from_slice(&[0, version, 0, 0]);
        self.body.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        self.body.extend_from_slice(&rdata);
        self.counts[3] += 1;
        self
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut m = Vec::with_capacity(12 + self.body.len());
        m.extend_from_slice(&self.id.to_be_bytes());
        m.extend_from_slice(&self.flags.to_be_bytes());
        for c in self.counts {
            m.extend_from_slice(&c.to_be_bytes());
        }
        m.extend_from_slice(&self.body);
        m
    }
}

/// Answers `query` over `transport` and returns the raw reply, or `None` when dropped.
pub fn ask_raw(snap: &Snapshot, query: &[u8], transport: Transport) -> Option<Vec<u8>> {
    let mut out = vec![0u8; 65535];
    match answer(query, snap, &Context::new(transport), &mut out) {
        Outcome::Reply(r) => Some(out[..r.len()].to_vec()),
        Outcome::Drop(_) => None,
    }
}

/// Answers over UDP and parses the reply with hickory-proto, an independent implementation.
pub fn ask(snap: &Snapshot, query: &[u8]) -> Message {
    ask_over(snap, query, Transport::Udp)
}

pub fn ask_over(snap: &Snapshot, query: &[u8], transport: Transport) -> Message {
    let raw = ask_raw(snap, query, transport).expect("a reply");
    Message::from_vec(&raw).expect("hickory parses the reply")
}

/// Runs `round` (which answers a batch of queries and returns how many it answered, `answers`
/// expected) three times under `global`'s count, and asserts that one round allocated nothing.
/// The allocator counts every thread, and the test harness's main thread allocates while it
/// starts waiting for a test: on a loaded machine that fell inside the measurement (4
/// allocations in some runs). An allocation of the answer path shows in every round; the
/// harness's, in one at most.
pub fn assert_a_round_allocates_nothing(
    global: &stats_alloc::StatsAlloc<std::alloc::System>,
    answers: usize,
    mut round: impl FnMut() -> usize,
) {
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let region = stats_alloc::Region::new(global);
        let answered = round();
        let change = region.change();
        assert_eq!(answered, answers);
        rounds.push(change);
    }
    assert!(
        rounds.iter().any(|c| c.allocations + c.reallocations == 0),
        "every round of {answers} answers allocated: {rounds:?}"
    );
}

/// Answers each of `queries` from `snap` 1,000 times (UDP and TCP in turn, the rotation moving
/// on) and asserts, as [`assert_a_round_allocates_nothing`] does, that a round allocated
/// nothing.
pub fn assert_answers_allocate_nothing(
    global: &stats_alloc::StatsAlloc<std::alloc::System>,
    snap: &Snapshot,
    queries: &[Vec<u8>],
) {
    let mut out = vec![0u8; 65535];
    assert_a_round_allocates_nothing(global, queries.len() * 1000, || {
        let mut answered = 0;
        for rotation in 0..1000u32 {
            for (i, q) in queries.iter().enumerate() {
                let transport = if i % 2 == 0 { Transport::Udp } else { Transport::Tcp };
                let ctx = Context {
                    rotation,
                    ..Context::new(transport)
                };
                if let Outcome::Reply(_) = answer(q, snap, &ctx, &mut out) {
                    answered += 1;
                }
            }
        }
        answered
    });
}

/// A server of one unpinned worker on a free loopback port, answering from [`snapshot`] with
/// `options`.
pub fn serve(options: skyline_dataplane::worker::Options) -> skyline_dataplane::worker::Server {
    use skyline_dataplane::worker::{Server, ServerConfig, TcpConfig};
    let snapshots = skyline_dataplane::snapshot::empty_cell();
    snapshots.store(std::sync::Arc::new(snapshot()));
    let config = ServerConfig {
        addr: std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        workers: 1,
        pin: false,
        tcp: TcpConfig::default(),
    };
    Server::start_with(config, options, snapshots).expect("server starts")
}

/// Sends `queries` to `addr` from `client` `rounds` times, numbering each round's queries with the
/// round as their ID, and reads every reply of a round before the next; `check` sees each reply.
/// Returns the replies read. Allocates nothing itself, so allocation tests can measure around it.
pub fn udp_rounds(
    client: &std::net::UdpSocket,
    addr: std::net::SocketAddr,
    queries: &mut [Vec<u8>],
    rounds: u16,
    check: impl Fn(&[u8]),
) -> usize {
    let mut buf = [0u8; 4096];
    let mut answered = 0;
    for id in 0..rounds {
        for q in queries.iter_mut() {
            q[..2].copy_from_slice(&id.to_be_bytes());
            client.send_to(q, addr).unwrap();
        }
        for _ in 0..queries.len() {
            let (n, _) = client.recv_from(&mut buf).unwrap();
            assert!(n >= 12 && buf[..2] == id.to_be_bytes(), "a reply to round {id}");
            check(&buf[..n]);
            answered += 1;
        }
    }
    answered
}
