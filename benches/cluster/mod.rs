//! The cluster the Kubernetes benches load (`kubernetes`, `kube2etcd`): services spread over
//! [`NAMESPACES`], one in [`HEADLESS_EVERY`] headless with hostnames, each with one slice of
//! ready endpoints; and the DNS and memory probes both read it with.

use crate::kubernetes_api::objects::{cluster_ip, headless, namespace, slice};
use crate::kubernetes_api::FakeApi;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

/// Namespaces the services spread over.
pub const NAMESPACES: usize = 100;
/// One service in this many is headless (its endpoints named by hostname).
pub const HEADLESS_EVERY: usize = 10;

/// Service `i`'s namespace.
pub fn ns(i: usize) -> String {
    format!("ns-{}", i % NAMESPACES)
}

/// Service `i`'s cluster IP.
pub fn cluster_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x0a60_0000 + i as u32)
}

/// Endpoint `e` of service `i`, with `endpoints` per service.
pub fn endpoint_addr(i: usize, e: usize, endpoints: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x0a80_0000 + (i * endpoints + e) as u32)
}

/// The cluster of `services` services with `endpoints` each, loaded into the fake API server.
pub fn load(api: &FakeApi, services: usize, endpoints: usize) {
    for n in 0..NAMESPACES {
        api.apply(namespace(&format!("ns-{n}")));
    }
    for i in 0..services {
        api.apply(slice_object(i, endpoints, None));
        let name = format!("svc-{i}");
        if i.is_multiple_of(HEADLESS_EVERY) {
            api.apply(headless(&ns(i), &name, &[("http", 80, "TCP")]));
        } else {
            api.apply(cluster_ip(
                &ns(i),
                &name,
                &[&cluster_addr(i).to_string()],
                &[("http", 80, "TCP")],
            ));
        }
    }
}

/// Service `i`'s slice of `endpoints`; `moved` replaces its first endpoint's address.
pub fn slice_object(i: usize, endpoints: usize, moved: Option<Ipv4Addr>) -> serde_json::Value {
    let name = format!("svc-{i}");
    let headless = i.is_multiple_of(HEADLESS_EVERY);
    let addresses: Vec<String> = (0..endpoints)
        .map(|e| match (e, moved) {
            (0, Some(a)) => a.to_string(),
            _ => endpoint_addr(i, e, endpoints).to_string(),
        })
        .collect();
    let hostnames: Vec<String> = (0..endpoints).map(|e| format!("{name}-{e}")).collect();
    let ready: Vec<(&str, bool, Option<&str>)> = addresses
        .iter()
        .zip(&hostnames)
        .map(|(a, h)| (a.as_str(), true, headless.then_some(h.as_str())))
        .collect();
    slice(
        &ns(i),
        &format!("{name}-abcde"),
        &name,
        &[("http", 8080, "TCP")],
        &ready,
    )
}

/// One UDP query of `name` to `addr`, with EDNS; `None` when no answer came within 500 ms.
pub fn ask(addr: SocketAddr, name: &str, rtype: RecordType) -> Option<Message> {
    let mut m = Message::new();
    m.set_id(7)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .add_query(Query::query(Name::from_ascii(name).ok()?, rtype));
    m.set_edns(Edns::new());
    let sock = UdpSocket::bind("127.0.0.1:0").ok()?;
    sock.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    sock.send_to(&m.to_vec().ok()?, addr).ok()?;
    let mut buf = [0u8; 4096];
    let (n, _) = sock.recv_from(&mut buf).ok()?;
    Message::from_vec(&buf[..n]).ok()
}

/// Whether `name` answers A with `address` now.
pub fn answers_with(addr: SocketAddr, name: &str, address: Ipv4Addr) -> bool {
    ask(addr, name, RecordType::A).is_some_and(|m| {
        m.response_code() == ResponseCode::NoError
            && m.answers()
                .iter()
                .any(|r| r.data().is_some_and(|d| d.to_string() == address.to_string()))
    })
}

/// Resident and peak memory of `pid`, from /proc, in MiB.
pub fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
