//! End-to-end tests of Kubernetes cluster DNS: the real `skyline` binary with a kubeconfig
//! pointing at a fake API server on 127.0.0.1 that speaks the real list/watch protocol
//! (`kubernetes_api`), queried with hickory-proto. Each test is bounded: waits poll with a limit.

mod common;
mod kubernetes_api;

use common::{eventually, free_port, Skyline, HTTP_ANY_PORT};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use kubernetes_api::objects::{cluster_ip, external, headless, namespace, pod, slice};
use kubernetes_api::{kubeconfig_for, Credential, FakeApi, Pki, Resource};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a change may take to show in answers (debounce + build, with slack for slow CI).
const SETTLE: Duration = Duration::from_secs(15);

fn z(relative: &str) -> String {
    format!("{relative}.cluster.local.")
}

/// Sorted data of the answer section; panics unless NOERROR.
fn data(reply: &Message) -> Vec<String> {
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{reply:?}");
    let mut data: Vec<String> = reply
        .answers()
        .iter()
        .map(|r| r.data().map(ToString::to_string).unwrap_or_default())
        .collect();
    data.sort();
    data
}

fn rcode(s: &Skyline, name: &str, rtype: RecordType) -> ResponseCode {
    s.udp(name, rtype).response_code()
}

fn assert_nxdomain(s: &Skyline, name: &str, rtype: RecordType) {
    let reply = s.udp(name, rtype);
    assert_eq!(
        reply.response_code(),
        ResponseCode::NXDomain,
        "{name} {rtype}: {reply:?}"
    );
    assert!(reply.authoritative(), "{name}");
    assert_eq!(reply.name_servers().len(), 1, "SOA with the denial: {name}");
}

fn assert_nodata(s: &Skyline, name: &str, rtype: RecordType) {
    let reply = s.udp(name, rtype);
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{name} {rtype}");
    assert!(reply.answers().is_empty(), "{name} {rtype}: {:?}", reply.answers());
    assert_eq!(reply.name_servers().len(), 1, "SOA with the NODATA: {name}");
}

/// `GET path` over plain HTTP/1.1: the status code and the body.
fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: skyline\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete HTTP response");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code");
    (status, body.to_owned())
}

/// The value of the unlabelled series `name` in `/metrics`.
fn metric(s: &Skyline, name: &str) -> u64 {
    let (status, body) = http_get(s.http_addr(), "/metrics");
    assert_eq!(status, 200);
    body.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

/// Starts skyline on `api`'s kubeconfig with `args`.
fn skyline(api: &FakeApi, args: &[&str]) -> (Skyline, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig(dir.path());
    let mut all = vec!["--kubeconfig", kubeconfig.to_str().unwrap()];
    all.extend_from_slice(args);
    (Skyline::start_with(&all, &[("SKYLINE_RESOLV_CONF", "none")]), dir)
}

/// Waits until the cluster zones are served from synced data.
fn wait_synced(s: &Skyline) {
    eventually(SETTLE, "the cluster zones to sync", || {
        rcode(s, &z("dns-version"), RecordType::TXT) == ResponseCode::NoError
    });
}

/// A cluster with one of each kind of service in namespace `testns`.
fn populate(api: &FakeApi) {
    for ns in ["default", "testns"] {
        api.apply(namespace(ns));
    }
    api.apply(cluster_ip(
        "default",
        "kubernetes",
        &["10.96.0.1"],
        &[("https", 443, "TCP")],
    ));
    api.apply(cluster_ip(
        "testns",
        "svc1",
        &["10.96.1.1"],
        &[("http", 80, "TCP"), ("", 53, "UDP")],
    ));
    api.apply(cluster_ip(
        "testns",
        "dual",
        &["10.96.1.2", "fd00::1:2"],
        &[("https", 443, "TCP")],
    ));
    api.apply(slice(
        "testns",
        "svc1-abc",
        "svc1",
        &[("http", 8080, "TCP")],
        &[("10.1.0.10", true, None), ("10.1.0.11", false, None)],
    ));
    api.apply(headless("testns", "web", &[("http", 80, "TCP")]));
    api.apply(slice(
        "testns",
        "web-v4",
        "web",
        &[("http", 8080, "TCP")],
        &[("10.1.0.20", true, Some("web-0")), ("10.1.0.21", true, None)],
    ));
    api.apply(slice(
        "testns",
        "web-v6",
        "web",
        &[("http", 8080, "TCP")],
        &[("fd00::20", true, Some("web-0"))],
    ));
    api.apply(headless("testns", "empty", &[("http", 80, "TCP")]));
    api.apply(external("testns", "ext", "example.net"));
}

#[test]
fn every_record_kind_answers_and_denies_as_the_spec_says() {
    let api = FakeApi::start();
    populate(&api);
    let (s, _dir) = skyline(&api, &[]);
    wait_synced(&s);

    assert_eq!(data(&s.udp(&z("dns-version"), RecordType::TXT)), ["1.1.0"]);
    assert_eq!(data(&s.udp(&z("kubernetes.default.svc"), RecordType::A)), ["10.96.0.1"]);
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);
    assert_eq!(data(&s.udp(&z("dual.testns.svc"), RecordType::AAAA)), ["fd00::1:2"]);
    assert_eq!(data(&s.udp(&z("dual.testns.svc"), RecordType::A)), ["10.96.1.2"]);
    assert_eq!(
        data(&s.udp(&z("_https._tcp.kubernetes.default.svc"), RecordType::SRV)),
        ["0 100 443 kubernetes.default.svc.cluster.local."]
    );
    assert_eq!(
        data(&s.udp(&z("web.testns.svc"), RecordType::A)),
        ["10.1.0.20", "10.1.0.21"]
    );
    assert_eq!(data(&s.udp(&z("web.testns.svc"), RecordType::AAAA)), ["fd00::20"]);
    assert_eq!(data(&s.udp(&z("web-0.web.testns.svc"), RecordType::A)), ["10.1.0.20"]);
    assert_eq!(data(&s.udp(&z("web-0.web.testns.svc"), RecordType::AAAA)), ["fd00::20"]);
    assert_eq!(
        data(&s.udp(&z("_http._tcp.web.testns.svc"), RecordType::SRV)),
        [
            "0 33 8080 10-1-0-21.web.testns.svc.cluster.local.",
            "0 33 8080 web-0.web.testns.svc.cluster.local."
        ]
    );
    assert_eq!(
        data(&s.udp(&z("http.tcp.web.testns.svc"), RecordType::SRV)),
        data(&s.udp(&z("_http._tcp.web.testns.svc"), RecordType::SRV)),
        "port and protocol labels without their underscores"
    );
    assert_eq!(
        data(&s.udp(&z("https.tcp.kubernetes.default.svc"), RecordType::SRV)),
        ["0 100 443 kubernetes.default.svc.cluster.local."]
    );
    assert_eq!(
        data(&s.udp(&z("web-0.web.testns.svc"), RecordType::SRV)),
        ["0 50 8080 web-0.web.testns.svc.cluster.local."],
        "an endpoint name's own SRV, one entry per address"
    );
    assert_eq!(
        data(&s.udp("1.1.96.10.in-addr.arpa.", RecordType::PTR)),
        ["svc1.testns.svc.cluster.local."]
    );
    assert_eq!(
        data(&s.udp("20.0.1.10.in-addr.arpa.", RecordType::PTR)),
        ["web-0.web.testns.svc.cluster.local."]
    );
    let v6 = "0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.";
    assert_eq!(
        data(&s.udp(v6, RecordType::PTR)),
        ["web-0.web.testns.svc.cluster.local."]
    );
    assert_eq!(data(&s.udp(&z("ext.testns.svc"), RecordType::CNAME)), ["example.net."]);
    assert_eq!(
        data(&s.udp("cluster.local.", RecordType::SOA))[0]
            .split(' ')
            .take(2)
            .collect::<Vec<_>>(),
        ["ns.dns.cluster.local.", "hostmaster.cluster.local."]
    );
    assert_eq!(
        data(&s.udp("cluster.local.", RecordType::NS)),
        ["ns.dns.cluster.local."]
    );
    let reply = s.tcp(&z("svc1.testns.svc"), RecordType::A);
    assert!(reply.authoritative());
    assert_eq!(reply.answers()[0].ttl(), 5);

    assert_nxdomain(&s, &z("nope.testns.svc"), RecordType::A);
    assert_nxdomain(&s, &z("svc1.nons.svc"), RecordType::A);
    assert_nxdomain(&s, &z("empty.testns.svc"), RecordType::A);
    assert_nxdomain(&s, &z("_nope._tcp.svc1.testns.svc"), RecordType::SRV);
    assert_nxdomain(&s, &z("http.udp.svc1.testns.svc"), RecordType::SRV);
    assert_nxdomain(&s, &z("10-1-0-11.svc1.testns.svc"), RecordType::A);
    assert_nxdomain(&s, &z("x.ext.testns.svc"), RecordType::A);
    assert_nxdomain(&s, &z("10-0-0-1.testns.pod"), RecordType::A);
    assert_nxdomain(&s, &z("svc1.testns.other"), RecordType::A);
    assert_nxdomain(&s, "9.9.96.10.in-addr.arpa.", RecordType::PTR);
    assert_nodata(&s, &z("svc1.testns.svc"), RecordType::AAAA);
    assert_nodata(&s, &z("testns.svc"), RecordType::A);
    assert_nodata(&s, &z("svc"), RecordType::A);
    assert_nodata(&s, "cluster.local.", RecordType::A);
    assert_nodata(&s, &z("ext.testns.svc"), RecordType::SRV);
    assert_nodata(&s, &z("svc1.testns.svc"), RecordType::TXT);
    assert_eq!(
        data(&s.udp("SVC1.TestNS.Svc.Cluster.Local.", RecordType::A)),
        ["10.96.1.1"]
    );
}

#[test]
fn watched_changes_reach_answers() {
    let api = FakeApi::start();
    populate(&api);
    let (s, _dir) = skyline(&api, &HTTP_ANY_PORT);
    wait_synced(&s);
    let full_builds = metric(&s, "skyline_kubernetes_full_builds_total");

    api.apply(slice(
        "testns",
        "web-v4",
        "web",
        &[("http", 8080, "TCP")],
        &[("10.1.0.20", true, Some("web-0")), ("10.1.0.22", true, None)],
    ));
    eventually(SETTLE, "an endpoint replaced", || {
        s.udp(&z("web.testns.svc"), RecordType::A).response_code() == ResponseCode::NoError
            && data(&s.udp(&z("web.testns.svc"), RecordType::A)) == ["10.1.0.20", "10.1.0.22"]
    });
    assert_nxdomain(&s, &z("10-1-0-21.web.testns.svc"), RecordType::A);

    api.apply(slice(
        "testns",
        "empty-1",
        "empty",
        &[("http", 8080, "TCP")],
        &[("10.1.0.30", true, None)],
    ));
    eventually(SETTLE, "a headless service got its first endpoint", || {
        rcode(&s, &z("empty.testns.svc"), RecordType::A) == ResponseCode::NoError
    });
    api.delete(Resource::EndpointSlice, "testns", "empty-1");
    eventually(SETTLE, "its only slice deleted", || {
        rcode(&s, &z("empty.testns.svc"), RecordType::A) == ResponseCode::NXDomain
    });

    api.delete(Resource::Service, "testns", "svc1");
    eventually(SETTLE, "a deleted service", || {
        rcode(&s, &z("svc1.testns.svc"), RecordType::A) == ResponseCode::NXDomain
    });
    assert_nxdomain(&s, "1.1.96.10.in-addr.arpa.", RecordType::PTR);

    api.delete(Resource::Namespace, "", "testns");
    eventually(SETTLE, "a deleted namespace", || {
        rcode(&s, &z("dual.testns.svc"), RecordType::A) == ResponseCode::NXDomain
    });
    assert_nxdomain(&s, &z("testns.svc"), RecordType::A);
    assert_nxdomain(&s, &z("web-0.web.testns.svc"), RecordType::A);
    assert_nxdomain(&s, "2.1.96.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(data(&s.udp(&z("kubernetes.default.svc"), RecordType::A)), ["10.96.0.1"]);

    api.apply(namespace("testns"));
    eventually(SETTLE, "the namespace back, with what is still in it", || {
        rcode(&s, &z("dual.testns.svc"), RecordType::A) == ResponseCode::NoError
    });
    assert_eq!(
        data(&s.udp("2.1.96.10.in-addr.arpa.", RecordType::PTR)),
        ["dual.testns.svc.cluster.local."]
    );
    assert_eq!(rcode(&s, &z("testns.svc"), RecordType::A), ResponseCode::NoError);
    assert_eq!(
        metric(&s, "skyline_kubernetes_full_builds_total"),
        full_builds,
        "watch events, namespaces included, change only the names they reach"
    );
}

/// The sum and count of `coredns_kubernetes_dns_programming_duration_seconds` for `kind`.
fn programming(s: &Skyline, kind: &str) -> (f64, f64) {
    let (_, body) = http_get(s.http_addr(), "/metrics");
    let name = "coredns_kubernetes_dns_programming_duration_seconds";
    let value = |part: &str| {
        common::metric_value(&body, &format!("{name}_{part}{{service_kind=\"{kind}\"}}"))
            .unwrap_or_else(|| panic!("no {name}_{part} for {kind}"))
    };
    (value("sum"), value("count"))
}

#[test]
fn a_watched_endpoint_change_is_timed_from_its_trigger_to_the_snapshot_answering_it() {
    let api = FakeApi::start();
    populate(&api);
    let (s, _dir) = skyline(&api, &HTTP_ANY_PORT);
    wait_synced(&s);
    assert_eq!(
        programming(&s, "cluster_ip"),
        (0.0, 0.0),
        "nothing timed before a watched change"
    );

    // The endpoints controller stamps each change 2 s before the slice reaches the watch.
    let stamped = |mut slice: serde_json::Value| {
        let triggered = std::time::SystemTime::now() - Duration::from_secs(2);
        let stamp = k8s_openapi::jiff::Timestamp::try_from(triggered).unwrap().to_string();
        slice["metadata"]["annotations"] =
            serde_json::json!({"endpoints.kubernetes.io/last-change-trigger-time": stamp});
        slice
    };
    api.apply(stamped(slice(
        "testns",
        "web-v4",
        "web",
        &[("http", 8080, "TCP")],
        &[("10.1.0.20", true, Some("web-0")), ("10.1.0.22", true, None)],
    )));
    eventually(SETTLE, "the headless service answers with its new endpoint", || {
        rcode(&s, &z("web.testns.svc"), RecordType::A) == ResponseCode::NoError
            && data(&s.udp(&z("web.testns.svc"), RecordType::A)) == ["10.1.0.20", "10.1.0.22"]
    });
    let (sum, count) = programming(&s, "headless_with_selector");
    assert_eq!(count, 1.0, "timed once its snapshot is published, before it answers");
    assert!((2.0..2.0 + SETTLE.as_secs_f64()).contains(&sum), "took {sum} s");

    // A ClusterIP service answers with its address whatever its endpoints: only the
    // histogram shows the change was published.
    api.apply(stamped(slice(
        "testns",
        "svc1-abc",
        "svc1",
        &[("http", 8080, "TCP")],
        &[("10.1.0.10", true, None), ("10.1.0.11", true, None)],
    )));
    eventually(SETTLE, "the ClusterIP service's change is timed", || {
        programming(&s, "cluster_ip").1 == 1.0
    });
    let (sum, _) = programming(&s, "cluster_ip");
    assert!((2.0..2.0 + SETTLE.as_secs_f64()).contains(&sum), "took {sum} s");
    assert_eq!(programming(&s, "headless_with_selector").1, 1.0);
}

#[test]
fn an_expired_watch_lists_again() {
    let api = FakeApi::start();
    populate(&api);
    let (s, _dir) = skyline(&api, &HTTP_ANY_PORT);
    wait_synced(&s);
    let lists = api.lists(Resource::Service);
    let full_builds = metric(&s, "skyline_kubernetes_full_builds_total");
    assert_eq!(
        data(&s.udp("2.1.96.10.in-addr.arpa.", RecordType::PTR)),
        ["dual.testns.svc.cluster.local."]
    );
    assert_eq!(
        data(&s.udp("21.0.1.10.in-addr.arpa.", RecordType::PTR)),
        ["10-1-0-21.web.testns.svc.cluster.local."]
    );

    api.delete_unseen(Resource::Service, "testns", "dual");
    api.delete_unseen(Resource::EndpointSlice, "testns", "web-v4");
    api.expire();
    eventually(SETTLE, "the services listed again after 410 Gone", || {
        api.lists(Resource::Service) > lists
    });
    eventually(SETTLE, "deletions only the re-list shows", || {
        rcode(&s, &z("dual.testns.svc"), RecordType::A) == ResponseCode::NXDomain
            && rcode(&s, &z("10-1-0-21.web.testns.svc"), RecordType::A) == ResponseCode::NXDomain
    });
    assert_nxdomain(&s, "2.1.96.10.in-addr.arpa.", RecordType::PTR);
    assert_nxdomain(&s, "21.0.1.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(data(&s.udp(&z("web-0.web.testns.svc"), RecordType::AAAA)), ["fd00::20"]);
    assert_eq!(
        rcode(&s, &z("web-0.web.testns.svc"), RecordType::A),
        ResponseCode::NoError
    );
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);
    assert_eq!(
        metric(&s, "skyline_kubernetes_full_builds_total"),
        full_builds,
        "a re-list updates the served snapshot where it differs, not building it whole"
    );

    api.apply(cluster_ip("testns", "after", &["10.96.1.9"], &[]));
    eventually(SETTLE, "watching resumed after the re-list", || {
        rcode(&s, &z("after.testns.svc"), RecordType::A) == ResponseCode::NoError
    });
}

#[test]
fn a_lost_api_server_freezes_answers_and_its_return_resumes_them() {
    let api = FakeApi::start();
    populate(&api);
    let (s, _dir) = skyline(&api, &[]);
    wait_synced(&s);

    api.kill();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);
    assert_eq!(
        data(&s.udp(&z("web.testns.svc"), RecordType::A)),
        ["10.1.0.20", "10.1.0.21"]
    );
    assert_nxdomain(&s, &z("nope.testns.svc"), RecordType::A);

    api.restart();
    api.apply(cluster_ip("testns", "back", &["10.96.1.8"], &[]));
    eventually(SETTLE, "changes followed again once the API server is back", || {
        rcode(&s, &z("back.testns.svc"), RecordType::A) == ResponseCode::NoError
    });
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);
}

#[test]
fn started_before_the_api_server_it_answers_servfail_until_synced() {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kubeconfig_for(addr, dir.path());
    let s = Skyline::start_with(
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
        &[("SKYLINE_RESOLV_CONF", "none")],
    );
    for name in [z("svc1.testns.svc"), z("nope"), "1.1.96.10.in-addr.arpa.".to_owned()] {
        assert_eq!(rcode(&s, &name, RecordType::A), ResponseCode::ServFail, "{name}");
    }
    assert_eq!(
        rcode(&s, "skydns.local.", RecordType::SOA),
        ResponseCode::NoError,
        "the SkyDNS zone is served meanwhile"
    );

    let api = FakeApi::start_on(addr);
    populate(&api);
    wait_synced(&s);
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);
    assert_nxdomain(&s, &z("nope.testns.svc"), RecordType::A);
}

#[test]
fn verified_pods_follow_the_pod_watch() {
    let api = FakeApi::start();
    populate(&api);
    api.apply(pod("testns", "client", "10.2.0.5"));
    let (s, _dir) = skyline(&api, &["--kubernetes-pods", "verified"]);
    wait_synced(&s);
    assert_eq!(data(&s.udp(&z("10-2-0-5.testns.pod"), RecordType::A)), ["10.2.0.5"]);
    assert_nxdomain(&s, &z("10-2-0-6.testns.pod"), RecordType::A);
    assert_nxdomain(&s, &z("10-2-0-5.default.pod"), RecordType::A);
    assert!(api.lists(Resource::Pod) > 0);

    api.delete(Resource::Pod, "testns", "client");
    eventually(SETTLE, "a deleted pod", || {
        rcode(&s, &z("10-2-0-5.testns.pod"), RecordType::A) == ResponseCode::NXDomain
    });
}

#[test]
fn insecure_pods_answer_any_address_without_watching_pods() {
    let api = FakeApi::start();
    populate(&api);
    let (s, _dir) = skyline(&api, &["--kubernetes-pods", "insecure", "--kubernetes-ttl", "30"]);
    wait_synced(&s);
    let reply = s.udp(&z("1-2-3-4.testns.pod"), RecordType::A);
    assert_eq!(data(&reply), ["1.2.3.4"]);
    assert_eq!(reply.answers()[0].ttl(), 30);
    assert_nxdomain(&s, &z("1-2-3-4.nons.pod"), RecordType::A);
    assert_nodata(&s, &z("testns.pod"), RecordType::A);
    assert_eq!(api.lists(Resource::Pod), 0);
}

#[test]
fn watch_filters_and_zone_options() {
    let api = FakeApi::start();
    populate(&api);
    let (s, _dir) = skyline(
        &api,
        &[
            "--kubernetes-labels",
            "app=svc1",
            "--kubernetes-zones",
            "cluster.local,example.test,in-addr.arpa",
            "--kubernetes-openshift-names",
            "--kubernetes-qps",
            "100",
        ],
    );
    wait_synced(&s);
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);
    assert_eq!(
        data(&s.udp("svc1.testns.svc.example.test.", RecordType::A)),
        ["10.96.1.1"]
    );
    assert_nxdomain(&s, &z("dual.testns.svc"), RecordType::A);
    assert_eq!(data(&s.udp(&z("svc1.testns.endpoints"), RecordType::A)), ["10.1.0.10"]);
    assert_eq!(
        data(&s.udp("1.1.96.10.in-addr.arpa.", RecordType::PTR)),
        ["svc1.testns.svc.cluster.local."],
        "PTR targets are named in the first zone"
    );
}

#[test]
fn skydns_records_and_the_cluster_zones_in_one_process() {
    let api = FakeApi::start();
    populate(&api);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig(dir.path());
    let records = r#"{"/skydns/local/skydns/web": {"host": "192.0.2.7"}}"#;
    let s = Skyline::start(records, &["--kubeconfig", kubeconfig.to_str().unwrap()], &[]);
    wait_synced(&s);
    assert_eq!(data(&s.udp("web.skydns.local.", RecordType::A)), ["192.0.2.7"]);
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);

    s.rewrite(r#"{"/skydns/local/skydns/web": {"host": "192.0.2.8"}}"#);
    eventually(SETTLE, "a records file change under the cluster zones", || {
        data(&s.udp("web.skydns.local.", RecordType::A)) == ["192.0.2.8"]
    });
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);
}

#[test]
fn a_bad_kubeconfig_stops_the_start_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["--addr", "127.0.0.1:0", "--kubeconfig", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("kubeconfig"), "{stderr}");
}

#[test]
fn a_skydns_change_beside_a_large_cluster_does_not_build_the_cluster_again() {
    let api = FakeApi::start();
    populate(&api);
    api.apply(namespace("big"));
    for i in 0..400 {
        let name = format!("svc{i}");
        let (hi, lo) = (i / 250, i % 250);
        api.apply(cluster_ip(
            "big",
            &name,
            &[&format!("10.97.{hi}.{lo}")],
            &[("http", 80, "TCP")],
        ));
        let endpoints: Vec<String> = (0..10)
            .map(|e| format!("10.3.{}.{}", i / 20, (i % 20) * 10 + e))
            .collect();
        let endpoints: Vec<(&str, bool, Option<&str>)> = endpoints.iter().map(|a| (a.as_str(), true, None)).collect();
        api.apply(slice(
            "big",
            &format!("{name}-a"),
            &name,
            &[("http", 8080, "TCP")],
            &endpoints,
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig(dir.path());
    let records = r#"{"/skydns/local/skydns/web": {"host": "192.0.2.7"},
        "/skydns/arpa/in-addr/192/0/2/7": {"host": "web.skydns.local."},
        "/skydns/arpa/in-addr/10/1/0/20": {"host": "web.skydns.local."}}"#;
    let mut args = vec!["--kubeconfig", kubeconfig.to_str().unwrap()];
    args.extend(HTTP_ANY_PORT);
    let s = Skyline::start(records, &args, &[]);
    wait_synced(&s);
    eventually(SETTLE, "every service served", || {
        rcode(&s, &z("svc399.big.svc"), RecordType::A) == ResponseCode::NoError
            && data(&s.udp("7.2.0.192.in-addr.arpa.", RecordType::PTR)) == ["web.skydns.local."]
    });
    let full_builds = metric(&s, "skyline_kubernetes_full_builds_total");
    let builds = metric(&s, "skyline_kubernetes_builds_total");
    assert!(full_builds >= 1);

    s.rewrite(
        r#"{"/skydns/local/skydns/web": {"host": "192.0.2.8"},
        "/skydns/arpa/in-addr/192/0/2/7": {"host": "api.skydns.local."},
        "/skydns/arpa/in-addr/10/1/0/21": {"host": "web.skydns.local."}}"#,
    );
    eventually(SETTLE, "the records file change served beside the cluster", || {
        data(&s.udp("web.skydns.local.", RecordType::A)) == ["192.0.2.8"]
            && data(&s.udp("7.2.0.192.in-addr.arpa.", RecordType::PTR)) == ["api.skydns.local."]
    });
    assert_eq!(
        metric(&s, "skyline_kubernetes_full_builds_total"),
        full_builds,
        "the cluster zones were not built again"
    );
    assert!(metric(&s, "skyline_kubernetes_builds_total") > builds);
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);
    assert_eq!(data(&s.udp(&z("svc399.big.svc"), RecordType::A)), ["10.97.1.149"]);
    assert_eq!(
        data(&s.udp("20.0.1.10.in-addr.arpa.", RecordType::PTR)),
        ["web-0.web.testns.svc.cluster.local."],
        "the cluster's PTR wins over SkyDNS's, before and after"
    );
    assert_eq!(
        data(&s.udp("21.0.1.10.in-addr.arpa.", RecordType::PTR)),
        ["10-1-0-21.web.testns.svc.cluster.local."]
    );
    assert_nxdomain(&s, &z("nope.big.svc"), RecordType::A);
    assert_eq!(
        data(&s.udp(&z("10-3-19-199.svc399.big.svc"), RecordType::A)),
        ["10.3.19.199"]
    );
}

#[test]
fn an_https_api_server_serves_the_cluster_zones_with_a_client_certificate_or_a_token() {
    let api = FakeApi::start_tls();
    populate(&api);
    let (s, _dir) = skyline(&api, &[]);
    wait_synced(&s);
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);
    assert_eq!(
        data(&s.udp("20.0.1.10.in-addr.arpa.", RecordType::PTR)),
        ["web-0.web.testns.svc.cluster.local."]
    );
    api.apply(cluster_ip("testns", "later", &["10.96.1.7"], &[]));
    eventually(SETTLE, "a change watched over TLS", || {
        rcode(&s, &z("later.testns.svc"), RecordType::A) == ResponseCode::NoError
    });
    assert!(api.authenticated("client certificate") > 0);

    let dir = tempfile::tempdir().unwrap();
    let pki = api.pki.as_ref().unwrap();
    let kubeconfig = api.kubeconfig_tls(dir.path(), &pki.ca, Credential::Token("a-service-account-token"));
    let with_token = Skyline::start_with(
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
        &[("SKYLINE_RESOLV_CONF", "none")],
    );
    wait_synced(&with_token);
    assert_eq!(
        data(&with_token.udp(&z("later.testns.svc"), RecordType::A)),
        ["10.96.1.7"]
    );
    assert!(api.authenticated("bearer a-service-account-token") > 0);
    assert_eq!(api.authenticated("none"), 0, "every request authenticated");
}

#[test]
fn a_kubeconfig_trusting_another_ca_answers_servfail_and_logs_the_tls_error() {
    let api = FakeApi::start_tls();
    populate(&api);
    let dir = tempfile::tempdir().unwrap();
    let other = Pki::generate();
    let kubeconfig = api.kubeconfig_tls(dir.path(), &other.ca, Credential::Token("not-a-secret"));
    let s = Skyline::start_with(
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
        &[("SKYLINE_RESOLV_CONF", "none")],
    );
    eventually(SETTLE, "the TLS failure logged with its cause", || {
        s.log_count("Kubernetes list or watch failed") > 0 && s.log_count("invalid peer certificate") > 0
    });
    for name in [
        z("svc1.testns.svc"),
        z("nope.testns.svc"),
        "1.1.96.10.in-addr.arpa.".to_owned(),
    ] {
        assert_eq!(rcode(&s, &name, RecordType::A), ResponseCode::ServFail, "{name}");
    }
    assert_eq!(rcode(&s, "skydns.local.", RecordType::SOA), ResponseCode::NoError);
    assert_eq!(api.lists(Resource::Service), 0, "no request got through");
    assert_eq!(s.log_count("panicked"), 0, "{}", s.log_text());
}

#[test]
fn ready_is_503_naming_kubernetes_while_the_lists_are_withheld_and_200_once_listed() {
    let api = FakeApi::start();
    populate(&api);
    api.hold_lists();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig(dir.path());
    let mut args = vec!["--kubeconfig", kubeconfig.to_str().unwrap()];
    args.extend(HTTP_ANY_PORT);
    let s = Skyline::start_with(&args, &[("SKYLINE_RESOLV_CONF", "none")]);
    let http = s.http_addr();
    assert_eq!(http_get(http, "/health"), (200, "OK".to_owned()));
    let not_ready = (
        503,
        "not ready: kubernetes (not every watch has listed yet)\n".to_owned(),
    );
    assert_eq!(http_get(http, "/ready"), not_ready);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(http_get(http, "/ready"), not_ready, "still, while the lists are held");
    assert_eq!(metric(&s, "skyline_source_ready{source=\"kubernetes\"}"), 0);
    assert_eq!(rcode(&s, &z("svc1.testns.svc"), RecordType::A), ResponseCode::ServFail);

    api.release_lists();
    eventually(SETTLE, "/ready once every watch has listed", || {
        http_get(http, "/ready") == (200, "OK".to_owned())
    });
    assert_eq!(metric(&s, "skyline_source_ready{source=\"kubernetes\"}"), 1);
    assert_eq!(data(&s.udp(&z("svc1.testns.svc"), RecordType::A)), ["10.96.1.1"]);
    assert!(api.lists(Resource::Service) >= 1);
}
