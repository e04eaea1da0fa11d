//! A running worker that sends every query and reply to dnstap and writes every reply to the
//! query log answers without allocating: records are encoded into buffers its queues start
//! with and the writer threads hand back. The counting allocator sees every thread (the writers
//! and the reader here too), so this is a file of its own, and the reader reads into a fixed
//! buffer.

mod common;

use common::{assert_a_round_allocates_nothing, serve, udp_rounds, RawQuery};
use skyline_dataplane::observe::fstrm::{self, control_frame};
use skyline_dataplane::observe::{dnstap::CONTENT_TYPE, DnstapConfig, ObserveConfig, QueryLogConfig, QueryLogTarget};
use skyline_dataplane::worker::Options;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, UdpSocket};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Takes the Frame Streams handshake on `listener`, then reads data frames into one fixed
/// buffer, counting them in `frames`, until the writer stops.
fn read_frames(listener: UnixListener, frames: Arc<AtomicU64>) {
    let (mut stream, _) = listener.accept().unwrap();
    let mut word = [0u8; 4];
    let control = |stream: &mut std::os::unix::net::UnixStream| {
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).unwrap();
        let mut frame = vec![0; u32::from_be_bytes(len) as usize];
        stream.read_exact(&mut frame).unwrap();
        u32::from_be_bytes(frame[..4].try_into().unwrap())
    };
    stream.read_exact(&mut word).unwrap();
    assert_eq!(control(&mut stream), fstrm::READY);
    let mut accept = Vec::new();
    control_frame(fstrm::ACCEPT, Some(CONTENT_TYPE), &mut accept);
    stream.write_all(&accept).unwrap();
    stream.read_exact(&mut word).unwrap();
    assert_eq!(control(&mut stream), fstrm::START);
    let mut buf = [0u8; 65_536];
    loop {
        if stream.read_exact(&mut word).is_err() {
            return;
        }
        let len = u32::from_be_bytes(word) as usize;
        if len == 0 {
            return;
        }
        if stream.read_exact(&mut buf[..len]).is_err() {
            return;
        }
        frames.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn answering_with_dnstap_and_the_query_log_on_allocates_nothing_once_steady() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("dnstap.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let frames = Arc::new(AtomicU64::new(0));
    let reader = {
        let frames = Arc::clone(&frames);
        std::thread::spawn(move || read_frames(listener, frames))
    };
    let options = Options {
        observe: ObserveConfig {
            dnstap: Some(DnstapConfig {
                socket: socket.clone(),
                identity: "skyline-test".to_owned(),
                version: "test".to_owned(),
                sample: 1,
            }),
            query_log: Some(QueryLogConfig {
                target: QueryLogTarget::File(dir.path().join("queries.log")),
                rate: 1_000_000,
            }),
            ..ObserveConfig::default()
        },
        ..Options::default()
    };
    let server = serve(options);
    let addr = server.local_addr();
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut queries: Vec<Vec<u8>> = vec![
        RawQuery::new("web.skydns.test.", 1).opt(1232, 0, &[]).bytes(),
        RawQuery::new("WeB.skydns.TEST.", 28).bytes(),
        RawQuery::new("nope.skydns.test.", 1).opt(1232, 0, &[]).bytes(),
        RawQuery::new("example.org.", 1).bytes(),
    ];
    let mut round_trips = |rounds: u16| udp_rounds(&client, addr, &mut queries, rounds, |_| {});

    // Every buffer used once, and written.
    let warm = round_trips(400) as u64;
    let deadline = Instant::now() + Duration::from_secs(10);
    while frames.load(Ordering::Relaxed) < 2 * warm || server.stats().query_log_lines < warm {
        assert!(Instant::now() < deadline, "the warm-up's records were not all written");
        std::thread::sleep(Duration::from_millis(10));
    }

    assert_a_round_allocates_nothing(GLOBAL, 200, || round_trips(50));
    server.shutdown();
    let deadline = Instant::now() + Duration::from_secs(10);
    while frames.load(Ordering::Relaxed) < 2 * (warm + 600) {
        assert!(Instant::now() < deadline, "the measured records were not all written");
        std::thread::sleep(Duration::from_millis(10));
    }
    reader.join().unwrap();
}
