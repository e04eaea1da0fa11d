use super::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::time::Instant;
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Relaxed);
        System.dealloc(p, l)
    }
}
#[global_allocator]
static A: Counting = Counting;

fn run(label: &str, records: Vec<(String, Service)>) {
    let mut best = std::time::Duration::MAX;
    let mut mem = 0;
    for _ in 0..3 {
        let before = LIVE.load(Relaxed);
        let cpu = || {
            let st = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            let f: Vec<&str> = st.rsplit(')').next().unwrap().split_whitespace().collect();
            (f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()) * 10
        };
        let c0 = cpu();
        let t = Instant::now();
        let snap = build(&config(), &records, 1, UNIX_EPOCH);
        let _ = t;
        best = best.min(std::time::Duration::from_millis(cpu() - c0));
        mem = LIVE.load(Relaxed) - before;
        drop(snap);
    }
    eprintln!(
        "{label}: best of 3 {:?}; snapshot heap {} B/record",
        best,
        mem as usize / records.len()
    );
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
        "mixed",
        (0..n)
            .map(|i| {
                let ns = i % 50;
                let svc = (i / 50) % 400;
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
                (format!("/skydns/test/skydns/ns{ns}/svc{svc}/h{i}"), s)
            })
            .collect(),
    );
}
