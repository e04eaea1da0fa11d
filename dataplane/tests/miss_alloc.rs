//! A cache miss allocates no more than its cache entry: a counting global allocator
//! (stats_alloc) watches the forwarder's sans-I/O machine put questions in flight, read their
//! upstream replies and hand the clients back, once its queues, index and waiter lists have
//! grown to the load. `cache_alloc.rs` watches cache hits, which allocate nothing at all.

use skyline_dataplane::cache::{Cache, CacheConfig, Key};
use skyline_dataplane::forward::machine::{Action, Done, Entropy, Kind, Machine, TryId};
use skyline_dataplane::forward::{ForwardConfig, Route, Transport};
use skyline_dataplane::wire::{LowerName, Name};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Questions in flight at once, as a busy worker has.
const AT_ONCE: u32 = 20;

fn key(i: u32) -> Key {
    let name = Name::from_dotted(&format!("host{i}.example.org.")).unwrap();
    Key::new(&LowerName::from_wire(name.wire()).unwrap(), 1, 1, false, false)
}

/// An upstream reply, in a buffer of its own so that the test allocates nothing meanwhile.
type Reply = (TryId, [u8; 128], usize);

/// Writes the upstream's answer to `query` into `out`: the question echoed, one A record
/// pointing at it. Returns its length.
fn answer(query: &[u8], out: &mut [u8; 128]) -> usize {
    let question_end = 12 + query[12..].iter().position(|&b| b == 0).unwrap() + 1 + 4;
    out[..question_end].copy_from_slice(&query[..question_end]);
    out[2] = 0x81;
    out[3] = 0x80;
    out[6..12].copy_from_slice(&[0, 1, 0, 0, 0, 0]);
    let record = [0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 7];
    out[question_end..question_end + record.len()].copy_from_slice(&record);
    question_end + record.len()
}

/// One round, as a worker's turn: `AT_ONCE` new questions submitted, each answered, their
/// clients handed back and their waiter lists returned, the timers of ended questions
/// dropped. Returns how many questions ended with an answer.
fn round(
    machine: &mut Machine<u32>,
    cache: &Cache,
    keys: &[Key],
    now: Instant,
    replies: &mut Vec<Reply>,
    done: &mut Vec<Done<u32>>,
) -> usize {
    for (client, key) in keys.iter().enumerate() {
        machine
            .submit(
                key,
                Route::DEFAULT,
                Some(client as u32),
                Kind::Clients { stale: false },
                now,
            )
            .unwrap();
    }
    while let Some(action) = machine.poll_action() {
        if let Action::Transmit(t) = action {
            let mut reply = (t.id, [0; 128], 0);
            reply.2 = answer(t.query(), &mut reply.1);
            replies.push(reply);
        }
    }
    for (id, reply, len) in replies.drain(..) {
        machine.on_reply(id, &reply[..len], cache, now);
    }
    while machine.poll_action().is_some() {}
    machine.drain_done(done);
    let answered = done.iter().filter(|d| d.result.is_ok()).count();
    for finished in done.drain(..) {
        machine.recycle(finished.waiters);
    }
    machine.poll_timeout();
    answered
}

/// Over UDP, then over persistent connections (force_tcp), one after the other: the
/// allocator counts every thread, so two such tests must not run at once.
#[test]
fn a_miss_allocates_its_cache_entry_and_nothing_else() {
    misses_allocate_their_cache_entries_and_nothing_else(Transport::PreferUdp);
    misses_allocate_their_cache_entries_and_nothing_else(Transport::ForceTcp);
}

fn misses_allocate_their_cache_entries_and_nothing_else(transport: Transport) {
    let upstream: SocketAddr = "127.0.0.1:53".parse().unwrap();
    let config = ForwardConfig {
        upstreams: vec![upstream],
        transport,
        ..ForwardConfig::default()
    };
    let start = Instant::now();
    let mut machine: Machine<u32> = Machine::new(&[&[upstream]], &config, &config.health(start), Entropy::seeded(7));
    let cache = Cache::new(CacheConfig::default());
    let (warm_up, rounds) = (10, 50);
    let keys: Vec<Vec<Key>> = (0..warm_up + rounds)
        .map(|r| (0..AT_ONCE).map(|i| key(r * AT_ONCE + i)).collect())
        .collect();
    let mut replies = Vec::with_capacity(AT_ONCE as usize);
    let mut done = Vec::with_capacity(AT_ONCE as usize);
    // The first rounds grow the machine's queues, index and waiter lists to the load (the
    // index once more when the slots its removals left are first reclaimed).
    for keys in &keys[..warm_up as usize] {
        assert_eq!(
            round(&mut machine, &cache, keys, start, &mut replies, &mut done),
            AT_ONCE as usize
        );
    }
    // The allocator counts every thread: let the test harness's main thread, which starts
    // waiting for this test while it runs, be done with its own allocations first.
    std::thread::sleep(Duration::from_millis(100));
    let mut answered = 0;
    let region = Region::new(GLOBAL);
    for (r, keys) in keys[warm_up as usize..].iter().enumerate() {
        let now = start + Duration::from_millis(r as u64 + 1);
        answered += round(&mut machine, &cache, keys, now, &mut replies, &mut done);
    }
    let change = region.change();
    let misses = (rounds * AT_ONCE) as usize;
    assert_eq!(answered, misses);
    // An entry is its records' bytes and their offsets: two allocations, freed when the
    // question's result is dropped here.
    assert_eq!(
        (change.allocations, change.reallocations),
        (2 * misses, 0),
        "{change:?} for {misses} misses"
    );
}
