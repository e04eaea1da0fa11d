//! The hosts source end to end, as CoreDNS's `hosts` plugin answers: names of a hosts file and
//! of inline entries answer A, AAAA and PTR with the configured TTL; a name without the type
//! asked is NODATA; a missing name is SERVFAIL, or with `fallthrough` forwarded; the file is
//! read again when it changes, and a broken one leaves the last good data served; the cluster
//! zones answer their own names first. Replies are read with hickory-proto.

mod common;
mod kubernetes_api;
mod upstream;

use common::{eventually, http_get, metric_value, Skyline, HTTP_ANY_PORT};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use kubernetes_api::objects::{cluster_ip, namespace};
use kubernetes_api::FakeApi;
use std::path::{Path, PathBuf};
use std::time::Duration;
use upstream::{Script, Scripted, GOOD};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.9.0.1"}}"#;

/// k3s's NodeHosts, with a comment and an IPv6 address.
const NODE_HOSTS: &str = "# written by k3s\n192.168.1.10 node-a\n192.168.1.11 node-b node-b.lan\nfd00::10 node-a\n";

/// How long a change of the file may take to be served, with `--hosts-reload 100ms`.
const RELOADED: Duration = Duration::from_secs(5);

/// A hosts file holding `text`, in a directory of its own.
fn hosts_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("NodeHosts");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// Replaces the file as an editor or a ConfigMap update does: written aside, renamed over.
fn rewrite(path: &Path, text: &str) {
    let aside = path.with_extension("new");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

/// The answer section as `ttl data` lines, in order; the reply must be NOERROR.
fn records(reply: &Message) -> Vec<String> {
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{reply:?}");
    reply
        .answers()
        .iter()
        .map(|r| format!("{} {}", r.ttl(), r.data().map(ToString::to_string).unwrap_or_default()))
        .collect()
}

fn skyline(path: &Path, args: &[&str]) -> Skyline {
    let mut all = vec!["--hosts", path.to_str().unwrap()];
    all.extend_from_slice(args);
    Skyline::start(RECORDS, &all, &[])
}

#[test]
fn file_and_inline_names_answer_a_aaaa_and_ptr_with_the_ttl() {
    let (_dir, path) = hosts_file(NODE_HOSTS);
    let s = skyline(
        &path,
        &[
            "--hosts-entry",
            "10.0.0.53 DNS.lan",
            "--hosts-ttl",
            "60",
            HTTP_ANY_PORT[0],
            HTTP_ANY_PORT[1],
        ],
    );
    let a = s.udp("Node-A.", RecordType::A);
    assert_eq!(records(&a), ["60 192.168.1.10"]);
    assert!(a.authoritative(), "the names the plugin holds are its own");
    assert_eq!(records(&s.udp("node-a.", RecordType::AAAA)), ["60 fd00::10"]);
    assert_eq!(records(&s.tcp("node-b.lan.", RecordType::A)), ["60 192.168.1.11"]);
    assert_eq!(records(&s.udp("dns.lan.", RecordType::A)), ["60 10.0.0.53"], "inline");
    assert_eq!(
        records(&s.udp("11.1.168.192.in-addr.arpa.", RecordType::PTR)),
        ["60 node-b.", "60 node-b.lan."]
    );
    assert_eq!(
        records(&s.udp(
            "0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.",
            RecordType::PTR
        )),
        ["60 node-a."]
    );
    assert_eq!(
        records(&s.udp("web.skydns.local.", RecordType::A)),
        ["3600 10.9.0.1"],
        "the SkyDNS domain is served beside"
    );
    let (_, metrics) = http_get(s.http_addr(), "/metrics").unwrap();
    assert_eq!(metric_value(&metrics, "coredns_hosts_entries"), Some(5.0));
    assert!(metric_value(&metrics, "coredns_hosts_reload_timestamp_seconds").is_some_and(|t| t > 1.7e9));
}

#[test]
fn no_reverse_leaves_the_addresses_without_ptr() {
    let (_dir, path) = hosts_file(NODE_HOSTS);
    let s = skyline(&path, &["--hosts-no-reverse"]);
    assert_eq!(records(&s.udp("node-a.", RecordType::A)), ["3600 192.168.1.10"]);
    assert_eq!(
        s.udp("10.1.168.192.in-addr.arpa.", RecordType::PTR).response_code(),
        ResponseCode::Refused,
        "no PTR: passed on, and with no upstream refused"
    );
}

#[test]
fn a_name_without_the_type_asked_is_nodata_and_a_missing_name_servfail() {
    let (_dir, path) = hosts_file(NODE_HOSTS);
    let s = skyline(&path, &[]);
    let nodata = s.udp("node-b.", RecordType::AAAA);
    assert_eq!(nodata.response_code(), ResponseCode::NoError);
    assert!(nodata.answers().is_empty());
    assert!(s.udp("node-b.", RecordType::TXT).answers().is_empty());
    assert_eq!(
        s.udp("node-c.", RecordType::A).response_code(),
        ResponseCode::ServFail,
        "without fallthrough, a name of the zone `.` the file lacks has no answer (CoreDNS)"
    );
    assert_eq!(
        s.udp("gone.skydns.local.", RecordType::A).response_code(),
        ResponseCode::NXDomain,
        "the SkyDNS domain still denies its own names"
    );
}

#[test]
fn with_fallthrough_what_the_file_lacks_is_forwarded() {
    let upstream = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::ZERO,
    });
    let (_dir, path) = hosts_file(NODE_HOSTS);
    let servers = upstream.addr.to_string();
    let s = skyline(&path, &["--hosts-fallthrough", "--nameservers", &servers]);
    let forwarded = s.udp("elsewhere.example.", RecordType::A);
    assert_eq!(common::a_of(&forwarded), [GOOD]);
    assert_eq!(upstream.count("elsewhere.example."), 1);
    assert_eq!(records(&s.udp("node-a.", RecordType::A)), ["3600 192.168.1.10"]);
    assert_eq!(upstream.count("node-a."), 0, "the hosts names are answered here");
    let nodata = s.udp("node-b.", RecordType::AAAA);
    assert!(
        nodata.response_code() == ResponseCode::NoError && nodata.answers().is_empty(),
        "a name the file holds is NODATA for the other type, not forwarded"
    );
    assert_eq!(upstream.count("node-b."), 0);
}

#[test]
fn an_edited_file_is_served_within_the_reload_interval_and_a_broken_one_is_not() {
    let (_dir, path) = hosts_file(NODE_HOSTS);
    let s = skyline(&path, &["--hosts-reload", "100ms"]);
    assert_eq!(records(&s.udp("node-a.", RecordType::A)), ["3600 192.168.1.10"]);

    rewrite(&path, "192.168.1.20 node-a\n192.168.1.12 node-c\n");
    eventually(RELOADED, "the edited file to be served", || {
        s.udp("node-c.", RecordType::A).response_code() == ResponseCode::NoError
    });
    assert_eq!(records(&s.udp("node-a.", RecordType::A)), ["3600 192.168.1.20"]);
    assert_eq!(s.udp("node-b.", RecordType::A).response_code(), ResponseCode::ServFail);

    rewrite(&path, "192.168.1.30 node-a\nnot-an-address node-d\n");
    eventually(RELOADED, "the broken file to be reported", || {
        s.log_count("keeping the last good data") >= 1
    });
    assert!(
        s.log.lock().unwrap().iter().any(|l| l.contains("line 2")),
        "the log names the bad line"
    );
    assert_eq!(records(&s.udp("node-a.", RecordType::A)), ["3600 192.168.1.20"]);

    std::fs::remove_file(&path).unwrap();
    eventually(RELOADED, "the missing file to be reported", || {
        s.log_count("keeping the last good data") >= 2
    });
    assert_eq!(records(&s.udp("node-c.", RecordType::A)), ["3600 192.168.1.12"]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        s.log_count("keeping the last good data"),
        2,
        "said once per change of the file, not at every check"
    );

    rewrite(&path, "192.168.1.40 node-a\n");
    eventually(RELOADED, "the restored file to be served", || {
        common::a_of(&s.udp("node-a.", RecordType::A)) == [std::net::Ipv4Addr::new(192, 168, 1, 40)]
    });
}

#[test]
fn the_cluster_answers_its_own_names_and_hosts_the_rest() {
    let api = FakeApi::start();
    api.apply(namespace("default"));
    api.apply(cluster_ip(
        "default",
        "kubernetes",
        &["10.96.0.1"],
        &[("https", 443, "TCP")],
    ));
    let (_dir, path) = hosts_file(&format!(
        "{NODE_HOSTS}10.0.0.99 kubernetes.default.svc.cluster.local\n10.96.0.1 node-api\n"
    ));
    let kube = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig(kube.path());
    let s = Skyline::start_with(
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--kubernetes-fallthrough",
            "in-addr.arpa.,ip6.arpa.",
            "--hosts",
            path.to_str().unwrap(),
            "--hosts-fallthrough",
        ],
        &[("SKYLINE_RESOLV_CONF", "none")],
    );
    eventually(Duration::from_secs(10), "the cluster zones to sync", || {
        s.udp("dns-version.cluster.local.", RecordType::TXT).response_code() == ResponseCode::NoError
    });
    assert_eq!(
        records(&s.udp("kubernetes.default.svc.cluster.local.", RecordType::A)),
        ["5 10.96.0.1"],
        "the cluster's name, not the file's"
    );
    assert_eq!(
        s.udp("nothing.default.svc.cluster.local.", RecordType::A)
            .response_code(),
        ResponseCode::NXDomain,
        "the cluster zone denies its missing names"
    );
    assert_eq!(records(&s.udp("node-a.", RecordType::A)), ["3600 192.168.1.10"]);
    assert_eq!(
        records(&s.udp("10.1.168.192.in-addr.arpa.", RecordType::PTR)),
        ["3600 node-a."],
        "the cluster's reverse zone passes the node addresses on to the hosts names"
    );
    assert_eq!(
        records(&s.udp("1.0.96.10.in-addr.arpa.", RecordType::PTR)),
        ["5 kubernetes.default.svc.cluster.local."],
        "a cluster address is the cluster's"
    );
    api.apply(cluster_ip("default", "late", &["10.96.0.7"], &[("https", 443, "TCP")]));
    eventually(
        Duration::from_secs(10),
        "a new service to be served under the hosts names",
        || s.udp("late.default.svc.cluster.local.", RecordType::A).response_code() == ResponseCode::NoError,
    );
    assert_eq!(records(&s.udp("node-b.", RecordType::A)), ["3600 192.168.1.11"]);
}

#[test]
fn a_sighup_refuses_a_broken_hosts_file_as_a_start_does() {
    let (_dir, path) = hosts_file(NODE_HOSTS);
    let s = skyline(&path, &["--hosts-reload", "0s"]);
    rewrite(&path, "192.168.1.10 node-a\n10.0.0.1\n");
    s.hup();
    eventually(RELOADED, "the reload to be refused", || {
        s.log.lock().unwrap().iter().any(|l| {
            l.contains("SIGHUP: configuration not reloaded") && l.contains("line 2: address 10.0.0.1 has no name")
        })
    });
    assert_eq!(
        records(&s.udp("node-b.", RecordType::A)),
        ["3600 192.168.1.11"],
        "with reload 0 the file is never read again: the data of the start serves"
    );
}
