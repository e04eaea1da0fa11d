//! The answer path allocates nothing: a counting global allocator (stats_alloc) watches whole batches of
//! authoritative queries (positive, negative, truncated, EDNS, mixed case).

mod common;

use common::{snapshot, RawQuery};
use skyline_dataplane::{answer, Context, Outcome, Transport};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
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
    // The allocator counts every thread, and the test harness's main thread allocates while it
    // starts waiting for this test: on a loaded machine that fell inside the measurement (4
    // allocations in some runs). An allocation of the answer path shows in every round of
    // 9,000 answers; the harness's, in one at most.
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let mut answered = 0;
        let region = Region::new(GLOBAL);
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
        let change = region.change();
        assert_eq!(answered, 9000);
        rounds.push(change);
    }
    assert!(
        rounds.iter().any(|c| c.allocations + c.reallocations == 0),
        "every round of 9,000 answers allocated: {rounds:?}"
    );
}
