//! End-to-end tests of autopath (docs/kubernetes.md, "Autopath"): the real `skyline` binary
//! watching the fake API server of `kubernetes_api`, one Pod of which has the loopback address
//! its questions are sent from, forwarding to a scripted upstream on 127.0.0.1; every reply read
//! by hickory-proto. Each test is bounded: waits poll with a limit.

mod common;
mod kubernetes_api;
mod upstream;

use common::{eventually, metric_sum, Skyline, HTTP_ANY_PORT};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};
use kubernetes_api::objects::{cluster_ip, namespace, pod};
use kubernetes_api::FakeApi;
use std::net::Ipv4Addr;
use std::time::Duration;
use upstream::{Script, Scripted, GOOD};

/// How long a change may take to show in answers (debounce + build, with slack for slow CI).
const SETTLE: Duration = Duration::from_secs(15);

/// The address of the Pod `client` of `testns`, which the pod's questions come from.
const POD: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// A client that is no pod.
const STRANGER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

/// Namespaces `testns` and `otherns`, the services `svc1.testns` (10.96.1.1) and `svc2.otherns`
/// (10.96.2.2), and the Pod `client` at [`POD`].
fn populate(api: &FakeApi) {
    for ns in ["default", "testns", "otherns"] {
        api.apply(namespace(ns));
    }
    api.apply(cluster_ip("testns", "svc1", &["10.96.1.1"], &[("http", 80, "TCP")]));
    api.apply(cluster_ip("otherns", "svc2", &["10.96.2.2"], &[("http", 80, "TCP")]));
    api.apply(pod("testns", "client", &POD.to_string()));
}

/// skyline on `api` with verified pods, autopath and `more`, forwarding to `upstream`.
fn skyline(api: &FakeApi, upstream: &Scripted, more: &[&str]) -> (Skyline, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig(dir.path());
    let nameservers = upstream.addr.to_string();
    let mut args = vec![
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--kubernetes-pods",
        "verified",
        "--kubernetes-autopath",
        "--nameservers",
        nameservers.as_str(),
    ];
    args.extend_from_slice(more);
    (Skyline::start_with(&args, &[("SKYLINE_RESOLV_CONF", "none")]), dir)
}

/// Starts the fake API server with [`populate`]'s objects, an upstream answering every A
/// question with [`GOOD`], and skyline on both; waits until the pod's questions are searched.
fn started(more: &[&str]) -> (FakeApi, Scripted, Skyline, tempfile::TempDir) {
    let api = FakeApi::start();
    populate(&api);
    let upstream = Scripted::start(Script::Address {
        ttl: 300,
        delay: Duration::ZERO,
    });
    let (s, dir) = skyline(&api, &upstream, more);
    eventually(SETTLE, "the pod's questions to be searched", || {
        s.udp_from(
            POD,
            "svc1.testns.svc.cluster.local.testns.svc.cluster.local.",
            RecordType::A,
        )
        .response_code()
            == ResponseCode::NoError
    });
    (api, upstream, s, dir)
}

fn lines(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r.record_type(),
                r.data().map(ToString::to_string).unwrap_or_default()
            )
        })
        .collect()
}

/// Checks that `reply` answers the question `asked` with a CNAME to `target` first, and
/// returns the rest of its answer section.
fn after_cname(reply: &Message, asked: &str, target: &str) -> Vec<String> {
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{reply:?}");
    assert_eq!(reply.queries()[0].name().to_ascii(), asked, "the question as asked");
    let (first, rest) = reply.answers().split_first().expect("an answer");
    assert_eq!(first.name().to_ascii(), asked, "the CNAME is owned by the name asked");
    match first.data() {
        Some(RData::CNAME(to)) => assert_eq!(to.0.to_ascii(), target),
        other => panic!("not a CNAME first: {other:?}"),
    }
    lines(rest)
}

#[test]
fn a_pods_question_for_a_service_under_its_own_domain_is_answered_with_the_service() {
    let (_api, _upstream, s, _dir) = started(&[]);
    let asked = "svc1.testns.svc.cluster.local.testns.svc.cluster.local.";
    let reply = s.udp_from(POD, asked, RecordType::A);
    assert_eq!(
        after_cname(&reply, asked, "svc1.testns.svc.cluster.local."),
        ["A 10.96.1.1"]
    );
    assert!(reply.authoritative());
}

#[test]
fn a_service_of_another_namespace_is_found_under_svc_of_the_zone() {
    let (_api, _upstream, s, _dir) = started(&[]);
    let asked = "svc2.otherns.testns.svc.cluster.local.";
    let reply = s.udp_from(POD, asked, RecordType::A);
    assert_eq!(
        after_cname(&reply, asked, "svc2.otherns.svc.cluster.local."),
        ["A 10.96.2.2"]
    );
}

#[test]
fn a_name_outside_the_cluster_is_forwarded_bare_and_answered_at_the_first_question() {
    let (_api, upstream, s, _dir) = started(&[]);
    let asked = "www.example.org.testns.svc.cluster.local.";
    let reply = s.udp_from(POD, asked, RecordType::A);
    assert_eq!(after_cname(&reply, asked, "www.example.org."), [format!("A {GOOD}")]);
    assert_eq!(reply.answers()[1].name().to_ascii(), "www.example.org.");
    assert!(!reply.authoritative(), "the upstream's answer");
    assert_eq!(upstream.count("www.example.org."), 1, "the upstream saw the bare name");
    let asked_upstream: Vec<String> = upstream
        .queries()
        .iter()
        .filter_map(|q| q.queries().first().map(|q| q.name().to_ascii()))
        .collect();
    assert!(
        asked_upstream.iter().all(|name| !name.ends_with("cluster.local.")),
        "no cluster name reaches the upstream: {asked_upstream:?}"
    );
}

#[test]
fn the_hosts_search_domains_are_tried_before_the_bare_name() {
    let (_api, upstream, s, _dir) = started(&["--kubernetes-autopath-search", "corp.example"]);
    let asked = "www.example.org.testns.svc.cluster.local.";
    let reply = s.udp_from(POD, asked, RecordType::A);
    assert_eq!(
        after_cname(&reply, asked, "www.example.org.corp.example."),
        [format!("A {GOOD}")]
    );
    assert_eq!(upstream.count("www.example.org.corp.example."), 1);
    assert_eq!(
        upstream.count("www.example.org."),
        0,
        "the first name found ends the search"
    );
}

#[test]
fn a_client_that_is_no_pod_gets_nxdomain_and_only_searches_are_counted() {
    let (_api, upstream, s, _dir) = started(&HTTP_ANY_PORT);
    let asked = "www.example.org.testns.svc.cluster.local.";
    let reply = s.udp_from(STRANGER, asked, RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    assert!(reply.answers().is_empty() && reply.authoritative());
    assert_eq!(upstream.count("www.example.org."), 0);
    let counted = || {
        let (_, body) = common::http_get(s.http_addr(), "/metrics").expect("/metrics");
        metric_sum(&body, "coredns_autopath_success_total", &[]).expect("the autopath counter")
    };
    let before = counted();
    s.udp_from(POD, "svc2.otherns.testns.svc.cluster.local.", RecordType::A);
    eventually(Duration::from_secs(5), "the search to be counted", || {
        counted() == before + 1.0
    });
}
