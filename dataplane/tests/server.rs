//! The workers on real loopback sockets: UDP batches, DNS over TCP (RFC 7766) with its caps and
//! timeouts, snapshot swaps, counters and shutdown. Replies are parsed with hickory-proto, an
//! independent DNS implementation.

mod common;

use common::{snapshot, RawQuery};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::RecordType;
use skyline_dataplane::snapshot::{empty_cell, Snapshot, SnapshotCell};
use skyline_dataplane::stats::Totals;
use skyline_dataplane::worker::{Server, ServerConfig, TcpConfig};
use skyline_dataplane::Transport;
use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

const A: u16 = 1;

fn cell(snap: Snapshot) -> SnapshotCell {
    let cell = empty_cell();
    cell.store(Arc::new(snap));
    cell
}

fn start_with(addr: SocketAddr, workers: usize, tcp: TcpConfig, snapshots: SnapshotCell) -> Server {
    Server::start(
        ServerConfig {
            addr,
            workers,
            pin: false,
            tcp,
        },
        snapshots,
    )
    .expect("server starts")
}

fn start(workers: usize, tcp: TcpConfig) -> Server {
    start_with(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        workers,
        tcp,
        cell(snapshot()),
    )
}

fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = RawQuery::new(name, qtype);
    q.id = id;
    q.bytes()
}

fn client_for(server: SocketAddr) -> UdpSocket {
    let local: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::LOCALHOST, 0).into()
    } else {
        "[::1]:0".parse().unwrap()
    };
    let socket = UdpSocket::bind(local).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket
}

fn udp_ask(server: SocketAddr, query: &[u8]) -> Message {
    let socket = client_for(server);
    socket.send_to(query, server).unwrap();
    let mut buf = [0u8; 4096];
    let (n, from) = socket.recv_from(&mut buf).expect("a UDP reply");
    assert_eq!(from, server);
    Message::from_vec(&buf[..n]).expect("hickory parses the reply")
}

fn frame(message: &[u8]) -> Vec<u8> {
    let mut framed = (message.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(message);
    framed
}

fn tcp_connect(server: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(server).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    stream
}

fn read_frame(stream: &mut TcpStream) -> Message {
    let mut prefix = [0u8; 2];
    stream.read_exact(&mut prefix).expect("a length prefix");
    let mut message = vec![0u8; usize::from(u16::from_be_bytes(prefix))];
    stream.read_exact(&mut message).expect("a whole message");
    Message::from_vec(&message).expect("hickory parses the reply")
}

/// Waits up to `limit` for the server to close `stream`; returns how long that took.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return None,
            Err(_) => return Some(started.elapsed()),
        }
    }
}

/// Polls the server's counters until `done` holds or two seconds pass.
fn wait_for_stats(server: &Server, done: impl Fn(&Totals) -> bool) -> Totals {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let totals = server.stats();
        if done(&totals) || Instant::now() > deadline {
            return totals;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn short_timeouts() -> TcpConfig {
    TcpConfig {
        idle_timeout: Duration::from_millis(400),
        io_timeout: Duration::from_millis(300),
        ..TcpConfig::default()
    }
}

#[test]
fn udp_queries_are_answered_from_the_snapshot() {
    let server = start(1, TcpConfig::default());
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);

    let reply = udp_ask(addr, &query(7, "web.skydns.test.", A));
    assert_eq!(reply.id(), 7);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.authoritative());
    assert_eq!(reply.answers().len(), 2);
    assert!(reply.answers().iter().all(|r| r.record_type() == RecordType::A));

    let reply = udp_ask(addr, &query(8, "nope.skydns.test.", A));
    assert_eq!(reply.id(), 8);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    assert_eq!(reply.name_servers().len(), 1);
    assert_eq!(reply.name_servers()[0].record_type(), RecordType::SOA);

    let totals = wait_for_stats(&server, |t| t.requests.over(Transport::Udp) == 2);
    assert_eq!(
        (
            totals.requests.over(Transport::Udp),
            totals.replies_noerror,
            totals.replies_nxdomain
        ),
        (2, 1, 1)
    );
    server.shutdown();
}

#[test]
fn a_newly_published_snapshot_is_answered_from() {
    let snapshots = empty_cell();
    let server = start_with(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        1,
        TcpConfig::default(),
        Arc::clone(&snapshots),
    );
    let addr = server.local_addr();
    assert_eq!(
        udp_ask(addr, &query(1, "web.skydns.test.", A)).response_code(),
        ResponseCode::Refused
    );

    snapshots.store(Arc::new(snapshot()));
    let reply = udp_ask(addr, &query(2, "web.skydns.test.", A));
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert_eq!(reply.answers().len(), 2);
    server.shutdown();
}

#[test]
fn a_burst_of_queries_from_many_clients_is_all_answered() {
    const CLIENTS: usize = 4;
    const PER_CLIENT: u16 = 64;
    let server = start(2, TcpConfig::default());
    let addr = server.local_addr();
    let clients: Vec<UdpSocket> = (0..CLIENTS).map(|_| client_for(addr)).collect();
    for client in &clients {
        for id in 0..PER_CLIENT {
            let name = if id % 2 == 0 {
                "web.skydns.test."
            } else {
                "nope.skydns.test."
            };
            client.send_to(&query(id, name, A), addr).unwrap();
        }
    }
    let mut buf = [0u8; 4096];
    for client in &clients {
        let mut ids = HashSet::new();
        while ids.len() < usize::from(PER_CLIENT) {
            let (n, _) = client.recv_from(&mut buf).expect("every query is answered");
            let reply = Message::from_vec(&buf[..n]).unwrap();
            let expected = if reply.id().is_multiple_of(2) {
                ResponseCode::NoError
            } else {
                ResponseCode::NXDomain
            };
            assert_eq!(reply.response_code(), expected);
            ids.insert(reply.id());
        }
    }
    let total = (CLIENTS * usize::from(PER_CLIENT)) as u64;
    let totals = wait_for_stats(&server, |t| t.requests.over(Transport::Udp) == total);
    assert_eq!(totals.requests.over(Transport::Udp), total);
    assert_eq!(totals.replies_noerror + totals.replies_nxdomain, total);
    assert!(totals.udp_batches >= 1 && totals.udp_batches <= total);
    assert_eq!(totals.udp_send_failures, 0);
    server.shutdown();
}

#[test]
fn datagrams_that_are_not_queries_are_dropped_and_counted() {
    let server = start(1, TcpConfig::default());
    let addr = server.local_addr();
    let socket = client_for(addr);
    socket.send_to(&[1, 2, 3], addr).unwrap();
    let mut response = query(3, "web.skydns.test.", A);
    response[2] |= 0x80;
    socket.send_to(&response, addr).unwrap();
    socket.send_to(&query(4, "web.skydns.test.", A), addr).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = socket.recv_from(&mut buf).unwrap();
    assert_eq!(
        Message::from_vec(&buf[..n]).unwrap().id(),
        4,
        "only the real query is answered"
    );
    let totals = wait_for_stats(&server, |t| t.dropped_too_short + t.dropped_response == 2);
    assert_eq!((totals.dropped_too_short, totals.dropped_response), (1, 1));
    server.shutdown();
}

#[test]
fn pipelined_tcp_queries_in_one_write_are_all_answered() {
    let server = start(1, TcpConfig::default());
    let mut stream = tcp_connect(server.local_addr());
    let mut both = frame(&query(0x1111, "web.skydns.test.", A));
    both.extend(frame(&query(0x2222, "nope.skydns.test.", A)));
    stream.write_all(&both).unwrap();

    let mut seen = HashSet::new();
    for _ in 0..2 {
        let reply = read_frame(&mut stream);
        match reply.id() {
            0x1111 => assert_eq!(reply.answers().len(), 2),
            0x2222 => assert_eq!(reply.response_code(), ResponseCode::NXDomain),
            other => panic!("unexpected reply id {other:#x}"),
        }
        seen.insert(reply.id());
    }
    assert_eq!(seen.len(), 2);

    // The connection stays open for more.
    stream.write_all(&frame(&query(0x3333, "big.skydns.test.", A))).unwrap();
    let reply = read_frame(&mut stream);
    assert_eq!(reply.id(), 0x3333);
    assert_eq!(reply.answers().len(), 40);
    let totals = wait_for_stats(&server, |t| t.requests.over(Transport::Tcp) == 3);
    assert_eq!((totals.requests.over(Transport::Tcp), totals.tcp_accepted), (3, 1));
    server.shutdown();
}

#[test]
fn a_query_split_across_writes_is_reassembled() {
    let server = start(1, TcpConfig::default());
    let mut stream = tcp_connect(server.local_addr());
    stream.set_nodelay(true).unwrap();
    let framed = frame(&query(0x4444, "web.skydns.test.", A));
    for part in [&framed[..1], &framed[1..5], &framed[5..]] {
        stream.write_all(part).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(read_frame(&mut stream).id(), 0x4444);
    server.shutdown();
}

#[test]
fn large_and_small_queries_alternate_on_one_connection() {
    let server = start(1, TcpConfig::default());
    let mut stream = tcp_connect(server.local_addr());
    let padding = vec![0u8; 6000];
    for (id, pad) in [(1u16, &padding[..]), (2, &[][..]), (3, &padding[..3000]), (4, &[][..])] {
        let mut q = RawQuery::new("web.skydns.test.", A);
        q.id = id;
        q.opt(1232, 0, &[(12, pad)]);
        stream.write_all(&frame(&q.bytes())).unwrap();
        let reply = read_frame(&mut stream);
        assert_eq!((reply.id(), reply.answers().len()), (id, 2));
    }
    server.shutdown();
}

#[test]
fn an_oversized_datagram_does_not_disturb_the_worker() {
    let server = start(1, TcpConfig::default());
    let addr = server.local_addr();
    let socket = client_for(addr);
    let mut q = RawQuery::new("web.skydns.test.", A);
    q.opt(1232, 0, &[(12, &[0u8; 9000])]);
    socket.send_to(&q.bytes(), addr).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = socket.recv_from(&mut buf).expect("a reply to the cut datagram");
    assert_eq!(
        Message::from_vec(&buf[..n]).unwrap().response_code(),
        ResponseCode::FormErr
    );
    assert_eq!(udp_ask(addr, &query(5, "web.skydns.test.", A)).id(), 5);
    server.shutdown();
}

#[test]
fn tcp_keepalive_is_advertised_from_the_idle_timeout() {
    let server = start(
        1,
        TcpConfig {
            idle_timeout: Duration::from_secs(7),
            ..TcpConfig::default()
        },
    );
    let mut stream = tcp_connect(server.local_addr());
    let mut q = RawQuery::new("web.skydns.test.", A);
    q.opt(1232, 0, &[(11, &[])]);
    stream.write_all(&frame(&q.bytes())).unwrap();
    let reply = read_frame(&mut stream);
    let edns = reply.extensions().as_ref().expect("an OPT in the reply");
    match edns.options().get(EdnsCode::Keepalive) {
        Some(EdnsOption::Unknown(11, value)) => assert_eq!(value.as_slice(), &70u16.to_be_bytes()),
        other => panic!("no keepalive option: {other:?}"),
    }
    server.shutdown();
}

#[test]
fn a_stalled_length_prefix_is_closed_after_the_io_timeout_while_udp_keeps_answering() {
    let server = start(1, short_timeouts());
    let addr = server.local_addr();
    let mut stalled = tcp_connect(addr);
    stalled.write_all(&[0]).unwrap();
    let started = Instant::now();

    let udp = client_for(addr);
    let mut buf = [0u8; 4096];
    let mut id = 0u16;
    while started.elapsed() < Duration::from_millis(250) {
        id += 1;
        let sent = Instant::now();
        udp.send_to(&query(id, "web.skydns.test.", A), addr).unwrap();
        let (n, _) = udp.recv_from(&mut buf).expect("UDP is answered meanwhile");
        assert!(
            sent.elapsed() < Duration::from_millis(200),
            "UDP reply took {:?}",
            sent.elapsed()
        );
        assert_eq!(Message::from_vec(&buf[..n]).unwrap().id(), id);
        std::thread::sleep(Duration::from_millis(10));
    }

    assert!(
        closed_within(&mut stalled, Duration::from_secs(2)).is_some(),
        "the stalled connection is closed"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "closed too early: {:?}",
        started.elapsed()
    );
    let totals = wait_for_stats(&server, |t| t.tcp_io_timeouts == 1);
    assert_eq!((totals.tcp_io_timeouts, totals.tcp_idle_timeouts), (1, 0));
    server.shutdown();
}

#[test]
fn a_stalled_message_body_is_closed_after_the_io_timeout() {
    let server = start(1, short_timeouts());
    let mut stalled = tcp_connect(server.local_addr());
    let framed = frame(&query(1, "web.skydns.test.", A));
    stalled.write_all(&framed[..framed.len() - 3]).unwrap();
    let waited = closed_within(&mut stalled, Duration::from_secs(2)).expect("closed");
    assert!(waited >= Duration::from_millis(250), "closed too early: {waited:?}");
    assert_eq!(wait_for_stats(&server, |t| t.tcp_io_timeouts == 1).tcp_io_timeouts, 1);
    server.shutdown();
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let server = start(1, short_timeouts());
    let mut stream = tcp_connect(server.local_addr());
    let answered = Instant::now();
    stream.write_all(&frame(&query(9, "web.skydns.test.", A))).unwrap();
    assert_eq!(read_frame(&mut stream).id(), 9);
    assert!(
        closed_within(&mut stream, Duration::from_secs(2)).is_some(),
        "the idle connection is closed"
    );
    assert!(
        answered.elapsed() >= Duration::from_millis(350),
        "closed too early: {:?}",
        answered.elapsed()
    );
    let totals = wait_for_stats(&server, |t| t.tcp_idle_timeouts == 1);
    assert_eq!((totals.tcp_idle_timeouts, totals.tcp_io_timeouts), (1, 0));
    server.shutdown();
}

/// Sends a length prefix and half a message: the connection is busy reading a query, so it is
/// never closed to make room for another.
fn start_a_query(stream: &mut TcpStream) {
    let framed = frame(&query(9, "web.skydns.test.", A));
    stream.write_all(&framed[..framed.len() / 2]).unwrap();
}

/// Asks one query and checks its answer.
fn ask_tcp(stream: &mut TcpStream, id: u16) {
    stream.write_all(&frame(&query(id, "web.skydns.test.", A))).unwrap();
    assert_eq!(read_frame(stream).id(), id);
}

#[test]
fn hundreds_of_connections_from_one_address_are_all_served() {
    let server = start(1, TcpConfig::default());
    let addr = server.local_addr();
    let mut conns: Vec<TcpStream> = (0..256).map(|_| tcp_connect(addr)).collect();
    for (id, conn) in conns.iter_mut().enumerate() {
        conn.write_all(&frame(&query(id as u16, "web.skydns.test.", A)))
            .unwrap();
    }
    for (id, conn) in conns.iter_mut().enumerate() {
        assert_eq!(read_frame(conn).id(), id as u16, "connection {id} is answered");
    }
    let totals = server.stats();
    assert_eq!(totals.tcp_accepted, 256);
    assert_eq!(
        (
            totals.tcp_refused_full,
            totals.tcp_refused_per_client,
            totals.tcp_evicted
        ),
        (0, 0, 0)
    );
    server.shutdown();
}

#[test]
fn connections_over_the_per_client_cap_are_refused_when_none_is_idle() {
    let server = start(
        1,
        TcpConfig {
            max_per_client: 2,
            ..TcpConfig::default()
        },
    );
    let addr = server.local_addr();
    let mut first = tcp_connect(addr);
    let mut second = tcp_connect(addr);
    start_a_query(&mut first);
    start_a_query(&mut second);
    std::thread::sleep(Duration::from_millis(50));
    let mut third = tcp_connect(addr);
    assert!(
        closed_within(&mut third, Duration::from_millis(500)).is_some(),
        "the third connection is refused at once"
    );
    assert_eq!(
        wait_for_stats(&server, |t| t.tcp_refused_per_client == 1).tcp_refused_per_client,
        1
    );
    server.shutdown();
}

#[test]
fn the_idlest_connection_makes_room_for_a_new_one() {
    let server = start(
        1,
        TcpConfig {
            max_connections: 2,
            ..TcpConfig::default()
        },
    );
    let addr = server.local_addr();
    let mut oldest = tcp_connect(addr);
    ask_tcp(&mut oldest, 1);
    std::thread::sleep(Duration::from_millis(20));
    let mut recent = tcp_connect(addr);
    ask_tcp(&mut recent, 2);
    let mut newcomer = tcp_connect(addr);
    ask_tcp(&mut newcomer, 3);
    assert!(
        closed_within(&mut oldest, Duration::from_secs(1)).is_some(),
        "the connection idle the longest is closed"
    );
    ask_tcp(&mut recent, 4);
    ask_tcp(&mut newcomer, 5);
    let totals = wait_for_stats(&server, |t| t.tcp_evicted == 1);
    assert_eq!((totals.tcp_evicted, totals.tcp_refused_full), (1, 0));
    server.shutdown();
}

#[test]
fn the_per_client_cap_closes_that_clients_idlest_connection_first() {
    let server = start(
        1,
        TcpConfig {
            max_per_client: 2,
            ..TcpConfig::default()
        },
    );
    let addr = server.local_addr();
    let mut busy = tcp_connect(addr);
    start_a_query(&mut busy);
    let mut idle = tcp_connect(addr);
    ask_tcp(&mut idle, 1);
    let mut newcomer = tcp_connect(addr);
    ask_tcp(&mut newcomer, 2);
    assert!(
        closed_within(&mut idle, Duration::from_secs(1)).is_some(),
        "the idle connection made room"
    );
    let framed = frame(&query(9, "web.skydns.test.", A));
    busy.write_all(&framed[framed.len() / 2..]).unwrap();
    assert_eq!(read_frame(&mut busy).id(), 9, "the busy one keeps its query");
    server.shutdown();
}

#[test]
fn connections_over_the_worker_cap_are_refused_when_none_is_idle() {
    let server = start(
        1,
        TcpConfig {
            max_connections: 1,
            ..TcpConfig::default()
        },
    );
    let addr = server.local_addr();
    let mut first = tcp_connect(addr);
    ask_tcp(&mut first, 1);
    start_a_query(&mut first);
    std::thread::sleep(Duration::from_millis(50));
    let mut second = tcp_connect(addr);
    assert!(
        closed_within(&mut second, Duration::from_millis(500)).is_some(),
        "the second connection is refused at once"
    );
    assert_eq!(wait_for_stats(&server, |t| t.tcp_refused_full == 1).tcp_refused_full, 1);
    let framed = frame(&query(9, "web.skydns.test.", A));
    first.write_all(&framed[framed.len() / 2..]).unwrap();
    assert_eq!(read_frame(&mut first).id(), 9, "the busy one keeps its query");
    server.shutdown();
}

#[test]
fn a_client_that_never_reads_its_replies_holds_up_nobody() {
    let server = start(1, short_timeouts());
    let addr = server.local_addr();
    // Many queries for a large answer, and never a read: replies pile up until the server stops
    // reading this connection; the I/O timeout then closes it.
    let flood: Vec<u8> = (0..20_000u16)
        .flat_map(|id| frame(&query(id, "big.skydns.test.", A)))
        .collect();
    let hog = tcp_connect(addr);
    hog.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let writer = std::thread::spawn(move || {
        let mut hog = hog;
        let _ = hog.write_all(&flood);
        hog
    });

    let mut other = tcp_connect(addr);
    let udp = client_for(addr);
    let mut buf = [0u8; 4096];
    let started = Instant::now();
    let mut id = 0u16;
    while started.elapsed() < Duration::from_millis(500) {
        id += 1;
        let sent = Instant::now();
        udp.send_to(&query(id, "web.skydns.test.", A), addr).unwrap();
        let (n, _) = udp.recv_from(&mut buf).expect("UDP is answered meanwhile");
        assert_eq!(Message::from_vec(&buf[..n]).unwrap().id(), id);
        other.write_all(&frame(&query(id, "web.skydns.test.", A))).unwrap();
        assert_eq!(read_frame(&mut other).id(), id);
        assert!(
            sent.elapsed() < Duration::from_millis(300),
            "a round took {:?}",
            sent.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let totals = wait_for_stats(&server, |t| t.tcp_io_timeouts == 1);
    assert_eq!(totals.tcp_io_timeouts, 1, "the hog is closed for not reading");
    drop(writer.join().unwrap());
    server.shutdown();
}

#[test]
fn a_half_closed_connection_gets_its_replies_before_the_close() {
    let server = start(1, TcpConfig::default());
    let mut stream = tcp_connect(server.local_addr());
    let mut both = frame(&query(1, "web.skydns.test.", A));
    both.extend(frame(&query(2, "web.skydns.test.", A)));
    stream.write_all(&both).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_frame(&mut stream).id(), 1);
    assert_eq!(read_frame(&mut stream).id(), 2);
    assert!(closed_within(&mut stream, Duration::from_secs(1)).is_some());
    server.shutdown();
}

#[test]
fn every_worker_answers_on_the_shared_port_over_ipv6_too() {
    let Ok(probe) = UdpSocket::bind("[::1]:0") else {
        return;
    };
    drop(probe);
    let server = start_with("[::1]:0".parse().unwrap(), 3, TcpConfig::default(), cell(snapshot()));
    let addr = server.local_addr();
    assert!(addr.is_ipv6());
    for id in 0..30 {
        assert_eq!(udp_ask(addr, &query(id, "web.skydns.test.", A)).id(), id);
    }
    let mut stream = tcp_connect(addr);
    stream.write_all(&frame(&query(99, "web.skydns.test.", A))).unwrap();
    assert_eq!(read_frame(&mut stream).id(), 99);
    server.shutdown();
}

#[test]
fn zero_workers_means_one_per_core() {
    let server = start(0, TcpConfig::default());
    assert_eq!(udp_ask(server.local_addr(), &query(5, "web.skydns.test.", A)).id(), 5);
    server.shutdown();
}

#[test]
fn shutdown_stops_the_workers_and_releases_the_port() {
    let server = start(2, TcpConfig::default());
    let addr = server.local_addr();
    let mut stream = tcp_connect(addr);
    let started = Instant::now();
    server.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "shutdown took {:?}",
        started.elapsed()
    );
    assert!(
        closed_within(&mut stream, Duration::from_secs(1)).is_some(),
        "connections are closed"
    );
    // A socket without SO_REUSEPORT can only bind once every worker socket is gone.
    UdpSocket::bind(addr).expect("the UDP port is free again");
    std::net::TcpListener::bind(addr).expect("the TCP port is free again");
}

#[test]
fn binding_a_taken_port_fails_at_start() {
    let taken = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let config = ServerConfig {
        addr: taken.local_addr().unwrap(),
        workers: 1,
        pin: false,
        tcp: TcpConfig::default(),
    };
    let err = Server::start(config, cell(snapshot())).expect_err("the port is taken");
    assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
}
