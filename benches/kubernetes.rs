//! Scale of the Kubernetes source: how long the cluster zones of 10k Services and 100k endpoints
//! take to build, how long the real `skyline` binary (release build) takes to sync them from an
//! API server speaking the list/watch protocol, how much memory it then holds, and how long one
//! endpoint change, or one change of the SkyDNS records served beside the cluster, takes, and
//! what a re-list after every watch expired (410 Gone) and a deleted Namespace cost. Not part of
//! `cargo test`; run with
//!
//! ```text
//! cargo bench --bench kubernetes                         # 10k services, 10 endpoints each
//! cargo bench --bench kubernetes -- --services 1000 --endpoints 10 --changes 20
//! ```
//!
//! Prints a Markdown table (the numbers in `tuning.md`, section "Kubernetes source").

#[path = "cluster/mod.rs"]
mod cluster;
#[path = "../tests/kubernetes_api/mod.rs"]
mod kubernetes_api;

use cluster::{
    answers_with, ask, cluster_addr, endpoint_addr, load, memory, ns, slice_object, HEADLESS_EVERY, NAMESPACES,
};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use kubernetes_api::{FakeApi, Resource};
use skyline_dataplane::signer;
use skyline_dataplane::snapshot::kubernetes::{
    self as model, Changes, Cluster, Endpoint, EndpointSlice, ObjectKey, Protocol, Served, Service, ServiceKind,
    ServicePort,
};
use skyline_dataplane::snapshot::{compose, skydns, Snapshot};
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

struct Options {
    services: usize,
    endpoints: usize,
    changes: usize,
}

fn options() -> Options {
    let mut o = Options {
        services: 10_000,
        endpoints: 10,
        changes: 20,
    };
    let args: Vec<String> = std::env::args().collect();
    for pair in args.windows(2) {
        let value = &pair[1];
        match pair[0].as_str() {
            "--services" => o.services = value.parse().expect("--services N"),
            "--endpoints" => o.endpoints = value.parse().expect("--endpoints N (per service)"),
            "--changes" => o.changes = value.parse().expect("--changes N"),
            _ => {}
        }
    }
    o
}

/// The cluster as the source's mirror holds it.
fn model_cluster(o: &Options) -> Cluster {
    let mut c = Cluster::default();
    for n in 0..NAMESPACES {
        c.namespaces.insert(format!("ns-{n}").into());
    }
    let http = |port| ServicePort {
        name: "http".into(),
        protocol: Protocol::Tcp,
        port,
    };
    for i in 0..o.services {
        let headless = i % HEADLESS_EVERY == 0;
        let kind = if headless {
            ServiceKind::Headless
        } else {
            ServiceKind::ClusterIp(vec![cluster_addr(i).into()].into())
        };
        let name = format!("svc-{i}");
        c.services.insert(
            ObjectKey::new(&ns(i), &name),
            Service {
                kind,
                ports: vec![http(80)].into(),
            },
        );
        let endpoints: Vec<Endpoint> = (0..o.endpoints)
            .map(|e| Endpoint {
                address: endpoint_addr(i, e, o.endpoints).into(),
                hostname: headless.then(|| format!("{name}-{e}").into()),
                pod: Some(format!("{name}-{e}").into()),
            })
            .collect();
        c.slices.insert(
            ObjectKey::new(&ns(i), &format!("{name}-abcde")),
            EndpointSlice {
                service: name.as_str().into(),
                ports: vec![http(8080)].into(),
                endpoints: endpoints.into(),
            },
        );
    }
    c
}

fn median(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.9))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The in-process part: build and compose times of the snapshot alone.
fn build_times(o: &Options) -> Vec<(String, String)> {
    let cluster = model_cluster(o);
    let config = model::Config::default();
    let base = Snapshot::default();
    let mut builds = Vec::new();
    let mut composes = Vec::new();
    let mut names = 0;
    for generation in 0..5 {
        let start = Instant::now();
        let zones = model::build(&config, &cluster, generation, SystemTime::now());
        builds.push(start.elapsed());
        names = zones.nodes.len() + zones.hosts.len();
        let start = Instant::now();
        let served = compose(&base, zones, generation);
        composes.push(start.elapsed());
        drop(served);
    }
    let (build, _) = median(builds);
    let (composed, _) = median(composes);
    let mut served = compose_served(&config, &cluster, &base);
    let mut cluster = cluster;
    let mut updates = Vec::new();
    for c in 0..o.changes {
        let i = (c * 7919 + 1) % o.services;
        let key = ObjectKey::new(&ns(i), &format!("svc-{i}-abcde"));
        let mut changes = Changes::default();
        if let Some(old) = cluster.slices.get(&key).cloned() {
            let mut endpoints = old.endpoints.to_vec();
            endpoints[0].address = Ipv4Addr::from(0x0b00_0000 + c as u32).into();
            let slice = EndpointSlice {
                endpoints: endpoints.into(),
                ..old.clone()
            };
            cluster.slices.insert(key.clone(), slice);
            changes.slice(&cluster, &key, Some(&old));
        }
        let start = Instant::now();
        let was = Served {
            snapshot: &served,
            base: &base,
        };
        let next = model::update(&config, &cluster, &changes, &base, was, c as u64, SystemTime::now());
        updates.push(start.elapsed());
        served = next.expect("an endpoint change updates the served snapshot");
    }
    let (update, update_p90) = median(updates);
    let (rebase, rebase_p90) = skydns_changes(o, &config, &cluster);
    vec![
        ("names in the cluster zones".into(), names.to_string()),
        ("build of the cluster zones (median of 5)".into(), ms(build)),
        ("compose with the SkyDNS snapshot (median of 5)".into(), ms(composed)),
        (
            format!("update after one endpoint change, median / p90 of {}", o.changes),
            format!("{} / {}", ms(update), ms(update_p90)),
        ),
        (
            format!(
                "update after one change of {SKYDNS_RECORDS} SkyDNS records (reloaded whole), median / p90 of {}",
                o.changes
            ),
            format!("{} / {}", ms(rebase), ms(rebase_p90)),
        ),
    ]
}

/// SkyDNS records served beside the cluster in [`skydns_changes`].
const SKYDNS_RECORDS: usize = 10_000;

/// Times of the served snapshot's update when one of [`SKYDNS_RECORDS`] SkyDNS records changes
/// and the SkyDNS snapshot is built anew, as a records-file reload does (etcd updates share
/// more with the previous one, which only makes the comparison cheaper).
fn skydns_changes(o: &Options, config: &model::Config, cluster: &Cluster) -> (Duration, Duration) {
    let domain = skydns::Config::default().domain;
    let skydns_config = skydns::Config {
        hostmaster: domain.prepend("hostmaster").expect("a short domain"),
        domain,
        ..skydns::Config::default()
    };
    let mut records: Vec<(String, skydns::Service)> = (0..SKYDNS_RECORDS)
        .map(|i| {
            let host = Ipv4Addr::from(0xc000_0000 + i as u32).to_string();
            let service = skydns::Service {
                host,
                ..skydns::Service::default()
            };
            (format!("/skydns/local/skydns/s{}/r{i}", i % 100), service)
        })
        .collect();
    let mut base = signer::build(&skydns_config, &records, 0, SystemTime::now());
    let mut served = compose(&base, model::build(config, cluster, 0, SystemTime::now()), 0);
    let mut times = Vec::new();
    for c in 0..o.changes {
        records[c * 37 % SKYDNS_RECORDS].1.host = Ipv4Addr::from(0xc600_0000 + c as u32).to_string();
        let next_base = signer::build(&skydns_config, &records, c as u64 + 1, SystemTime::now());
        let start = Instant::now();
        let was = Served {
            snapshot: &served,
            base: &base,
        };
        let changes = Changes::default();
        let next = model::update(
            config,
            cluster,
            &changes,
            &next_base,
            was,
            c as u64 + 1,
            SystemTime::now(),
        );
        times.push(start.elapsed());
        served = next.expect("a SkyDNS change updates the served snapshot");
        base = next_base;
    }
    median(times)
}

fn compose_served(config: &model::Config, cluster: &Cluster, base: &Snapshot) -> Snapshot {
    compose(base, model::build(config, cluster, 0, SystemTime::now()), 0)
}

/// A skyline process, killed on drop.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Reported, not unwrapped: a panic in a drop while a failure unwinds would abort.
        let pid = self.child.id();
        if let Err(e) = self.child.kill() {
            eprintln!("killing skyline ({pid}) failed: {e}");
        }
        if let Err(e) = self.child.wait() {
            eprintln!("reaping skyline ({pid}) failed: {e}");
        }
    }
}

fn start(kubeconfig: &str) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args([
            "--addr",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--no-pin",
            "--kubeconfig",
            kubeconfig,
        ])
        .env("SKYLINE_RESOLV_CONF", "none")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the skyline binary runs");
    let stderr = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.find("udp://") {
                let rest = &line[at + 6..];
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                if let Ok(addr) = rest[..end].parse::<SocketAddr>() {
                    let _ = tx.send(addr);
                }
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("skyline reports its address");
    Server { child, addr }
}

/// Asks `name` until it is NXDOMAIN, and returns how long that took since `start`; fails after
/// a minute, saying `what` was not served.
fn until_nxdomain(addr: SocketAddr, name: &str, start: Instant, what: &str) -> Duration {
    while ask(addr, name, RecordType::A).is_none_or(|m| m.response_code() != ResponseCode::NXDomain) {
        assert!(start.elapsed() < Duration::from_secs(60), "{what} not served");
        std::thread::sleep(Duration::from_millis(1));
    }
    start.elapsed()
}

/// Starts the peak of [`memory`] again from the current resident memory.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("the peak resident memory can be reset");
}

/// The end-to-end part: the binary against the fake API server.
fn end_to_end(o: &Options) -> Vec<(String, String)> {
    let api = FakeApi::start();
    load(&api, o.services, o.endpoints);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = api.kubeconfig(dir.path());
    let started = Instant::now();
    let server = start(kubeconfig.to_str().expect("a UTF-8 path"));
    let probe = |i: usize| format!("svc-{i}.{}.svc.cluster.local.", ns(i));
    let last = o.services - 1;
    let deadline = Instant::now() + Duration::from_secs(600);
    while ask(server.addr, "dns-version.cluster.local.", RecordType::TXT)
        .is_none_or(|m| m.response_code() != ResponseCode::NoError)
    {
        assert!(Instant::now() < deadline, "no sync within 10 minutes");
        std::thread::sleep(Duration::from_millis(10));
    }
    let sync = started.elapsed();
    assert!(ask(server.addr, &probe(last), RecordType::A).is_some_and(|m| !m.answers().is_empty()));
    std::thread::sleep(Duration::from_millis(500));
    let (rss, peak) = memory(server.child.id());

    let mut changes = Vec::with_capacity(o.changes);
    for c in 0..o.changes {
        let i = (c * 7919 + 1) % o.services;
        let moved = Ipv4Addr::from(0x0b00_0000 + c as u32);
        let name = if i.is_multiple_of(HEADLESS_EVERY) {
            format!("svc-{i}-0.svc-{i}.{}.svc.cluster.local.", ns(i))
        } else {
            format!(
                "{}.svc-{i}.{}.svc.cluster.local.",
                moved.to_string().replace('.', "-"),
                ns(i)
            )
        };
        let start = Instant::now();
        api.apply(slice_object(i, o.endpoints, Some(moved)));
        while !answers_with(server.addr, &name, moved) {
            assert!(start.elapsed() < Duration::from_secs(60), "change {c} not served");
            std::thread::sleep(Duration::from_millis(1));
        }
        changes.push(start.elapsed());
    }
    let (change, change_p90) = median(changes);
    let (rss_after, peak_after) = memory(server.child.id());

    // Every watch expires after a Service was deleted unseen: the lists run again, and only
    // they show the deletion.
    let gone = o.services / 2;
    reset_peak(server.child.id());
    let start = Instant::now();
    api.delete_unseen(Resource::Service, &ns(gone), &format!("svc-{gone}"));
    api.expire();
    let relist = until_nxdomain(server.addr, &probe(gone), start, "the re-list");
    let (rss_relist, peak_relist) = memory(server.child.id());

    // A Namespace holding a hundredth of the services deleted.
    let deleted = ns(0);
    reset_peak(server.child.id());
    let start = Instant::now();
    api.delete(Resource::Namespace, "", &deleted);
    let namespace_gone = until_nxdomain(server.addr, &probe(0), start, "the namespace deletion");
    let (_, peak_namespace) = memory(server.child.id());
    vec![
        ("initial sync, process start to served".into(), ms(sync)),
        ("resident memory after sync".into(), format!("{rss:.1} MiB")),
        ("peak resident memory during sync".into(), format!("{peak:.1} MiB")),
        (
            format!("one endpoint change to answer, median / p90 of {}", o.changes),
            format!("{} / {}", ms(change), ms(change_p90)),
        ),
        (
            "resident / peak memory after the changes".into(),
            format!("{rss_after:.1} / {peak_after:.1} MiB"),
        ),
        ("re-list after 410 Gone, expiry to answer".into(), ms(relist)),
        (
            "resident memory after the re-list / peak during it".into(),
            format!("{rss_relist:.1} / {peak_relist:.1} MiB"),
        ),
        (
            format!(
                "namespace of {} services deleted, event to answer / peak memory",
                o.services / NAMESPACES
            ),
            format!("{} / {peak_namespace:.1} MiB", ms(namespace_gone)),
        ),
    ]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!(
            "the Kubernetes benchmarks run with `cargo bench --bench kubernetes`; nothing to do under `cargo test`"
        );
        return;
    }
    let o = options();
    println!(
        "## {} services, {} endpoints ({} per service, 1 in {} headless), {} namespaces\n",
        o.services,
        o.services * o.endpoints,
        o.endpoints,
        HEADLESS_EVERY,
        NAMESPACES
    );
    println!("| measure | value |\n|---|---|");
    for (measure, value) in build_times(&o).into_iter().chain(end_to_end(&o)) {
        println!("| {measure} | {value} |");
    }
}
