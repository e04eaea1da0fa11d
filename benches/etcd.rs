//! Benchmarks of the etcd source, against a real etcd and the real `skyline` binary (release
//! build), measured over DNS: how long an etcd put takes to change the answer, how long the
//! initial sync takes and how much memory it holds at 10k, 100k and 1M keys, and what one change
//! costs at 100k keys. Not part of `cargo test`; run with
//!
//! ```text
//! cargo bench --bench etcd                       # everything, defaults below
//! cargo bench --bench etcd -- --keys 10000,100000 --puts 1000 --large-puts 20
//! cargo bench --bench etcd -- --keys 100000 --sync-only   # initial sync and memory only
//! ```
//!
//! Prints a Markdown table (the numbers in `tuning.md`, section "etcd source").

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/etcd_harness/mod.rs"]
mod etcd_harness;

use common::{query, Skyline};
use etcd_client::{Client, Txn, TxnOp};
use etcd_harness::{etcd_available, Etcd, EtcdClient};
use hickory_proto::op::Message;
use hickory_proto::rr::{RData, RecordType};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

/// etcd's default limit of operations in one transaction.
const TXN_OPS: usize = 128;
/// Transactions in flight while loading keys.
const LOADERS: usize = 8;
/// Directories the keys spread over (services of 1k, 100 or 1 instances at 1M, 100k, 10k... keys
/// per 1,000 services).
const SERVICES: usize = 1000;
/// The key every latency probe rewrites.
const PROBE_KEY: &str = "/skydns/test/skydns/bench/probe";
const PROBE_NAME: &str = "probe.bench.skydns.test.";
/// The settings object: the domain of the keys above.
const CONFIG: &str = r#"{"domain":"skydns.test."}"#;

struct Options {
    keys: Vec<usize>,
    puts: usize,
    large_puts: usize,
    large_base: usize,
    /// Skip the put latencies: only the initial sync and the memory it holds.
    sync_only: bool,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let mut o = Options {
        keys: vec![10_000, 100_000, 1_000_000],
        puts: 1000,
        large_puts: 1000,
        large_base: 100_000,
        sync_only: args.iter().any(|a| a == "--sync-only"),
    };
    for pair in args.windows(2) {
        let value = &pair[1];
        match pair[0].as_str() {
            "--keys" => o.keys = value.split(',').map(|k| k.parse().expect("--keys N,N,...")).collect(),
            "--puts" => o.puts = value.parse().expect("--puts N"),
            "--large-puts" => o.large_puts = value.parse().expect("--large-puts N"),
            "--large-base" => o.large_base = value.parse().expect("--large-base N"),
            _ => {}
        }
    }
    o
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("the etcd benchmarks run with `cargo bench --bench etcd`; nothing to do under `cargo test`");
        return;
    }
    if !etcd_available() {
        panic!("the etcd benchmarks need etcd: scripts/setup.sh bench installs it");
    }
    let o = options();
    let mut rows = Vec::new();

    if !o.sync_only {
        let small = latency(1000, o.puts);
        rows.push(format!(
            "| put → changed answer, 1k keys, {} puts | p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; from etcd's acknowledgement p50 {:.2} ms, p99 {:.2} ms | p99 ≤ 20 ms |",
            o.puts, small.p50, small.p99, small.max, small.ack_p50, small.ack_p99
        ));
        let large = latency(o.large_base, o.large_puts);
        rows.push(format!(
            "| put → changed answer, {} keys, {} puts | p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; from etcd's acknowledgement p50 {:.2} ms, p99 {:.2} ms | p99 ≤ 20 ms |",
            thousands(o.large_base),
            o.large_puts,
            large.p50,
            large.p99,
            large.max,
            large.ack_p50,
            large.ack_p99
        ));
        rows.push(format!(
            "| one change at {} keys: snapshot build (median of {}) | {:.1} ms | tens of ms |",
            thousands(o.large_base),
            large.builds.len(),
            median(&large.builds)
        ));
    }

    let empty = sync(0);
    rows.push(format!(
        "| resident memory, synced, 0 keys | {:.1} MiB | |",
        empty.rss as f64 / (1 << 20) as f64
    ));
    for &n in &o.keys {
        let s = sync(n);
        let per_record = (s.rss.saturating_sub(empty.rss)) as f64 / n as f64;
        rows.push(format!(
            "| initial sync, {} keys (read {:.2} s, build {:.2} s) | {:.2} s to first answer | {} |",
            thousands(n),
            s.read,
            s.build,
            s.total,
            if n == 100_000 { "≤ 2 s" } else { "" }
        ));
        rows.push(format!(
            "| resident memory, synced, {} keys | {:.1} MiB, {:.0} bytes per record above 0 keys | ≤ 300 bytes |",
            thousands(n),
            s.rss as f64 / (1 << 20) as f64,
            per_record
        ));
    }
    println!("| measurement | result | target |");
    println!("|---|---|---|");
    for row in rows {
        println!("{row}");
    }
}

struct Latency {
    p50: f64,
    p99: f64,
    max: f64,
    /// The same from etcd's acknowledgement of the put: skyline's share, without etcd's
    /// commit (a disk flush on the development machine).
    ack_p50: f64,
    ack_p99: f64,
    /// Snapshot build times (ms) skyline logged for the probes' changes.
    builds: Vec<f64>,
}

/// Puts the probe key `puts` times over `base` other keys; each time, the milliseconds from the
/// put until a query answers the new address.
fn latency(base: usize, puts: usize) -> Latency {
    let etcd = Etcd::start();
    load(&etcd.endpoint(), 0, base);
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    client.put(PROBE_KEY, &record(u32::MAX));
    let s = Skyline::start_with(
        &["--machines", &etcd.endpoint(), "--no-rec"],
        &[("RUST_LOG", "info,skyline_controlplane=debug")],
    );
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    wait_answer(&s, &socket, &address(u32::MAX), Duration::from_secs(120));
    let published_before = s.log_count("snapshot published");
    let mut samples = Vec::with_capacity(puts);
    let mut after_ack = Vec::with_capacity(puts);
    for i in 0..puts as u32 {
        let expected = address(i);
        let started = Instant::now();
        client.put(PROBE_KEY, &record(i));
        let acknowledged = Instant::now();
        wait_answer(&s, &socket, &expected, Duration::from_secs(30));
        samples.push(started.elapsed().as_secs_f64() * 1e3);
        after_ack.push(acknowledged.elapsed().as_secs_f64() * 1e3);
    }
    let builds = logged_durations(&s, "snapshot published", published_before);
    samples.sort_by(f64::total_cmp);
    after_ack.sort_by(f64::total_cmp);
    Latency {
        p50: percentile(&samples, 0.50),
        p99: percentile(&samples, 0.99),
        max: samples.last().copied().unwrap_or(0.0),
        ack_p50: percentile(&after_ack, 0.50),
        ack_p99: percentile(&after_ack, 0.99),
        builds,
    }
}

struct Sync {
    /// Seconds from start to the first answer from the synced data.
    total: f64,
    /// Seconds of the range read, as logged.
    read: f64,
    /// Seconds of the first snapshot build, as logged.
    build: f64,
    /// VmRSS in bytes once synced and settled.
    rss: u64,
}

/// Starts skyline on an etcd holding `n` keys; measures the sync and the memory it holds.
fn sync(n: usize) -> Sync {
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    load(&etcd.endpoint(), 0, n);
    client.put(PROBE_KEY, &record(u32::MAX));
    let started = Instant::now();
    let s = Skyline::start_with(&["--machines", &etcd.endpoint(), "--no-rec"], &[]);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    wait_answer(&s, &socket, &address(u32::MAX), Duration::from_secs(600));
    let total = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(2));
    let rss = vm_rss(s.pid());
    let read = logged_durations(&s, "etcd prefix /skydns/ read", 0)
        .first()
        .copied()
        .unwrap_or(0.0)
        / 1e3;
    let build = logged_durations(&s, "etcd data served", 0)
        .first()
        .copied()
        .unwrap_or(0.0)
        / 1e3;
    Sync {
        total,
        read,
        build,
        rss,
    }
}

/// Writes keys `from..to` in transactions of [`TXN_OPS`] puts, [`LOADERS`] at a time.
fn load(endpoint: &str, from: usize, to: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = Client::connect([endpoint], None).await.expect("connect to etcd");
        let batches: Vec<(usize, usize)> = (from..to)
            .step_by(TXN_OPS)
            .map(|start| (start, (start + TXN_OPS).min(to)))
            .collect();
        for wave in batches.chunks(LOADERS) {
            let mut tasks = tokio::task::JoinSet::new();
            for &(start, end) in wave {
                let mut client = client.clone();
                tasks.spawn(async move {
                    let ops: Vec<TxnOp> = (start..end)
                        .map(|i| TxnOp::put(key(i), record(i as u32), None))
                        .collect();
                    client.txn(Txn::new().and_then(ops)).await.expect("load transaction");
                });
            }
            while let Some(done) = tasks.join_next().await {
                done.expect("load task");
            }
        }
    });
}

fn key(i: usize) -> String {
    format!("/skydns/test/skydns/svc{}/h{i}", i % SERVICES)
}

fn address(i: u32) -> String {
    Ipv4Addr::from(0x0a00_0000u32.wrapping_add(i)).to_string()
}

fn record(i: u32) -> String {
    format!(r#"{{"host":"{}","port":80}}"#, address(i))
}

/// Queries the probe name until it answers `expected`, without pause. Replies to earlier
/// queries (late after a timeout) are read and passed over.
fn wait_answer(s: &Skyline, socket: &UdpSocket, expected: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut buf = vec![0u8; 4096];
    loop {
        let q = query(PROBE_NAME, RecordType::A, Some(1232));
        socket.send_to(&q.to_vec().unwrap(), s.addr).unwrap();
        while let Ok((n, _)) = socket.recv_from(&mut buf) {
            let Ok(reply) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            if reply.id() != q.id() {
                continue;
            }
            let hit = reply
                .answers()
                .iter()
                .any(|r| matches!(r.data(), Some(RData::A(a)) if a.0.to_string() == expected));
            if hit {
                return;
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{PROBE_NAME} did not answer {expected} within {limit:?}; log:\n{}",
            s.log_text()
        );
    }
}

/// The `took=`/`read=` durations, in ms, of log lines containing `needle`, after the first `skip`.
fn logged_durations(s: &Skyline, needle: &str, skip: usize) -> Vec<f64> {
    s.log_text()
        .lines()
        .filter(|l| l.contains(needle))
        .skip(skip)
        .filter_map(|l| {
            let at = l
                .find(" took=")
                .map(|i| i + 6)
                .or_else(|| l.find(" read=").map(|i| i + 6))?;
            let value = l[at..].split_whitespace().next()?;
            parse_duration_ms(value)
        })
        .collect()
}

/// Parses a Rust `Debug` duration (`1.5ms`, `250.3µs`, `2.1s`, `12ns`) into milliseconds.
fn parse_duration_ms(text: &str) -> Option<f64> {
    for (unit, scale) in [("ms", 1.0), ("µs", 1e-3), ("ns", 1e-6), ("s", 1e3)] {
        if let Some(number) = text.strip_suffix(unit) {
            return number.parse::<f64>().ok().map(|n| n * scale);
        }
    }
    None
}

fn vm_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

fn thousands(n: usize) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1000 && n % 1000 == 0 => format!("{}k", n / 1000),
        n => n.to_string(),
    }
}
