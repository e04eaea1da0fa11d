//! End-to-end: what an operator meets in the first hour, each mistake reported where it is made
//! rather than served around. A port another process holds stops the start (unless ports are
//! shared on purpose with `--reuse-port`), and the HTTP port is never shared; a PID file names
//! one running process; a `--resolv-conf` given that gives no upstream stops the start; a client
//! outside `--recursion-acl` learns why it is refused (Extended DNS Error 18), and the refusals
//! are counted. Replies are read with hickory-proto.

mod common;

use common::{Skyline, HTTP_ANY_PORT};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::RecordType;
use std::collections::BTreeSet;
use std::io::Read;
use std::net::Ipv4Addr;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.9.0.1"}}"#;
const OTHER_RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.9.0.2"}}"#;

/// How long a start that must fail may take: it fails before serving, well within this.
const FAILS_WITHIN: Duration = Duration::from_secs(10);

/// Runs skyline with `args` (and no upstream from the host's resolv.conf) until it exits,
/// killing it after [`FAILS_WITHIN`]: its exit status (`None` when it had to be killed, so it
/// was serving) and its stderr.
fn run_to_exit(args: &[&str], env: &[(&str, &str)]) -> (Option<ExitStatus>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["--workers", "1", "--no-pin"])
        .args(args)
        .env("NO_COLOR", "1")
        .env("SKYLINE_RESOLV_CONF", "none")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + FAILS_WITHIN;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            common::stop_child(&mut child, "skyline");
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, reader.join().unwrap())
}

/// Asserts that a start failed at once, and returns its stderr.
fn failed(run: (Option<ExitStatus>, String)) -> String {
    let (status, stderr) = run;
    let status = status.unwrap_or_else(|| panic!("still running after {FAILS_WITHIN:?}; log:\n{stderr}"));
    assert!(!status.success(), "exited {status:?}; log:\n{stderr}");
    stderr
}

/// The Extended DNS Error info code of a reply (RFC 8914: option 15, info code first).
fn ede(reply: &Message) -> Option<u16> {
    match reply.extensions().as_ref()?.option(EdnsCode::from(15))? {
        EdnsOption::Unknown(15, data) if data.len() >= 2 => Some(u16::from_be_bytes([data[0], data[1]])),
        _ => None,
    }
}

#[test]
fn a_second_start_on_an_address_another_process_serves_exits_at_once_naming_it() {
    let first = Skyline::start(RECORDS, &[], &[]);
    let addr = first.addr.to_string();
    let stderr = failed(run_to_exit(&["--addr", &addr], &[]));
    assert!(stderr.contains(&addr), "the address is named: {stderr}");
    assert!(stderr.contains("another process holds"), "{stderr}");
    assert!(
        stderr.contains("--reuse-port"),
        "the way to share it is named: {stderr}"
    );
    // The first one alone still takes every query.
    for _ in 0..16 {
        let reply = first.udp("web.skydns.local.", RecordType::A);
        assert_eq!(common::a_of(&reply), [Ipv4Addr::new(10, 9, 0, 1)]);
    }
}

#[test]
fn with_reuse_port_two_processes_serve_one_address() {
    let first = Skyline::start(RECORDS, &["--reuse-port"], &[]);
    let addr = first.addr.to_string();
    // The variable, as the flag: either asks for sharing.
    let second = Skyline::start_at(&addr, OTHER_RECORDS, &[], &[("SKYLINE_REUSE_PORT", "true")]);
    assert_eq!(second.addr, first.addr);
    // Each query from a new socket is a new flow, which the kernel steers to either process.
    let mut answered_by = BTreeSet::new();
    for _ in 0..64 {
        answered_by.extend(common::a_of(&first.udp("web.skydns.local.", RecordType::A)));
    }
    assert_eq!(
        answered_by,
        BTreeSet::from([Ipv4Addr::new(10, 9, 0, 1), Ipv4Addr::new(10, 9, 0, 2)]),
        "both processes answer"
    );
}

#[test]
fn an_http_addr_another_process_holds_is_never_shared() {
    // The other process's DNS over TCP listener: SO_REUSEPORT, as an HTTP listener once had too.
    let dns = Skyline::start(RECORDS, &[], &[]);
    let held = dns.addr.to_string();
    let stderr = failed(run_to_exit(&["--addr", "127.0.0.1:0", "--http-addr", &held], &[]));
    assert!(stderr.contains(&format!("cannot serve HTTP on {held}")), "{stderr}");
    assert!(stderr.contains("another process holds"), "{stderr}");
    // A surge pod (--reuse-port) serves DNS at once and waits for the HTTP port: it keeps
    // running, and the holder still has its port to itself.
    let (status, stderr) = run_to_exit(&["--addr", "127.0.0.1:0", "--http-addr", &held, "--reuse-port"], &[]);
    assert!(status.is_none(), "exited {status:?}; log:\n{stderr}");
    assert!(stderr.contains("another process holds the HTTP address"), "{stderr}");
    for _ in 0..8 {
        let reply = dns.tcp("web.skydns.local.", RecordType::A);
        assert_eq!(reply.response_code(), ResponseCode::NoError, "{reply:?}");
    }
}

#[test]
fn a_resolv_conf_given_that_is_missing_or_lists_no_nameserver_stops_the_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing-resolv.conf");
    let empty = dir.path().join("empty-resolv.conf");
    std::fs::write(&empty, "search example.\noptions ndots:5\n").unwrap();
    for (path, why) in [(&missing, "cannot be read"), (&empty, "lists no nameserver")] {
        let path = path.to_str().unwrap();
        let stderr = failed(run_to_exit(&["--addr", "127.0.0.1:0", "--resolv-conf", path], &[]));
        assert!(stderr.contains(path) && stderr.contains(why), "{stderr}");
        let checked = Command::new(env!("CARGO_BIN_EXE_skyline"))
            .args(["--check-config", "--resolv-conf", path])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&checked.stderr);
        assert_eq!(checked.status.code(), Some(1), "--check-config: {stderr}");
        assert!(
            stderr.contains(path) && stderr.contains(why),
            "--check-config: {stderr}"
        );
    }
}

#[test]
fn a_client_outside_the_recursion_acl_is_refused_with_ede_18_and_counted() {
    let mut args = vec![
        // Never reached by a refused client; the allowed one below waits for it in vain.
        "--nameservers",
        "127.0.0.1:9",
        "--recursion-acl",
        "127.0.0.2/32",
        "--forward-timeout",
        "200ms",
    ];
    args.extend(HTTP_ANY_PORT);
    let s = Skyline::start(RECORDS, &args, &[]);
    let http = s.http_addr();
    let refused = || {
        let (status, metrics) = common::http_get(http, "/metrics").expect("/metrics answers");
        assert_eq!(status, 200);
        common::metric_value(&metrics, "skyline_recursion_refused_total").expect("the counter is exported")
    };
    assert_eq!(refused(), 0.0);

    let over_udp = s.udp("example.org.", RecordType::A);
    assert_eq!(over_udp.response_code(), ResponseCode::Refused);
    assert_eq!(ede(&over_udp), Some(18), "EDE 18, Prohibited");
    assert!(!over_udp.recursion_available());
    let over_tcp = s.tcp("example.org.", RecordType::AAAA);
    assert_eq!(over_tcp.response_code(), ResponseCode::Refused);
    assert_eq!(ede(&over_tcp), Some(18));
    let without_edns = s.udp_plain("example.org.", RecordType::A);
    assert_eq!(without_edns.response_code(), ResponseCode::Refused);
    assert!(without_edns.extensions().is_none(), "no OPT to carry an EDE in");
    assert_eq!(refused(), 3.0, "every refusal counts, with or without EDNS");

    // Names of the zones need no recursion: answered, not counted.
    let inside = s.udp("web.skydns.local.", RecordType::A);
    assert_eq!(common::a_of(&inside), [Ipv4Addr::new(10, 9, 0, 1)]);
    // A client inside the ACL is forwarded (to nothing here): not refused.
    let allowed = s.udp_from(Ipv4Addr::new(127, 0, 0, 2), "example.org.", RecordType::A);
    assert_ne!(allowed.response_code(), ResponseCode::Refused);
    assert_ne!(ede(&allowed), Some(18));
    assert_eq!(refused(), 3.0);
}

/// The PID a PID file holds, if it holds one.
fn pid_in(path: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn a_pid_file_of_a_running_skyline_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skyline.pid");
    let pid_file = path.to_str().unwrap();
    let first = Skyline::start(RECORDS, &["--pid-file", pid_file], &[]);
    common::eventually(Duration::from_secs(10), "the first start writes its PID", || {
        pid_in(&path) == Some(first.pid())
    });
    let stderr = failed(run_to_exit(&["--addr", "127.0.0.1:0", "--pid-file", pid_file], &[]));
    assert!(
        stderr.contains(&format!("names process {}, which is running", first.pid())),
        "{stderr}"
    );
    assert_eq!(pid_in(&path), Some(first.pid()), "the file still names the first");
}

#[test]
fn a_stale_pid_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skyline.pid");
    // The PID of a process that has exited and been reaped: no process has it now (the
    // kernel hands PIDs out in turn, so it is not reused within this test).
    let mut gone = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .arg("--version")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stale = gone.id();
    assert!(gone.wait().unwrap().success());
    std::fs::write(&path, format!("{stale}\n")).unwrap();
    let s = Skyline::start(RECORDS, &["--pid-file", path.to_str().unwrap()], &[]);
    common::eventually(Duration::from_secs(10), "the stale PID file is replaced", || {
        pid_in(&path) == Some(s.pid())
    });
}
