//! Forwarding and caching end to end: the real binary in front of real upstream servers on
//! 127.0.0.1 (Knot DNS serving generated zones, and a scripted upstream that counts queries and
//! misbehaves on purpose), queried with hickory-proto.

mod common;
mod upstream;

use common::{a_of, query, tcp_query, udp_query, Skyline};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use upstream::{Knot, Script, Scripted, GOOD};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.9.0.1"}}"#;

const ZONE: &str = "$ORIGIN example.test.
$TTL 300
@ SOA ns.example.test. admin.example.test. 1 3600 600 86400 30
@ NS ns
ns A 127.0.0.1
www A 192.0.2.10
v6 AAAA 2001:db8::10
alias CNAME www
_http._tcp SRV 10 5 80 www
@ MX 10 mail
mail A 192.0.2.25
short 1 A 192.0.2.11
* A 192.0.2.99
";

/// The zone with an RRset too large for a 1232-byte UDP answer.
fn big_zone() -> String {
    let mut zone = String::from(ZONE);
    for i in 0..100 {
        zone.push_str(&format!("big A 10.1.{}.{}\n", i / 250, i % 250));
    }
    zone
}

fn forwarding_to(upstreams: &[SocketAddr], more: &[&str]) -> Skyline {
    let list = upstreams.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
    let mut args = vec!["--nameservers", list.as_str()];
    args.extend_from_slice(more);
    Skyline::start(RECORDS, &args, &[])
}

fn ask(s: &Skyline, name: &str, rtype: RecordType) -> Message {
    udp_query(s.addr, &query(name, rtype, Some(1232)))
}

/// A client with one socket for all its queries. Each worker has its own cache, and the kernel
/// keeps a client's flow (its address and port) on one worker; a test that watches what the
/// cache remembers asks through one client.
struct Client {
    socket: UdpSocket,
}

impl Client {
    fn new() -> Client {
        Client {
            socket: UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap(),
        }
    }

    fn ask(&self, s: &Skyline, name: &str, rtype: RecordType) -> Message {
        let q = query(name, rtype, Some(1232));
        let (raw, _) = self.timed(s.addr, &q, Duration::from_secs(3)).expect("an answer");
        Message::from_vec(&raw).unwrap()
    }

    /// Sends one query and returns the raw reply and how long it took, or `None` after `wait`.
    fn timed(&self, addr: SocketAddr, q: &Message, wait: Duration) -> Option<(Vec<u8>, Duration)> {
        self.socket.set_read_timeout(Some(wait)).unwrap();
        let started = Instant::now();
        self.socket.send_to(&q.to_vec().unwrap(), addr).unwrap();
        let mut buf = [0u8; 4096];
        loop {
            let (n, _) = self.socket.recv_from(&mut buf).ok()?;
            if n >= 2 && buf[..2] == q.id().to_be_bytes() {
                return Some((buf[..n].to_vec(), started.elapsed()));
            }
        }
    }
}

/// Sends one query from a fresh socket; the raw reply and how long it took, or `None` after
/// `wait`.
fn timed(addr: SocketAddr, q: &Message, wait: Duration) -> Option<(Vec<u8>, Duration)> {
    Client::new().timed(addr, q, wait)
}

/// The Extended DNS Error info code of a reply: skyline puts it last in its OPT, the last
/// record.
fn ede(raw: &[u8]) -> Option<u16> {
    let tail = raw.get(raw.len().checked_sub(6)?..)?;
    (tail[..4] == [0, 15, 0, 2]).then(|| u16::from_be_bytes([tail[4], tail[5]]))
}

fn ttl_of(reply: &Message) -> u32 {
    reply.answers()[0].ttl()
}

/// The fixture pauses and resumes Knot from the test process itself: run where `PATH` holds
/// no program at all (a minimal system has no `kill`), a paused Knot answers nothing and a
/// resumed one answers again.
#[test]
fn knot_is_paused_and_resumed_with_no_program_on_path() {
    if !common::rerun_with_empty_path("knot_is_paused_and_resumed_with_no_program_on_path") {
        return;
    }
    let Some(mut knot) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let www = || query("www.example.test.", RecordType::A, Some(1232));
    assert!(
        timed(knot.addr, &www(), Duration::from_secs(2)).is_some(),
        "knotd answers"
    );
    knot.pause();
    assert!(
        timed(knot.addr, &www(), Duration::from_millis(500)).is_none(),
        "a paused knotd answers nothing"
    );
    knot.resume();
    assert!(
        timed(knot.addr, &www(), Duration::from_secs(2)).is_some(),
        "a resumed knotd answers again"
    );
    knot.kill();
}

#[test]
fn names_outside_the_domain_are_forwarded_and_cached_for_each_type() {
    let Some(knot) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let s = forwarding_to(&[knot.addr], &[]);

    let a = ask(&s, "www.example.test.", RecordType::A);
    assert_eq!(a.response_code(), ResponseCode::NoError);
    assert!(a.recursion_available() && !a.authoritative());
    assert_eq!(a_of(&a), [Ipv4Addr::new(192, 0, 2, 10)]);

    let aaaa = ask(&s, "v6.example.test.", RecordType::AAAA);
    assert!(
        matches!(aaaa.answers()[0].data(), Some(RData::AAAA(ip)) if ip.0 == "2001:db8::10".parse::<std::net::Ipv6Addr>().unwrap())
    );

    let cname = ask(&s, "Alias.Example.Test.", RecordType::A);
    assert_eq!(
        cname.queries()[0].name().to_ascii(),
        "Alias.Example.Test.",
        "the question is echoed as asked"
    );
    assert!(
        matches!(cname.answers()[0].data(), Some(RData::CNAME(t)) if t.0.to_ascii().eq_ignore_ascii_case("www.example.test.")),
        "{cname:?}"
    );
    assert_eq!(a_of(&cname), [Ipv4Addr::new(192, 0, 2, 10)]);

    let srv = ask(&s, "_http._tcp.example.test.", RecordType::SRV);
    assert!(
        matches!(srv.answers()[0].data(), Some(RData::SRV(v)) if v.port() == 80 && v.target().to_ascii() == "www.example.test.")
    );

    let mx = ask(&s, "example.test.", RecordType::MX);
    assert!(matches!(mx.answers()[0].data(), Some(RData::MX(v)) if v.exchange().to_ascii() == "mail.example.test."));

    let client = Client::new();
    for name in ["www.example.test.", "alias.example.test.", "_http._tcp.example.test."] {
        let rtype = if name.starts_with('_') {
            RecordType::SRV
        } else {
            RecordType::A
        };
        let first = client.ask(&s, name, rtype);
        let again = client.ask(&s, name, rtype);
        assert_eq!(
            first.answers(),
            again.answers(),
            "{name} comes from the cache unchanged"
        );
    }
    assert_eq!(
        ask(&s, "web.skydns.local.", RecordType::A).response_code(),
        ResponseCode::NoError
    );
}

#[test]
fn cached_ttls_count_down() {
    let Some(knot) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let s = forwarding_to(&[knot.addr], &[]);
    let client = Client::new();
    assert_eq!(ttl_of(&client.ask(&s, "www.example.test.", RecordType::A)), 300);
    std::thread::sleep(Duration::from_millis(2100));
    let ttl = ttl_of(&client.ask(&s, "www.example.test.", RecordType::A));
    assert!((297..=298).contains(&ttl), "TTL {ttl} after 2.1 s");
}

#[test]
fn truncated_upstream_answers_are_fetched_again_over_tcp() {
    let Some(knot) = Knot::start(&[("example.test.", &big_zone())]) else {
        return;
    };
    let s = forwarding_to(&[knot.addr], &[]);
    let udp = ask(&s, "big.example.test.", RecordType::A);
    assert!(udp.truncated(), "100 addresses do not fit 1232 bytes");
    let tcp = tcp_query(s.addr, &query("big.example.test.", RecordType::A, Some(1232)));
    assert!(!tcp.truncated());
    assert_eq!(a_of(&tcp).len(), 100, "the whole RRset came from the upstream over TCP");
}

#[test]
fn negative_answers_are_cached_within_their_cap() {
    let upstream = Scripted::start(Script::NxDomain { soa_ttl: 300 });
    let s = forwarding_to(&[upstream.addr], &["--cache-negative-ttl", "2"]);
    let client = Client::new();
    let first = client.ask(&s, "gone.example.test.", RecordType::A);
    assert_eq!(first.response_code(), ResponseCode::NXDomain);
    assert!(first.name_servers()[0].ttl() <= 2, "SOA TTL capped");
    assert_eq!(
        client.ask(&s, "gone.example.test.", RecordType::A).response_code(),
        ResponseCode::NXDomain
    );
    assert_eq!(
        upstream.count("gone.example.test."),
        1,
        "the second came from the cache"
    );
    std::thread::sleep(Duration::from_millis(2300));
    assert_eq!(
        client.ask(&s, "gone.example.test.", RecordType::A).response_code(),
        ResponseCode::NXDomain
    );
    assert_eq!(
        upstream.count("gone.example.test."),
        2,
        "asked again once the cap ran out"
    );

    let cluster = ask(&s, "gone.svc.cluster.local.", RecordType::A);
    assert_eq!(cluster.response_code(), ResponseCode::NXDomain);
    assert!(cluster.name_servers()[0].ttl() <= 2);
    let s = forwarding_to(&[upstream.addr], &[]);
    let cluster = ask(&s, "gone2.svc.cluster.local.", RecordType::A);
    assert!(
        cluster.name_servers()[0].ttl() <= 5,
        "cluster.local. absence is remembered 5 s at most"
    );
    assert_eq!(
        ask(&s, "gone3.example.test.", RecordType::A).name_servers()[0].ttl(),
        300
    );
}

#[test]
fn a_killed_upstream_fails_over_to_the_other() {
    let Some(mut dead) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let Some(alive) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let s = forwarding_to(&[dead.addr, alive.addr], &[]);
    assert_eq!(
        ask(&s, "warm.example.test.", RecordType::A).response_code(),
        ResponseCode::NoError
    );
    dead.kill();
    for i in 0..20 {
        let q = query(&format!("host{i}.example.test."), RecordType::A, Some(1232));
        let (raw, took) = timed(s.addr, &q, Duration::from_secs(3)).expect("an answer");
        let reply = Message::from_vec(&raw).unwrap();
        assert_eq!(reply.response_code(), ResponseCode::NoError, "host{i}");
        assert_eq!(a_of(&reply), [Ipv4Addr::new(192, 0, 2, 99)]);
        assert!(took < Duration::from_millis(500), "host{i} took {took:?}");
    }
}

#[test]
fn a_paused_upstream_gives_stale_answers_and_fast_failures() {
    let Some(knot) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let s = forwarding_to(&[knot.addr], &[]);
    let client = Client::new();
    assert_eq!(ttl_of(&client.ask(&s, "short.example.test.", RecordType::A)), 1);
    knot.pause();
    std::thread::sleep(Duration::from_millis(1500));

    let stale = query("short.example.test.", RecordType::A, Some(1232));
    let (raw, took) = client
        .timed(s.addr, &stale, Duration::from_secs(3))
        .expect("a stale answer, not silence");
    let reply = Message::from_vec(&raw).unwrap();
    assert_eq!(a_of(&reply), [Ipv4Addr::new(192, 0, 2, 11)]);
    assert_eq!(ttl_of(&reply), 30, "stale answers carry TTL 30 (RFC 8767)");
    assert_eq!(ede(&raw), Some(3), "EDE Stale Answer");
    assert!(took < Duration::from_millis(1000), "first stale answer took {took:?}");

    // By now the upstream has failed its tries and is known to be down: nothing waits.
    std::thread::sleep(Duration::from_millis(1500));
    let (raw, took) = client
        .timed(s.addr, &stale, Duration::from_secs(3))
        .expect("a stale answer");
    assert_eq!(ede(&raw), Some(3));
    assert!(
        took < Duration::from_millis(100),
        "stale answer while down took {took:?}"
    );
    let never = query("never-cached.example.test.", RecordType::A, Some(1232));
    let (raw, took) = timed(s.addr, &never, Duration::from_secs(3)).expect("SERVFAIL, not silence");
    assert_eq!(Message::from_vec(&raw).unwrap().response_code(), ResponseCode::ServFail);
    assert_eq!(ede(&raw), Some(22), "EDE No Reachable Authority");
    assert!(took < Duration::from_millis(100), "SERVFAIL took {took:?}");

    knot.resume();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let reply = ask(&s, "never-cached.example.test.", RecordType::A);
        if reply.response_code() == ResponseCode::NoError {
            break;
        }
        assert!(Instant::now() < deadline, "the upstream was not found back");
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while ede(&client
        .timed(s.addr, &stale, Duration::from_secs(3))
        .expect("an answer")
        .0)
    .is_some()
    {
        assert!(Instant::now() < deadline, "still stale after the upstream came back");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An overloaded upstream: Knot stopped for 200 ms of every 250 ms, so every try sent early in
/// a stall times out (the retry timeout is at its 150 ms floor after fast answers), yet every
/// answer comes within the forwarding timeout. New names, 200 a second, must all get those
/// answers: an upstream that answers between its stalls is slow, not down, and its clients
/// wait for it instead of getting SERVFAIL.
#[test]
fn a_stalling_upstream_is_waited_for_not_marked_down() {
    let Some(knot) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let s = forwarding_to(&[knot.addr], &[]);
    for i in 0..20 {
        let fast = ask(&s, &format!("fast{i}.example.test."), RecordType::A);
        assert_eq!(fast.response_code(), ResponseCode::NoError);
    }
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let stalling = AtomicBool::new(true);
    let sent = 400;
    // Bounded on its own too, so that a failure elsewhere in the scope cannot leave it running.
    let stall_until = Instant::now() + Duration::from_secs(10);
    let rcodes = std::thread::scope(|scope| {
        scope.spawn(|| {
            while stalling.load(Ordering::Relaxed) && Instant::now() < stall_until {
                knot.pause();
                std::thread::sleep(Duration::from_millis(200));
                knot.resume();
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let receiver = scope.spawn(|| {
            let mut rcodes = std::collections::BTreeMap::new();
            let mut buf = [0u8; 4096];
            while rcodes.values().sum::<usize>() < sent {
                let Ok((n, _)) = socket.recv_from(&mut buf) else {
                    break;
                };
                let code = Message::from_vec(&buf[..n]).unwrap().response_code();
                *rcodes.entry(format!("{code:?}")).or_insert(0) += 1;
            }
            rcodes
        });
        for i in 0..sent {
            let q = query(&format!("slow{i}.example.test."), RecordType::A, Some(1232));
            socket.send_to(&q.to_vec().unwrap(), s.addr).unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        let rcodes = receiver.join().unwrap();
        stalling.store(false, Ordering::Relaxed);
        rcodes
    });
    assert_eq!(
        rcodes,
        [("NoError".to_string(), sent)].into(),
        "every new name answered by the stalling upstream"
    );
}

/// Two upstreams, one answering 100 ms late: once both round-trip times are known, new names
/// go to the fast one, and the slow one gets a first try only every 250 ms, enough to notice
/// when it is fast again. Blind rotation (SkyDNS) sends it every other name.
#[test]
fn a_slow_upstream_of_two_gets_few_first_tries() {
    let Some(fast) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let slow = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::from_millis(100),
    });
    let s = forwarding_to(&[fast.addr, slow.addr], &[]);
    let client = Client::new();
    for i in 0..4 {
        client.ask(&s, &format!("warm{i}.example.test."), RecordType::A);
    }
    let started = Instant::now();
    let mut from_slow = 0;
    let names = 100;
    for i in 0..names {
        if a_of(&client.ask(&s, &format!("new{i}.example.test."), RecordType::A)) == [GOOD] {
            from_slow += 1;
        }
    }
    let most = started.elapsed().as_millis() / 250 + 1;
    assert!(
        from_slow <= most,
        "{from_slow} of {names} names went to the slow upstream in {:?}",
        started.elapsed()
    );
}

/// A forwarding timeout shorter than the first retry timeout (500 ms until an upstream's
/// round-trip time is known) cut every try short; those tries once never counted against the
/// upstream, so a dead one was never marked down and every client waited the whole timeout.
#[test]
fn a_silent_upstream_is_found_dead_under_a_short_forwarding_timeout() {
    let silent = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let timeout = Duration::from_millis(300);
    let s = forwarding_to(&[silent.local_addr().unwrap()], &["--forward-timeout", "300ms"]);
    let mut took = Vec::new();
    for i in 0..6 {
        let q = query(&format!("n{i}.example.test."), RecordType::A, Some(1232));
        let (raw, elapsed) = timed(s.addr, &q, Duration::from_secs(3)).expect("SERVFAIL, not silence");
        assert_eq!(Message::from_vec(&raw).unwrap().response_code(), ResponseCode::ServFail);
        assert_eq!(ede(&raw), Some(22), "EDE No Reachable Authority");
        assert!(elapsed < timeout * 2, "n{i} took {elapsed:?}");
        took.push(elapsed);
    }
    assert!(
        took[3..].iter().all(|t| *t < Duration::from_millis(100)),
        "still waiting for a known-dead upstream: {took:?}"
    );
}

#[test]
fn identical_questions_in_flight_reach_the_upstream_once() {
    let upstream = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::from_millis(300),
    });
    let s = forwarding_to(&[upstream.addr], &[]);
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    for id in 0..20u16 {
        let mut q = query("same.example.test.", RecordType::A, Some(1232));
        q.set_id(id);
        client.send_to(&q.to_vec().unwrap(), s.addr).unwrap();
    }
    let mut ids = Vec::new();
    let mut buf = [0u8; 4096];
    for _ in 0..20 {
        let (n, _) = client.recv_from(&mut buf).expect("every client is answered");
        let reply = Message::from_vec(&buf[..n]).unwrap();
        assert_eq!(a_of(&reply), [GOOD]);
        ids.push(reply.id());
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
    assert_eq!(upstream.count("same.example.test."), 1);
}

#[test]
fn popular_names_are_refreshed_before_they_expire() {
    let upstream = Scripted::start(Script::Address {
        ttl: 10,
        delay: Duration::ZERO,
    });
    let s = forwarding_to(&[upstream.addr], &[]);
    let client = Client::new();
    let started = Instant::now();
    for _ in 0..3 {
        assert_eq!(a_of(&client.ask(&s, "hot.example.test.", RecordType::A)), [GOOD]);
    }
    assert_eq!(upstream.count("hot.example.test."), 1);
    std::thread::sleep(Duration::from_millis(9200).saturating_sub(started.elapsed()));
    assert_eq!(a_of(&client.ask(&s, "hot.example.test.", RecordType::A)), [GOOD]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        upstream.count("hot.example.test."),
        2,
        "refreshed in the last tenth of its TTL"
    );
    std::thread::sleep(Duration::from_millis(10_500).saturating_sub(started.elapsed()));
    let after = client.ask(&s, "hot.example.test.", RecordType::A);
    assert!(
        ttl_of(&after) >= 8,
        "the refreshed entry answers: TTL {}",
        ttl_of(&after)
    );
    assert_eq!(upstream.count("hot.example.test."), 2, "no miss at expiry");
}

#[test]
fn forged_replies_are_dropped() {
    let upstream = Scripted::start(Script::Forge);
    let s = forwarding_to(&[upstream.addr], &[]);
    let reply = ask(&s, "target.example.test.", RecordType::A);
    assert_eq!(
        a_of(&reply),
        [GOOD],
        "neither another port, nor a wrong ID, nor a wrong question got in"
    );
    let queries = upstream.queries();
    let q = &queries[0];
    assert_ne!(q.id(), reply.id(), "the upstream query has an ID of its own");
}

#[test]
fn upstream_queries_use_random_ids_and_ports() {
    let upstream = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::ZERO,
    });
    let s = forwarding_to(&[upstream.addr], &[]);
    for i in 0..20 {
        ask(&s, &format!("n{i}.example.test."), RecordType::A);
    }
    let ids: std::collections::HashSet<u16> = upstream.queries().iter().map(Message::id).collect();
    assert!(ids.len() >= 19, "{} distinct IDs in 20 queries", ids.len());
}

#[test]
fn the_recursion_acl_refuses_other_clients() {
    let upstream = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::ZERO,
    });
    let s = forwarding_to(&[upstream.addr], &["--recursion-acl", "10.0.0.0/8,192.168.0.0/16"]);
    let refused = ask(&s, "www.example.test.", RecordType::A);
    assert_eq!(refused.response_code(), ResponseCode::Refused);
    assert!(!refused.recursion_available());
    assert_eq!(upstream.count("www.example.test."), 0);
    let local = ask(&s, "web.skydns.local.", RecordType::A);
    assert_eq!(
        local.response_code(),
        ResponseCode::NoError,
        "the domain is served to everyone"
    );
    assert!(!local.recursion_available());

    let open = forwarding_to(&[upstream.addr], &[]);
    let reply = ask(&open, "www.example.test.", RecordType::A);
    assert_eq!(
        reply.response_code(),
        ResponseCode::NoError,
        "127.0.0.1 is in the default ACL"
    );
    assert!(reply.recursion_available());
    assert!(ask(&open, "web.skydns.local.", RecordType::A).recursion_available());
}

#[test]
fn no_rec_and_ndots_keep_names_from_upstreams_as_skydns_does() {
    let upstream = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::ZERO,
    });
    let s = forwarding_to(&[upstream.addr], &["--no-rec"]);
    assert_eq!(
        ask(&s, "www.example.test.", RecordType::A).response_code(),
        ResponseCode::Refused
    );

    let s = forwarding_to(&[upstream.addr], &["--ndots", "3"]);
    let short = ask(&s, "example.test.", RecordType::A);
    assert_eq!(short.response_code(), ResponseCode::ServFail, "2 labels < ndots 3");
    assert!(short.recursion_available());
    assert_eq!(a_of(&ask(&s, "a.example.test.", RecordType::A)), [GOOD]);
    assert_eq!(upstream.count("example.test."), 0);
}

#[test]
fn several_listen_addresses_serve_alike() {
    let upstream = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::ZERO,
    });
    let s = forwarding_to(&[upstream.addr], &["--addr", "127.0.0.2:0"]);
    let second = second_address(&s);
    for addr in [s.addr, second] {
        let q = query("www.example.test.", RecordType::A, Some(1232));
        let reply = udp_query(addr, &q);
        assert_eq!(a_of(&reply), [GOOD], "{addr}");
        let web = udp_query(addr, &query("web.skydns.local.", RecordType::A, None));
        assert_eq!(web.response_code(), ResponseCode::NoError, "{addr}");
        let tcp = tcp_query(addr, &query("www.example.test.", RecordType::A, None));
        assert_eq!(a_of(&tcp), [GOOD], "{addr} over TCP");
    }
}

fn second_address(s: &Skyline) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = s.log_text();
        if let Some(at) = log.find("udp://127.0.0.2:") {
            let rest = &log[at + "udp://".len()..];
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            return rest[..end].parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no second address in the log:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn stub_zones_go_to_their_servers_with_the_loop_guard() {
    let stub = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::ZERO,
    });
    let spec = format!("corp.test.={}", stub.addr);
    let s = Skyline::start(RECORDS, &["--stub-zone", &spec], &[]);
    assert_eq!(a_of(&ask(&s, "www.corp.test.", RecordType::A)), [GOOD]);
    let sent = &stub.queries()[0];
    let guard = sent.extensions().as_ref().and_then(|e| {
        e.option(hickory_proto::rr::rdata::opt::EdnsCode::Unknown(65011))
            .cloned()
    });
    assert!(guard.is_some(), "the stub server got option 65011: {sent:?}");
    assert_eq!(
        ask(&s, "www.example.test.", RecordType::A).response_code(),
        ResponseCode::Refused,
        "no default resolvers: only the stub zone is forwarded"
    );

    let mut looped = query("loop.corp.test.", RecordType::A, Some(1232));
    if let Some(edns) = looped.extensions_mut().as_mut() {
        edns.options_mut()
            .insert(hickory_proto::rr::rdata::opt::EdnsOption::Unknown(65011, vec![1]));
    }
    assert!(
        timed(s.addr, &looped, Duration::from_millis(800)).is_none(),
        "a query that already went through a stub forwarder is dropped"
    );
    assert_eq!(stub.count("loop.corp.test."), 0);
}

#[test]
fn tcp_clients_are_answered_from_upstreams_too() {
    let Some(knot) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let s = forwarding_to(&[knot.addr], &[]);
    let reply = tcp_query(s.addr, &query("v6.example.test.", RecordType::AAAA, Some(1232)));
    assert_eq!(reply.answers().len(), 1);
    let cached = tcp_query(s.addr, &query("v6.example.test.", RecordType::AAAA, None));
    assert_eq!(cached.answers(), reply.answers());
}

/// SkyDNS records whose hosts lie outside the domain, in the zone Knot serves.
const LEAVING: &str = r#"{"/skydns/local/skydns/out": {"host": "www.example.test"},
    "/skydns/local/skydns/svc/web": {"host": "www.example.test", "port": 80}}"#;

fn leaving_to(upstreams: &[SocketAddr], more: &[&str]) -> Skyline {
    let list = upstreams.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
    let mut args = vec!["--nameservers", list.as_str()];
    args.extend_from_slice(more);
    Skyline::start(LEAVING, &args, &[])
}

/// The CNAME targets of a reply's answer section.
fn cnames_of(reply: &Message) -> Vec<String> {
    reply
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            Some(RData::CNAME(t)) => Some(t.0.to_ascii().to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_name_pointing_outside_the_domain_is_completed_at_its_own_name_from_upstream_then_the_cache() {
    let Some(knot) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let s = leaving_to(&[knot.addr], &[]);
    let client = Client::new();
    for round in ["upstream", "cache"] {
        let reply = client.ask(&s, "out.skydns.local.", RecordType::A);
        assert_eq!(reply.response_code(), ResponseCode::NoError, "{round}");
        assert!(reply.authoritative(), "{round}: the name is the domain's own");
        assert!(
            cnames_of(&reply).is_empty(),
            "{round}: no CNAME beside the SRV: {reply:?}"
        );
        assert_eq!(a_of(&reply), [Ipv4Addr::new(192, 0, 2, 10)], "{round}: {reply:?}");
        let answer = &reply.answers()[0];
        assert_eq!(answer.name().to_ascii(), "out.skydns.local.", "{round}");
        assert!(
            answer.ttl() <= 300,
            "{round}: no longer than the upstream's record: {answer:?}"
        );
    }
    let srv = client.ask(&s, "out.skydns.local.", RecordType::SRV);
    assert_eq!(srv.answers().len(), 1, "{srv:?}");
    assert_eq!(srv.answers()[0].record_type(), RecordType::SRV);
}

#[test]
fn a_cname_chain_leaving_the_domain_is_completed_from_upstream_then_the_cache() {
    let Some(knot) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let s = leaving_to(&[knot.addr], &["--cname-chains"]);
    let client = Client::new();
    for round in ["upstream", "cache"] {
        let reply = client.ask(&s, "out.skydns.local.", RecordType::A);
        assert_eq!(reply.response_code(), ResponseCode::NoError, "{round}");
        assert!(reply.authoritative(), "{round}: the chain is the domain's own");
        assert_eq!(cnames_of(&reply), ["www.example.test."], "{round}");
        assert_eq!(a_of(&reply), [Ipv4Addr::new(192, 0, 2, 10)], "{round}: {reply:?}");
        assert_eq!(reply.answers()[1].name().to_ascii(), "www.example.test.", "{round}");
    }
}

#[test]
fn srv_targets_outside_the_domain_get_their_addresses_as_additional_data() {
    let Some(knot) = Knot::start(&[("example.test.", ZONE)]) else {
        return;
    };
    let s = leaving_to(&[knot.addr], &[]);
    let client = Client::new();
    let first = client.ask(&s, "svc.skydns.local.", RecordType::SRV);
    assert_eq!(first.response_code(), ResponseCode::NoError);
    assert_eq!(first.answers().len(), 1, "{first:?}");
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let reply = client.ask(&s, "svc.skydns.local.", RecordType::SRV);
        let glue: Vec<Ipv4Addr> = reply
            .additionals()
            .iter()
            .filter(|r| r.name().to_ascii() == "www.example.test.")
            .filter_map(|r| match r.data() {
                Some(RData::A(a)) => Some(a.0),
                _ => None,
            })
            .collect();
        if glue == [Ipv4Addr::new(192, 0, 2, 10)] {
            break;
        }
        assert!(Instant::now() < deadline, "no glue for the outside target: {reply:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A name pointing outside the domain whose target no upstream answers is NODATA with the SOA,
/// as SkyDNS drops a chain it cannot complete.
#[test]
fn a_chain_whose_target_no_upstream_answers_is_dropped_within_the_timeout() {
    let silent = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let s = leaving_to(&[silent.local_addr().unwrap()], &["--forward-timeout", "300ms"]);
    let q = query("out.skydns.local.", RecordType::A, Some(1232));
    let (raw, took) = timed(s.addr, &q, Duration::from_secs(3)).expect("NODATA, not silence");
    let reply = Message::from_vec(&raw).unwrap();
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.answers().is_empty(), "{reply:?}");
    assert_eq!(reply.name_servers().len(), 1, "the SOA");
    assert!(took < Duration::from_millis(600), "took {took:?}");
}

#[test]
fn clients_outside_the_recursion_acl_get_no_incomplete_chain() {
    let upstream = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::ZERO,
    });
    let s = leaving_to(&[upstream.addr], &["--recursion-acl", "10.0.0.0/8"]);
    let reply = ask(&s, "out.skydns.local.", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.answers().is_empty(), "{reply:?}");
    assert_eq!(reply.name_servers().len(), 1, "NODATA with the SOA");
    assert_eq!(upstream.count("www.example.test."), 0);

    let open = leaving_to(&[upstream.addr], &[]);
    let reply = ask(&open, "out.skydns.local.", RecordType::A);
    assert_eq!(a_of(&reply), [GOOD], "{reply:?}");
}
