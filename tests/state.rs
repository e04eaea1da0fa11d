//! End-to-end tests of the persisted snapshot (`--state-dir`): the real binary writes the last
//! complete data of etcd and of the Kubernetes API, and a skyline started while its source is
//! down answers from it, says so in `/ready` and `/metrics`, and gives way to the source's own
//! data once the source answers. A state file that cannot be served is ignored with a log line.
//! Every wait is bounded; everything runs on 127.0.0.1.

mod common;
mod etcd_harness;
mod kubernetes_api;

use common::{eventually, Skyline};
use etcd_harness::{etcd_available, free_port, wait_for, wait_for_rcode, Etcd, EtcdClient};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use kubernetes_api::objects::{cluster_ip, namespace};
use kubernetes_api::FakeApi;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// How long a change may take to reach the state file: the write interval (5 s) and slack.
const WRITTEN: Duration = Duration::from_secs(20);

/// How long a source's return may take to show: its reconnection backoff and a resync.
const BACK: Duration = Duration::from_secs(20);

/// `GET path`: the status code and the body ([`common::http_get`], which must answer).
fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    common::http_get(addr, path).unwrap_or_else(|| panic!("GET {path} from {addr} got no complete response"))
}

/// The value of `series` (name and labels as written) in `/metrics`, if present.
fn metric(s: &Skyline, series: &str) -> Option<f64> {
    let (status, body) = http_get(s.http_addr(), "/metrics");
    assert_eq!(status, 200);
    body.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The flags every skyline here shares: the state directory, no drain wait, HTTP on any port,
/// nothing forwarded.
fn persisting(dir: &Path) -> Vec<String> {
    [
        "--state-dir",
        dir.to_str().unwrap(),
        "--drain",
        "0s",
        "--http-addr",
        "127.0.0.1:0",
        "--no-rec",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn start(args: &[String], env: &[(&str, &str)]) -> Skyline {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Skyline::start_with(&args, env)
}

/// Stops `s` with SIGTERM and checks that it exits 0.
fn stop(mut s: Skyline) {
    s.terminate();
    let status = s
        .wait_exit(Duration::from_secs(15))
        .expect("skyline exits after SIGTERM");
    assert!(status.success(), "{status:?}; log:\n{}", s.log_text());
}

/// Whether the file at `path` holds `needle` (its data is JSON, so keys appear as written).
fn file_holds(path: &Path, needle: &str) -> bool {
    std::fs::read(path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
}

#[test]
fn the_persisted_snapshot_with_etcd_down_at_start() {
    if !etcd_available() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("etcd.state");
    let mut etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", r#"{"domain":"skydns.test.","ttl":60}"#);
    client.put("/skydns/test/skydns/web/a", r#"{"host":"10.0.0.1","port":80}"#);
    client.put("/skydns/test/skydns/web/b", r#"{"host":"10.0.0.2","port":8080}"#);
    let mut args = persisting(state.path());
    args.extend(["--machines".to_owned(), etcd.endpoint()]);

    let first = start(&args, &[]);
    wait_for(&first, "web.skydns.test.", &["10.0.0.1", "10.0.0.2"]);
    eventually(WRITTEN, "the first sync written", || {
        file_holds(&file, "/skydns/test/skydns/web/a")
    });
    client.put("/skydns/test/skydns/later", r#"{"host":"10.0.0.3"}"#);
    wait_for(&first, "later.skydns.test.", &["10.0.0.3"]);
    eventually(WRITTEN, "a later change written", || {
        file_holds(&file, "/skydns/test/skydns/later")
    });
    assert_eq!(metric(&first, r#"skyline_source_stale{source="etcd"}"#), Some(0.0));
    eventually(WRITTEN, "both writes counted", || {
        metric(&first, r#"skyline_state_writes_total{source="etcd"}"#) >= Some(2.0)
    });
    stop(first);
    etcd.kill();

    // A copy with one byte of its data changed, in a directory of its own: ignored, logged.
    let corrupt = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 10;
    bytes[last] ^= 0x01;
    std::fs::write(corrupt.path().join("etcd.state"), bytes).unwrap();
    let mut corrupt_args = persisting(corrupt.path());
    corrupt_args.extend(["--machines".to_owned(), etcd.endpoint()]);
    let ignored = start(&corrupt_args, &[]);
    eventually(Duration::from_secs(10), "the corrupt file named in the log", || {
        ignored.log_count("persisted etcd data in") > 0 && ignored.log_count("corrupt: the checksum does not match") > 0
    });
    wait_for_rcode(&ignored, "web.skydns.local.", ResponseCode::ServFail);
    assert_eq!(http_get(ignored.http_addr(), "/ready").0, 503);
    stop(ignored);

    // etcd still down: the persisted data answers, marked stale.
    let second = start(&args, &[]);
    wait_for(&second, "web.skydns.test.", &["10.0.0.1", "10.0.0.2"]);
    wait_for(&second, "later.skydns.test.", &["10.0.0.3"]);
    let a = second.udp("a.web.skydns.test.", RecordType::A);
    assert_eq!(a.answers()[0].ttl(), 60, "the settings object came back too");
    assert_eq!(second.udp("web.skydns.test.", RecordType::SRV).answers().len(), 2);
    assert_eq!(
        second.udp("missing.skydns.test.", RecordType::A).response_code(),
        ResponseCode::NXDomain
    );
    let (status, body) = http_get(second.http_addr(), "/ready");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.starts_with("OK; etcd: serving persisted data from ") && body.trim_end().ends_with(", stale"),
        "{body}"
    );
    assert_eq!(metric(&second, r#"skyline_source_stale{source="etcd"}"#), Some(1.0));
    assert!(metric(&second, r#"skyline_source_persisted_age_seconds{source="etcd"}"#).is_some());
    assert_eq!(
        second.log_count("etcd unreachable at start: serving its data persisted in"),
        1
    );
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(
        metric(&second, r#"skyline_state_writes_total{source="etcd"}"#),
        Some(0.0),
        "persisted data is never written back as if current"
    );

    // etcd back: its data replaces the persisted data, and stale clears.
    etcd.restart();
    etcd.wait_healthy();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.delete("/skydns/test/skydns/later");
    client.put("/skydns/test/skydns/fresh", r#"{"host":"10.0.0.4"}"#);
    wait_for(&second, "fresh.skydns.test.", &["10.0.0.4"]);
    wait_for_rcode(&second, "later.skydns.test.", ResponseCode::NXDomain);
    eventually(BACK, "stale cleared", || {
        metric(&second, r#"skyline_source_stale{source="etcd"}"#) == Some(0.0)
    });
    assert_eq!(http_get(second.http_addr(), "/ready"), (200, "OK".to_owned()));
    assert_eq!(
        second.log_count("etcd answers: its data replaces the persisted data"),
        1
    );
    eventually(WRITTEN, "etcd's data written again", || {
        file_holds(&file, "/skydns/test/skydns/fresh")
    });
}

#[test]
fn a_state_file_that_cannot_be_served_is_ignored_and_the_zone_answers_servfail() {
    let state = tempfile::tempdir().unwrap();
    // A state file's first bytes, then a checksum that matches nothing.
    let mut bytes = b"skyline-state\n".to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&[0xAB; 32]);
    bytes.extend_from_slice(&2u32.to_le_bytes());
    bytes.extend_from_slice(b"{}{\"records\":[]}");
    std::fs::write(state.path().join("etcd.state"), bytes).unwrap();
    let mut args = persisting(state.path());
    // Nothing listens there: etcd is down.
    args.extend(["--machines".to_owned(), format!("http://127.0.0.1:{}", free_port())]);
    let s = start(&args, &[]);
    eventually(Duration::from_secs(10), "the file named as corrupt in the log", || {
        s.log_count("persisted etcd data in") > 0 && s.log_count("ignored") > 0 && s.log_count("corrupt") > 0
    });
    wait_for_rcode(&s, "web.skydns.local.", ResponseCode::ServFail);
    let (status, body) = http_get(s.http_addr(), "/ready");
    assert_eq!(
        (status, body.as_str()),
        (503, "not ready: etcd (no complete read yet)\n")
    );
    assert_eq!(metric(&s, r#"skyline_source_stale{source="etcd"}"#), Some(0.0));
    assert_eq!(s.log_count("panicked"), 0, "{}", s.log_text());
    stop(s);
}

#[test]
fn the_persisted_snapshot_with_the_api_server_down_at_start() {
    let api = FakeApi::start();
    api.apply(namespace("testns"));
    api.apply(cluster_ip("testns", "svc1", &["10.96.1.1"], &[("http", 80, "TCP")]));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig(dir.path());
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("kubernetes.state");
    let mut args = persisting(state.path());
    args.extend(["--kubeconfig".to_owned(), kubeconfig.to_str().unwrap().to_owned()]);
    let env = [("SKYLINE_RESOLV_CONF", "none")];
    let svc1 = "svc1.testns.svc.cluster.local.";
    let svc2 = "svc2.testns.svc.cluster.local.";

    let first = start(&args, &env);
    wait_for(&first, svc1, &["10.96.1.1"]);
    eventually(WRITTEN, "the cluster written", || file_holds(&file, "svc1"));
    stop(first);
    api.kill();

    let second = start(&args, &env);
    wait_for(&second, svc1, &["10.96.1.1"]);
    let (status, body) = http_get(second.http_addr(), "/ready");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.starts_with("OK; kubernetes: serving persisted data from "),
        "{body}"
    );
    assert_eq!(
        metric(&second, r#"skyline_source_stale{source="kubernetes"}"#),
        Some(1.0)
    );

    api.apply(cluster_ip("testns", "svc2", &["10.96.1.2"], &[("http", 80, "TCP")]));
    api.restart();
    wait_for(&second, svc2, &["10.96.1.2"]);
    eventually(BACK, "stale cleared", || {
        metric(&second, r#"skyline_source_stale{source="kubernetes"}"#) == Some(0.0)
    });
    assert_eq!(http_get(second.http_addr(), "/ready"), (200, "OK".to_owned()));
    eventually(WRITTEN, "the API server's data written again", || {
        file_holds(&file, "svc2")
    });
}
