//! Harness for end-to-end tests: runs the real `skyline` binary on 127.0.0.1 with an ephemeral
//! port and a records file in a temp dir, and queries it with hickory-proto (an independent DNS
//! implementation) over real UDP and TCP sockets, or with `dig`.

#![allow(dead_code)]

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};
use skyline_dataplane::sys::{send_signal, Signal};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A port of 127.0.0.1 that is free for both TCP and UDP, for a server a test starts on a port
/// it names (etcd, knotd, a fake API server).
///
/// It comes from outside the kernel's ephemeral range, so no connection made meanwhile (etcd's
/// members dialling each other, a client dialling the very port) can take it before the server
/// binds it; a cursor shared by the process keeps two tests of one binary off the same port.
pub fn free_port() -> u16 {
    static CURSOR: AtomicU32 = AtomicU32::new(0);
    let (low, high) = outside_ephemeral_range();
    let span = u32::from(high - low) + 1;
    let start = std::process::id().wrapping_mul(2_654_435_761) % span;
    for _ in 0..span {
        let port = low + ((start + CURSOR.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, port));
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, port));
        if tcp.is_ok() && udp.is_ok() {
            return port;
        }
    }
    panic!("no free port of 127.0.0.1 in {low}..={high}");
}

/// The larger of the port ranges below and above the kernel's ephemeral one.
fn outside_ephemeral_range() -> (u16, u16) {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut bounds = range.split_whitespace().filter_map(|b| b.parse::<u16>().ok());
    let (first, last) = (bounds.next().unwrap_or(32768), bounds.next().unwrap_or(60999));
    if first.saturating_sub(1024) >= u16::MAX - last {
        (1024, first - 1)
    } else {
        (last + 1, u16::MAX)
    }
}

/// A running skyline process, killed on drop.
pub struct Skyline {
    child: Child,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Skyline {
    /// Starts skyline serving `records` (a JSON records file) with extra flags and environment.
    pub fn start(records: &str, args: &[&str], env: &[(&str, &str)]) -> Skyline {
        Skyline::start_at("127.0.0.1:0", records, args, env)
    }

    /// As [`Skyline::start`], on `addr`: another process's port too, which both serve when
    /// this one is given `--reuse-port` (without it, the start fails).
    pub fn start_at(addr: &str, records: &str, args: &[&str], env: &[(&str, &str)]) -> Skyline {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.json");
        std::fs::write(&path, records).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_skyline"));
        cmd.arg("--addr")
            .arg(addr)
            .arg("--records")
            .arg(&path)
            .args(["--workers", "2", "--no-pin"]);
        // No upstream unless a test names one: the host's resolv.conf must not decide what a
        // test sees for names outside the domain (`none` reads no file).
        cmd.args(args)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .env("SKYLINE_RESOLV_CONF", "none");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let (tx, rx) = mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = bound_address(&line) {
                    let _ = tx.send(addr);
                }
                lines.lock().unwrap().push(line);
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "skyline did not report its address; log:\n{}",
                    log.lock().unwrap().join("\n")
                );
            }
        };
        Skyline { child, addr, dir, log }
    }

    /// Path of the records file, to rewrite it.
    pub fn records_path(&self) -> PathBuf {
        self.dir.path().join("records.json")
    }

    /// Replaces the records file atomically (write aside, rename).
    pub fn rewrite(&self, records: &str) {
        let tmp = self.dir.path().join("records.json.tmp");
        std::fs::write(&tmp, records).unwrap();
        std::fs::rename(&tmp, self.records_path()).unwrap();
    }

    /// Sends SIGHUP (reload), from this process: no `kill` program is needed.
    pub fn hup(&self) {
        let pid = self.child.id();
        if let Err(e) = send_signal(pid, Signal::Hangup) {
            panic!("sending SIGHUP to skyline ({pid}) failed: {e}");
        }
    }

    /// Sends SIGTERM (stop, after draining).
    pub fn terminate(&self) {
        let pid = self.child.id();
        if let Err(e) = send_signal(pid, Signal::Terminate) {
            panic!("sending SIGTERM to skyline ({pid}) failed: {e}");
        }
    }

    /// Waits up to `limit` for the process to exit; its status, or `None` if still running.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting on skyline") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Queries over UDP with EDNS(1232) and returns the parsed reply.
    pub fn udp(&self, name: &str, rtype: RecordType) -> Message {
        udp_query(self.addr, &query(name, rtype, Some(1232)))
    }

    /// Queries over UDP without EDNS (512-byte limit).
    pub fn udp_plain(&self, name: &str, rtype: RecordType) -> Message {
        udp_query(self.addr, &query(name, rtype, None))
    }

    /// Queries over TCP.
    pub fn tcp(&self, name: &str, rtype: RecordType) -> Message {
        tcp_query(self.addr, &query(name, rtype, Some(1232)))
    }

    /// Queries over UDP with EDNS(1232) from `local`, an address of 127.0.0.0/8: one test acts
    /// as many clients.
    pub fn udp_from(&self, local: std::net::Ipv4Addr, name: &str, rtype: RecordType) -> Message {
        udp_query_from(local, self.addr, &query(name, rtype, Some(1232)))
    }

    /// Queries over TCP from `local`, an address of 127.0.0.0/8.
    pub fn tcp_from(&self, local: std::net::Ipv4Addr, name: &str, rtype: RecordType) -> Message {
        let q = query(name, rtype, Some(1232));
        let mut stream = tcp_connect_from(local, self.addr, Duration::from_secs(5)).unwrap();
        tcp_send(&mut stream, &q.to_vec().unwrap()).unwrap();
        let reply = tcp_recv(&mut stream).expect("a TCP reply");
        let reply = Message::from_vec(&reply).expect("hickory parses the reply");
        assert_eq!(reply.id(), q.id());
        reply
    }

    /// Process log so far.
    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Skyline {
    fn drop(&mut self) {
        stop_child(&mut self.child, "skyline");
    }
}

/// Kills and reaps a fixture's child process (`what` names it in the report). For `Drop`: a
/// failure is printed, never a panic, since a panic in a `Drop` that runs while a failed test
/// unwinds aborts the whole test binary and with it every other test.
pub fn stop_child(child: &mut Child, what: &str) {
    let pid = child.id();
    if let Err(e) = child.kill() {
        eprintln!("killing {what} ({pid}) failed: {e}");
    }
    if let Err(e) = child.wait() {
        eprintln!("reaping {what} ({pid}) failed: {e}");
    }
}

fn bound_address(line: &str) -> Option<SocketAddr> {
    let at = line.find("udp://")? + "udp://".len();
    let rest = &line[at..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '\u{1b}' || c == ',')
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Builds a query message with a random ID.
pub fn query(name: &str, rtype: RecordType, edns: Option<u16>) -> Message {
    let mut m = Message::new();
    m.set_id(rand_id())
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
    if let Some(size) = edns {
        let mut e = Edns::new();
        e.set_max_payload(size);
        m.set_edns(e);
    }
    m
}

fn rand_id() -> u16 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now()) as u16
}

/// Sends `q` over UDP and waits (bounded) for the reply with its ID.
pub fn udp_query(addr: SocketAddr, q: &Message) -> Message {
    udp_query_from(std::net::Ipv4Addr::LOCALHOST, addr, q)
}

/// Sends `q` over UDP from a socket bound to `local` and waits (bounded) for the reply.
pub fn udp_query_from(local: std::net::Ipv4Addr, addr: SocketAddr, q: &Message) -> Message {
    let sock = UdpSocket::bind(SocketAddr::from((local, 0))).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let bytes = q.to_vec().unwrap();
    let mut buf = vec![0u8; 65535];
    for _ in 0..3 {
        sock.send_to(&bytes, addr).unwrap();
        if let Ok((n, _)) = sock.recv_from(&mut buf) {
            let reply = Message::from_vec(&buf[..n]).expect("hickory parses the reply");
            assert_eq!(reply.id(), q.id());
            return reply;
        }
    }
    panic!("no UDP reply from {addr} to {local}");
}

/// Sends `q` over a new TCP connection and reads one reply.
pub fn tcp_query(addr: SocketAddr, q: &Message) -> Message {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let bytes = q.to_vec().unwrap();
    let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&bytes);
    s.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).unwrap();
    let reply = Message::from_vec(&buf).expect("hickory parses the reply");
    assert_eq!(reply.id(), q.id());
    reply
}

/// Whether the external program `name` is on `PATH`; `package` is the Debian package that has
/// it, for the message. Under CI=true a missing program is a failure, not a skip.
pub fn tool(name: &str, package: &str) -> bool {
    let found = find_on_path(name).is_some();
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{name} is required under CI=true; scripts/setup.sh test installs it (Debian package {package})");
        }
        eprintln!("skipping: {name} is not on PATH (Debian package {package}; scripts/setup.sh test installs it)");
    }
    found
}

/// The first executable file called `name` in the directories of `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|file| std::fs::metadata(file).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Set in the environment of a test binary that [`rerun_with_empty_path`] started.
const EMPTY_PATH_RUN: &str = "SKYLINE_TEST_EMPTY_PATH";

/// Runs the test `name` of this test binary again, alone, in a child process whose `PATH` is an
/// empty directory, and fails when it fails there: whatever it does must need no program found
/// on `PATH` (such as `kill`, which a minimal system lacks). Returns `true` in that child, where
/// the caller then does the test's work, and `false` in the caller's own run, once the child
/// passed.
pub fn rerun_with_empty_path(name: &str) -> bool {
    if std::env::var_os(EMPTY_PATH_RUN).is_some() {
        return true;
    }
    let empty = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap());
    child.env("PATH", empty.path()).env(EMPTY_PATH_RUN, "1");
    rerun_alone(child, name, "with an empty PATH");
    false
}

/// Runs `child`, this test binary given the arguments that run the test `name` alone, and
/// fails unless the test ran there and passed; returns what it printed.
fn rerun_alone(mut child: Command, name: &str, place: &str) -> String {
    let out = child
        .args(["--exact", name, "--test-threads=1", "--nocapture"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} failed {place}:\n{text}");
    assert!(text.contains("1 passed"), "{name} did not run {place}:\n{text}");
    text
}

/// Runs `dig` against skyline and returns its short output lines.
pub fn dig(addr: SocketAddr, args: &[&str]) -> Vec<String> {
    let out = Command::new("dig")
        .arg(format!("@{}", addr.ip()))
        .arg("-p")
        .arg(addr.port().to_string())
        .args(["+time=2", "+tries=2"])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Sends `bytes` as one UDP datagram from a fresh socket and waits up to `wait` for one reply.
/// `None` means no reply came: what a dropped message looks like from outside.
pub fn udp_raw(addr: SocketAddr, bytes: &[u8], wait: Duration) -> Option<Vec<u8>> {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(wait)).unwrap();
    sock.send_to(bytes, addr).unwrap();
    let mut buf = vec![0u8; 65535];
    match sock.recv_from(&mut buf) {
        Ok((n, _)) => Some(buf[..n].to_vec()),
        Err(_) => None,
    }
}

/// Opens a TCP connection from `local`, any address of 127.0.0.0/8, so that one test can act
/// as many clients; reads time out after `wait`. Fails when the connection is not set up within
/// two seconds.
pub fn tcp_connect_from(local: std::net::Ipv4Addr, addr: SocketAddr, wait: Duration) -> std::io::Result<TcpStream> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from((local, 0)))?;
        match tokio::time::timeout(Duration::from_secs(2), socket.connect(addr)).await {
            Ok(connected) => connected?.into_std(),
            Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
        }
    })?;
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(wait))?;
    Ok(stream)
}

/// Writes one message with its 2-byte length prefix (RFC 1035 §4.2.2).
pub fn tcp_send(stream: &mut TcpStream, message: &[u8]) -> std::io::Result<()> {
    let mut framed = (message.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(message);
    stream.write_all(&framed)
}

/// Reads one length-prefixed message; `None` when the connection closed or the read timed out
/// first.
pub fn tcp_recv(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).ok()?;
    let mut message = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut message).ok()?;
    Some(message)
}

/// Whether the peer closed the connection within the stream's read timeout: a read returns end
/// of file or a reset. Any data arriving first counts as not closed.
pub fn tcp_closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
        ),
    }
}

impl Skyline {
    /// Starts skyline with no records file, its data source chosen by `args` (etcd with
    /// `--machines`), on 127.0.0.1 with an ephemeral port and two unpinned workers.
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Skyline {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_skyline"));
        cmd.arg("--addr")
            .arg("127.0.0.1:0")
            .args(["--workers", "2", "--no-pin"]);
        cmd.args(args).env("NO_COLOR", "1").env("RUST_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let (tx, rx) = mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = bound_address(&line) {
                    let _ = tx.send(addr);
                }
                lines.lock().unwrap().push(line);
            }
        });
        let Ok(addr) = rx.recv_timeout(Duration::from_secs(20)) else {
            let _ = child.kill();
            panic!(
                "skyline did not report its address; log:\n{}",
                log.lock().unwrap().join("\n")
            );
        };
        Skyline { child, addr, dir, log }
    }

    /// The address of the HTTP endpoints, from the `http on http://ADDR` log line (started with
    /// [`HTTP_ANY_PORT`], the port is the kernel's choice). The line follows the DNS one, so it
    /// is waited for.
    pub fn http_addr(&self) -> SocketAddr {
        let find = || {
            self.log.lock().unwrap().iter().find_map(|line| {
                let at = line.find("http on http://")? + "http on http://".len();
                line[at..].split_whitespace().next()?.parse().ok()
            })
        };
        eventually(Duration::from_secs(10), "skyline reports its HTTP address", || {
            find().is_some()
        });
        find().unwrap()
    }

    /// The process ID, e.g. to read its memory use from `/proc`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How many log lines so far contain `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        self.log.lock().unwrap().iter().filter(|l| l.contains(needle)).count()
    }
}

/// Flags that serve the HTTP endpoints on 127.0.0.1 with an ephemeral port; see
/// [`Skyline::http_addr`].
pub const HTTP_ANY_PORT: [&str; 2] = ["--http-addr", "127.0.0.1:0"];

/// Polls `check` every 20 ms until it holds, failing the test with `what` after `limit`.
pub fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return;
        }
        if Instant::now() >= deadline {
            panic!("not within {limit:?}: {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a test that makes network namespaces can run here: root, and each `(program,
/// Debian package)` on `PATH` or in an sbin directory. Under CI=true a missing one fails the
/// test; elsewhere it is skipped with a message.
pub fn can_use_namespaces(programs: &[(&str, &str)]) -> bool {
    let missing = |what: &str| {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{what} is required under CI=true");
        }
        eprintln!("skipping: {what} is missing");
        false
    };
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    });
    if !root {
        return missing("root (network namespaces)");
    }
    for (program, package) in programs {
        let found = find_on_path(program).is_some()
            || ["/usr/sbin", "/sbin"]
                .iter()
                .any(|d| std::path::Path::new(d).join(program).exists());
        if !found {
            return missing(&format!("{program} (Debian package {package})"));
        }
    }
    true
}

/// The addresses of a reply's A records, in order.
pub fn a_of(reply: &Message) -> Vec<std::net::Ipv4Addr> {
    reply
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            Some(hickory_proto::rr::RData::A(a)) => Some(a.0),
            _ => None,
        })
        .collect()
}

/// `GET path` over plain HTTP/1.1: the status code and the body, or `None` when nothing
/// answers.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: skyline\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// The sum of the samples of `metric` in `/metrics` text whose labels include every pair of
/// `filter` (written `name="value"`), as `sum(metric{filter})` would compute it; `None` when
/// no sample matches.
pub fn metric_sum(metrics: &str, metric: &str, filter: &[&str]) -> Option<f64> {
    let mut sum = None;
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let labels: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
        if name == metric && filter.iter().all(|pair| labels.contains(pair)) {
            *sum.get_or_insert(0.0) += value.parse::<f64>().ok()?;
        }
    }
    sum
}

/// The value of the series `series` (name and labels, as written) in `/metrics` text.
pub fn metric_value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A named network namespace, removed on drop, even when the test fails.
pub struct Namespace(pub String);

impl Namespace {
    /// A fresh namespace named after `prefix`, this process and a counter.
    pub fn new(prefix: &str) -> Namespace {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let out = Command::new("ip").args(["netns", "add", &name]).output().unwrap();
        assert!(
            out.status.success(),
            "ip netns add: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Namespace(name)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// Runs the test `name` of this binary again, alone, in a namespace of its own with `marker`
/// set in its environment: true in there (loopback up; the body runs), false outside once the
/// run inside passed, or when `can_run` says the test cannot run here.
pub fn inside_a_namespace(name: &str, marker: &str, can_run: fn() -> bool) -> bool {
    if std::env::var_os(marker).is_some() {
        let out = Command::new("ip").args(["link", "set", "lo", "up"]).output().unwrap();
        assert!(out.status.success(), "ip link set lo up");
        return true;
    }
    if !can_run() {
        return false;
    }
    let ns = Namespace::new("skyline-test");
    let mut child = Command::new("ip");
    child
        .args(["netns", "exec", &ns.0])
        .arg(std::env::current_exe().unwrap())
        .env(marker, "1");
    eprintln!("{}", rerun_alone(child, name, "in its namespace"));
    false
}
