//! Cache hits allocate nothing, like authoritative answers: a counting global allocator
//! (stats_alloc) watches the sans-I/O answer path serving hits (fresh, stale, negative, with and
//! without EDNS, mixed case). `cache_udp_alloc.rs` watches a running worker do the same.

mod common;

use common::{snapshot, RawQuery};
use skyline_dataplane::cache::{Cache, CacheConfig, Entry, Key};
use skyline_dataplane::forward::Routes;
use skyline_dataplane::forward::{answer_recursive, Recursion, Resolution};
use skyline_dataplane::wire::{LowerName, Name};
use skyline_dataplane::{Context, Outcome, Transport};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// A reply for `name` with one A record of `ttl` (NXDOMAIN with an SOA when `ttl` is 0).
fn reply_bytes(id: [u8; 2], question: &[u8], ttl: u32) -> Vec<u8> {
    let negative = ttl == 0;
    let mut m = vec![
        id[0],
        id[1],
        0x81,
        if negative { 0x83 } else { 0x80 },
        0,
        1,
        0,
        u8::from(!negative),
        0,
        u8::from(negative),
        0,
        0,
    ];
    m.extend_from_slice(question);
    if negative {
        m.extend_from_slice(&[0xC0, 12, 0, 6, 0, 1, 0, 0, 0, 60, 0, 24, 0xC0, 12, 0xC0, 12]);
        for v in [1u32, 2, 3, 4, 60] {
            m.extend_from_slice(&v.to_be_bytes());
        }
    } else {
        m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
        m.extend_from_slice(&ttl.to_be_bytes());
        m.extend_from_slice(&[0, 4, 192, 0, 2, 7]);
    }
    m
}

fn question(name: &str) -> Vec<u8> {
    let mut q = Name::from_dotted(name).unwrap().wire().to_vec();
    q.extend_from_slice(&[0, 1, 0, 1]);
    q
}

#[test]
fn cache_hits_allocate_nothing_on_the_answer_path() {
    let t0 = Instant::now();
    let snap = snapshot();
    let mut cache = Cache::new(CacheConfig::default());
    for (name, ttl) in [
        ("www.example.org.", 300),
        ("old.example.org.", 5),
        ("gone.example.org.", 0),
    ] {
        let lower = LowerName::from_wire(Name::from_dotted(name).unwrap().wire()).unwrap();
        let q = question(name);
        let reply = reply_bytes([0, 1], &q, ttl);
        let entry = Entry::from_reply(&reply, 12 + q.len(), cache.caps_for(lower.wire()), t0).unwrap();
        for dnssec_ok in [false, true] {
            let entry = Entry::from_reply(&reply, 12 + q.len(), cache.caps_for(lower.wire()), t0).unwrap();
            cache.insert(Key::new(&lower, 1, 1, dnssec_ok, false).bytes(), entry);
        }
        drop(entry);
    }
    let routes = Routes::new(2, true, Vec::new());
    let queries: Vec<Vec<u8>> = vec![
        RawQuery::new("www.example.org.", 1).bytes(),
        RawQuery::new("WwW.Example.ORG.", 1).opt(1232, 0, &[]).bytes(),
        RawQuery::new("gone.example.org.", 1).bytes(),
        RawQuery::new("old.example.org.", 1).opt(1232, 0, &[]).bytes(),
        RawQuery::new("web.skydns.test.", 1).bytes(),
    ];
    let down = [true];
    let now = t0 + Duration::from_secs(30);
    let mut out = vec![0u8; 65535];
    let mut qname = LowerName::default();
    let mut answered = 0;
    // The first stale hit starts a recheck; hits after it within the interval do not.
    for q in &queries {
        let mut rec = Recursion {
            cache: &mut cache,
            routes: &routes,
            down: &down,
            allowed: true,
            prohibited: false,
            now,
            resolved: None,
        };
        answer_recursive(q, &snap, &Context::new(Transport::Udp), &mut rec, &mut qname, &mut out);
    }
    // The allocator counts every thread: let the test harness's main thread, which starts
    // waiting for this test while it runs, be done with its own allocations first.
    std::thread::sleep(Duration::from_millis(100));
    let region = Region::new(GLOBAL);
    for rotation in 0..1000u32 {
        for q in &queries {
            let mut rec = Recursion {
                cache: &mut cache,
                routes: &routes,
                down: &down,
                allowed: true,
                prohibited: false,
                now,
                resolved: None,
            };
            let ctx = Context {
                rotation,
                ..Context::new(Transport::Udp)
            };
            match answer_recursive(q, &snap, &ctx, &mut rec, &mut qname, &mut out) {
                Resolution::Done(Outcome::Reply(_))
                | Resolution::Cached {
                    outcome: Outcome::Reply(_),
                    ..
                } => answered += 1,
                other => panic!("{other:?}"),
            }
        }
    }
    let change = region.change();
    assert_eq!(answered, 5000);
    assert_eq!(
        change.allocations + change.reallocations,
        0,
        "{change:?} for {answered} answers"
    );
}
