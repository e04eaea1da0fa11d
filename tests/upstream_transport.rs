//! How skyline asks its upstreams, end to end: UDP with TCP after truncation by default
//! (CoreDNS's prefer_udp), every query over persistent TCP connections with force_tcp, DNS over
//! TLS with `--forward-tls` or `tls://` stub servers, each set of upstreams its own way. The
//! upstream is written here, on 127.0.0.1: it records the transport of every query and the
//! connections it accepts, and answers each name with an address that says which upstream it
//! is; answers are read with hickory-proto.

mod common;

use common::{a_of, query, udp_query, Skyline};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::{rdata::A, RData, Record, RecordType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.9.0.1"}}"#;

/// What an upstream saw.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Seen {
    udp: usize,
    tcp: usize,
    tls: usize,
    tcp_connections: usize,
    tls_connections: usize,
}

/// A test CA and the upstream's certificate, for `dns.test` and 127.0.0.1.
struct Pki {
    ca_pem: String,
    config: Arc<ServerConfig>,
}

impl Pki {
    fn generate() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "upstream test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["dns.test".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        let leaf = params.signed_by(&key, &ca).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(leaf.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        Pki {
            ca_pem: ca.pem(),
            config: Arc::new(config),
        }
    }
}

/// An upstream answering every A question with `192.0.2.<mark>`, over UDP and TCP on one port
/// and over TLS on another.
struct Upstream {
    plain: SocketAddr,
    tls: SocketAddr,
    seen: Arc<Mutex<Seen>>,
}

impl Upstream {
    fn start(mark: u8, pki: &Pki) -> Upstream {
        let seen = Arc::new(Mutex::new(Seen::default()));
        // A free UDP port whose TCP twin is free too.
        let (udp, tcp) = (0..100)
            .find_map(|_| {
                let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
                let tcp = TcpListener::bind(udp.local_addr().unwrap()).ok()?;
                Some((udp, tcp))
            })
            .expect("a port free over UDP and TCP");
        let plain = udp.local_addr().unwrap();
        let tls = TcpListener::bind("127.0.0.1:0").unwrap();
        let tls_addr = tls.local_addr().unwrap();
        let counts = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok((n, from)) = udp.recv_from(&mut buf) {
                counts.lock().unwrap().udp += 1;
                let _ = udp.send_to(&reply(&buf[..n], mark), from);
            }
        });
        let counts = Arc::clone(&seen);
        std::thread::spawn(move || {
            for conn in tcp.incoming().map_while(Result::ok) {
                counts.lock().unwrap().tcp_connections += 1;
                let counts = Arc::clone(&counts);
                std::thread::spawn(move || serve_stream(conn, mark, || counts.lock().unwrap().tcp += 1));
            }
        });
        let counts = Arc::clone(&seen);
        let config = Arc::clone(&pki.config);
        std::thread::spawn(move || {
            for conn in tls.incoming().map_while(Result::ok) {
                counts.lock().unwrap().tls_connections += 1;
                let counts = Arc::clone(&counts);
                let session = ServerConnection::new(Arc::clone(&config)).unwrap();
                std::thread::spawn(move || {
                    serve_stream(StreamOwned::new(session, conn), mark, || {
                        counts.lock().unwrap().tls += 1
                    })
                });
            }
        });
        Upstream {
            plain,
            tls: tls_addr,
            seen,
        }
    }

    fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }
}

/// Answers the length-prefixed queries of one connection, counting each with `count`.
fn serve_stream(mut conn: impl Read + Write, mark: u8, count: impl Fn()) {
    loop {
        let mut len = [0u8; 2];
        if conn.read_exact(&mut len).is_err() {
            return;
        }
        let mut query = vec![0; usize::from(u16::from_be_bytes(len))];
        if conn.read_exact(&mut query).is_err() {
            return;
        }
        count();
        let answer = reply(&query, mark);
        let mut framed = (answer.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&answer);
        if conn.write_all(&framed).and_then(|()| conn.flush()).is_err() {
            return;
        }
    }
}

fn reply(query: &[u8], mark: u8) -> Vec<u8> {
    let query = Message::from_vec(query).unwrap();
    let mut reply = Message::new();
    reply
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(true);
    for q in query.queries() {
        reply.add_query(q.clone());
        if q.query_type() == RecordType::A {
            reply.add_answer(Record::from_rdata(
                q.name().clone(),
                60,
                RData::A(A(Ipv4Addr::new(192, 0, 2, mark))),
            ));
        }
    }
    reply.to_vec().unwrap()
}

/// Asks `name` A of `s`, over UDP.
fn ask(s: &Skyline, name: &str) -> Message {
    udp_query(s.addr, &query(name, RecordType::A, Some(1232)))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const N: usize = 40;

/// Asks `N` distinct names under `zone`, each answered by the upstream marked `mark`.
fn ask_distinct_names(s: &Skyline, zone: &str, mark: u8) {
    for i in 0..N {
        let reply = ask(s, &format!("name{i}.{zone}"));
        assert_eq!(reply.response_code(), ResponseCode::NoError, "name{i}.{zone}");
        assert_eq!(a_of(&reply), [Ipv4Addr::new(192, 0, 2, mark)], "name{i}.{zone}");
    }
}

#[test]
fn by_default_queries_go_over_udp() {
    let pki = Pki::generate();
    let upstream = Upstream::start(1, &pki);
    let s = Skyline::start(RECORDS, &["--nameservers", &upstream.plain.to_string()], &[]);
    ask_distinct_names(&s, "example.org.", 1);
    let seen = upstream.seen();
    assert_eq!((seen.udp, seen.tcp, seen.tcp_connections), (N, 0, 0), "{seen:?}");
}

#[test]
fn force_tcp_carries_every_query_over_tcp_on_connections_it_reuses() {
    let pki = Pki::generate();
    let upstream = Upstream::start(1, &pki);
    let s = Skyline::start(
        RECORDS,
        &["--nameservers", &upstream.plain.to_string(), "--forward-force-tcp"],
        &[],
    );
    ask_distinct_names(&s, "example.org.", 1);
    let seen = upstream.seen();
    assert_eq!((seen.udp, seen.tcp), (0, N), "every query over TCP: {seen:?}");
    assert!(
        (1..=2).contains(&seen.tcp_connections),
        "at most one connection per worker for {N} queries asked one at a time: {seen:?}"
    );
}

#[test]
fn a_tls_upstream_trusted_through_the_ca_file_answers_over_tls() {
    let pki = Pki::generate();
    let upstream = Upstream::start(1, &pki);
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let s = Skyline::start(
        RECORDS,
        &[
            "--nameservers",
            &upstream.tls.to_string(),
            "--forward-tls",
            "--forward-tls-ca",
            ca.to_str().unwrap(),
        ],
        &[],
    );
    ask_distinct_names(&s, "example.org.", 1);
    let seen = upstream.seen();
    assert_eq!(
        (seen.udp, seen.tcp, seen.tls),
        (0, 0, N),
        "every query over TLS: {seen:?}"
    );
    assert!((1..=2).contains(&seen.tls_connections), "{seen:?}");
}

#[test]
fn a_tls_upstream_whose_certificate_does_not_carry_the_server_name_never_sees_a_query() {
    let pki = Pki::generate();
    let upstream = Upstream::start(1, &pki);
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let s = Skyline::start(
        RECORDS,
        &[
            "--nameservers",
            &upstream.tls.to_string(),
            "--forward-tls",
            "--forward-tls-ca",
            ca.to_str().unwrap(),
            "--forward-tls-servername",
            "wrong.test",
        ],
        &[],
    );
    let reply = ask(&s, "www.example.org.");
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
    let seen = upstream.seen();
    assert!(seen.tls_connections >= 1, "skyline tried: {seen:?}");
    assert_eq!(seen.tls, 0, "no query went to a server that failed the check: {seen:?}");
}

#[test]
fn each_set_of_upstreams_is_asked_its_own_way() {
    let pki = Pki::generate();
    let (default, cluster, private) = (
        Upstream::start(1, &pki),
        Upstream::start(2, &pki),
        Upstream::start(3, &pki),
    );
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let config = write(
        dir.path(),
        "skyline.toml",
        &format!(
            "[[forward.stub_zones]]\nzone = \"cluster.local.\"\nservers = [\"{}\"]\nforce_tcp = true\n\n\
             [[forward.stub_zones]]\nzone = \"private.test.\"\nservers = [\"tls://{}\"]\n\
             tls_servername = \"dns.test\"\ntls_ca = \"{}\"\n",
            cluster.plain,
            private.tls,
            ca.display()
        ),
    );
    let s = Skyline::start(
        RECORDS,
        &[
            "--config",
            config.to_str().unwrap(),
            "--nameservers",
            &default.plain.to_string(),
        ],
        &[],
    );
    ask_distinct_names(&s, "example.org.", 1);
    ask_distinct_names(&s, "svc.cluster.local.", 2);
    ask_distinct_names(&s, "private.test.", 3);
    let (default, cluster, private) = (default.seen(), cluster.seen(), private.seen());
    assert_eq!(
        (default.udp, default.tcp, default.tls),
        (N, 0, 0),
        "`.` over UDP: {default:?}"
    );
    assert_eq!(
        (cluster.udp, cluster.tcp, cluster.tls),
        (0, N, 0),
        "cluster.local over TCP: {cluster:?}"
    );
    assert_eq!(
        (private.udp, private.tcp, private.tls),
        (0, 0, N),
        "private.test over TLS: {private:?}"
    );
    assert!(cluster.tcp_connections <= 2 && private.tls_connections <= 2);
}

/// NodeLocal DNSCache's Corefile shape: the cluster zone to the cluster DNS with `force_tcp`,
/// the rest over DNS over TLS with the server name checked against the test CA.
#[test]
fn a_corefile_asks_each_block_over_its_forward_transport() {
    let pki = Pki::generate();
    let (cluster, outside) = (Upstream::start(2, &pki), Upstream::start(1, &pki));
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let corefile = |servername: &str| {
        format!(
            "cluster.local:53 {{\n    errors\n    cache {{\n        success 9984 30\n        denial 9984 5\n    }}\n    \
             forward . {cluster} {{\n        force_tcp\n    }}\n}}\n\
             .:53 {{\n    errors\n    cache 30\n    forward . tls://{outside} {{\n        tls {ca}\n        tls_servername {servername}\n    }}\n}}\n",
            cluster = cluster.plain,
            outside = outside.tls,
            ca = ca.display(),
        )
    };
    let path = write(dir.path(), "Corefile", &corefile("dns.test"));
    let s = Skyline::start_with(&["--corefile", path.to_str().unwrap()], &[]);
    ask_distinct_names(&s, "svc.cluster.local.", 2);
    ask_distinct_names(&s, "example.org.", 1);
    let (c, o) = (cluster.seen(), outside.seen());
    assert_eq!((c.udp, c.tcp, c.tls), (0, N, 0), "cluster.local over TCP only: {c:?}");
    assert!((1..=2).contains(&c.tcp_connections), "connections reused: {c:?}");
    assert_eq!((o.udp, o.tcp, o.tls), (0, 0, N), "the rest over TLS: {o:?}");
    assert!((1..=2).contains(&o.tls_connections), "{o:?}");
    drop(s);

    let path = write(dir.path(), "Corefile", &corefile("wrong.test"));
    let s = Skyline::start_with(&["--corefile", path.to_str().unwrap()], &[]);
    assert_eq!(ask(&s, "www.example.org.").response_code(), ResponseCode::ServFail);
    assert_eq!(outside.seen().tls, N, "no query to a server that failed the name check");
}
