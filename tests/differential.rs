//! Differential test against Knot DNS: the same records served by skyline (from a records file)
//! and by `knotd` (from a zone file generated from the same records), the same queries sent to
//! both, and rcode, header flags and all three sections compared, sections as sets.
//!
//! The records are those both can express: addresses, aliases, SRV, TXT, MX, NS, with names that
//! exist or not, types that exist or not, and an RRset too large for 512 bytes. The zone file
//! states in plain RRsets what SkyDNS semantics make of the records (docs/skydns-semantics.md): a
//! name answers with the records at or below it, every record with a host yields an SRV, and `mail`
//! records yield an MX. Where those semantics make skyline differ from a plain authoritative
//! server, [`MANDATED`] lists the difference and its reason, and the comparison allows exactly it.
//!
//! knotd is required under `CI=true`; elsewhere the test is skipped, with a message, when it is
//! not installed (`scripts/setup.sh test` installs it).

mod common;

use common::{free_port, Skyline};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DOMAIN: &str = "skydns.test.";
const TTL: u32 = 3600;
const MIN_TTL: u32 = 60;
const DEFAULT_PRIORITY: u16 = 10;

/// A SkyDNS record, as stored under `/skydns/test/skydns/<path>`.
struct Rec {
    path: String,
    host: String,
    port: u16,
    priority: u16,
    text: &'static str,
    mail: bool,
    ttl: u32,
}

fn rec(path: &str, host: &str) -> Rec {
    Rec {
        path: path.to_string(),
        host: host.to_string(),
        port: 0,
        priority: 0,
        text: "",
        mail: false,
        ttl: 0,
    }
}

/// The records both servers serve. `alias` points to a name (a name host), which it answers
/// for flattened; it sits directly under the apex, whose aggregate answers are not compared
/// (see [`queries`]).
fn data() -> Vec<Rec> {
    let mut records = vec![
        rec("dns/ns/ns1", "10.0.9.1"),
        Rec {
            port: 80,
            ..rec("web/w1", "10.0.0.1")
        },
        Rec {
            port: 8080,
            priority: 20,
            ..rec("web/w2", "10.0.0.2")
        },
        Rec {
            port: 8081,
            priority: 20,
            ..rec("web/w3", "10.0.0.3")
        },
        rec("v6/h1", "2001:db8::1"),
        rec("v6/h2", "2001:db8::2"),
        Rec {
            text: "hello world",
            ..rec("txt/t1", "")
        },
        Rec {
            text: "second string",
            ..rec("txt/t2", "")
        },
        Rec {
            mail: true,
            priority: 20,
            ..rec("mail/mx1", "10.0.5.1")
        },
        Rec {
            mail: true,
            ..rec("mail/mx2", "10.0.5.2")
        },
        Rec {
            ttl: 300,
            ..rec("alias", "w1.web.skydns.test.")
        },
    ];
    let big: Vec<Rec> = (0..40)
        .map(|i| rec(&format!("big/h{i:02}"), &format!("10.1.0.{i}")))
        .collect();
    records.extend(big);
    records
}

impl Rec {
    /// The DNS name of the record's key.
    fn name(&self) -> String {
        let labels: Vec<&str> = self.path.split('/').rev().collect();
        format!("{}.{DOMAIN}", labels.join("."))
    }

    fn is_ip(&self) -> bool {
        self.host.parse::<std::net::IpAddr>().is_ok()
    }

    fn ttl(&self) -> u32 {
        if self.ttl == 0 {
            TTL
        } else {
            self.ttl
        }
    }

    fn priority(&self) -> u16 {
        if self.priority == 0 {
            DEFAULT_PRIORITY
        } else {
            self.priority
        }
    }

    /// SRV and MX target: the host when it is a name, else the record's own name.
    fn target(&self) -> String {
        if self.is_ip() {
            self.name()
        } else {
            self.host.clone()
        }
    }

    fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"host": &self.host});
        for (field, value) in [("port", self.port), ("priority", self.priority)] {
            if value != 0 {
                v[field] = value.into();
            }
        }
        if !self.text.is_empty() {
            v["text"] = self.text.into();
        }
        if self.mail {
            v["mail"] = true.into();
        }
        if self.ttl != 0 {
            v["ttl"] = self.ttl.into();
        }
        v
    }
}

/// The records file skyline serves.
fn records_file(records: &[Rec]) -> String {
    let mut file = serde_json::json!({
        "/skydns/config": {"domain": DOMAIN, "ttl": TTL, "min_ttl": MIN_TTL},
    });
    for r in records {
        file[format!("/skydns/test/skydns/{}", r.path)] = r.json();
    }
    file.to_string()
}

/// Every name at or above `name`, up to but excluding the apex.
fn name_and_ancestors(name: &str) -> Vec<String> {
    let apex_labels = DOMAIN.trim_end_matches('.').split('.').count();
    let labels: Vec<&str> = name.trim_end_matches('.').split('.').collect();
    (0..labels.len() - apex_labels)
        .map(|i| format!("{}.", labels[i..].join(".")))
        .collect()
}

/// SkyDNS SRV weight (docs/skydns-semantics.md, "SRV"): per priority, each record's share of 100
/// rounded down, every record weighing 100 here.
fn srv_weight(records_at_priority: usize) -> u16 {
    (100.0 / (100.0 * records_at_priority as f64) * 100.0).floor() as u16
}

/// The zone file: what SkyDNS semantics make of the records, as plain RRsets.
fn zone_file(records: &[Rec]) -> String {
    let mut sets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut add = |owner: &str, ttl: u32, rr: String| {
        sets.entry(owner.to_string())
            .or_default()
            .insert(format!("{owner} {ttl} IN {rr}"));
    };
    add(
        DOMAIN,
        TTL,
        format!("SOA ns.dns.{DOMAIN} hostmaster.{DOMAIN} 1 28800 7200 604800 {MIN_TTL}"),
    );
    for r in records.iter().filter(|r| r.path.starts_with("dns/ns/")) {
        add(DOMAIN, r.ttl(), format!("NS {}", r.name()));
    }
    // A name pointing to a name answers the target's addresses at its own name (flattened),
    // living as long as the shorter of the two; the targets here are address records.
    for r in records.iter().filter(|r| !r.is_ip() && !r.host.is_empty()) {
        for target in records.iter().filter(|t| t.is_ip() && t.name() == r.host) {
            let ttl = r.ttl().min(target.ttl());
            match target.host.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(ip)) => add(&r.name(), ttl, format!("A {ip}")),
                Ok(std::net::IpAddr::V6(ip)) => add(&r.name(), ttl, format!("AAAA {ip}")),
                Err(_) => {}
            }
        }
    }
    let leaves: Vec<&Rec> = records.iter().filter(|r| r.is_ip() || r.host.is_empty()).collect();
    let mut names: BTreeSet<String> = BTreeSet::new();
    for r in &leaves {
        names.extend(name_and_ancestors(&r.name()));
    }
    for name in names {
        let below: Vec<&&Rec> = leaves
            .iter()
            .filter(|r| name_and_ancestors(&r.name()).contains(&name))
            .collect();
        for r in &below {
            match r.host.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(ip)) => add(&name, r.ttl(), format!("A {ip}")),
                Ok(std::net::IpAddr::V6(ip)) => add(&name, r.ttl(), format!("AAAA {ip}")),
                Err(_) => {}
            }
            if !r.text.is_empty() {
                add(&name, r.ttl(), format!("TXT \"{}\"", r.text));
            }
            if r.mail {
                add(&name, r.ttl(), format!("MX {} {}", r.priority(), r.target()));
            }
            if r.is_ip() {
                let same_priority = below
                    .iter()
                    .filter(|o| o.is_ip() && o.priority() == r.priority())
                    .count();
                let srv = format!(
                    "SRV {} {} {} {}",
                    r.priority(),
                    srv_weight(same_priority),
                    r.port,
                    r.target()
                );
                add(&name, r.ttl(), srv);
            }
        }
    }
    let mut zone = String::new();
    for rrs in sets.values() {
        for rr in rrs {
            zone.push_str(rr);
            zone.push('\n');
        }
    }
    zone
}

/// A difference between skyline and a plain authoritative server that SkyDNS semantics require
/// (docs/skydns-semantics.md).
struct Mandated {
    /// What differs.
    what: &'static str,
    /// The rule that makes skyline differ.
    reason: &'static str,
}

/// Every difference the comparison allows, each applied by [`normalise`].
const MANDATED: &[Mandated] = &[
    Mandated {
        what: "the SOA serial",
        reason: "skyline, like SkyDNS, derives the serial from the time the data was loaded \
                 (docs/skydns-semantics.md, 'SOA, NXDOMAIN and NODATA'); a zone file carries a \
                 fixed one",
    },
    Mandated {
        what: "TTLs of answers with more than one record: all set to min(config ttl, smallest TTL)",
        reason: "SkyDNS post-processing normalises them (docs/skydns-semantics.md, 'TTLs'), e.g. a \
                 300 s record and a 3600 s one answer both with 300 s",
    },
    Mandated {
        what: "record order within a section",
        reason: "skyline rotates address RRsets (SkyDNS round robin: docs/skydns-semantics.md, \
                 'Sections, round robin and truncation'); Knot keeps zone order; DNS gives order \
                 no meaning (RFC 2181 §5)",
    },
];

/// One record as compared: owner (lower case), type, TTL and data in presentation form.
type Rr = (String, RecordType, u32, String);

/// What is compared of a reply.
#[derive(Debug, PartialEq, Eq)]
struct Outline {
    rcode: u16,
    aa: bool,
    tc: bool,
    rd: bool,
    ra: bool,
    ad: bool,
    cd: bool,
    opt: Option<u8>,
    answer: BTreeSet<Rr>,
    authority: BTreeSet<Rr>,
    additional: BTreeSet<Rr>,
}

fn rr(record: &Record, ttl: u32) -> Rr {
    let data = match record.data() {
        Some(RData::SOA(soa)) => format!(
            "{} {} (serial) {} {} {} {}",
            soa.mname(),
            soa.rname(),
            soa.refresh(),
            soa.retry(),
            soa.expire(),
            soa.minimum()
        ),
        Some(data) => data.to_string(),
        None => String::new(),
    };
    (record.name().to_lowercase().to_ascii(), record.record_type(), ttl, data)
}

/// The reply's outline with [`MANDATED`] applied: serials zeroed, answer TTLs normalised the
/// SkyDNS way, sections as sets.
fn normalise(m: &Message) -> Outline {
    let answers = m.answers();
    let shared_ttl = answers.iter().map(Record::ttl).min().map(|t| t.min(TTL));
    let answer_ttl = |r: &Record| match shared_ttl {
        Some(t) if answers.len() > 1 => t,
        _ => r.ttl(),
    };
    Outline {
        rcode: u16::from(m.response_code()),
        aa: m.authoritative(),
        tc: m.truncated(),
        rd: m.recursion_desired(),
        ra: m.recursion_available(),
        ad: m.authentic_data(),
        cd: m.checking_disabled(),
        opt: m.extensions().as_ref().map(Edns::version),
        answer: answers.iter().map(|r| rr(r, answer_ttl(r))).collect(),
        authority: m.name_servers().iter().map(|r| rr(r, r.ttl())).collect(),
        additional: m.additionals().iter().map(|r| rr(r, r.ttl())).collect(),
    }
}

/// How a query is sent.
#[derive(Debug, Clone, Copy)]
enum Via {
    /// UDP without EDNS: 512 bytes.
    Udp,
    /// UDP with EDNS, 1232 bytes.
    UdpEdns,
    /// TCP with EDNS.
    Tcp,
}

fn message(name: &str, rtype: RecordType, via: Via) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(0x2b2b)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
    if !matches!(via, Via::Udp) {
        let mut e = Edns::new();
        e.set_max_payload(1232);
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

fn ask(addr: SocketAddr, bytes: &[u8], via: Via) -> Option<Message> {
    let reply = match via {
        Via::Udp | Via::UdpEdns => {
            let sock = UdpSocket::bind("127.0.0.1:0").ok()?;
            sock.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
            let mut buf = vec![0u8; 65535];
            let mut reply = None;
            for _ in 0..3 {
                sock.send_to(bytes, addr).ok()?;
                if let Ok((n, _)) = sock.recv_from(&mut buf) {
                    reply = Some(buf[..n].to_vec());
                    break;
                }
            }
            reply?
        }
        Via::Tcp => {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
            let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(bytes);
            s.write_all(&framed).ok()?;
            let mut len = [0u8; 2];
            s.read_exact(&mut len).ok()?;
            let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
            s.read_exact(&mut buf).ok()?;
            buf
        }
    };
    Some(Message::from_vec(&reply).expect("the reply parses"))
}

/// The queries: every record type at leaves and directories, names that do not exist, types
/// that do not exist, the apex's SOA and NS, and an RRset over 512 bytes by each transport.
/// Aggregate answers at the apex are left out: SkyDNS answers the apex as the directory of the
/// whole tree, which a zone file would have to spell out record by record.
fn queries() -> Vec<(&'static str, RecordType, Via)> {
    use RecordType::*;
    vec![
        ("w1.web.skydns.test.", A, Via::UdpEdns),
        ("web.skydns.test.", A, Via::UdpEdns),
        ("web.skydns.test.", A, Via::Udp),
        ("h1.v6.skydns.test.", AAAA, Via::UdpEdns),
        ("v6.skydns.test.", AAAA, Via::UdpEdns),
        ("alias.skydns.test.", A, Via::UdpEdns),
        ("alias.skydns.test.", CNAME, Via::UdpEdns),
        ("alias.skydns.test.", AAAA, Via::UdpEdns),
        ("alias.skydns.test.", MX, Via::UdpEdns),
        ("w1.web.skydns.test.", SRV, Via::UdpEdns),
        ("web.skydns.test.", SRV, Via::UdpEdns),
        ("web.skydns.test.", SRV, Via::Tcp),
        ("t1.txt.skydns.test.", TXT, Via::UdpEdns),
        ("txt.skydns.test.", TXT, Via::UdpEdns),
        ("mx1.mail.skydns.test.", MX, Via::UdpEdns),
        ("mail.skydns.test.", MX, Via::Udp),
        ("skydns.test.", SOA, Via::UdpEdns),
        ("skydns.test.", NS, Via::UdpEdns),
        ("skydns.test.", NS, Via::Udp),
        ("ns.dns.skydns.test.", A, Via::UdpEdns),
        ("nope.skydns.test.", A, Via::UdpEdns),
        ("nope.web.skydns.test.", A, Via::Udp),
        ("nope.skydns.test.", A, Via::Tcp),
        ("w1.web.skydns.test.", TXT, Via::UdpEdns),
        ("w1.web.skydns.test.", AAAA, Via::Udp),
        ("w1.web.skydns.test.", NS, Via::UdpEdns),
        ("t1.txt.skydns.test.", A, Via::Tcp),
        ("big.skydns.test.", A, Via::Udp),
        ("big.skydns.test.", A, Via::UdpEdns),
        ("big.skydns.test.", A, Via::Tcp),
        ("big.skydns.test.", SRV, Via::UdpEdns),
        ("big.skydns.test.", SRV, Via::Udp),
    ]
}

/// A running knotd serving one zone from a temporary directory, killed on drop.
struct Knot {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Knot {
    fn drop(&mut self) {
        common::stop_child(&mut self.child, "knotd");
    }
}

impl Knot {
    /// Starts knotd on a free port and waits (bounded) until it answers the zone's SOA; tries
    /// a few ports in case another process takes the one picked.
    fn start(knotd: &Path, zone: &str) -> Knot {
        for _ in 0..3 {
            if let Some(knot) = Knot::try_start(knotd, zone) {
                return knot;
            }
        }
        panic!("knotd did not start");
    }

    fn try_start(knotd: &Path, zone: &str) -> Option<Knot> {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let port = free_port();
        std::fs::write(dir.path().join("skydns.test.zone"), zone).unwrap();
        let conf = format!(
            "server:\n    listen: 127.0.0.1@{port}\n    rundir: {root}\n    pidfile: {root}/knot.pid\n    \
             udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n\
             control:\n    listen: {root}/knot.sock\n\
             database:\n    storage: {root}/db\n\
             template:\n  - id: default\n    storage: {root}\n    semantic-checks: off\n\
             zone:\n  - domain: {DOMAIN}\n    file: skydns.test.zone\n"
        );
        std::fs::write(dir.path().join("knot.conf"), conf).unwrap();
        let child = Command::new(knotd)
            .arg("-c")
            .arg(dir.path().join("knot.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("knotd runs");
        let knot = Knot {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let soa = message(DOMAIN, RecordType::SOA, Via::UdpEdns);
            if ask(knot.addr, &soa, Via::Udp).is_some_and(|m| !m.answers().is_empty()) {
                return Some(knot);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }
}

/// knotd's path: on `PATH`, or where Debian's `knot` package puts it. Under `CI=true` a
/// missing knotd fails the test.
fn knotd() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("knotd"));
    let found = on_path.chain([PathBuf::from("/usr/sbin/knotd")]).find(|p| p.is_file());
    if found.is_none() && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("knotd is required under CI=true; scripts/setup.sh test installs it (Debian package knot)");
    }
    found
}

#[test]
fn skyline_and_knot_answer_the_same_records_alike() {
    let Some(knotd) = knotd() else {
        eprintln!("skipping: knotd is not installed (scripts/setup.sh test installs it)");
        return;
    };
    let records = data();
    let knot = Knot::start(&knotd, &zone_file(&records));
    let skyline = Skyline::start(&records_file(&records), &["--no-rec"], &[]);
    let mut differences = Vec::new();
    for (name, rtype, via) in queries() {
        let q = message(name, rtype, via);
        let ours = normalise(&ask(skyline.addr, &q, via).expect("skyline answers"));
        let theirs = normalise(&ask(knot.addr, &q, via).expect("knotd answers"));
        if ours != theirs {
            differences.push(format!(
                "{name} {rtype} over {via:?}:\n  skyline: {ours:?}\n  knot:    {theirs:?}"
            ));
        }
    }
    let allowed: Vec<String> = MANDATED.iter().map(|m| format!("{}: {}", m.what, m.reason)).collect();
    assert!(
        differences.is_empty(),
        "differences beyond the mandated ones ({}):\n{}",
        allowed.join("; "),
        differences.join("\n")
    );
}

#[test]
fn the_generated_zone_holds_directory_aggregates_and_normalised_srv_weights() {
    let zone = zone_file(&data());
    assert!(zone.contains("web.skydns.test. 3600 IN A 10.0.0.2\n"));
    assert!(zone.contains("web.skydns.test. 3600 IN SRV 10 100 80 w1.web.skydns.test.\n"));
    assert!(zone.contains("web.skydns.test. 3600 IN SRV 20 50 8080 w2.web.skydns.test.\n"));
    assert!(zone.contains("w2.web.skydns.test. 3600 IN SRV 20 100 8080 w2.web.skydns.test.\n"));
    assert!(zone.contains("skydns.test. 3600 IN NS ns1.ns.dns.skydns.test.\n"));
    assert!(zone.contains("alias.skydns.test. 300 IN A 10.0.0.1\n"));
    assert!(!zone.contains(" CNAME "), "no name is an alias");
    assert!(zone.contains("mail.skydns.test. 3600 IN MX 20 mx1.mail.skydns.test.\n"));
    assert!(
        !zone
            .lines()
            .any(|l| l.starts_with(DOMAIN) && !l.contains(" SOA ") && !l.contains(" NS ")),
        "no aggregates at the apex"
    );
}
