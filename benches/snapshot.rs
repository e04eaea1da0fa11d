//! Criterion benches of snapshot building for the etcd source: a full build of a SkyDNS domain
//! (what the first sync and every resync cost), and the update one changed key costs (what each
//! etcd put costs once synced), at 10k and 100k records; and the update one moved endpoint costs
//! in the layout `skyline kube2etcd` writes for a cluster of 10,000 services (docs/kube2etcd.md).
//!
//! Run: `cargo bench --bench snapshot` (numbers in tuning.md, section "etcd source").

// criterion_group! defines a public function it gives no doc comment.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use skyline_dataplane::signer::{build, update};
use skyline_dataplane::snapshot::skydns::{typed, Config, Service};
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

/// The keys `skyline kube2etcd` writes for 10,000 services of 10 endpoints in 100 namespaces,
/// one in 10 headless, each with the port `http` 80/TCP (docs/kube2etcd.md, "Layout"; the
/// cluster `benches/kube2etcd.rs` mirrors), under the domain `cluster.local.`, sorted by key.
fn cluster(moved: u32) -> Vec<(String, Service)> {
    let record = |host: String, port: u16, target_strip: usize, group: &str| Service {
        host,
        port,
        ttl: 5,
        target_strip,
        group: group.to_owned(),
        ..Service::default()
    };
    let mut keys = Vec::new();
    for s in 0..10_000u32 {
        let (ns, name) = (format!("ns{}", s % 100), format!("svc{s}"));
        let base = format!("/skydns/local/cluster/svc/{ns}/{name}");
        let fqdn = format!("{name}.{ns}.svc.cluster.local");
        let headless = s % 10 == 0;
        if !headless {
            let ip = format!("10.96.{}.{}", s >> 8, s & 0xFF);
            let dashed = ip.replace('.', "-");
            keys.push((format!("{base}/_ip-{dashed}"), record(ip.clone(), 80, 1, "service")));
            keys.push((
                format!("{base}/_tcp/_http/_ip-{dashed}"),
                record(ip.clone(), 80, 3, "port"),
            ));
            keys.push((pointer(&ip), record(fqdn.clone(), 0, 0, "")));
        }
        for e in 0..10u32 {
            let n = s * 10 + e + if s == 1 && e == 0 { moved } else { 0 };
            let ip = format!("10.{}.{}.{}", 1 + (n >> 16), (n >> 8) & 0xFF, n & 0xFF);
            let dashed = ip.replace('.', "-");
            let label = if headless { format!("host{e}") } else { dashed.clone() };
            let host = format!("{label}.{fqdn}");
            keys.push((
                format!("{base}/{label}/_ip-{dashed}"),
                record(ip.clone(), 80, 1, "endpoint"),
            ));
            if headless {
                keys.push((
                    format!("{base}/_tcp/_http/{label}"),
                    record(host.clone(), 80, 0, "port"),
                ));
            }
            keys.push((pointer(&ip), record(host, 0, 0, "")));
        }
    }
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    keys
}

/// The PTR key kube2etcd writes for an IPv4 address.
fn pointer(ip: &str) -> String {
    let octets: Vec<&str> = ip.split('.').collect();
    format!("/skydns/arpa/in-addr/{}", octets.join("/"))
}

/// The keys that differ between two sorted tables.
fn difference(a: &[(String, Service)], b: &[(String, Service)]) -> Vec<String> {
    let (a, b): (std::collections::BTreeMap<_, _>, std::collections::BTreeMap<_, _>) =
        (a.iter().cloned().collect(), b.iter().cloned().collect());
    let mut keys: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
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
                    let updated = update(&base, &config, &next, &changed, &[], 2, now).expect("an update applies");
                    black_box(updated)
                },
                BatchSize::PerIteration,
            )
        });
    }
    let cluster_config = Config {
        domain: Name::from_dotted("cluster.local.").expect("static name"),
        ..config.clone()
    };
    let (before, after) = (cluster(0), cluster(1_000_000));
    let base = build(&cluster_config, &before, 1, now);
    let next = Arc::new(typed(&cluster_config, &after).0);
    let changed = difference(&before, &after);
    group.bench_function("one moved endpoint, kube2etcd layout of 10,000 services", |b| {
        b.iter(|| black_box(update(&base, &cluster_config, &next, &changed, &[], 2, now).expect("an update applies")))
    });
    group.finish();
}

criterion_group!(snapshot, benches);
criterion_main!(snapshot);
