//! The recursive side of the sans-I/O answer path: names outside the zones answered from the
//! cache, forwarded on a miss, served stale or failed fast when upstreams are down, refused to
//! clients outside the ACL. Replies are parsed with hickory-proto.

mod common;

use common::{snapshot, RawQuery};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::{Name as HName, RData, Record, RecordType};
use skyline_dataplane::cache::{Cache, CacheConfig, Entry, Key, KeyRef};
use skyline_dataplane::forward::{answer_recursive, Recursion, Resolution, Resolved};
use skyline_dataplane::forward::{Failure, Routes};
use skyline_dataplane::wire::{LowerName, Name};
use skyline_dataplane::{Context, Outcome, Snapshot, Transport};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const A_TYPE: u16 = 1;

fn lower(name: &str) -> LowerName {
    LowerName::from_wire(Name::from_dotted(name).unwrap().wire()).unwrap()
}

/// An upstream reply for `name` A: `count` addresses with `ttl`, AD as given.
fn upstream_reply(name: &str, count: u8, ttl: u32, authentic: bool) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(1)
        .set_message_type(MessageType::Response)
        .set_recursion_available(true)
        .set_authentic_data(authentic);
    let owner = HName::from_ascii(name).unwrap();
    m.add_query(hickory_proto::op::Query::query(owner.clone(), RecordType::A));
    for i in 0..count {
        m.add_answer(Record::from_rdata(
            owner.clone(),
            ttl,
            RData::A(A(Ipv4Addr::new(192, 0, 2, i))),
        ));
    }
    m.to_vec().unwrap()
}

fn nxdomain_reply(name: &str) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(1)
        .set_message_type(MessageType::Response)
        .set_response_code(ResponseCode::NXDomain);
    let owner = HName::from_ascii(name).unwrap();
    m.add_query(hickory_proto::op::Query::query(owner.clone(), RecordType::A));
    let soa = SOA::new(owner.base_name(), owner.base_name(), 1, 2, 3, 4, 120);
    m.add_name_server(Record::from_rdata(owner.base_name(), 600, RData::SOA(soa)));
    m.to_vec().unwrap()
}

fn entry(cache: &Cache, name: &str, reply: &[u8], at: Instant) -> Entry {
    let body_start = 12 + Name::from_dotted(name).unwrap().wire().len() + 4;
    Entry::from_reply(reply, body_start, cache.caps_for(lower(name).wire()), at).unwrap()
}

fn fill(cache: &mut Cache, name: &str, reply: &[u8], at: Instant, dnssec_ok: bool) {
    let key = Key::new(&lower(name), A_TYPE, 1, dnssec_ok, false);
    let e = entry(cache, name, reply, at);
    assert!(cache.insert(key.bytes(), e).stored);
}

struct Fixture {
    snapshot: Snapshot,
    cache: Cache,
    routes: Routes,
    down: Vec<bool>,
    allowed: bool,
    now: Instant,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            snapshot: snapshot(),
            cache: Cache::new(CacheConfig::default()),
            routes: Routes::new(2, true, vec![Name::from_dotted("corp.example.").unwrap()]),
            down: vec![false, false],
            allowed: true,
            now: Instant::now(),
        }
    }

    fn run(&mut self, query: &[u8], resolved: Option<Resolved<'_>>) -> (Resolution, Vec<u8>) {
        let mut out = vec![0u8; 65535];
        let mut rec = Recursion {
            cache: &mut self.cache,
            routes: &self.routes,
            down: &self.down,
            allowed: self.allowed,
            prohibited: false,
            now: self.now,
            resolved,
        };
        let resolution = answer_recursive(
            query,
            &self.snapshot,
            &Context::new(Transport::Udp),
            &mut rec,
            &mut LowerName::default(),
            &mut out,
        );
        let len = match &resolution {
            Resolution::Done(Outcome::Reply(r))
            | Resolution::Cached {
                outcome: Outcome::Reply(r),
                ..
            } => r.len(),
            _ => 0,
        };
        out.truncate(len);
        (resolution, out)
    }

    fn reply(&mut self, query: &[u8]) -> (Message, Vec<u8>) {
        let (_, raw) = self.run(query, None);
        (Message::from_vec(&raw).expect("a parsable reply"), raw)
    }
}

fn ede(raw: &[u8]) -> Option<u16> {
    let tail = &raw[raw.len().checked_sub(6)?..];
    (tail[..4] == [0, 15, 0, 2]).then(|| u16::from_be_bytes([tail[4], tail[5]]))
}

#[test]
fn a_miss_is_forwarded_with_the_clients_query_kept() {
    let mut f = Fixture::new();
    let mut q = RawQuery::new("WWW.Example.ORG.", A_TYPE);
    q.id = 0x4242;
    q.flags |= 0x0010;
    q.opt(4096, 0, &[]);
    let (resolution, _) = f.run(&q.bytes(), None);
    let Resolution::Forward(forward) = resolution else {
        panic!("{resolution:?}")
    };
    assert_eq!(forward.key.name_wire(), lower("www.example.org.").wire());
    assert!(forward.key.checking_disabled() && !forward.key.dnssec_ok());
    assert!(!forward.stale);
    let kept = Message::from_vec(forward.query.bytes()).unwrap();
    assert_eq!(kept.id(), 0x4242);
    assert_eq!(kept.queries()[0].name().to_ascii(), "WWW.Example.ORG.");
    assert!(kept.checking_disabled());
    assert_eq!(kept.extensions().as_ref().unwrap().max_payload(), 4096);
}

#[test]
fn a_hit_is_answered_with_ra_the_clients_case_and_counted_down_ttls() {
    let mut f = Fixture::new();
    fill(
        &mut f.cache,
        "www.example.org.",
        &upstream_reply("www.example.org.", 2, 300, false),
        f.now,
        false,
    );
    f.now += Duration::from_secs(7);
    let (reply, raw) = f.reply(&RawQuery::new("wWw.EXAMPLE.org.", A_TYPE).bytes());
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.recursion_available() && !reply.authoritative() && reply.recursion_desired());
    assert_eq!(reply.queries()[0].name().to_ascii(), "wWw.EXAMPLE.org.");
    assert_eq!(reply.answers().len(), 2);
    assert!(reply.answers().iter().all(|r| r.ttl() == 293));
    assert!(reply.extensions().is_none() && ede(&raw).is_none());
}

#[test]
fn authoritative_answers_carry_ra_for_clients_that_may_recurse() {
    let mut f = Fixture::new();
    let (reply, _) = f.reply(&RawQuery::new("web.skydns.test.", A_TYPE).bytes());
    assert!(reply.authoritative() && reply.recursion_available());
    f.allowed = false;
    let (reply, _) = f.reply(&RawQuery::new("web.skydns.test.", A_TYPE).bytes());
    assert!(reply.authoritative() && !reply.recursion_available());
}

#[test]
fn clients_outside_the_acl_are_refused_even_what_is_cached() {
    let mut f = Fixture::new();
    fill(
        &mut f.cache,
        "www.example.org.",
        &upstream_reply("www.example.org.", 1, 300, false),
        f.now,
        false,
    );
    f.allowed = false;
    let (reply, _) = f.reply(&RawQuery::new("www.example.org.", A_TYPE).bytes());
    assert_eq!(reply.response_code(), ResponseCode::Refused);
    assert!(!reply.recursion_available() && reply.answers().is_empty());
}

#[test]
fn names_below_ndots_get_servfail_as_in_skydns() {
    let mut f = Fixture::new();
    let (reply, _) = f.reply(&RawQuery::new("localhost.", A_TYPE).bytes());
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
    assert!(reply.recursion_available());
}

#[test]
fn stale_answers_are_served_at_once_while_upstreams_are_down() {
    let mut f = Fixture::new();
    fill(
        &mut f.cache,
        "old.example.org.",
        &upstream_reply("old.example.org.", 1, 10, false),
        f.now,
        false,
    );
    f.now += Duration::from_secs(60);
    let mut q = RawQuery::new("old.example.org.", A_TYPE);
    q.opt(1232, 0, &[]);
    let (resolution, _) = f.run(&q.bytes(), None);
    assert!(
        matches!(resolution, Resolution::Forward(ref fw) if fw.stale),
        "upstreams up: ask them first"
    );
    f.down[0] = true;
    let (resolution, raw) = f.run(&q.bytes(), None);
    let Resolution::Cached {
        stale: true, refresh, ..
    } = resolution
    else {
        panic!("{resolution:?}")
    };
    assert!(refresh.is_some(), "the first stale answer starts a recheck");
    let reply = Message::from_vec(&raw).unwrap();
    assert_eq!(reply.answers()[0].ttl(), 30);
    assert_eq!(ede(&raw), Some(3));
    let (resolution, _) = f.run(&q.bytes(), None);
    assert!(
        matches!(resolution, Resolution::Cached { refresh: None, .. }),
        "at most one recheck per second"
    );
}

#[test]
fn a_stale_nxdomain_says_so() {
    let mut f = Fixture::new();
    fill(
        &mut f.cache,
        "gone.example.org.",
        &nxdomain_reply("gone.example.org."),
        f.now,
        false,
    );
    f.now += Duration::from_secs(500);
    f.down[0] = true;
    let mut q = RawQuery::new("gone.example.org.", A_TYPE);
    q.opt(1232, 0, &[]);
    let (reply, raw) = f.reply(&q.bytes());
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    assert_eq!(ede(&raw), Some(19));
}

#[test]
fn a_name_never_cached_fails_fast_with_an_extended_error_while_upstreams_are_down() {
    let mut f = Fixture::new();
    f.down[0] = true;
    let mut q = RawQuery::new("new.example.org.", A_TYPE);
    q.opt(1232, 0, &[]);
    let (reply, raw) = f.reply(&q.bytes());
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
    assert_eq!(ede(&raw), Some(22));
    let (reply, raw) = f.reply(&RawQuery::new("new.example.org.", A_TYPE).bytes());
    assert_eq!(reply.response_code(), ResponseCode::ServFail);
    assert!(
        reply.extensions().is_none() && ede(&raw).is_none(),
        "no OPT without the client's"
    );
}

#[test]
fn a_resolved_question_is_answered_from_what_came_back() {
    let mut f = Fixture::new();
    let reply = upstream_reply("www.example.org.", 3, 120, true);
    let e = entry(&f.cache, "www.example.org.", &reply, f.now);
    let mut q = RawQuery::new("www.example.org.", A_TYPE);
    q.opt(1232, 0, &[]);
    let name = LowerName::from_wire(b"\x03www\x07example\x03org\x00").unwrap();
    let key = KeyRef::new(&name, A_TYPE, 1, false, false);
    let (_, raw) = f.run(&q.bytes(), Some(Resolved::Answer(key, &e)));
    let m = Message::from_vec(&raw).unwrap();
    assert_eq!(m.answers().len(), 3);
    assert!(!m.authentic_data(), "AD only for clients that asked with AD or DO");
    q.flags |= 0x0020;
    let (_, raw) = f.run(&q.bytes(), Some(Resolved::Answer(key, &e)));
    assert!(Message::from_vec(&raw).unwrap().authentic_data());

    let (_, raw) = f.run(&q.bytes(), Some(Resolved::Failed(key, Failure::BadAnswers)));
    assert_eq!(Message::from_vec(&raw).unwrap().response_code(), ResponseCode::ServFail);
    assert_eq!(ede(&raw), Some(23));
}

#[test]
fn a_cached_answer_too_large_for_the_client_is_truncated_at_rrset_boundaries() {
    let mut f = Fixture::new();
    fill(
        &mut f.cache,
        "many.example.org.",
        &upstream_reply("many.example.org.", 60, 300, false),
        f.now,
        false,
    );
    let (reply, _) = f.reply(&RawQuery::new("many.example.org.", A_TYPE).bytes());
    assert!(
        reply.truncated() && reply.answers().is_empty(),
        "one RRset: whole or not at all"
    );
    let mut q = RawQuery::new("many.example.org.", A_TYPE);
    q.opt(1232, 0, &[]);
    let (reply, _) = f.reply(&q.bytes());
    assert!(!reply.truncated());
    assert_eq!(reply.answers().len(), 60);
}

#[test]
fn dnssec_answers_are_cached_apart() {
    let mut f = Fixture::new();
    fill(
        &mut f.cache,
        "sec.example.org.",
        &upstream_reply("sec.example.org.", 1, 300, true),
        f.now,
        true,
    );
    let mut plain = RawQuery::new("sec.example.org.", A_TYPE);
    plain.opt(1232, 0, &[]);
    assert!(matches!(f.run(&plain.bytes(), None).0, Resolution::Forward(_)));
    let mut with_do = RawQuery::new("sec.example.org.", A_TYPE);
    with_do.opt(1232, 0, &[]);
    let mut bytes = with_do.bytes();
    let n = bytes.len();
    bytes[n - 4] = 0x80;
    let (reply, _) = f.reply(&bytes);
    assert_eq!(reply.answers().len(), 1);
    assert!(reply.authentic_data());
}

#[test]
fn stub_zone_queries_carrying_the_loop_guard_are_dropped() {
    let mut f = Fixture::new();
    let mut q = RawQuery::new("x.corp.example.", A_TYPE);
    q.opt(1232, 0, &[(65011, &[1])]);
    assert!(matches!(f.run(&q.bytes(), None).0, Resolution::Looped));
    let mut other = RawQuery::new("x.example.org.", A_TYPE);
    other.opt(1232, 0, &[(65011, &[1])]);
    assert!(
        matches!(f.run(&other.bytes(), None).0, Resolution::Forward(_)),
        "the guard only concerns stub zones"
    );
}
