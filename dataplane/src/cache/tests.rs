use super::*;

fn lower(name: &str) -> LowerName {
    LowerName::from_wire(Name::from_dotted(name).unwrap().wire()).unwrap()
}

fn key(name: &str) -> Key {
    Key::new(&lower(name), 1, 1, false, false)
}

/// An upstream reply for `name` A with one record of `ttl`, and `pad` bytes of TXT-free filler
/// in an extra A RRset so that entries can be made large.
fn entry(name: &str, ttl: u32, now: Instant) -> Entry {
    let wire = Name::from_dotted(name).unwrap();
    let mut m = vec![0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0];
    m.extend_from_slice(wire.wire());
    m.extend_from_slice(&[0, 1, 0, 1]);
    let body_start = m.len();
    m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
    m.extend_from_slice(&ttl.to_be_bytes());
    m.extend_from_slice(&[0, 4, 192, 0, 2, 1]);
    Entry::from_reply(
        &m,
        body_start,
        TtlCaps {
            min: 0,
            max: 86400,
            negative_max: 3600,
        },
        now,
    )
    .unwrap()
}

fn small_cache(max_bytes: usize) -> Cache {
    Cache::new(CacheConfig {
        max_bytes,
        ..CacheConfig::default()
    })
}

#[test]
fn keys_fold_case_and_keep_dnssec_answers_apart() {
    assert_eq!(key("WWW.Example.").bytes(), key("www.example.").bytes());
    let plain = Key::new(&lower("www.example."), 1, 1, false, false);
    let dnssec = Key::new(&lower("www.example."), 1, 1, true, false);
    let unchecked = Key::new(&lower("www.example."), 1, 1, false, true);
    assert_ne!(plain.bytes(), dnssec.bytes());
    assert_ne!(plain.bytes(), unchecked.bytes());
    assert!(dnssec.dnssec_ok() && !dnssec.checking_disabled());
    assert_eq!((plain.qtype(), plain.qclass()), (1, 1));
    assert_eq!(plain.name_wire(), lower("www.example.").wire());
}

#[test]
fn an_entry_is_fresh_then_stale_then_gone() {
    let t0 = Instant::now();
    let mut cache = Cache::new(CacheConfig {
        stale_for: 100,
        ..CacheConfig::default()
    });
    let k = key("a.example.");
    assert!(matches!(cache.lookup(k.key_ref(), t0, false), Lookup::Miss));
    assert!(cache.insert(k.bytes(), entry("a.example.", 60, t0)).stored);
    match cache.lookup(k.key_ref(), t0 + Duration::from_secs(20), false) {
        Lookup::Fresh(hit) => assert_eq!(hit.age, Age::Fresh(20)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        cache.lookup(k.key_ref(), t0 + Duration::from_secs(61), false),
        Lookup::Stale(Hit { age: Age::Stale, .. })
    ));
    assert!(matches!(
        cache.lookup(k.key_ref(), t0 + Duration::from_secs(161), false),
        Lookup::Miss
    ));
    assert!(
        matches!(cache.lookup(k.key_ref(), t0, false), Lookup::Miss),
        "an entry past its stale window stays gone"
    );
    cache.insert(k.bytes(), entry("a.example.", 60, t0));
    assert!(
        matches!(cache.lookup(k.key_ref(), t0, false), Lookup::Fresh(_)),
        "until stored again"
    );
}

#[test]
fn zero_ttl_answers_are_not_stored() {
    let mut cache = Cache::new(CacheConfig::default());
    let k = key("z.example.");
    assert!(!cache.insert(k.bytes(), entry("z.example.", 0, Instant::now())).stored);
    assert!(cache.is_empty());
}

#[test]
fn popular_entries_are_prefetched_once_near_their_end() {
    let t0 = Instant::now();
    let mut cache = Cache::new(CacheConfig::default());
    let k = key("p.example.");
    cache.insert(k.bytes(), entry("p.example.", 100, t0));
    let refresh = |cache: &mut Cache, secs| match cache.lookup(k.key_ref(), t0 + Duration::from_secs(secs), false) {
        Lookup::Fresh(hit) => hit.refresh,
        other => panic!("{other:?}"),
    };
    assert!(!refresh(&mut cache, 10));
    assert!(!refresh(&mut cache, 50), "not yet near the end");
    assert!(refresh(&mut cache, 91));
    assert!(!refresh(&mut cache, 91), "one refresh per interval");
    assert!(refresh(&mut cache, 93));
}

#[test]
fn stale_entries_are_rechecked_once_per_interval_while_upstreams_are_down() {
    let t0 = Instant::now();
    let mut cache = Cache::new(CacheConfig::default());
    let k = key("s.example.");
    cache.insert(k.bytes(), entry("s.example.", 5, t0));
    let at = |ms| t0 + Duration::from_millis(ms);
    let refresh = |cache: &mut Cache, ms, down| match cache.lookup(k.key_ref(), at(ms), down) {
        Lookup::Stale(hit) => hit.refresh,
        other => panic!("{other:?}"),
    };
    assert!(
        !refresh(&mut cache, 6_000, false),
        "upstreams up: the caller forwards instead"
    );
    assert!(refresh(&mut cache, 6_100, true));
    assert!(!refresh(&mut cache, 6_900, true));
    assert!(refresh(&mut cache, 7_200, true));
}

#[test]
fn negative_caps_follow_the_most_specific_zone() {
    let cache = Cache::new(CacheConfig {
        negative_max_ttl: 900,
        negative_zone_caps: vec![
            (Name::from_dotted("cluster.local.").unwrap(), 5),
            (Name::from_dotted("svc.cluster.local.").unwrap(), 2),
        ],
        ..CacheConfig::default()
    });
    assert_eq!(cache.caps_for(lower("example.org.").wire()).negative_max, 900);
    assert_eq!(cache.caps_for(lower("a.b.cluster.local.").wire()).negative_max, 5);
    assert_eq!(cache.caps_for(lower("x.svc.cluster.local.").wire()).negative_max, 2);
}

#[test]
fn success_caps_follow_the_most_specific_zone_and_zero_keeps_answers_out() {
    let cache = Cache::new(CacheConfig {
        min_ttl: 5,
        max_ttl: 3600,
        success_zone_caps: vec![
            (Name::from_dotted("cluster.local.").unwrap(), 30),
            (Name::from_dotted("nocache.cluster.local.").unwrap(), 0),
        ],
        ..CacheConfig::default()
    });
    let caps = |name: &str| {
        let c = cache.caps_for(lower(name).wire());
        (c.min, c.max)
    };
    assert_eq!(caps("example.org."), (5, 3600));
    assert_eq!(caps("a.cluster.local."), (5, 30));
    assert_eq!(
        caps("a.nocache.cluster.local."),
        (0, 0),
        "the minimum does not raise a zero cap"
    );
}

#[test]
fn keep_ttl_serves_the_ttls_as_received() {
    let t0 = Instant::now();
    let mut cache = Cache::new(CacheConfig {
        keep_ttl: true,
        ..CacheConfig::default()
    });
    let k = key("a.example.");
    cache.insert(k.bytes(), entry("a.example.", 60, t0));
    match cache.lookup(k.key_ref(), t0 + Duration::from_secs(20), false) {
        Lookup::Fresh(hit) => assert_eq!(hit.age, Age::Fresh(0)),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(
            cache.lookup(k.key_ref(), t0 + Duration::from_secs(61), false),
            Lookup::Stale(_)
        ),
        "it still expires"
    );
}

#[test]
fn the_memory_bound_holds() {
    let t0 = Instant::now();
    let mut cache = small_cache(20_000);
    let mut evicted = 0;
    for i in 0..1_000 {
        let name = format!("n{i}.example.");
        evicted += cache.insert(key(&name).bytes(), entry(&name, 300, t0)).evicted;
        assert!(cache.bytes() <= 20_000);
    }
    assert!(evicted > 0);
    assert_eq!(cache.len() as u64 + evicted, 1_000);
}

#[test]
fn a_scan_does_not_push_out_popular_names() {
    let t0 = Instant::now();
    let mut cache = small_cache(40_000);
    let popular: Vec<String> = (0..40).map(|i| format!("hot{i}.example.")).collect();
    for name in &popular {
        cache.insert(key(name).bytes(), entry(name, 3600, t0));
    }
    for round in 0..20 {
        for name in &popular {
            cache.lookup(key(name).key_ref(), t0, false);
        }
        for i in 0..200 {
            let name = format!("scan{round}-{i}.example.");
            cache.insert(key(&name).bytes(), entry(&name, 3600, t0));
        }
    }
    let kept = popular
        .iter()
        .filter(|name| matches!(cache.lookup(key(name).key_ref(), t0, false), Lookup::Fresh(_)))
        .count();
    assert_eq!(kept, popular.len(), "every popular name survived 4000 one-off names");
}

#[test]
fn a_name_evicted_and_asked_again_returns_to_main() {
    let t0 = Instant::now();
    let mut cache = small_cache(6_000);
    for i in 0..40 {
        let name = format!("g{i}.example.");
        cache.insert(key(&name).bytes(), entry(&name, 300, t0));
    }
    let first = key("g0.example.");
    assert!(matches!(cache.lookup(first.key_ref(), t0, false), Lookup::Miss));
    cache.insert(first.bytes(), entry("g0.example.", 300, t0));
    let slot = cache.index.get(cache.hash(first.key_ref())).unwrap();
    assert!(cache.slots[slot as usize].as_ref().unwrap().in_main);
}

#[test]
fn ages_in_clock_nanoseconds_read_as_instants_subtracted() {
    let epoch = Instant::now() + Duration::from_secs(5);
    let mut clock = Clock::new(epoch);
    let offsets_ms = [
        0u64, 1, 999, 1000, 1001, 1500, 4999, 5000, 5001, 7250, 60_000, 86_400_123,
    ];
    for &a in &offsets_ms {
        for &b in &offsets_ms {
            // Both before and after the epoch: entries may be stored before the cache exists.
            let (earlier, later) = (
                epoch - Duration::from_secs(5) + Duration::from_millis(a),
                epoch + Duration::from_millis(b),
            );
            for (x, y) in [
                (earlier, later),
                (later, earlier),
                (earlier, earlier + Duration::from_millis(b)),
            ] {
                assert_eq!(
                    seconds_between(clock.nanos(x), clock.now(y)),
                    y.saturating_duration_since(x).as_secs(),
                    "{a} ms, {b} ms"
                );
            }
        }
    }
}

/// A memo as `forward/replay.rs` makes one; only its stamp matters here.
fn memo(stamp: u64) -> Memo {
    Memo {
        stamp,
        asked: Asked::new(&[1, 0, 0, 1, 0, 0, 0, 0, 0, 0], None),
        header: [0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0],
        opt_record: [0; PLAIN_OPT_LEN],
        reply: crate::reply::Reply::new(64, 0, 30, 1, 0),
    }
}

#[test]
fn every_memo_is_found_through_the_filter_s_rebuilds_and_goes_with_its_entry() {
    let t0 = Instant::now();
    let mut cache = Cache::new(CacheConfig::default());
    let names: Vec<String> = (0..3000).map(|i| format!("h{i}.memo.example.")).collect();
    for (i, name) in names.iter().enumerate() {
        cache.insert(key(name).bytes(), entry(name, 300, t0));
        cache.remember(key(name).key_ref(), memo(i as u64));
    }
    assert!(cache.has_memos());
    assert_eq!(cache.memos, names.len());
    for (i, name) in names.iter().enumerate() {
        assert!(
            cache.may_replay(key(name).key_ref().name_hash),
            "{name}: the filter lost it"
        );
        let found = cache.replay(key(name).key_ref(), t0, |m| m.stamp == i as u64);
        assert!(found.is_some(), "{name}");
    }
    let unknown = (0..3000)
        .filter(|i| cache.may_replay(key(&format!("u{i}.other.example.")).key_ref().name_hash))
        .count();
    assert!(
        unknown < 3000 / 4,
        "{unknown} of 3000 names without a memo pass the filter"
    );
    // A new answer for a name takes its memo with the old one.
    cache.insert(key(&names[0]).bytes(), entry(&names[0], 300, t0));
    assert!(cache.replay(key(&names[0]).key_ref(), t0, |_| true).is_none());
    assert_eq!(cache.memos, names.len() - 1);
    cache.reconfigure(CacheConfig {
        max_bytes: 0,
        ..CacheConfig::default()
    });
    assert!(!cache.has_memos(), "evicted entries take theirs");
}

#[test]
fn memos_count_against_the_memory_bound() {
    let t0 = Instant::now();
    let mut cache = small_cache(64 * 1024);
    let names: Vec<String> = (0..2000).map(|i| format!("h{i}.bound.example.")).collect();
    for name in &names {
        cache.insert(key(name).bytes(), entry(name, 300, t0));
    }
    let (held, bytes) = (cache.len(), cache.bytes());
    assert!(
        bytes <= 64 * 1024 && bytes + 1024 > 64 * 1024,
        "filled to the bound: {bytes}"
    );
    let last = names.last().unwrap();
    cache.remember(key(last).key_ref(), memo(1));
    assert_eq!(cache.take_memo_evictions(), 1, "one entry makes room for the memo");
    assert!(cache.bytes() <= 64 * 1024 && cache.bytes() + 2 * MEMO_COST > bytes);
    for name in &names {
        cache.remember(key(name).key_ref(), memo(1));
    }
    assert!(cache.bytes() <= 64 * 1024, "{} over the bound", cache.bytes());
    let evicted = cache.take_memo_evictions();
    assert!(
        evicted > 0 && cache.len() < held,
        "{evicted} evicted, {} of {held} held",
        cache.len()
    );
    assert_eq!(cache.take_memo_evictions(), 0, "counted once");
}
