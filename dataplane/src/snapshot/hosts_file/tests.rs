//! The hosts names laid under a snapshot, read back with hickory-proto.

use super::*;
use crate::answer::{answer, Context, Outcome, Transport};
use crate::snapshot::{kubernetes, lay_under, Snapshot};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name as HName, RecordType};
use std::time::{Duration, UNIX_EPOCH};

fn name(text: &str) -> Name {
    Name::from_dotted(text).unwrap()
}

fn entry(address: &str, names: &[&str]) -> Entry {
    Entry {
        address: address.parse().unwrap(),
        names: names.iter().map(|n| name(n)).collect(),
    }
}

/// k3s's node hosts: two nodes, one of them dual-stack.
fn entries() -> Vec<Entry> {
    vec![
        entry("192.168.1.10", &["node-a.", "node-a.lan."]),
        entry("fd00::10", &["node-a."]),
        entry("192.168.1.11", &["node-b."]),
    ]
}

/// The cluster zones of an empty cluster, their reverse zones passing misses on as k3s's
/// Corefile says (`fallthrough in-addr.arpa ip6.arpa`).
fn cluster() -> Snapshot {
    let config = kubernetes::Config {
        fallthrough: Some(vec![name("in-addr.arpa."), name("ip6.arpa.")]),
        ..kubernetes::Config::default()
    };
    kubernetes::build(
        &config,
        &kubernetes::Cluster::default(),
        1,
        UNIX_EPOCH + Duration::from_secs(1_700_000_000),
    )
}

fn laid(config: &Config, entries: &[Entry]) -> Snapshot {
    lay_under(&cluster(), &layer(config, entries), 2)
}

fn ask(snap: &Snapshot, name: &str, rtype: RecordType) -> Message {
    let mut query = Message::new();
    query
        .set_id(9)
        .add_query(Query::query(HName::from_ascii(name).unwrap(), rtype));
    let mut out = vec![0; 65535];
    let Outcome::Reply(reply) = answer(&query.to_vec().unwrap(), snap, &Context::new(Transport::Udp), &mut out) else {
        panic!("no reply to {name} {rtype}");
    };
    Message::from_vec(&out[..reply.len()]).unwrap()
}

/// The answer's records as `ttl data`, in order; the reply must be NOERROR.
fn records(snap: &Snapshot, name: &str, rtype: RecordType) -> Vec<String> {
    let reply = ask(snap, name, rtype);
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{name} {rtype}");
    reply
        .answers()
        .iter()
        .map(|r| format!("{} {}", r.ttl(), r.data().unwrap()))
        .collect()
}

#[test]
fn names_answer_their_addresses_of_each_family_with_the_ttl() {
    let s = laid(&Config::default(), &entries());
    assert_eq!(records(&s, "Node-A.", RecordType::A), ["3600 192.168.1.10"]);
    assert_eq!(records(&s, "node-a.", RecordType::AAAA), ["3600 fd00::10"]);
    assert_eq!(records(&s, "node-a.lan.", RecordType::A), ["3600 192.168.1.10"]);
    assert!(ask(&s, "node-a.", RecordType::A).authoritative());
    let short = laid(
        &Config {
            ttl: 60,
            ..Config::default()
        },
        &entries(),
    );
    assert_eq!(records(&short, "node-b.", RecordType::A), ["60 192.168.1.11"]);
}

#[test]
fn addresses_answer_ptr_with_every_name_unless_no_reverse() {
    let s = laid(&Config::default(), &entries());
    assert_eq!(
        records(&s, "10.1.168.192.in-addr.arpa.", RecordType::PTR),
        ["3600 node-a.", "3600 node-a.lan."]
    );
    let v6 = "0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.";
    assert_eq!(records(&s, v6, RecordType::PTR), ["3600 node-a."]);
    let none = laid(
        &Config {
            reverse: false,
            ..Config::default()
        },
        &entries(),
    );
    assert_eq!(
        ask(&none, "10.1.168.192.in-addr.arpa.", RecordType::PTR).response_code(),
        ResponseCode::Refused,
        "no PTR: passed on, and without forwarding refused"
    );
}

#[test]
fn a_name_without_the_type_asked_is_nodata() {
    let s = laid(&Config::default(), &entries());
    let reply = ask(&s, "node-b.", RecordType::AAAA);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.answers().is_empty());
    assert!(ask(&s, "node-b.", RecordType::MX).answers().is_empty());
}

#[test]
fn a_missing_name_is_servfail_without_fallthrough_and_passed_on_with_it() {
    let s = laid(&Config::default(), &entries());
    assert_eq!(
        ask(&s, "elsewhere.example.", RecordType::A).response_code(),
        ResponseCode::ServFail,
        "CoreDNS has no SOA to deny it with"
    );
    let through = laid(
        &Config {
            fallthrough: Some(Vec::new()),
            ..Config::default()
        },
        &entries(),
    );
    assert_eq!(
        ask(&through, "elsewhere.example.", RecordType::A).response_code(),
        ResponseCode::Refused,
        "passed on: without forwarding, refused"
    );
    assert_eq!(records(&through, "node-b.", RecordType::A), ["3600 192.168.1.11"]);
    assert!(
        !ask(&through, "node-b.", RecordType::A).authoritative(),
        "a zone passing misses on is not owned"
    );
}

#[test]
fn fallthrough_of_some_zones_passes_on_only_there() {
    let s = laid(
        &Config {
            fallthrough: Some(vec![name("example.")]),
            ..Config::default()
        },
        &entries(),
    );
    assert_eq!(
        ask(&s, "www.example.", RecordType::A).response_code(),
        ResponseCode::Refused
    );
    assert_eq!(
        ask(&s, "www.other.", RecordType::A).response_code(),
        ResponseCode::ServFail
    );
}

#[test]
fn names_outside_the_zones_are_ignored() {
    let s = laid(
        &Config {
            zones: vec![name("lan.")],
            ..Config::default()
        },
        &entries(),
    );
    assert_eq!(records(&s, "node-a.lan.", RecordType::A), ["3600 192.168.1.10"]);
    assert_eq!(
        ask(&s, "node-a.", RecordType::A).response_code(),
        ResponseCode::Refused,
        "outside every zone: passed on"
    );
    assert_eq!(
        ask(&s, "gone.lan.", RecordType::A).response_code(),
        ResponseCode::ServFail
    );
    assert_eq!(
        records(&s, "10.1.168.192.in-addr.arpa.", RecordType::PTR),
        ["3600 node-a.lan."],
        "only the names served are pointed to"
    );
}

#[test]
fn the_cluster_answers_its_own_zone_first() {
    let s = laid(
        &Config::default(),
        &[entry("10.9.9.9", &["kubernetes.default.svc.cluster.local.", "node-c."])],
    );
    let cluster = ask(&s, "kubernetes.default.svc.cluster.local.", RecordType::A);
    assert_eq!(
        cluster.response_code(),
        ResponseCode::NXDomain,
        "the cluster zone denies what the cluster does not hold"
    );
    assert_eq!(
        ask(&s, "cluster.local.", RecordType::SOA).answers().len(),
        1,
        "the cluster's apex is still the cluster's"
    );
    assert_eq!(records(&s, "node-c.", RecordType::A), ["3600 10.9.9.9"]);
    assert_eq!(
        records(&s, "9.9.9.10.in-addr.arpa.", RecordType::PTR),
        ["3600 kubernetes.default.svc.cluster.local.", "3600 node-c."],
        "the cluster's reverse zone passes misses on, to the hosts names"
    );
}

#[test]
fn repeated_entries_count_once() {
    let doubled = [entries(), entries()].concat();
    let s = laid(&Config::default(), &doubled);
    assert_eq!(records(&s, "node-a.", RecordType::A), ["3600 192.168.1.10"]);
    assert_eq!(super::records(&Config::default(), &doubled), 4);
}

#[test]
fn an_ipv4_mapped_address_answers_aaaa_and_the_ipv4_ptr() {
    let s = laid(&Config::default(), &[entry("::ffff:10.0.0.5", &["mapped."])]);
    assert_eq!(records(&s, "mapped.", RecordType::AAAA), ["3600 ::ffff:10.0.0.5"]);
    assert!(records(&s, "mapped.", RecordType::A).is_empty());
    assert_eq!(records(&s, "5.0.0.10.in-addr.arpa.", RecordType::PTR), ["3600 mapped."]);
}

#[test]
fn a_missing_reverse_name_is_passed_on_even_without_ptrs() {
    let below = crate::snapshot::Snapshot::default();
    let config = Config {
        reverse: false,
        ..Config::default()
    };
    let s = lay_under(&below, &layer(&config, &entries()), 2);
    assert_eq!(
        ask(&s, "10.1.168.192.in-addr.arpa.", RecordType::PTR).response_code(),
        ResponseCode::Refused,
        "CoreDNS passes on every PTR question it has no answer for"
    );
    assert_eq!(
        ask(&s, "node-c.", RecordType::A).response_code(),
        ResponseCode::ServFail
    );
}
