//! The hosts names laid under a snapshot answer without allocating: their answers, the NODATA of
//! the other type, their PTRs, the SERVFAIL of a missing name, and the names of the snapshot
//! below them, under a counting global allocator (stats_alloc).

mod common;

use common::{snapshot, RawQuery};
use skyline_dataplane::snapshot::hosts_file::{layer, Config, Entry};
use skyline_dataplane::snapshot::lay_under;
use skyline_dataplane::wire::Name;
use skyline_dataplane::{answer, Context, Outcome, Transport};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

#[test]
fn hosts_answers_allocate_nothing() {
    let entries = [Entry {
        address: "192.168.1.10".parse().unwrap(),
        names: vec![Name::from_dotted("node-a.").unwrap()],
    }];
    let snap = lay_under(&snapshot(), &layer(&Config::default(), &entries), 2);
    let queries: Vec<Vec<u8>> = vec![
        RawQuery::new("node-a.", 1).bytes(),
        RawQuery::new("NODE-A.", 28).opt(1232, 0, &[]).bytes(),
        RawQuery::new("10.1.168.192.in-addr.arpa.", 12).bytes(),
        RawQuery::new("node-b.", 1).bytes(),
        RawQuery::new("web.skydns.test.", 1).bytes(),
    ];
    let mut out = vec![0u8; 65535];
    common::assert_a_round_allocates_nothing(GLOBAL, 5000, || {
        let mut answered = 0;
        for _ in 0..1000 {
            for q in &queries {
                if let Outcome::Reply(_) = answer(q, &snap, &Context::new(Transport::Udp), &mut out) {
                    answered += 1;
                }
            }
        }
        answered
    });
}
