//! `--corefile`: the Corefiles clusters ship, adapted only for addresses and ports, run end to
//! end against the fake API server and local upstreams that record what they get. Answers are
//! read with hickory-proto.

mod common;
mod kubernetes_api;
mod upstream;

use common::{eventually, free_port, http_get, Skyline};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use kubernetes_api::objects::{cluster_ip, external, headless, namespace, slice};
use kubernetes_api::FakeApi;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use upstream::{Script, Scripted, GOOD};

const SETTLE: Duration = Duration::from_secs(15);

fn answering() -> Scripted {
    Scripted::start(Script::Address {
        ttl: 300,
        delay: Duration::ZERO,
    })
}

/// Starts skyline on the Corefile `text`, written in a directory of its own (which is also
/// returned, for files it imports or is edited in).
fn run(text: &str, env: &[(&str, &str)]) -> (Skyline, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("Corefile");
    std::fs::write(&path, text).unwrap();
    let s = Skyline::start_with(&["--corefile", path.to_str().unwrap()], env);
    (s, dir)
}

fn addresses(reply: &Message) -> Vec<Ipv4Addr> {
    common::a_of(reply)
}

fn populate(api: &FakeApi) {
    api.apply(namespace("default"));
    api.apply(cluster_ip(
        "default",
        "kubernetes",
        &["10.96.0.1"],
        &[("https", 443, "TCP")],
    ));
}

#[test]
fn the_kubeadm_corefile_serves_the_cluster_and_forwards_the_rest() {
    let api = FakeApi::start();
    populate(&api);
    let upstream = answering();
    let (health, ready, metrics) = (free_port(), free_port(), free_port());
    let corefile = format!(
        ".:53 {{
    errors
    health 127.0.0.1:{health} {{
       lameduck 1s
    }}
    ready 127.0.0.1:{ready}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
       endpoint http://{api}
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }}
    prometheus 127.0.0.1:{metrics}
    forward . {upstream} {{
       prefer_udp
    }}
    cache 30
    reload
    loadbalance
}}
",
        api = api.addr,
        upstream = upstream.addr,
    );
    let (s, _dir) = run(&corefile, &[]);
    eventually(SETTLE, "the cluster zone to sync", || {
        s.udp("kubernetes.default.svc.cluster.local.", RecordType::A)
            .response_code()
            == ResponseCode::NoError
    });
    let reply = s.udp("kubernetes.default.svc.cluster.local.", RecordType::A);
    assert_eq!(addresses(&reply), [Ipv4Addr::new(10, 96, 0, 1)]);
    assert_eq!(reply.answers()[0].ttl(), 30, "the block's ttl");
    assert!(reply.authoritative());

    let reply = s.udp("1.0.96.10.in-addr.arpa.", RecordType::PTR);
    let ptr: Vec<String> = reply
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            Some(RData::PTR(name)) => Some(name.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(ptr, ["kubernetes.default.svc.cluster.local."]);

    let reply = s.udp("www.example.org.", RecordType::A);
    assert_eq!(addresses(&reply), [GOOD], "forwarded");
    assert_eq!(upstream.count("www.example.org."), 1);
    // A reverse name the cluster does not hold falls through to forwarding.
    s.udp("9.2.0.192.in-addr.arpa.", RecordType::PTR);
    assert_eq!(upstream.count("9.2.0.192.in-addr.arpa."), 1, "fallthrough in-addr.arpa");
    // A cluster name that does not exist does not.
    let reply = s.udp("nothing.default.svc.cluster.local.", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    assert_eq!(upstream.count("nothing.default.svc.cluster.local."), 0);

    let local = |port: u16| std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    eventually(SETTLE, "/ready on the ready port", || {
        http_get(local(ready), "/ready").is_some_and(|(status, _)| status == 200)
    });
    assert_eq!(http_get(local(health), "/health").map(|(status, _)| status), Some(200));
    let (status, body) = http_get(local(metrics), "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("coredns_dns_requests_total"), "{body}");
}

/// k3s's `coredns` ConfigMap: NodeHosts through `hosts` with fallthrough, `loop`, and imports of
/// custom `.override` and `.server` files.
#[test]
fn the_k3s_corefile_serves_node_hosts_the_cluster_and_custom_servers() {
    let api = FakeApi::start();
    populate(&api);
    let upstream = answering();
    let consul = answering();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("custom")).unwrap();
    std::fs::write(
        dir.path().join("NodeHosts"),
        "192.168.1.10 k3s-server\n192.168.1.11 k3s-agent\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("custom/log.override"), "log\n").unwrap();
    std::fs::write(
        dir.path().join("custom/consul.server"),
        format!("consul.local:53 {{\n    errors\n    forward . {}\n}}\n", consul.addr),
    )
    .unwrap();
    let corefile = format!(
        ".:53 {{
    errors
    health 127.0.0.1:{health}
    ready 127.0.0.1:{ready}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
      endpoint http://{api}
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
    }}
    hosts {dir}/NodeHosts {{
      ttl 60
      reload 15s
      fallthrough
    }}
    prometheus 127.0.0.1:{metrics}
    forward . {upstream}
    cache 30
    loop
    reload
    loadbalance
    import {dir}/custom/*.override
}}
import {dir}/custom/*.server
",
        health = free_port(),
        ready = free_port(),
        metrics = free_port(),
        api = api.addr,
        upstream = upstream.addr,
        dir = dir.path().display(),
    );
    let path = dir.path().join("Corefile");
    std::fs::write(&path, corefile).unwrap();
    let s = Skyline::start_with(&["--corefile", path.to_str().unwrap()], &[]);
    eventually(SETTLE, "the cluster zone to sync", || {
        s.udp("kubernetes.default.svc.cluster.local.", RecordType::A)
            .response_code()
            == ResponseCode::NoError
    });
    let reply = s.udp("k3s-agent.", RecordType::A);
    assert_eq!(addresses(&reply), [Ipv4Addr::new(192, 168, 1, 11)], "NodeHosts");
    assert_eq!(reply.answers()[0].ttl(), 60, "hosts ttl");
    assert_eq!(upstream.count("k3s-agent."), 0);
    let reply = s.udp("kubernetes.default.svc.cluster.local.", RecordType::A);
    assert_eq!(addresses(&reply), [Ipv4Addr::new(10, 96, 0, 1)]);
    assert_eq!(addresses(&s.udp("www.example.org.", RecordType::A)), [GOOD]);
    assert_eq!(upstream.count("www.example.org."), 1, "hosts falls through to forward");
    assert_eq!(addresses(&s.udp("db.service.consul.local.", RecordType::A)), [GOOD]);
    assert_eq!(
        consul.count("db.service.consul.local."),
        1,
        "the imported .server block"
    );
    assert_eq!(upstream.count("db.service.consul.local."), 0);
}

#[test]
fn node_local_dns_blocks_on_one_port_split_by_zone() {
    let cluster = answering();
    let outside = answering();
    let corefile = format!(
        "cluster.local:53 {{
    errors
    cache {{
            success 9984 30
            denial 9984 5
    }}
    reload
    bind 127.0.0.1
    forward . {cluster}
    prometheus 127.0.0.1:{p}
    health 127.0.0.1:{h}
    }}
in-addr.arpa:53 {{
    errors
    cache 30
    reload
    bind 127.0.0.1
    forward . {cluster}
    prometheus 127.0.0.1:{p}
    }}
ip6.arpa:53 {{
    errors
    cache 30
    reload
    bind 127.0.0.1
    forward . {cluster}
    prometheus 127.0.0.1:{p}
    }}
.:53 {{
    errors
    cache 30
    reload
    bind 127.0.0.1
    forward . {outside}
    prometheus 127.0.0.1:{p}
    }}
",
        cluster = cluster.addr,
        outside = outside.addr,
        p = free_port(),
        h = free_port(),
    );
    let (s, _dir) = run(&corefile, &[]);
    for name in ["web.default.svc.cluster.local.", "www.example.org."] {
        assert_eq!(addresses(&s.udp(name, RecordType::A)), [GOOD], "{name}");
    }
    s.udp("10.0.96.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(cluster.count("web.default.svc.cluster.local."), 1);
    assert_eq!(cluster.count("10.0.96.10.in-addr.arpa."), 1);
    assert_eq!(outside.count("www.example.org."), 1);
    assert_eq!(
        cluster.count("www.example.org.") + outside.count("web.default.svc.cluster.local."),
        0
    );
}

#[test]
fn snippets_imports_and_the_environment() {
    let upstream = answering();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("custom")).unwrap();
    std::fs::write(dir.path().join("custom/a.override"), "loadbalance\n").unwrap();
    let path = dir.path().join("Corefile");
    std::fs::write(
        &path,
        "(common) {\n    errors\n    cache 30\n}\n.:53 {\n    import common\n    forward . {$TEST_UPSTREAM}\n    import custom/*.override\n}\nimport custom/*.server\n",
    )
    .unwrap();
    let upstream_addr = upstream.addr.to_string();
    let s = Skyline::start_with(
        &["--corefile", path.to_str().unwrap()],
        &[("TEST_UPSTREAM", upstream_addr.as_str())],
    );
    assert_eq!(addresses(&s.udp("imported.example.", RecordType::A)), [GOOD]);
    assert_eq!(upstream.count("imported.example."), 1);
}

#[test]
fn reload_puts_an_edited_corefile_in_force() {
    let first = answering();
    let second = answering();
    let text = |to: std::net::SocketAddr| format!(".:53 {{\n    forward . {to}\n    reload 2s\n}}\n");
    let (s, dir) = run(&text(first.addr), &[]);
    s.udp("before.example.", RecordType::A);
    assert_eq!(first.count("before.example."), 1);
    std::fs::write(dir.path().join("Corefile"), text(second.addr)).unwrap();
    let mut n = 0;
    eventually(SETTLE, "the edited Corefile's upstream to be asked", || {
        n += 1;
        let name = format!("after{n}.example.");
        s.udp(&name, RecordType::A);
        second.count(&name) == 1
    });
}

/// `skyline --check-config --corefile FILE`: its exit status and what it printed.
fn check(dir: &Path, text: &str) -> (bool, String) {
    let path = dir.join("Corefile");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["--check-config", "--corefile", path.to_str().unwrap()])
        .env("SKYLINE_RESOLV_CONF", "none")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn check_config_names_file_line_and_plugin_of_every_error() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = check(
        dir.path(),
        ".:53 {\n    errors\n    file db.example.org\n    cache 30 {\n        shared\n    }\n    forward . not-an-address\n}\n",
    );
    assert!(!ok, "{text}");
    let corefile = dir.path().join("Corefile");
    let at = |line: usize| format!("{}:{line}", corefile.display());
    assert!(
        text.contains(&format!("{}: plugin file: not supported by skyline", at(3))),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}: plugin cache: unknown option shared", at(5))),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}: plugin forward: \"not-an-address\"", at(7))),
        "{text}"
    );

    let (ok, text) = check(
        dir.path(),
        ".:53 {\n    forward . 127.0.0.1:5353\n    cache 30\n    loadbalance\n}\n",
    );
    assert!(ok, "{text}");
    assert!(text.contains("nameservers = [\"127.0.0.1:5353\"]"), "{text}");
    assert!(text.contains("max_ttl = 30"), "{text}");
    assert!(text.contains("round_robin = true"), "{text}");
    assert!(text.contains("addr = [\"0.0.0.0:53\", \"[::]:53\"]"), "{text}");

    let (ok, text) = check(
        dir.path(),
        ".:53 {\n    forward . 127.0.0.1\n    import missing.conf\n}\n",
    );
    assert!(!ok);
    assert!(text.contains(&format!("{}: import missing.conf", at(3))), "{text}");

    let (ok, text) = check(dir.path(), "tls://.:853 {\n    whoami\n}\n");
    assert!(!ok);
    assert!(text.contains("not tls://"), "{text}");
}

#[test]
fn flags_win_over_the_corefile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("Corefile");
    std::fs::write(&path, ".:5300 {\n    bind 127.0.0.1\n    forward . 127.0.0.1:5353\n}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args([
            "--check-config",
            "--corefile",
            path.to_str().unwrap(),
            "--nameservers",
            "127.0.0.1:9999",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("nameservers = [\"127.0.0.1:9999\"]"), "{text}");
    assert!(text.contains("addr = [\"127.0.0.1:5300\"]"), "{text}");
}

/// One reply as a comparable text: rcode, flags that matter, and each section's records sorted
/// (the order of shuffled addresses aside).
/// A reply as text to compare, the SOA serial left out: it is the second each server's zone
/// was last built, which two servers started apart need not share.
fn shape(reply: &Message) -> String {
    let section = |records: &[hickory_proto::rr::Record]| {
        let mut lines: Vec<String> = records
            .iter()
            .map(|r| match r.data() {
                Some(RData::SOA(soa)) => format!(
                    "{} {} SOA {} {} {} {} {} {}",
                    r.name(),
                    r.ttl(),
                    soa.mname(),
                    soa.rname(),
                    soa.refresh(),
                    soa.retry(),
                    soa.expire(),
                    soa.minimum()
                ),
                _ => r.to_string(),
            })
            .collect();
        lines.sort();
        lines.join(" | ")
    };
    format!(
        "{:?} aa={} answer=[{}] authority=[{}]",
        reply.response_code(),
        reply.authoritative(),
        section(reply.answers()),
        section(reply.name_servers())
    )
}

#[test]
fn the_kubeadm_corefile_answers_as_the_same_settings_given_as_flags() {
    let api = FakeApi::start();
    populate(&api);
    api.apply(namespace("testns"));
    api.apply(cluster_ip(
        "testns",
        "svc1",
        &["10.96.1.1"],
        &[("http", 80, "TCP"), ("", 53, "UDP")],
    ));
    api.apply(headless("testns", "web", &[("http", 80, "TCP")]));
    api.apply(slice(
        "testns",
        "web-v4",
        "web",
        &[("http", 8080, "TCP")],
        &[("10.1.0.20", true, Some("web-0")), ("10.1.0.21", true, None)],
    ));
    api.apply(external("testns", "ext", "example.net"));
    let corefile = format!(
        ".:53 {{
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
       endpoint http://{api}
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }}
    cache 30
    loadbalance
}}
",
        api = api.addr
    );
    let (from_corefile, _dir) = run(&corefile, &[]);
    let endpoint = format!("http://{}", api.addr);
    let from_flags = Skyline::start_with(
        &[
            "--kubernetes-endpoint",
            &endpoint,
            "--kubernetes-pods",
            "insecure",
            "--kubernetes-ttl",
            "30",
            "--kubernetes-fallthrough",
            "in-addr.arpa.,ip6.arpa.",
            "--cache-max-ttl",
            "30",
        ],
        &[("SKYLINE_RESOLV_CONF", "none")],
    );
    for s in [&from_corefile, &from_flags] {
        eventually(SETTLE, "the cluster zone to sync", || {
            s.udp("web.testns.svc.cluster.local.", RecordType::A).response_code() == ResponseCode::NoError
        });
    }
    let questions = [
        ("dns-version.cluster.local.", RecordType::TXT),
        ("kubernetes.default.svc.cluster.local.", RecordType::A),
        ("svc1.testns.svc.cluster.local.", RecordType::A),
        ("svc1.testns.svc.cluster.local.", RecordType::AAAA),
        ("_http._tcp.svc1.testns.svc.cluster.local.", RecordType::SRV),
        ("web.testns.svc.cluster.local.", RecordType::A),
        ("web-0.web.testns.svc.cluster.local.", RecordType::A),
        ("_http._tcp.web.testns.svc.cluster.local.", RecordType::SRV),
        ("ext.testns.svc.cluster.local.", RecordType::CNAME),
        ("10-1-0-20.testns.pod.cluster.local.", RecordType::A),
        ("1.1.96.10.in-addr.arpa.", RecordType::PTR),
        ("20.0.1.10.in-addr.arpa.", RecordType::PTR),
        ("missing.testns.svc.cluster.local.", RecordType::A),
        ("testns.svc.cluster.local.", RecordType::A),
        ("cluster.local.", RecordType::SOA),
        ("cluster.local.", RecordType::NS),
    ];
    for (name, rtype) in questions {
        assert_eq!(
            shape(&from_corefile.udp(name, rtype)),
            shape(&from_flags.udp(name, rtype)),
            "{name} {rtype}"
        );
    }
}
