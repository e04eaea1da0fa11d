//! Rewriting a question allocates nothing (docs/rewrite.md, "Cost"): with rules configured, a
//! name no rule matches and a name an exact, prefix, suffix or substring rule rewrites (its
//! answer turned back with `answer auto`) are answered without an allocation, as a template that
//! only denies is; a counting global allocator (stats_alloc) watches whole rounds of them.

mod common;

use common::{snapshot, RawQuery};
use skyline_dataplane::rewrite::{Plugins, PluginsConfig};
use skyline_dataplane::{answer, Context, Outcome, Transport};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn rewritten_and_passed_questions_allocate_nothing() {
    let snap = snapshot();
    let plugins = Plugins::new(PluginsConfig {
        rewrite: vec![
            "continue name exact www.alias.test. web.skydns.test. answer auto".into(),
            "name suffix .legacy.test. .skydns.test. answer auto".into(),
            "name prefix db. web. answer auto".into(),
            "name substring web-old web answer auto".into(),
            r"name regex ^never\.(.*)$ {1}".into(),
        ],
        templates: vec![r"ANY ANY blocked.test { match .*\.blocked\.test\.$; rcode NXDOMAIN }".into()],
        ..PluginsConfig::default()
    })
    .unwrap();
    let queries: Vec<Vec<u8>> = vec![
        RawQuery::new("www.alias.test.", 1).bytes(),
        RawQuery::new("WeB.Legacy.test.", 1).opt(1232, 0, &[]).bytes(),
        RawQuery::new("db.skydns.test.", 1).bytes(),
        RawQuery::new("web-old.skydns.test.", 1).bytes(),
        RawQuery::new("web.skydns.test.", 1).bytes(),
        RawQuery::new("ads.blocked.test.", 1).bytes(),
    ];
    let mut out = vec![0u8; 65535];
    common::assert_a_round_allocates_nothing(GLOBAL, 6000, || {
        let mut answered = 0;
        for rotation in 0..1000u32 {
            for q in &queries {
                let ctx = Context {
                    rotation,
                    ..Context::new(Transport::Udp).with_plugins(&plugins)
                };
                if let Outcome::Reply(_) = answer(q, &snap, &ctx, &mut out) {
                    answered += 1;
                }
            }
        }
        answered
    });
}
