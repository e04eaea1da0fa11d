//! A name whose answers depend on the client (SkyDNS views) is answered without allocating,
//! like every authoritative answer: a counting global allocator (stats_alloc) watches batches of
//! queries for such names, and for a name beside them without views, from clients of every
//! class, over UDP and TCP.

mod common;

use common::RawQuery;
use skyline_dataplane::signer::build;
use skyline_dataplane::snapshot::skydns::{Config, Service, Value, ViewKey};
use skyline_dataplane::{answer, Context, Outcome, Transport};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::IpAddr;
use std::time::UNIX_EPOCH;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn names_with_views_are_answered_without_allocating() {
    let record = |host: &str| Service {
        host: host.into(),
        port: 8080,
        text: "t".into(),
        ..Service::default()
    };
    let views = Value::Views(vec![
        (ViewKey::Default, vec![record("10.0.0.1")]),
        (
            ViewKey::Prefix("127.0.0.0/8".parse().unwrap()),
            vec![record("10.0.0.2")],
        ),
        (
            ViewKey::Prefix("127.0.0.2/32".parse().unwrap()),
            vec![record("10.0.0.3")],
        ),
        (
            ViewKey::Prefix("2001:db8::/32".parse().unwrap()),
            vec![record("10.0.0.4")],
        ),
    ]);
    let records = vec![
        ("/skydns/local/skydns/web".to_owned(), views),
        (
            "/skydns/local/skydns/plain/a".to_owned(),
            Value::Record(record("10.0.1.1")),
        ),
        (
            "/skydns/local/skydns/plain/b".to_owned(),
            Value::Record(record("10.0.1.2")),
        ),
    ];
    let snap = build(&Config::default(), &records, 1, UNIX_EPOCH);
    let queries: Vec<Vec<u8>> = vec![
        RawQuery::new("web.skydns.local.", 1).bytes(),
        RawQuery::new("WEB.skydns.local.", 33).opt(1232, 0, &[]).bytes(),
        RawQuery::new("web.skydns.local.", 16).bytes(),
        RawQuery::new("web.skydns.local.", 28).bytes(),
        RawQuery::new("plain.skydns.local.", 1).bytes(),
    ];
    let clients: Vec<IpAddr> = ["127.0.0.2", "127.0.0.1", "192.0.2.1", "2001:db8::1", "::ffff:127.0.0.2"]
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
    let contexts: Vec<Context> = clients
        .iter()
        .enumerate()
        .map(|(i, &client)| {
            let transport = if i % 2 == 0 { Transport::Udp } else { Transport::Tcp };
            Context::new(transport).with_client(client)
        })
        .collect();
    let mut out = vec![0u8; 65535];
    common::assert_a_round_allocates_nothing(GLOBAL, 100 * queries.len() * contexts.len(), || {
        let mut answered = 0;
        for rotation in 0..100u32 {
            for ctx in &contexts {
                for q in &queries {
                    let ctx = Context { rotation, ..*ctx };
                    if let Outcome::Reply(_) = answer(q, &snap, &ctx, &mut out) {
                        answered += 1;
                    }
                }
            }
        }
        answered
    });
}
