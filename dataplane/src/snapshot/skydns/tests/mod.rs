//! Behaviour of the compiled SkyDNS semantics, checked on the wire: a snapshot is built from
//! records, queried through [`crate::answer::answer`], and the reply is parsed by hickory-proto.

mod address;
mod apex;
mod fallthrough;
mod leaves;
mod names;
mod reverse;
mod robustness;
mod srv;
mod update;
mod views;
mod wildcard;

use super::{build, Config, Service, Stored};
use crate::answer::{answer, Context, Outcome, Transport};
use crate::snapshot::Snapshot;
use crate::wire::Name;
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name as HName, Record, RecordType};
use std::time::{Duration, UNIX_EPOCH};

/// The configuration of every test: domain `skydns.test.`, default TTL 3600, `min_ttl` 60.
fn config() -> Config {
    let domain = Name::from_dotted("skydns.test.").unwrap();
    Config {
        hostmaster: domain.prepend("hostmaster").unwrap(),
        domain,
        ..Config::default()
    }
}

/// A record with the given host and defaults otherwise.
fn host(host: &str) -> Service {
    Service {
        host: host.into(),
        ..Service::default()
    }
}

/// Builds a snapshot of `records` under [`config`], keys written relative to `/skydns/`.
fn snapshot_with<V: Stored + Clone>(config: &Config, records: &[(&str, V)]) -> Snapshot {
    let records: Vec<(String, V)> = records
        .iter()
        .map(|(k, s)| (format!("/skydns/{k}"), s.clone()))
        .collect();
    build(config, &records, 7, UNIX_EPOCH + Duration::from_secs(1_700_001_234))
}

fn snapshot<V: Stored + Clone>(records: &[(&str, V)]) -> Snapshot {
    snapshot_with(&config(), records)
}

/// Asks `snap` over TCP (no size limit short of 65535) and parses the reply.
fn ask(snap: &Snapshot, name: &str, rtype: RecordType) -> Message {
    ask_over(snap, name, rtype, Transport::Tcp)
}

fn ask_over(snap: &Snapshot, name: &str, rtype: RecordType, transport: Transport) -> Message {
    ask_with(snap, name, rtype, &Context::new(transport))
}

fn ask_with(snap: &Snapshot, name: &str, rtype: RecordType, ctx: &Context) -> Message {
    let mut query = Message::new();
    query
        .set_id(7)
        .add_query(Query::query(HName::from_ascii(name).unwrap(), rtype));
    let mut out = vec![0; 65535];
    let Outcome::Reply(reply) = answer(&query.to_vec().unwrap(), snap, ctx, &mut out) else {
        panic!("no reply to {name} {rtype}");
    };
    Message::from_vec(&out[..reply.len()]).unwrap()
}

/// Records as `owner ttl type data` lines.
fn lines(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| format!("{} {} {} {}", r.name(), r.ttl(), r.record_type(), r.data().unwrap()))
        .collect()
}

/// The answer section of a successful reply.
fn answers(snap: &Snapshot, name: &str, rtype: RecordType) -> Vec<String> {
    let reply = ask(snap, name, rtype);
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{name} {rtype}");
    lines(reply.answers())
}

/// The additional section of a successful reply.
fn additionals(snap: &Snapshot, name: &str, rtype: RecordType) -> Vec<String> {
    lines(ask(snap, name, rtype).additionals())
}

/// Whether the reply is NODATA: NOERROR, no answer, the SOA in authority.
fn is_nodata(snap: &Snapshot, name: &str, rtype: RecordType) -> bool {
    let reply = ask(snap, name, rtype);
    reply.response_code() == ResponseCode::NoError
        && reply.answers().is_empty()
        && reply
            .name_servers()
            .first()
            .is_some_and(|r| r.record_type() == RecordType::SOA)
}

/// Whether the reply is NXDOMAIN with the SOA in authority.
fn is_nxdomain(snap: &Snapshot, name: &str, rtype: RecordType) -> bool {
    let reply = ask(snap, name, rtype);
    reply.response_code() == ResponseCode::NXDomain
        && reply
            .name_servers()
            .first()
            .is_some_and(|r| r.record_type() == RecordType::SOA)
}
