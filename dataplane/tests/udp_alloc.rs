//! A running worker answers UDP queries without allocating: receiving, answering and sending a
//! batch all reuse buffers made when the worker started. The counting allocator sees every
//! thread, so the measured window does nothing but plain socket calls on the client side.

mod common;

use common::{snapshot, udp_rounds, RawQuery};
use skyline_dataplane::snapshot::empty_cell;
use skyline_dataplane::worker::{Server, ServerConfig, TcpConfig};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn answering_udp_queries_allocates_nothing() {
    let snapshots = empty_cell();
    snapshots.store(Arc::new(snapshot()));
    let config = ServerConfig {
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        workers: 1,
        pin: false,
        tcp: TcpConfig::default(),
    };
    let server = Server::start(config, snapshots).unwrap();
    let addr = server.local_addr();
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut queries: Vec<Vec<u8>> = vec![
        RawQuery::new("web.skydns.test.", 1).bytes(),
        RawQuery::new("WeB.skydns.TEST.", 1).opt(1232, 0, &[]).bytes(),
        RawQuery::new("nope.skydns.test.", 1).bytes(),
        RawQuery::new("big.skydns.test.", 1).bytes(),
        RawQuery::new("srv.skydns.test.", 33).opt(4096, 0, &[]).bytes(),
        RawQuery::new("example.org.", 1).bytes(),
    ];
    let mut round_trips = |rounds: u16| udp_rounds(&client, addr, &mut queries, rounds, |_| {});
    round_trips(50);

    let region = Region::new(GLOBAL);
    let answered = round_trips(500);
    let change = region.change();

    assert_eq!(answered, 3000);
    assert_eq!(
        change.allocations, 0,
        "{} allocations for {answered} answers",
        change.allocations
    );
    assert_eq!(change.reallocations, 0);
    server.shutdown();
}
