//! End-to-end test of the node-local set-up (`--setup-interface`, `--setup-notrack`) inside a
//! network namespace this test creates and removes: the real binary makes the dummy interface
//! with 169.254.20.10 and the NOTRACK rules, answers `dig` (run in the namespace) on that
//! address, and removes both when it exits after SIGTERM. Needs root, `ip` (iproute2), `nft`
//! (nftables) and `dig`; under CI=true their absence fails the test, elsewhere it skips.

mod common;

use skyline_dataplane::sys::{send_signal, Signal};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.0.0.1"}}"#;
const INTERFACE: &str = "nodelocal0";
const ADDRESS: &str = "169.254.20.10";

/// Whether the test can run here: root, and the programs it and skyline use.
fn can_run() -> bool {
    common::can_use_namespaces(&[("ip", "iproute2"), ("nft", "nftables"), ("dig", "dnsutils")])
}

fn run(args: &[&str]) -> Output {
    Command::new("ip").args(args).output().expect("ip runs")
}

/// A network namespace, removed on drop even when the test fails.
struct Namespace(String);

impl Namespace {
    fn new() -> Namespace {
        let name = format!("skyline-test-{}", std::process::id());
        let _ = run(&["netns", "del", &name]);
        let out = run(&["netns", "add", &name]);
        assert!(
            out.status.success(),
            "ip netns add: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ns = Namespace(name);
        assert!(ns.exec(&["ip", "link", "set", "lo", "up"]).status.success());
        ns
    }

    fn exec(&self, command: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.0])
            .args(command)
            .output()
            .expect("ip netns exec runs")
    }

    fn text(&self, command: &[&str]) -> String {
        String::from_utf8_lossy(&self.exec(command).stdout).into_owned()
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let out = run(&["netns", "del", &self.0]);
        if !out.status.success() {
            eprintln!(
                "removing namespace {} failed: {}",
                self.0,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        common::stop_child(&mut self.0, "skyline");
    }
}

#[test]
fn the_interface_and_notrack_rules_are_made_served_on_and_removed_on_exit() {
    if !can_run() {
        return;
    }
    let ns = Namespace::new();
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records.json");
    std::fs::write(&records, RECORDS).unwrap();
    let addr = format!("{ADDRESS}:53");
    // `ip netns exec` runs skyline in its own process (exec), so signals reach skyline itself.
    let child = Command::new("ip")
        .args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_skyline")])
        .args(["--addr", &addr, "--setup-interface", INTERFACE, "--setup-notrack"])
        .args(["--no-rec", "--workers", "1", "--no-pin", "--drain", "0s", "--records"])
        .arg(&records)
        .env("SKYLINE_RESOLV_CONF", "none")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut skyline = Running(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    let at = format!("@{ADDRESS}");
    loop {
        let answer = ns.text(&["dig", "+short", "+time=1", "+tries=1", &at, "web.skydns.local", "A"]);
        if answer.trim() == "10.0.0.1" {
            break;
        }
        assert!(skyline.0.try_wait().unwrap().is_none(), "skyline exited at start");
        assert!(Instant::now() < deadline, "no answer on {ADDRESS}: {answer:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let addresses = ns.text(&["ip", "-o", "addr", "show", "dev", INTERFACE]);
    assert!(addresses.contains(&format!("{ADDRESS}/32")), "{addresses}");
    let table = ns.text(&["nft", "list", "table", "inet", "skyline_nodelocal0"]);
    for rule in [
        "ip daddr 169.254.20.10 udp dport 53 notrack",
        "ip daddr 169.254.20.10 tcp dport 53 notrack",
        "ip saddr 169.254.20.10 udp sport 53 notrack",
    ] {
        assert!(table.contains(rule), "{rule:?} not in\n{table}");
    }
    send_signal(skyline.0.id(), Signal::Terminate).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = skyline.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "skyline did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(
        !ns.exec(&["ip", "link", "show", "dev", INTERFACE]).status.success(),
        "the interface is removed on exit"
    );
    assert!(
        !ns.exec(&["nft", "list", "table", "inet", "skyline_nodelocal0"])
            .status
            .success(),
        "the rules are removed on exit"
    );
}
