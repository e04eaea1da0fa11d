//! CoreDNS's per-query plugins end to end (docs/rewrite.md): the real binary with `rewrite`
//! rules, templates, `whoami` and `chaos`, its replies read with hickory-proto. Names come from
//! a records file, or from a scripted upstream on 127.0.0.1 that records the questions it gets.

mod common;
mod upstream;

use common::{query, tcp_query, udp_query, Skyline};
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;
use upstream::{Script, Scripted, GOOD};

/// `web.skydns.local.` A 10.9.0.1, as `examples/records.json` writes a service.
const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.9.0.1"}}"#;

const WEB: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);

fn start(args: &[&str]) -> Skyline {
    Skyline::start(RECORDS, args, &[])
}

/// Flags giving each rule as a `--rewrite`.
fn rewrites<'a>(rules: &[&'a str]) -> Vec<&'a str> {
    rules.iter().flat_map(|rule| ["--rewrite", rule]).collect()
}

/// Asserts that `reply` answers the client's own question `name` (as spelled) of `rtype` with
/// the one A record `address` owned by that name.
fn answers_as_asked(reply: &Message, name: &str, rtype: RecordType, address: Ipv4Addr) {
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{reply:?}");
    let question = &reply.queries()[0];
    assert_eq!(question.name().to_ascii(), name, "the client's question comes back");
    assert_eq!(question.query_type(), rtype);
    let answers = reply.answers();
    assert_eq!(answers.len(), 1, "{reply:?}");
    assert_eq!(
        answers[0].name().to_ascii().to_ascii_lowercase(),
        name.to_ascii_lowercase()
    );
    assert_eq!(answers[0].data(), Some(&RData::A(address.into())));
}

#[test]
fn each_name_match_answers_with_the_target_names_records_under_the_clients_name() {
    let s = start(&rewrites(&[
        "name exact www.alias.test. web.skydns.local. answer auto",
        "name prefix db. web. answer auto",
        "name suffix .legacy.test. .skydns.local. answer auto",
        "name substring web-old web answer auto",
        r"name regex ^svc-(.*)\.regex\.test\.$ {1}.skydns.local answer name ^(.*)\.skydns\.local\.$ svc-{1}.regex.test.",
    ]));
    for name in [
        "www.alias.test.",
        "db.skydns.local.",
        "web.legacy.test.",
        "web-old.skydns.local.",
        "svc-web.regex.test.",
        "Web.Legacy.TEST.",
    ] {
        answers_as_asked(&s.udp(name, RecordType::A), name, RecordType::A, WEB);
        answers_as_asked(&s.tcp(name, RecordType::A), name, RecordType::A, WEB);
    }
    let untouched = s.udp("nothing.legacy.example.", RecordType::A);
    assert_eq!(
        untouched.response_code(),
        ResponseCode::Refused,
        "a name no rule matches is answered as it is: outside the zones"
    );
}

#[test]
fn without_an_answer_rule_the_answer_keeps_the_target_name() {
    let s = start(&rewrites(&["name exact www.alias.test. web.skydns.local."]));
    let reply = s.udp("www.alias.test.", RecordType::A);
    assert_eq!(reply.queries()[0].name().to_ascii(), "www.alias.test.");
    assert_eq!(reply.answers()[0].name().to_ascii(), "web.skydns.local.");
    assert_eq!(reply.answers()[0].data(), Some(&RData::A(WEB.into())));
}

#[test]
fn a_forwarded_question_leaves_rewritten_and_its_answer_comes_back_as_asked() {
    let upstream = Scripted::start(Script::Address {
        ttl: 300,
        delay: Duration::from_millis(0),
    });
    let nameserver = upstream.addr.to_string();
    let mut args = vec!["--nameservers", nameserver.as_str()];
    args.extend(rewrites(&["name suffix .corp.test. .upstream.test. answer auto"]));
    let s = start(&args);
    // One client socket: the kernel keeps a flow on one worker, and each worker has its cache.
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let ask = |name: &str| {
        let q = query(name, RecordType::A, Some(1232));
        client.send_to(&q.to_vec().unwrap(), s.addr).unwrap();
        let mut buf = [0u8; 4096];
        let (n, _) = client.recv_from(&mut buf).unwrap();
        let reply = Message::from_vec(&buf[..n]).unwrap();
        assert_eq!(reply.id(), q.id());
        reply
    };
    let first = ask("host.corp.test.");
    answers_as_asked(&first, "host.corp.test.", RecordType::A, GOOD);
    assert_eq!(
        upstream.count("host.upstream.test."),
        1,
        "the upstream is asked the rewritten name"
    );
    assert_eq!(upstream.count("host.corp.test."), 0, "and never the client's");
    let again = ask("host.corp.test.");
    answers_as_asked(&again, "host.corp.test.", RecordType::A, GOOD);
    assert_eq!(
        upstream.count("host.upstream.test."),
        1,
        "the second answer comes from the cache, kept under the rewritten name"
    );
}

#[test]
fn a_type_rewrite_asks_the_other_type_and_gives_back_the_clients_question() {
    let s = start(&rewrites(&["type AAAA A"]));
    let reply = s.udp("web.skydns.local.", RecordType::AAAA);
    assert_eq!(reply.queries()[0].query_type(), RecordType::AAAA);
    assert_eq!(reply.answers()[0].data(), Some(&RData::A(WEB.into())));
}

#[test]
fn stop_ends_at_the_first_matching_rule_and_continue_goes_on() {
    let s = start(&rewrites(&[
        "continue name suffix .one.test. .two.test. answer auto",
        "stop name suffix .three.test. .two.test. answer auto",
        "name suffix .two.test. .skydns.local. answer auto",
    ]));
    answers_as_asked(
        &s.udp("web.one.test.", RecordType::A),
        "web.one.test.",
        RecordType::A,
        WEB,
    );
    let stopped = s.udp("web.three.test.", RecordType::A);
    assert_eq!(
        stopped.response_code(),
        ResponseCode::Refused,
        "web.two.test. is asked: no rule after a stop rewrites it into the zones"
    );
    assert_eq!(stopped.queries()[0].name().to_ascii(), "web.three.test.");
}

#[test]
fn templates_deny_names_and_types_and_synthesize_addresses() {
    let s = start(&[
        "--template",
        r"ANY ANY blocked.test { match .*\.blocked\.test\.$; rcode NXDOMAIN }",
        "--template",
        "IN AAAA skydns.local { rcode NOERROR }",
        "--template",
        r#"IN A example.org { match "^ip-(?P<a>[0-9]+)-(?P<b>[0-9]+)-(?P<c>[0-9]+)-(?P<d>[0-9]+)[.]example[.]org[.]$"; answer "{{ .Name }} 60 IN A {{ .Group.a }}.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}"; fallthrough }"#,
    ]);
    let blocked = s.udp("ads.blocked.test.", RecordType::A);
    assert_eq!(blocked.response_code(), ResponseCode::NXDomain);
    assert!(blocked.authoritative() && blocked.answers().is_empty());
    let nodata = s.udp("web.skydns.local.", RecordType::AAAA);
    assert_eq!(nodata.response_code(), ResponseCode::NoError);
    assert!(nodata.answers().is_empty(), "AAAA is NODATA for the zone");
    answers_as_asked(
        &s.udp("web.skydns.local.", RecordType::A),
        "web.skydns.local.",
        RecordType::A,
        WEB,
    );
    let made = s.udp("ip-10-1-2-3.example.org.", RecordType::A);
    answers_as_asked(
        &made,
        "ip-10-1-2-3.example.org.",
        RecordType::A,
        Ipv4Addr::new(10, 1, 2, 3),
    );
    assert_eq!(made.answers()[0].ttl(), 60);
    assert!(made.authoritative());
    let fell_through = s.udp("www.example.org.", RecordType::A);
    assert_eq!(
        fell_through.response_code(),
        ResponseCode::Refused,
        "no regex matches, fallthrough: answered as without the template"
    );
}

#[test]
fn whoami_answers_the_clients_address_and_port() {
    let s = start(&["--whoami", "whoami.test."]);
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let q = query("whoami.test.", RecordType::A, None);
    client.send_to(&q.to_vec().unwrap(), s.addr).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = client.recv_from(&mut buf).unwrap();
    let reply = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    let extra = reply.additionals();
    assert_eq!(extra.len(), 2, "{reply:?}");
    assert_eq!(extra[0].name().to_ascii(), "whoami.test.");
    assert_eq!(extra[0].data(), Some(&RData::A(Ipv4Addr::LOCALHOST.into())));
    assert_eq!(extra[1].name().to_ascii(), "_udp.whoami.test.");
    let Some(RData::SRV(srv)) = extra[1].data() else {
        panic!("no SRV: {reply:?}");
    };
    assert_eq!(srv.port(), client.local_addr().unwrap().port());
    let tcp = tcp_query(s.addr, &query("x.whoami.test.", RecordType::A, None));
    assert_eq!(tcp.additionals()[1].name().to_ascii(), "_tcp.x.whoami.test.");
}

fn chaos_txt(s: &Skyline, name: &str) -> Message {
    let mut m = Message::new();
    m.set_id(0x4242)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query);
    let mut q = Query::query(Name::from_ascii(name).unwrap(), RecordType::TXT);
    q.set_query_class(DNSClass::CH);
    m.add_query(q);
    udp_query(s.addr, &m)
}

fn texts(reply: &Message) -> Vec<String> {
    reply
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            Some(RData::TXT(txt)) => Some(txt.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn chaos_answers_its_version_and_authors_in_class_ch() {
    let s = start(&["--chaos-version", "skyline-test", "--chaos-authors", "alice,bob"]);
    let version = chaos_txt(&s, "version.bind.");
    assert_eq!(version.response_code(), ResponseCode::NoError);
    assert_eq!(version.answers()[0].dns_class(), DNSClass::CH);
    assert_eq!(texts(&version), ["skyline-test"]);
    assert_eq!(texts(&chaos_txt(&s, "authors.bind.")), ["alice", "bob"]);
    assert_eq!(chaos_txt(&s, "other.bind.").response_code(), ResponseCode::Refused);
}

#[test]
fn without_chaos_version_bind_is_refused() {
    let s = start(&[]);
    assert_eq!(chaos_txt(&s, "version.bind.").response_code(), ResponseCode::Refused);
}

#[test]
fn a_rule_that_does_not_parse_stops_the_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["--check-config", "--rewrite", "name regex ( x."])
        .env("SKYLINE_RESOLV_CONF", "none")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rewrite rule \"name regex ( x.\""), "{stderr}");
}

#[test]
fn any_answers_every_any_question_with_coredns_hinfo() {
    let hinfo = |reply: &Message| match reply.answers().first().and_then(|r| r.data()) {
        Some(RData::HINFO(h)) => (h.cpu().to_vec(), reply.answers()[0].ttl()),
        other => panic!("no HINFO: {other:?}"),
    };
    let plain = start(&[]);
    let (cpu, _) = hinfo(&plain.udp("web.skydns.local.", RecordType::ANY));
    assert_eq!(cpu, b"RFC8482", "without any, the zones' own RFC 8482 answer");
    let s = start(&["--any"]);
    for name in ["web.skydns.local.", "outside.example."] {
        let reply = s.udp(name, RecordType::ANY);
        assert_eq!(reply.response_code(), ResponseCode::NoError);
        assert_eq!(hinfo(&reply), (b"ANY obsoleted".to_vec(), 8482));
    }
}
