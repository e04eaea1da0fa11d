//! Criterion benches of the sans-I/O path on a 10k-record SkyDNS snapshot: query parsing, leaf
//! and node lookup, the whole answer function for the common query shapes, and a response-cache
//! hit for a name outside the zones.
//!
//! Run: `cargo bench --bench answer` (numbers and method in tuning.md).

// criterion_group! defines a public function it gives no doc comment.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use skyline_dataplane::cache::{Cache, CacheConfig, Entry, Key};
use skyline_dataplane::forward::Routes;
use skyline_dataplane::forward::{answer_recursive, Recursion, Resolution};
use skyline_dataplane::signer;
use skyline_dataplane::snapshot::skydns::{Config, Service};
use skyline_dataplane::wire::{parse_query, LowerName};
use skyline_dataplane::{answer, Context, Outcome, Snapshot, Transport};
use std::time::{Duration, Instant, SystemTime};

/// 1,000 services of 10 instances each under `skydns.local.`.
fn snapshot() -> Snapshot {
    let records: Vec<(String, Service)> = (0..10_000u32)
        .map(|i| {
            let key = format!("/skydns/local/skydns/svc{}/h{}", i / 10, i % 10);
            let host = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 0xFF, i & 0xFF);
            (
                key,
                Service {
                    host,
                    port: 8080,
                    ..Service::default()
                },
            )
        })
        .collect();
    signer::build(&Config::default(), &records, 1, SystemTime::now())
}

fn query(name: &str, qtype: u16, edns: bool) -> Vec<u8> {
    let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, edns as u8];
    for label in name.trim_end_matches('.').split('.') {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&[0, 1]);
    if edns {
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]);
    }
    m
}

fn benches(c: &mut Criterion) {
    let snap = snapshot();
    let leaf = query("h3.svc417.skydns.local.", 1, true);
    let mut out = vec![0u8; 65535];

    let mut g = c.benchmark_group("wire");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse_query", |b| {
        let mut name = LowerName::default();
        b.iter(|| black_box(parse_query(black_box(&leaf), &mut name)).is_ok())
    });
    g.finish();

    let mut g = c.benchmark_group("snapshot");
    g.throughput(Throughput::Elements(1));
    let mut name = LowerName::default();
    parse_query(&leaf, &mut name).unwrap();
    g.bench_function("lookup_leaf", |b| {
        b.iter(|| black_box(snap.leaf(black_box(&name))).is_some())
    });
    let mut service = LowerName::default();
    parse_query(&query("svc417.skydns.local.", 1, true), &mut service).unwrap();
    g.bench_function("lookup_node", |b| {
        b.iter(|| black_box(snap.node(black_box(service.wire()))).is_some())
    });
    g.finish();

    let mut g = c.benchmark_group("answer");
    g.throughput(Throughput::Elements(1));
    let cases = [
        ("a_leaf", query("h3.svc417.skydns.local.", 1, true)),
        ("a_leaf_no_edns", query("h3.svc417.skydns.local.", 1, false)),
        ("a_service_10_records", query("svc417.skydns.local.", 1, true)),
        ("srv_service_10_records", query("svc417.skydns.local.", 33, true)),
        ("nxdomain", query("nope.svc417.skydns.local.", 1, true)),
        ("nodata", query("h3.svc417.skydns.local.", 16, true)),
        ("refused_out_of_zone", query("www.example.org.", 1, true)),
    ];
    for (label, q) in &cases {
        g.bench_function(*label, |b| {
            let mut ctx = Context::new(Transport::Udp);
            b.iter(|| {
                ctx.rotation = ctx.rotation.wrapping_add(1);
                match answer(black_box(q), &snap, &ctx, &mut out) {
                    Outcome::Reply(r) => r.len(),
                    Outcome::Drop(_) => 0,
                }
            })
        });
    }
    g.finish();
}

/// An upstream's reply to `query` (no EDNS): one A record with a 300 s TTL.
fn upstream_reply(query: &[u8]) -> Vec<u8> {
    let mut m = query[..12].to_vec();
    m[2] = 0x81;
    m[3] = 0x80;
    m[7] = 1;
    m[11] = 0;
    m.extend_from_slice(&query[12..]);
    m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 7]);
    m
}

/// A fresh response-cache hit: the query goes through the same entry point as every UDP query
/// of a forwarding worker and is answered from the cache, TTL aged on the way out.
fn cache_hit(c: &mut Criterion) {
    let snap = snapshot();
    let start = Instant::now();
    let q = query("www.example.org.", 1, false);
    let mut name = LowerName::default();
    parse_query(&q, &mut name).unwrap();
    let mut cache = Cache::new(CacheConfig::default());
    let entry = Entry::from_reply(&upstream_reply(&q), q.len(), cache.caps_for(name.wire()), start).unwrap();
    cache.insert(Key::new(&name, 1, 1, false, false).bytes(), entry);
    let routes = Routes::new(2, true, Vec::new());
    let down = [false];
    let now = start + Duration::from_secs(30);
    let mut out = vec![0u8; 65535];
    let mut qname = LowerName::default();

    let mut g = c.benchmark_group("cache");
    g.throughput(Throughput::Elements(1));
    for (label, q) in [("hit", q.clone()), ("hit_edns", query("www.example.org.", 1, true))] {
        g.bench_function(label, |b| {
            let ctx = Context::new(Transport::Udp);
            b.iter(|| {
                let mut rec = Recursion {
                    cache: &mut cache,
                    routes: &routes,
                    down: &down,
                    allowed: true,
                    prohibited: false,
                    now,
                    resolved: None,
                };
                match answer_recursive(black_box(&q), &snap, &ctx, &mut rec, &mut qname, &mut out) {
                    Resolution::Cached {
                        outcome: Outcome::Reply(r),
                        ..
                    } => r.len(),
                    other => panic!("not a cache hit: {other:?}"),
                }
            })
        });
    }
    g.finish();
}

criterion_group!(answer_path, benches, cache_hit);
criterion_main!(answer_path);
