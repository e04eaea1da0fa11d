//! End-to-end tests of stopping: the real binary gets SIGTERM, `/ready` is asked over plain
//! HTTP/1.1, DNS over UDP and TCP with hickory-proto. A stopping skyline says not ready at once,
//! keeps answering for the drain period, then closes its listeners, answers what it still holds
//! (queries waiting on an upstream, queries already sent on open connections) and exits 0.

mod common;
mod upstream;

use common::{a_of, query, tcp_recv, tcp_send, udp_query, Skyline, HTTP_ANY_PORT};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};
use upstream::{Script, Scripted, GOOD};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.0.0.1"}}"#;

/// The status line's code of `GET path`, or `None` when nothing listens.
fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: skyline\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split(' ').nth(1)?.parse().ok()
}

#[test]
fn sigterm_says_not_ready_keeps_answering_for_the_drain_then_exits_zero() {
    let mut args = vec!["--no-rec", "--drain", "1500ms"];
    args.extend(HTTP_ANY_PORT);
    let mut s = Skyline::start(RECORDS, &args, &[]);
    let http = s.http_addr();
    assert_eq!(http_status(http, "/ready"), Some(200));
    let started = Instant::now();
    s.terminate();
    let mut said_not_ready = None;
    while started.elapsed() < Duration::from_secs(1) {
        if http_status(http, "/ready") == Some(503) {
            said_not_ready = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let said_not_ready = said_not_ready.expect("/ready answers 503 once draining");
    assert!(said_not_ready < Duration::from_millis(500), "{said_not_ready:?}");
    assert_eq!(http_status(http, "/health"), Some(200), "alive while draining");
    let udp = s.udp("web.skydns.local.", RecordType::A);
    assert_eq!(a_of(&udp), [Ipv4Addr::new(10, 0, 0, 1)], "UDP answered while draining");
    let tcp = s.tcp("web.skydns.local.", RecordType::A);
    assert_eq!(a_of(&tcp), [Ipv4Addr::new(10, 0, 0, 1)], "TCP answered while draining");
    assert!(
        s.wait_exit(Duration::from_millis(800)).is_none(),
        "still serving within the drain"
    );
    let status = s.wait_exit(Duration::from_secs(5)).expect("exits after the drain");
    assert!(status.success(), "exit status {status:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "exited after {:?}, before the drain ended",
        started.elapsed()
    );
    assert!(TcpStream::connect(s.addr).is_err(), "the TCP listener is closed");
}

#[test]
fn queries_in_flight_when_the_listeners_close_are_answered() {
    let upstream = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::from_millis(600),
    });
    let nameserver = upstream.addr.to_string();
    let mut s = Skyline::start(RECORDS, &["--nameservers", &nameserver, "--drain", "0s"], &[]);
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let udp_question = query("slow.example.test.", RecordType::A, Some(1232));
    client.send_to(&udp_question.to_vec().unwrap(), s.addr).unwrap();
    let mut conn = TcpStream::connect(s.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let tcp_question = query("slower.example.test.", RecordType::A, Some(1232));
    tcp_send(&mut conn, &tcp_question.to_vec().unwrap()).unwrap();
    // Both questions reach the upstream, which holds them 600 ms; the stop comes meanwhile.
    std::thread::sleep(Duration::from_millis(200));
    s.terminate();
    let mut buf = [0u8; 4096];
    let (n, _) = client
        .recv_from(&mut buf)
        .expect("the UDP question in flight is answered");
    let reply = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!((reply.id(), a_of(&reply)), (udp_question.id(), vec![GOOD]));
    let reply = Message::from_vec(&tcp_recv(&mut conn).expect("the TCP question in flight is answered")).unwrap();
    assert_eq!((reply.id(), a_of(&reply)), (tcp_question.id(), vec![GOOD]));
    let mut rest = Vec::new();
    assert_eq!(
        conn.read_to_end(&mut rest).ok(),
        Some(0),
        "then the connection is closed"
    );
    let status = s
        .wait_exit(Duration::from_secs(5))
        .expect("exits once nothing is in flight");
    assert!(status.success(), "exit status {status:?}");
}

#[test]
fn queries_pipelined_on_an_open_connection_are_all_answered_before_it_closes() {
    let mut s = Skyline::start(RECORDS, &["--no-rec", "--drain", "300ms"], &[]);
    let mut conn = TcpStream::connect(s.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.terminate();
    std::thread::sleep(Duration::from_millis(100));
    let mut burst = Vec::new();
    for id in 0..50u16 {
        let mut q = query("web.skydns.local.", RecordType::A, None);
        q.set_id(id);
        let bytes = q.to_vec().unwrap();
        burst.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        burst.extend_from_slice(&bytes);
    }
    conn.write_all(&burst).unwrap();
    for id in 0..50u16 {
        let reply = Message::from_vec(&tcp_recv(&mut conn).expect("every pipelined query is answered")).unwrap();
        assert_eq!((reply.id(), reply.response_code()), (id, ResponseCode::NoError));
    }
    let status = s.wait_exit(Duration::from_secs(5)).expect("exits after the drain");
    assert!(status.success(), "exit status {status:?}");
    assert!(
        udp_query_fails(s.addr),
        "nothing answers UDP on the port once the process is gone"
    );
}

/// Whether a UDP query to `addr` gets no answer within half a second.
fn udp_query_fails(addr: SocketAddr) -> bool {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let q = query("web.skydns.local.", RecordType::A, None);
    let _ = socket.send_to(&q.to_vec().unwrap(), addr);
    let mut buf = [0u8; 512];
    socket.recv_from(&mut buf).is_err()
}

#[test]
fn a_second_signal_ends_the_drain_early() {
    let mut s = Skyline::start(RECORDS, &["--no-rec", "--drain", "30s"], &[]);
    assert_eq!(
        udp_query(s.addr, &query("web.skydns.local.", RecordType::A, None)).response_code(),
        ResponseCode::NoError
    );
    s.terminate();
    std::thread::sleep(Duration::from_millis(200));
    s.terminate();
    let status = s
        .wait_exit(Duration::from_secs(5))
        .expect("a second SIGTERM ends a 30 s drain at once");
    assert!(status.success(), "exit status {status:?}");
}

/// A process serving beside the stopping one on the same port, as the pod an update starts
/// next to the old one: under a steady stream of queries from ever new source ports (each a new
/// flow the kernel may steer to either process), the stopping one ends its drain and exits, and
/// not one query goes unanswered. Its UDP sockets leave the port's group before they close.
/// (Closed at once instead, the datagrams queued on them since their last read are lost: a few
/// such rounds lose some.)
#[test]
fn processes_beside_the_stopping_one_take_over_without_a_lost_query() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let stayer = Skyline::start(RECORDS, &["--no-rec"], &[]);
    let addr = stayer.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let question = query("web.skydns.local.", RecordType::A, None).to_vec().unwrap();
            let mut pending: Vec<(UdpSocket, Instant)> = Vec::new();
            let (mut sent, mut lost) = (0usize, 0usize);
            let mut buf = [0u8; 512];
            while !stop.load(Ordering::Relaxed) || !pending.is_empty() {
                if !stop.load(Ordering::Relaxed) {
                    for _ in 0..16 {
                        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
                        socket.set_nonblocking(true).unwrap();
                        socket.send_to(&question, addr).unwrap();
                        pending.push((socket, Instant::now()));
                        sent += 1;
                    }
                }
                pending.retain(|(socket, at)| {
                    if socket.recv(&mut buf).is_ok() {
                        return false;
                    }
                    if at.elapsed() > Duration::from_secs(2) {
                        lost += 1;
                        return false;
                    }
                    true
                });
            }
            (sent, lost)
        })
    };
    // Each round, one more process joins the port and leaves it again.
    for _ in 0..4 {
        let mut leaver = Skyline::start_at(
            &addr.to_string(),
            RECORDS,
            &["--no-rec", "--drain", "0s", "--reuse-port"],
            &[],
        );
        std::thread::sleep(Duration::from_millis(300));
        leaver.terminate();
        let status = leaver
            .wait_exit(Duration::from_secs(5))
            .expect("the stopping one exits");
        assert!(status.success(), "exit status {status:?}");
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (sent, lost) = sender.join().unwrap();
    assert!(sent > 1000, "too few queries to tell: {sent}");
    assert_eq!(lost, 0, "{lost} of {sent} queries unanswered");
}
