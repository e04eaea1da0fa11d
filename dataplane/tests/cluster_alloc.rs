//! The cluster names kept in tables rather than nodes (endpoint names and their PTRs), and
//! port names spelled without their underscores, are answered without allocating, like every authoritative answer: a counting global allocator
//! (stats_alloc) watches batches of them: positive, NODATA and NXDOMAIN, over UDP and TCP, in
//! mixed case.

mod common;

use common::RawQuery;
use skyline_dataplane::snapshot::kubernetes::{
    build, Cluster, Config, Endpoint, EndpointSlice, ObjectKey, Protocol, Service, ServiceKind, ServicePort,
};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::time::UNIX_EPOCH;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// One ClusterIP service with two endpoints on four ports, in namespace `ns`.
fn cluster() -> Cluster {
    let mut c = Cluster::default();
    c.namespaces.insert("ns".into());
    let ports: Box<[ServicePort]> = (0..4)
        .map(|i| ServicePort {
            name: format!("p{i}").into(),
            protocol: Protocol::Tcp,
            port: 8000 + i,
        })
        .collect();
    c.services.insert(
        ObjectKey::new("ns", "web"),
        Service {
            kind: ServiceKind::ClusterIp(vec!["10.96.0.1".parse().unwrap()].into()),
            ports: ports.clone(),
        },
    );
    let endpoint = |address: &str| Endpoint {
        address: address.parse().unwrap(),
        hostname: None,
        pod: None,
    };
    c.slices.insert(
        ObjectKey::new("ns", "web-a"),
        EndpointSlice {
            service: "web".into(),
            ports,
            endpoints: vec![endpoint("10.1.0.1"), endpoint("fd00::1")].into(),
        },
    );
    c
}

#[test]
fn names_of_the_tables_and_port_spellings_are_answered_without_allocating() {
    let snap = build(&Config::default(), &cluster(), 1, UNIX_EPOCH);
    let name = "10-1-0-1.web.ns.svc.cluster.local.";
    assert!(!snap.hosts.is_empty());
    let queries: Vec<Vec<u8>> = vec![
        RawQuery::new(name, 1).bytes(),
        RawQuery::new("10-1-0-1.WEB.ns.svc.Cluster.local.", 1)
            .opt(1232, 0, &[])
            .bytes(),
        RawQuery::new(name, 28).bytes(),
        RawQuery::new(name, 33).bytes(),
        RawQuery::new(name, 255).bytes(),
        RawQuery::new("fd00--1.web.ns.svc.cluster.local.", 28).bytes(),
        RawQuery::new("1.0.1.10.in-addr.arpa.", 12).bytes(),
        RawQuery::new("1.0.0.96.10.in-addr.arpa.", 12).bytes(),
        RawQuery::new("9.0.1.10.in-addr.arpa.", 12).bytes(),
        RawQuery::new("nope.web.ns.svc.cluster.local.", 1).bytes(),
        RawQuery::new("p1.tcp.web.ns.svc.cluster.local.", 33).bytes(),
        RawQuery::new("P2._tcp.web.ns.svc.cluster.local.", 1)
            .opt(1232, 0, &[])
            .bytes(),
        RawQuery::new("_p3.tcp.web.ns.svc.cluster.local.", 16).bytes(),
        RawQuery::new("p9.tcp.web.ns.svc.cluster.local.", 33).bytes(),
    ];
    common::assert_answers_allocate_nothing(GLOBAL, &snap, &queries);
}
