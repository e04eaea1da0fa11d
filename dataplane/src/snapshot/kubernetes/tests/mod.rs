//! The cluster zones checked on the wire: a [`Cluster`] is built into a snapshot, queried
//! through [`crate::answer::answer`], and the reply parsed by hickory-proto. Each test is a line
//! of docs/kubernetes-dns.md: its table of names or its NXDOMAIN and NODATA lists.

mod autopath;
mod hosts;
mod port_names;
mod update;

use super::*;
use crate::answer::{answer, Context, Outcome, Transport};
use crate::snapshot::{compose, skydns, Snapshot};
use crate::wire::{LowerName, Name};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name as HName, RecordType};
use std::net::IpAddr;
use std::time::{Duration, UNIX_EPOCH};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn port(name: &str, port: u16) -> ServicePort {
    ServicePort {
        name: name.into(),
        protocol: Protocol::Tcp,
        port,
    }
}

fn endpoint(address: &str, hostname: Option<&str>, pod: Option<&str>) -> Endpoint {
    Endpoint {
        address: ip(address),
        hostname: hostname.map(Into::into),
        pod: pod.map(Into::into),
    }
}

/// The cluster every test starts from (namespace `testns` unless said otherwise):
/// - `svc1`: ClusterIP 10.0.0.1, ports `http` 80/TCP and an unnamed 53/UDP, endpoints
///   172.0.0.10 and 172.0.0.11 (target port 8080) in two slices;
/// - `dual`: ClusterIP 10.0.0.2 and fd00::2, port `https` 443, no endpoints;
/// - `hdls`: headless; an IPv4 slice (pet-0 at 172.0.0.2, a hostname-less pod at 172.0.0.3)
///   and an IPv6 slice (pet-0 at fd00::3), target port `http` 8080; 172.0.0.2 also appears in
///   a second, skewed IPv4 slice;
/// - `empty`: headless without endpoints; `noports`: headless, one endpoint, no ports;
/// - `ext`, `extip`, `extin`: ExternalName to `example.net`, to an address, to `svc1`;
/// - `lost` in namespace `ghost`, which has no Namespace object.
fn cluster() -> Cluster {
    let mut c = Cluster::default();
    for ns in ["default", "testns", "other"] {
        c.namespaces.insert(ns.into());
    }
    let svc = |kind, ports: Vec<ServicePort>| Service {
        kind,
        ports: ports.into(),
    };
    let cluster_ip = |ips: &[&str]| ServiceKind::ClusterIp(ips.iter().map(|i| ip(i)).collect());
    let mut udp = port("", 53);
    udp.protocol = Protocol::Udp;
    c.services.insert(
        ObjectKey::new("testns", "svc1"),
        svc(cluster_ip(&["10.0.0.1"]), vec![port("http", 80), udp]),
    );
    c.services.insert(
        ObjectKey::new("testns", "dual"),
        svc(cluster_ip(&["10.0.0.2", "fd00::2"]), vec![port("https", 443)]),
    );
    c.services.insert(
        ObjectKey::new("testns", "hdls"),
        svc(ServiceKind::Headless, vec![port("http", 80)]),
    );
    c.services.insert(
        ObjectKey::new("testns", "empty"),
        svc(ServiceKind::Headless, vec![port("http", 80)]),
    );
    c.services
        .insert(ObjectKey::new("testns", "noports"), svc(ServiceKind::Headless, vec![]));
    c.services.insert(
        ObjectKey::new("testns", "ext"),
        svc(ServiceKind::ExternalName("example.net".into()), vec![]),
    );
    c.services.insert(
        ObjectKey::new("testns", "extip"),
        svc(ServiceKind::ExternalName("1.2.3.4".into()), vec![]),
    );
    c.services.insert(
        ObjectKey::new("testns", "extin"),
        svc(
            ServiceKind::ExternalName("svc1.testns.svc.cluster.local".into()),
            vec![],
        ),
    );
    c.services
        .insert(ObjectKey::new("ghost", "lost"), svc(cluster_ip(&["10.0.0.9"]), vec![]));
    let slice = |service: &str, ports: Vec<ServicePort>, endpoints: Vec<Endpoint>| EndpointSlice {
        service: service.into(),
        ports: ports.into(),
        endpoints: endpoints.into(),
    };
    c.slices.insert(
        ObjectKey::new("testns", "svc1-a"),
        slice(
            "svc1",
            vec![port("http", 8080)],
            vec![endpoint("172.0.0.10", None, Some("svc1-pod-a"))],
        ),
    );
    c.slices.insert(
        ObjectKey::new("testns", "svc1-b"),
        slice(
            "svc1",
            vec![port("http", 8080)],
            vec![endpoint("172.0.0.11", None, Some("svc1-pod-b"))],
        ),
    );
    c.slices.insert(
        ObjectKey::new("testns", "hdls-v4"),
        slice(
            "hdls",
            vec![port("http", 8080)],
            vec![
                endpoint("172.0.0.2", Some("pet-0"), Some("hdls-0")),
                endpoint("172.0.0.3", None, Some("hdls-xyz")),
            ],
        ),
    );
    c.slices.insert(
        ObjectKey::new("testns", "hdls-skew"),
        slice(
            "hdls",
            vec![port("http", 8080)],
            vec![endpoint("172.0.0.2", Some("pet-0"), Some("hdls-0"))],
        ),
    );
    c.slices.insert(
        ObjectKey::new("testns", "hdls-v6"),
        slice(
            "hdls",
            vec![port("http", 8080)],
            vec![endpoint("fd00::3", Some("pet-0"), Some("hdls-0"))],
        ),
    );
    c.slices.insert(
        ObjectKey::new("testns", "noports-a"),
        slice("noports", vec![], vec![endpoint("172.0.0.9", None, None)]),
    );
    c
}

fn snapshot_with(config: &Config, cluster: &Cluster) -> Snapshot {
    build(config, cluster, 3, UNIX_EPOCH + Duration::from_secs(1_700_000_000))
}

fn snapshot() -> Snapshot {
    snapshot_with(&Config::default(), &cluster())
}

fn ask(snap: &Snapshot, name: &str, rtype: RecordType) -> Message {
    // hickory's text parser refuses a `*` other than leftmost; labels go in as they are.
    let labels = name.split('.').filter(|l| !l.is_empty()).map(str::as_bytes);
    let mut qname = HName::from_labels(labels).unwrap();
    qname.set_fqdn(true);
    let mut query = Message::new();
    query.set_id(9).add_query(Query::query(qname, rtype));
    let mut out = vec![0; 65535];
    let Outcome::Reply(reply) = answer(&query.to_vec().unwrap(), snap, &Context::new(Transport::Tcp), &mut out) else {
        panic!("no reply to {name} {rtype}");
    };
    Message::from_vec(&out[..reply.len()]).unwrap()
}

/// The answer section as sorted `owner ttl type data` lines; the reply must be NOERROR.
fn answers(snap: &Snapshot, name: &str, rtype: RecordType) -> Vec<String> {
    let reply = ask(snap, name, rtype);
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{name} {rtype}");
    let mut lines: Vec<String> = reply
        .answers()
        .iter()
        .map(|r| format!("{} {} {} {}", r.name(), r.ttl(), r.record_type(), r.data().unwrap()))
        .collect();
    lines.sort();
    lines
}

/// The data of the answers only, sorted.
fn data(snap: &Snapshot, name: &str, rtype: RecordType) -> Vec<String> {
    let reply = ask(snap, name, rtype);
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{name} {rtype}");
    let mut data: Vec<String> = reply.answers().iter().map(|r| r.data().unwrap().to_string()).collect();
    data.sort();
    data
}

fn assert_nxdomain(snap: &Snapshot, name: &str, rtype: RecordType) {
    let reply = ask(snap, name, rtype);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain, "{name} {rtype}");
    assert!(reply.authoritative(), "{name} {rtype}");
    assert_eq!(reply.name_servers().len(), 1, "SOA in the authority section: {name}");
}

fn assert_nodata(snap: &Snapshot, name: &str, rtype: RecordType) {
    let reply = ask(snap, name, rtype);
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{name} {rtype}");
    assert!(reply.answers().is_empty(), "{name} {rtype}: {:?}", reply.answers());
    assert_eq!(reply.name_servers().len(), 1, "SOA in the authority section: {name}");
}

const Z: &str = "cluster.local.";

fn n(relative: &str) -> String {
    format!("{relative}.{Z}")
}

#[test]
fn cluster_ip_services_answer_with_their_cluster_ips_in_both_families() {
    let s = snapshot();
    assert_eq!(
        answers(&s, &n("svc1.testns.svc"), RecordType::A),
        ["svc1.testns.svc.cluster.local. 5 A 10.0.0.1"]
    );
    assert_nodata(&s, &n("svc1.testns.svc"), RecordType::AAAA);
    assert_eq!(data(&s, &n("dual.testns.svc"), RecordType::A), ["10.0.0.2"]);
    assert_eq!(data(&s, &n("dual.testns.svc"), RecordType::AAAA), ["fd00::2"]);
    assert_nodata(&s, &n("svc1.testns.svc"), RecordType::TXT);
    assert_nodata(&s, &n("svc1.testns.svc"), RecordType::PTR);
}

#[test]
fn names_are_case_insensitive_and_owners_echo_the_question() {
    let s = snapshot();
    let reply = ask(&s, "SVC1.TestNS.svc.Cluster.Local.", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert_eq!(reply.answers()[0].name().to_string(), "SVC1.TestNS.svc.Cluster.Local.");
}

#[test]
fn named_ports_get_srv_with_the_service_port_and_the_service_as_target() {
    let s = snapshot();
    let reply = ask(&s, &n("_http._tcp.svc1.testns.svc"), RecordType::SRV);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    let srv: Vec<String> = reply.answers().iter().map(|r| r.data().unwrap().to_string()).collect();
    assert_eq!(srv, ["0 100 80 svc1.testns.svc.cluster.local."]);
    let glue: Vec<String> = reply.additionals().iter().map(|r| r.to_string()).collect();
    assert!(glue.iter().any(|g| g.contains("10.0.0.1")), "{glue:?}");
    assert_eq!(
        data(&s, &n("_https._tcp.dual.testns.svc"), RecordType::SRV),
        ["0 50 443 dual.testns.svc.cluster.local."],
        "one SRV per target and port, weight counted before de-duplication"
    );
    assert_eq!(
        data(&s, &n("svc1.testns.svc"), RecordType::SRV),
        [
            "0 50 53 svc1.testns.svc.cluster.local.",
            "0 50 80 svc1.testns.svc.cluster.local."
        ],
        "the bare name lists every port, unnamed ones too"
    );
}

#[test]
fn unmatched_or_unnamed_ports_and_deeper_names_are_nxdomain() {
    let s = snapshot();
    assert_nxdomain(&s, &n("_nope._tcp.svc1.testns.svc"), RecordType::SRV);
    assert_nxdomain(&s, &n("_http._udp.svc1.testns.svc"), RecordType::SRV);
    assert_nxdomain(&s, &n("_._udp.svc1.testns.svc"), RecordType::SRV);
    assert_nxdomain(&s, &n("_tcp.svc1.testns.svc"), RecordType::SRV);
    assert_nxdomain(&s, &n("a.b.c.svc1.testns.svc"), RecordType::A);
    assert_nodata(&s, &n("_http._tcp.svc1.testns.svc"), RecordType::TXT);
}

/// The SRV answer's records and the additional section, as sorted lines.
fn srv_with_glue(snap: &Snapshot, name: &str) -> (Vec<String>, Vec<String>) {
    let reply = ask(snap, name, RecordType::SRV);
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{name} SRV");
    let mut srv: Vec<String> = reply.answers().iter().map(|r| r.data().unwrap().to_string()).collect();
    let mut glue: Vec<String> = reply
        .additionals()
        .iter()
        .map(|r| format!("{} {}", r.name(), r.data().unwrap()))
        .collect();
    srv.sort();
    glue.sort();
    (srv, glue)
}

#[test]
fn port_names_answer_with_or_without_underscores() {
    let s = snapshot();
    for service in ["svc1", "hdls"] {
        let canonical = n(&format!("_http._tcp.{service}.testns.svc"));
        let srv = srv_with_glue(&s, &canonical);
        let a = data(&s, &canonical, RecordType::A);
        for spelling in ["http.tcp", "http._tcp", "_http.tcp", "HTTP.Tcp"] {
            let name = n(&format!("{spelling}.{service}.testns.svc"));
            assert_eq!(srv_with_glue(&s, &name), srv, "{name}");
            assert_eq!(data(&s, &name, RecordType::A), a, "{name}");
            assert_nodata(&s, &name, RecordType::TXT);
        }
    }
    assert_eq!(
        data(&s, &n("https.tcp.dual.testns.svc"), RecordType::SRV),
        ["0 50 443 dual.testns.svc.cluster.local."]
    );
    for denied in [
        "http.udp.svc1",
        "nope.tcp.svc1",
        "__http._tcp.svc1",
        "_http.__tcp.svc1",
        "tcp.svc1",
        "http.svc1",
        "http.tcp.ext",
        "http.tcp.empty",
        "x.http.tcp.svc1",
    ] {
        assert_nxdomain(&s, &n(&format!("{denied}.testns.svc")), RecordType::SRV);
    }
}

#[test]
fn port_names_are_two_labels_below_the_service_and_endpoints_one() {
    let mut c = cluster();
    c.services.insert(
        ObjectKey::new("testns", "pets"),
        Service {
            kind: ServiceKind::Headless,
            ports: vec![port("http", 80)].into(),
        },
    );
    c.slices.insert(
        ObjectKey::new("testns", "pets-a"),
        EndpointSlice {
            service: "pets".into(),
            ports: vec![port("http", 8080)].into(),
            endpoints: vec![
                endpoint("172.0.1.1", Some("tcp"), None),
                endpoint("172.0.1.2", Some("http"), None),
            ]
            .into(),
        },
    );
    let s = snapshot_with(&Config::default(), &c);
    assert_eq!(data(&s, &n("tcp.pets.testns.svc"), RecordType::A), ["172.0.1.1"]);
    assert_eq!(data(&s, &n("http.pets.testns.svc"), RecordType::A), ["172.0.1.2"]);
    assert_eq!(
        data(&s, &n("http.tcp.pets.testns.svc"), RecordType::SRV),
        [
            "0 50 8080 http.pets.testns.svc.cluster.local.",
            "0 50 8080 tcp.pets.testns.svc.cluster.local."
        ]
    );
    assert_eq!(
        data(&s, &n("http.tcp.pets.testns.svc"), RecordType::A),
        ["172.0.1.1", "172.0.1.2"]
    );
    assert_eq!(
        data(&s, &n("tcp.pets.testns.svc"), RecordType::SRV),
        ["0 100 8080 tcp.pets.testns.svc.cluster.local."],
        "one label below the service is an endpoint, whatever it spells"
    );
}

#[test]
fn wildcard_labels_are_ordinary_labels_since_coredns_1_9() {
    let domain = Name::from_dotted("skydns.test.").unwrap();
    let skydns_config = skydns::Config {
        hostmaster: domain.prepend("hostmaster").unwrap(),
        domain,
        ..skydns::Config::default()
    };
    let base = skydns::build::<skydns::Service>(&skydns_config, &[], 1, UNIX_EPOCH);
    for s in [snapshot(), compose(&base, snapshot(), 2)] {
        for name in [
            "*._tcp.svc1",
            "_http.*.svc1",
            "*.*.svc1",
            "*.tcp.hdls",
            "_*._tcp.hdls",
            "*.hdls",
            "*.svc1",
        ] {
            for rtype in [RecordType::SRV, RecordType::A] {
                assert_nxdomain(&s, &n(&format!("{name}.testns.svc")), rtype);
            }
        }
    }
}

#[test]
fn endpoint_names_answer_srv_for_every_port_of_their_slices() {
    let s = snapshot();
    assert_eq!(
        srv_with_glue(&s, &n("pet-0.hdls.testns.svc")),
        (
            vec!["0 33 8080 pet-0.hdls.testns.svc.cluster.local.".to_owned()],
            vec![
                "pet-0.hdls.testns.svc.cluster.local. 172.0.0.2".to_owned(),
                "pet-0.hdls.testns.svc.cluster.local. fd00::3".to_owned()
            ]
        ),
        "three entries (one skewed twice) weigh 33, de-duplicated to one record"
    );
    assert_eq!(
        data(&s, &n("172-0-0-3.hdls.testns.svc"), RecordType::SRV),
        ["0 100 8080 172-0-0-3.hdls.testns.svc.cluster.local."]
    );
    assert_eq!(
        data(&s, &n("172-0-0-10.svc1.testns.svc"), RecordType::SRV),
        ["0 100 8080 172-0-0-10.svc1.testns.svc.cluster.local."],
        "endpoints of ClusterIP services too, with the target port"
    );
    assert_nodata(&s, &n("172-0-0-9.noports.testns.svc"), RecordType::SRV);

    let mut c = cluster();
    let mut metrics = port("", 9090);
    metrics.protocol = Protocol::Udp;
    let hdls_v4 = ObjectKey::new("testns", "hdls-v4");
    let mut slice = c.slices[&hdls_v4].clone();
    slice.ports = vec![port("http", 8080), metrics].into();
    c.slices.insert(hdls_v4, slice);
    let s = snapshot_with(&Config::default(), &c);
    assert_eq!(
        data(&s, &n("172-0-0-3.hdls.testns.svc"), RecordType::SRV),
        [
            "0 50 8080 172-0-0-3.hdls.testns.svc.cluster.local.",
            "0 50 9090 172-0-0-3.hdls.testns.svc.cluster.local."
        ],
        "unnamed ports included, as for the bare service name"
    );
}

#[test]
fn port_names_answer_addresses_too_as_coredns_does() {
    let s = snapshot();
    assert_eq!(data(&s, &n("_http._tcp.svc1.testns.svc"), RecordType::A), ["10.0.0.1"]);
    assert_eq!(
        data(&s, &n("_https._tcp.dual.testns.svc"), RecordType::AAAA),
        ["fd00::2"]
    );
    assert_eq!(
        data(&s, &n("_http._tcp.hdls.testns.svc"), RecordType::A),
        ["172.0.0.2", "172.0.0.3"]
    );
}

#[test]
fn headless_services_answer_with_every_ready_endpoint_once() {
    let s = snapshot();
    assert_eq!(
        data(&s, &n("hdls.testns.svc"), RecordType::A),
        ["172.0.0.2", "172.0.0.3"]
    );
    assert_eq!(data(&s, &n("hdls.testns.svc"), RecordType::AAAA), ["fd00::3"]);
    assert_eq!(data(&s, &n("pet-0.hdls.testns.svc"), RecordType::A), ["172.0.0.2"]);
    assert_eq!(data(&s, &n("pet-0.hdls.testns.svc"), RecordType::AAAA), ["fd00::3"]);
    assert_eq!(data(&s, &n("172-0-0-3.hdls.testns.svc"), RecordType::A), ["172.0.0.3"]);
    assert_nxdomain(&s, &n("hdls-xyz.hdls.testns.svc"), RecordType::A);
    assert_nxdomain(&s, &n("pet-1.hdls.testns.svc"), RecordType::A);
}

#[test]
fn headless_srv_names_each_endpoint_with_the_target_port() {
    let s = snapshot();
    let reply = ask(&s, &n("_http._tcp.hdls.testns.svc"), RecordType::SRV);
    let mut srv: Vec<String> = reply.answers().iter().map(|r| r.data().unwrap().to_string()).collect();
    srv.sort();
    assert_eq!(
        srv,
        [
            "0 25 8080 172-0-0-3.hdls.testns.svc.cluster.local.",
            "0 25 8080 pet-0.hdls.testns.svc.cluster.local."
        ]
    );
    let glue: Vec<String> = reply.additionals().iter().map(|r| r.to_string()).collect();
    assert!(glue.iter().any(|g| g.contains("fd00::3")), "{glue:?}");
    assert!(glue.iter().any(|g| g.contains("172.0.0.3")), "{glue:?}");
}

#[test]
fn headless_services_without_ready_endpoints_or_ports() {
    let s = snapshot();
    for rtype in [RecordType::A, RecordType::AAAA, RecordType::SRV] {
        assert_nxdomain(&s, &n("empty.testns.svc"), rtype);
    }
    assert_eq!(data(&s, &n("noports.testns.svc"), RecordType::A), ["172.0.0.9"]);
    assert_nodata(&s, &n("noports.testns.svc"), RecordType::SRV);
}

#[test]
fn cluster_ip_services_also_name_their_endpoints() {
    let s = snapshot();
    assert_eq!(
        data(&s, &n("172-0-0-10.svc1.testns.svc"), RecordType::A),
        ["172.0.0.10"]
    );
}

#[test]
fn external_names_are_cnames() {
    let s = snapshot();
    assert_eq!(
        answers(&s, &n("ext.testns.svc"), RecordType::CNAME),
        ["ext.testns.svc.cluster.local. 5 CNAME example.net."]
    );
    assert_eq!(data(&s, &n("ext.testns.svc"), RecordType::A), ["example.net."]);
    assert_nodata(&s, &n("ext.testns.svc"), RecordType::SRV);
    assert_nxdomain(&s, &n("_http._tcp.ext.testns.svc"), RecordType::SRV);
    assert_nxdomain(&s, &n("x.ext.testns.svc"), RecordType::A);
    assert_nxdomain(&s, &n("extip.testns.svc"), RecordType::A);
    assert_eq!(
        data(&s, &n("extin.testns.svc"), RecordType::A),
        ["10.0.0.1", "svc1.testns.svc.cluster.local."],
        "an in-zone target is followed"
    );
    assert_nodata(&s, &n("extin.testns.svc"), RecordType::AAAA);
}

#[test]
fn reverse_names_point_at_services_and_endpoints() {
    let s = snapshot();
    assert_eq!(
        answers(&s, "1.0.0.10.in-addr.arpa.", RecordType::PTR),
        ["1.0.0.10.in-addr.arpa. 5 PTR svc1.testns.svc.cluster.local."]
    );
    assert_eq!(
        data(&s, "2.0.0.172.in-addr.arpa.", RecordType::PTR),
        ["pet-0.hdls.testns.svc.cluster.local."]
    );
    assert_eq!(
        data(&s, "3.0.0.172.in-addr.arpa.", RecordType::PTR),
        ["172-0-0-3.hdls.testns.svc.cluster.local."]
    );
    let v6 = "2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.";
    assert_eq!(data(&s, v6, RecordType::PTR), ["dual.testns.svc.cluster.local."]);
    assert_nxdomain(&s, "99.0.0.10.in-addr.arpa.", RecordType::PTR);
    assert_nxdomain(&s, "0.0.10.in-addr.arpa.", RecordType::PTR);
    assert_nxdomain(&s, "9.0.0.10.in-addr.arpa.", RecordType::PTR);
}

#[test]
fn the_apex_and_fixed_names() {
    let s = snapshot();
    assert_eq!(
        answers(&s, &n("dns-version"), RecordType::TXT),
        ["dns-version.cluster.local. 28800 TXT 1.1.0"]
    );
    let soa = data(&s, Z, RecordType::SOA);
    assert_eq!(
        soa,
        ["ns.dns.cluster.local. hostmaster.cluster.local. 1700000000 7200 1800 86400 5"]
    );
    assert_eq!(data(&s, Z, RecordType::NS), ["ns.dns.cluster.local."]);
    for name in [Z.to_owned(), n("svc"), n("pod"), n("testns.svc")] {
        for rtype in [RecordType::A, RecordType::AAAA, RecordType::SRV] {
            assert_nodata(&s, &name, rtype);
        }
    }
    assert_nxdomain(&s, &n("nope.svc"), RecordType::A);
    assert_nxdomain(&s, &n("testns.nope"), RecordType::A);
    assert_nxdomain(&s, &n("svc1.testns.nope"), RecordType::A);
    assert_nxdomain(&s, &n("nosvc.testns.svc"), RecordType::A);
    assert_nxdomain(&s, &n("lost.ghost.svc"), RecordType::A);
    assert_nxdomain(&s, &n("ghost.svc"), RecordType::A);
    assert_nxdomain(&s, &n("*.testns.svc"), RecordType::A);
}

#[test]
fn negative_answers_carry_the_soa_with_the_capped_ttl() {
    let config = Config {
        ttl: 600,
        ..Config::default()
    };
    let s = snapshot_with(&config, &cluster());
    let reply = ask(&s, &n("nosvc.testns.svc"), RecordType::A);
    let soa = &reply.name_servers()[0];
    assert_eq!(soa.name().to_string(), Z);
    assert_eq!(soa.ttl(), 300);
    assert_eq!(data(&s, &n("svc1.testns.svc"), RecordType::A), ["10.0.0.1"]);
    assert_eq!(ask(&s, &n("svc1.testns.svc"), RecordType::A).answers()[0].ttl(), 600);
}

#[test]
fn pod_names_by_mode() {
    let mut c = cluster();
    c.pods.insert(
        ObjectKey::new("testns", "web-1"),
        Pod {
            address: ip("10.1.0.5"),
        },
    );
    c.pods.insert(
        ObjectKey::new("testns", "web-6"),
        Pod {
            address: ip("fd00:10::f"),
        },
    );
    let s = snapshot_with(&Config::default(), &c);
    assert_nxdomain(&s, &n("10-1-0-5.testns.pod"), RecordType::A);
    assert_nxdomain(&s, &n("testns.pod"), RecordType::A);

    let insecure = Config {
        pods: PodMode::Insecure,
        ..Config::default()
    };
    let s = snapshot_with(&insecure, &c);
    assert_eq!(data(&s, &n("1-2-3-4.testns.pod"), RecordType::A), ["1.2.3.4"]);
    assert_eq!(data(&s, &n("fd00-10--f.testns.pod"), RecordType::AAAA), ["fd00:10::f"]);
    assert_nodata(&s, &n("1-2-3-4.testns.pod"), RecordType::AAAA);
    assert_nodata(&s, &n("testns.pod"), RecordType::A);
    assert_nxdomain(&s, &n("junk.testns.pod"), RecordType::A);
    assert_nxdomain(&s, &n("1-2-3-4.ghost.pod"), RecordType::A);

    let verified = Config {
        pods: PodMode::Verified,
        ..Config::default()
    };
    let s = snapshot_with(&verified, &c);
    assert_eq!(data(&s, &n("10-1-0-5.testns.pod"), RecordType::A), ["10.1.0.5"]);
    assert_eq!(data(&s, &n("fd00-10--f.testns.pod"), RecordType::AAAA), ["fd00:10::f"]);
    assert_nxdomain(&s, &n("10-1-0-6.testns.pod"), RecordType::A);
    assert_nxdomain(&s, &n("10-1-0-5.default.pod"), RecordType::A);
    assert_nodata(&s, &n("testns.pod"), RecordType::A);
}

#[test]
fn namespaces_option_hides_other_namespaces_also_in_reverse() {
    let config = Config {
        namespaces: vec!["default".into()],
        ..Config::default()
    };
    let s = snapshot_with(&config, &cluster());
    assert_nxdomain(&s, &n("svc1.testns.svc"), RecordType::A);
    assert_nxdomain(&s, &n("testns.svc"), RecordType::A);
    assert_nodata(&s, &n("default.svc"), RecordType::A);
    assert_nxdomain(&s, "1.0.0.10.in-addr.arpa.", RecordType::PTR);
}

#[test]
fn ignore_empty_service_denies_cluster_ip_services_without_endpoints() {
    let config = Config {
        ignore_empty_service: true,
        ..Config::default()
    };
    let s = snapshot_with(&config, &cluster());
    assert_nxdomain(&s, &n("dual.testns.svc"), RecordType::A);
    assert_nxdomain(&s, &n("_https._tcp.dual.testns.svc"), RecordType::SRV);
    assert_eq!(data(&s, &n("svc1.testns.svc"), RecordType::A), ["10.0.0.1"]);
}

#[test]
fn endpoint_pod_names_label_hostname_less_endpoints_by_pod() {
    let config = Config {
        endpoint_pod_names: true,
        ..Config::default()
    };
    let s = snapshot_with(&config, &cluster());
    assert_eq!(data(&s, &n("hdls-xyz.hdls.testns.svc"), RecordType::A), ["172.0.0.3"]);
    assert_eq!(data(&s, &n("pet-0.hdls.testns.svc"), RecordType::A), ["172.0.0.2"]);
    assert_nxdomain(&s, &n("172-0-0-3.hdls.testns.svc"), RecordType::A);
}

#[test]
fn openshift_names_list_endpoints_of_any_service() {
    let config = Config {
        openshift_names: true,
        ..Config::default()
    };
    let s = snapshot_with(&config, &cluster());
    assert_eq!(
        data(&s, &n("svc1.testns.endpoints"), RecordType::A),
        ["172.0.0.10", "172.0.0.11"]
    );
    assert_eq!(
        data(&s, &n("_endpoints.svc1.testns.svc"), RecordType::A),
        ["172.0.0.10", "172.0.0.11"]
    );
    assert_eq!(
        data(&s, &n("svc1.testns.endpoints"), RecordType::SRV),
        [
            "0 50 8080 172-0-0-10.svc1.testns.endpoints.cluster.local.",
            "0 50 8080 172-0-0-11.svc1.testns.endpoints.cluster.local."
        ]
    );
    assert_eq!(
        data(&s, &n("172-0-0-11.svc1.testns.endpoints"), RecordType::A),
        ["172.0.0.11"]
    );
    assert_nodata(&s, &n("testns.endpoints"), RecordType::A);
    assert_nxdomain(&s, &n("dual.testns.endpoints"), RecordType::A);
    let plain = snapshot();
    assert_nxdomain(&plain, &n("svc1.testns.endpoints"), RecordType::A);
}

#[test]
fn until_synced_the_zones_answer_servfail() {
    let s = syncing(&Config::default(), 1, UNIX_EPOCH);
    for name in [n("svc1.testns.svc"), n("nope"), "1.0.0.10.in-addr.arpa.".to_owned()] {
        assert_eq!(ask(&s, &name, RecordType::A).response_code(), ResponseCode::ServFail);
    }
}

#[test]
fn a_cluster_name_shadows_a_skydns_leaf_of_the_same_name() {
    let domain = Name::from_dotted("cluster.local.").unwrap();
    let skydns_config = skydns::Config {
        hostmaster: domain.prepend("hostmaster").unwrap(),
        domain,
        ..skydns::Config::default()
    };
    let leaf = |key: &str, address: &str| {
        (
            format!("/skydns/local/cluster/{key}"),
            skydns::Service {
                host: address.into(),
                ..skydns::Service::default()
            },
        )
    };
    let records = [
        leaf("svc/testns/svc1/172-0-0-10", "10.9.9.1"),
        leaf("svc/testns/hdls", "10.9.9.2"),
        leaf("other", "10.9.9.3"),
    ];
    let base = skydns::build(&skydns_config, &records, 1, UNIX_EPOCH);
    assert_eq!(base.leaves.len(), 3);
    let s = compose(&base, snapshot(), 9);
    assert_eq!(
        data(&s, &n("172-0-0-10.svc1.testns.svc"), RecordType::A),
        ["172.0.0.10"],
        "a name of the cluster's tables"
    );
    let headless = data(&s, &n("hdls.testns.svc"), RecordType::A);
    assert!(
        !headless.is_empty() && !headless.contains(&"10.9.9.2".to_owned()),
        "a cluster node"
    );
    assert_eq!(data(&s, "other.cluster.local.", RecordType::A), ["10.9.9.3"]);
}

#[test]
fn composed_with_skydns_both_zones_answer() {
    let domain = Name::from_dotted("skydns.test.").unwrap();
    let skydns_config = skydns::Config {
        hostmaster: domain.prepend("hostmaster").unwrap(),
        domain,
        ..skydns::Config::default()
    };
    let records = vec![(
        "/skydns/test/skydns/web".to_owned(),
        skydns::Service {
            host: "192.0.2.1".into(),
            ..skydns::Service::default()
        },
    )];
    let base = skydns::build(&skydns_config, &records, 1, UNIX_EPOCH);
    let s = compose(&base, snapshot(), 9);
    assert_eq!(s.generation, 9);
    assert_eq!(data(&s, "web.skydns.test.", RecordType::A), ["192.0.2.1"]);
    assert_eq!(data(&s, &n("svc1.testns.svc"), RecordType::A), ["10.0.0.1"]);
    assert_nxdomain(&s, &n("nope.testns.svc"), RecordType::A);
    assert_nxdomain(&s, "99.0.0.10.in-addr.arpa.", RecordType::PTR);
    assert!(s
        .zones
        .windows(2)
        .all(|w| w[0].apex.wire().len() >= w[1].apex.wire().len()));
    for (name, node) in s
        .nodes
        .iter()
        .map(|(n, node)| (n.clone(), node.clone()))
        .chain(s.hosts.nodes())
    {
        assert_eq!(
            s.zone_of(&LowerName::from_wire(name.wire()).unwrap())
                .map(|(i, _)| i as u16),
            Some(node.zone()),
            "{name}"
        );
    }
}

/// A SkyDNS name pointing to a cluster service answers the service's addresses at its own name
/// (flattened), from the cluster zone of the same snapshot, without forwarding; beside an address
/// of its own, both answer.
#[test]
fn a_skydns_name_pointing_into_the_cluster_zone_answers_the_services_addresses() {
    let domain = Name::from_dotted("skydns.test.").unwrap();
    let skydns_config = skydns::Config {
        hostmaster: domain.prepend("hostmaster").unwrap(),
        domain,
        ..skydns::Config::default()
    };
    let record = |key: &str, host: &str, ttl: u32| {
        (
            format!("/skydns/test/skydns/{key}"),
            skydns::Service {
                host: host.into(),
                ttl,
                ..skydns::Service::default()
            },
        )
    };
    let records = vec![
        record("api", &n("svc1.testns.svc"), 3),
        record("both/svc", &n("svc1.testns.svc"), 0),
        record("both/own", "192.0.2.9", 0),
    ];
    let base = skydns::build(&skydns_config, &records, 1, UNIX_EPOCH);
    let s = compose(&base, snapshot(), 9);
    let reply = ask(&s, "api.skydns.test.", RecordType::A);
    let answers: Vec<(String, RecordType, u32, String)> = reply
        .answers()
        .iter()
        .map(|r| {
            (
                r.name().to_ascii(),
                r.record_type(),
                r.ttl(),
                r.data().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        answers,
        [("api.skydns.test.".to_owned(), RecordType::A, 3, "10.0.0.1".to_owned())],
        "at the query name, the record's TTL capping the service's"
    );
    let mut both = data(&s, "both.skydns.test.", RecordType::A);
    both.sort();
    assert_eq!(both, ["10.0.0.1", "192.0.2.9"]);
    assert!(ask(&s, "api.skydns.test.", RecordType::CNAME).answers().is_empty());
}

#[test]
fn fallthrough_zones_pass_missing_names_on() {
    let reverse = Name::from_dotted("in-addr.arpa.").unwrap();
    let config = Config {
        fallthrough: Some(vec![reverse]),
        ..Config::default()
    };
    let s = snapshot_with(&config, &cluster());
    let missing = ask(&s, "99.0.0.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(
        missing.response_code(),
        ResponseCode::Refused,
        "passed on: without forwarding, refused"
    );
    assert_eq!(
        data(&s, "1.0.0.10.in-addr.arpa.", RecordType::PTR),
        ["svc1.testns.svc.cluster.local."]
    );
    assert_nxdomain(&s, &n("nope.testns.svc"), RecordType::A);

    let everywhere = Config {
        fallthrough: Some(vec![]),
        ..Config::default()
    };
    let s = snapshot_with(&everywhere, &cluster());
    assert_eq!(
        ask(&s, &n("nope.testns.svc"), RecordType::A).response_code(),
        ResponseCode::Refused
    );
}
