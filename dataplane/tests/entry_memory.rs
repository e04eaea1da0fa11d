//! The heap one typed SkyDNS record costs the etcd source, which holds every record for as long
//! as it runs (tuning.md, "etcd source"): a counting global allocator (stats_alloc) watches the
//! records of the etcd benchmark's shape (an IPv4 host and a port) being typed. The entry in its
//! `Arc`, its key's path inside it, takes 88 bytes (one 96-byte chunk of glibc's), its slot in
//! the table 8; the snapshot shares all of it.

use skyline_dataplane::snapshot::skydns::{typed, Config, Service};
use skyline_dataplane::wire::Name;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn a_typed_record_of_the_common_shape_costs_about_100_bytes_of_heap() {
    let n = 10_000;
    let domain = Name::from_dotted("skydns.test.").unwrap();
    let config = Config {
        hostmaster: domain.prepend("hostmaster").unwrap(),
        domain,
        ..Config::default()
    };
    let values: Vec<(String, Service)> = (0..n)
        .map(|i| {
            let service = Service {
                host: std::net::Ipv4Addr::from(0x0a00_0000 + i as u32).to_string(),
                port: 80,
                ..Service::default()
            };
            (format!("/skydns/test/skydns/svc{}/h{i}", i % 1000), service)
        })
        .collect();
    let region = Region::new(GLOBAL);
    let (entries, skipped) = typed(&config, &values);
    let change = region.change();
    assert_eq!((entries.len(), skipped), (n, 0));
    let held = change.bytes_allocated as isize + change.bytes_reallocated - change.bytes_deallocated as isize;
    let per_record = held / n as isize;
    assert!(per_record <= 100, "{per_record} bytes per record ({change:?})");
}
