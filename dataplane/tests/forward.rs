//! Forwarding inside a running worker, against upstreams written here that misbehave on
//! purpose, with the worker's counters read back: forged replies are dropped and counted, and
//! the number of questions in flight is bounded with a fast SERVFAIL beyond it.

mod common;

use common::{snapshot, RawQuery};
use skyline_dataplane::forward::{Acl, ForwardConfig, StubZone};
use skyline_dataplane::snapshot::empty_cell;
use skyline_dataplane::stats::Totals;
use skyline_dataplane::wire::Name;
use skyline_dataplane::worker::{Options, Server, ServerConfig, TcpConfig};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A UDP upstream on 127.0.0.1 running `serve` on each query it receives (the query, the
/// sender, the socket) until dropped.
struct Upstream {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Upstream {
    fn start(serve: impl Fn(&[u8], SocketAddr, &UdpSocket) + Send + 'static) -> Upstream {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let halt = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while !halt.load(Ordering::Relaxed) {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    serve(&buf[..n], from, &socket);
                }
            }
        });
        Upstream {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A reply to `query` (its ID and question) with one `A ip`, TTL 300.
fn answer(query: &[u8], ip: [u8; 4]) -> Vec<u8> {
    let name_end = 12 + query[12..].iter().position(|&b| b == 0).unwrap() + 1;
    let mut m = vec![query[0], query[1], 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0];
    m.extend_from_slice(&query[12..name_end + 4]);
    m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4]);
    m.extend_from_slice(&ip);
    m
}

fn server(forward: ForwardConfig) -> Server {
    let snapshots = empty_cell();
    snapshots.store(Arc::new(snapshot()));
    let config = ServerConfig {
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        workers: 1,
        pin: false,
        tcp: TcpConfig::default(),
    };
    let options = Options {
        extra_addrs: Vec::new(),
        forward: Some(forward),
        ..Options::default()
    };
    Server::start_with(config, options, snapshots).unwrap()
}

fn wait_for(server: &Server, what: impl Fn(&Totals) -> bool) -> Totals {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let totals = server.stats();
        if what(&totals) || Instant::now() > deadline {
            return totals;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn forged_replies_are_dropped_and_counted() {
    let upstream = Upstream::start(|query, from, socket| {
        let mut wrong_id = answer(query, [6, 6, 6, 7]);
        wrong_id[0] ^= 0xFF;
        socket.send_to(&wrong_id, from).unwrap();
        let mut wrong_name = answer(query, [6, 6, 6, 8]);
        wrong_name[13] ^= 0x20 ^ 0x01;
        socket.send_to(&wrong_name, from).unwrap();
        let forger = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        forger.send_to(&answer(query, [6, 6, 6, 6]), from).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        socket.send_to(&answer(query, [192, 0, 2, 1]), from).unwrap();
    });
    let server = server(ForwardConfig {
        upstreams: vec![upstream.addr],
        ..ForwardConfig::default()
    });
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    client
        .send_to(&RawQuery::new("target.example.org.", 1).bytes(), server.local_addr())
        .unwrap();
    let mut buf = [0u8; 512];
    let (n, _) = client.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[n - 4..n], &[192, 0, 2, 1], "only the real answer got through");
    // The answer is stored once the client's reply is sent: a moment after the client has it.
    let totals = wait_for(&server, |t| t.upstream_mismatched_question >= 1 && t.cache_inserts >= 1);
    assert_eq!(totals.upstream_mismatched_id, 1);
    assert_eq!(totals.upstream_mismatched_question, 1);
    assert_eq!(totals.cache_inserts, 1);
}

#[test]
fn questions_beyond_the_in_flight_bound_fail_fast() {
    let silent = Upstream::start(|_, _, _| {});
    let server = server(ForwardConfig {
        upstreams: vec![silent.addr],
        max_in_flight: 2,
        ..ForwardConfig::default()
    });
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let started = Instant::now();
    for i in 0..6u16 {
        let mut q = RawQuery::new(&format!("n{i}.example.org."), 1);
        q.id = i;
        q.opt(1232, 0, &[]);
        client.send_to(&q.bytes(), server.local_addr()).unwrap();
    }
    let mut buf = [0u8; 512];
    let mut fast = 0;
    while let Ok((n, _)) = client.recv_from(&mut buf) {
        if started.elapsed() > Duration::from_millis(400) {
            break;
        }
        assert_eq!(buf[3] & 0x0F, 2, "SERVFAIL");
        assert_eq!(&buf[n - 6..n], &[0, 15, 0, 2, 0, 0], "with an Extended DNS Error");
        fast += 1;
    }
    assert_eq!(fast, 4, "two questions in flight, four refused at once");
    assert_eq!(server.stats().forward_busy, 4);
}

#[test]
fn one_client_holds_at_most_its_share_of_the_questions_in_flight() {
    let silent = Upstream::start(|_, _, _| {});
    let server = server(ForwardConfig {
        upstreams: vec![silent.addr],
        max_in_flight: 8,
        max_in_flight_per_client: 2,
        timeout: Duration::from_millis(300),
        ..ForwardConfig::default()
    });
    let flood = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let other = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, 2), 0)).unwrap();
    let ask = |socket: &UdpSocket, prefix: &str, count: u16| {
        for i in 0..count {
            let mut q = RawQuery::new(&format!("{prefix}{i}.example.org."), 1);
            q.id = i;
            socket.send_to(&q.bytes(), server.local_addr()).unwrap();
        }
    };
    // Replies within 150 ms are refusals: the upstream never answers, and the budget is 300 ms.
    let fast = |socket: &UdpSocket| {
        socket.set_read_timeout(Some(Duration::from_millis(150))).unwrap();
        let started = Instant::now();
        let mut buf = [0u8; 512];
        let mut refused = 0;
        while socket.recv_from(&mut buf).is_ok() {
            if started.elapsed() > Duration::from_millis(150) {
                break;
            }
            assert_eq!(buf[3] & 0x0F, 2, "SERVFAIL");
            refused += 1;
        }
        refused
    };
    ask(&flood, "f", 5);
    assert_eq!(fast(&flood), 3, "two questions wait, three are refused at once");
    ask(&other, "o", 2);
    assert_eq!(fast(&other), 0, "another client still gets its questions forwarded");
    let totals = server.stats();
    assert_eq!((totals.forward_client_limited, totals.forward_busy), (3, 0));
    // Once its questions have ended, the client has its share again.
    std::thread::sleep(Duration::from_millis(600));
    let mut buf = [0u8; 512];
    flood.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    while flood.recv_from(&mut buf).is_ok() {}
    ask(&flood, "g", 2);
    assert_eq!(fast(&flood), 0);
    assert_eq!(server.stats().forward_client_limited, 3);
}

#[test]
fn an_upstream_that_never_answers_gives_servfail_within_the_budget() {
    let silent = Upstream::start(|_, _, _| {});
    let server = server(ForwardConfig {
        upstreams: vec![silent.addr],
        timeout: Duration::from_millis(600),
        ..ForwardConfig::default()
    });
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let started = Instant::now();
    let mut q = RawQuery::new("slow.example.org.", 1);
    q.opt(1232, 0, &[]);
    client.send_to(&q.bytes(), server.local_addr()).unwrap();
    let mut buf = [0u8; 512];
    let (n, _) = client.recv_from(&mut buf).expect("SERVFAIL, never silence");
    let took = started.elapsed();
    assert_eq!(buf[3] & 0x0F, 2);
    assert_eq!(&buf[n - 6..n], &[0, 15, 0, 2, 0, 22]);
    assert!(took < Duration::from_millis(900), "took {took:?} with a 600 ms budget");
    let totals = server.stats();
    assert!(totals.upstream_timeouts >= 1);
    assert_eq!(totals.forward_failures, 1);
}

#[test]
fn stub_zones_handed_in_while_serving_take_effect() {
    let default = Upstream::start(|query, from, socket| {
        socket.send_to(&answer(query, [192, 0, 2, 1]), from).unwrap();
    });
    let stub = Upstream::start(|query, from, socket| {
        socket.send_to(&answer(query, [198, 51, 100, 1]), from).unwrap();
    });
    let server = server(ForwardConfig {
        upstreams: vec![default.addr],
        ..ForwardConfig::default()
    });
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let ask = |name: &str| {
        client
            .send_to(&RawQuery::new(name, 1).bytes(), server.local_addr())
            .unwrap();
        let mut buf = [0u8; 512];
        let (n, _) = client.recv_from(&mut buf).unwrap();
        buf[n - 4..n].to_vec()
    };
    assert_eq!(ask("a.corp.example."), [192, 0, 2, 1]);
    let zones = server.forwarding().expect("a forwarding server takes stub zones");
    zones.set_learnt_stubs(vec![StubZone::new(
        Name::from_dotted("corp.example.").unwrap(),
        vec![stub.addr],
    )]);
    assert_eq!(
        ask("b.corp.example."),
        [198, 51, 100, 1],
        "the stub zone's server answers"
    );
    assert_eq!(
        ask("c.example.org."),
        [192, 0, 2, 1],
        "other names still go to the default"
    );
    zones.set_learnt_stubs(Vec::new());
    assert_eq!(ask("d.corp.example."), [192, 0, 2, 1], "and back once the zone is gone");
}

#[test]
fn a_new_configuration_handed_in_while_serving_takes_effect() {
    let first = Upstream::start(|query, from, socket| {
        socket.send_to(&answer(query, [192, 0, 2, 1]), from).unwrap();
    });
    let second = Upstream::start(|query, from, socket| {
        socket.send_to(&answer(query, [198, 51, 100, 1]), from).unwrap();
    });
    let config = ForwardConfig {
        upstreams: vec![first.addr],
        ..ForwardConfig::default()
    };
    let server = server(config.clone());
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let ask = |name: &str| {
        client
            .send_to(&RawQuery::new(name, 1).bytes(), server.local_addr())
            .unwrap();
        let mut buf = [0u8; 512];
        let (n, _) = client.recv_from(&mut buf).unwrap();
        buf[..n].to_vec()
    };
    let cached = ask("www.example.org.");
    assert_eq!(cached[cached.len() - 4..], [192, 0, 2, 1]);
    let forwarding = server
        .forwarding()
        .expect("a forwarding server takes a new configuration");
    forwarding.reconfigure(ForwardConfig {
        upstreams: vec![second.addr],
        ..config.clone()
    });
    // Workers switch at their next turn: a query read in the turn under way when the new
    // configuration arrives may still be answered under the old one.
    let switched = |check: &dyn Fn(&[u8]) -> bool, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(2);
        for n in 0.. {
            if check(&ask(&format!("q{n}.example.org."))) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}");
        }
    };
    switched(
        &|reply| reply[reply.len() - 4..] == [198, 51, 100, 1],
        "the new upstream answers",
    );
    let kept = ask("www.example.org.");
    assert_eq!(
        kept[kept.len() - 4..],
        [192, 0, 2, 1],
        "what the cache held is still served"
    );
    forwarding.reconfigure(ForwardConfig {
        upstreams: vec![second.addr],
        acl: Acl::new(Vec::new()),
        ..config
    });
    switched(&|reply| reply[3] & 0x0F == 5, "the new access list refuses loopback");
}

/// A cache hit asked again in the same shape is replayed from what its first reply left
/// (`forward/replay.rs`): replayed replies must keep each client's ID and spelling, and must
/// stop the moment a new snapshot or forwarding plan changes what the name answers.
#[test]
fn replayed_hits_follow_the_client_and_stop_when_the_snapshot_or_plan_changes() {
    let upstream = Upstream::start(|query, from, socket| {
        socket.send_to(&answer(query, [192, 0, 2, 1]), from).unwrap();
    });
    let snapshots = empty_cell();
    snapshots.store(Arc::new(skyline_dataplane::snapshot::Snapshot::default()));
    let config = ForwardConfig {
        upstreams: vec![upstream.addr],
        ..ForwardConfig::default()
    };
    let server = Server::start_with(
        ServerConfig {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            workers: 1,
            pin: false,
            tcp: TcpConfig::default(),
        },
        Options {
            extra_addrs: Vec::new(),
            forward: Some(config.clone()),
            ..Options::default()
        },
        Arc::clone(&snapshots),
    )
    .unwrap();
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let ask = |name: &str, id: u16| {
        let mut query = RawQuery::new(name, 1).bytes();
        query[..2].copy_from_slice(&id.to_be_bytes());
        client.send_to(&query, server.local_addr()).unwrap();
        let mut buf = [0u8; 512];
        let (n, _) = client.recv_from(&mut buf).unwrap();
        hickory_proto::op::Message::from_vec(&buf[..n]).unwrap()
    };
    let address = |reply: &hickory_proto::op::Message| {
        reply
            .answers()
            .iter()
            .map(|r| r.data().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    // A miss, a hit that leaves a memo, then hits replayed from it.
    for (id, spelling) in [
        (1, "web.skydns.test."),
        (2, "web.skydns.test."),
        (3, "WEB.SkyDns.test."),
        (4, "wEb.skydns.TEST."),
    ] {
        let reply = ask(spelling, id);
        assert_eq!(reply.id(), id);
        assert_eq!(reply.queries()[0].name().to_ascii(), spelling);
        assert_eq!(address(&reply), ["192.0.2.1"], "{spelling}");
        assert!(reply.recursion_available() && !reply.authoritative());
    }
    let hits = |t: &Totals| t.cache_hits.iter().sum::<u64>();
    assert_eq!(
        hits(&wait_for(&server, |t| hits(t) >= 3)),
        3,
        "every hit counted, replayed or not"
    );

    // The zone now holds the name: its own answer, at once.
    snapshots.store(Arc::new(snapshot()));
    let reply = ask("web.skydns.test.", 5);
    assert!(reply.authoritative(), "the zone answers");
    assert!(!address(&reply).contains(&"192.0.2.1".to_string()));

    // Back to no zones, the cache answers again; then a plan that keeps short names from the
    // upstreams (ndots) refuses them what the cache holds, replayed or not.
    snapshots.store(Arc::new(skyline_dataplane::snapshot::Snapshot::default()));
    for id in 6..9 {
        assert_eq!(address(&ask("web.skydns.test.", id)), ["192.0.2.1"]);
    }
    server
        .forwarding()
        .unwrap()
        .reconfigure(ForwardConfig { ndots: 4, ..config });
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let reply = ask("web.skydns.test.", 9);
        if reply.response_code() == hickory_proto::op::ResponseCode::ServFail {
            break;
        }
        assert!(Instant::now() < deadline, "the new plan's ndots is not in force");
    }
}
