//! DNS Cookies (RFC 7873, RFC 9018) over real loopback sockets: every server cookie a reply
//! carries is checked by computing its SipHash-2-4 here, with the standard library's
//! implementation and the secret the server was given; replies are parsed with hickory-proto.

mod common;

use common::{snapshot, RawQuery};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use skyline_dataplane::cookie::{CookieCell, CookieSecrets, Secret};
use skyline_dataplane::snapshot::empty_cell;
use skyline_dataplane::worker::{Options, Server, ServerConfig, TcpConfig};
use skyline_dataplane::{answer, Context, Outcome, Transport};
use std::hash::Hasher as _;
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const A: u16 = 1;
const SECRET_A: Secret = *b"0123456789abcdef";
const SECRET_B: Secret = *b"fedcba9876543210";
const SECRET_C: Secret = *b"second rotation!";
const CLIENT_COOKIE: [u8; 8] = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];

fn start(secrets: CookieSecrets) -> (Server, CookieCell) {
    let cell = empty_cell();
    cell.store(Arc::new(snapshot()));
    let cookies = CookieCell::new(secrets);
    let server = Server::start_with(
        ServerConfig {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            workers: 2,
            pin: false,
            tcp: TcpConfig::default(),
        },
        Options {
            cookies: Some(cookies.clone()),
            ..Options::default()
        },
        cell,
    )
    .expect("server starts");
    (server, cookies)
}

fn secrets(current: Secret, previous: Option<Secret>) -> CookieSecrets {
    CookieSecrets { current, previous }
}

fn now() -> u32 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as u32
}

/// SipHash-2-4 as RFC 9018 §4.4 uses it, from the standard library's implementation.
#[allow(deprecated)]
fn siphash(secret: &Secret, data: &[u8]) -> [u8; 8] {
    let k0 = u64::from_le_bytes(secret[..8].try_into().unwrap());
    let k1 = u64::from_le_bytes(secret[8..].try_into().unwrap());
    let mut hasher = std::hash::SipHasher::new_with_keys(k0, k1);
    hasher.write(data);
    hasher.finish().to_le_bytes()
}

/// The RFC 9018 server cookie for `client_cookie` from 127.0.0.1 at `stamp`.
fn server_cookie(secret: &Secret, client_cookie: &[u8; 8], stamp: u32) -> Vec<u8> {
    let mut head = vec![1, 0, 0, 0];
    head.extend_from_slice(&stamp.to_be_bytes());
    let mut input = client_cookie.to_vec();
    input.extend_from_slice(&head);
    input.extend_from_slice(&[127, 0, 0, 1]);
    head.extend_from_slice(&siphash(secret, &input));
    head
}

fn query(id: u16, cookie: Option<&[u8]>) -> Vec<u8> {
    let mut q = RawQuery::new("web.skydns.test.", A);
    q.id = id;
    match cookie {
        Some(cookie) => q.opt(1232, 0, &[(10, cookie)]),
        None => q.opt(1232, 0, &[]),
    };
    q.bytes()
}

fn udp(server: &Server, query: &[u8]) -> Message {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket.send_to(query, server.local_addr()).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = socket.recv_from(&mut buf).expect("a UDP reply");
    Message::from_vec(&buf[..n]).expect("hickory parses the reply")
}

fn tcp(server: &Server, query: &[u8]) -> Message {
    let mut stream = TcpStream::connect(server.local_addr()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    stream.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).unwrap();
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut reply).unwrap();
    Message::from_vec(&reply).expect("hickory parses the reply")
}

/// The COOKIE option's data in `reply`.
fn cookie_of(reply: &Message) -> Vec<u8> {
    let edns = reply.extensions().as_ref().expect("an OPT");
    match edns.option(EdnsCode::Cookie) {
        Some(EdnsOption::Unknown(10, data)) => data.clone(),
        other => panic!("no COOKIE option: {other:?}"),
    }
}

/// Asserts that `cookie` is our client cookie and a server cookie `secret` made within the
/// last few seconds for 127.0.0.1; returns its timestamp.
fn assert_fresh(cookie: &[u8], secret: &Secret) -> u32 {
    assert_eq!(cookie.len(), 24, "client cookie and a 16-byte server cookie");
    assert_eq!(&cookie[..8], &CLIENT_COOKIE, "the client cookie comes back");
    assert_eq!(&cookie[8..12], &[1, 0, 0, 0], "version 1, reserved zero");
    let stamp = u32::from_be_bytes(cookie[12..16].try_into().unwrap());
    assert!(now().abs_diff(stamp) <= 5, "timestamp {stamp} is now");
    assert_eq!(cookie[8..].to_vec(), server_cookie(secret, &CLIENT_COOKIE, stamp));
    stamp
}

fn answered(reply: &Message) {
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert_eq!(reply.answers().len(), 2, "web.skydns.test. has two addresses");
}

#[test]
fn a_client_cookie_alone_is_answered_with_a_server_cookie_made_with_the_secret() {
    let (server, _) = start(secrets(SECRET_A, None));
    for reply in [
        udp(&server, &query(1, Some(&CLIENT_COOKIE))),
        tcp(&server, &query(2, Some(&CLIENT_COOKIE))),
    ] {
        answered(&reply);
        assert_fresh(&cookie_of(&reply), &SECRET_A);
    }
}

#[test]
fn a_valid_server_cookie_is_answered_and_echoed() {
    let (server, _) = start(secrets(SECRET_A, None));
    let learnt = cookie_of(&udp(&server, &query(1, Some(&CLIENT_COOKIE))));
    let reply = udp(&server, &query(2, Some(&learnt)));
    answered(&reply);
    assert_eq!(cookie_of(&reply), learnt, "a recent cookie is echoed as it came");
    // Forty minutes old: valid, and replaced by a fresh one (RFC 9018 §4.3).
    let mut worn = CLIENT_COOKIE.to_vec();
    worn.extend_from_slice(&server_cookie(&SECRET_A, &CLIENT_COOKIE, now() - 2400));
    let reply = udp(&server, &query(3, Some(&worn)));
    answered(&reply);
    assert_fresh(&cookie_of(&reply), &SECRET_A);
}

#[test]
fn a_wrong_or_stale_server_cookie_over_udp_gets_badcookie_and_a_fresh_cookie() {
    let (server, _) = start(secrets(SECRET_A, None));
    let mut wrong = CLIENT_COOKIE.to_vec();
    wrong.extend_from_slice(&server_cookie(&SECRET_B, &CLIENT_COOKIE, now()));
    let mut stale = CLIENT_COOKIE.to_vec();
    stale.extend_from_slice(&server_cookie(&SECRET_A, &CLIENT_COOKIE, now() - 7200));
    let mut short = CLIENT_COOKIE.to_vec();
    short.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
    for cookie in [wrong, stale, short] {
        let reply = udp(&server, &query(1, Some(&cookie)));
        assert_eq!(reply.response_code(), ResponseCode::BADCOOKIE);
        assert!(reply.answers().is_empty(), "no answer with BADCOOKIE");
        assert_eq!(reply.queries().len(), 1, "the question is echoed");
        assert_fresh(&cookie_of(&reply), &SECRET_A);
        // Over TCP the client's address is proven by the connection: answered.
        let reply = tcp(&server, &query(2, Some(&cookie)));
        answered(&reply);
        assert_fresh(&cookie_of(&reply), &SECRET_A);
    }
}

#[test]
fn after_a_rotation_the_previous_secret_is_accepted_and_an_older_one_is_not() {
    let (server, cell) = start(secrets(SECRET_A, None));
    let learnt = cookie_of(&udp(&server, &query(1, Some(&CLIENT_COOKIE))));
    cell.set(secrets(SECRET_B, Some(SECRET_A)));
    let reply = udp(&server, &query(2, Some(&learnt)));
    answered(&reply);
    let renewed = cookie_of(&reply);
    assert_fresh(&renewed, &SECRET_B);
    cell.set(secrets(SECRET_C, Some(SECRET_B)));
    let reply = udp(&server, &query(3, Some(&learnt)));
    assert_eq!(reply.response_code(), ResponseCode::BADCOOKIE, "SECRET_A is forgotten");
    assert_fresh(&cookie_of(&reply), &SECRET_C);
    answered(&udp(&server, &query(4, Some(&renewed))));
}

#[test]
fn a_malformed_cookie_is_formerr() {
    let (server, _) = start(secrets(SECRET_A, None));
    for len in [0usize, 7, 9, 15, 41] {
        let reply = udp(&server, &query(1, Some(&vec![0x5a; len])));
        assert_eq!(reply.response_code(), ResponseCode::FormErr, "{len} bytes");
        assert!(reply.answers().is_empty());
    }
}

#[test]
fn a_query_with_only_a_cookie_learns_a_server_cookie() {
    let (server, _) = start(secrets(SECRET_A, None));
    let mut q = RawQuery::empty();
    q.opt(1232, 0, &[(10, &CLIENT_COOKIE)]);
    let reply = udp(&server, &q.bytes());
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.queries().is_empty() && reply.answers().is_empty());
    assert_fresh(&cookie_of(&reply), &SECRET_A);
}

#[test]
fn queries_without_a_cookie_are_answered_as_before() {
    let (server, _) = start(secrets(SECRET_A, None));
    let reply = udp(&server, &query(1, None));
    answered(&reply);
    assert!(reply.extensions().as_ref().unwrap().option(EdnsCode::Cookie).is_none());
}

#[test]
fn cookies_are_made_and_checked_at_the_time_the_context_gives_and_nothing_else() {
    let secrets = secrets(SECRET_A, None);
    let snapshot = snapshot();
    let ask = |cookie: &[u8], stamp: u32| {
        let ctx = Context::new(Transport::Udp)
            .with_client(Ipv4Addr::LOCALHOST.into())
            .with_cookies(&secrets)
            .at(UNIX_EPOCH + Duration::from_secs(stamp.into()));
        let mut out = vec![0u8; 65535];
        let Outcome::Reply(reply) = answer(&query(7, Some(cookie)), &snapshot, &ctx, &mut out) else {
            panic!("dropped");
        };
        out.truncate(reply.len());
        out
    };
    let stamp = 1_800_000_000;
    let first = ask(&CLIENT_COOKIE, stamp);
    assert_eq!(ask(&CLIENT_COOKIE, stamp), first, "the same inputs give the same reply");
    let reply = Message::from_vec(&first).unwrap();
    answered(&reply);
    let made = cookie_of(&reply);
    assert_eq!(
        made[8..],
        server_cookie(&SECRET_A, &CLIENT_COOKIE, stamp),
        "made at the given time"
    );
    let reply = Message::from_vec(&ask(&made, stamp + 60)).unwrap();
    answered(&reply);
    assert_eq!(cookie_of(&reply), made, "a minute later by the context, echoed");
    let reply = Message::from_vec(&ask(&made, stamp + 7200)).unwrap();
    assert_eq!(reply.response_code(), ResponseCode::BADCOOKIE, "two hours later, stale");
    assert_eq!(
        cookie_of(&reply)[8..],
        server_cookie(&SECRET_A, &CLIENT_COOKIE, stamp + 7200),
        "and a fresh one made then"
    );
}
