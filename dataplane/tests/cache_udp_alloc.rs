//! A running worker answers cache hits over UDP without allocating: the misses that filled its
//! cache went to a real upstream socket before the measured window, and inside it every query is
//! a hit (or an authoritative answer). The counting allocator sees every thread, so this file
//! holds this one test only.

mod common;

use common::{snapshot, udp_rounds, RawQuery};
use skyline_dataplane::forward::ForwardConfig;
use skyline_dataplane::snapshot::empty_cell;
use skyline_dataplane::worker::{Options, Server, ServerConfig, TcpConfig};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// An upstream on 127.0.0.1 answering every A query with `A 192.0.2.7`, TTL 300.
fn upstream() -> (SocketAddr, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let addr = socket.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let halt = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        let mut reply = [0u8; 1024];
        while !halt.load(Ordering::Relaxed) {
            let Ok((n, from)) = socket.recv_from(&mut buf) else {
                continue;
            };
            let name_end = 12 + buf[12..n].iter().position(|&b| b == 0).unwrap_or(0) + 1;
            let question = &buf[12..name_end + 4];
            let header = [buf[0], buf[1], 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0];
            let answer = [0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 7];
            let len = 12 + question.len() + answer.len();
            reply[..12].copy_from_slice(&header);
            reply[12..12 + question.len()].copy_from_slice(question);
            reply[12 + question.len()..len].copy_from_slice(&answer);
            let _ = socket.send_to(&reply[..len], from);
        }
    });
    (addr, stop, thread)
}

#[test]
fn a_worker_answers_cache_hits_without_allocating() {
    let (upstream, stop, thread) = upstream();
    let snapshots = empty_cell();
    snapshots.store(Arc::new(snapshot()));
    let config = ServerConfig {
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        workers: 1,
        pin: false,
        tcp: TcpConfig::default(),
    };
    let options = Options {
        extra_addrs: Vec::new(),
        forward: Some(ForwardConfig {
            upstreams: vec![upstream],
            ..ForwardConfig::default()
        }),
        ..Options::default()
    };
    let server = Server::start_with(config, options, snapshots).unwrap();
    let addr = server.local_addr();
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut queries: Vec<Vec<u8>> = vec![
        RawQuery::new("www.example.org.", 1).bytes(),
        RawQuery::new("WWW.example.org.", 1).opt(1232, 0, &[]).bytes(),
        RawQuery::new("mail.example.org.", 1).bytes(),
        RawQuery::new("web.skydns.test.", 1).bytes(),
    ];
    let mut round_trips = |rounds: u16| {
        udp_rounds(&client, addr, &mut queries, rounds, |reply| {
            assert_eq!(reply[3] & 0x0F, 0, "NOERROR")
        })
    };
    round_trips(20);
    assert_eq!(
        server.stats().upstream_queries,
        2,
        "www and mail went upstream once each"
    );

    let region = Region::new(GLOBAL);
    let answered = round_trips(500);
    let change = region.change();

    assert_eq!(answered, 2000);
    assert_eq!(
        change.allocations + change.reallocations,
        0,
        "{change:?} for {answered} answers"
    );
    let stats = server.stats();
    assert_eq!(stats.upstream_queries, 2);
    assert!(stats.cache_hits.iter().sum::<u64>() >= 1500);
    server.shutdown();
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
}
