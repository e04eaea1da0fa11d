//! End-to-end tests of running under systemd, with this test in systemd's place: it binds the
//! UDP socket and TCP listener, passes them to the real binary as socket activation does
//! (descriptors 3 and up, `LISTEN_FDS`, `LISTEN_PID` naming the skyline process), and listens on
//! the `NOTIFY_SOCKET` datagram socket for skyline's notifications. DNS is asked with
//! hickory-proto. The descriptors are moved into place by bash (`exec 3<&N`), which then
//! `exec`s skyline, so that `$$` is skyline's process ID.

mod common;

use common::{a_of, query, tcp_query, udp_query};
use hickory_proto::rr::RecordType;
use skyline_dataplane::sys::{send_signal, Signal};
use socket2::SockRef;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.0.0.1"}}"#;

/// A UDP socket and a TCP listener on one free port of 127.0.0.1, inheritable by a child.
fn sockets() -> (UdpSocket, TcpListener) {
    loop {
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        if let Ok(tcp) = TcpListener::bind(udp.local_addr().unwrap()) {
            SockRef::from(&udp).set_cloexec(false).unwrap();
            SockRef::from(&tcp).set_cloexec(false).unwrap();
            return (udp, tcp);
        }
    }
}

/// skyline started as systemd starts a socket-activated `Type=notify` service: `fds` become
/// descriptors 3, 4, ... in that order.
struct Activated {
    child: Child,
    notify: UnixDatagram,
    _dir: tempfile::TempDir,
}

impl Activated {
    fn start(fds: &[i32], extra: &[&str]) -> Activated {
        let dir = tempfile::tempdir().unwrap();
        let records = dir.path().join("records.json");
        std::fs::write(&records, RECORDS).unwrap();
        let notify_path = dir.path().join("notify");
        let notify = UnixDatagram::bind(&notify_path).unwrap();
        notify.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // Each descriptor goes aside first (100 + i), so that one already at 3 or 4 is not
        // overwritten before it is moved; the originals and the copies aside are then closed.
        assert!(fds.iter().all(|&fd| fd < 100), "descriptors below the ones set aside");
        let aside: Vec<String> = fds
            .iter()
            .enumerate()
            .map(|(i, fd)| format!("{}<&{fd}", 100 + i))
            .collect();
        let close_originals: Vec<String> = fds
            .iter()
            .filter(|&&fd| fd >= 3 + fds.len() as i32)
            .map(|fd| format!("{fd}<&-"))
            .collect();
        let into_place: Vec<String> = (0..fds.len())
            .map(|i| format!("{}<&{} {}<&-", i + 3, 100 + i, 100 + i))
            .collect();
        let script = format!(
            "exec {} {}; exec {}; LISTEN_PID=$$ LISTEN_FDS={} exec \"$0\" \"$@\"",
            aside.join(" "),
            close_originals.join(" "),
            into_place.join(" "),
            fds.len()
        );
        let child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .arg(env!("CARGO_BIN_EXE_skyline"))
            .args(["--systemd", "--records"])
            .arg(&records)
            .args(["--workers", "2", "--no-pin", "--no-rec", "--drain", "0s"])
            .args(extra)
            .env("NOTIFY_SOCKET", &notify_path)
            .env("SKYLINE_RESOLV_CONF", "none")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Activated {
            child,
            notify,
            _dir: dir,
        }
    }

    /// The next notification, as sent.
    fn notification(&self) -> String {
        let mut buf = [0u8; 512];
        let n = self.notify.recv(&mut buf).expect("a notification from skyline");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    fn signal(&self, signal: Signal) {
        send_signal(self.child.id(), signal).unwrap();
    }

    fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Activated {
    fn drop(&mut self) {
        common::stop_child(&mut self.child, "skyline");
    }
}

fn answers_web(addr: SocketAddr) {
    let q = query("web.skydns.local.", RecordType::A, Some(1232));
    for reply in [udp_query(addr, &q), tcp_query(addr, &q)] {
        assert_eq!(a_of(&reply), [Ipv4Addr::new(10, 0, 0, 1)]);
    }
}

#[test]
fn passed_sockets_are_served_and_ready_reloading_stopping_are_notified() {
    let (udp, tcp) = sockets();
    let addr = udp.local_addr().unwrap();
    let mut s = Activated::start(&[udp.as_raw_fd(), tcp.as_raw_fd()], &[]);
    let ready = s.notification();
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    // systemd keeps its own copies open; the test's are not needed to serve.
    drop((udp, tcp));
    answers_web(addr);
    s.signal(Signal::Hangup);
    let reloading = s.notification();
    assert!(reloading.lines().any(|l| l == "RELOADING=1"), "{reloading:?}");
    assert!(
        reloading.lines().any(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reloading:?}"
    );
    assert!(
        s.notification().lines().any(|l| l == "READY=1"),
        "ready again after the reload"
    );
    answers_web(addr);
    s.signal(Signal::Terminate);
    assert!(s.notification().lines().any(|l| l == "STOPPING=1"));
    let status = s.wait_exit(Duration::from_secs(5)).expect("exits");
    assert!(status.success(), "{status:?}");
}

#[test]
fn sockets_passed_in_another_order_are_paired_by_address() {
    let (udp, tcp) = sockets();
    let addr = udp.local_addr().unwrap();
    let s = Activated::start(&[tcp.as_raw_fd(), udp.as_raw_fd()], &[]);
    assert!(s.notification().lines().any(|l| l == "READY=1"));
    answers_web(addr);
}

#[test]
fn a_udp_socket_without_its_tcp_listener_is_a_clear_error() {
    let (udp, _tcp) = sockets();
    let mut s = Activated::start(&[udp.as_raw_fd()], &[]);
    let status = s.wait_exit(Duration::from_secs(10)).expect("exits at start");
    assert!(!status.success());
}
