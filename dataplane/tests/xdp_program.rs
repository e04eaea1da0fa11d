//! The XDP steering program on a real interface: one end of a veth pair with two receive
//! queues, in a network namespace of its own, its peer in another. The program is attached by a
//! child process (this test binary run again, inside the namespace by `ip netns exec`), so that
//! it can be killed with SIGKILL and the kernel's detaching of the link observed; a second child
//! in the peer's namespace pings the first end and exchanges UDP with an echo server there.
//!
//! Needs root (network namespaces, BPF). Without it the tests say so and pass, except under
//! `CI=true`, where a refusal fails them: CI must exercise the kernel, not skip it.
#![cfg(all(target_os = "linux", not(skyline_portable_io)))]

#[path = "support/veth.rs"]
mod veth;

use skyline_dataplane::sys::xdp::{Interface, Mode, Program, XdpError};
use skyline_dataplane::sys::{send_signal, Signal};
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use veth::{ping, VethPair, IFACE, SERVER_V4, SERVER_V6};

/// Set in a child's environment to the part it plays: `attach`, `echo` or `client`.
const ROLE: &str = "SKYLINE_XDP_TEST_ROLE";
/// What a child prints before its report, to find it among the test harness's output.
const MARK: &str = "XDP-CHILD:";
/// How long anything the kernel does asynchronously is waited for.
const PATIENCE: Duration = Duration::from_secs(10);

fn server_addrs() -> [SocketAddr; 2] {
    [
        SocketAddr::new(SERVER_V4.parse().unwrap(), 53),
        SocketAddr::new(SERVER_V6.parse().unwrap(), 53),
    ]
}

/// Whether the tests may go on: as root, yes; otherwise they fail under CI and are skipped
/// (with a message) elsewhere.
fn privileged(test: &str) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let euid = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap();
    if euid == "0" {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: CI must run the XDP tests as root (effective UID {euid})"
    );
    eprintln!("{test}: skipped, needs root for network namespaces and BPF (effective UID {euid})");
    false
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
    fn new(tag: &str) -> Net {
        Net(VethPair::new("skyxdp", tag, 1500))
    }

    /// The XDP mode the interface shows a program attached in, if any.
    fn attached(&self) -> Option<Mode> {
        let link = self.link();
        let first = link.lines().next().unwrap_or("");
        if first.split_whitespace().any(|word| word == "xdpgeneric") {
            Some(Mode::Generic)
        } else if first.split_whitespace().any(|word| word == "xdp") {
            Some(Mode::Native)
        } else {
            assert!(!link.contains("prog/xdp"), "a program without a mode?\n{link}");
            None
        }
    }

    /// Waits until the interface shows no program any more; whether that happened.
    fn detached_within(&self, patience: Duration) -> bool {
        let deadline = Instant::now() + patience;
        while self.attached().is_some() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Pings the server end and exchanges UDP with its echo server, from the client namespace;
    /// panics with the client's output when anything goes unanswered.
    fn check_traffic(&self, when: &str) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.client])
            .args(child_args())
            .env(ROLE, "client")
            .output()
            .unwrap();
        assert!(out.status.success(), "{when}: the client failed:\n{}", output(&out));
    }
}

fn output(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The arguments that make this test binary run only [`xdp_test_child`].
fn child_args() -> Vec<String> {
    vec![
        std::env::current_exe().unwrap().to_string_lossy().into_owned(),
        "--exact".into(),
        "xdp_test_child".into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ]
}

/// A child in the server namespace, killed on drop; it runs until its standard input closes.
struct Helper {
    child: Child,
    /// Held open: the child waits for it to close.
    _stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Helper {
    fn start(net: &Net, env: &[(&str, String)]) -> Helper {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &net.server]).args(child_args());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Helper {
            child,
            _stdin: stdin,
            lines,
        }
    }

    /// Attaches the program to the server end in `mode` for `addr`.
    fn attach(net: &Net, mode: Mode, addr: SocketAddr) -> Helper {
        Helper::start(
            net,
            &[
                (ROLE, "attach".into()),
                ("SKYLINE_XDP_MODE", mode.to_string()),
                ("SKYLINE_XDP_ADDR", addr.to_string()),
            ],
        )
    }

    /// The child's report: the rest of the first line holding [`MARK`].
    fn report(&self) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    // The harness prints the test's name on the same line first.
                    if let Some((_, report)) = line.split_once(MARK) {
                        return report.trim().to_owned();
                    }
                }
                Err(e) => panic!("no report from the child: {e}"),
            }
        }
    }

    fn kill(&mut self) {
        send_signal(self.child.id(), Signal::Kill).unwrap();
        let status = self.child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            if let Err(e) = self.child.kill() {
                eprintln!("killing an XDP test child: {e}");
            }
        }
        if let Err(e) = self.child.wait() {
            eprintln!("reaping an XDP test child: {e}");
        }
    }
}

/// Not a test of its own: the part a child plays, chosen by [`ROLE`]. Run as an ordinary test
/// it returns at once.
#[test]
fn xdp_test_child() {
    let Ok(role) = std::env::var(ROLE) else { return };
    match role.as_str() {
        "attach" => {
            let mode: Mode = std::env::var("SKYLINE_XDP_MODE").unwrap().parse().unwrap();
            let addr: SocketAddr = std::env::var("SKYLINE_XDP_ADDR").unwrap().parse().unwrap();
            let iface = Interface::by_name(IFACE).unwrap();
            assert_eq!(iface.queues, 2, "{iface:?}");
            assert_eq!(Interface::holding(addr.ip()).unwrap(), iface);
            match Program::attach(&iface, mode, addr) {
                Ok(program) => {
                    println!("{MARK} attached {}", program.mode());
                    wait_for_stdin();
                    drop(program);
                }
                Err(e) => println!("{MARK} error {}", variant(&e)),
            }
        }
        "echo" => {
            for addr in server_addrs() {
                let socket = UdpSocket::bind(addr).unwrap();
                std::thread::spawn(move || {
                    let mut buf = [0; 512];
                    while let Ok((len, from)) = socket.recv_from(&mut buf) {
                        socket.send_to(&buf[..len], from).unwrap();
                    }
                });
            }
            println!("{MARK} listening");
            wait_for_stdin();
        }
        "client" => {
            for addr in server_addrs() {
                udp_exchange(addr);
            }
            ping(SERVER_V4.parse().unwrap(), PATIENCE);
            ping(SERVER_V6.parse().unwrap(), PATIENCE);
            println!("{MARK} answered");
        }
        _ => panic!("unknown role {role}"),
    }
}

fn wait_for_stdin() {
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// The variant's name, which the parent compares.
fn variant(e: &XdpError) -> String {
    let debug = format!("{e:?}");
    debug.split([' ', '{', '(']).next().unwrap().to_owned()
}

/// Sends a datagram to `addr` and waits for it to come back, a few tries in case the first is
/// lost while the neighbour's address is resolved.
fn udp_exchange(addr: SocketAddr) {
    let local: SocketAddr = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().unwrap();
    let socket = UdpSocket::bind(local).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00";
    for _ in 0..5 {
        socket.send_to(query, addr).unwrap();
        let mut buf = [0; 512];
        if let Ok((len, from)) = socket.recv_from(&mut buf) {
            assert_eq!((&buf[..len], from), (&query[..], addr));
            return;
        }
    }
    panic!("no UDP answer from {addr}");
}

/// Attaches in `mode` for `addr`, expecting `expected`; checks that traffic still flows, with
/// no socket in the map; kills the attaching process and checks that the program is gone.
fn attach_pass_and_kill(tag: &str, mode: Mode, addr: SocketAddr, expected: Mode) {
    let net = Net::new(tag);
    let echo = Helper::start(&net, &[(ROLE, "echo".into())]);
    assert_eq!(echo.report(), "listening");
    net.check_traffic("before attaching");
    let mut attacher = Helper::attach(&net, mode, addr);
    assert_eq!(attacher.report(), format!("attached {expected}"));
    assert_eq!(net.attached(), Some(expected), "{}", net.link());
    assert!(net.link().contains("prog/xdp"), "{}", net.link());
    net.check_traffic("with the program attached");
    attacher.kill();
    assert!(
        net.detached_within(PATIENCE),
        "still attached after SIGKILL:\n{}",
        net.link()
    );
    net.check_traffic("after the attaching process was killed");
}

#[test]
fn generic_mode_passes_traffic_and_goes_with_the_process() {
    if privileged("generic_mode_passes_traffic_and_goes_with_the_process") {
        attach_pass_and_kill("gen", Mode::Generic, server_addrs()[0], Mode::Generic);
    }
}

#[test]
fn native_mode_passes_traffic_and_goes_with_the_process() {
    if privileged("native_mode_passes_traffic_and_goes_with_the_process") {
        attach_pass_and_kill("drv", Mode::Native, server_addrs()[1], Mode::Native);
    }
}

#[test]
fn auto_mode_is_native_on_veth() {
    if privileged("auto_mode_is_native_on_veth") {
        attach_pass_and_kill("auto", Mode::Auto, server_addrs()[0], Mode::Native);
    }
}

#[test]
fn a_second_program_on_the_interface_is_busy() {
    if !privileged("a_second_program_on_the_interface_is_busy") {
        return;
    }
    let net = Net::new("busy");
    let first = Helper::attach(&net, Mode::Generic, server_addrs()[0]);
    assert_eq!(first.report(), "attached generic");
    for mode in [Mode::Generic, Mode::Native, Mode::Auto] {
        let second = Helper::attach(&net, mode, server_addrs()[1]);
        assert_eq!(second.report(), "error Busy", "a second program in {mode} mode");
    }
    assert_eq!(
        net.attached(),
        Some(Mode::Generic),
        "the first program stays:\n{}",
        net.link()
    );
    drop(first);
    assert!(
        net.detached_within(PATIENCE),
        "still attached after its process ended:\n{}",
        net.link()
    );
}

#[test]
fn an_unknown_interface_is_named_as_such() {
    match Interface::by_name("skyline-none0") {
        Err(XdpError::UnknownInterface { name }) => assert_eq!(name, "skyline-none0"),
        other => panic!("{other:?}"),
    }
    if !privileged("an_unknown_interface_is_named_as_such") {
        return;
    }
    // An interface that went away between the lookup and the attachment.
    let gone = Interface {
        name: "gone0".into(),
        index: 0x7fff_fff0,
        mac: [2, 0, 0, 0, 0, 1],
        mtu: 1500,
        queues: 1,
    };
    for mode in [Mode::Generic, Mode::Native, Mode::Auto] {
        match Program::attach(&gone, mode, server_addrs()[0]) {
            Err(XdpError::UnknownInterface { name }) => assert_eq!(name, "gone0"),
            other => panic!("{mode}: {other:?}"),
        }
    }
}

#[test]
fn an_address_the_program_cannot_match_is_refused() {
    let lo = Interface::by_name("lo").unwrap();
    for addr in ["0.0.0.0:53", "[::]:53", "127.0.0.1:0"] {
        let addr: SocketAddr = addr.parse().unwrap();
        match Program::attach(&lo, Mode::Generic, addr) {
            Err(XdpError::BadAddress { addr: got, .. }) => assert_eq!(got, addr),
            other => panic!("{addr}: {other:?}"),
        }
    }
}
