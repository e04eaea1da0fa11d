//! End-to-end: skyline behind the caching resolvers clients really ask through. A real Unbound
//! (QNAME minimisation on, as it ships) and a real BIND `named`, each started on loopback with
//! the SkyDNS domain delegated to skyline, must give for every name of the records file and every
//! type the same answer as skyline gives directly — after an A query of the same name has
//! filled the resolver's cache, which is what exposes a CNAME served beside other data (RFC
//! 2181 §10.1: a cached CNAME is followed for every type). Signed (`--dnssec`), each resolver
//! validates with skyline's key as its trust anchor: every answer carries AD, none is SERVFAIL.

mod common;

use common::{free_port, query, tool, udp_query, Skyline};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The records file users start from, the one `examples/` ships.
const RECORDS: &str = include_str!("../examples/records.json");
const DOMAIN: &str = "skydns.local.";

/// The types asked of every name.
const TYPES: [RecordType; 6] = [
    RecordType::A,
    RecordType::AAAA,
    RecordType::SRV,
    RecordType::TXT,
    RecordType::MX,
    RecordType::CNAME,
];

/// Every name the records file holds in the domain: each key's name and the directories above
/// it, the apex included.
fn names() -> Vec<String> {
    let records: serde_json::Map<String, serde_json::Value> = serde_json::from_str(RECORDS).unwrap();
    let mut names = BTreeSet::new();
    for key in records.keys() {
        let Some(below) = key.strip_prefix("/skydns/local/skydns/") else {
            continue;
        };
        let labels: Vec<&str> = below.split('/').collect();
        for depth in 1..=labels.len() {
            let name: Vec<&str> = labels[..depth].iter().rev().copied().collect();
            names.insert(format!("{}.{DOMAIN}", name.join(".")));
        }
    }
    names.insert(DOMAIN.to_string());
    names.into_iter().collect()
}

/// What is compared of a reply: its rcode and its answer records (owner, type, data), without
/// TTLs (a cache counts them down) and order (round robin).
fn gist(reply: &Message) -> (ResponseCode, BTreeSet<(String, RecordType, String)>) {
    let answers = reply
        .answers()
        .iter()
        .filter(|r| r.record_type() != RecordType::RRSIG)
        .map(|r| {
            let data = r.data().map(|d| d.to_string()).unwrap_or_default();
            (r.name().to_ascii().to_lowercase(), r.record_type(), data.to_lowercase())
        })
        .collect();
    (reply.response_code(), answers)
}

/// A resolver process on loopback, killed on drop.
struct Resolver {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Resolver {
    fn drop(&mut self) {
        common::stop_child(&mut self.child, "resolver");
    }
}

impl Resolver {
    /// Waits until the resolver answers on its port: a name of 10.in-addr.arpa, which both
    /// resolvers answer from their own empty zone (RFC 6303), without asking anyone.
    fn ready(self) -> Resolver {
        let deadline = Instant::now() + Duration::from_secs(15);
        let q = query("1.0.0.10.in-addr.arpa.", RecordType::PTR, Some(1232));
        while Instant::now() < deadline {
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            socket.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
            socket.send_to(&q.to_vec().unwrap(), self.addr).unwrap();
            let mut buf = [0u8; 4096];
            if socket.recv_from(&mut buf).is_ok() {
                return self;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the resolver at {} never answered", self.addr);
    }

    /// Unbound with the domain as a stub zone served by skyline at `skyline`; validating with
    /// the trust anchor `anchor` (a DNSKEY line) when given.
    fn unbound(skyline: SocketAddr, anchor: Option<&str>) -> Resolver {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let (modules, trust) = match anchor {
            Some(key) => {
                std::fs::write(dir.path().join("anchor"), format!("{key}\n")).unwrap();
                ("validator iterator", "  trust-anchor-file: \"anchor\"\n".to_string())
            }
            None => ("iterator", String::new()),
        };
        let conf = format!(
            "server:\n  interface: 127.0.0.1\n  port: {port}\n  do-ip6: no\n  do-daemonize: no\n  \
             username: \"\"\n  chroot: \"\"\n  directory: \"{dir}\"\n  pidfile: \"\"\n  use-syslog: no\n  \
             logfile: \"\"\n  verbosity: 0\n  do-not-query-localhost: no\n  qname-minimisation: yes\n  \
             module-config: \"{modules}\"\n{trust}  access-control: 127.0.0.0/8 allow\n\
             stub-zone:\n  name: \"{DOMAIN}\"\n  stub-addr: {ip}@{sport}\n",
            dir = dir.path().display(),
            ip = skyline.ip(),
            sport = skyline.port(),
        );
        let path = dir.path().join("unbound.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(sbin("unbound"))
            .arg("-d")
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("unbound runs");
        Resolver {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            _dir: dir,
        }
        .ready()
    }

    /// BIND's `named` forwarding the domain to skyline (a static stub cannot name a port),
    /// caching what it gets; validating with the trust anchor `anchor` (a `trust-anchors`
    /// clause) when given.
    fn named(skyline: SocketAddr, anchor: Option<&str>) -> Resolver {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let (validation, trust) = match anchor {
            Some(clause) => ("yes", clause.to_string()),
            None => ("no", String::new()),
        };
        let conf = format!(
            "options {{\n  directory \"{dir}\";\n  pid-file none;\n  listen-on port {port} {{ 127.0.0.1; }};\n  \
             listen-on-v6 {{ none; }};\n  recursion yes;\n  allow-query {{ any; }};\n  \
             dnssec-validation {validation};\n  qname-minimization relaxed;\n  minimal-responses yes;\n}};\n\
             {trust}\n\
             zone \"{DOMAIN}\" {{ type forward; forward only; forwarders {{ {ip} port {sport}; }}; }};\n",
            dir = dir.path().display(),
            ip = skyline.ip(),
            sport = skyline.port(),
        );
        let path = dir.path().join("named.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(sbin("named"))
            .args(["-g", "-4", "-n", "1", "-c"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("named runs");
        Resolver {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            _dir: dir,
        }
        .ready()
    }
}

/// A server program from `PATH` or `/usr/sbin`, where Debian puts it.
fn sbin(name: &str) -> PathBuf {
    common::find_on_path(name).unwrap_or_else(|| Path::new("/usr/sbin").join(name))
}

/// Whether Unbound, named and dnssec-keygen can run; under CI=true their absence fails.
fn resolvers_available() -> bool {
    let on = |name: &str, package: &str| sbin(name).is_file() || tool(name, package);
    on("unbound", "unbound") & on("named", "bind9") & tool("dnssec-keygen", "bind9-utils")
}

/// A recursive query to `addr`, with DO when `dnssec`.
fn ask(addr: SocketAddr, name: &str, rtype: RecordType, dnssec: bool) -> Message {
    let mut q = query(name, rtype, Some(1232));
    q.set_recursion_desired(true);
    if dnssec {
        q.extensions_mut().as_mut().unwrap().set_dnssec_ok(true);
    }
    udp_query(addr, &q)
}

/// Asks every name and type through `resolver`, each after an A query of the same name, and
/// compares with skyline's own answer; signed zones must validate (AD, never SERVFAIL).
fn compare(skyline: &Skyline, resolver: &Resolver, what: &str, dnssec: bool) {
    let mut differences = Vec::new();
    for name in names() {
        ask(resolver.addr, &name, RecordType::A, dnssec);
        for rtype in TYPES {
            let direct = gist(&ask(skyline.addr, &name, rtype, false));
            let through = ask(resolver.addr, &name, rtype, dnssec);
            if dnssec && (!through.authentic_data() || through.response_code() == ResponseCode::ServFail) {
                differences.push(format!("{name} {rtype}: not validated: {through:?}"));
                continue;
            }
            let through = gist(&through);
            if through != direct {
                differences.push(format!("{name} {rtype}:\n  direct:  {direct:?}\n  {what}: {through:?}"));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{what} answers otherwise than skyline directly:\n{}",
        differences.join("\n")
    );
}

/// A key pair for the domain, made by dnssec-keygen in `dir`; its base name and DNSKEY line.
fn keygen(dir: &Path) -> (PathBuf, String) {
    let out = Command::new("dnssec-keygen")
        .current_dir(dir)
        .args(["-q", "-f", "KSK", "-a", "ECDSAP256SHA256", "skydns.local"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let base = dir.join(String::from_utf8_lossy(&out.stdout).trim());
    let key = std::fs::read_to_string(format!("{}.key", base.display())).unwrap();
    let line = key
        .lines()
        .find(|l| !l.starts_with(';') && l.contains("DNSKEY"))
        .unwrap()
        .to_string();
    (base, line)
}

/// The DNSKEY line as BIND's `trust-anchors` clause.
fn trust_anchors(dnskey: &str) -> String {
    let fields: Vec<&str> = dnskey.split_whitespace().collect();
    let at = fields.iter().position(|f| *f == "DNSKEY").unwrap();
    format!(
        "trust-anchors {{ {DOMAIN} static-key {} {} {} \"{}\"; }};",
        fields[at + 1],
        fields[at + 2],
        fields[at + 3],
        fields[at + 4..].concat()
    )
}

#[test]
fn through_unbound_every_name_answers_as_skyline_does_directly() {
    if !resolvers_available() {
        return;
    }
    let skyline = Skyline::start(RECORDS, &["--no-rec"], &[]);
    let unbound = Resolver::unbound(skyline.addr, None);
    compare(&skyline, &unbound, "unbound", false);
}

#[test]
fn through_bind_every_name_answers_as_skyline_does_directly() {
    if !resolvers_available() {
        return;
    }
    let skyline = Skyline::start(RECORDS, &["--no-rec"], &[]);
    let named = Resolver::named(skyline.addr, None);
    compare(&skyline, &named, "named", false);
}

#[test]
fn signed_through_validating_unbound_and_bind_every_answer_is_authentic_and_the_same() {
    if !resolvers_available() {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let (keybase, dnskey) = keygen(keys.path());
    let skyline = Skyline::start(RECORDS, &["--no-rec", "--dnssec", keybase.to_str().unwrap()], &[]);
    let unbound = Resolver::unbound(skyline.addr, Some(&dnskey));
    compare(&skyline, &unbound, "unbound", true);
    let named = Resolver::named(skyline.addr, Some(&trust_anchors(&dnskey)));
    compare(&skyline, &named, "named", true);
}

/// What the shape of SkyDNS costs behind a cache, kept as the reason `--cname-chains` is off by
/// default: once the CNAME a name answers A with is cached, the SRV question gets the CNAME and
/// the target's SRV records instead of the name's own.
#[test]
fn with_cname_chains_a_cache_follows_the_cname_for_srv() {
    if !resolvers_available() {
        return;
    }
    let skyline = Skyline::start(RECORDS, &["--no-rec", "--cname-chains"], &[]);
    let unbound = Resolver::unbound(skyline.addr, None);
    let name = "api.east.skydns.local.";
    let direct = gist(&ask(skyline.addr, name, RecordType::SRV, false));
    ask(unbound.addr, name, RecordType::A, false);
    let through = gist(&ask(unbound.addr, name, RecordType::SRV, false));
    assert_ne!(through, direct, "the cached CNAME is followed for SRV");
    assert!(through.1.iter().any(|(_, rtype, _)| *rtype == RecordType::CNAME));
}
