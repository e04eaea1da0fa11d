//! End-to-end tests of the in-place upgrade (SIGUSR2) on the real binary, under load: a UDP
//! sender and TCP clients on a kept connection and on fresh ones ask all along, and every query
//! must be answered across an upgrade and across a failed one. The binary runs from a copy in a
//! temporary directory, so that a test can put a broken binary at its path. DNS is asked with
//! hickory-proto, `/ready` over plain HTTP/1.1.

mod common;

use common::{query, tcp_recv, tcp_send};
use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;
use skyline_dataplane::sys::{send_signal, Signal};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.0.0.1"}}"#;

/// Held by each test for its whole run. A test writes binaries, and a process forked meanwhile
/// by another test's thread inherits the open file until it execs, making a start of that
/// binary fail with "text file busy"; one test at a time avoids it.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// skyline run from a copy of its binary, with a PID file and the HTTP endpoints.
struct Upgradable {
    child: Child,
    dir: tempfile::TempDir,
    addr: SocketAddr,
    http: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Upgradable {
    fn start() -> Upgradable {
        let dir = tempfile::tempdir().unwrap();
        install(&dir.path().join("skyline"), Path::new(env!("CARGO_BIN_EXE_skyline")));
        std::fs::write(dir.path().join("records.json"), RECORDS).unwrap();
        let mut child = Command::new(dir.path().join("skyline"))
            .args([
                "--addr",
                "127.0.0.1:0",
                "--http-addr",
                "127.0.0.1:0",
                "--workers",
                "2",
                "--no-pin",
            ])
            .args(["--no-rec", "--drain", "0s", "--records"])
            .arg(dir.path().join("records.json"))
            .arg("--pid-file")
            .arg(dir.path().join("skyline.pid"))
            .env("NO_COLOR", "1")
            .env("SKYLINE_RESOLV_CONF", "none")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&log);
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut s = Upgradable {
            child,
            dir,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            http: SocketAddr::from(([0, 0, 0, 0], 0)),
            log,
        };
        s.addr = s.wait_for_address("udp://");
        s.http = s.wait_for_address("http on http://");
        s.wait_until(Duration::from_secs(10), "the PID file is written", |s| {
            s.pid().is_some()
        });
        s
    }

    /// The address logged after `marker`.
    fn wait_for_address(&self, marker: &str) -> SocketAddr {
        let mut found = None;
        self.wait_until(Duration::from_secs(20), marker, |s| {
            found = s.log.lock().unwrap().iter().find_map(|line| {
                let at = line.find(marker)? + marker.len();
                line[at..]
                    .split(|c: char| c.is_whitespace() || c == ',')
                    .next()?
                    .parse()
                    .ok()
            });
            found.is_some()
        });
        found.unwrap()
    }

    fn wait_until(&self, limit: Duration, what: &str, mut check: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + limit;
        while !check(self) {
            assert!(
                Instant::now() < deadline,
                "not within {limit:?}: {what}; log:\n{}",
                self.log.lock().unwrap().join("\n")
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The PID the PID file names.
    fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.path().join("skyline.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    fn logged(&self, text: &str) -> bool {
        self.log.lock().unwrap().iter().any(|line| line.contains(text))
    }

    fn upgrade(&self) {
        send_signal(self.pid().unwrap(), Signal::User2).unwrap();
    }
}

impl Drop for Upgradable {
    fn drop(&mut self) {
        // The serving process may be the first one's child, reparented: stop it by its PID.
        if let Some(pid) = self.pid().filter(|&pid| pid != self.child.id()) {
            if let Err(e) = send_signal(pid, Signal::Kill) {
                eprintln!("killing skyline ({pid}) failed: {e}");
            }
        }
        common::stop_child(&mut self.child, "skyline");
    }
}

/// Puts a copy of `from` at `to` the way a package upgrade does: beside it, then renamed over.
fn install(to: &Path, from: &Path) {
    let aside = to.with_extension("new");
    std::fs::copy(from, &aside).unwrap();
    std::fs::rename(&aside, to).unwrap();
}

/// A broken binary at `to`: it exits at once with a failure.
fn install_broken(to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let aside: PathBuf = to.with_extension("new");
    std::fs::write(&aside, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&aside, to).unwrap();
}

/// What the load saw.
#[derive(Debug, Default)]
struct Seen {
    udp_sent: usize,
    udp_answered: usize,
    tcp_asked: usize,
    tcp_reconnects: usize,
    tcp_failed: Vec<String>,
}

/// Asks all along until `stop`: UDP in bursts of ten, a kept TCP connection every 5 ms and a
/// fresh connection every 20 ms; every reply must carry its query's ID. The kept connection
/// behaves as DNS clients over TCP do (RFC 7766): a connection the server has closed is opened
/// again and the query asked once more on it, which is no loss; a query that fails twice is.
fn load(addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Seen> {
    std::thread::spawn(move || {
        let mut seen = Seen::default();
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        let mut kept = TcpStream::connect(addr).unwrap();
        kept.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut pending = HashSet::new();
        let mut id: u16 = 0;
        let mut last_tcp = Instant::now();
        let mut last_fresh = Instant::now();
        let mut buf = [0u8; 512];
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..10 {
                id = id.wrapping_add(1);
                let mut q = query("web.skydns.local.", RecordType::A, None);
                q.set_id(id);
                udp.send_to(&q.to_vec().unwrap(), addr).unwrap();
                pending.insert(id);
                seen.udp_sent += 1;
            }
            while let Ok((n, _)) = udp.recv_from(&mut buf) {
                if let Ok(reply) = Message::from_vec(&buf[..n]) {
                    if pending.remove(&reply.id()) {
                        seen.udp_answered += 1;
                    }
                }
            }
            if last_tcp.elapsed() >= Duration::from_millis(5) {
                last_tcp = Instant::now();
                seen.tcp_asked += 1;
                if ask_tcp(&mut kept, id).is_err() {
                    seen.tcp_reconnects += 1;
                    let again = TcpStream::connect(addr).map_err(|e| e.to_string()).and_then(|conn| {
                        conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                        kept = conn;
                        ask_tcp(&mut kept, id)
                    });
                    if let Err(e) = again {
                        seen.tcp_failed.push(format!("kept connection, asked again: {e}"));
                    }
                }
            }
            if last_fresh.elapsed() >= Duration::from_millis(20) {
                last_fresh = Instant::now();
                seen.tcp_asked += 1;
                let fresh = TcpStream::connect(addr)
                    .map_err(|e| e.to_string())
                    .and_then(|mut conn| {
                        conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                        ask_tcp(&mut conn, id)
                    });
                if let Err(e) = fresh {
                    seen.tcp_failed.push(format!("fresh connection: {e}"));
                }
            }
        }
        // Late replies still count; what is missing after a second is lost.
        let deadline = Instant::now() + Duration::from_secs(1);
        while !pending.is_empty() && Instant::now() < deadline {
            if let Ok((n, _)) = udp.recv_from(&mut buf) {
                if let Ok(reply) = Message::from_vec(&buf[..n]) {
                    if pending.remove(&reply.id()) {
                        seen.udp_answered += 1;
                    }
                }
            }
        }
        seen
    })
}

fn ask_tcp(conn: &mut TcpStream, id: u16) -> Result<(), String> {
    let mut q = query("web.skydns.local.", RecordType::A, None);
    q.set_id(id);
    tcp_send(conn, &q.to_vec().unwrap()).map_err(|e| e.to_string())?;
    let reply = tcp_recv(conn).ok_or("no reply")?;
    let reply = Message::from_vec(&reply).map_err(|e| e.to_string())?;
    (reply.id() == id && reply.answers().len() == 1)
        .then_some(())
        .ok_or_else(|| format!("wrong reply {reply:?}"))
}

fn ready_status(addr: SocketAddr) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .write_all(b"GET /ready HTTP/1.1\r\nHost: skyline\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split(' ').nth(1)?.parse().ok()
}

fn assert_nothing_lost(seen: &Seen) {
    eprintln!("load: {seen:?}");
    assert!(seen.udp_sent > 500 && seen.tcp_asked > 50, "the load ran: {seen:?}");
    assert_eq!(seen.udp_answered, seen.udp_sent, "UDP queries lost: {seen:?}");
    assert!(seen.tcp_failed.is_empty(), "TCP queries failed: {seen:?}");
}

#[test]
fn an_upgrade_under_load_loses_no_query() {
    let _alone = one_at_a_time();
    let mut s = Upgradable::start();
    let first = s.pid().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let running = load(s.addr, Arc::clone(&stop));
    std::thread::sleep(Duration::from_millis(500));
    s.upgrade();
    s.wait_until(Duration::from_secs(15), "the new process writes its PID", |s| {
        s.pid().is_some_and(|pid| pid != first)
    });
    let status = (0..500)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            s.child.try_wait().unwrap()
        })
        .expect("the old process exits");
    assert!(status.success(), "the old process exits 0: {status:?}");
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let seen = running.join().unwrap();
    assert_nothing_lost(&seen);
    assert_eq!(
        ready_status(s.http),
        Some(200),
        "the new process serves /ready on the same port"
    );
    // The new process can be upgraded in turn.
    let second = s.pid().unwrap();
    s.upgrade();
    s.wait_until(Duration::from_secs(15), "a second upgrade", |s| {
        s.pid().is_some_and(|pid| pid != second)
    });
}

#[test]
fn a_failed_upgrade_keeps_the_old_process_serving_and_a_later_one_works() {
    let _alone = one_at_a_time();
    let s = Upgradable::start();
    let first = s.pid().unwrap();
    let exe = s.dir.path().join("skyline");
    install_broken(&exe);
    let stop = Arc::new(AtomicBool::new(false));
    let running = load(s.addr, Arc::clone(&stop));
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    s.upgrade();
    s.wait_until(Duration::from_secs(5), "the failure is logged", |s| {
        s.logged("upgrade failed")
    });
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "noticed after {:?}",
        asked.elapsed()
    );
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    assert_nothing_lost(&running.join().unwrap());
    assert_eq!(s.pid(), Some(first), "the old process still serves");
    assert_eq!(ready_status(s.http), Some(200));
    install(&exe, Path::new(env!("CARGO_BIN_EXE_skyline")));
    s.upgrade();
    s.wait_until(Duration::from_secs(15), "a later upgrade works", |s| {
        s.pid().is_some_and(|pid| pid != first)
    });
}
