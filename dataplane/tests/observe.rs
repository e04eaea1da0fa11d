//! dnstap, the query log and the top talkers of a running server, read back from outside: the
//! dnstap stream by a Frame Streams receiver written here, its frames by Debian's `dnstap-read`
//! (an independent decoder of the protobuf), the query log from its file, the top talkers from
//! the counters the metrics endpoint reads.

mod common;

use common::{snapshot, RawQuery};
use skyline_dataplane::forward::ForwardConfig;
use skyline_dataplane::observe::fstrm::{self, control_frame};
use skyline_dataplane::observe::{
    dnstap::CONTENT_TYPE, DnstapConfig, ObserveConfig, QueryLogConfig, QueryLogTarget, TopConfig,
};
use skyline_dataplane::snapshot::empty_cell;
use skyline_dataplane::stats::Totals;
use skyline_dataplane::worker::{Options, Server, ServerConfig, TcpConfig};
use skyline_dataplane::Transport;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where Debian's bind9-dnsutils puts its dnstap decoder.
const DNSTAP_READ: &str = "/usr/bin/dnstap-read";

fn server(forward: Option<ForwardConfig>, observe: ObserveConfig) -> Server {
    let snapshots = empty_cell();
    snapshots.store(Arc::new(snapshot()));
    let config = ServerConfig {
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        workers: 1,
        pin: false,
        tcp: TcpConfig::default(),
    };
    let options = Options {
        forward,
        observe,
        ..Options::default()
    };
    Server::start_with(config, options, snapshots).unwrap()
}

fn dnstap(socket: &Path) -> ObserveConfig {
    ObserveConfig {
        dnstap: Some(DnstapConfig {
            socket: socket.to_owned(),
            identity: "skyline-test".to_owned(),
            version: "test-version".to_owned(),
            sample: 1,
        }),
        ..ObserveConfig::default()
    }
}

fn wait_for(server: &Server, what: &str, check: impl Fn(&Totals) -> bool) -> Totals {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let totals = server.stats();
        if check(&totals) {
            return totals;
        }
        assert!(
            Instant::now() < deadline,
            "not within 10 s: {what}; counters: {totals:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads one control frame (after its escape word); returns its type.
fn read_control(stream: &mut UnixStream) -> u32 {
    let mut word = [0u8; 4];
    stream.read_exact(&mut word).unwrap();
    let len = u32::from_be_bytes(word) as usize;
    let mut frame = vec![0; len];
    stream.read_exact(&mut frame).unwrap();
    u32::from_be_bytes(frame[..4].try_into().unwrap())
}

/// A Frame Streams reader on a unix socket: takes one connection through the bidirectional
/// handshake, then, unless `stall`, collects its data frames until STOP, which it answers
/// with FINISH.
struct Receiver {
    frames: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    fn start(path: &Path, stall: bool) -> Receiver {
        let listener = UnixListener::bind(path).unwrap();
        let frames = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (got, halt) = (Arc::clone(&frames), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut escape = [0u8; 4];
            stream.read_exact(&mut escape).unwrap();
            assert_eq!(escape, [0; 4], "a control frame first");
            assert_eq!(read_control(&mut stream), fstrm::READY);
            let mut accept = Vec::new();
            control_frame(fstrm::ACCEPT, Some(CONTENT_TYPE), &mut accept);
            stream.write_all(&accept).unwrap();
            stream.read_exact(&mut escape).unwrap();
            assert_eq!(read_control(&mut stream), fstrm::START);
            if stall {
                while !halt.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return;
            }
            loop {
                let mut word = [0u8; 4];
                stream.read_exact(&mut word).unwrap();
                let len = u32::from_be_bytes(word) as usize;
                if len == 0 {
                    assert_eq!(read_control(&mut stream), fstrm::STOP);
                    let mut finish = Vec::new();
                    control_frame(fstrm::FINISH, None, &mut finish);
                    stream.write_all(&finish).unwrap();
                    return;
                }
                let mut frame = vec![0; len];
                stream.read_exact(&mut frame).unwrap();
                got.lock().unwrap().push(frame);
            }
        });
        Receiver {
            frames,
            stop,
            thread: Some(thread),
        }
    }

    /// Waits for the stream to end and returns its data frames.
    fn finish(mut self) -> Vec<Vec<u8>> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        std::mem::take(&mut *self.frames.lock().unwrap())
    }
}

/// Writes `frames` as a unidirectional Frame Streams file: START with the content type, the
/// data frames, STOP.
fn write_fstrm_file(path: &Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    control_frame(fstrm::START, Some(CONTENT_TYPE), &mut out);
    for frame in frames {
        out.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        out.extend_from_slice(frame);
    }
    control_frame(fstrm::STOP, None, &mut out);
    std::fs::write(path, out).unwrap();
}

/// `dnstap-read` of the file with `options`: with `-y` every message as YAML, without it one
/// line a message, its time to the millisecond.
fn dnstap_read(options: &[&str], path: &Path) -> String {
    assert!(
        Path::new(DNSTAP_READ).exists(),
        "{DNSTAP_READ} is required: Debian package bind9-dnsutils (scripts/setup.sh test installs it)"
    );
    let out = Command::new(DNSTAP_READ).args(options).arg(path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "dnstap-read failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// A UDP upstream on 127.0.0.1 answering every query with `A 192.0.2.1`, until dropped.
struct Upstream {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Upstream {
    fn start() -> Upstream {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let halt = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while !halt.load(Ordering::Relaxed) {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    let query = &buf[..n];
                    let name_end = 12 + query[12..].iter().position(|&b| b == 0).unwrap() + 1;
                    let mut m = vec![query[0], query[1], 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0];
                    m.extend_from_slice(&query[12..name_end + 4]);
                    m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1]);
                    socket.send_to(&m, from).unwrap();
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

fn client() -> UdpSocket {
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    client
}

/// Asks `name` A of `server` from `client` and returns the reply.
fn ask(client: &UdpSocket, server: SocketAddr, name: &str) -> Vec<u8> {
    client.send_to(&RawQuery::new(name, 1).bytes(), server).unwrap();
    let mut buf = [0u8; 1500];
    let (n, _) = client.recv_from(&mut buf).unwrap();
    buf[..n].to_vec()
}

/// The value of the first `key: value` line after `from` in `yaml`.
fn field_after<'a>(yaml: &'a str, from: usize, key: &str) -> Option<&'a str> {
    yaml[from..].lines().find_map(|line| {
        line.trim()
            .strip_prefix(key)?
            .strip_prefix(':')
            .map(|v| v.trim().trim_matches('"'))
    })
}

#[test]
fn dnstap_of_client_and_forwarder_messages_is_read_back_by_dnstap_read() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("dnstap.sock");
    let receiver = Receiver::start(&socket, false);
    let upstream = Upstream::start();
    let server = server(
        Some(ForwardConfig {
            upstreams: vec![upstream.addr],
            ..ForwardConfig::default()
        }),
        dnstap(&socket),
    );
    let client = client();
    let client_addr = client.local_addr().unwrap();
    ask(&client, server.local_addr(), "web.skydns.test.");
    let forwarded = ask(&client, server.local_addr(), "target.example.org.");
    assert_eq!(&forwarded[forwarded.len() - 4..], &[192, 0, 2, 1]);
    let mut tcp = std::net::TcpStream::connect(server.local_addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let query = RawQuery::new("big.skydns.test.", 1).bytes();
    tcp.write_all(&(query.len() as u16).to_be_bytes()).unwrap();
    tcp.write_all(&query).unwrap();
    let mut len = [0u8; 2];
    tcp.read_exact(&mut len).unwrap();
    // Client query and response for each, forwarder query and response for the second.
    let totals = wait_for(&server, "eight dnstap messages written", |t| t.dnstap_sent >= 8);
    assert_eq!(totals.dnstap_dropped, 0);
    drop(tcp);
    server.shutdown();
    let frames = receiver.finish();
    assert_eq!(frames.len(), 8, "the writer sent STOP after its last frame");

    let file = dir.path().join("tap.fstrm");
    write_fstrm_file(&file, &frames);
    let yaml = dnstap_read(&["-y"], &file);
    let messages: Vec<usize> = yaml.match_indices("type: MESSAGE").map(|(at, _)| at).collect();
    assert_eq!(messages.len(), 8, "{yaml}");
    let kinds: Vec<&str> = messages
        .iter()
        .map(|&at| field_after(&yaml, at + 1, "type").unwrap())
        .collect();
    for kind in [
        "CLIENT_QUERY",
        "CLIENT_RESPONSE",
        "FORWARDER_QUERY",
        "FORWARDER_RESPONSE",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}:\n{yaml}");
    }
    assert_eq!(kinds.iter().filter(|k| **k == "CLIENT_QUERY").count(), 3);
    assert_eq!(field_after(&yaml, 0, "identity"), Some("skyline-test"));
    assert_eq!(field_after(&yaml, 0, "version"), Some("test-version"));
    for (&at, kind) in messages.iter().zip(&kinds) {
        let end = yaml[at + 1..].find("type: MESSAGE").map_or(yaml.len(), |e| at + 1 + e);
        let message = &yaml[at..end];
        assert_eq!(field_after(message, 0, "socket_family"), Some("INET"), "{message}");
        let over_tcp = message.contains("big.skydns.test.");
        let protocol = if over_tcp { "TCP" } else { "UDP" };
        assert_eq!(field_after(message, 0, "socket_protocol"), Some(protocol), "{message}");
        if kind.starts_with("CLIENT") {
            assert_eq!(field_after(message, 0, "query_address"), Some("127.0.0.1"), "{message}");
            let port = if over_tcp { tcp_port } else { client_addr.port() }.to_string();
            assert_eq!(field_after(message, 0, "query_port"), Some(port.as_str()), "{message}");
        } else {
            assert_eq!(
                field_after(message, 0, "response_address"),
                Some("127.0.0.1"),
                "{message}"
            );
            let port = upstream.addr.port().to_string();
            assert_eq!(
                field_after(message, 0, "response_port"),
                Some(port.as_str()),
                "{message}"
            );
            assert!(message.contains("target.example.org."), "{message}");
        }
        let body = if kind.ends_with("QUERY") {
            "query_message"
        } else {
            "response_message"
        };
        assert!(message.contains(body), "{kind} without its {body}:\n{message}");
    }
    assert!(yaml.contains("web.skydns.test."), "{yaml}");
    assert!(
        yaml.contains("192.0.2.1"),
        "the forwarded answer is in the responses:\n{yaml}"
    );
}

/// The time of each message of `kind` (`CQ`, `FQ`...) in `dnstap-read`'s one-line form
/// (`07-Dec-2026 03:40:20.123 FQ 127.0.0.1:0 -> 127.0.0.1:5353 UDP 46b q1.example.org/IN/A`),
/// by lower-cased query name, as (year, month, day, millisecond of the day).
fn dnstap_read_times(text: &str, kind: &str) -> Vec<(String, (u32, u32, u32, u32))> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(2) != Some(&kind) {
                return None;
            }
            let mut date = fields[0].split('-');
            let day: u32 = date.next()?.parse().ok()?;
            let month_name = date.next()?;
            let month = MONTHS.iter().position(|m| *m == month_name)? as u32;
            let year: u32 = date.next()?.parse().ok()?;
            let (hms, millis) = fields[1].split_once('.')?;
            let clock: Vec<u32> = hms.split(':').map(|n| n.parse().unwrap()).collect();
            let ms = ((clock[0] * 60 + clock[1]) * 60 + clock[2]) * 1000 + millis.parse::<u32>().ok()?;
            let name = fields.last()?.split('/').next()?.to_ascii_lowercase();
            Some((name, (year, month, day, ms)))
        })
        .collect()
}

/// A protocol-buffer field of `message` read at `at`: its number, its value (a varint or a
/// fixed32) or its bytes, and where the next field starts. Written here from the protobuf
/// encoding rules, apart from skyline's encoder.
fn protobuf_field(message: &[u8], mut at: usize) -> (u64, u64, &[u8], usize) {
    let varint = |at: &mut usize| {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = message[*at];
            *at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                break;
            }
        }
        value
    };
    let key = varint(&mut at);
    match key & 7 {
        0 => (key >> 3, varint(&mut at), &[], at),
        2 => {
            let len = varint(&mut at) as usize;
            (key >> 3, 0, &message[at..at + len], at + len)
        }
        5 => {
            let value = u32::from_le_bytes(message[at..at + 4].try_into().unwrap());
            (key >> 3, u64::from(value), &[], at + 4)
        }
        other => panic!("wire type {other} is not one dnstap uses"),
    }
}

/// A dnstap frame's `Message.type`, query time in nanoseconds since the epoch, and the query's
/// name (lower-cased, dotted).
fn query_time_and_name(frame: &[u8]) -> (u64, u128, String) {
    let mut at = 0;
    let mut message = &[][..];
    while at < frame.len() {
        let (field, _, bytes, next) = protobuf_field(frame, at);
        if field == 14 {
            message = bytes;
        }
        at = next;
    }
    let (mut kind, mut sec, mut nsec, mut query) = (0, 0, 0, &[][..]);
    at = 0;
    while at < message.len() {
        let (field, value, bytes, next) = protobuf_field(message, at);
        match field {
            1 => kind = value,
            8 => sec = value,
            9 => nsec = value,
            10 => query = bytes,
            _ => {}
        }
        at = next;
    }
    let mut name = String::new();
    let mut label = 12;
    while let Some(&len) = query.get(label).filter(|&&len| len > 0) {
        let text = &query[label + 1..label + 1 + usize::from(len)];
        name.push_str(&String::from_utf8_lossy(text).to_ascii_lowercase());
        name.push('.');
        label += 1 + usize::from(len);
    }
    (kind, u128::from(sec) * 1_000_000_000 + u128::from(nsec), name)
}

#[test]
fn a_forwarded_querys_client_query_is_stamped_no_later_than_the_forwarder_query_it_caused() {
    const UDP_QUERIES: usize = 400;
    const TCP_QUERIES: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("dnstap.sock");
    let receiver = Receiver::start(&socket, false);
    let upstream = Upstream::start();
    let server = server(
        Some(ForwardConfig {
            upstreams: vec![upstream.addr],
            ..ForwardConfig::default()
        }),
        dnstap(&socket),
    );
    let client = client();
    for i in 0..UDP_QUERIES {
        let reply = ask(&client, server.local_addr(), &format!("u{i}.example.org."));
        assert_eq!(&reply[reply.len() - 4..], &[192, 0, 2, 1], "forwarded and answered");
    }
    let mut tcp = std::net::TcpStream::connect(server.local_addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    for i in 0..TCP_QUERIES {
        let query = RawQuery::new(&format!("t{i}.example.org."), 1).bytes();
        tcp.write_all(&(query.len() as u16).to_be_bytes()).unwrap();
        tcp.write_all(&query).unwrap();
        let mut len = [0u8; 2];
        tcp.read_exact(&mut len).unwrap();
        let mut reply = vec![0; usize::from(u16::from_be_bytes(len))];
        tcp.read_exact(&mut reply).unwrap();
        assert_eq!(&reply[reply.len() - 4..], &[192, 0, 2, 1], "forwarded and answered");
    }
    let queries = UDP_QUERIES + TCP_QUERIES;
    let totals = wait_for(&server, "four dnstap messages a query written", |t| {
        t.dnstap_sent >= 4 * queries as u64
    });
    assert_eq!(totals.dnstap_dropped, 0);
    drop(tcp);
    server.shutdown();
    let frames = receiver.finish();

    // dnstap-read's times, to the millisecond.
    let file = dir.path().join("tap.fstrm");
    write_fstrm_file(&file, &frames);
    let text = dnstap_read(&[], &file);
    let client_queries: HashMap<String, _> = dnstap_read_times(&text, "CQ").into_iter().collect();
    let forwarder_queries = dnstap_read_times(&text, "FQ");
    assert_eq!(client_queries.len(), queries, "{text}");
    assert_eq!(forwarder_queries.len(), queries, "{text}");
    for (name, forwarded_at) in &forwarder_queries {
        let received_at = client_queries[name];
        assert!(
            received_at <= *forwarded_at,
            "{name}: CLIENT_QUERY at {received_at:?} after its FORWARDER_QUERY at {forwarded_at:?}"
        );
    }

    // The same frames to the nanosecond.
    let mut received = HashMap::new();
    let mut forwarded = Vec::new();
    for frame in &frames {
        match query_time_and_name(frame) {
            (5, time, name) => assert!(received.insert(name, time).is_none(), "one CLIENT_QUERY a query"),
            (7, time, name) => forwarded.push((name, time)),
            _ => {}
        }
    }
    assert_eq!((received.len(), forwarded.len()), (queries, queries));
    let late: Vec<String> = forwarded
        .iter()
        .filter(|(name, time)| received[name] > *time)
        .map(|(name, time)| format!("{name} by {} ns", received[name] - time))
        .collect();
    assert!(
        late.is_empty(),
        "CLIENT_QUERY after its FORWARDER_QUERY for {} of {queries}: {late:?}",
        late.len()
    );
}

/// Sends `n` queries one after the other and returns how long they took; every one must be
/// answered.
fn timed_queries(server: SocketAddr, n: usize) -> Duration {
    let client = client();
    let query = RawQuery::new("web.skydns.test.", 1).bytes();
    let mut buf = [0u8; 1500];
    let started = Instant::now();
    for _ in 0..n {
        client.send_to(&query, server).unwrap();
        client.recv_from(&mut buf).expect("every query is answered");
    }
    started.elapsed()
}

#[test]
fn a_stalled_dnstap_reader_costs_dropped_messages_not_answering_speed() {
    const QUERIES: usize = 12_000;
    const ROUNDS: usize = 12;
    let plain = server(None, ObserveConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("dnstap.sock");
    let receiver = Receiver::start(&socket, true);
    let tapped = server(None, dnstap(&socket));
    // The two servers take turns, so that whatever else the machine runs meanwhile (the other
    // tests of this file) slows both alike.
    let (mut baseline, mut took) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..ROUNDS {
        baseline += timed_queries(plain.local_addr(), QUERIES / ROUNDS);
        took += timed_queries(tapped.local_addr(), QUERIES / ROUNDS);
    }
    plain.shutdown();
    let totals = wait_for(&tapped, "dnstap messages dropped", |t| t.dnstap_dropped > 0);
    assert_eq!(totals.requests.over(Transport::Udp), QUERIES as u64);
    assert!(
        totals.dnstap_sent + totals.dnstap_dropped <= 2 * QUERIES as u64,
        "{totals:?}"
    );
    // Generous, for shared machines: the point is that answering never waits on the reader,
    // which would show as seconds (the writer's two-second write timeout), not a few percent.
    assert!(
        took < baseline * 3 + Duration::from_millis(500),
        "answering slowed down: {took:?} with a stalled reader, {baseline:?} without dnstap"
    );
    tapped.shutdown();
    receiver.finish();
}

#[test]
fn the_query_log_writes_one_line_per_query_within_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queries.log");
    // The limit counts per second of the server's life: queries within its first second share
    // one allowance.
    let before_start = Instant::now();
    let server = server(
        None,
        ObserveConfig {
            query_log: Some(QueryLogConfig {
                target: QueryLogTarget::File(path.clone()),
                rate: 5,
            }),
            ..ObserveConfig::default()
        },
    );
    let client = client();
    let port = client.local_addr().unwrap().port();
    for _ in 0..20 {
        ask(&client, server.local_addr(), "web.skydns.test.");
    }
    let within_one_second = before_start.elapsed() < Duration::from_secs(1);
    let totals = wait_for(&server, "every query logged or suppressed", |t| {
        t.query_log_lines + t.query_log_suppressed >= 20
    });
    assert_eq!(totals.query_log_lines + totals.query_log_suppressed, 20);
    if within_one_second {
        assert_eq!((totals.query_log_lines, totals.query_log_suppressed), (5, 15));
    } else {
        assert!((5..=10).contains(&totals.query_log_lines), "{totals:?}");
    }
    server.shutdown();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() as u64, totals.query_log_lines, "{text}");
    let prefix = format!("client=127.0.0.1:{port} proto=udp name=web.skydns.test. type=A rcode=NOERROR duration_us=");
    for line in lines {
        let duration = line
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{line:?} is not {prefix:?}<micros>"));
        duration.parse::<u64>().unwrap();
    }
}

#[test]
fn the_top_talkers_rank_clients_and_names_by_their_queries() {
    let server = server(
        None,
        ObserveConfig {
            top_talkers: Some(TopConfig { k: 2, sample: 1 }),
            ..ObserveConfig::default()
        },
    );
    let reader = server.observe_reader();
    // 127.0.0.2 asks 30 times, 127.0.0.3 20 times, 127.0.0.4 5 times; web. 40, big. 15.
    for (last, n) in [(2u8, 30), (3, 20), (4, 5)] {
        let client = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, last), 0)).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        for i in 0..n {
            let name = if i % 4 == 3 || last == 4 {
                "BIG.skydns.test."
            } else {
                "web.skydns.test."
            };
            ask(&client, server.local_addr(), name);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let top = loop {
        let top = reader.top_talkers().expect("top talkers are on");
        if top.clients.iter().map(|c| c.count).sum::<u64>() >= 50 || Instant::now() > deadline {
            break top;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let clients: Vec<(IpAddr, u64)> = top.clients.iter().map(|c| (c.key, c.count)).collect();
    assert_eq!(
        clients,
        [(IpAddr::from([127, 0, 0, 2]), 30), (IpAddr::from([127, 0, 0, 3]), 20)],
        "K = 2 rows, exact while the sketch holds every key"
    );
    let names: Vec<(&str, u64)> = top.names.iter().map(|n| (n.key.as_str(), n.count)).collect();
    // web: 30 - 7 (i % 4 == 3 for i < 30) + 20 - 5 = 38; big: 7 + 5 + 5 = 17.
    assert_eq!(names, [("web.skydns.test.", 38), ("big.skydns.test.", 17)]);
    server.shutdown();
}

#[test]
fn observation_off_leaves_no_writer_and_no_top_talkers() {
    let server = server(None, ObserveConfig::default());
    assert!(server.observe_reader().top_talkers().is_none());
    ask(&client(), server.local_addr(), "web.skydns.test.");
    let totals = server.stats();
    assert_eq!(
        (totals.dnstap_sent, totals.dnstap_dropped, totals.query_log_lines),
        (0, 0, 0)
    );
    server.shutdown();
}

/// The reader's socket path need not exist at start: the writer connects once it appears.
#[test]
fn the_dnstap_writer_connects_when_the_reader_appears() {
    let dir = tempfile::tempdir().unwrap();
    let socket: PathBuf = dir.path().join("later.sock");
    let server = server(None, dnstap(&socket));
    let client = client();
    ask(&client, server.local_addr(), "web.skydns.test.");
    wait_for(&server, "messages dropped while no reader listens", |t| {
        t.dnstap_dropped >= 2
    });
    let receiver = Receiver::start(&socket, false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.stats().dnstap_sent == 0 {
        assert!(Instant::now() < deadline, "the writer never connected");
        ask(&client, server.local_addr(), "web.skydns.test.");
        std::thread::sleep(Duration::from_millis(50));
    }
    server.shutdown();
    assert!(!receiver.finish().is_empty());
}

/// Sends `query` on `stream` with its TCP length prefix.
fn send_framed(stream: &mut std::net::TcpStream, query: &[u8]) {
    stream.write_all(&(query.len() as u16).to_be_bytes()).unwrap();
    stream.write_all(query).unwrap();
}

/// Reads one length-prefixed message from `stream`.
fn read_framed(stream: &mut std::net::TcpStream) -> Vec<u8> {
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).unwrap();
    let mut message = vec![0; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut message).unwrap();
    message
}

/// The query log's lines without what differs between two transports' (the client's port, the
/// transport, the duration), sorted.
fn logged_exchanges(text: &str, proto: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|line| line.contains(&format!(" proto={proto} ")))
        .map(|line| {
            let from = line.find(" name=").unwrap();
            let to = line.find(" duration_us=").unwrap();
            line[from..to].to_owned()
        })
        .collect();
    lines.sort();
    lines
}

#[test]
fn a_query_over_tcp_is_counted_logged_and_ranked_as_the_same_query_over_udp() {
    use hickory_proto::op::{Message, ResponseCode};
    use hickory_proto::rr::RData;
    use skyline_dataplane::stats::{AddressFamily, QUESTION_TYPES};

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("queries.log");
    let upstream = Upstream::start();
    let server = server(
        Some(ForwardConfig {
            upstreams: vec![upstream.addr],
            ..ForwardConfig::default()
        }),
        ObserveConfig {
            query_log: Some(QueryLogConfig {
                target: QueryLogTarget::File(log.clone()),
                rate: 1000,
            }),
            top_talkers: Some(TopConfig { k: 8, sample: 1 }),
            ..ObserveConfig::default()
        },
    );
    // Per transport: an answer, a name that does not exist, a name forwarded (answered once the
    // upstream has: the late-reply path), and a message that is a response (dropped unanswered).
    let queries = |forwarded: &str| {
        let mut response = RawQuery::new("response.skydns.test.", 1).bytes();
        response[2] |= 0x80;
        [
            RawQuery::new("web.skydns.test.", 1).bytes(),
            RawQuery::new("nothere.skydns.test.", 1).bytes(),
            RawQuery::new(forwarded, 1).bytes(),
            response,
        ]
    };
    let check_replies = |replies: Vec<Vec<u8>>| {
        let mut codes: Vec<(String, ResponseCode, usize)> = replies
            .iter()
            .map(|reply| {
                let message = Message::from_vec(reply).expect("hickory parses the reply");
                let name = message.queries()[0].name().to_ascii();
                let forwarded_a = message
                    .answers()
                    .iter()
                    .filter(|r| matches!(r.data(), Some(RData::A(a)) if a.0 == Ipv4Addr::new(192, 0, 2, 1)))
                    .count();
                (name, message.response_code(), forwarded_a)
            })
            .collect();
        codes.sort_by(|a, b| a.0.cmp(&b.0));
        codes
    };

    let udp = client();
    let mut replies = Vec::new();
    for query in queries("udp.example.org.") {
        udp.send_to(&query, server.local_addr()).unwrap();
    }
    for _ in 0..3 {
        let mut buf = [0u8; 1500];
        let (n, _) = udp.recv_from(&mut buf).unwrap();
        replies.push(buf[..n].to_vec());
    }
    let over_udp = check_replies(replies);
    let after_udp = wait_for(&server, "four UDP requests counted and three logged", |t| {
        t.requests.over(Transport::Udp) == 4 && t.query_log_lines == 3
    });

    let mut tcp = std::net::TcpStream::connect(server.local_addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    for query in queries("tcp.example.org.") {
        send_framed(&mut tcp, &query);
    }
    let over_tcp = check_replies((0..3).map(|_| read_framed(&mut tcp)).collect());
    let after_tcp = wait_for(&server, "four TCP requests counted and three more logged", |t| {
        t.requests.over(Transport::Tcp) == 4 && t.query_log_lines == 6
    });

    let answered = |forwarded: &str| {
        vec![
            ("nothere.skydns.test.".to_owned(), ResponseCode::NXDomain, 0),
            (forwarded.to_owned(), ResponseCode::NoError, 1),
            ("web.skydns.test.".to_owned(), ResponseCode::NoError, 0),
        ]
    };
    assert_eq!(over_udp, answered("udp.example.org."));
    assert_eq!(over_tcp, answered("tcp.example.org."));

    // The counters the two transports share grew by as much for the one as for the other.
    let a = QUESTION_TYPES.iter().position(|(_, name)| *name == "A").unwrap();
    let (u, t) = (after_udp, after_tcp);
    assert_eq!(u.requests.get(AddressFamily::V4, Transport::Udp, a), 4);
    assert_eq!(t.requests.get(AddressFamily::V4, Transport::Tcp, a), 4);
    let shared = |t: &Totals| {
        (
            t.replies_noerror,
            t.replies_nxdomain,
            t.dropped_response,
            t.request_duration.count(),
            t.query_log_lines,
        )
    };
    assert_eq!(shared(&u), (2, 1, 1, 3, 3), "{u:?}");
    assert_eq!(shared(&t), (4, 2, 2, 6, 6), "{t:?}");
    assert_eq!((u.request_size[0].count(), u.response_size[0].count()), (4, 3));
    assert_eq!((t.request_size[1].count(), t.response_size[1].count()), (4, 3));
    assert_eq!((t.udp_batches > 0, t.tcp_accepted), (true, 1));

    // The top talkers count every message, answered, forwarded or dropped, whatever it came on.
    let reader = server.observe_reader();
    let deadline = Instant::now() + Duration::from_secs(5);
    let top = loop {
        let top = reader.top_talkers().expect("top talkers are on");
        if top.clients.iter().map(|c| c.count).sum::<u64>() >= 8 || Instant::now() > deadline {
            break top;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let clients: Vec<(IpAddr, u64)> = top.clients.iter().map(|c| (c.key, c.count)).collect();
    assert_eq!(clients, [(IpAddr::from([127, 0, 0, 1]), 8)]);
    let mut names: Vec<(&str, u64)> = top.names.iter().map(|n| (n.key.as_str(), n.count)).collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("nothere.skydns.test.", 2),
            ("response.skydns.test.", 2),
            ("tcp.example.org.", 1),
            ("udp.example.org.", 1),
            ("web.skydns.test.", 2),
        ]
    );
    drop(tcp);
    server.shutdown();

    // The query log has a line per reply, the same for either transport.
    let text = std::fs::read_to_string(&log).unwrap();
    let same = |forwarded: &str| {
        vec![
            " name=nothere.skydns.test. type=A rcode=NXDOMAIN".to_owned(),
            " name=web.skydns.test. type=A rcode=NOERROR".to_owned(),
            format!(" name={forwarded} type=A rcode=NOERROR"),
        ]
    };
    let mut expected_udp = same("udp.example.org.");
    expected_udp.sort();
    let mut expected_tcp = same("tcp.example.org.");
    expected_tcp.sort();
    assert_eq!(logged_exchanges(&text, "udp"), expected_udp, "{text}");
    assert_eq!(logged_exchanges(&text, "tcp"), expected_tcp, "{text}");
}
