//! Criterion benches of snapshot building for the etcd source: a full build of a SkyDNS domain
//! (what the first sync and every resync cost), and the update one changed key costs (what each
//! etcd put costs once synced), at 10k and 100k records.
//!
//! Run: `cargo bench --bench snapshot` (numbers in tuning.md, section "etcd source").

// criterion_group! defines a public function it gives no doc comment.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use skyline_dataplane::snapshot::skydns::{build, typed, update, Config, Service};
use skyline_dataplane::wire::Name;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const PROBE: &str = "/skydns/test/skydns/bench/probe";

fn config() -> Config {
    let domain = Name::from_dotted("skydns.test.").expect("static name");
    Config {
        hostmaster: domain.prepend("hostmaster").expect("static name"),
        domain,
        ..Config::default()
    }
}

/// `n` records over 1,000 services, as `benches/etcd.rs` loads them into etcd.
fn records(n: usize) -> Vec<(String, Service)> {
    let mut records: Vec<(String, Service)> = (0..n)
        .map(|i| {
            let key = format!("/skydns/test/skydns/svc{}/i{}", i % 1000, i / 1000);
            let host = format!("10.{}.{}.{}", (i >> 16) & 0xFF, (i >> 8) & 0xFF, i & 0xFF);
            let service = Service {
                host,
                port: 80,
                ..Service::default()
            };
            (key, service)
        })
        .collect();
    records.sort_by(|a, b| a.0.cmp(&b.0));
    records
}

/// The table with the probe key put to a value that depends on `round`.
fn with_probe(records: &[(String, Service)], round: u32) -> Vec<(String, Service)> {
    let mut next = records.to_vec();
    let service = Service {
        host: format!("10.255.{}.{}", (round >> 8) & 0xFF, round & 0xFF),
        ..Service::default()
    };
    match next.binary_search_by(|(k, _)| k.as_str().cmp(PROBE)) {
        Ok(i) => next[i].1 = service,
        Err(i) => next.insert(i, (PROBE.to_owned(), service)),
    }
    next
}

fn benches(c: &mut Criterion) {
    let config = config();
    let now = SystemTime::now();
    let mut group = c.benchmark_group("snapshot");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    for n in [10_000, 100_000] {
        let table = records(n);
        group.bench_function(format!("full build, {n} records"), |b| {
            b.iter(|| black_box(build(&config, &table, 1, now)))
        });
        let base = build(&config, &with_probe(&table, 0), 1, now);
        let changed = [PROBE.to_owned()];
        let mut round = 0;
        group.bench_function(format!("one changed key, {n} records"), |b| {
            b.iter_batched(
                || {
                    round += 1;
                    Arc::new(typed(&config, &with_probe(&table, round)).0)
                },
                |next| {
                    let updated = update(&base, &config, &next, &changed, 2, now).expect("an update applies");
                    black_box(updated)
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(snapshot, benches);
criterion_main!(snapshot);
