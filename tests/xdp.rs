//! `skyline --xdp` end to end: the real binary serves one end of a veth pair with two receive
//! queues, in a network namespace of its own, and clients in the peer's namespace query it.
//! A client is this test binary run again under `ip netns exec` (see [`xdp_test_child`]): it
//! speaks UDP, TCP and ICMP through the kernel of its own namespace, so what it sees is what a
//! remote client would. The metrics (`--http-addr` inside the server's namespace) show that the
//! UDP answers came through the AF_XDP sockets and not through the kernel's.
//!
//! Needs root (network namespaces, BPF) and `ip` (iproute2). Without them the tests say so and
//! pass, except under `CI=true`, where a refusal fails them: CI must exercise the kernel.
#![cfg(all(target_os = "linux", not(skyline_portable_io)))]

mod common;
#[path = "../dataplane/tests/support/veth.rs"]
mod veth;

use common::{can_use_namespaces, eventually, http_get, metric_sum, metric_value, tool};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use skyline_dataplane::sys::{send_signal, Signal};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};
use veth::{ping, VethPair, IFACE, SERVER_V4, SERVER_V6};

/// Where skyline serves `/metrics`, on the loopback interface of the server namespace.
const HTTP: &str = "127.0.0.1:9153";
/// How long a start, a stop or anything else the kernel does asynchronously is waited for.
const PATIENCE: Duration = Duration::from_secs(20);
/// Set in a child's environment to the operations it performs (see [`Op`]).
const OPS: &str = "SKYLINE_XDP_TEST_OPS";
/// What a child prints before each result, to find it among the test harness's output.
const MARK: &str = "XDP-CLIENT:";
/// The signal number of SIGKILL, as a killed child's status reports it.
const SIGKILL: i32 = 9;

fn v4(port: u16) -> SocketAddr {
    SocketAddr::new(SERVER_V4.parse().unwrap(), port)
}

fn v6(port: u16) -> SocketAddr {
    SocketAddr::new(SERVER_V6.parse().unwrap(), port)
}

/// Whether these tests can run here: root with the capabilities XDP needs, `ip`, and network
/// namespaces the kernel lets this process make. Under CI=true anything missing fails the
/// test instead of skipping it. Found out once: the tests run at the same time.
fn namespaces_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| {
        if !can_use_namespaces(&[("ip", "iproute2")]) {
            return false;
        }
        let refused = |why: &str| {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{why}: required under CI=true"
            );
            eprintln!("skipping: {why}");
            false
        };
        // CAP_NET_ADMIN, CAP_NET_RAW, and CAP_BPF or CAP_SYS_ADMIN: what skyline --xdp needs.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let effective = status
            .lines()
            .find_map(|line| line.strip_prefix("CapEff:"))
            .and_then(|caps| u64::from_str_radix(caps.trim(), 16).ok())
            .unwrap_or(0);
        let has = |cap: u32| effective & (1 << cap) != 0;
        if !(has(12) && has(13) && (has(39) || has(21))) {
            return refused(&format!("the capabilities XDP needs (effective {effective:#x})"));
        }
        let probe = format!("skyxdpt-{}-probe", std::process::id());
        let out = Command::new("ip").args(["netns", "add", &probe]).output().unwrap();
        if !out.status.success() {
            return refused(&format!(
                "ip netns add was refused: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let _ = Command::new("ip").args(["netns", "delete", &probe]).output();
        true
    })
}

/// The namespace pair of a test, with what these tests ask of it.
struct Net(VethPair);

impl std::ops::Deref for Net {
    type Target = VethPair;

    fn deref(&self) -> &VethPair {
        &self.0
    }
}

impl Net {
    /// The pair, both ends with `mtu`.
    fn new(tag: &str, mtu: u32) -> Net {
        Net(VethPair::new("skyxdpt", tag, mtu))
    }

    /// Whether an XDP program is attached to the served interface.
    fn attached(&self) -> bool {
        self.link().contains("prog/xdp")
    }

    /// Runs `ops` in a client in the client namespace; each one's result, in order.
    fn client(&self, ops: &[Op]) -> Vec<Vec<u8>> {
        run_child(&self.client, ops)
    }

    /// Skyline's `/metrics`, read from inside the server namespace.
    fn metrics(&self) -> String {
        let body = run_child(&self.server, &[Op::Metrics(HTTP.parse().unwrap())]);
        String::from_utf8(body.into_iter().next().unwrap()).unwrap()
    }

    /// The AF_XDP counters summed over both queues.
    fn xdp_counts(&self) -> XdpCounts {
        XdpCounts::of(&self.metrics())
    }
}

/// The per-queue AF_XDP counters of `/metrics`, summed over the two queues.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct XdpCounts {
    received: u64,
    sent: u64,
    sent_by_kernel: u64,
    dropped: u64,
}

impl XdpCounts {
    fn of(metrics: &str) -> XdpCounts {
        let sum = |family: &str, label: &str, values: &[&str]| -> u64 {
            let mut total = 0;
            for queue in 0..2 {
                for value in values {
                    let series = format!("{family}{{queue=\"{queue}\",{label}=\"{value}\"}}");
                    let sample = metric_value(metrics, &series)
                        .unwrap_or_else(|| panic!("{series} is missing from /metrics:\n{metrics}"));
                    total += sample as u64;
                }
            }
            total
        };
        let packets = |direction| sum("skyline_xdp_packets_total", "direction", &[direction]);
        XdpCounts {
            received: packets("received"),
            sent: packets("sent"),
            sent_by_kernel: packets("sent_by_kernel"),
            dropped: sum(
                "skyline_xdp_dropped_total",
                "reason",
                &["malformed", "tx_ring_full", "kernel_send", "kernel_rx", "rx_ring_full"],
            ),
        }
    }
}

/// What a client child does, one after the other; each yields bytes (a reply, a body) or
/// nothing.
#[derive(Debug, Clone)]
enum Op {
    /// Sends a query over UDP (again after a second without a reply, three tries) and yields the
    /// reply.
    Udp(SocketAddr, Vec<u8>),
    /// Sends a query over a new TCP connection and yields the reply.
    Tcp(SocketAddr, Vec<u8>),
    /// Pings over a raw socket until an echo reply comes.
    Ping(IpAddr),
    /// Sends a datagram on a connected UDP socket and expects the port-unreachable error.
    Refused(SocketAddr),
    /// GETs `/metrics` and yields the body.
    Metrics(SocketAddr),
    /// Sends the query over UDP for the given milliseconds, ten at a time every millisecond,
    /// each with its own ID, and yields how many were sent and how many answered (two
    /// big-endian `u64`), counting replies that come within two seconds after the last send.
    Load(SocketAddr, Vec<u8>, u64),
}

impl Op {
    fn encode(&self) -> String {
        match self {
            Op::Udp(addr, query) => format!("udp|{addr}|{}", hex(query)),
            Op::Tcp(addr, query) => format!("tcp|{addr}|{}", hex(query)),
            Op::Ping(addr) => format!("ping|{addr}|"),
            Op::Refused(addr) => format!("refused|{addr}|"),
            Op::Metrics(addr) => format!("metrics|{addr}|"),
            Op::Load(addr, query, millis) => format!("load|{addr}|{}|{millis}", hex(query)),
        }
    }

    fn decode(text: &str) -> Op {
        let mut parts = text.split('|');
        let (kind, target, bytes) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        match kind {
            "udp" => Op::Udp(target.parse().unwrap(), unhex(bytes)),
            "tcp" => Op::Tcp(target.parse().unwrap(), unhex(bytes)),
            "ping" => Op::Ping(target.parse().unwrap()),
            "refused" => Op::Refused(target.parse().unwrap()),
            "metrics" => Op::Metrics(target.parse().unwrap()),
            "load" => Op::Load(
                target.parse().unwrap(),
                unhex(bytes),
                parts.next().unwrap().parse().unwrap(),
            ),
            other => panic!("unknown operation {other}"),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Runs `ops` in a child in namespace `ns`; each one's result, in order. Fails the test with
/// the child's output when the child fails.
fn run_child(ns: &str, ops: &[Op]) -> Vec<Vec<u8>> {
    let encoded: Vec<String> = ops.iter().map(Op::encode).collect();
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "xdp_test_child", "--nocapture", "--test-threads=1"])
        .env(OPS, encoded.join(";"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read while it runs: a child blocked on a full pipe would never end.
    let read = |mut stream: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            stream.read_to_string(&mut text).map(|_| text)
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let status = wait_bounded(&mut child, PATIENCE, "a client child");
    let text = stdout.join().unwrap().unwrap() + &stderr.join().unwrap().unwrap();
    assert!(status.success(), "the child in {ns} failed ({status}):\n{text}");
    let results: Vec<Vec<u8>> = text
        .lines()
        .filter_map(|line| Some(unhex(line.split_once(MARK)?.1.trim())))
        .collect();
    assert_eq!(results.len(), ops.len(), "a result per operation:\n{text}");
    results
}

/// Waits for `child` at most `limit`, then kills it and fails the test.
fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Not a test of its own: a client child's work, the operations in [`OPS`]. Run as an ordinary
/// test it returns at once.
#[test]
fn xdp_test_child() {
    let Ok(ops) = std::env::var(OPS) else { return };
    for op in ops.split(';').map(Op::decode) {
        let result = match op {
            Op::Udp(addr, query) => udp_exchange(addr, &query),
            Op::Tcp(addr, query) => tcp_exchange(addr, &query),
            Op::Ping(addr) => {
                ping(addr, Duration::from_secs(10));
                Vec::new()
            }
            Op::Refused(addr) => {
                refused(addr);
                Vec::new()
            }
            Op::Metrics(addr) => {
                let (status, body) = http_get(addr, "/metrics").expect("skyline serves /metrics");
                assert_eq!(status, 200, "{body}");
                body.into_bytes()
            }
            Op::Load(addr, query, millis) => {
                let (sent, answered) = udp_load(addr, &query, Duration::from_millis(millis));
                [sent.to_be_bytes(), answered.to_be_bytes()].concat()
            }
        };
        println!("{MARK} {}", hex(&result));
    }
}

/// Sends `query` over UDP to `addr` and returns the reply with its ID, a few tries in case the
/// first is held up while the neighbour's address is resolved.
fn udp_exchange(addr: SocketAddr, query: &[u8]) -> Vec<u8> {
    let local: SocketAddr = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().unwrap();
    let socket = UdpSocket::bind(local).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut buf = vec![0; 65535];
    for _ in 0..3 {
        socket.send_to(query, addr).unwrap();
        while let Ok((len, from)) = socket.recv_from(&mut buf) {
            if from == addr && len >= 2 && buf[..2] == query[..2] {
                return buf[..len].to_vec();
            }
        }
    }
    panic!("no UDP reply from {addr}");
}

/// Sends `query` to `addr` for `duration`, ten at a time every millisecond with IDs counting
/// up, and reads the replies meanwhile and for two seconds after: (sent, answered).
fn udp_load(addr: SocketAddr, query: &[u8], duration: Duration) -> (u64, u64) {
    let local: SocketAddr = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().unwrap();
    let socket = UdpSocket::bind(local).unwrap();
    socket.set_read_timeout(Some(Duration::from_micros(200))).unwrap();
    let mut query = query.to_vec();
    let mut pending = std::collections::HashSet::new();
    let (mut sent, mut answered) = (0u64, 0u64);
    let mut buf = vec![0; 65535];
    let mut receive = |pending: &mut std::collections::HashSet<u16>, answered: &mut u64| {
        while let Ok((len, from)) = socket.recv_from(&mut buf) {
            if from == addr && len >= 2 && pending.remove(&u16::from_be_bytes([buf[0], buf[1]])) {
                *answered += 1;
            }
        }
    };
    let start = Instant::now();
    while start.elapsed() < duration {
        for _ in 0..10 {
            let id = sent as u16;
            query[..2].copy_from_slice(&id.to_be_bytes());
            socket.send_to(&query, addr).unwrap();
            pending.insert(id);
            sent += 1;
        }
        receive(&mut pending, &mut answered);
        std::thread::sleep(Duration::from_millis(1));
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while !pending.is_empty() && Instant::now() < deadline {
        receive(&mut pending, &mut answered);
    }
    (sent, answered)
}

/// Sends `query` over a new TCP connection to `addr` and returns the reply.
fn tcp_exchange(addr: SocketAddr, query: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut framed = u16::try_from(query.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    stream.write_all(&framed).unwrap();
    let mut len = [0; 2];
    stream.read_exact(&mut len).unwrap();
    let mut reply = vec![0; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut reply).unwrap();
    reply
}

/// Sends a datagram to `addr` on a connected socket until the kernel reports the port
/// unreachable (ICMP), which a connected socket's next receive returns as refused.
fn refused(addr: SocketAddr) {
    let local: SocketAddr = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().unwrap();
    let socket = UdpSocket::bind(local).unwrap();
    socket.connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut buf = [0; 512];
    for _ in 0..5 {
        // A send may itself report the error of the one before.
        if let Err(e) = socket.send(b"\x12\x34\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00") {
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
            return;
        }
        match socket.recv(&mut buf) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => return,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            other => panic!("{addr}: expected connection refused, got {other:?}"),
        }
    }
    panic!("{addr}: no port-unreachable error");
}

/// The zone served: single names, an SRV set whose targets need glue, and two sets of A
/// records, one that fits 1232 bytes but not 512 and one that fits 1232 bytes but not a
/// 1200-byte MTU.
fn records() -> String {
    let mut records = vec![
        r#""/skydns/config": {"domain": "skydns.local.", "ttl": 3600, "min_ttl": 60}"#.to_owned(),
        r#""/skydns/local/skydns/hosts/node1": {"host": "10.0.0.101"}"#.to_owned(),
        r#""/skydns/local/skydns/hosts/api2v6": {"host": "2001:db8:2::22"}"#.to_owned(),
        r#""/skydns/local/skydns/east/web/1": {"host": "10.0.1.10", "port": 80}"#.to_owned(),
        r#""/skydns/local/skydns/east/web/2": {"host": "10.0.1.11", "port": 80, "weight": 50}"#.to_owned(),
        r#""/skydns/local/skydns/east/web/3": {"host": "2001:db8:1::10", "port": 80}"#.to_owned(),
    ];
    for i in 0..40 {
        records.push(format!(r#""/skydns/local/skydns/many/h{i}": {{"host": "10.1.0.{i}"}}"#));
    }
    for i in 0..BIG_SET {
        records.push(format!(r#""/skydns/local/skydns/big/h{i}": {{"host": "10.2.0.{i}"}}"#));
    }
    format!("{{\n{}\n}}\n", records.join(",\n"))
}

/// A records of `big.skydns.local.`: with a 1232-byte EDNS buffer the reply is 45 + 16 × 73 =
/// 1213 bytes, more than the 1172 that a 1200-byte MTU leaves an IPv4 datagram.
const BIG_SET: usize = 73;

/// A query with a fixed ID, its name's case as given.
fn query(id: u16, name: &str, rtype: RecordType, edns: Option<u16>) -> Vec<u8> {
    let mut m = common::query(name, rtype, edns);
    m.set_id(id);
    let bytes = m.to_vec().unwrap();
    let mut labels = name.split('.').filter(|label| !label.is_empty());
    assert!(
        labels.all(|label| bytes.windows(label.len()).any(|w| w == label.as_bytes())),
        "the query carries {name} with its case"
    );
    bytes
}

/// What a reply must show (given the reply and its length) for its comparison to cover what
/// the query is there for.
type Check = fn(&Message, usize);

/// One query compared between the two paths.
struct Case {
    what: &'static str,
    query: Vec<u8>,
    check: Check,
}

fn case(what: &'static str, query: Vec<u8>, check: Check) -> Case {
    Case { what, query, check }
}

/// The queries compared.
fn queries() -> Vec<Case> {
    fn a(reply: &Message, _: usize) {
        assert_eq!(reply.response_code(), ResponseCode::NoError);
        let addrs: Vec<_> = reply
            .answers()
            .iter()
            .filter_map(|r| match r.data() {
                Some(RData::A(a)) => Some(a.0.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(addrs, ["10.0.0.101"]);
    }
    fn aaaa(reply: &Message, _: usize) {
        assert!(matches!(reply.answers()[0].data(), Some(RData::AAAA(_))), "{reply:?}");
    }
    fn srv_with_glue(reply: &Message, _: usize) {
        assert_eq!(reply.answers().len(), 3, "{reply:?}");
        let glue = reply
            .additionals()
            .iter()
            .filter(|r| matches!(r.data(), Some(RData::A(_) | RData::AAAA(_))))
            .count();
        assert_eq!(glue, 3, "{reply:?}");
    }
    fn nxdomain(reply: &Message, _: usize) {
        assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    }
    fn truncated(reply: &Message, _: usize) {
        assert!(reply.truncated(), "{reply:?}");
    }
    fn many(reply: &Message, _: usize) {
        assert!(!reply.truncated());
        assert_eq!(reply.answers().len(), 40);
    }
    fn big(reply: &Message, len: usize) {
        assert!(!reply.truncated());
        assert_eq!(reply.answers().len(), BIG_SET);
        assert!(len > 1172, "{len} bytes");
    }
    fn mixed_case(reply: &Message, _: usize) {
        assert_eq!(reply.queries()[0].name().to_ascii(), "NoDe1.HoStS.SkYdNs.LoCaL.");
        a(reply, 0);
    }
    fn mixed_case_srv(reply: &Message, len: usize) {
        assert_eq!(reply.queries()[0].name().to_ascii(), "wEb.EaSt.sKyDnS.lOcAl.");
        srv_with_glue(reply, len);
    }
    use RecordType::{A, AAAA, SRV};
    vec![
        case("A", query(0x5301, "node1.hosts.skydns.local.", A, Some(1232)), a),
        case("A without EDNS", query(0x5302, "node1.hosts.skydns.local.", A, None), a),
        case(
            "AAAA",
            query(0x5303, "api2v6.hosts.skydns.local.", AAAA, Some(1232)),
            aaaa,
        ),
        case(
            "SRV with glue",
            query(0x5304, "web.east.skydns.local.", SRV, Some(1232)),
            srv_with_glue,
        ),
        case("NXDOMAIN", query(0x5305, "nope.skydns.local.", A, Some(1232)), nxdomain),
        case("EDNS 512", query(0x5306, "many.skydns.local.", A, Some(512)), truncated),
        case("EDNS 1232", query(0x5307, "many.skydns.local.", A, Some(1232)), many),
        case("EDNS 4096", query(0x5308, "many.skydns.local.", A, Some(4096)), many),
        case(
            "no EDNS, over 512",
            query(0x5309, "many.skydns.local.", A, None),
            truncated,
        ),
        case("EDNS 4096, big", query(0x530a, "big.skydns.local.", A, Some(4096)), big),
        case("EDNS 1232, big", query(0x530b, "big.skydns.local.", A, Some(1232)), big),
        case(
            "0x20",
            query(0x530c, "NoDe1.HoStS.SkYdNs.LoCaL.", A, Some(1232)),
            mixed_case,
        ),
        case(
            "0x20 SRV",
            query(0x530d, "wEb.EaSt.sKyDnS.lOcAl.", SRV, None),
            mixed_case_srv,
        ),
    ]
}

/// The records file and the flags every run shares, in a directory the unprivileged user can
/// read too.
struct Zone {
    dir: tempfile::TempDir,
}

impl Zone {
    fn new() -> Zone {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("records.json"), records()).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(dir.path().join("records.json"), std::fs::Permissions::from_mode(0o644)).unwrap();
        Zone { dir }
    }

    /// Flags for serving `addr`, then `extra`.
    fn args(&self, addr: SocketAddr, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "--records",
            &self.dir.path().join("records.json").to_string_lossy(),
            "--addr",
            &addr.to_string(),
            "--no-rec",
            "--no-pin",
            "--round-robin=false",
            "--drain",
            "100ms",
            "--http-addr",
            HTTP,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }
}

/// A skyline process in the server namespace, killed on drop.
struct Server {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Runs skyline with `args` in the server namespace, behind `wrapper` (a program and its
    /// flags that runs the rest of its command line, or nothing).
    fn spawn(net: &Net, wrapper: &[&str], args: &[String]) -> Server {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &net.server])
            .args(wrapper)
            .arg(env!("CARGO_BIN_EXE_skyline"))
            .args(args)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .env("SKYLINE_RESOLV_CONF", "none")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let lines = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            });
        }
        Server { child, log }
    }

    /// Starts skyline and waits until it serves; fails the test with its log when it exits
    /// first.
    fn start(net: &Net, args: &[String]) -> Server {
        let mut server = Server::spawn(net, &[], args);
        let deadline = Instant::now() + PATIENCE;
        while !server.log_text().contains("listening on udp://") {
            if let Some(status) = server.child.try_wait().unwrap() {
                // The readers may still be copying the last lines.
                std::thread::sleep(Duration::from_millis(100));
                panic!("skyline exited ({status}) instead of serving:\n{}", server.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "skyline did not start serving within {PATIENCE:?}:\n{}",
                server.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        server
    }

    /// Runs skyline until it exits, which it must within [`PATIENCE`]: its status and log.
    fn run_to_exit(net: &Net, wrapper: &[&str], args: &[String]) -> (ExitStatus, String) {
        let mut server = Server::spawn(net, wrapper, args);
        let status = wait_bounded(&mut server.child, PATIENCE, "skyline");
        // The readers end with the pipes; a moment lets them copy the last lines.
        std::thread::sleep(Duration::from_millis(100));
        (status, server.log_text())
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    fn signal(&self, signal: Signal) {
        send_signal(self.child.id(), signal).unwrap();
    }

    /// Sends SIGTERM and waits for the exit; its status.
    fn stop(mut self) -> ExitStatus {
        self.signal(Signal::Terminate);
        wait_bounded(&mut self.child, PATIENCE, "skyline after SIGTERM")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            if let Err(e) = self.child.kill() {
                eprintln!("killing skyline: {e}");
            }
        }
        if let Err(e) = self.child.wait() {
            eprintln!("reaping skyline: {e}");
        }
    }
}

/// Hours since the epoch: what the SOA serial of a zone loaded now is made of.
fn hour() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 3600
}

/// Waits until the AF_XDP counters are `expected` (the workers publish theirs after each
/// batch, so a scrape may come first), failing the test with what they are when they are not
/// within five seconds.
fn counts_reach(net: &Net, expected: XdpCounts, server: &Server) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = net.xdp_counts();
        if now == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "AF_XDP counters {now:?}, expected {expected:?}; log:\n{}",
            server.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Serves the zone on `addr` once through the kernel's sockets and once through AF_XDP, sends
/// the same query bytes to both from the client namespace, and requires the replies to be
/// identical, byte for byte; the counters show that every query and reply of the second run
/// went through the AF_XDP sockets, and those over the MTU through the kernel's UDP socket.
/// The program is attached in `mode` (`auto` is the driver's own hook on veth), which the
/// interface shows as `xdp` or `xdpgeneric`.
fn xdp_answers_as_the_kernel_path(tag: &str, addr: SocketAddr, mtu: u32, mode: &str) {
    if !namespaces_usable() {
        return;
    }
    let net = Net::new(tag, mtu);
    let zone = Zone::new();
    let queries = queries();
    let ops: Vec<Op> = queries.iter().map(|c| Op::Udp(addr, c.query.clone())).collect();
    // An hour that turns between the two runs changes the SOA serial: one more try then.
    for attempt in 0.. {
        let started = hour();
        let kernel = Server::start(&net, &zone.args(addr, &[]));
        let metrics = net.metrics();
        assert!(
            !metrics.contains("skyline_xdp_"),
            "no AF_XDP series without --xdp:\n{metrics}"
        );
        let by_kernel = net.client(&ops);
        assert!(kernel.stop().success());

        let xdp = Server::start(&net, &zone.args(addr, &["--xdp", IFACE, "--xdp-mode", mode]));
        let shown = if mode == "generic" { "xdpgeneric" } else { "xdp" };
        let link = net.link();
        assert!(
            link.lines()
                .next()
                .unwrap()
                .split_whitespace()
                .any(|word| word == shown),
            "attached as {shown}:\n{link}"
        );
        let metrics = net.metrics();
        for queue in 0..2 {
            let series = format!("skyline_xdp_zero_copy{{queue=\"{queue}\"}}");
            assert_eq!(metric_value(&metrics, &series), Some(0.0), "veth copies:\n{metrics}");
        }
        let before = XdpCounts::of(&metrics);
        let by_xdp = net.client(&ops);
        let ip_udp = if addr.is_ipv4() { 28 } else { 48 };
        let over_mtu = by_kernel.iter().filter(|r| r.len() + ip_udp > mtu as usize).count() as u64;
        let expected = XdpCounts {
            received: before.received + queries.len() as u64,
            sent: before.sent + queries.len() as u64 - over_mtu,
            sent_by_kernel: before.sent_by_kernel + over_mtu,
            dropped: 0,
        };
        counts_reach(&net, expected, &xdp);
        drop(xdp);
        if hour() != started && attempt == 0 {
            continue;
        }
        for ((case, kernel), xdp) in queries.iter().zip(&by_kernel).zip(&by_xdp) {
            let what = case.what;
            let reply = Message::from_vec(kernel).unwrap_or_else(|e| panic!("{what}: {e}"));
            (case.check)(&reply, kernel.len());
            assert_eq!(
                hex(xdp),
                hex(kernel),
                "{what}: the AF_XDP reply differs from the kernel path's"
            );
        }
        if mtu < 1500 {
            assert!(over_mtu > 0, "some replies are larger than the {mtu}-byte MTU");
        } else {
            assert_eq!(over_mtu, 0);
        }
        return;
    }
}

#[test]
fn answers_over_xdp_are_the_kernel_paths_over_ipv4() {
    xdp_answers_as_the_kernel_path("same4", v4(53), 1500, "auto");
}

#[test]
fn answers_over_xdp_are_the_kernel_paths_over_ipv6() {
    xdp_answers_as_the_kernel_path("same6", v6(53), 1500, "auto");
}

/// The generic hook, after the kernel has built its packet buffer: the other way frames reach
/// the sockets (copied), and the one every interface has.
#[test]
fn answers_over_xdp_in_generic_mode_are_the_kernel_paths() {
    xdp_answers_as_the_kernel_path("gen6", v6(53), 1500, "generic");
}

/// With a 1200-byte MTU, the 1213-byte replies leave through the kernel's UDP socket (which
/// fragments them), still the same bytes.
#[test]
fn replies_over_the_mtu_leave_through_the_kernel_and_are_the_same() {
    xdp_answers_as_the_kernel_path("mtu", v4(53), 1200, "auto");
}

/// While skyline serves UDP through AF_XDP, everything else to its address stays with the
/// kernel: ICMP echo, DNS over TCP, UDP to another port (port unreachable), and the neighbour
/// discovery every one of them needs first.
fn kernel_traffic_passes(tag: &str, addr: SocketAddr) {
    if !namespaces_usable() {
        return;
    }
    let net = Net::new(tag, 1500);
    let zone = Zone::new();
    let xdp = Server::start(&net, &zone.args(addr, &["--xdp", IFACE]));
    assert!(net.attached(), "{}", net.link());
    let a = query(0x5401, "node1.hosts.skydns.local.", RecordType::A, Some(1232));
    let other_port = SocketAddr::new(addr.ip(), 54);
    let before = net.xdp_counts();
    let results = net.client(&[
        Op::Ping(SERVER_V4.parse().unwrap()),
        Op::Ping(SERVER_V6.parse().unwrap()),
        Op::Tcp(addr, a.clone()),
        Op::Refused(other_port),
        Op::Udp(addr, a.clone()),
    ]);
    let tcp = Message::from_vec(&results[2]).unwrap();
    assert_eq!(tcp.id(), 0x5401);
    assert_eq!(
        common::a_of(&tcp),
        ["10.0.0.101".parse::<std::net::Ipv4Addr>().unwrap()]
    );
    // The same answer over UDP, through AF_XDP; the TCP query did not pass through it.
    assert_eq!(Message::from_vec(&results[4]).unwrap().answers(), tcp.answers());
    let expected = XdpCounts {
        received: before.received + 1,
        sent: before.sent + 1,
        ..before
    };
    counts_reach(&net, expected, &xdp);
    let metrics = net.metrics();
    assert_eq!(
        metric_sum(&metrics, "coredns_dns_requests_total", &["proto=\"tcp\""]),
        Some(1.0)
    );
    assert_eq!(
        metric_sum(&metrics, "coredns_dns_requests_total", &["proto=\"udp\""]),
        Some(1.0)
    );
}

#[test]
fn ping_tcp_and_other_ports_stay_with_the_kernel_over_ipv4() {
    kernel_traffic_passes("kern4", v4(53));
}

#[test]
fn ping_tcp_and_other_ports_stay_with_the_kernel_over_ipv6() {
    kernel_traffic_passes("kern6", v6(53));
}

/// The program goes with the process however it ends: SIGKILL (the kernel closes the BPF link)
/// and SIGTERM (skyline drains and detaches); each time the next skyline can attach again.
#[test]
fn no_program_stays_attached_after_sigkill_or_sigterm() {
    if !namespaces_usable() {
        return;
    }
    let net = Net::new("detach", 1500);
    let zone = Zone::new();
    let args = zone.args(v4(53), &["--xdp", IFACE]);
    assert!(!net.attached(), "{}", net.link());

    let mut killed = Server::start(&net, &args);
    assert!(net.attached(), "{}", net.link());
    killed.signal(Signal::Kill);
    let status = wait_bounded(&mut killed.child, PATIENCE, "skyline after SIGKILL");
    assert_eq!(status.signal(), Some(SIGKILL), "{status}");
    eventually(PATIENCE, "no XDP program after SIGKILL", || !net.attached());

    let terminated = Server::start(&net, &args);
    assert!(net.attached(), "attached again after SIGKILL:\n{}", net.link());
    let a = query(0x5501, "node1.hosts.skydns.local.", RecordType::A, None);
    let reply = net.client(&[Op::Udp(v4(53), a)]);
    assert_eq!(common::a_of(&Message::from_vec(&reply[0]).unwrap()).len(), 1);
    let log = Arc::clone(&terminated.log);
    let status = terminated.stop();
    assert!(status.success(), "{status}");
    assert!(!net.attached(), "still attached after SIGTERM:\n{}", net.link());
    std::thread::sleep(Duration::from_millis(100));
    let log = log.lock().unwrap().join("\n");
    assert!(log.contains("AF_XDP detached"), "{log}");
}

/// Runs skyline with `args` (behind `wrapper`) in the server namespace of `net`, expecting it
/// to refuse to start, and returns its log.
fn refused_start(net: &Net, wrapper: &[&str], args: &[String]) -> String {
    let (status, log) = Server::run_to_exit(net, wrapper, args);
    assert!(!status.success(), "skyline started:\n{log}");
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(!log.contains("listening on"), "{log}");
    log
}

#[test]
fn an_unknown_interface_is_named() {
    if !namespaces_usable() {
        return;
    }
    let net = Net::new("unknown", 1500);
    let zone = Zone::new();
    let log = refused_start(&net, &[], &zone.args(v4(53), &["--xdp", "nosuch0"]));
    assert!(log.contains("no network interface is named \"nosuch0\""), "{log}");
}

#[test]
fn a_second_skyline_on_the_interface_is_refused_as_busy() {
    if !namespaces_usable() {
        return;
    }
    let net = Net::new("busy", 1500);
    let zone = Zone::new();
    let first = Server::start(&net, &zone.args(v4(53), &["--xdp", IFACE]));
    let mut second = zone.args(v4(5353), &["--xdp", IFACE]);
    // The first one's metrics port.
    let http = second.iter().position(|a| a == HTTP).unwrap();
    second[http] = "127.0.0.1:9154".to_owned();
    let log = refused_start(&net, &[], &second);
    assert!(log.contains("vs already has an XDP program attached"), "{log}");
    // The first one still answers through AF_XDP.
    let before = net.xdp_counts();
    let a = query(0x5601, "node1.hosts.skydns.local.", RecordType::A, None);
    net.client(&[Op::Udp(v4(53), a)]);
    let expected = XdpCounts {
        received: before.received + 1,
        sent: before.sent + 1,
        ..before
    };
    counts_reach(&net, expected, &first);
}

#[test]
fn more_workers_than_queues_are_refused() {
    if !namespaces_usable() {
        return;
    }
    let net = Net::new("workers", 1500);
    let zone = Zone::new();
    let log = refused_start(&net, &[], &zone.args(v4(53), &["--xdp", IFACE, "--workers", "3"]));
    assert!(
        log.contains("--workers 3 is more than the 2 receive queues of vs"),
        "{log}"
    );
    assert!(!net.attached(), "{}", net.link());
}

#[test]
fn an_unspecified_address_is_refused() {
    if !namespaces_usable() {
        return;
    }
    let net = Net::new("any", 1500);
    let zone = Zone::new();
    let log = refused_start(&net, &[], &zone.args("0.0.0.0:53".parse().unwrap(), &["--xdp", IFACE]));
    assert!(
        log.contains("--xdp vs needs --addr set to an IP address of vs (not 0.0.0.0:53)"),
        "{log}"
    );
    assert!(!net.attached(), "{}", net.link());
}

/// Queries to an address of another interface (the loopback's here) never arrive on the XDP
/// interface: a program there would steer none of them.
#[test]
fn an_address_of_another_interface_is_refused() {
    if !namespaces_usable() {
        return;
    }
    let net = Net::new("other", 1500);
    let zone = Zone::new();
    let log = refused_start(
        &net,
        &[],
        &zone.args("127.0.0.1:53".parse().unwrap(), &["--xdp", IFACE]),
    );
    assert!(
        log.contains("--xdp vs needs --addr set to an IP address of vs (not 127.0.0.1:53)"),
        "{log}"
    );
    assert!(!net.attached(), "{}", net.link());
}

/// Without privileges skyline names the capabilities XDP needs. The unprivileged user serves
/// an unprivileged port, so that it is XDP that is refused, not the port.
#[test]
fn missing_capabilities_are_named() {
    if !namespaces_usable() || !tool("setpriv", "util-linux") {
        return;
    }
    let net = Net::new("caps", 1500);
    let zone = Zone::new();
    let nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ];
    let mut args = zone.args(v4(5353), &["--xdp", IFACE]);
    let http = args.iter().position(|a| a == HTTP).unwrap();
    args[http] = "127.0.0.1:9154".to_owned();
    let log = refused_start(&net, &nobody, &args);
    assert!(log.contains("CAP_NET_ADMIN") && log.contains("CAP_BPF"), "{log}");
    assert!(!net.attached(), "{}", net.link());
}

/// `--xdp-fallback`: an interface that is not there is a warning, and skyline serves on its
/// kernel sockets.
#[test]
fn fallback_serves_on_kernel_sockets_with_a_warning() {
    if !namespaces_usable() {
        return;
    }
    let net = Net::new("fallback", 1500);
    let zone = Zone::new();
    let server = Server::start(&net, &zone.args(v4(53), &["--xdp", "nosuch0", "--xdp-fallback"]));
    let log = server.log_text();
    let warning = log
        .lines()
        .find(|line| line.contains("WARN") && line.contains("--xdp-fallback"))
        .unwrap_or_else(|| panic!("no warning:\n{log}"));
    assert!(
        warning.contains(r#"no network interface is named "nosuch0""#),
        "{warning}"
    );
    assert!(!net.attached(), "{}", net.link());
    let a = query(0x5701, "node1.hosts.skydns.local.", RecordType::A, Some(1232));
    let reply = net.client(&[Op::Udp(v4(53), a)]);
    assert_eq!(common::a_of(&Message::from_vec(&reply[0]).unwrap()).len(), 1);
    let metrics = net.metrics();
    assert!(!metrics.contains("skyline_xdp_"), "{metrics}");
    assert_eq!(
        metric_sum(&metrics, "coredns_dns_requests_total", &["proto=\"udp\""]),
        Some(1.0)
    );
}

/// An in-place upgrade (SIGUSR2) under load hands the AF_XDP sockets to the new process: a
/// client sending queries in bursts of ten all along gets every answer, the program stays
/// attached throughout, and afterwards the new process answers through AF_XDP (its counters
/// count the queries), not on kernel sockets.
#[test]
fn an_upgrade_under_load_hands_af_xdp_over_and_loses_nothing() {
    if !namespaces_usable() {
        return;
    }
    let net = Net::new("upgrade", 1500);
    let zone = Zone::new();
    let pid_file = zone.dir.path().join("skyline.pid");
    let mut args = zone.args(v4(53), &["--xdp", IFACE, "--pid-file"]);
    args.push(pid_file.to_string_lossy().into_owned());
    let mut old = Server::start(&net, &args);
    let pid = |what: &str| -> u32 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|text| text.trim().parse().ok())
            {
                return pid;
            }
            assert!(Instant::now() < deadline, "no PID file: {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    assert_eq!(pid("the first process"), old.child.id());
    assert!(net.attached(), "{}", net.link());
    let a = query(0x5801, "node1.hosts.skydns.local.", RecordType::A, None);
    let client = {
        let client_ns = net.client.clone();
        let a = a.clone();
        std::thread::spawn(move || run_child(&client_ns, &[Op::Load(v4(53), a, 3000)]))
    };
    std::thread::sleep(Duration::from_millis(1000));
    old.signal(Signal::User2);
    let deadline = Instant::now() + PATIENCE;
    let new = loop {
        let now = pid("the upgrade");
        if now != old.child.id() {
            break now;
        }
        assert!(Instant::now() < deadline, "no new process; log:\n{}", old.log_text());
        std::thread::sleep(Duration::from_millis(10));
    };
    // Killed at the end however the test ends: it is not this test's child.
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = send_signal(self.0, Signal::Kill);
        }
    }
    let _new = Kill(new);
    let status = wait_bounded(&mut old.child, PATIENCE, "the old process after the upgrade");
    assert!(status.success(), "the old process exits 0: {status}");
    let result = client.join().unwrap().remove(0);
    let sent = u64::from_be_bytes(result[..8].try_into().unwrap());
    let answered = u64::from_be_bytes(result[8..].try_into().unwrap());
    let log = old.log_text();
    eprintln!("load: {sent} sent, {answered} answered");
    assert!(sent > 1_000, "the load ran: {sent} sent");
    assert_eq!(answered, sent, "queries lost across the upgrade; log:\n{log}");
    assert!(net.attached(), "the program stays attached:\n{}", net.link());
    for expected in [
        "AF_XDP taken over from the replaced process",
        "AF_XDP socket handed over",
    ] {
        assert!(log.contains(expected), "{expected:?} is logged:\n{log}");
    }
    assert!(!log.contains("--xdp-fallback"), "{log}");
    // The new process's counters are its own: the queries it took over and answered through
    // AF_XDP, and from now on every query.
    let before = net.xdp_counts();
    assert!(before.received > 0 && before.received == before.sent, "{before:?}");
    let metrics = net.metrics();
    assert_eq!(
        metric_sum(&metrics, "coredns_dns_requests_total", &["proto=\"udp\""]),
        Some(before.received as f64),
        "every UDP query the new process answered came through AF_XDP:\n{metrics}"
    );
    let reply = net.client(&[Op::Udp(v4(53), a)]);
    assert_eq!(common::a_of(&Message::from_vec(&reply[0]).unwrap()).len(), 1);
    let expected = XdpCounts {
        received: before.received + 1,
        sent: before.sent + 1,
        ..before
    };
    counts_reach(&net, expected, &old);
}
