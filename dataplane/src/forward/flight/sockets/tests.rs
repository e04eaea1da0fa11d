//! The socket layer over loopback sockets: what only real sockets show (ports, framing,
//! readiness). The policy above it is tested with simulated time in `machine`'s tests.

use super::*;
use crate::cache::{CacheConfig, Key};
use crate::forward::flight::machine::{Done, Entropy, Kind};
use crate::forward::{ForwardConfig, Route};
use crate::stats::Totals;
use crate::wire::name::skip_name;
use crate::wire::types::{class, rtype};
use crate::wire::{LowerName, Name};
use std::collections::HashSet;

fn question(i: u32) -> Key {
    let name = Name::from_dotted(&format!("q{i}.example.org.")).unwrap();
    Key::new(
        &LowerName::from_wire(name.wire()).unwrap(),
        rtype::A,
        class::IN,
        false,
        false,
    )
}

/// The reply to `query` with one A record; TC set when `truncated`.
fn answer(query: &[u8], truncated: bool) -> Vec<u8> {
    let mut reply = query.to_vec();
    reply[2] |= if truncated { 0x82 } else { 0x80 };
    reply[3] = 0x80;
    reply[6..8].copy_from_slice(&1u16.to_be_bytes());
    reply[10..12].copy_from_slice(&0u16.to_be_bytes());
    reply.truncate(skip_name(&reply, 12).unwrap() + 4);
    reply.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
    reply
}

/// A machine and its sockets, forwarding to `upstream`.
struct Rig {
    poll: mio::Poll,
    machine: Machine<u32>,
    sockets: Sockets,
    cache: Cache,
    stats: Arc<WorkerStats>,
    done: Vec<Done<u32>>,
}

impl Rig {
    fn new(upstream: SocketAddr) -> Rig {
        Rig::over(upstream, crate::forward::Transport::PreferUdp)
    }

    fn over(upstream: SocketAddr, transport: crate::forward::Transport) -> Rig {
        let poll = mio::Poll::new().unwrap();
        let config = ForwardConfig {
            upstreams: vec![upstream],
            transport,
            ..ForwardConfig::default()
        };
        let stats = Arc::new(WorkerStats::default());
        Rig {
            machine: Machine::with_stats(
                &[&[upstream]],
                &config,
                &config.health(Instant::now()),
                Entropy::default(),
                Arc::clone(&stats),
            ),
            sockets: Sockets::new(poll.registry().try_clone().unwrap(), Arc::clone(&stats), None),
            poll,
            cache: Cache::new(CacheConfig::default()),
            stats,
            done: Vec::new(),
        }
    }

    fn submit(&mut self, i: u32) {
        let kind = Kind::Clients { stale: false };
        self.machine
            .submit(&question(i), Route::DEFAULT, Some(i), kind, Instant::now())
            .unwrap();
        self.sockets.flush(&mut self.machine, Instant::now());
    }

    /// Handles readiness until `n` questions ended, for at most 2 s.
    fn until_done(&mut self, n: usize) {
        self.until(|rig| rig.done.len() >= n);
    }

    /// Handles readiness until `done` says so, for at most 2 s.
    fn until(&mut self, done: impl Fn(&Rig) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut events = mio::Events::with_capacity(16);
        while !done(self) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "not done in 2 s");
            self.poll.poll(&mut events, Some(left)).unwrap();
            let ready: Vec<usize> = events.iter().filter_map(|e| Sockets::socket_of(e.token())).collect();
            let now = Instant::now();
            self.sockets.receive(&ready, &mut self.machine, &self.cache, now);
            self.sockets.flush(&mut self.machine, now);
            self.machine.drain_done(&mut self.done);
        }
    }

    /// Submits question `i`, answers its try from `upstream`, and waits for it to end; the
    /// query and where it came from.
    fn answered(&mut self, upstream: &std::net::UdpSocket, i: u32) -> (Vec<u8>, SocketAddr) {
        self.submit(i);
        let (query, from) = next_query(upstream);
        upstream.send_to(&answer(&query, false), from).unwrap();
        self.until(|rig| rig.done.len() > i as usize);
        (query, from)
    }

    fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        self.stats.add_to(&mut totals);
        totals
    }

    fn upstreams(&self) -> Vec<crate::stats::UpstreamTotals> {
        let mut totals = Vec::new();
        self.stats.upstreams.add_to(&mut totals);
        totals
    }

    fn spare_ports(&self) -> HashSet<u16> {
        self.sockets
            .spares
            .iter()
            .flat_map(|s| &s.ready)
            .map(|&socket| match &self.sockets.open[socket] {
                Some(Open {
                    link: Link::Udp(udp), ..
                }) => udp.local_addr().unwrap().port(),
                _ => panic!("a spare is a UDP socket"),
            })
            .collect()
    }
}

fn upstream() -> std::net::UdpSocket {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket
}

/// The next query `upstream` receives, and where from.
fn next_query(upstream: &std::net::UdpSocket) -> (Vec<u8>, SocketAddr) {
    let mut buf = [0u8; 512];
    let (len, from) = upstream.recv_from(&mut buf).unwrap();
    (buf[..len].to_vec(), from)
}

#[test]
fn every_try_has_a_socket_of_its_own_and_spares_wait_for_the_next_tries() {
    let upstream = upstream();
    let mut rig = Rig::new(upstream.local_addr().unwrap());
    for i in 0..3 {
        rig.submit(i);
    }
    let queries: Vec<_> = (0..3).map(|_| next_query(&upstream)).collect();
    let first_ports: HashSet<u16> = queries.iter().map(|(_, from)| from.port()).collect();
    assert_eq!(first_ports.len(), 3, "three tries, three ports");

    rig.sockets.top_up(Instant::now());
    let spares = rig.spare_ports();
    assert_eq!(spares.len(), 3, "as many spares as tries in the turn");
    assert!(spares.is_disjoint(&first_ports));

    for (query, from) in &queries {
        upstream.send_to(&answer(query, false), from).unwrap();
    }
    rig.until_done(3);
    let open = rig.sockets.open.iter().flatten().count();
    assert_eq!(open, 3, "the answered tries' sockets are closed, the spares wait");

    rig.submit(3);
    let (_, from) = next_query(&upstream);
    assert!(spares.contains(&from.port()), "the next try leaves from a spare");
    assert_eq!(rig.spare_ports().len(), 2, "a spare serves one try");
    let totals = rig.totals();
    assert_eq!(totals.upstream_queries, 4);
    let answered: u64 = rig.upstreams().iter().flat_map(|u| &u.answers).map(|h| h.count()).sum();
    assert_eq!(answered, 3, "each answered try is timed");
}

#[test]
fn an_ended_try_gives_up_its_port_and_its_socket_leaves_again_from_a_new_one() {
    let upstream = upstream();
    let mut rig = Rig::new(upstream.local_addr().unwrap());
    let (query, from) = rig.answered(&upstream, 0);
    // A late duplicate waits on the ended try's socket when its port is given up.
    upstream.send_to(&answer(&query, false), from).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    rig.sockets.tidy(1, Instant::now());
    assert_eq!(
        rig.sockets.released.len(),
        1,
        "the socket stays open, its port given up"
    );
    let old = std::net::UdpSocket::bind(("127.0.0.1", from.port()));
    assert!(old.is_ok(), "port {} is free again", from.port());
    drop(old);

    rig.submit(1);
    let (query, again) = next_query(&upstream);
    assert!(rig.sockets.released.is_empty(), "the try took the released socket");
    assert_ne!(again.port(), from.port(), "from a new port");
    upstream.send_to(&answer(&query, false), again).unwrap();
    rig.until_done(2);
    assert!(rig.done.iter().all(|done| done.result.is_ok()), "{:?}", rig.done);
    assert_eq!(
        rig.totals().upstream_mismatched_id,
        0,
        "the duplicate was discarded with the old port"
    );
}

#[test]
fn a_released_socket_serves_only_an_upstream_of_its_family() {
    let upstream = upstream();
    let v4 = upstream.local_addr().unwrap();
    let mut rig = Rig::new(v4);
    rig.answered(&upstream, 0);
    rig.sockets.tidy(1, Instant::now());
    let [Released {
        socket: released,
        ipv4: true,
        ..
    }] = rig.sockets.released[..]
    else {
        panic!("one released IPv4 socket");
    };

    let v6 = rig.sockets.open_udp("[::1]:53".parse().unwrap()).unwrap();
    assert_ne!(v6, released, "an IPv6 upstream gets a socket of its own");
    assert_eq!(rig.sockets.released.len(), 1, "the IPv4 one is kept, not spent");
    assert_eq!(
        rig.sockets.open_udp(v4).unwrap(),
        released,
        "and serves the next IPv4 try"
    );
}

#[test]
fn an_error_waiting_on_a_released_socket_does_not_fail_its_next_try() {
    let upstream = upstream();
    let addr = upstream.local_addr().unwrap();
    let mut rig = Rig::new(addr);
    rig.answered(&upstream, 0);
    // The upstream goes away: a datagram to it comes back as "port unreachable", an error the
    // socket holds until it is read.
    drop(upstream);
    let Link::Udp(udp) = &rig.sockets.ended[0].1 else {
        panic!("a UDP try ended");
    };
    udp.send(b"x").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    rig.sockets.tidy(1, Instant::now());
    assert_eq!(rig.sockets.released.len(), 1);

    let upstream = std::net::UdpSocket::bind(addr).unwrap();
    upstream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    rig.submit(1);
    let (query, from) = next_query(&upstream);
    upstream.send_to(&answer(&query, false), from).unwrap();
    rig.until_done(2);
    assert!(rig.done[1].result.is_ok(), "{:?}", rig.done[1]);
    assert_eq!(rig.totals().upstream_errors, 0, "the try did not fail on the old error");
}

#[test]
fn what_a_spare_receives_before_its_try_is_discarded() {
    let upstream = upstream();
    let mut rig = Rig::new(upstream.local_addr().unwrap());
    rig.submit(0);
    let (query, from) = next_query(&upstream);
    rig.sockets.top_up(Instant::now());
    let spare = *rig.spare_ports().iter().next().unwrap();
    upstream.send_to(&answer(&query, false), ("127.0.0.1", spare)).unwrap();
    rig.until(|rig| rig.totals().upstream_mismatched_id == 1);
    upstream.send_to(&answer(&query, false), from).unwrap();
    rig.until_done(1);
    rig.submit(1);
    let (query, from) = next_query(&upstream);
    assert_eq!(from.port(), spare);
    upstream.send_to(&answer(&query, false), from).unwrap();
    rig.until_done(2);
    assert!(rig.done.iter().all(|d| d.result.is_ok()));
    assert_eq!(rig.totals().upstream_mismatched_id, 1, "the datagram before the try");
}

/// The bug: a TCP reply that was not the one awaited stayed at the front of the input, and was
/// read again and again, the worker spinning on it for good.
#[test]
fn a_truncated_answer_is_read_over_tcp_past_a_message_that_is_not_the_reply() {
    let (udp, tcp) = loop {
        let udp = upstream();
        if let Ok(tcp) = std::net::TcpListener::bind(udp.local_addr().unwrap()) {
            break (udp, tcp);
        }
    };
    let mut rig = Rig::new(udp.local_addr().unwrap());
    rig.submit(0);
    let (query, from) = next_query(&udp);
    udp.send_to(&answer(&query, true), from).unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = tcp.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut len = [0u8; 2];
        conn.read_exact(&mut len).unwrap();
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
        conn.read_exact(&mut query).unwrap();
        let mut wrong = answer(&query, false);
        wrong[1] ^= 1;
        let right = answer(&query, true);
        let mut out = Vec::new();
        for message in [&wrong, &right] {
            out.extend_from_slice(&(message.len() as u16).to_be_bytes());
            out.extend_from_slice(message);
        }
        conn.write_all(&out).unwrap();
        conn
    });
    rig.until_done(1);
    assert!(matches!(rig.done.as_slice(), [Done { result: Ok(_), .. }]));
    let totals = rig.totals();
    assert_eq!((totals.upstream_tcp_retries, totals.upstream_mismatched_id), (1, 1));
    assert_eq!(totals.upstream_queries, 2, "the UDP try and the TCP one");
    drop(server.join().unwrap());
    assert_eq!(rig.sockets.open.iter().flatten().count(), 0, "the connection is closed");
}

#[test]
fn frames_are_taken_whole_one_at_a_time() {
    let mut message = [0u8; 8];
    let mut input = vec![0, 3, 1, 2];
    assert_eq!(take_frame(&mut input, &mut message), None, "not all in");
    input.extend_from_slice(&[3, 0, 1, 9, 0]);
    assert_eq!(take_frame(&mut input, &mut message), Some(3));
    assert_eq!(&message[..3], &[1, 2, 3]);
    assert_eq!(take_frame(&mut input, &mut message), Some(1));
    assert_eq!(message[0], 9);
    assert_eq!(input, [0], "half a prefix waits");
}

#[test]
fn the_spares_of_an_upstream_no_try_went_to_for_a_while_are_closed() {
    let upstream = upstream();
    let mut rig = Rig::new(upstream.local_addr().unwrap());
    rig.submit(0);
    next_query(&upstream);
    let last_try = rig.sockets.spares[0].last_try;
    rig.sockets.top_up(last_try);
    assert_eq!(rig.spare_ports().len(), 1);
    rig.sockets.top_up(last_try + SPARE_IDLE);
    assert_eq!(rig.spare_ports().len(), 1, "kept for {SPARE_IDLE:?}");
    rig.sockets.top_up(last_try + SPARE_IDLE + Duration::from_millis(1));
    assert!(rig.sockets.spares.is_empty(), "closed after");
    assert_eq!(
        rig.sockets.open.iter().flatten().count(),
        1,
        "the try's own socket stays"
    );
}

#[test]
fn ended_sockets_close_and_spares_open_only_once_the_clients_are_answered() {
    let upstream = upstream();
    let mut rig = Rig::new(upstream.local_addr().unwrap());
    rig.submit(0);
    let (query, from) = next_query(&upstream);
    rig.sockets.tidy(rig.machine.in_flight(), Instant::now());
    assert!(
        rig.spare_ports().is_empty(),
        "no spare opens while the try is in flight"
    );
    upstream.send_to(&answer(&query, false), from).unwrap();
    rig.until_done(1);
    assert_eq!(
        rig.sockets.ended.len(),
        1,
        "the ended try's socket waits for the tidy-up"
    );
    assert_eq!(rig.machine.in_flight(), 0);
    rig.sockets.tidy(rig.machine.in_flight(), Instant::now());
    assert!(rig.sockets.ended.is_empty(), "then it is closed");
    assert_eq!(rig.spare_ports().len(), 1, "and with nothing in flight a spare opens");
    assert_eq!(rig.sockets.open.iter().flatten().count(), 1);
}

#[test]
fn under_a_load_that_never_leaves_the_forwarder_idle_spares_open_all_the_same() {
    let upstream = upstream();
    let mut rig = Rig::new(upstream.local_addr().unwrap());
    for i in 0..INLINE_OPENS as u32 - 1 {
        rig.submit(i);
        rig.sockets.tidy(rig.machine.in_flight(), Instant::now());
    }
    assert!(rig.spare_ports().is_empty(), "a few tries in flight open no spare");
    rig.submit(INLINE_OPENS as u32);
    rig.sockets.tidy(rig.machine.in_flight(), Instant::now());
    assert_eq!(
        rig.spare_ports().len(),
        INLINE_OPENS,
        "once {INLINE_OPENS} tries opened their own, as many spares as they were"
    );
}

/// A TCP upstream on loopback that answers every connection it accepts with `serve`, which gets
/// the connection's number (from 0); the count of connections accepted.
fn tcp_upstream(
    serve: impl Fn(usize, std::net::TcpStream) + Send + Sync + 'static,
) -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            conn.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let n = count.fetch_add(1, Ordering::SeqCst);
            let serve = Arc::clone(&serve);
            std::thread::spawn(move || serve(n, conn));
        }
    });
    (addr, accepted)
}

/// The next length-prefixed query on `conn`.
fn read_framed(conn: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut len = [0u8; 2];
    conn.read_exact(&mut len).ok()?;
    let mut query = vec![0; usize::from(u16::from_be_bytes(len))];
    conn.read_exact(&mut query).ok()?;
    Some(query)
}

fn write_framed(conn: &mut std::net::TcpStream, msg: &[u8]) {
    use std::io::Write;
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(msg);
    conn.write_all(&framed).unwrap();
}

#[test]
fn force_tcp_pipelines_the_tries_on_one_connection_and_takes_replies_in_any_order() {
    const N: u32 = 8;
    let (addr, accepted) = tcp_upstream(|_, mut conn| {
        // Every query is in before the first reply goes out, and the replies go back last
        // query first.
        let queries: Vec<Vec<u8>> = (0..N).map_while(|_| read_framed(&mut conn)).collect();
        for query in queries.iter().rev() {
            write_framed(&mut conn, &answer(query, true));
        }
        while read_framed(&mut conn).is_some() {}
    });
    let mut rig = Rig::over(addr, crate::forward::Transport::ForceTcp);
    for i in 0..N {
        rig.submit(i);
    }
    rig.until_done(N as usize);
    assert!(rig.done.iter().all(|d| d.result.is_ok()), "every question answered");
    let mut keys: Vec<_> = rig.done.iter().map(|d| d.key.bytes().to_vec()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), N as usize, "each reply went to its own question");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    let totals = rig.totals();
    assert_eq!(
        (totals.upstream_conn_opened, totals.upstream_conn_reused),
        ([1, 0], [N as u64 - 1, 0])
    );
    assert_eq!(totals.upstream_tcp_retries, 0, "TC over TCP is the answer");
}

/// An upstream that answers each query at once, on as many connections as it is given.
fn echo_tcp(_: usize, mut conn: std::net::TcpStream) {
    while let Some(query) = read_framed(&mut conn) {
        write_framed(&mut conn, &answer(&query, false));
    }
}

#[test]
fn a_connection_is_reused_until_it_has_been_idle_for_expire() {
    let (addr, accepted) = tcp_upstream(echo_tcp);
    let mut rig = Rig::over(addr, crate::forward::Transport::ForceTcp);
    rig.sockets
        .set_timeouts(Duration::from_millis(200), Duration::from_secs(1));
    for i in 0..3 {
        rig.submit(i);
        rig.until_done(i as usize + 1);
        rig.sockets.tidy(rig.machine.in_flight(), Instant::now());
    }
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one connection for all three"
    );
    rig.sockets.tidy(0, Instant::now() + Duration::from_millis(200));
    assert!(rig.sockets.pools.is_empty(), "the idle connection is closed");
    rig.submit(3);
    rig.until_done(4);
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "the next try opens another"
    );
    assert_eq!(rig.totals().upstream_conn_opened, [2, 0]);
}

#[test]
fn tries_waiting_on_a_connection_the_upstream_closes_are_sent_again_on_a_new_one() {
    let (addr, accepted) = tcp_upstream(|n, mut conn| {
        if n > 0 {
            return echo_tcp(n, conn);
        }
        // The first connection answers one query of two, then closes.
        let first = read_framed(&mut conn).unwrap();
        let _second = read_framed(&mut conn).unwrap();
        write_framed(&mut conn, &answer(&first, false));
    });
    let mut rig = Rig::over(addr, crate::forward::Transport::ForceTcp);
    rig.submit(0);
    rig.submit(1);
    rig.until_done(2);
    assert!(
        rig.done.iter().all(|d| d.result.is_ok()),
        "both answered: {:?}",
        rig.done
    );
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    let totals = rig.totals();
    assert_eq!((totals.upstream_resent, totals.upstream_errors), (1, 0));
    assert_eq!(
        rig.upstreams()[0].failures,
        0,
        "an upstream closing a connection is not at fault"
    );
}

#[test]
fn a_connection_on_which_the_upstream_sends_nothing_is_given_up() {
    let (addr, accepted) = tcp_upstream(|_, mut conn| while read_framed(&mut conn).is_some() {});
    let mut rig = Rig::over(addr, crate::forward::Transport::ForceTcp);
    rig.sockets
        .set_timeouts(Duration::from_secs(10), Duration::from_secs(1));
    let sent = Instant::now();
    rig.submit(0);
    let soon = sent + Duration::from_millis(1900);
    rig.sockets.tidy(rig.machine.in_flight(), soon);
    assert!(rig.sockets.kicked.is_empty(), "not given up within twice the timeout");
    let later = sent + Duration::from_millis(2100);
    rig.sockets.tidy(rig.machine.in_flight(), later);
    rig.sockets.receive(&[], &mut rig.machine, &rig.cache, later);
    rig.sockets.flush(&mut rig.machine, later);
    assert!(
        rig.totals().upstream_errors >= 1,
        "its try is handed back as a failure of the upstream"
    );
    assert!(
        rig.sockets.pools.iter().all(|p| p.streams.is_empty()),
        "the connection is closed"
    );
    let accepted_by = Instant::now() + Duration::from_secs(5);
    while accepted.load(std::sync::atomic::Ordering::SeqCst) == 0 && Instant::now() < accepted_by {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    rig.submit(1);
    rig.until(|_| accepted.load(std::sync::atomic::Ordering::SeqCst) == 2);
}

#[test]
fn a_connection_that_closes_before_answering_fails_its_tries() {
    let (addr, _) = tcp_upstream(|_, conn| drop(conn));
    let mut rig = Rig::over(addr, crate::forward::Transport::ForceTcp);
    rig.submit(0);
    rig.until_done(1);
    assert!(rig.done[0].result.is_err());
    let totals = rig.totals();
    assert!(totals.upstream_errors >= 1, "held against the upstream");
    assert_eq!(totals.upstream_resent, 0);
}
