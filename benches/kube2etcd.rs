//! Scale of `skyline kube2etcd`: how long the real binary (release build) takes to mirror a
//! cluster of 10k Services and 100k endpoints from an API server speaking the list/watch protocol
//! into a real etcd, how many keys and transactions that takes, and, with a second skyline
//! serving that etcd, how long one endpoint change takes from the API server to the answer read
//! from etcd, and how many keys it writes. Not part of `cargo test`; run with
//!
//! ```text
//! cargo bench --bench kube2etcd                         # 10k services, 10 endpoints each
//! cargo bench --bench kube2etcd -- --services 1000 --endpoints 10 --changes 10
//! cargo bench --bench kube2etcd -- --txn-ops 100      # passed on as kube2etcd's --txn-ops
//! ```
//!
//! The mirror is complete, by the writer's metrics, once `skyline_kube2etcd_resyncs_total` is at
//! least 1, `skyline_kube2etcd_pending_keys` is 0 and `skyline_kube2etcd_leader` is 1; since etcd
//! starts empty, every wanted key is then written once, so the time until the keys written
//! (`_puts_total` + `_deletes_total`) reach `skyline_kube2etcd_keys` is measured too. Each change
//! moves the first endpoint of a headless service to a new address and is timed until its key
//! is in etcd (polled), then until the reader answers that address over UDP; the writer's
//! counters settle before the next change. Prints a Markdown table.

#[path = "cluster/mod.rs"]
mod cluster;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/etcd_harness/mod.rs"]
mod etcd_harness;
#[path = "../tests/kubernetes_api/mod.rs"]
mod kubernetes_api;

use cluster::{answers_with, endpoint_addr, load, memory, ns, slice_object, HEADLESS_EVERY, NAMESPACES};
use common::{http_get, metric_value, stop_child, Skyline};
use etcd_client::{Client, GetOptions};
use etcd_harness::{etcd_available, Etcd};
use kubernetes_api::FakeApi;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest wait for the first mirror, and for the reader's first answer.
const SYNC_LIMIT: Duration = Duration::from_secs(600);
/// Longest wait for one change to be answered.
const CHANGE_LIMIT: Duration = Duration::from_secs(60);
/// How long the writer's counters must stay still to count as settled.
const SETTLED: Duration = Duration::from_secs(3);
/// Failed etcd sessions before the first complete mirror that stop the benchmark.
const ETCD_FAILURES: f64 = 3.0;

struct Options {
    services: usize,
    endpoints: usize,
    changes: usize,
    /// kube2etcd's `--txn-ops`, when given; its default otherwise.
    txn_ops: Option<u32>,
}

fn options() -> Options {
    let mut o = Options {
        services: 10_000,
        endpoints: 10,
        changes: 20,
        txn_ops: None,
    };
    let args: Vec<String> = std::env::args().collect();
    for pair in args.windows(2) {
        let value = &pair[1];
        match pair[0].as_str() {
            "--services" => o.services = value.parse().expect("--services N"),
            "--endpoints" => o.endpoints = value.parse().expect("--endpoints N (per service)"),
            "--changes" => o.changes = value.parse().expect("--changes N"),
            "--txn-ops" => o.txn_ops = Some(value.parse().expect("--txn-ops N")),
            _ => {}
        }
    }
    assert!(
        o.services > 0 && o.endpoints > 0,
        "at least one service and one endpoint"
    );
    o
}

/// The name service `i`'s first endpoint answers at `address` with.
fn first_endpoint_name(i: usize, address: Ipv4Addr) -> String {
    if i.is_multiple_of(HEADLESS_EVERY) {
        format!("svc-{i}-0.svc-{i}.{}.svc.cluster.local.", ns(i))
    } else {
        format!(
            "{}.svc-{i}.{}.svc.cluster.local.",
            address.to_string().replace('.', "-"),
            ns(i)
        )
    }
}

/// The writer's counters, from one read of `/metrics`.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Metrics {
    leader: f64,
    resyncs: f64,
    pending: f64,
    keys: f64,
    puts: f64,
    deletes: f64,
    txns: f64,
    lag: f64,
    etcd_errors: f64,
}

impl Metrics {
    /// Complete by the metrics alone: leading, etcd read once, nothing pending.
    fn complete(&self) -> bool {
        self.leader == 1.0 && self.resyncs >= 1.0 && self.pending == 0.0
    }

    fn written(&self) -> f64 {
        self.puts + self.deletes
    }
}

/// A running `skyline kube2etcd`, killed on drop.
struct Writer {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    http: Option<SocketAddr>,
    _dir: tempfile::TempDir,
}

impl Writer {
    fn start(api: &FakeApi, etcd: &str, txn_ops: Option<u32>) -> Writer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = api.kubeconfig(dir.path());
        let mut child = Command::new(env!("CARGO_BIN_EXE_skyline"))
            .args(["kube2etcd", "--kubeconfig", kubeconfig.to_str().expect("a UTF-8 path")])
            .args(["--machines", etcd, "--identity", "bench"])
            .args(["--http-addr", "127.0.0.1:0"])
            .args(txn_ops.map(|n| format!("--txn-ops={n}")))
            .env("NO_COLOR", "1")
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the skyline binary runs");
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&log);
        let stderr = child.stderr.take().expect("stderr is piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        let mut writer = Writer {
            child,
            log,
            http: None,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while writer.http.is_none() {
            writer.http = writer
                .log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .find_map(|line| {
                    let at = line.find("http on http://")? + "http on http://".len();
                    line[at..].split_whitespace().next()?.parse().ok()
                });
            if writer.http.is_none() {
                assert!(
                    Instant::now() < deadline,
                    "kube2etcd did not report its HTTP address; log:\n{}",
                    writer.log_text()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        writer
    }

    fn metrics(&self) -> Option<Metrics> {
        let (status, body) = http_get(self.http?, "/metrics")?;
        if status != 200 {
            return None;
        }
        let get = |series: &str| metric_value(&body, series);
        Some(Metrics {
            leader: get("skyline_kube2etcd_leader")?,
            resyncs: get("skyline_kube2etcd_resyncs_total")?,
            pending: get("skyline_kube2etcd_pending_keys")?,
            keys: get("skyline_kube2etcd_keys")?,
            puts: get("skyline_kube2etcd_puts_total")?,
            deletes: get("skyline_kube2etcd_deletes_total")?,
            txns: get("skyline_kube2etcd_txns_total")?,
            lag: get("skyline_kube2etcd_lag_seconds")?,
            etcd_errors: get("skyline_kube2etcd_etcd_errors_total")?,
        })
    }

    /// Waits until the metrics say complete and the counters have not moved for [`SETTLED`].
    fn settled(&self) -> Metrics {
        let deadline = Instant::now() + SYNC_LIMIT;
        let mut last = Metrics::default();
        let mut since = Instant::now();
        loop {
            let m = self.metrics().unwrap_or_default();
            if m != last {
                (last, since) = (m, Instant::now());
            } else if m.complete() && since.elapsed() >= SETTLED {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "kube2etcd never settled: {m:?}; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last warning the writer logged.
    fn last_warning(&self) -> String {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.iter()
            .rev()
            .find(|l| l.contains("WARN"))
            .cloned()
            .unwrap_or_default()
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).join("\n")
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        stop_child(&mut self.child, "kube2etcd");
    }
}

/// A client of the etcd under test, for count-only reads.
struct EtcdReader {
    runtime: tokio::runtime::Runtime,
    client: Client,
}

impl EtcdReader {
    fn connect(endpoint: &str) -> EtcdReader {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let client = runtime
            .block_on(Client::connect([endpoint], None))
            .expect("connect to etcd");
        EtcdReader { runtime, client }
    }

    /// How many keys etcd holds at `key`, or under it with `prefix`.
    fn count(&self, key: &str, prefix: bool) -> i64 {
        let mut client = self.client.clone();
        let mut options = GetOptions::new().with_count_only();
        if prefix {
            options = options.with_prefix();
        }
        self.runtime
            .block_on(client.get(key, Some(options)))
            .expect("etcd counts the keys")
            .count()
    }
}

/// Asks `name` until it answers `address`; returns how long that took since `start`; fails
/// after `limit`, saying `what` was not served.
fn until_answered(
    addr: SocketAddr,
    name: &str,
    address: Ipv4Addr,
    start: Instant,
    limit: Duration,
    what: &str,
) -> Duration {
    while !answers_with(addr, name, address) {
        assert!(
            start.elapsed() < limit,
            "{what}: {name} did not answer {address} within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    start.elapsed()
}

/// The `p` quantile of sorted `samples` (nearest rank).
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn run(o: &Options) -> Vec<(String, String)> {
    let etcd = Etcd::start();
    let endpoint = etcd.endpoint();
    let api = FakeApi::start();
    load(&api, o.services, o.endpoints);
    let mut rows = Vec::new();

    // 1. From the writer's start to the first complete mirror.
    let started = Instant::now();
    let writer = Writer::start(&api, &endpoint, o.txn_ops);
    let deadline = started + SYNC_LIMIT;
    let mut complete: Option<(Duration, Metrics)> = None;
    let mut quiet = Instant::now();
    let mut last = Metrics::default();
    let (all_written, mirrored) = loop {
        let m = writer.metrics().unwrap_or_default();
        if m != last {
            (last, quiet) = (m, Instant::now());
        }
        if m.complete() {
            let at = started.elapsed();
            complete.get_or_insert((at, m));
            // A fresh etcd: every wanted key is put once. A writer that stops short of that
            // is taken as done once its counters stay still.
            if (m.keys > 0.0 && m.written() >= m.keys) || quiet.elapsed() >= SETTLED {
                break (at, m);
            }
        }
        assert!(
            complete.is_some() || m.etcd_errors < ETCD_FAILURES,
            "{} failed etcd sessions before the first complete mirror, after {}: {m:?}; the last:\n{}",
            m.etcd_errors,
            secs(started.elapsed()),
            writer.last_warning()
        );
        assert!(
            Instant::now() < deadline,
            "no complete mirror within {SYNC_LIMIT:?}: {m:?}; log:\n{}",
            writer.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let (complete_at, at_complete) = complete.expect("the loop ends on a complete mirror");
    let (rss, peak) = memory(writer.child.id());
    let etcd_reader = EtcdReader::connect(&endpoint);
    let held = etcd_reader.count("/skydns/", true);
    rows.push((
        "keys wanted (skyline_kube2etcd_keys)".into(),
        format!("{}", mirrored.keys),
    ));
    rows.push((
        "start to complete by the metrics (resyncs ≥ 1, pending 0, leader 1)".into(),
        format!("{} (keys written then: {})", secs(complete_at), at_complete.written()),
    ));
    rows.push((
        "start to every wanted key written (puts + deletes = keys)".into(),
        if mirrored.written() >= mirrored.keys {
            secs(all_written)
        } else {
            format!("not reached: {} of {} keys written", mirrored.written(), mirrored.keys)
        },
    ));
    rows.push((
        "keys written by the first mirror (puts + deletes) / transactions".into(),
        format!("{} / {}", mirrored.written(), mirrored.txns),
    ));
    rows.push(("keys under /skydns/ in etcd after the mirror".into(), held.to_string()));
    rows.push((
        "kube2etcd resident / peak memory after the mirror".into(),
        format!("{rss:.1} / {peak:.1} MiB"),
    ));

    // 2. A skyline reading that etcd, and endpoint changes timed to its answers.
    let reader_started = Instant::now();
    let reader = Skyline::start_with(
        &["--machines", &endpoint, "--domain", "cluster.local.", "--no-rec"],
        &[],
    );
    let last_service = o.services - 1;
    let probe = endpoint_addr(last_service, 0, o.endpoints);
    let reader_sync = until_answered(
        reader.addr,
        &first_endpoint_name(last_service, probe),
        probe,
        reader_started,
        SYNC_LIMIT,
        "the reader's first sync",
    );
    rows.push(("reader skyline start to answering from etcd".into(), secs(reader_sync)));

    let before = writer.settled();
    let headless_services = o.services.div_ceil(HEADLESS_EVERY);
    let mut samples = Vec::with_capacity(o.changes);
    let mut in_etcd = Vec::with_capacity(o.changes);
    let mut lags = Vec::with_capacity(o.changes);
    for c in 0..o.changes {
        let i = ((c * 7919 + 1) % headless_services) * HEADLESS_EVERY;
        let moved = Ipv4Addr::from(0x0b00_0000 + c as u32);
        let name = first_endpoint_name(i, moved);
        let key = format!(
            "/skydns/local/cluster/svc/{}/svc-{i}/svc-{i}-0/_ip-{}",
            ns(i),
            moved.to_string().replace('.', "-")
        );
        let start = Instant::now();
        api.apply(slice_object(i, o.endpoints, Some(moved)));
        while etcd_reader.count(&key, false) == 0 {
            assert!(start.elapsed() < CHANGE_LIMIT, "change {c}: {key} not in etcd");
            std::thread::sleep(Duration::from_millis(1));
        }
        in_etcd.push(start.elapsed());
        samples.push(until_answered(
            reader.addr,
            &name,
            moved,
            start,
            CHANGE_LIMIT,
            &format!("change {c}"),
        ));
        // Let the change's last keys land before the next one, and read the writer's own lag.
        let m = writer.settled();
        lags.push(Duration::from_secs_f64(m.lag));
    }
    let after = writer.settled();
    samples.sort();
    in_etcd.sort();
    lags.sort();
    let rounds = o.changes.max(1) as f64;
    rows.push((
        format!(
            "one endpoint change to the reader's answer, p50 / p99 / max of {}",
            o.changes
        ),
        format!(
            "{} / {} / {}",
            ms(percentile(&samples, 0.5)),
            ms(percentile(&samples, 0.99)),
            ms(samples.last().copied().unwrap_or_default())
        ),
    ));
    rows.push((
        format!(
            "one endpoint change to its key in etcd, p50 / p99 / max of {}",
            o.changes
        ),
        format!(
            "{} / {} / {}",
            ms(percentile(&in_etcd, 0.5)),
            ms(percentile(&in_etcd, 0.99)),
            ms(in_etcd.last().copied().unwrap_or_default())
        ),
    ));
    rows.push((
        "writer lag per change (skyline_kube2etcd_lag_seconds), p50 / max".into(),
        format!(
            "{} / {}",
            ms(percentile(&lags, 0.5)),
            ms(lags.last().copied().unwrap_or_default())
        ),
    ));
    rows.push((
        "keys written per change (puts + deletes) / transactions per change".into(),
        format!(
            "{:.1} / {:.1}",
            (after.written() - before.written()) / rounds,
            (after.txns - before.txns) / rounds
        ),
    ));
    rows
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!(
            "the kube2etcd benchmarks run with `cargo bench --bench kube2etcd`; nothing to do under `cargo test`"
        );
        return;
    }
    if !etcd_available() {
        panic!("the kube2etcd benchmarks need etcd: scripts/setup.sh bench installs it");
    }
    let o = options();
    let rows = run(&o);
    let txn_ops = o.txn_ops.map_or("default".to_owned(), |n| n.to_string());
    println!(
        "## kube2etcd: {} services, {} endpoints ({} per service, 1 in {} headless), {} namespaces, --txn-ops {txn_ops}\n",
        o.services,
        o.services * o.endpoints,
        o.endpoints,
        HEADLESS_EVERY,
        NAMESPACES
    );
    println!("| measure | value |\n|---|---|");
    for (measure, value) in rows {
        println!("| {measure} | {value} |");
    }
}
