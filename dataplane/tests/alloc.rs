//! The answer path allocates nothing: a counting global allocator (stats_alloc) watches whole batches of
//! authoritative queries (positive, negative, truncated, EDNS, mixed case).

mod common;

use common::{snapshot, RawQuery};
use skyline_dataplane::{answer, Context, Outcome, Transport};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn authoritative_answers_allocate_nothing() {
    let snap = snapshot();
    let queries: Vec<Vec<u8>> = vec![
        RawQuery::new("web.skydns.test.", 1).bytes(),
        RawQuery::new("WeB.SKYDNS.test.", 1).opt(1232, 0, &[]).bytes(),
        RawQuery::new("nope.skydns.test.", 1).bytes(),
        RawQuery::new("web.skydns.test.", 16).bytes(),
        RawQuery::new("big.skydns.test.", 1).bytes(),
        RawQuery::new("srv.skydns.test.", 33).opt(4096, 0, &[]).bytes(),
        RawQuery::new("skydns.test.", 6).bytes(),
        RawQuery::new("web.skydns.test.", 255).bytes(),
        RawQuery::new("example.org.", 1).bytes(),
    ];
    let mut out = vec![0u8; 65535];
    common::assert_a_round_allocates_nothing(GLOBAL, 9000, || {
        let mut answered = 0;
        for rotation in 0..1000u32 {
            for q in &queries {
                let ctx = Context {
                    rotation,
                    ..Context::new(Transport::Udp)
                };
                if let Outcome::Reply(_) = answer(q, &snap, &ctx, &mut out) {
                    answered += 1;
                }
            }
        }
        answered
    });
}
