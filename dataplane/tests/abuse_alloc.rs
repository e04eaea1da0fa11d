//! A running worker with DNS Cookies and response rate limiting on answers UDP queries that carry
//! cookies without allocating: the cookie is checked and made on the stack, the bucket table was
//! made when the worker started. The counting allocator sees every thread, so this is a file of
//! its own and the measured window does nothing but plain socket calls on the client side.

mod common;

use common::{assert_a_round_allocates_nothing, serve, udp_rounds, RawQuery};
use skyline_dataplane::cookie::{CookieCell, CookieSecrets};
use skyline_dataplane::rrl::RrlConfig;
use skyline_dataplane::worker::Options;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn answering_queries_with_cookies_under_rate_limiting_allocates_nothing() {
    let options = Options {
        cookies: Some(CookieCell::new(CookieSecrets::generate().unwrap())),
        rrl: RrlConfig {
            rate: 1_000_000,
            ..RrlConfig::default()
        },
        ..Options::default()
    };
    let server = serve(options);
    let addr = server.local_addr();
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let cookie: &[u8] = b"cookie!!";
    let wrong: &[u8] = b"cookie!!\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";
    let mut queries: Vec<Vec<u8>> = vec![
        RawQuery::new("web.skydns.test.", 1)
            .opt(1232, 0, &[(10, cookie)])
            .bytes(),
        RawQuery::new("WeB.skydns.TEST.", 1)
            .opt(1232, 0, &[(10, wrong)])
            .bytes(),
        RawQuery::new("nope.skydns.test.", 1)
            .opt(1232, 0, &[(10, cookie)])
            .bytes(),
        RawQuery::new("big.skydns.test.", 1).bytes(),
        RawQuery::new("srv.skydns.test.", 33)
            .opt(4096, 0, &[(10, cookie)])
            .bytes(),
        RawQuery::new("example.org.", 1).opt(1232, 0, &[(10, cookie)]).bytes(),
    ];
    let mut round_trips = |rounds: u16| udp_rounds(&client, addr, &mut queries, rounds, |_| {});
    round_trips(50);

    assert_a_round_allocates_nothing(GLOBAL, 3000, || round_trips(500));
    server.shutdown();
}
