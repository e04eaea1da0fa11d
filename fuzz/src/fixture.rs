//! The fixed data the targets answer from: SkyDNS records covering every record kind and every
//! size class of answer, turned into a snapshot by the real parser and builder, and a small
//! Kubernetes cluster served beside them.

use skyline_controlplane::skydns::parse_record;
use skyline_dataplane::signer::build;
use skyline_dataplane::snapshot::kubernetes::{
    self, Cluster, Endpoint, EndpointSlice, ObjectKey, PodMode, Protocol, ServiceKind, ServicePort,
};
use skyline_dataplane::snapshot::skydns::{Config, Service};
use skyline_dataplane::snapshot::{compose, Identity, Snapshot};
use skyline_dataplane::wire::Name;
use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::{Duration, UNIX_EPOCH};

/// The SkyDNS domain of the fixture.
pub const DOMAIN: &str = "skydns.local.";

/// Text length of the two records below `wall.skydns.local.`: their TXT RRset is 65520 bytes,
/// within what one message can carry after a short header, but not after a 12-byte header and
/// the question `wall.skydns.local.` (65535 - 35 = 65500 bytes of room).
const WALL_TEXT_LEN: usize = 32_620;

/// Records of every kind at small sizes: addresses, aliases (chains, loops, self-references,
/// out-of-domain targets), SRV with address and name targets, MX, TXT split at 255 bytes, NS,
/// groups, wildcard-matching trees, PTR for both reverse trees, and a record with no host.
const SMALL: &[(&str, &str)] = &[
    ("dns/ns/ns1", r#"{"host":"10.0.0.53"}"#),
    ("dns/ns/ns2", r#"{"host":"2001:db8::53"}"#),
    ("hosts/node1", r#"{"host":"10.0.0.101"}"#),
    ("hosts/v6", r#"{"host":"2001:db8::101"}"#),
    ("hosts/mapped", r#"{"host":"::ffff:10.0.0.102"}"#),
    ("east/web/1", r#"{"host":"10.0.1.10","port":80}"#),
    (
        "east/web/2",
        r#"{"host":"10.0.1.11","port":80,"weight":50,"priority":5}"#,
    ),
    ("east/web/3", r#"{"host":"2001:db8:1::10","port":80,"ttl":30}"#),
    (
        "east/api/a",
        r#"{"host":"node1.hosts.skydns.local.","port":8443,"targetstrip":1}"#,
    ),
    ("east/info", r#"{"text":"east region: web and api tiers"}"#),
    ("chain/c1", r#"{"host":"c2.chain.skydns.local."}"#),
    ("chain/c2", r#"{"host":"c3.chain.skydns.local.","ttl":30}"#),
    ("chain/c3", r#"{"host":"10.0.2.1"}"#),
    ("loop/l1", r#"{"host":"l2.loop.skydns.local."}"#),
    ("loop/l2", r#"{"host":"l1.loop.skydns.local."}"#),
    ("self", r#"{"host":"self.skydns.local."}"#),
    ("external", r#"{"host":"www.example.org."}"#),
    (
        "mail/mx1",
        r#"{"host":"node1.hosts.skydns.local.","mail":true,"priority":10}"#,
    ),
    ("mail/mx2", r#"{"host":"10.0.5.2","mail":true,"targetstrip":9}"#),
    ("db/primary", r#"{"host":"10.0.3.1","port":5432,"group":"blue"}"#),
    ("db/replicas/r1", r#"{"host":"10.0.3.2","port":5432,"group":"blue"}"#),
    ("db/replicas/r2", r#"{"host":"10.0.3.3","port":5432,"group":"green"}"#),
    ("region1/development/server1", r#"{"host":"10.0.4.1"}"#),
    ("region1/production/server1", r#"{"host":"10.0.4.3"}"#),
    ("region1/production/server2", r#"{"host":"10.0.4.4","text":"prod"}"#),
    ("empty", "{}"),
    ("root", r#"{"host":"."}"#),
];

/// Reverse-tree records, keyed below `/skydns/arpa/`.
const REVERSE: &[(&str, &str)] = &[
    ("in-addr/10/0/0/101", r#"{"host":"node1.hosts.skydns.local."}"#),
    ("in-addr/10/0/0/102", r#"{"host":"10.0.0.102"}"#),
    (
        "ip6/2/0/0/1/0/d/b/8/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/1/0/1",
        r#"{"host":"v6.hosts.skydns.local."}"#,
    ),
];

/// The fixture's settings: domain `skydns.local.`, with `local.dns.skydns.local.` aliasing
/// `node1.hosts.skydns.local.`.
pub fn config() -> Config {
    Config {
        local: Some(Name::from_dotted("node1.hosts.skydns.local.").expect("static name")),
        ..Config::default()
    }
}

/// The small records as `(etcd key, record JSON)`.
pub fn small_records() -> Vec<(String, String)> {
    let mut records: Vec<(String, String)> = SMALL
        .iter()
        .map(|(path, json)| (format!("/skydns/local/skydns/{path}"), json.to_string()))
        .collect();
    records.extend(
        REVERSE
            .iter()
            .map(|(path, json)| (format!("/skydns/arpa/{path}"), json.to_string())),
    );
    records.push((
        "/skydns/local/skydns/long/t".into(),
        format!(r#"{{"text":"{}"}}"#, "a".repeat(600)),
    ));
    records.push((
        "/skydns/local/skydns/long/exact".into(),
        format!(r#"{{"text":"{}"}}"#, "b".repeat(255)),
    ));
    records
}

/// Every record: the small ones, plus answers of every size class: 60 addresses (over 512
/// bytes, under 1232), 100 addresses (over 1232), a TXT RRset just over what a message holds
/// after its question, and a directory whose answer exceeds any message.
pub fn all_records() -> Vec<(String, String)> {
    let mut records = small_records();
    let text = |n: usize, c: char| format!(r#"{{"text":"{}"}}"#, c.to_string().repeat(n));
    for i in 0..60 {
        records.push((
            format!("/skydns/local/skydns/big/h{i:02}"),
            format!(r#"{{"host":"10.1.0.{i}"}}"#),
        ));
    }
    for i in 0..100 {
        records.push((
            format!("/skydns/local/skydns/huge/h{i:03}"),
            format!(r#"{{"host":"10.2.{}.{}"}}"#, i / 200, i % 200),
        ));
    }
    records.push(("/skydns/local/skydns/wall/w1".into(), text(WALL_TEXT_LEN, 'v')));
    records.push(("/skydns/local/skydns/wall/w2".into(), text(WALL_TEXT_LEN, 'w')));
    records.push(("/skydns/local/skydns/overflow/o1".into(), text(40_000, 'x')));
    records.push(("/skydns/local/skydns/overflow/o2".into(), text(40_000, 'y')));
    records
}

/// Parses record JSON with the control plane's parser; the fixture's own records must parse.
pub fn parse_all(records: &[(String, String)]) -> Vec<(String, Service)> {
    records
        .iter()
        .map(|(key, json)| {
            let service = parse_record(json.as_bytes()).unwrap_or_else(|e| panic!("fixture record {key}: {e}"));
            (key.clone(), service)
        })
        .collect()
}

/// Builds a snapshot of typed records with the fixture's settings, a fixed clock, and CHAOS
/// identity configured (so that class CH queries are answered too).
pub fn build_snapshot(records: &[(String, Service)]) -> Snapshot {
    let mut snapshot = build(&config(), records, 1, UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    snapshot.identity = Identity {
        version: Some(b"skyline fuzz".as_slice().into()),
        id: Some(b"fuzz-1".as_slice().into()),
    };
    snapshot
}

/// The snapshot of [`all_records`], built once per process.
pub fn snapshot() -> &'static Snapshot {
    static SNAPSHOT: OnceLock<Snapshot> = OnceLock::new();
    SNAPSHOT.get_or_init(|| build_snapshot(&parse_all(&all_records())))
}

/// A cluster with a name of every kind the cluster zones serve: ClusterIP services with named
/// and unnamed ports (port names also answered without their underscores), a dual-stack one,
/// a headless one with hostnames and an address under two labels, one without endpoints, an
/// ExternalName, endpoints kept in the tables and as nodes, and their PTRs.
pub fn cluster() -> Cluster {
    let address = |text: &str| -> IpAddr { text.parse().expect("a fixture address") };
    let port = |name: &str, protocol: Protocol, port: u16| ServicePort {
        name: name.into(),
        protocol,
        port,
    };
    let endpoint = |text: &str, hostname: Option<&str>| Endpoint {
        address: address(text),
        hostname: hostname.map(Into::into),
        pod: Some(format!("pod-{}", text.replace([':', '.'], "-")).into()),
    };
    let mut c = Cluster::default();
    c.namespaces.insert("ns".into());
    let web_ports: Box<[ServicePort]> = vec![
        port("http", Protocol::Tcp, 80),
        port("dns", Protocol::Udp, 53),
        port("", Protocol::Tcp, 8080),
    ]
    .into();
    let services = [
        ("web", ServiceKind::ClusterIp(vec![address("10.96.0.10")].into())),
        (
            "dual",
            ServiceKind::ClusterIp(vec![address("10.96.0.11"), address("fd00::11")].into()),
        ),
        ("pets", ServiceKind::Headless),
        ("none", ServiceKind::Headless),
        ("out", ServiceKind::ExternalName("example.net".into())),
        ("in", ServiceKind::ExternalName("web.ns.svc.cluster.local".into())),
    ];
    for (name, kind) in services {
        c.services.insert(
            ObjectKey::new("ns", name),
            kubernetes::Service {
                kind,
                ports: web_ports.clone(),
            },
        );
    }
    let slices = [
        (
            "web-a",
            "web",
            vec![endpoint("10.1.0.1", None), endpoint("10.1.0.2", None)],
        ),
        ("dual-a", "dual", vec![endpoint("fd00::1:1", None)]),
        (
            "pets-a",
            "pets",
            vec![
                endpoint("10.1.1.1", Some("pet-0")),
                endpoint("10.1.1.2", Some("pet-1")),
                endpoint("10.1.1.3", Some("pet-0")),
                endpoint("10.1.1.4", None),
            ],
        ),
    ];
    for (name, service, endpoints) in slices {
        c.slices.insert(
            ObjectKey::new("ns", name),
            EndpointSlice {
                service: service.into(),
                ports: web_ports.clone(),
                endpoints: endpoints.into(),
            },
        );
    }
    c
}

/// The SkyDNS snapshot of [`all_records`] with the cluster zones of [`cluster`] (pod names
/// answered for any address, OpenShift's names on) composed over it, built once per process.
pub fn composed() -> &'static Snapshot {
    static COMPOSED: OnceLock<Snapshot> = OnceLock::new();
    COMPOSED.get_or_init(|| {
        let config = kubernetes::Config {
            pods: PodMode::Insecure,
            openshift_names: true,
            ..kubernetes::Config::default()
        };
        let clock = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        compose(snapshot(), kubernetes::build(&config, &cluster(), 1, clock), 2)
    })
}
