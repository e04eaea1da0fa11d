//! Upstream servers for forwarding tests, on 127.0.0.1 only: Knot DNS (`knotd`, a real
//! authoritative server) serving generated zones, and a scripted UDP server written here that
//! counts what reaches it and can misbehave on purpose (delay, forge, answer negatively).

#![allow(dead_code)]

use crate::common::{free_port, stop_child};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use skyline_dataplane::sys::{send_signal, Signal};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where Debian installs the Knot server.
const KNOTD: &str = "/usr/sbin/knotd";
/// How long knotd may take to answer its first query.
const KNOT_START_WAIT: Duration = Duration::from_secs(10);

/// The knotd binary, or `None` when it is missing, which fails the test under CI=true (the
/// test command installs it) and skips it otherwise.
pub fn knotd() -> Option<PathBuf> {
    let path = Path::new(KNOTD);
    if path.exists() {
        return Some(path.to_owned());
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{KNOTD} is required under CI=true; scripts/setup.sh test installs the knot package");
    }
    eprintln!("skipping: {KNOTD} not found (install Debian's knot package)");
    None
}

/// A running knotd, stopped (SIGCONT first, in case it was paused) and killed on drop.
pub struct Knot {
    child: Child,
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    killed: bool,
}

impl Knot {
    /// Starts knotd serving each `(zone, zone file text)` on a free port of 127.0.0.1, and
    /// waits until it answers. `None` when knotd is not installed (outside CI).
    pub fn start(zones: &[(&str, &str)]) -> Option<Knot> {
        let knotd = knotd()?;
        for _ in 0..3 {
            if let Some(knot) = Knot::try_start(&knotd, zones) {
                return Some(knot);
            }
        }
        panic!("knotd did not start");
    }

    fn try_start(knotd: &Path, zones: &[(&str, &str)]) -> Option<Knot> {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let d = dir.path().display();
        let mut conf = format!(
            "server:\n    listen: 127.0.0.1@{port}\n    udp-workers: 1\n    tcp-workers: 1\n    \
             background-workers: 1\n    rundir: {d}\ndatabase:\n    storage: {d}\nlog:\n  - target: stderr\n    \
             any: warning\nzone:\n"
        );
        for (zone, text) in zones {
            let file = dir.path().join(format!("{zone}zone"));
            std::fs::write(&file, text).unwrap();
            conf.push_str(&format!("  - domain: {zone}\n    file: {}\n", file.display()));
        }
        let conf_path = dir.path().join("knot.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(knotd)
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut knot = Knot {
            child,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            dir,
            killed: false,
        };
        let probe = zones.first().map_or(".", |(zone, _)| zone);
        let deadline = Instant::now() + KNOT_START_WAIT;
        while Instant::now() < deadline {
            if let Some(reply) = ask(knot.addr, probe, RecordType::SOA, Duration::from_millis(200)) {
                if reply.response_code() == ResponseCode::NoError {
                    return Some(knot);
                }
            }
            if matches!(knot.child.try_wait(), Ok(Some(_))) {
                return None;
            }
        }
        knot.kill();
        None
    }

    /// Pauses the server (SIGSTOP): it still holds its port, answers nothing. Returns once
    /// every thread of knotd has stopped: the kernel stops each as it next runs, milliseconds
    /// later on a busy machine, and until then a query sent after the signal may be answered.
    pub fn pause(&self) {
        self.signal(Signal::Stop);
        wait_until_stopped(self.child.id());
    }

    /// Resumes a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal(Signal::Continue);
    }

    /// Sends `signal` to knotd from this process (no `kill` program needed); fails the test
    /// when it cannot be sent.
    fn signal(&self, signal: Signal) {
        let pid = self.child.id();
        if let Err(e) = send_signal(pid, signal) {
            panic!("sending {signal} to knotd ({pid}) failed: {e}");
        }
    }

    /// Kills the server: its port closes, queries to it are refused. Called from `Drop` too, so
    /// it reports a failure instead of panicking.
    pub fn kill(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        // Resumed first, in case it was paused; unless it has ended (and been reaped) already.
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            if let Err(e) = send_signal(self.child.id(), Signal::Continue) {
                eprintln!("resuming knotd ({}) before killing it failed: {e}", self.child.id());
            }
        }
        stop_child(&mut self.child, "knotd");
    }
}

impl Drop for Knot {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits (bounded) until every thread of process `pid` is stopped: `T` in the state field of
/// its `/proc/PID/task/*/stat`.
#[cfg(target_os = "linux")]
fn wait_until_stopped(pid: u32) {
    let state = |stat: &str| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap_or_else(|e| panic!("reading the threads of process {pid}: {e}"));
        let stopped = tasks.flatten().all(|task| {
            // A thread that ended meanwhile is as good as stopped.
            std::fs::read_to_string(task.path().join("stat")).map_or(true, |stat| state(&stat) == Some('T'))
        });
        if stopped {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} did not stop within 5 s of SIGSTOP"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(not(target_os = "linux"))]
fn wait_until_stopped(_pid: u32) {}

/// One query straight to a server, for readiness checks.
fn ask(addr: SocketAddr, name: &str, rtype: RecordType, wait: Duration) -> Option<Message> {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).ok()?;
    socket.set_read_timeout(Some(wait)).ok()?;
    let mut q = Message::new();
    q.set_id(0x5151).set_recursion_desired(false);
    q.add_query(hickory_proto::op::Query::query(Name::from_ascii(name).ok()?, rtype));
    socket.send_to(&q.to_vec().ok()?, addr).ok()?;
    let mut buf = [0u8; 4096];
    let (n, _) = socket.recv_from(&mut buf).ok()?;
    Message::from_vec(&buf[..n]).ok()
}

/// How the scripted upstream answers each query.
#[derive(Debug, Clone, Copy)]
pub enum Script {
    /// NOERROR with `A 192.0.2.1` of this TTL, after a delay.
    Address { ttl: u32, delay: Duration },
    /// NXDOMAIN with an SOA whose TTL and minimum are this.
    NxDomain { soa_ttl: u32 },
    /// First forged replies, which a careful resolver drops: the right ID and question from
    /// another port (carrying 6.6.6.6), a wrong ID (6.6.6.7), a wrong question (6.6.6.8); then
    /// the real answer, `A 192.0.2.1`.
    Forge,
}

/// The address the scripted upstream answers with.
pub const GOOD: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

/// A UDP upstream on 127.0.0.1 that answers by a [`Script`] and records every query it gets.
pub struct Scripted {
    pub addr: SocketAddr,
    queries: Arc<Mutex<Vec<Message>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Scripted {
    pub fn start(script: Script) -> Scripted {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let addr = socket.local_addr().unwrap();
        let queries = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, halt) = (Arc::clone(&queries), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let forger = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            let mut buf = [0u8; 4096];
            while !halt.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(query) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                seen.lock().unwrap().push(query.clone());
                let socket = socket.try_clone().unwrap();
                let forger = forger.try_clone().unwrap();
                std::thread::spawn(move || respond(&socket, &forger, from, &query, script));
            }
        });
        Scripted {
            addr,
            queries,
            stop,
            thread: Some(thread),
        }
    }

    /// Queries received so far for `name` (any type; case-insensitive).
    pub fn count(&self, name: &str) -> usize {
        let name = Name::from_ascii(name).unwrap();
        self.queries
            .lock()
            .unwrap()
            .iter()
            .filter(|q| q.queries().first().is_some_and(|q| *q.name() == name))
            .count()
    }

    /// Every query received so far.
    pub fn queries(&self) -> Vec<Message> {
        self.queries.lock().unwrap().clone()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn reply_to(query: &Message) -> Message {
    let mut reply = Message::new();
    reply
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(true);
    reply.add_queries(query.queries().iter().cloned());
    reply
}

fn address_reply(query: &Message, ttl: u32, ip: Ipv4Addr) -> Message {
    let mut reply = reply_to(query);
    if let Some(q) = query.queries().first() {
        if q.query_type() == RecordType::A {
            reply.add_answer(Record::from_rdata(q.name().clone(), ttl, RData::A(A(ip))));
        }
    }
    reply
}

fn respond(socket: &UdpSocket, forger: &UdpSocket, to: SocketAddr, query: &Message, script: Script) {
    let send = |socket: &UdpSocket, m: &Message| {
        let _ = socket.send_to(&m.to_vec().unwrap(), to);
    };
    match script {
        Script::Address { ttl, delay } => {
            std::thread::sleep(delay);
            send(socket, &address_reply(query, ttl, GOOD));
        }
        Script::NxDomain { soa_ttl } => {
            let mut reply = reply_to(query);
            reply.set_response_code(ResponseCode::NXDomain);
            if let Some(q) = query.queries().first() {
                let zone = q.name().base_name();
                let soa = SOA::new(
                    Name::from_ascii("ns.invalid.").unwrap(),
                    Name::from_ascii("admin.invalid.").unwrap(),
                    1,
                    3600,
                    600,
                    86400,
                    soa_ttl,
                );
                reply.add_name_server(Record::from_rdata(zone, soa_ttl, RData::SOA(soa)));
            }
            send(socket, &reply);
        }
        Script::Forge => {
            send(forger, &address_reply(query, 300, Ipv4Addr::new(6, 6, 6, 6)));
            let mut wrong_id = address_reply(query, 300, Ipv4Addr::new(6, 6, 6, 7));
            wrong_id.set_id(query.id().wrapping_add(1));
            send(socket, &wrong_id);
            let mut wrong_question = reply_to(query);
            wrong_question.take_queries();
            let other = Name::from_ascii("other.forged.test.").unwrap();
            wrong_question.add_query(hickory_proto::op::Query::query(other.clone(), RecordType::A));
            wrong_question.add_answer(Record::from_rdata(other, 300, RData::A(A(Ipv4Addr::new(6, 6, 6, 8)))));
            send(socket, &wrong_question);
            std::thread::sleep(Duration::from_millis(20));
            send(socket, &address_reply(query, 300, GOOD));
        }
    }
}
