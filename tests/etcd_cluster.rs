//! End-to-end: skyline following a three-member etcd cluster on loopback through the loss of the
//! leader, with every member's endpoint given in `--machines`.

mod common;
mod etcd_harness;

use etcd_harness::{etcd_available, start_skyline, wait_for, Cluster, EtcdClient};
use std::time::{Duration, Instant};

/// How long the remaining members may take to elect a new leader.
const ELECTION: Duration = Duration::from_secs(15);

/// The index of the member that is the leader, as the members at `endpoints` see it.
fn leader(endpoints: &[String]) -> Option<usize> {
    endpoints.iter().position(|endpoint| {
        EtcdClient::leader_seen_by(endpoint).is_some_and(|(leader, own)| leader != 0 && leader == own)
    })
}

#[test]
fn with_its_leader_killed_the_cluster_keeps_feeding_skyline() {
    if !etcd_available() {
        return;
    }
    let mut cluster = Cluster::start(3);
    let endpoints = cluster.endpoints();
    let client = EtcdClient::connect(&endpoints);
    client.put("/skydns/config", r#"{"domain":"skydns.test."}"#);
    client.put("/skydns/test/skydns/svc/a", r#"{"host":"10.9.0.1"}"#);
    let s = start_skyline(&endpoints.join(","));
    wait_for(&s, "svc.skydns.test.", &["10.9.0.1"]);
    drop(client);

    let old = leader(&endpoints).expect("the cluster has a leader");
    cluster.members[old].kill();
    let remaining: Vec<String> = endpoints
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != old)
        .map(|(_, e)| e.clone())
        .collect();
    let deadline = Instant::now() + ELECTION;
    while leader(&remaining).is_none() {
        assert!(Instant::now() < deadline, "no new leader within {ELECTION:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let client = EtcdClient::connect(&remaining);
    client.put("/skydns/test/skydns/svc/b", r#"{"host":"10.9.0.2"}"#);
    client.delete("/skydns/test/skydns/svc/a");
    wait_for(&s, "svc.skydns.test.", &["10.9.0.2"]);
    assert_eq!(
        s.udp("svc.skydns.test.", hickory_proto::rr::RecordType::A)
            .answers()
            .len(),
        1
    );
}
