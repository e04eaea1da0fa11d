//! The machine driven with simulated time: no socket, no sleep. [`Sim`] plays the socket
//! layer, keeping the tries whose transmit went out until the machine closes them.

use super::*;
use crate::cache::CacheConfig;
use crate::forward::upstream::MAX_FAILS;
use crate::forward::PROBE_INTERVAL;
use crate::stats::Totals;
use crate::wire::name::skip_name;
use crate::wire::types::{class, rtype};
use crate::wire::{LowerName, Name};

const A: &str = "192.0.2.1:53";
const B: &str = "192.0.2.2:53";
const S: &str = "198.51.100.1:53";
const T: &str = "198.51.100.2:53";

fn addr(a: &str) -> SocketAddr {
    a.parse().unwrap()
}

fn question(i: u32) -> Key {
    let name = Name::from_dotted(&format!("q{i}.example.org.")).unwrap();
    Key::new(
        &LowerName::from_wire(name.wire()).unwrap(),
        rtype::A,
        class::IN,
        false,
        false,
    )
}

/// The reply to `query` with one A record living `ttl` seconds.
fn answer(query: &[u8], ttl: u32) -> Vec<u8> {
    let mut reply = query.to_vec();
    reply[2] |= 0x80;
    reply[3] = 0x80;
    reply[6..8].copy_from_slice(&1u16.to_be_bytes());
    reply[10..12].copy_from_slice(&0u16.to_be_bytes());
    reply.truncate(skip_name(&reply, 12).unwrap() + 4);
    reply.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
    reply.extend_from_slice(&ttl.to_be_bytes());
    reply.extend_from_slice(&[0, 4, 192, 0, 2, 1]);
    reply
}

/// The reply to `query` with TC set.
fn truncated(query: &[u8]) -> Vec<u8> {
    let mut reply = answer(query, 60);
    reply[2] |= 0x02;
    reply
}

/// A SERVFAIL for `query`.
fn servfail(query: &[u8]) -> Vec<u8> {
    let mut reply = answer(query, 60);
    reply[3] |= 2;
    reply
}

/// The socket layer and the clock of a simulation.
struct Sim {
    machine: Machine<u32>,
    cache: Cache,
    config: ForwardConfig,
    health: SharedHealth,
    start: Instant,
    now: Instant,
    /// Tries sent and not closed yet.
    open: Vec<Transmit>,
    /// Tries sent since the last [`Sim::sent`].
    sent: Vec<Transmit>,
    done: Vec<Done<u32>>,
}

impl Sim {
    /// A machine over `groups` with a forwarding timeout of `timeout`, not rotating.
    fn new(groups: &[&[&str]], timeout: Duration) -> Sim {
        Sim::with(groups, |c| c.timeout = timeout)
    }

    fn with(groups: &[&[&str]], tweak: impl FnOnce(&mut ForwardConfig)) -> Sim {
        let start = Instant::now();
        let groups: Vec<Vec<SocketAddr>> = groups.iter().map(|g| g.iter().map(|a| addr(a)).collect()).collect();
        let groups: Vec<&[SocketAddr]> = groups.iter().map(Vec::as_slice).collect();
        let mut config = ForwardConfig {
            rotate: false,
            ..ForwardConfig::default()
        };
        tweak(&mut config);
        let health = SharedHealth::new(groups.iter().map(|g| g.len()), start);
        Sim {
            machine: Machine::new(&groups, &config, &health, Entropy::seeded(1)),
            cache: Cache::new(CacheConfig::default()),
            config,
            health,
            start,
            now: start,
            open: Vec::new(),
            sent: Vec::new(),
            done: Vec::new(),
        }
    }

    /// Carries out the machine's actions: every close must be of a try that is open.
    fn step(&mut self) {
        while let Some(action) = self.machine.poll_action() {
            match action {
                Action::Transmit(t) => {
                    // A try sent again on a new connection keeps its ID.
                    if let Some(at) = self.open.iter().position(|o| o.id == t.id) {
                        self.open.remove(at);
                    }
                    assert!(
                        self.open.iter().all(|o| o.id.index() != t.id.index()),
                        "{:?} takes the index of a try still open",
                        t.id
                    );
                    self.open.push(t.clone());
                    self.sent.push(t);
                }
                Action::Close(id) => {
                    let at = self.open.iter().position(|o| o.id == id);
                    let at = at.unwrap_or_else(|| panic!("{id:?} closed, but it is not open"));
                    self.open.remove(at);
                }
            }
        }
        if self.machine.in_flight() == 0 {
            assert!(self.open.is_empty(), "tries left open: {:?}", self.open);
        }
        self.machine.drain_done(&mut self.done);
    }

    fn ms(&self, ms: u64) -> Instant {
        self.start + Duration::from_millis(ms)
    }

    /// Lets time pass to `ms` after the start.
    fn at(&mut self, ms: u64) {
        self.now = self.ms(ms);
        self.machine.handle_timeout(&self.cache, self.now);
        self.step();
    }

    fn submit(&mut self, i: u32, client: u32) -> Result<(), Failure> {
        self.ask(i, Route::DEFAULT, Some(client), Kind::Clients { stale: false })
    }

    fn ask(&mut self, i: u32, route: Route, client: Option<u32>, kind: Kind) -> Result<(), Failure> {
        let submitted = self.machine.submit(&question(i), route, client, kind, self.now);
        self.step();
        submitted
    }

    /// The tries sent since the last call.
    fn sent(&mut self) -> Vec<Transmit> {
        std::mem::take(&mut self.sent)
    }

    /// The one try sent since the last call.
    fn one_sent(&mut self) -> Transmit {
        match self.sent().as_slice() {
            [t] => t.clone(),
            other => panic!("one try expected, {} sent: {other:?}", other.len()),
        }
    }

    fn reply(&mut self, to: &Transmit, msg: &[u8]) {
        self.machine.on_reply(to.id, msg, &self.cache, self.now);
        self.step();
    }

    fn done(&mut self) -> Vec<Done<u32>> {
        std::mem::take(&mut self.done)
    }

    fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        self.machine.stats.add_to(&mut totals);
        totals
    }

    fn is_open(&self, t: &Transmit) -> bool {
        self.open.iter().any(|o| o.id == t.id)
    }
}

fn ids(t: &Transmit) -> u16 {
    u16::from_be_bytes([t.query()[0], t.query()[1]])
}

#[test]
fn a_try_that_times_out_moves_to_the_next_upstream_and_a_late_answer_still_counts() {
    let mut sim = Sim::new(&[&[A, B]], Duration::from_millis(1500));
    sim.submit(1, 7).unwrap();
    let first = sim.one_sent();
    assert_eq!((first.upstream, first.protocol), (addr(A), Protocol::Udp));
    assert_eq!(
        sim.machine.poll_timeout(),
        Some(sim.ms(500)),
        "the retry timeout before any RTT is known"
    );
    sim.at(499);
    assert!(sim.sent().is_empty());
    sim.at(500);
    let second = sim.one_sent();
    assert_eq!(second.upstream, addr(B), "the next upstream");
    assert_ne!(ids(&first), ids(&second), "each try has an ID of its own");
    assert!(sim.is_open(&first), "a timed-out try listens on for a late answer");
    assert_eq!(sim.totals().upstream_timeouts, 1);

    sim.at(600);
    sim.reply(&first, &answer(first.query(), 60));
    let done = sim.done();
    assert!(matches!(done.as_slice(), [Done { result: Ok(_), store: true, waiters, .. }] if waiters == &[7]));
    assert!(sim.open.is_empty(), "both tries closed with the question");
}

#[test]
fn the_timers_of_an_answered_question_wake_nobody() {
    let mut sim = Sim::new(&[&[A, B]], Duration::from_millis(1500));
    sim.submit(1, 7).unwrap();
    let first = sim.one_sent();
    sim.submit(2, 8).unwrap();
    let second = sim.one_sent();
    sim.at(10);
    sim.reply(&first, &answer(first.query(), 60));
    assert_eq!(
        sim.machine.poll_timeout(),
        Some(sim.ms(500)),
        "the retry timeout of the question still in flight"
    );
    sim.reply(&second, &answer(second.query(), 60));
    assert_eq!(sim.done().len(), 2);
    assert_eq!(
        sim.machine.poll_timeout(),
        None,
        "no try and no question left to time out"
    );
}

#[test]
fn a_question_no_upstream_answers_fails_within_its_budget() {
    let mut sim = Sim::new(&[&[A, B]], Duration::from_millis(1500));
    sim.submit(1, 7).unwrap();
    let mut tries = sim.sent();
    let mut ms = 0;
    while sim.done.is_empty() {
        let due = sim.machine.poll_timeout().expect("a question in flight has a deadline");
        assert!(due <= sim.ms(1500), "woken past the budget");
        ms = due.duration_since(sim.start).as_millis() as u64;
        sim.at(ms);
        tries.extend(sim.sent());
    }
    assert_eq!(ms, 1500);
    let upstreams: Vec<SocketAddr> = tries.iter().map(|t| t.upstream).collect();
    assert_eq!(
        upstreams,
        [addr(A), addr(B)],
        "the retry's timeout (1 s) reaches the budget"
    );
    let done = sim.done();
    assert!(matches!(
        done.as_slice(),
        [Done {
            result: Err(Failure::Unreachable),
            store: false,
            ..
        }]
    ));
    assert_eq!(sim.totals().forward_failures, 1);
}

#[test]
fn a_client_with_a_stale_answer_gets_it_after_one_failed_try_while_the_question_refreshes_the_cache() {
    let mut sim = Sim::new(&[&[A, B]], Duration::from_millis(1500));
    let mut query = [0u8; MAX_QUERY_LEN];
    let len = write_query(&mut query, 9, &question(1), false, false);
    let Verdict::Answer(entry) = read_reply(&answer(&query[..len], 1), 9, &question(1), false, &sim.cache, sim.now)
    else {
        panic!("a one-second answer");
    };
    sim.cache.insert(question(1).bytes(), entry);
    sim.at(5_000);
    sim.ask(1, Route::DEFAULT, Some(7), Kind::Clients { stale: true })
        .unwrap();
    sim.sent();
    sim.at(5_500);
    let retry = sim.one_sent();
    let done = sim.done();
    assert!(
        matches!(done.as_slice(), [Done { result: Err(Failure::Unreachable), store: false, waiters, .. }] if waiters == &[7]),
        "served stale after the first try failed: {done:?}"
    );
    assert_eq!(
        sim.ask(1, Route::DEFAULT, Some(8), Kind::Clients { stale: true }),
        Err(Failure::Unreachable),
        "a stale client does not join a question that already failed a try"
    );
    sim.reply(&retry, &answer(retry.query(), 60));
    let done = sim.done();
    assert!(
        matches!(done.as_slice(), [Done { result: Ok(_), store: true, waiters, .. }] if waiters.is_empty()),
        "the answer refreshes the cache: {done:?}"
    );
}

#[test]
fn a_truncated_answer_is_asked_again_over_tcp_of_the_same_upstream() {
    let mut sim = Sim::new(&[&[A, B]], Duration::from_millis(1500));
    sim.submit(1, 7).unwrap();
    let udp = sim.one_sent();
    sim.at(10);
    sim.reply(&udp, &truncated(udp.query()));
    let tcp = sim.one_sent();
    assert!(!sim.is_open(&udp), "the UDP try is closed");
    assert_eq!((tcp.upstream, tcp.protocol), (addr(A), Protocol::Tcp));
    assert_eq!(tcp.id.index(), udp.id.index(), "the TCP try takes the UDP try's place");
    assert_ne!(ids(&tcp), ids(&udp), "with a new ID");
    assert_eq!(sim.totals().upstream_tcp_retries, 1);
    sim.reply(&udp, &answer(udp.query(), 60));
    assert!(sim.done().is_empty(), "the UDP try is over");
    sim.at(20);
    sim.reply(&tcp, &truncated(tcp.query()));
    assert!(
        matches!(sim.done().as_slice(), [Done { result: Ok(_), .. }]),
        "TC means nothing over TCP"
    );
}

#[test]
fn a_tcp_retry_that_times_out_or_cannot_connect_moves_to_the_next_upstream() {
    let mut sim = Sim::new(&[&[A, B]], Duration::from_millis(1500));
    sim.submit(1, 7).unwrap();
    let udp = sim.one_sent();
    sim.at(10);
    sim.reply(&udp, &truncated(udp.query()));
    let tcp = sim.one_sent();
    // The measured 10 ms puts the retry timeout at its floor, 150 ms, doubled for a second
    // try: below the TCP floor.
    let timeout = 10 + MIN_TCP_TIMEOUT.as_millis() as u64;
    sim.at(timeout - 1);
    assert!(sim.is_open(&tcp) && sim.sent().is_empty());
    sim.at(timeout);
    assert!(!sim.is_open(&tcp), "a TCP try that timed out is closed");
    assert_eq!(sim.one_sent().upstream, addr(B));

    sim.submit(2, 8).unwrap();
    let udp = sim.one_sent();
    sim.reply(&udp, &truncated(udp.query()));
    let tcp = sim.one_sent();
    let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    sim.machine.on_send_error(tcp.id, SendError::Upstream(refused), sim.now);
    sim.open.retain(|o| o.id != tcp.id);
    sim.step();
    let next = sim.one_sent();
    assert_eq!((next.upstream, next.protocol), (addr(B), Protocol::Udp));
}

#[test]
fn a_refused_try_moves_on_at_once_and_a_host_out_of_sockets_fails_the_question_fast() {
    let mut sim = Sim::new(&[&[A, B]], Duration::from_millis(1500));
    sim.submit(1, 7).unwrap();
    let first = sim.one_sent();
    sim.machine.on_receive_error(first.id, &sim.cache, sim.now);
    sim.step();
    assert!(!sim.is_open(&first));
    assert_eq!(sim.one_sent().upstream, addr(B), "refused: the next upstream, at once");

    sim.submit(2, 8).unwrap();
    let unsent = sim.one_sent();
    sim.open.retain(|o| o.id != unsent.id);
    let unreachable = io::Error::from(io::ErrorKind::HostUnreachable);
    sim.machine
        .on_send_error(unsent.id, SendError::Upstream(unreachable), sim.now);
    sim.step();
    assert_eq!(
        sim.one_sent().upstream,
        addr(B),
        "unreachable: the next upstream, at once"
    );

    sim.submit(3, 9).unwrap();
    let unsent = sim.one_sent();
    sim.open.retain(|o| o.id != unsent.id);
    let exhausted = io::Error::from_raw_os_error(libc::EMFILE);
    sim.machine
        .on_send_error(unsent.id, SendError::Local(exhausted), sim.now);
    sim.step();
    assert!(sim.sent().is_empty(), "another upstream would fail alike");
    let done = sim.done();
    assert!(matches!(done.as_slice(), [Done { result: Err(Failure::Busy), waiters, .. }] if waiters == &[9]));
    assert_eq!(sim.totals().upstream_errors, 3);
}

#[test]
fn an_answer_that_fails_moves_to_the_next_upstream_and_only_failures_fail_as_bad_answers() {
    let mut sim = Sim::new(&[&[A, B]], Duration::from_millis(1500));
    sim.submit(1, 7).unwrap();
    for upstream in [A, B, A] {
        let t = sim.one_sent();
        assert_eq!(t.upstream, addr(upstream));
        sim.reply(&t, &servfail(t.query()));
        assert!(!sim.is_open(&t));
    }
    let done = sim.done();
    assert!(matches!(
        done.as_slice(),
        [Done {
            result: Err(Failure::BadAnswers),
            ..
        }]
    ));
    assert_eq!(sim.totals().upstream_bad_answers, 3);
}

#[test]
fn replies_that_are_not_the_one_awaited_are_counted_and_the_try_listens_on() {
    let mut sim = Sim::new(&[&[A]], Duration::from_millis(1500));
    sim.submit(1, 7).unwrap();
    let t = sim.one_sent();
    let mut wrong_id = answer(t.query(), 60);
    wrong_id[1] ^= 1;
    sim.reply(&t, &wrong_id);
    let mut query = [0u8; MAX_QUERY_LEN];
    let len = write_query(&mut query, ids(&t), &question(2), false, false);
    sim.reply(&t, &answer(&query[..len], 60));
    sim.reply(&t, t.query());
    assert!(sim.done().is_empty() && sim.is_open(&t));
    assert_eq!(sim.totals().upstream_mismatched_id, 2, "a wrong ID, a query");
    assert_eq!(sim.totals().upstream_mismatched_question, 1);
    sim.reply(&t, &answer(t.query(), 60));
    assert!(matches!(sim.done().as_slice(), [Done { result: Ok(_), .. }]));
}

#[test]
fn identical_questions_share_one_try_and_every_client_gets_the_answer() {
    let mut sim = Sim::new(&[&[A]], Duration::from_millis(1500));
    sim.submit(1, 1).unwrap();
    let t = sim.one_sent();
    for client in 2..=MAX_WAITERS as u32 {
        sim.submit(1, client).unwrap();
    }
    assert!(sim.sent().is_empty(), "merged, not asked again");
    assert_eq!(
        sim.submit(1, 999),
        Err(Failure::Busy),
        "a question's waiters are bounded"
    );
    sim.ask(1, Route::DEFAULT, None, Kind::Refresh).unwrap();
    assert_eq!(sim.totals().forward_merged, MAX_WAITERS as u64 - 1);
    sim.reply(&t, &answer(t.query(), 60));
    let done = sim.done();
    let [Done {
        waiters, result: Ok(_), ..
    }] = done.as_slice()
    else {
        panic!("one answer: {done:?}");
    };
    assert_eq!(*waiters, (1..=MAX_WAITERS as u32).collect::<Vec<_>>());
}

/// Questions are found for merging by a hash of their key: two different questions whose keys
/// share it (forced here) must each go upstream and each get its own answer.
#[test]
fn questions_whose_keys_share_a_hash_are_not_merged() {
    let mut sim = Sim::new(&[&[A]], Duration::from_millis(1500));
    sim.submit(1, 1).unwrap();
    let first = sim.one_sent();
    let slot = *sim.machine.by_key.values().next().expect("question 1 is indexed");
    let hash = sim.machine.by_key.hasher().hash_one(question(2).bytes());
    sim.machine.by_key.insert(hash, slot);
    sim.submit(2, 2).unwrap();
    let second = sim.one_sent();
    assert_eq!(sim.totals().forward_merged, 0);
    sim.reply(&second, &answer(second.query(), 60));
    sim.reply(&first, &answer(first.query(), 60));
    let done = sim.done();
    let answered: Vec<(Vec<u8>, Vec<u32>)> = done
        .iter()
        .map(|d| (d.key.bytes().to_vec(), d.waiters.clone()))
        .collect();
    assert_eq!(
        answered,
        vec![
            (question(2).bytes().to_vec(), vec![2]),
            (question(1).bytes().to_vec(), vec![1])
        ]
    );
    assert!(done.iter().all(|d| d.result.is_ok()));
}

#[test]
fn questions_beyond_the_in_flight_bound_fail_fast() {
    let mut sim = Sim::with(&[&[A]], |c| c.max_in_flight = 2);
    sim.submit(1, 1).unwrap();
    sim.submit(2, 2).unwrap();
    assert_eq!(sim.submit(3, 3), Err(Failure::Busy));
    assert_eq!(sim.totals().forward_busy, 1);
    let tries = sim.sent();
    sim.reply(&tries[0], &answer(tries[0].query(), 60));
    sim.submit(3, 3).unwrap();
    assert_eq!(sim.machine.in_flight(), 2);
}

#[test]
fn with_rotation_successive_questions_start_at_successive_upstreams() {
    let mut sim = Sim::with(&[&[A, B]], |c| c.rotate = true);
    for i in 0..4 {
        sim.submit(i, i).unwrap();
    }
    let firsts: Vec<SocketAddr> = sim.sent().iter().map(|t| t.upstream).collect();
    assert_eq!(firsts, [addr(B), addr(A), addr(B), addr(A)]);
}

/// The bug: with a forwarding timeout below the first retry timeout (500 ms before the
/// round-trip time is known), every try's timer was cut to the question's budget, the
/// budget's timer fired first and ended the question, and the try's timeout was never
/// counted: a dead upstream stayed up, and every client waited the whole timeout for it.
#[test]
fn an_upstream_silent_for_whole_budgets_shorter_than_its_retry_timeout_goes_down_and_a_probe_brings_it_back() {
    let mut sim = Sim::new(&[&[A]], Duration::from_millis(300));
    for i in 0..MAX_FAILS {
        assert!(!sim.machine.down()[0], "down after {i} questions");
        sim.submit(i, i).unwrap();
        sim.at(300 * u64::from(i + 1));
    }
    assert!(
        sim.machine.down()[0],
        "{MAX_FAILS} questions unanswered within their budget"
    );
    assert_eq!(
        sim.submit(99, 99),
        Err(Failure::Unreachable),
        "the next client fails fast"
    );
    assert_eq!(sim.totals().upstreams_marked_down, 1);

    assert_eq!(sim.done().len(), MAX_FAILS as usize);
    let sent = sim.sent();
    let probe = sent.last().unwrap().clone();
    assert_eq!(probe.upstream, addr(A));
    assert_eq!(
        &probe.query()[12..17],
        &[0, 0, 2, 0, 1],
        "a probe asks . NS, as soon as the upstream is down"
    );
    assert_eq!(sim.totals().upstream_probes, 1);
    let went_down = 300 * u64::from(MAX_FAILS);
    let next = went_down + PROBE_INTERVAL.as_millis() as u64;
    sim.at(next - 1);
    assert!(sim.sent().is_empty(), "one probe per interval");
    sim.at(next);
    assert!(!sim.is_open(&probe), "a probe's try times out as any other");
    let probe = sim.one_sent();
    sim.reply(&probe, &servfail(probe.query()));
    assert!(!sim.machine.down()[0], "any answer brings it back");
    assert!(sim.done().is_empty(), "a probe has no clients");
    sim.submit(100, 100).unwrap();
    assert_eq!(sim.one_sent().upstream, addr(A));
}

/// Two questions whose first tries timed out at 500 ms are on their retries (1 s timeout)
/// when a third question's try fails 600 ms into the run of failures: the upstream is down,
/// and the two end then, not at 1.5 s.
#[test]
fn questions_waiting_on_an_upstream_end_when_it_goes_down() {
    let mut sim = Sim::new(&[&[A]], Duration::from_secs(5));
    sim.submit(0, 0).unwrap();
    sim.submit(1, 1).unwrap();
    sim.at(500);
    assert_eq!(sim.machine.in_flight(), 2, "both retried");
    sim.at(600);
    sim.submit(2, 2).unwrap();
    sim.at(1100);
    assert!(sim.machine.down()[0], "three failures over 600 ms");
    let failed: Vec<u32> = sim.done().into_iter().flat_map(|d| d.waiters).collect();
    assert_eq!(failed, [0, 1, 2], "no client waits on a down upstream");
}

/// Health is shared: once one worker has found the upstream dead, another worker's clients
/// waiting on a retry are answered at its next turn, not at that retry's timeout.
#[test]
fn questions_of_another_worker_end_when_one_finds_the_upstream_dead() {
    let mut one = Sim::new(&[&[A]], Duration::from_secs(5));
    let mut two: Machine<u32> = Machine::new(&[&[addr(A)]], &one.config, &one.health, Entropy::seeded(2));
    one.submit(0, 0).unwrap();
    one.submit(1, 1).unwrap();
    two.submit(
        &question(2),
        Route::DEFAULT,
        Some(2),
        Kind::Clients { stale: false },
        one.now,
    )
    .unwrap();
    one.at(500);
    two.handle_timeout(&one.cache, one.ms(500));
    one.at(600);
    one.submit(3, 3).unwrap();
    one.at(1100);
    assert!(one.machine.down()[0], "found dead by the first worker");
    two.handle_timeout(&one.cache, one.ms(1100));
    let mut done = Vec::new();
    two.drain_done(&mut done);
    assert!(
        matches!(
            done.as_slice(),
            [Done {
                result: Err(Failure::Unreachable),
                ..
            }]
        ),
        "the second worker's retry, due at 1.5 s, is not waited for"
    );
}

/// With a 600 ms budget the first try times out on its own at 500 ms and the retry has 100
/// ms left: too little for a busy upstream, so only the first counts.
#[test]
fn a_retry_cut_short_by_the_budget_is_not_held_against_its_upstream() {
    let mut sim = Sim::new(&[&[A]], Duration::from_millis(600));
    for i in 0..MAX_FAILS - 1 {
        let asked = 600 * u64::from(i);
        sim.at(asked);
        sim.submit(i, i).unwrap();
        sim.at(asked + 500);
        sim.at(asked + 600);
    }
    assert!(!sim.machine.down()[0], "one failure per question, not two");
}

#[test]
fn a_reload_keeps_questions_on_unchanged_routes_asks_changed_ones_again_and_ends_removed_ones() {
    let mut sim = Sim::new(&[&[A], &[S]], Duration::from_millis(1500));
    sim.submit(1, 1).unwrap();
    let kept = sim.one_sent();
    let stub = crate::forward::Routes::new(0, true, vec![Name::from_dotted("example.org.").unwrap()])
        .route(&LowerName::from_wire(question(2).name_wire()).unwrap())
        .unwrap();
    sim.ask(2, stub, Some(2), Kind::Clients { stale: false }).unwrap();
    let asked = sim.one_sent();
    assert_eq!(asked.upstream, addr(S));
    assert!(
        asked.query().ends_with(&[0xFD, 0xF3, 0, 1, 1]),
        "a stub zone's server gets the loop guard"
    );

    sim.at(200);
    let config = sim.config.clone();
    let health = SharedHealth::new([1, 1], sim.start);
    sim.machine
        .replace(&[&[addr(A)], &[addr(T)]], &config, &health, sim.now);
    sim.step();
    let again = sim.one_sent();
    assert_eq!(
        again.upstream,
        addr(T),
        "a changed route's question is asked of its new server"
    );
    assert!(sim.is_open(&kept) && !sim.is_open(&asked));
    sim.reply(&asked, &answer(asked.query(), 60));
    assert!(sim.done().is_empty(), "the old server's try is over");

    sim.machine.replace(&[&[addr(A)]], &config, &health, sim.now);
    sim.step();
    let done = sim.done();
    assert!(
        matches!(done.as_slice(), [Done { result: Err(Failure::Unreachable), waiters, .. }] if waiters == &[2]),
        "a removed route's question ends unanswered: {done:?}"
    );
    assert!(sim.sent().is_empty());
    sim.reply(&kept, &answer(kept.query(), 60));
    let done = sim.done();
    assert!(
        matches!(done.as_slice(), [Done { result: Ok(_), waiters, .. }] if waiters == &[1]),
        "an unchanged route's question goes on"
    );
}

#[test]
fn a_question_asked_again_after_a_reload_keeps_its_deadline() {
    let mut sim = Sim::new(&[&[A]], Duration::from_millis(1500));
    sim.submit(1, 1).unwrap();
    sim.at(1200);
    sim.sent();
    let config = sim.config.clone();
    sim.machine
        .replace(&[&[addr(B)]], &config, &SharedHealth::new([1], sim.start), sim.now);
    sim.step();
    assert_eq!(sim.one_sent().upstream, addr(B));
    assert_eq!(
        sim.machine.poll_timeout(),
        Some(sim.ms(1500)),
        "the first deadline holds"
    );
    sim.at(1500);
    assert!(matches!(
        sim.done().as_slice(),
        [Done {
            result: Err(Failure::Unreachable),
            ..
        }]
    ));
}

fn force_tcp(config: &mut ForwardConfig) {
    config.transport = Transport::ForceTcp;
}

#[test]
fn force_tcp_sends_every_try_on_a_persistent_connection_and_takes_a_truncated_reply_as_the_answer() {
    let mut sim = Sim::with(&[&[A, B]], force_tcp);
    sim.submit(1, 7).unwrap();
    let first = sim.one_sent();
    assert_eq!((first.upstream, first.protocol), (addr(A), Protocol::PooledTcp));
    assert!(first.tls.is_none());
    assert!(
        first.query().ends_with(&[0, 11, 0, 0]),
        "edns-tcp-keepalive on a persistent connection"
    );
    assert_eq!(
        sim.machine.poll_timeout(),
        Some(sim.ms(500)),
        "a try over a stream waits at least the TCP floor"
    );
    sim.reply(&first, &truncated(first.query()));
    assert!(sim.sent().is_empty(), "no retry: TCP has nothing more to give");
    assert!(matches!(sim.done().as_slice(), [Done { result: Ok(_), .. }]));
    assert_eq!(sim.totals().upstream_tcp_retries, 0);
}

#[test]
fn each_set_of_upstreams_keeps_its_own_transport() {
    let mut sim = Sim::with(&[&[A], &[S]], |c| {
        c.stub_zones = vec![crate::forward::StubZone {
            zone: Name::from_dotted("example.org.").unwrap(),
            servers: vec![addr(S)],
            options: Default::default(),
            transport: Transport::ForceTcp,
        }];
    });
    let stub = crate::forward::Routes::new(0, true, vec![Name::from_dotted("example.org.").unwrap()])
        .route(&LowerName::from_wire(question(2).name_wire()).unwrap())
        .unwrap();
    sim.ask(2, stub, Some(2), Kind::Clients { stale: false }).unwrap();
    assert_eq!(sim.one_sent().protocol, Protocol::PooledTcp, "the stub zone forces TCP");
    sim.submit(1, 1).unwrap();
    let udp = sim.one_sent();
    assert_eq!(udp.protocol, Protocol::Udp, "the default resolvers prefer UDP");
    assert!(
        !udp.query().ends_with(&[0, 11, 0, 0]),
        "never edns-tcp-keepalive over UDP"
    );
}

#[test]
fn a_try_whose_connection_the_upstream_closed_is_sent_again_once_then_held_against_it() {
    let mut sim = Sim::with(&[&[A, B]], force_tcp);
    sim.submit(1, 7).unwrap();
    let first = sim.one_sent();
    sim.machine.on_connection_lost(first.id, &sim.cache, sim.now);
    sim.step();
    let again = sim.one_sent();
    assert_eq!(
        (again.id, again.upstream, again.query()),
        (first.id, addr(A), first.query()),
        "the same query, under the same ID, to the same upstream"
    );
    assert_eq!((sim.totals().upstream_errors, sim.totals().upstream_resent), (0, 1));
    sim.machine.on_connection_lost(again.id, &sim.cache, sim.now);
    sim.step();
    let next = sim.one_sent();
    assert_eq!(next.upstream, addr(B), "a second loss fails over");
    assert_ne!(next.id, first.id);
    assert_eq!(sim.totals().upstream_errors, 1);
    sim.reply(&next, &answer(next.query(), 60));
    assert!(matches!(sim.done().as_slice(), [Done { result: Ok(_), .. }]));
}

#[test]
fn a_connection_refused_counts_against_the_upstream_and_moves_on() {
    let mut sim = Sim::with(&[&[A, B]], force_tcp);
    sim.submit(1, 7).unwrap();
    let first = sim.one_sent();
    sim.machine.on_send_error(
        first.id,
        SendError::Upstream(io::ErrorKind::ConnectionRefused.into()),
        sim.now,
    );
    sim.step();
    assert_eq!(sim.one_sent().upstream, addr(B));
    assert_eq!(sim.totals().upstream_errors, 1);
}

#[test]
fn a_reload_that_changes_a_routes_transport_asks_its_questions_again() {
    let mut sim = Sim::with(&[&[A]], |_| {});
    sim.submit(1, 1).unwrap();
    let udp = sim.one_sent();
    let config = ForwardConfig {
        transport: Transport::ForceTcp,
        ..sim.config.clone()
    };
    let health = sim.health.clone();
    sim.machine.replace(&[&[addr(A)]], &config, &health, sim.now);
    sim.step();
    let tcp = sim.one_sent();
    assert_eq!(tcp.protocol, Protocol::PooledTcp);
    assert!(!sim.is_open(&udp));
}
