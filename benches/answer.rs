//! Criterion benches of the sans-I/O path on a 10k-record SkyDNS snapshot: query parsing, node
//! lookup, and the whole answer function for the common query shapes.
//!
//! Run: `cargo bench --bench answer` (numbers and method in tuning.md).

// criterion_group! defines a public function it gives no doc comment.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use skyline_dataplane::snapshot::skydns::{self, Config, Service};
use skyline_dataplane::wire::{parse_query, LowerName};
use skyline_dataplane::{answer, Context, Outcome, Snapshot, Transport};
use std::time::SystemTime;

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
    skydns::build(&Config::default(), &records, 1, SystemTime::now())
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
    g.bench_function("lookup_node", |b| {
        b.iter(|| black_box(snap.node(black_box(name.wire()))).is_some())
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
                    Outcome::Reply(r) => r.len,
                    Outcome::Drop(_) => 0,
                }
            })
        });
    }
    g.finish();
}

criterion_group!(answer_path, benches);
criterion_main!(answer_path);
