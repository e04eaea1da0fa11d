//! End-to-end tests of `skyline kube2etcd`: the real binary mirrors the fake API server of
//! `kubernetes_api` into a real etcd; a second skyline serves that etcd, a third serves the same
//! objects from its Kubernetes source, and their answers are compared with hickory-proto. Every
//! wait is bounded.

mod common;
mod etcd_harness;
mod kubernetes_api;

use common::{eventually, http_get, metric_value, stop_child, Skyline};
use etcd_harness::{etcd_available, Etcd, EtcdClient};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use kubernetes_api::objects::{cluster_ip, external, headless, namespace, slice};
use kubernetes_api::{FakeApi, Resource};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a change may take to reach etcd and the answers read from it.
const SETTLE: Duration = Duration::from_secs(20);

fn z(relative: &str) -> String {
    format!("{relative}.cluster.local.")
}

/// A running `skyline kube2etcd`.
struct Writer {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Writer {
    fn start(api: &FakeApi, etcd: &str, name: &str) -> Writer {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = api.kubeconfig(dir.path());
        let mut child = Command::new(env!("CARGO_BIN_EXE_skyline"))
            .args(["kube2etcd", "--kubeconfig", kubeconfig.to_str().unwrap()])
            .args(["--machines", etcd, "--lease-ttl", "2", "--identity", name])
            .args(["--http-addr", "127.0.0.1:0"])
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
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
        Writer { child, log, _dir: dir }
    }

    /// Starts a second replica and waits until it has listed the cluster.
    fn standby(api: &FakeApi, etcd: &str, name: &str) -> Writer {
        let standby = Writer::start(api, etcd, name);
        eventually(SETTLE, "the standby has listed", || {
            http_get(standby.http(), "/ready").is_some_and(|(status, _)| status == 200)
        });
        standby
    }

    fn http(&self) -> SocketAddr {
        let find = || {
            self.log.lock().unwrap().iter().find_map(|line| {
                let at = line.find("http on http://")? + "http on http://".len();
                line[at..].split_whitespace().next()?.parse().ok()
            })
        };
        eventually(Duration::from_secs(10), "kube2etcd reports its HTTP address", || {
            find().is_some()
        });
        find().unwrap()
    }

    fn metric(&self, series: &str) -> f64 {
        let (status, body) = http_get(self.http(), "/metrics").expect("/metrics answers");
        assert_eq!(status, 200);
        metric_value(&body, series).unwrap_or_else(|| panic!("no {series} in:\n{body}"))
    }

    /// Waits until this replica leads and has written everything it knows of.
    fn wait_written(&self) {
        eventually(SETTLE, "kube2etcd leads and has written everything", || {
            self.metric("skyline_kube2etcd_leader") == 1.0
                && self.metric("skyline_kube2etcd_resyncs_total") >= 1.0
                && self.metric("skyline_kube2etcd_pending_keys") == 0.0
        });
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        stop_child(&mut self.child, "kube2etcd");
    }
}

/// A cluster with one service of each kind in `testns`.
fn populate(api: &FakeApi) {
    api.apply(namespace("testns"));
    api.apply(cluster_ip(
        "testns",
        "svc1",
        &["10.96.1.1"],
        &[("http", 80, "TCP"), ("", 53, "UDP")],
    ));
    api.apply(slice(
        "testns",
        "svc1-abc",
        "svc1",
        &[("http", 8080, "TCP")],
        &[("10.1.1.1", true, None), ("10.1.1.2", false, None)],
    ));
    api.apply(headless("testns", "hl", &[("http", 80, "TCP")]));
    api.apply(slice(
        "testns",
        "hl-abc",
        "hl",
        &[("http", 8080, "TCP")],
        &[("10.1.2.1", true, Some("web-0")), ("10.1.2.2", true, None)],
    ));
    api.apply(external("testns", "ext", "www.example.org"));
}

/// A real etcd with a client, and the fake API server holding [`populate`]'s cluster.
fn populated() -> (Etcd, EtcdClient, FakeApi) {
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    let api = FakeApi::start();
    populate(&api);
    (etcd, client, api)
}

/// What an answer says, for comparing two servers: the rcode and the sorted answer data, SRV
/// records without their priority (the SkyDNS schema has none of 0: a reader gives its
/// configured default, 10).
fn gist(reply: &Message) -> (ResponseCode, Vec<String>) {
    let mut data: Vec<String> = reply
        .answers()
        .iter()
        .filter_map(|r| r.data())
        .map(|d| match d {
            RData::SRV(srv) => format!("SRV {} {} {}", srv.weight(), srv.port(), srv.target()),
            other => other.to_string(),
        })
        .collect();
    data.sort();
    (reply.response_code(), data)
}

/// Starts the reader of etcd and the Kubernetes source's server on the same objects.
fn readers(api: &FakeApi, etcd: &str) -> (Skyline, Skyline, tempfile::TempDir) {
    let reader = Skyline::start_with(&["--machines", etcd, "--domain", "cluster.local.", "--no-rec"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig(dir.path());
    let kube = Skyline::start_with(
        &["--kubeconfig", kubeconfig.to_str().unwrap(), "--no-rec"],
        &[("SKYLINE_RESOLV_CONF", "none")],
    );
    (reader, kube, dir)
}

fn same(reader: &Skyline, kube: &Skyline, name: &str, rtype: RecordType) {
    let limit = SETTLE;
    let mut last = None;
    let agree = || {
        let pair = (gist(&reader.udp(name, rtype)), gist(&kube.udp(name, rtype)));
        let equal = pair.0 == pair.1 && pair.0 .0 != ResponseCode::ServFail;
        (equal, pair)
    };
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        let (equal, pair) = agree();
        if equal {
            return;
        }
        last = Some(pair);
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{name} {rtype}: etcd reader vs Kubernetes source: {last:?}");
}

const NAMES: &[(&str, RecordType)] = &[
    ("svc1.testns.svc", RecordType::A),
    ("svc1.testns.svc", RecordType::SRV),
    ("_http._tcp.svc1.testns.svc", RecordType::SRV),
    ("_http._tcp.svc1.testns.svc", RecordType::A),
    ("hl.testns.svc", RecordType::A),
    ("hl.testns.svc", RecordType::SRV),
    ("_http._tcp.hl.testns.svc", RecordType::SRV),
    ("web-0.hl.testns.svc", RecordType::A),
    ("10-1-2-2.hl.testns.svc", RecordType::A),
    ("10-1-1-1.svc1.testns.svc", RecordType::A),
    ("missing.testns.svc", RecordType::A),
    ("_udp.svc1.testns.svc", RecordType::A),
    ("dns-version", RecordType::TXT),
];

#[test]
fn answers_read_from_etcd_equal_the_kubernetes_sources_and_follow_changes() {
    if !etcd_available() {
        return;
    }
    let (etcd, _, api) = populated();
    let writer = Writer::start(&api, &etcd.endpoint(), "one");
    writer.wait_written();
    let (reader, kube, _dir) = readers(&api, &etcd.endpoint());
    for (name, rtype) in NAMES {
        same(&reader, &kube, &z(name), *rtype);
    }
    for ptr in [
        "1.1.96.10.in-addr.arpa.",
        "1.2.1.10.in-addr.arpa.",
        "2.2.1.10.in-addr.arpa.",
        "1.1.1.10.in-addr.arpa.",
    ] {
        same(&reader, &kube, ptr, RecordType::PTR);
    }
    // An ExternalName service is a pure alias in the Kubernetes source; as a SkyDNS record with
    // a name host it answers flattened (docs/kube2etcd.md), so no CNAME sits beside its SRV.
    let ext = kube.udp(&z("ext.testns.svc"), RecordType::CNAME);
    assert_eq!(gist(&ext).1, ["www.example.org."], "{ext:?}");
    let ext = reader.udp(&z("ext.testns.svc"), RecordType::CNAME);
    assert_eq!(gist(&ext), (ResponseCode::NoError, vec![]), "{ext:?}");

    // Live: a new service, an endpoint that moves and one that turns ready, a service deleted.
    api.apply(cluster_ip("testns", "new", &["10.96.1.9"], &[("dns", 53, "UDP")]));
    api.apply(slice(
        "testns",
        "hl-abc",
        "hl",
        &[("http", 8080, "TCP")],
        &[
            ("10.1.2.7", true, Some("web-0")),
            ("10.1.2.2", true, None),
            ("10.1.2.3", true, Some("web-2")),
        ],
    ));
    api.delete(Resource::Service, "testns", "svc1");
    eventually(SETTLE, "a deleted service's keys are gone", || {
        reader.udp(&z("svc1.testns.svc"), RecordType::A).response_code() == ResponseCode::NXDomain
    });
    for (name, rtype) in [
        ("new.testns.svc", RecordType::A),
        ("_dns._udp.new.testns.svc", RecordType::SRV),
        ("hl.testns.svc", RecordType::A),
        ("_http._tcp.hl.testns.svc", RecordType::SRV),
        ("web-0.hl.testns.svc", RecordType::A),
        ("web-2.hl.testns.svc", RecordType::A),
        ("svc1.testns.svc", RecordType::A),
        ("_http._tcp.svc1.testns.svc", RecordType::SRV),
    ] {
        same(&reader, &kube, &z(name), rtype);
    }
    same(&reader, &kube, "7.2.1.10.in-addr.arpa.", RecordType::PTR);
    // The address web-0 left has no PTR any more. The etcd reader does not own the reverse
    // zones, so it refuses (or forwards) what it holds no PTR for.
    eventually(SETTLE, "the old address's PTR is gone", || {
        reader
            .udp("1.2.1.10.in-addr.arpa.", RecordType::PTR)
            .answers()
            .is_empty()
    });
}

#[test]
fn a_restarted_writer_rewrites_no_unchanged_key_deletes_stale_ones_and_nothing_outside() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    let outside = [
        ("/skydns/local/other/web", r#"{"host":"192.0.2.1"}"#),
        ("/skydns/local/cluster/dns/ns/ns1", r#"{"host":"192.0.2.53"}"#),
        ("/skydns/arpa/in-addr/192/0/2/1", r#"{"host":"mail.example.org"}"#),
        ("/elsewhere/key", "not a record"),
    ];
    for (key, value) in outside {
        client.put(key, value);
    }
    let api = FakeApi::start();
    populate(&api);
    let mut first = Writer::start(&api, &etcd.endpoint(), "first");
    first.wait_written();
    let before: BTreeMap<String, (String, i64)> = client
        .get_prefix("/skydns/")
        .into_iter()
        .map(|(k, v, rev)| (k, (v, rev)))
        .collect();
    assert!(before.len() > 10, "{before:?}");
    first.kill();

    // While no writer runs: a key of a service that no longer exists, and a changed value.
    let stale = "/skydns/local/cluster/svc/testns/gone/_ip-10-96-9-9";
    client.put(stale, r#"{"host":"10.96.9.9","ttl":5,"group":"service"}"#);
    let changed = "/skydns/local/cluster/svc/testns/svc1/_ip-10-96-1-1";
    client.put(changed, r#"{"host":"10.96.1.99"}"#);

    let second = Writer::start(&api, &etcd.endpoint(), "second");
    second.wait_written();
    let after: BTreeMap<String, (String, i64)> = client
        .get_prefix("/skydns/")
        .into_iter()
        .map(|(k, v, rev)| (k, (v, rev)))
        .collect();
    assert!(
        !after.contains_key(stale),
        "the stale key is deleted:\n{}",
        second.log_text()
    );
    assert_eq!(after[changed].0, before[changed].0, "the changed value is put back");
    for (key, (value, revision)) in &before {
        if key != changed {
            assert_eq!(after.get(key), Some(&(value.clone(), *revision)), "{key} untouched");
        }
    }
    for (key, value) in outside {
        let held = client.get_prefix(key);
        assert_eq!(held.first().map(|h| h.1.as_str()), Some(value), "{key} survives");
    }
    assert_eq!(
        second.metric("skyline_kube2etcd_puts_total"),
        1.0,
        "only the changed key"
    );
    assert_eq!(
        second.metric("skyline_kube2etcd_deletes_total"),
        1.0,
        "only the stale key"
    );
}

#[test]
fn of_two_writers_one_leads_and_the_other_takes_over_when_it_is_killed() {
    if !etcd_available() {
        return;
    }
    let (etcd, _, api) = populated();
    let mut leader = Writer::start(&api, &etcd.endpoint(), "a");
    leader.wait_written();
    let standby = Writer::standby(&api, &etcd.endpoint(), "b");
    assert_eq!(standby.metric("skyline_kube2etcd_leader"), 0.0);
    assert_eq!(
        standby.metric("skyline_kube2etcd_txns_total"),
        0.0,
        "a standby writes nothing"
    );

    leader.kill();
    api.apply(cluster_ip("testns", "later", &["10.96.1.20"], &[("http", 80, "TCP")]));
    standby.wait_written();
    let reader = Skyline::start_with(
        &["--machines", &etcd.endpoint(), "--domain", "cluster.local.", "--no-rec"],
        &[],
    );
    eventually(SETTLE, "the new leader's write is served", || {
        gist(&reader.udp(&z("later.testns.svc"), RecordType::A)).1 == ["10.96.1.20"]
    });
}

#[test]
fn faults_leave_etcd_as_it_is_and_etcd_back_is_resynced() {
    if !etcd_available() {
        return;
    }
    let (mut etcd, client, api) = populated();
    let writer = Writer::start(&api, &etcd.endpoint(), "one");
    writer.wait_written();
    let held = client.get_prefix("/skydns/");

    // The API server goes away: nothing is deleted.
    api.kill();
    eventually(SETTLE, "the watch failure is counted", || {
        writer.metric("skyline_kube2etcd_kubernetes_errors_total") >= 1.0
    });
    assert_eq!(client.get_prefix("/skydns/"), held, "etcd left as it is");
    api.restart();

    // etcd goes away and comes back: the writer campaigns again, reads etcd and writes on.
    etcd.kill();
    api.apply(cluster_ip("testns", "during", &["10.96.1.30"], &[("http", 80, "TCP")]));
    std::thread::sleep(Duration::from_secs(1));
    etcd.restart();
    etcd.wait_healthy();
    eventually(SETTLE, "the change made while etcd was down is written", || {
        let client = EtcdClient::connect(&[etcd.endpoint()]);
        !client.get_prefix("/skydns/local/cluster/svc/testns/during/").is_empty()
    });
    assert!(
        writer.metric("skyline_kube2etcd_resyncs_total") >= 2.0,
        "{}",
        writer.log_text()
    );
    assert!(writer.metric("skyline_kube2etcd_etcd_errors_total") >= 1.0);
}

#[test]
fn a_re_list_after_an_expired_watch_writes_only_what_was_missed() {
    if !etcd_available() {
        return;
    }
    let (etcd, client, api) = populated();
    let writer = Writer::start(&api, &etcd.endpoint(), "one");
    writer.wait_written();
    let puts = writer.metric("skyline_kube2etcd_puts_total");
    // A deletion the watch never sees, then 410 Gone: only the re-list can tell.
    api.delete_unseen(Resource::Service, "testns", "svc1");
    api.expire();
    eventually(SETTLE, "the missed deletion is written after the re-list", || {
        client.get_prefix("/skydns/local/cluster/svc/testns/svc1/").is_empty()
    });
    eventually(SETTLE, "the re-list is followed by a resync", || {
        writer.metric("skyline_kube2etcd_resyncs_total") >= 2.0
    });
    assert_eq!(
        writer.metric("skyline_kube2etcd_puts_total"),
        puts,
        "no key written again"
    );
    assert!(!client.get_prefix("/skydns/local/cluster/svc/testns/hl/").is_empty());
}

#[test]
fn a_leader_whose_election_key_is_gone_writes_nothing_more() {
    if !etcd_available() {
        return;
    }
    let (etcd, client, api) = populated();
    let deposed = Writer::start(&api, &etcd.endpoint(), "a");
    deposed.wait_written();
    let standby = Writer::standby(&api, &etcd.endpoint(), "b");
    // As if its lease had expired while it was cut off: its election key goes, the standby is
    // elected, and the old leader's next transaction fails on the leadership condition.
    let keys = client.get_prefix("/kube2etcd/");
    let own = keys
        .iter()
        .find(|(_, value, _)| value == "a")
        .expect("the leader's election key");
    let txns = deposed.metric("skyline_kube2etcd_txns_total");
    client.delete(&own.0);
    api.apply(cluster_ip("testns", "after", &["10.96.1.40"], &[("http", 80, "TCP")]));
    eventually(SETTLE, "the standby leads and writes the change", || {
        standby.metric("skyline_kube2etcd_leader") == 1.0
            && !client.get_prefix("/skydns/local/cluster/svc/testns/after/").is_empty()
    });
    eventually(SETTLE, "the old leader knows it is not leading", || {
        deposed.metric("skyline_kube2etcd_leader") == 0.0
    });
    assert_eq!(
        deposed.metric("skyline_kube2etcd_txns_total"),
        txns,
        "{}",
        deposed.log_text()
    );
}

#[test]
fn hundreds_of_addresses_are_written_in_transactions_etcd_accepts() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    let api = FakeApi::start();
    api.apply(namespace("big"));
    api.apply(headless("big", "many", &[("http", 80, "TCP")]));
    // 300 endpoints: 300 PTR keys, which sort first, so that whole transactions of them would
    // carry more compares than etcd's default limit of 128 allows.
    let addresses: Vec<String> = (0..300).map(|i| format!("10.3.{}.{}", i / 250, 1 + i % 250)).collect();
    let endpoints: Vec<(&str, bool, Option<&str>)> = addresses.iter().map(|a| (a.as_str(), true, None)).collect();
    api.apply(slice("big", "many-abc", "many", &[("http", 8080, "TCP")], &endpoints));
    let writer = Writer::start(&api, &etcd.endpoint(), "one");
    writer.wait_written();
    assert_eq!(client.get_prefix("/skydns/arpa/in-addr/10/3/").len(), 300);
    assert_eq!(
        writer.metric("skyline_kube2etcd_etcd_errors_total"),
        0.0,
        "{}",
        writer.log_text()
    );
}
