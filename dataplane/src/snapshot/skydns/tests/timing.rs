use super::*;
use std::time::Instant;

fn run(label: &str, records: Vec<(String, Service)>) {
    if std::env::var("ONLY").is_ok_and(|o| o != label) {
        return;
    }
    let t = Instant::now();
    let snap = build(&config(), &records, 1, UNIX_EPOCH);
    let el = t.elapsed();
    let bytes: usize = snap
        .nodes
        .values()
        .flat_map(|n| n.answers.iter().flatten())
        .map(|a| a.heap_size())
        .sum();
    let arcs: usize = snap.nodes.values().flat_map(|n| n.answers.iter().flatten()).count();
    eprintln!(
        "{label}: {:?} nodes={} compiled_bytes={} answers={}",
        el,
        snap.nodes.len(),
        bytes,
        arcs
    );
    let t = Instant::now();
    drop(snap);
    eprintln!("  drop {:?}", t.elapsed());
}

#[test]
fn timing() {
    let n = 100_000u32;
    run(
        "flat100dirs",
        (0..n)
            .map(|i| {
                (
                    format!("/skydns/test/skydns/svc{}/h{i}", i % 100),
                    host(&std::net::Ipv4Addr::from(i).to_string()),
                )
            })
            .collect(),
    );
    run(
        "onedir",
        (0..n)
            .map(|i| {
                (
                    format!("/skydns/test/skydns/svc/h{i}"),
                    host(&std::net::Ipv4Addr::from(i).to_string()),
                )
            })
            .collect(),
    );
    run(
        "k8slike",
        (0..n)
            .map(|i| {
                let ns = i % 50;
                let svc = (i / 50) % 400;
                let pod = i;
                let s = match i % 4 {
                    0 => Service {
                        host: std::net::Ipv4Addr::from(i).to_string(),
                        port: 80,
                        ..Service::default()
                    },
                    1 => Service {
                        host: format!("h{}.svc{}.ns{}.skydns.test", i - 1, svc, ns),
                        port: 443,
                        weight: 10,
                        ..Service::default()
                    },
                    2 => Service {
                        host: format!("2001:db8::{:x}", i),
                        text: "some text".into(),
                        ..Service::default()
                    },
                    _ => Service {
                        host: "ext.example.org".into(),
                        mail: true,
                        port: 25,
                        ..Service::default()
                    },
                };
                (format!("/skydns/test/skydns/ns{ns}/svc{svc}/h{pod}"), s)
            })
            .collect(),
    );
}
