//! Stub zones from SkyDNS records (`dns/stub/` under the domain; docs/skydns-semantics.md, "Stub
//! zones") in a real etcd, followed with `--stubzones` as they change: names in a stub zone go to
//! the servers its records name, with the loop guard, instead of the default upstreams.

mod common;
mod etcd_harness;
mod upstream;

use common::{query, udp_query, Skyline};
use etcd_harness::{etcd_available, wait_for_rcode, Etcd, EtcdClient};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use std::time::{Duration, Instant};
use upstream::{Script, Scripted};

const CONFIG: &str = r#"{"domain":"skydns.test."}"#;

fn answered_by(s: &Skyline, name: &str, upstream: &Scripted) -> bool {
    let reply = udp_query(s.addr, &query(name, RecordType::A, Some(1232)));
    reply.response_code() == ResponseCode::NoError && upstream.count(name) > 0
}

#[test]
fn stub_zone_records_send_their_names_to_the_servers_they_name() {
    if !etcd_available() {
        return;
    }
    let default = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::ZERO,
    });
    let stub = Scripted::start(Script::Address {
        ttl: 60,
        delay: Duration::ZERO,
    });
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    let s = Skyline::start_with(
        &[
            "--machines",
            &etcd.endpoint(),
            "--nameservers",
            &default.addr.to_string(),
            "--stubzones",
        ],
        &[],
    );
    wait_for_rcode(&s, "skydns.test.", ResponseCode::NoError);
    assert!(answered_by(&s, "before.example.com.", &default));

    let record = format!(r#"{{"host":"127.0.0.1","port":{}}}"#, stub.addr.port());
    client.put("/skydns/test/skydns/dns/stub/com/example/ns1", &record);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    while !answered_by(&s, &format!("n{n}.example.com."), &stub) {
        assert!(
            Instant::now() < deadline,
            "the stub zone never took effect:\n{}",
            s.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
        n += 1;
    }
    let sent = stub.queries().pop().unwrap();
    assert!(
        sent.extensions()
            .as_ref()
            .and_then(|e| e.option(hickory_proto::rr::rdata::opt::EdnsCode::Unknown(65011)))
            .is_some(),
        "queries to stub servers carry the loop guard"
    );
    assert!(
        answered_by(&s, "other.example.org.", &default),
        "other names still go to the default"
    );
    assert_eq!(stub.count("other.example.org."), 0);
}
