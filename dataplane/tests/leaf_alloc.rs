//! The SkyDNS names kept as leaves rather than nodes are answered without allocating, like
//! every authoritative answer: a counting global allocator (stats_alloc) watches batches of
//! them (A, AAAA, SRV with glue, NODATA, ANY, and names below a leaf) over UDP and TCP, in
//! mixed case.

mod common;

use common::RawQuery;
use skyline_dataplane::signer::build;
use skyline_dataplane::snapshot::skydns::{Config, Service};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::time::UNIX_EPOCH;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn leaves_are_answered_without_allocating() {
    let record = |host: &str| Service {
        host: host.into(),
        port: 8080,
        ..Service::default()
    };
    let records = vec![
        ("/skydns/local/skydns/web/a".to_owned(), record("10.0.0.1")),
        ("/skydns/local/skydns/web/b".to_owned(), record("2001:db8::1")),
    ];
    let snap = build(&Config::default(), &records, 1, UNIX_EPOCH);
    assert_eq!(snap.leaves.len(), 2);
    let queries: Vec<Vec<u8>> = vec![
        RawQuery::new("a.web.skydns.local.", 1).bytes(),
        RawQuery::new("A.Web.skydns.LOCAL.", 1).opt(1232, 0, &[]).bytes(),
        RawQuery::new("a.web.skydns.local.", 28).bytes(),
        RawQuery::new("a.web.skydns.local.", 33).bytes(),
        RawQuery::new("a.web.skydns.local.", 255).bytes(),
        RawQuery::new("b.web.skydns.local.", 28).bytes(),
        RawQuery::new("b.web.skydns.local.", 33).opt(1232, 0, &[]).bytes(),
        RawQuery::new("x.a.web.skydns.local.", 1).bytes(),
    ];
    common::assert_answers_allocate_nothing(GLOBAL, &snap, &queries);
}
