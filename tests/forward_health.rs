//! How the forwarder uses a set of upstreams, end to end: the real binary in front of UDP
//! upstreams written here, on 127.0.0.1, that record every query they get (with its time and
//! RD flag) and can fall silent on demand. Health checks from the start and `max_fails`, the
//! first-try policies, `except` zones, `max_concurrent`, and a forwarding loop found and cut
//! while the rest is still served. Answers are read with hickory-proto.

mod common;

use common::{eventually, http_get, metric_sum, metric_value, query, udp_query, Skyline, HTTP_ANY_PORT};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record, RecordType};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.9.0.1"}}"#;

/// One query an upstream received.
#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    name: String,
    rtype: RecordType,
    recursion_desired: bool,
}

/// A UDP upstream on 127.0.0.1 answering every A query with its own address `192.0.2.<tag>`,
/// NS with an empty NOERROR, anything else NXDOMAIN; names starting with `slow` never get an
/// answer; nothing is answered while it is silenced.
struct Upstream {
    addr: SocketAddr,
    tag: u8,
    seen: Arc<Mutex<Vec<Seen>>>,
    silent: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Upstream {
    fn start(tag: u8) -> Upstream {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let addr = socket.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let silent = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, quiet, halt) = (Arc::clone(&seen), Arc::clone(&silent), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !halt.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(q) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let Some(question) = q.queries().first() else {
                    continue;
                };
                let name = question.name().to_ascii().to_lowercase();
                log.lock().unwrap().push(Seen {
                    at: Instant::now(),
                    name: name.clone(),
                    rtype: question.query_type(),
                    recursion_desired: q.recursion_desired(),
                });
                if quiet.load(Ordering::Relaxed) || name.starts_with("slow") {
                    continue;
                }
                let mut reply = Message::new();
                reply
                    .set_id(q.id())
                    .set_message_type(MessageType::Response)
                    .set_recursion_desired(q.recursion_desired())
                    .set_recursion_available(true);
                reply.add_queries(q.queries().iter().cloned());
                match question.query_type() {
                    RecordType::A => {
                        let ip = Ipv4Addr::new(192, 0, 2, tag);
                        reply.add_answer(Record::from_rdata(question.name().clone(), 60, RData::A(A(ip))));
                    }
                    RecordType::NS => {}
                    _ => {
                        reply.set_response_code(ResponseCode::NXDomain);
                    }
                }
                let _ = socket.send_to(&reply.to_vec().unwrap(), from);
            }
        });
        Upstream {
            addr,
            tag,
            seen,
            silent,
            stop,
            thread: Some(thread),
        }
    }

    /// The queries received so far of type `rtype`.
    fn seen(&self, rtype: RecordType) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.rtype == rtype)
            .cloned()
            .collect()
    }

    /// How many queries for `name` it received.
    fn count(&self, name: &str) -> usize {
        self.seen.lock().unwrap().iter().filter(|s| s.name == name).count()
    }

    fn silence(&self, silent: bool) {
        self.silent.store(silent, Ordering::Relaxed);
    }

    /// The address it answers A queries with.
    fn answer(&self) -> Ipv4Addr {
        Ipv4Addr::new(192, 0, 2, self.tag)
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

/// A client with one socket for all its queries: the kernel keeps its flow on one worker, so
/// that it sees one worker's rotation.
struct Client(UdpSocket);

impl Client {
    fn new() -> Client {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        Client(socket)
    }

    /// The reply to `name` A, and how long it took.
    fn ask(&self, s: &Skyline, name: &str) -> (Message, Duration) {
        let q = query(name, RecordType::A, Some(1232));
        let started = Instant::now();
        self.0.send_to(&q.to_vec().unwrap(), s.addr).unwrap();
        let mut buf = [0u8; 4096];
        loop {
            let (n, _) = self.0.recv_from(&mut buf).expect("an answer within 3 s");
            let reply = Message::from_vec(&buf[..n]).unwrap();
            if reply.id() == q.id() {
                return (reply, started.elapsed());
            }
        }
    }
}

fn addresses(reply: &Message) -> Vec<Ipv4Addr> {
    reply
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            Some(RData::A(a)) => Some(a.0),
            _ => None,
        })
        .collect()
}

fn list(upstreams: &[&Upstream]) -> String {
    upstreams
        .iter()
        .map(|u| u.addr.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn metrics(s: &Skyline) -> String {
    http_get(s.http_addr(), "/metrics").expect("/metrics answers").1
}

/// Health checks of the nameservers every 200 ms, without RD (`no_rec`), and of a stub zone's
/// server with RD (its own table, which asks for checks but not `no_rec`): they start before
/// any client asks and keep their interval.
#[test]
fn health_checks_arrive_at_the_configured_interval_with_rd_as_configured() {
    let (plain, stub) = (Upstream::start(1), Upstream::start(2));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("skyline.toml");
    std::fs::write(
        &config,
        format!(
            "[forward]\nhealth_check = \"200ms\"\nhealth_check_no_rec = true\n\n\
             [[forward.stub_zones]]\nzone = \"corp.example.\"\nservers = [\"{}\"]\nhealth_check = \"200ms\"\n",
            stub.addr
        ),
    )
    .unwrap();
    let nameservers = list(&[&plain]);
    let _s = Skyline::start(
        RECORDS,
        &["--nameservers", &nameservers, "--config", config.to_str().unwrap()],
        &[],
    );
    std::thread::sleep(Duration::from_millis(1600));
    for (upstream, recursion_desired) in [(&plain, false), (&stub, true)] {
        let checks = upstream.seen(RecordType::NS);
        assert!(
            (5..=10).contains(&checks.len()),
            "{} checks in 1.6 s at 200 ms: {checks:?}",
            checks.len()
        );
        assert!(checks
            .iter()
            .all(|c| c.name == "." && c.recursion_desired == recursion_desired));
        let mut gaps: Vec<Duration> = checks.windows(2).map(|w| w[1].at - w[0].at).collect();
        gaps.sort();
        let median = gaps[gaps.len() / 2];
        assert!(
            median >= Duration::from_millis(180) && median <= Duration::from_millis(300),
            "checks {median:?} apart"
        );
        assert_eq!(upstream.seen(RecordType::A).len(), 0, "no client asked");
    }
}

/// `max_fails 2` with checks every 100 ms: a nameserver that falls silent is down after two
/// failed checks, its clients go to the other one, and it is back once it answers a check.
/// Both silent, the set is broken and clients get SERVFAIL at once.
#[test]
fn a_silent_upstream_is_marked_down_after_max_fails_checks_and_up_again_once_it_answers() {
    let (first, second) = (Upstream::start(1), Upstream::start(2));
    let nameservers = list(&[&first, &second]);
    let mut args = vec![
        "--nameservers",
        &nameservers,
        "--policy",
        "sequential",
        "--health-check",
        "100ms",
        "--max-fails",
        "2",
    ];
    args.extend(HTTP_ANY_PORT);
    let s = Skyline::start(RECORDS, &args, &[]);
    let client = Client::new();
    assert_eq!(addresses(&client.ask(&s, "a0.example.org.").0), [first.answer()]);

    first.silence(true);
    let failures = format!("to=\"{}\"", first.addr);
    eventually(Duration::from_secs(3), "two failed checks of the silent one", || {
        metric_sum(&metrics(&s), "coredns_proxy_healthcheck_failures_total", &[&failures]).unwrap_or(0.0) >= 2.0
    });
    eventually(Duration::from_secs(3), "the silent one marked down", || {
        metric_value(&metrics(&s), "skyline_forward_upstreams_marked_down_total") == Some(1.0)
    });
    let before = first.seen(RecordType::A).len();
    for i in 1..=5 {
        let (reply, took) = client.ask(&s, &format!("a{i}.example.org."));
        assert_eq!(addresses(&reply), [second.answer()]);
        assert!(
            took < Duration::from_millis(100),
            "not made to wait for the down one: {took:?}"
        );
    }
    assert_eq!(
        first.seen(RecordType::A).len(),
        before,
        "no client query to the down one"
    );

    second.silence(true);
    eventually(Duration::from_secs(3), "every upstream down: the set is broken", || {
        metric_value(&metrics(&s), "coredns_forward_healthcheck_broken_total").unwrap_or(0.0) > 0.0
    });
    let (reply, took) = client.ask(&s, "a6.example.org.");
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
    assert!(took < Duration::from_millis(100), "SERVFAIL at once: {took:?}");

    first.silence(false);
    second.silence(false);
    let mut asked = 0;
    eventually(
        Duration::from_secs(3),
        "the first one answers a check and is up again",
        || {
            asked += 1;
            addresses(&client.ask(&s, &format!("b{asked}.example.org.")).0) == [first.answer()]
        },
    );
}

#[test]
fn sequential_always_tries_the_first_first() {
    let (first, second) = (Upstream::start(1), Upstream::start(2));
    let nameservers = list(&[&first, &second]);
    let s = Skyline::start(RECORDS, &["--nameservers", &nameservers, "--policy", "sequential"], &[]);
    for i in 0..10 {
        let reply = udp_query(s.addr, &query(&format!("n{i}.example.org."), RecordType::A, Some(1232)));
        assert_eq!(addresses(&reply), [first.answer()]);
    }
    assert_eq!(second.seen(RecordType::A).len(), 0);
}

#[test]
fn round_robin_alternates_between_the_nameservers() {
    let (one, two) = (Upstream::start(1), Upstream::start(2));
    let nameservers = list(&[&one, &two]);
    let s = Skyline::start(
        RECORDS,
        &["--nameservers", &nameservers, "--policy", "round_robin"],
        &[],
    );
    let client = Client::new();
    let answers: Vec<Vec<Ipv4Addr>> = (0..6)
        .map(|i| addresses(&client.ask(&s, &format!("r{i}.example.org.")).0))
        .collect();
    for pair in answers.windows(2) {
        assert_ne!(pair[0], pair[1], "turns alternate: {answers:?}");
    }
    assert_eq!((one.seen(RecordType::A).len(), two.seen(RecordType::A).len()), (3, 3));
}

#[test]
fn names_under_an_except_zone_are_not_forwarded() {
    let upstream = Upstream::start(1);
    let nameservers = list(&[&upstream]);
    let s = Skyline::start(
        RECORDS,
        &[
            "--nameservers",
            &nameservers,
            "--except",
            "internal.example.,lab.example.",
        ],
        &[],
    );
    let client = Client::new();
    let (reply, _) = client.ask(&s, "www.internal.example.");
    assert_eq!(reply.response_code(), ResponseCode::Refused);
    assert_eq!(client.ask(&s, "lab.example.").0.response_code(), ResponseCode::Refused);
    assert_eq!(upstream.count("www.internal.example."), 0);
    assert_eq!(upstream.count("lab.example."), 0);
    assert_eq!(addresses(&client.ask(&s, "www.example.org.").0), [upstream.answer()]);
}

/// One query may wait on the nameservers at a time: a second one, while the first waits for an
/// upstream that does not answer it, is REFUSED at once.
#[test]
fn queries_over_max_concurrent_are_refused_at_once() {
    let upstream = Upstream::start(1);
    let nameservers = list(&[&upstream]);
    let mut args = vec!["--nameservers", &nameservers, "--max-concurrent", "1"];
    args.extend(HTTP_ANY_PORT);
    let s = Skyline::start(RECORDS, &args, &[]);
    let waiting = Client::new();
    let q = query("slow.example.org.", RecordType::A, Some(1232));
    waiting.0.send_to(&q.to_vec().unwrap(), s.addr).unwrap();
    eventually(Duration::from_secs(2), "the slow query reaches the upstream", || {
        upstream.count("slow.example.org.") > 0
    });
    let (reply, took) = Client::new().ask(&s, "fast.example.org.");
    assert_eq!(reply.response_code(), ResponseCode::Refused);
    assert!(took < Duration::from_millis(100), "{took:?}");
    assert_eq!(upstream.count("fast.example.org."), 0);
    assert_eq!(
        metric_value(&metrics(&s), "coredns_forward_max_concurrent_rejects_total"),
        Some(1.0)
    );
}

/// A UDP relay on 127.0.0.1 that sends every query it gets to `to` and the reply back: as the
/// upstream of the server at `to`, it makes a forwarding loop.
struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    relayed: Arc<Mutex<Vec<String>>>,
    /// The replies it carried back: query name and rcode.
    replies: Arc<Mutex<Vec<(String, ResponseCode)>>>,
}

impl Relay {
    fn start(to: SocketAddr) -> Relay {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let relayed = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(Vec::new()));
        let (halt, log, answered) = (Arc::clone(&stop), Arc::clone(&relayed), Arc::clone(&replies));
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !halt.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                if let Ok(q) = Message::from_vec(&buf[..n]) {
                    if let Some(question) = q.queries().first() {
                        log.lock().unwrap().push(question.name().to_ascii().to_lowercase());
                    }
                }
                let query = buf[..n].to_vec();
                let back = socket.try_clone().unwrap();
                let answered = Arc::clone(&answered);
                std::thread::spawn(move || {
                    let out = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
                    out.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    let _ = out.send_to(&query, to);
                    let mut reply = [0u8; 4096];
                    if let Ok((n, _)) = out.recv_from(&mut reply) {
                        if let Ok(m) = Message::from_vec(&reply[..n]) {
                            if let Some(question) = m.queries().first() {
                                let name = question.name().to_ascii().to_lowercase();
                                answered.lock().unwrap().push((name, m.response_code()));
                            }
                        }
                        let _ = back.send_to(&reply[..n], from);
                    }
                });
            }
        });
        Relay {
            addr,
            stop,
            relayed,
            replies,
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// skyline's nameserver sends every query back to skyline: the loop probe comes back, the
/// loop is logged as an ERROR naming the nameserver, counted in /metrics, and the nameserver
/// is no longer forwarded to; the probe got SERVFAIL instead of going round again; the process
/// keeps serving its own names and a stub zone whose server does not loop.
#[test]
fn a_forwarding_loop_is_detected_logged_and_cut_and_the_rest_is_still_served() {
    let port = common::free_port();
    let own = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let relay = Relay::start(own);
    let stub = Upstream::start(7);
    let (nameservers, zone) = (relay.addr.to_string(), format!("corp.example.={}", stub.addr));
    let mut args = vec!["--nameservers", &nameservers, "--stub-zone", &zone, "--loop-detect"];
    args.extend(HTTP_ANY_PORT);
    let s = Skyline::start_at(&own.to_string(), RECORDS, &args, &[]);
    let logged = format!("{}", relay.addr);
    eventually(
        Duration::from_secs(5),
        "the loop is logged as an ERROR naming the upstream",
        || {
            s.log
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("ERROR") && l.contains("forwarding loop") && l.contains(&logged))
        },
    );
    let series = format!("skyline_forward_loop_detected{{to=\"{}\"}}", relay.addr);
    assert_eq!(metric_value(&metrics(&s), &series), Some(1.0));
    assert_eq!(
        metric_value(
            &metrics(&s),
            &format!("skyline_forward_loop_detected{{to=\"{}\"}}", stub.addr)
        ),
        Some(0.0),
        "the stub zone's server answered its probe: no loop"
    );
    let probes = relay.relayed.lock().unwrap().clone();
    assert_eq!(probes.len(), 1, "the probe went round once, not on and on: {probes:?}");
    eventually(Duration::from_secs(2), "the probe is answered", || {
        !relay.replies.lock().unwrap().is_empty()
    });
    assert_eq!(
        *relay.replies.lock().unwrap(),
        [(probes[0].clone(), ResponseCode::ServFail)],
        "this server answered its own probe SERVFAIL"
    );
    assert!(probes[0].split('.').count() == 3, "<random>.<random>.: {probes:?}");

    let client = Client::new();
    let (reply, took) = client.ask(&s, "www.example.org.");
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
    assert!(took < Duration::from_millis(100), "not sent round the loop: {took:?}");
    assert!(
        !relay.relayed.lock().unwrap().iter().any(|n| n == "www.example.org."),
        "the looping upstream gets no client query"
    );
    assert_eq!(addresses(&client.ask(&s, "www.corp.example.").0), [stub.answer()]);
    let own_name = udp_query(s.addr, &query("web.skydns.local.", RecordType::A, None));
    assert_eq!(addresses(&own_name), [Ipv4Addr::new(10, 9, 0, 1)]);
    assert!(s.log_count("forwarding loop") == 1, "reported once");
}

/// The same loop from a Corefile's `loop` plugin: cut and said, and the server stays up, where
/// CoreDNS would exit.
#[test]
fn the_corefile_loop_plugin_cuts_a_loop_without_exiting() {
    let port = common::free_port();
    let own = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let relay = Relay::start(own);
    let dir = tempfile::tempdir().unwrap();
    let corefile = dir.path().join("Corefile");
    std::fs::write(
        &corefile,
        format!(
            ".:{port} {{\n    bind 127.0.0.1\n    errors\n    cache 30\n    loop\n    forward . {}\n}}\n",
            relay.addr
        ),
    )
    .unwrap();
    let mut args = vec!["--corefile", corefile.to_str().unwrap()];
    args.extend(HTTP_ANY_PORT);
    let s = Skyline::start_at(&own.to_string(), RECORDS, &args, &[]);
    let series = format!("skyline_forward_loop_detected{{to=\"{}\"}}", relay.addr);
    eventually(Duration::from_secs(5), "the loop is found", || {
        metric_value(&metrics(&s), &series) == Some(1.0)
    });
    let (reply, took) = Client::new().ask(&s, "www.example.org.");
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
    assert!(took < Duration::from_millis(100), "not sent round the loop: {took:?}");
    let own_name = udp_query(s.addr, &query("web.skydns.local.", RecordType::A, None));
    assert_eq!(own_name.response_code(), ResponseCode::NoError, "still serving");
}
