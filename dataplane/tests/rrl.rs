//! Response rate limiting over real loopback sockets: a flood of one name from one source is
//! limited (dropped, every second limited reply slipped with TC=1 and no records) while another
//! client keeps being answered, clients with a valid server cookie or over TCP are never
//! limited, and replies that waited for an upstream are limited as those answered at once.
//! Replies are parsed with hickory-proto.

mod common;

use common::{serve, RawQuery};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use skyline_dataplane::cookie::{CookieCell, CookieSecrets};
use skyline_dataplane::forward::ForwardConfig;
use skyline_dataplane::rrl::RrlConfig;
use skyline_dataplane::worker::{Options, Server};
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const A: u16 = 1;
const SOA: u16 = 6;
const RATE: u32 = 10;
const FLOOD: usize = 300;
/// The other client asks once per this many flood queries: within the rate.
const NEIGHBOUR_EVERY: usize = 50;
const CLIENT_COOKIE: [u8; 8] = *b"cookie!!";

fn start() -> Server {
    start_forwarding(None)
}

fn start_forwarding(forward: Option<ForwardConfig>) -> Server {
    serve(Options {
        cookies: Some(CookieCell::new(CookieSecrets::generate().unwrap())),
        rrl: RrlConfig {
            rate: RATE,
            slip: 2,
            window: 2,
            ..RrlConfig::default()
        },
        forward,
        ..Options::default()
    })
}

fn query(id: u16, name: &str, qtype: u16, cookie: &[u8]) -> Vec<u8> {
    let mut q = RawQuery::new(name, qtype);
    q.id = id;
    if !cookie.is_empty() {
        q.opt(1232, 0, &[(10, cookie)]);
    }
    q.bytes()
}

fn socket() -> UdpSocket {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    socket
}

/// Every reply that arrives on `socket` until it stays quiet for 300 ms.
fn drain(socket: &UdpSocket) -> Vec<Message> {
    let mut replies = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = socket.recv(&mut buf) {
        replies.push(Message::from_vec(&buf[..n]).expect("hickory parses the reply"));
    }
    replies
}

fn ask(socket: &UdpSocket, server: SocketAddr, query: &[u8]) -> Message {
    socket.send_to(query, server).unwrap();
    let mut buf = [0u8; 4096];
    let n = socket.recv(&mut buf).expect("a reply");
    Message::from_vec(&buf[..n]).expect("hickory parses the reply")
}

fn is_full_answer(reply: &Message) -> bool {
    reply.message_type() == MessageType::Response
        && reply.response_code() == ResponseCode::NoError
        && !reply.truncated()
        && !reply.answers().is_empty()
}

#[test]
fn a_flood_of_one_name_is_limited_while_another_client_is_answered() {
    let server = start();
    let addr = server.local_addr();
    let flooder = socket();
    let neighbour = socket();
    let started = Instant::now();
    let mut neighbour_answers = 0;
    for i in 0..FLOOD {
        flooder
            .send_to(&query(i as u16, "web.skydns.test.", A, &[]), addr)
            .unwrap();
        if i % NEIGHBOUR_EVERY == 0 {
            let reply = ask(&neighbour, addr, &query(i as u16, "skydns.test.", SOA, &[]));
            assert!(is_full_answer(&reply), "the other client is answered: {reply:?}");
            neighbour_answers += 1;
        }
    }
    let seconds = started.elapsed().as_secs() as u32 + 1;
    let replies = drain(&flooder);
    let full = replies.iter().filter(|r| is_full_answer(r)).count();
    let slipped: Vec<&Message> = replies.iter().filter(|r| r.truncated()).collect();
    assert!(
        slipped.iter().all(|r| r.answers().is_empty() && r.queries().len() == 1),
        "a slipped reply has the question and no records"
    );
    assert_eq!(
        full + slipped.len(),
        replies.len(),
        "every reply is an answer or a slip"
    );
    let allowed = (RATE * (seconds + 1)) as usize;
    assert!(
        full >= RATE as usize && full <= allowed,
        "{full} answered, at most {allowed}"
    );
    let limited = FLOOD - full;
    assert!(
        slipped.len().abs_diff(limited / 2) <= 2,
        "about every second limited reply slips: {} of {limited}",
        slipped.len()
    );
    let totals = server.stats();
    assert_eq!(totals.rrl_slipped, slipped.len() as u64);
    assert_eq!(totals.rrl_dropped + totals.rrl_slipped, limited as u64);
    assert_eq!(neighbour_answers, FLOOD.div_ceil(NEIGHBOUR_EVERY));
}

#[test]
fn clients_with_a_valid_server_cookie_and_tcp_clients_are_never_limited() {
    let server = start();
    let addr = server.local_addr();
    let client = socket();
    // Learn a server cookie, then flood the same name with it from the same address.
    let learnt = ask(&client, addr, &query(1, "web.skydns.test.", A, &CLIENT_COOKIE));
    let cookie = match learnt.extensions().as_ref().and_then(|e| e.option(EdnsCode::Cookie)) {
        Some(EdnsOption::Unknown(10, data)) => data.clone(),
        other => panic!("no COOKIE option: {other:?}"),
    };
    let flood = (FLOOD as u32 / 3) as usize;
    for i in 0..flood {
        let reply = ask(&client, addr, &query(i as u16, "web.skydns.test.", A, &cookie));
        assert!(is_full_answer(&reply), "query {i} with a valid cookie: {reply:?}");
    }
    // The same flood without the cookie, from the same address, is limited.
    for i in 0..flood {
        client
            .send_to(&query(i as u16, "web.skydns.test.", A, &CLIENT_COOKIE), addr)
            .unwrap();
    }
    let replies = drain(&client);
    assert!(replies.iter().filter(|r| is_full_answer(r)).count() < flood / 2);
    // Over TCP, the same name from the same address is answered every time.
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    for i in 0..flood {
        let q = query(i as u16, "web.skydns.test.", A, &[]);
        let mut framed = (q.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&q);
        stream.write_all(&framed).unwrap();
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).unwrap();
        let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut reply).unwrap();
        assert!(is_full_answer(&Message::from_vec(&reply).unwrap()), "TCP query {i}");
    }
}

/// An upstream on loopback that answers every question NXDOMAIN without an SOA, until `stop`.
fn nxdomain_upstream(stop: Arc<AtomicBool>) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let addr = socket.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = socket.recv_from(&mut buf) {
                let query = &buf[..n];
                let name_end = 12 + query[12..].iter().position(|&b| b == 0).unwrap() + 1;
                let mut m = vec![query[0], query[1], 0x81, 0x83, 0, 1, 0, 0, 0, 0, 0, 0];
                m.extend_from_slice(&query[12..name_end + 4]);
                socket.send_to(&m, from).unwrap();
            }
        }
    });
    (addr, thread)
}

#[test]
fn replies_that_waited_for_an_upstream_are_limited_too() {
    let stop = Arc::new(AtomicBool::new(false));
    let (upstream, thread) = nxdomain_upstream(Arc::clone(&stop));
    let server = start_forwarding(Some(ForwardConfig {
        upstreams: vec![upstream],
        ..ForwardConfig::default()
    }));
    let addr = server.local_addr();
    let flooder = socket();
    let started = Instant::now();
    // Names no cache holds, so that every reply leaves once the upstream has answered; one
    // NXDOMAIN class for the flooder's network, since the upstream names no zone.
    for i in 0..FLOOD {
        let name = format!("n{i}.flood.example.");
        flooder.send_to(&query(i as u16, &name, A, &[]), addr).unwrap();
        if i % 10 == 9 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let seconds = started.elapsed().as_secs() as u32 + 1;
    let replies = drain(&flooder);
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
    let totals = server.stats();
    assert!(
        totals.upstream_queries >= FLOOD as u64,
        "every query went upstream: {totals:?}"
    );
    let full = replies
        .iter()
        .filter(|r| r.response_code() == ResponseCode::NXDomain && !r.truncated())
        .count();
    let slipped = replies.iter().filter(|r| r.truncated()).count();
    assert_eq!(full + slipped, replies.len(), "every reply is an answer or a slip");
    let allowed = (RATE * (seconds + 1)) as usize;
    assert!(
        full >= RATE as usize && full <= allowed,
        "{full} answered, at most {allowed}"
    );
    let limited = FLOOD - full;
    assert!(
        slipped > 0 && slipped.abs_diff(limited / 2) <= 2,
        "{slipped} of {limited} slipped"
    );
    assert_eq!(totals.rrl_dropped + totals.rrl_slipped, limited as u64);
}
