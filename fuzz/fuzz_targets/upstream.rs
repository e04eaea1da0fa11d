//! Any bytes as an upstream's reply to a forwarded question, through what a worker does with
//! one: judged by `forward::read_reply` (ID, question, TC, rcode, records: the checks of
//! `check_reply`, then the cache entry), asked again over TCP when truncated, relayed to the two
//! clients waiting for it (different IDs, spellings, sizes and transports), inserted into the
//! cache, and served from it to a third client some seconds later, fresh or stale.
//!
//! The input is five control bytes, then the reply:
//!
//! | byte | chooses |
//! |---|---|
//! | 0 | the question's type, from [`QTYPES`] |
//! | 1 | its name, from [`NAMES`] (spelled differently by each client) |
//! | 2 | bit 0 DO, bit 1 CD, bit 2 the reply came over TCP, bit 3 the upstreams are down when the third client asks, bits 4–6 TCP for each client |
//! | 3 | the EDNS sizes of the clients, from [`UDP_SIZES`]: low nibble the first, high the second, both XORed the third |
//! | 4 | seconds between the reply and the third client |
//!
//! Checked: nothing panics; a message hickory-proto reads as anything but a response to the
//! question asked, with its ID, is dropped as mismatched; a reply that is not the one awaited,
//! or not a usable answer, reaches neither the cache nor a client; every reply a client gets
//! keeps the properties of `skyline_fuzz::forwarded` (its ID and question, QR, its size), has
//! the upstream's rcode and records, counts TTLs down from the entry's lifetime or reads 30
//! when stale; a SERVFAIL says why in an Extended DNS Error.

#![no_main]

use hickory_proto::op::{Message, MessageType, OpCode};
use hickory_proto::rr::{DNSClass, RecordType};
use libfuzzer_sys::fuzz_target;
use skyline_dataplane::forward::{Recursion, Resolution, Resolved};
use skyline_dataplane::cache::{Cache, CacheConfig, Key, STALE_TTL};
use skyline_dataplane::forward::{read_reply, Failure, Routes, Verdict};
use skyline_dataplane::wire::types::{ede, rcode, rtype, MAX_MESSAGE_LEN};
use skyline_dataplane::wire::{LowerName, Name};
use skyline_dataplane::{answer_recursive, Context, Outcome, Transport};
use skyline_fuzz::fixture;
use skyline_fuzz::forwarded::{self, Client};
use std::time::{Duration, Instant};

/// The ID of the upstream query the reply answers.
const UPSTREAM_ID: u16 = 0x5eed;
/// Control bytes before the reply.
const CONTROL_LEN: usize = 5;

/// Names outside the fixture's zones, as the first client spells them: the root, mixed case,
/// digits, a name in `cluster.local.` (negative answers capped at 5 s), one in a reverse zone
/// with no record there, one in a stub zone, many labels, and 255 bytes.
const NAMES: &[&str] = &[
    ".",
    "Example.COM.",
    "wWw.ExAmPlE.oRg.",
    "_Sip._Udp.Svc.Cluster.Local.",
    "1.2.0.192.In-Addr.Arpa.",
    "Host.Corp.Example.",
    "0123456789.Digits.Test.",
    "a.B.c.D.e.F.g.H.i.J.k.L.m.N.o.P.Example.Net.",
    "xn--Bcher-kva.Example.",
    concat!(
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.",
        "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.",
        "CcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcCcC.",
        "ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd."
    ),
];

/// Question types: the common ones, those with names in their data, meta types a forwarder
/// still forwards, and an unknown one.
const QTYPES: [u16; 16] = [
    rtype::A,
    rtype::AAAA,
    rtype::CNAME,
    rtype::SRV,
    rtype::MX,
    rtype::TXT,
    rtype::PTR,
    rtype::NS,
    rtype::SOA,
    35,  // NAPTR
    39,  // DNAME
    64,  // SVCB
    65,  // HTTPS
    257, // CAA
    rtype::ANY,
    65280,
];

/// EDNS sizes a client may ask for; `None` is a query without an OPT (512 bytes).
const UDP_SIZES: [Option<u16>; 16] = [
    None,
    Some(512),
    Some(1232),
    Some(4096),
    Some(0),
    Some(100),
    Some(700),
    Some(1400),
    Some(65535),
    Some(513),
    Some(1024),
    Some(1231),
    None,
    Some(600),
    Some(2048),
    Some(900),
];

/// `dotted` in uncompressed wire form, keeping its case.
fn wire(dotted: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for label in dotted.split('.').filter(|l| !l.is_empty()) {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out
}

/// The same name in other letters' case (length bytes are below 64, never letters).
fn swap_case(wire: &[u8]) -> Vec<u8> {
    wire.iter()
        .map(|&b| match b {
            b'a'..=b'z' => b.to_ascii_uppercase(),
            b'A'..=b'Z' => b.to_ascii_lowercase(),
            _ => b,
        })
        .collect()
}

/// One worker's forwarding state, as far as the answer path sees it.
struct Worker {
    cache: Cache,
    routes: Routes,
    out: Vec<u8>,
}

impl Worker {
    /// Runs `query` from `client` through the answer path at `now`, as the worker does for a
    /// new query (`resolved` unset) or for a client that waited on an upstream.
    fn ask(
        &mut self,
        client: &Client,
        query: &[u8],
        now: Instant,
        down: bool,
        resolved: Option<Resolved<'_>>,
    ) -> Resolution {
        let down = [down; 2];
        let mut rec = Recursion {
            cache: &mut self.cache,
            routes: &self.routes,
            down: &down,
            allowed: true,
            now,
            resolved,
        };
        answer_recursive(
            query,
            fixture::snapshot(),
            &Context::new(client.transport),
            &mut rec,
            &mut LowerName::default(),
            &mut self.out,
        )
    }

    /// The reply an outcome wrote, checked against `client`.
    fn sent(&self, client: &Client, outcome: Outcome) -> &[u8] {
        let Outcome::Reply(reply) = outcome else {
            panic!("a client of the forwarder gets no reply: {outcome:?}");
        };
        let bytes = &self.out[..reply.len];
        forwarded::reply(client, bytes);
        bytes
    }
}

/// Whether `reply` is, as hickory-proto reads it, a response with the upstream query's ID to
/// the question `dotted` `qtype` IN (the name in any case).
fn answers(reply: &Message, dotted: &str, qtype: u16) -> bool {
    let question = match reply.queries() {
        [question] => question,
        _ => return false,
    };
    reply.id() == UPSTREAM_ID
        && reply.message_type() == MessageType::Response
        && reply.op_code() == OpCode::Query
        && question.name().to_ascii().eq_ignore_ascii_case(dotted)
        && question.query_type() == RecordType::from(qtype)
        && question.query_class() == DNSClass::IN
}

/// A SERVFAIL that says why (when the client sent an OPT to carry it).
fn servfail(client: &Client, reply: &[u8], why: Failure) {
    let parsed = forwarded::hickory(reply);
    assert_eq!(u16::from(parsed.response_code()), rcode::SERVFAIL);
    if parsed.extensions().is_some() {
        assert_eq!(forwarded::ede(&parsed), Some(why.ede()), "{client:?}");
    }
}

/// Every TTL of a served reply (its OPT aside) is at most `bound`, or exactly `bound` when
/// `exact`.
fn ttls(served: &Message, bound: u32, exact: bool) {
    let records = served
        .answers()
        .iter()
        .chain(served.name_servers())
        .chain(served.additionals());
    for record in records {
        let ttl = record.ttl();
        assert!(
            if exact { ttl == bound } else { ttl <= bound },
            "TTL {ttl} against {bound}: {record:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((control, reply)) = data.split_at_checked(CONTROL_LEN) else {
        return;
    };
    let qtype = QTYPES[usize::from(control[0]) % QTYPES.len()];
    let dotted = NAMES[usize::from(control[1]) % NAMES.len()];
    let name = wire(dotted);
    let bit = |n: u8| control[2] & (1 << n) != 0;
    let (dnssec_ok, checking_disabled, over_tcp, down_later) = (bit(0), bit(1), bit(2), bit(3));
    let transport = |n: u8| if bit(n) { Transport::Tcp } else { Transport::Udp };
    let sizes = control[3];
    // DO travels in the OPT: with DO every client sends one, so that all three share a key.
    let edns = |i: u8| {
        let size = UDP_SIZES[usize::from(i & 0x0F)];
        match (size, dnssec_ok) {
            (Some(size), _) => Some((size, dnssec_ok)),
            (None, true) => Some((0, true)),
            (None, false) => None,
        }
    };
    let age = u64::from(control[4]);

    let mut worker = Worker {
        cache: Cache::new(CacheConfig {
            max_bytes: 1 << 20,
            ..CacheConfig::default()
        }),
        routes: Routes::new(0, true, vec![Name::from_dotted("corp.example.").expect("static name")]),
        out: vec![0u8; MAX_MESSAGE_LEN],
    };
    let now = Instant::now();

    // Two clients miss the cache; the second merges into the first one's question.
    let first = Client::new(0xA1A1, &name, qtype, checking_disabled, edns(sizes), transport(4));
    let second = Client::new(
        0xB2B2,
        &swap_case(&name),
        qtype,
        checking_disabled,
        edns(sizes >> 4),
        transport(5),
    );
    let mut waiters = Vec::new();
    let mut key: Option<Key> = None;
    for client in [&first, &second] {
        let Resolution::Forward(forward) = worker.ask(client, &client.query, now, false, None) else {
            panic!("a name outside the zones, not cached, goes upstream: {client:?}");
        };
        assert!(
            key.as_ref().is_none_or(|k| k.bytes() == forward.key.bytes()),
            "one question for both"
        );
        key = Some(forward.key);
        waiters.push((client, forward.query));
    }
    let key = key.expect("two clients asked");

    let upstream = Message::from_vec(reply).ok();
    let mut verdict = read_reply(reply, UPSTREAM_ID, &key, over_tcp, &worker.cache, now);
    if matches!(verdict, Verdict::Truncated) {
        // The worker asks again over TCP; the same bytes stand for what comes back there.
        verdict = read_reply(reply, UPSTREAM_ID, &key, true, &worker.cache, now);
    }
    if upstream.as_ref().is_some_and(|m| !answers(m, dotted, qtype)) {
        assert!(
            matches!(verdict, Verdict::Mismatched(_)),
            "hickory reads another message than the reply awaited, skyline takes it: {verdict:?}"
        );
    }
    let entry = match verdict {
        Verdict::Answer(entry) => entry,
        Verdict::Truncated => panic!("a reply over TCP is never truncated"),
        Verdict::Mismatched(_) | Verdict::Bad => {
            let why = if matches!(verdict, Verdict::Bad) {
                Failure::BadAnswers
            } else {
                Failure::Unreachable
            };
            // Other tries fail alike: the clients get SERVFAIL, and the cache saw nothing.
            for (client, query) in &waiters {
                let Resolution::Done(outcome) = worker.ask(
                    client,
                    query.bytes(),
                    now,
                    false,
                    Some(Resolved::Failed(key.key_ref(), why)),
                ) else {
                    panic!("a failed question is answered at once");
                };
                servfail(client, worker.sent(client, outcome), why);
            }
            assert!(worker.cache.is_empty(), "{verdict:?} reached the cache");
            assert!(
                matches!(
                    worker.ask(&first, &first.query, now, false, None),
                    Resolution::Forward(_)
                ),
                "{verdict:?} answers a client"
            );
            return;
        }
    };

    assert!(matches!(entry.rcode(), rcode::NOERROR | rcode::NXDOMAIN));
    let lifetime = entry.lifetime();
    let caps = worker.cache.caps_for(key.name_wire());
    if entry.is_negative() {
        assert!(lifetime <= caps.negative_max, "a negative answer over its cap");
    } else {
        assert!(lifetime <= caps.max.max(caps.min), "an answer over the TTL cap");
    }
    for (client, query) in &waiters {
        let Resolution::Done(outcome) = worker.ask(
            client,
            query.bytes(),
            now,
            false,
            Some(Resolved::Answer(key.key_ref(), &entry)),
        ) else {
            panic!("a resolved question is answered at once");
        };
        let reply = worker.sent(client, outcome);
        assert_eq!(u16::from(reply[3] & 0x0F), entry.rcode());
        if let Some(upstream) = &upstream {
            ttls(&forwarded::relayed(reply, upstream), lifetime, false);
        }
    }

    let inserted = worker.cache.insert(key.bytes(), entry);
    assert_eq!(inserted.stored, lifetime > 0, "cached exactly when it may live");

    // A third client, later: served from the cache, fresh or (upstreams down) stale.
    let later = now + Duration::from_secs(age);
    let third = Client::new(
        0xC3C3,
        &name.to_ascii_lowercase(),
        qtype,
        checking_disabled,
        edns(sizes ^ (sizes >> 4)),
        transport(6),
    );
    match worker.ask(&third, &third.query, later, down_later, None) {
        Resolution::Cached { outcome, stale, .. } => {
            assert!(inserted.stored, "served from an empty cache");
            assert_eq!(stale, age >= u64::from(lifetime), "stale exactly past the lifetime");
            assert!(!stale || down_later, "stale only while the upstreams are down");
            let reply = worker.sent(&third, outcome);
            if let Some(upstream) = &upstream {
                let served = forwarded::relayed(reply, upstream);
                if stale {
                    ttls(&served, STALE_TTL, true);
                    if served.extensions().is_some() {
                        let code = if u16::from(served.response_code()) == rcode::NXDOMAIN {
                            ede::STALE_NXDOMAIN
                        } else {
                            ede::STALE_ANSWER
                        };
                        assert_eq!(forwarded::ede(&served), Some(code));
                    }
                } else {
                    ttls(&served, lifetime - age as u32, false);
                }
            }
        }
        Resolution::Done(outcome) => {
            assert!(
                down_later && !inserted.stored,
                "a miss answered without asking upstream"
            );
            servfail(&third, worker.sent(&third, outcome), Failure::Unreachable);
        }
        Resolution::Forward(_) => {
            assert!(!down_later, "forwarded while every upstream is down");
            assert!(!inserted.stored || age >= u64::from(lifetime), "a fresh entry missed");
        }
        Resolution::Looped => panic!("no stub loop guard was sent"),
        Resolution::Fetch { .. } => panic!("an outside name has no glue to fetch"),
    }
});
