//! DNSSEC signing end to end (docs/dnssec.md): answers of the real binary validated by `delv`
//! (BIND's validator, an implementation independent of skyline's), with the zone's DNSKEY as
//! the trust anchor; keys made by `dnssec-keygen`. The unit tests in
//! `dataplane/src/dnssec/tests.rs` check the same answers with ring's verifiers.

mod common;
mod etcd_harness;
mod upstream;

use common::{eventually, query, tool, udp_query, Skyline};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const RECORDS: &str = r#"{
  "/skydns/config": {"domain": "skydns.test."},
  "/skydns/test/skydns/web": {"host": "10.0.0.1"},
  "/skydns/test/skydns/v6": {"host": "fd00::6"},
  "/skydns/test/skydns/east/db": {"host": "10.0.0.2", "port": 5432},
  "/skydns/test/skydns/east/cache": {"host": "fd00::1"},
  "/skydns/test/skydns/alias": {"host": "web.skydns.test."},
  "/skydns/test/skydns/chain": {"host": "alias.skydns.test."},
  "/skydns/test/skydns/txt": {"text": "hello"},
  "/skydns/test/skydns/mail": {"host": "10.0.0.9", "mail": true},
  "/skydns/test/skydns/dns/ns/a": {"host": "10.0.0.53"},
  "/skydns/test/skydns/viewed": {
    "default": [{"host": "192.0.2.10"}],
    "127.0.0.0/8": [{"host": "10.1.0.10"}, {"host": "10.1.0.11"}],
    "127.0.0.1/32": [{"host": "fd00::10"}]
  },
  "/skydns/test/skydns/toview": {"host": "viewed.skydns.test."}
}"#;

fn tools() -> bool {
    tool("delv", "bind9-dnsutils") && tool("dnssec-keygen", "bind9-utils")
}

/// Makes a key pair for `skydns.test.` with `algorithm` in `dir`; returns its base name.
fn keygen(dir: &Path, algorithm: &str) -> PathBuf {
    keygen_for(dir, algorithm, "skydns.test")
}

/// Makes a key pair for `zone` (no final dot) with `algorithm` in `dir`; returns its base name.
fn keygen_for(dir: &Path, algorithm: &str, zone: &str) -> PathBuf {
    let mut cmd = Command::new("dnssec-keygen");
    cmd.current_dir(dir).args(["-q", "-f", "KSK", "-a", algorithm]);
    if algorithm == "RSASHA256" {
        cmd.args(["-b", "2048"]);
    }
    let out = cmd.arg(zone).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dir.join(String::from_utf8_lossy(&out.stdout).trim())
}

/// Writes delv's trust anchor file of the key `keybase`, and returns its path.
fn anchor(keybase: &Path) -> PathBuf {
    anchor_for(keybase, "skydns.test.")
}

/// Writes delv's trust anchor file of the key `keybase` of `zone`, and returns its path.
fn anchor_for(keybase: &Path, zone: &str) -> PathBuf {
    let key = std::fs::read_to_string(keybase.with_extension(extension(keybase, "key"))).unwrap();
    let line = key
        .lines()
        .find(|l| !l.starts_with(';') && l.contains("DNSKEY"))
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    let at = fields.iter().position(|f| *f == "DNSKEY").unwrap();
    let text = format!(
        "trust-anchors {{ {zone} static-key {} {} {} \"{}\"; }};\n",
        fields[at + 1],
        fields[at + 2],
        fields[at + 3],
        fields[at + 4..].concat()
    );
    let path = keybase.with_extension(extension(keybase, "anchor"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The extension that turns `Kskydns.test.+013+12345` into `….<suffix>` (its last dot part is
/// the key id, not an extension).
fn extension(keybase: &Path, suffix: &str) -> String {
    let name = keybase.file_name().unwrap().to_string_lossy();
    format!("{}.{suffix}", name.rsplit('.').next().unwrap())
}

/// What `delv` says of `name` and `qtype` asked of `addr`: its comment and error lines.
fn delv(addr: SocketAddr, anchor: &Path, name: &str, qtype: &str) -> String {
    delv_from("127.0.0.1", addr, anchor, name, qtype)
}

/// [`delv`], asking from the address `source`.
fn delv_from(source: &str, addr: SocketAddr, anchor: &Path, name: &str, qtype: &str) -> String {
    delv_in("skydns.test", source, addr, anchor, name, qtype)
}

/// [`delv`] with the trust anchor of the zone `root`, asking from the address `source`.
fn delv_in(root: &str, source: &str, addr: SocketAddr, anchor: &Path, name: &str, qtype: &str) -> String {
    let out = Command::new("delv")
        .args(["-b", source])
        .arg(format!("@{}", addr.ip()))
        .args(["-p", &addr.port().to_string(), "-a"])
        .arg(anchor)
        .arg(format!("+root={root}"))
        .args(["+tcp", name, qtype])
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_validated(addr: SocketAddr, anchor: &Path, name: &str, qtype: &str, expected: &str) {
    let said = delv(addr, anchor, name, qtype);
    assert!(
        said.contains(expected),
        "{name} {qtype}: expected {expected:?}, delv said:\n{said}"
    );
}

fn start(keybase: &Path) -> Skyline {
    Skyline::start(RECORDS, &["--dnssec", keybase.to_str().unwrap()], &[])
}

#[test]
fn every_kind_of_answer_validates_with_each_algorithm() {
    if !tools() {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    for algorithm in ["ECDSAP256SHA256", "ED25519", "RSASHA256"] {
        let keybase = keygen(keys.path(), algorithm);
        let anchor = anchor(&keybase);
        let skyline = start(&keybase);
        let positive = "; fully validated";
        let negative = "; negative response, fully validated";
        for (name, qtype, expected) in [
            ("web.skydns.test.", "A", positive),
            ("v6.skydns.test.", "AAAA", positive),
            ("east.skydns.test.", "A", positive),
            ("east.skydns.test.", "AAAA", positive),
            ("db.east.skydns.test.", "SRV", positive),
            ("alias.skydns.test.", "A", positive),
            ("chain.skydns.test.", "A", positive),
            ("alias.skydns.test.", "CNAME", negative),
            ("alias.skydns.test.", "SRV", positive),
            ("txt.skydns.test.", "TXT", positive),
            ("mail.skydns.test.", "MX", positive),
            ("skydns.test.", "SOA", positive),
            ("skydns.test.", "NS", positive),
            ("skydns.test.", "DNSKEY", positive),
            ("web.skydns.test.", "AAAA", negative),
            ("v6.skydns.test.", "A", negative),
            ("alias.skydns.test.", "AAAA", negative),
            ("web.skydns.test.", "TXT", negative),
            ("skydns.test.", "PTR", negative),
            ("nope.skydns.test.", "A", negative),
            ("x.web.skydns.test.", "A", negative),
            ("a.b.c.nope.east.skydns.test.", "AAAA", negative),
        ] {
            assert_validated(skyline.addr, &anchor, name, qtype, expected);
        }
    }
}

#[test]
fn names_with_views_and_query_wildcards_validate() {
    if !tools() {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let keybase = keygen(keys.path(), "ECDSAP256SHA256");
    let anchor = anchor(&keybase);
    let skyline = start(&keybase);
    let positive = "; fully validated";
    let negative = "; negative response, fully validated";
    for (source, name, qtype, expected) in [
        ("127.0.0.1", "viewed.skydns.test.", "AAAA", positive),
        ("127.0.0.1", "viewed.skydns.test.", "A", negative),
        ("127.0.0.2", "viewed.skydns.test.", "A", positive),
        ("127.0.0.2", "viewed.skydns.test.", "AAAA", negative),
        ("127.0.0.2", "toview.skydns.test.", "A", positive),
        ("127.0.0.1", "toview.skydns.test.", "AAAA", positive),
        ("127.0.0.1", "skydns.test.", "AAAA", positive),
        ("127.0.0.2", "skydns.test.", "DNSKEY", positive),
        ("127.0.0.1", "*.east.skydns.test.", "A", positive),
        ("127.0.0.1", "any.east.skydns.test.", "AAAA", positive),
        ("127.0.0.1", "*.skydns.test.", "SRV", positive),
        ("127.0.0.2", "*.skydns.test.", "A", positive),
        ("127.0.0.1", "*.east.skydns.test.", "TXT", negative),
        ("127.0.0.1", "*.nope.skydns.test.", "A", negative),
        ("127.0.0.1", "db.*.skydns.test.", "A", positive),
    ] {
        let said = delv_from(source, skyline.addr, &anchor, name, qtype);
        assert!(
            said.contains(expected),
            "{name} {qtype} from {source}: expected {expected:?}, delv said:\n{said}"
        );
    }
    let mine = delv_from("127.0.0.1", skyline.addr, &anchor, "viewed.skydns.test.", "AAAA");
    assert!(mine.contains("fd00::10"), "{mine}");
    let others = delv_from("127.0.0.2", skyline.addr, &anchor, "viewed.skydns.test.", "A");
    assert!(others.contains("10.1.0.10") && others.contains("10.1.0.11"), "{others}");
}

#[test]
fn signatures_follow_a_change_of_the_records() {
    if !tools() {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let keybase = keygen(keys.path(), "ECDSAP256SHA256");
    let anchor = anchor(&keybase);
    let skyline = start(&keybase);
    assert_validated(
        skyline.addr,
        &anchor,
        "new.skydns.test.",
        "A",
        "; negative response, fully validated",
    );
    skyline.rewrite(&RECORDS.replace(
        r#""/skydns/test/skydns/web""#,
        r#""/skydns/test/skydns/new": {"host": "10.0.0.7"}, "/skydns/test/skydns/web""#,
    ));
    eventually(Duration::from_secs(10), "the new name to validate", || {
        delv(skyline.addr, &anchor, "new.skydns.test.", "A").contains("; fully validated")
    });
}

#[test]
fn a_key_rollover_on_sighup_signs_with_the_new_key() {
    if !tools() {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let old = keygen(keys.path(), "ECDSAP256SHA256");
    let old_anchor = anchor(&old);
    let skyline = start(&old);
    assert_validated(skyline.addr, &old_anchor, "web.skydns.test.", "A", "; fully validated");
    let new = keygen(keys.path(), "ED25519");
    let new_anchor = anchor(&new);
    for suffix in ["key", "private"] {
        std::fs::copy(
            new.with_extension(extension(&new, suffix)),
            old.with_extension(extension(&old, suffix)),
        )
        .unwrap();
    }
    skyline.hup();
    eventually(Duration::from_secs(10), "answers signed with the new key", || {
        delv(skyline.addr, &new_anchor, "web.skydns.test.", "A").contains("; fully validated")
    });
    assert!(!delv(skyline.addr, &old_anchor, "web.skydns.test.", "A").contains("; fully validated"));
    assert!(!skyline.log_text().contains("PrivateKey"), "no key material in the log");
}

#[test]
fn a_key_for_another_zone_stops_the_start_with_a_clear_error() {
    if !tools() {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let keybase = keygen(keys.path(), "ECDSAP256SHA256");
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["--domain", "other.test.", "--check-config", "--dnssec"])
        .arg(&keybase)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("the DNSKEY is for skydns.test., not for the domain other.test."),
        "{text}"
    );
}

/// A zone outside the domain, signed by `dnssec-signzone` (NSEC denials) and served by Knot.
const UPSTREAM_ZONE: &str = "$ORIGIN example.test.\n$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 60\n\
                             @ NS ns\nns A 192.0.2.53\nwww A 192.0.2.80\n";

/// The RRSIG and NSEC records of a reply's sections, by type.
fn dnssec_records(reply: &Message) -> Vec<RecordType> {
    reply
        .answers()
        .iter()
        .chain(reply.name_servers())
        .chain(reply.additionals())
        .map(|r| r.record_type())
        .filter(|t| matches!(t, RecordType::RRSIG | RecordType::NSEC | RecordType::NSEC3))
        .collect()
}

/// `name` and `qtype` asked with DO and CD as given.
fn ask_with(addr: SocketAddr, name: &str, qtype: RecordType, dnssec_ok: bool, checking_disabled: bool) -> Message {
    let mut q = query(name, qtype, Some(1232));
    q.set_checking_disabled(checking_disabled);
    if let Some(edns) = q.extensions_mut().as_mut() {
        edns.set_dnssec_ok(dnssec_ok);
    }
    udp_query(addr, &q)
}

/// Forwarding (RFC 3225, RFC 4035 §3.2.1): DO and CD reach the upstream, whose DNSSEC records
/// are relayed and cached as they are, so that a validator behind skyline validates forwarded
/// answers, from the upstream and from the cache; a client without DO gets no RRSIG or NSEC.
#[test]
fn forwarded_dnssec_records_are_relayed_and_cached_intact() {
    if !tools() || !tool("dnssec-signzone", "bind9-utils") {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let keybase = keygen_for(keys.path(), "ECDSAP256SHA256", "example.test");
    let anchor = anchor_for(&keybase, "example.test.");
    let zone = keys.path().join("example.test.zone");
    std::fs::write(&zone, UPSTREAM_ZONE).unwrap();
    let signed = keys.path().join("example.test.signed");
    let out = Command::new("dnssec-signzone")
        .current_dir(keys.path())
        .args(["-q", "-S", "-z", "-K", ".", "-o", "example.test.", "-f"])
        .arg(&signed)
        .arg(&zone)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&signed).unwrap();
    let Some(knot) = upstream::Knot::start(&[("example.test.", &text)]) else {
        return;
    };
    let skyline = Skyline::start(RECORDS, &["--nameservers", &knot.addr.to_string()], &[]);

    let plain = ask_with(skyline.addr, "www.example.test.", RecordType::A, false, false);
    assert_eq!(plain.response_code(), ResponseCode::NoError);
    assert_eq!(dnssec_records(&plain), [], "no DNSSEC records without DO");
    for _ in 0..2 {
        let signed = ask_with(skyline.addr, "www.example.test.", RecordType::A, true, false);
        assert_eq!(dnssec_records(&signed), [RecordType::RRSIG], "{signed}");
        let denial = ask_with(skyline.addr, "nope.example.test.", RecordType::A, true, true);
        assert_eq!(denial.response_code(), ResponseCode::NXDomain);
        assert!(denial.checking_disabled(), "CD is echoed");
        assert!(dnssec_records(&denial).contains(&RecordType::NSEC), "{denial}");
    }
    let cached_plain = ask_with(skyline.addr, "www.example.test.", RecordType::A, false, false);
    assert_eq!(
        dnssec_records(&cached_plain),
        [],
        "the DO answer is not served without DO"
    );
    let plain_denial = ask_with(skyline.addr, "nope.example.test.", RecordType::A, false, false);
    assert_eq!(dnssec_records(&plain_denial), []);

    for _ in 0..2 {
        for (name, qtype, expected) in [
            ("www.example.test.", "A", "; fully validated"),
            ("example.test.", "DNSKEY", "; fully validated"),
            ("nope.example.test.", "A", "; negative response, fully validated"),
            ("www.example.test.", "AAAA", "; negative response, fully validated"),
        ] {
            let said = delv_in("example.test", "127.0.0.1", skyline.addr, &anchor, name, qtype);
            assert!(
                said.contains(expected),
                "{name} {qtype}: expected {expected:?}, delv said:\n{said}"
            );
        }
    }
}

/// What the upstream is asked carries the client's DO and CD bits.
#[test]
fn do_and_cd_reach_the_upstream() {
    let scripted = upstream::Scripted::start(upstream::Script::Address {
        ttl: 60,
        delay: Duration::ZERO,
    });
    let skyline = Skyline::start(RECORDS, &["--nameservers", &scripted.addr.to_string()], &[]);
    for (name, dnssec_ok, checking_disabled) in [
        ("plain.example.", false, false),
        ("do.example.", true, false),
        ("cd.example.", false, true),
        ("both.example.", true, true),
    ] {
        let reply = ask_with(skyline.addr, name, RecordType::A, dnssec_ok, checking_disabled);
        assert_eq!(reply.response_code(), ResponseCode::NoError, "{name}");
        let asked = scripted.queries();
        let upstream = asked
            .iter()
            .find(|q| q.queries()[0].name().to_ascii().eq_ignore_ascii_case(name))
            .unwrap_or_else(|| panic!("{name} reached the upstream"));
        assert_eq!(upstream.checking_disabled(), checking_disabled, "{name} CD");
        assert_eq!(
            upstream.extensions().as_ref().is_some_and(|e| e.dnssec_ok()),
            dnssec_ok,
            "{name} DO"
        );
    }
}

/// etcd (docs/dnssec.md, "Cost"): a change signs again the names it reaches, so the new answer
/// validates at once, and the name it removes is denied, validly.
#[test]
fn signed_answers_follow_an_etcd_change() {
    if !tools() || !etcd_harness::etcd_available() {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let keybase = keygen(keys.path(), "ECDSAP256SHA256");
    let anchor = anchor(&keybase);
    let etcd = etcd_harness::Etcd::start();
    let client = etcd_harness::EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", r#"{"domain":"skydns.test."}"#);
    client.put("/skydns/test/skydns/web", r#"{"host":"10.0.0.1"}"#);
    let endpoint = etcd.endpoint();
    let skyline = Skyline::start_with(
        &[
            "--machines",
            &endpoint,
            "--no-rec",
            "--dnssec",
            keybase.to_str().unwrap(),
        ],
        &[],
    );
    etcd_harness::wait_for(&skyline, "web.skydns.test.", &["10.0.0.1"]);
    let validated = |name: &str, address: &str| {
        let said = delv(skyline.addr, &anchor, name, "A");
        said.contains("; fully validated") && said.contains(address)
    };
    assert!(validated("web.skydns.test.", "10.0.0.1"));
    client.put("/skydns/test/skydns/web", r#"{"host":"10.0.0.2"}"#);
    eventually(Duration::from_secs(10), "the changed answer to validate", || {
        validated("web.skydns.test.", "10.0.0.2")
    });
    client.put("/skydns/test/skydns/east/db", r#"{"host":"10.0.0.3"}"#);
    eventually(
        Duration::from_secs(10),
        "a new name and its directory to validate",
        || validated("db.east.skydns.test.", "10.0.0.3") && validated("east.skydns.test.", "10.0.0.3"),
    );
    client.delete("/skydns/test/skydns/web");
    eventually(
        Duration::from_secs(10),
        "the deleted name to be denied, validly",
        || delv(skyline.addr, &anchor, "web.skydns.test.", "A").contains("; negative response, fully validated"),
    );
    assert!(validated("db.east.skydns.test.", "10.0.0.3"));
}

/// The records `dig` prints for its `args` (`+noall` and the sections wanted), one per line,
/// fields split on whitespace.
fn dig_records(addr: SocketAddr, args: &[&str]) -> Vec<Vec<String>> {
    common::dig(addr, args)
        .iter()
        .filter(|line| !line.is_empty() && !line.starts_with(';'))
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// The types of `records` (the fourth field of dig's lines).
fn types_of(records: &[Vec<String>]) -> Vec<&str> {
    records.iter().map(|r| r[3].as_str()).collect()
}

/// docs/dnssec.md, "The apex": DNSKEY asked without DO is answered with the key alone, which
/// an operator pipes into `dnssec-dsfromkey` to publish the DS: the DS it prints is the one of
/// the key file; with DO, the key comes signed, and validates.
#[test]
fn dnskey_without_do_is_answered_unsigned_and_gives_the_ds() {
    if !tools() || !tool("dnssec-dsfromkey", "bind9-utils") || !tool("dig", "bind9-dnsutils") {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let keybase = keygen(keys.path(), "ECDSAP256SHA256");
    let anchor = anchor(&keybase);
    let skyline = start(&keybase);

    let plain = dig_records(
        skyline.addr,
        &["+noall", "+answer", "+nodnssec", "skydns.test.", "DNSKEY"],
    );
    assert_eq!(types_of(&plain), ["DNSKEY"], "{plain:?}");
    let signed = dig_records(
        skyline.addr,
        &["+noall", "+answer", "+dnssec", "skydns.test.", "DNSKEY"],
    );
    assert_eq!(types_of(&signed), ["DNSKEY", "RRSIG"], "{signed:?}");
    assert_eq!(signed[0][4..], plain[0][4..], "the same key with and without DO");

    let reply: String = plain.iter().map(|fields| fields.join(" ") + "\n").collect();
    let ds_of = |args: &[&str], stdin: Option<&str>| {
        use std::io::Write;
        let mut child = Command::new("dnssec-dsfromkey")
            .args(["-2"])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.unwrap_or_default().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let served = ds_of(&["-f", "-", "skydns.test."], Some(&reply));
    let from_file = ds_of(&[keybase.to_str().unwrap()], None);
    assert!(served.contains(" DS "), "{served}");
    assert_eq!(served, from_file, "the DS of the served key is the key file's");

    assert_validated(skyline.addr, &anchor, "skydns.test.", "DNSKEY", "; fully validated");
}

/// RFC 5155 §4: the apex publishes NSEC3PARAM, unsigned without DO and signed with it, with the
/// algorithm, iterations and salt of the NSEC3 records (its flags 0, §4.1.2), and lists it and
/// DNSKEY in its NSEC3 type bitmap; the answers validate.
#[test]
fn nsec3param_at_the_apex_matches_the_nsec3_records() {
    if !tools() || !tool("dig", "bind9-dnsutils") {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let keybase = keygen(keys.path(), "ED25519");
    let anchor = anchor(&keybase);
    let skyline = start(&keybase);

    let plain = dig_records(
        skyline.addr,
        &["+noall", "+answer", "+nodnssec", "skydns.test.", "NSEC3PARAM"],
    );
    assert_eq!(types_of(&plain), ["NSEC3PARAM"], "{plain:?}");
    let param = &plain[0][4..];
    assert_eq!(param, ["1", "0", "0", "-"], "SHA-1, flags 0, no iterations, no salt");
    let signed = dig_records(
        skyline.addr,
        &["+noall", "+answer", "+dnssec", "skydns.test.", "NSEC3PARAM"],
    );
    assert_eq!(types_of(&signed), ["NSEC3PARAM", "RRSIG"], "{signed:?}");

    for (name, qtype) in [("skydns.test.", "PTR"), ("nope.skydns.test.", "A")] {
        let denial = dig_records(skyline.addr, &["+noall", "+authority", "+dnssec", name, qtype]);
        let nsec3s: Vec<&Vec<String>> = denial.iter().filter(|r| r[3] == "NSEC3").collect();
        assert!(!nsec3s.is_empty(), "{name}: {denial:?}");
        for nsec3 in nsec3s {
            assert_eq!(nsec3[4], param[0], "{name}: algorithm of {nsec3:?}");
            assert_eq!(nsec3[6..8], param[2..4], "{name}: iterations and salt of {nsec3:?}");
        }
    }
    let apex = dig_records(
        skyline.addr,
        &["+noall", "+authority", "+dnssec", "skydns.test.", "PTR"],
    );
    let matching = apex.iter().find(|r| r[3] == "NSEC3").unwrap();
    for listed in ["DNSKEY", "NSEC3PARAM", "SOA"] {
        assert!(matching[9..].iter().any(|t| t == listed), "{listed} in {matching:?}");
    }

    for (qtype, expected) in [
        ("NSEC3PARAM", "; fully validated"),
        ("DNSKEY", "; fully validated"),
        ("PTR", "; negative response, fully validated"),
    ] {
        assert_validated(skyline.addr, &anchor, "skydns.test.", qtype, expected);
    }
}
