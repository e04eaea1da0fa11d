//! Reload under load: the records file is rewritten 100 times while clients query without pause.
//! No query may fail, and no answer may mix records of two generations.

mod common;

use common::{query, udp_query, Skyline};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, RecordType};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HOSTS: u8 = 4;

fn generation(g: u32) -> String {
    let mut r = serde_json::json!({"/skydns/config": {"domain": "skydns.test."}});
    for i in 0..HOSTS {
        r[format!("/skydns/test/skydns/gen/h{i}")] =
            serde_json::json!({"host": format!("10.{}.{}.{i}", g / 256, g % 256)});
    }
    r.to_string()
}

/// The generation an answer belongs to, asserting all its records agree.
fn generation_of(reply: &hickory_proto::op::Message) -> u32 {
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert_eq!(reply.answers().len(), HOSTS as usize, "a whole generation per answer");
    let gens: Vec<u32> = reply
        .answers()
        .iter()
        .map(|r| match r.data().unwrap() {
            RData::A(a) => {
                let o = a.0.octets();
                o[1] as u32 * 256 + o[2] as u32
            }
            other => panic!("A expected, got {other:?}"),
        })
        .collect();
    assert!(
        gens.windows(2).all(|w| w[0] == w[1]),
        "answer mixes generations: {gens:?}"
    );
    gens[0]
}

#[test]
fn rewriting_the_records_file_under_load_never_fails_or_mixes_generations() {
    let server = Skyline::start(&generation(0), &[], &[]);
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let (stop, answered) = (Arc::clone(&stop), Arc::clone(&answered));
            std::thread::spawn(move || {
                let mut last = 0;
                while !stop.load(Ordering::Relaxed) {
                    let g = generation_of(&udp_query(addr, &query("gen.skydns.test.", RecordType::A, Some(1232))));
                    assert!(g >= last, "generation went back from {last} to {g}");
                    last = g;
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for g in 1..=100 {
        server.rewrite(&generation(g));
        server.hup();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let seen = generation_of(&udp_query(addr, &query("gen.skydns.test.", RecordType::A, Some(1232))));
            if seen == g {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "generation {g} not served within 5 s (still {seen})"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().expect("a client saw a failed or mixed answer");
    }
    assert!(answered.load(Ordering::Relaxed) > 100);
}

#[test]
fn an_invalid_file_keeps_the_old_snapshot() {
    let server = Skyline::start(&generation(7), &[], &[]);
    server.rewrite("{ this is not json");
    server.hup();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(generation_of(&server.udp("gen.skydns.test.", RecordType::A)), 7);
    server.rewrite(&generation(8));
    server.hup();
    let deadline = Instant::now() + Duration::from_secs(5);
    while generation_of(&server.udp("gen.skydns.test.", RecordType::A)) != 8 {
        assert!(Instant::now() < deadline, "a valid file after an invalid one must load");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_changed_file_is_picked_up_without_a_signal() {
    let server = Skyline::start(&generation(1), &[], &[]);
    server.rewrite(&generation(2));
    let deadline = Instant::now() + Duration::from_secs(5);
    while generation_of(&server.udp("gen.skydns.test.", RecordType::A)) != 2 {
        assert!(Instant::now() < deadline, "file change not noticed within 5 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The fixture sends SIGHUP from the test process itself: run where `PATH` holds no program
/// at all (a minimal system has no `kill`), an unchanged file is still reloaded on the signal.
#[test]
fn a_signal_reload_needs_no_program_on_path() {
    if !common::rerun_with_empty_path("a_signal_reload_needs_no_program_on_path") {
        return;
    }
    let server = Skyline::start(&generation(5), &[], &[]);
    let loaded = server.log_count("records file loaded");
    assert!(loaded >= 1, "the start's load is logged:\n{}", server.log_text());
    server.hup();
    common::eventually(Duration::from_secs(5), "SIGHUP reloads the unchanged file", || {
        server.log_count("records file loaded") > loaded
    });
    assert_eq!(generation_of(&server.udp("gen.skydns.test.", RecordType::A)), 5);
}
