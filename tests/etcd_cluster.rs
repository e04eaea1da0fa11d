//! End-to-end: skyline following a three-member etcd cluster on loopback through the loss of the
//! leader, with every member's endpoint given in `--machines`; and, with `--discover`, a cluster
//! whose members change under it.

mod common;
mod etcd_harness;

use common::{http_get, metric_value, Skyline, HTTP_ANY_PORT};
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

/// `--discover`: skyline is given one member; a second joins the cluster and the first is then
/// removed from it. skyline takes up the new member from the member list and follows the
/// cluster through it, without a restart, though the only endpoint it was given is gone.
#[test]
fn with_discover_a_member_added_is_used_and_a_member_removed_is_dropped() {
    if !etcd_available() {
        return;
    }
    let mut cluster = Cluster::start(1);
    let first = cluster.endpoints();
    let client = EtcdClient::connect(&first);
    client.put("/skydns/config", r#"{"domain":"skydns.test."}"#);
    client.put("/skydns/test/skydns/svc/a", r#"{"host":"10.9.0.1"}"#);
    drop(client);
    let mut args = vec!["--machines", &first[0], "--no-rec", "--discover"];
    args.extend(HTTP_ANY_PORT);
    let s = Skyline::start_with(&args, &[]);
    wait_for(&s, "svc.skydns.test.", &["10.9.0.1"]);
    let endpoints = || {
        let (_, metrics) = http_get(s.http_addr(), "/metrics").expect("metrics answer");
        metric_value(&metrics, "skyline_etcd_endpoints")
    };
    assert_eq!(endpoints(), Some(1.0));

    let added = cluster.grow("m1");
    let added_endpoint = cluster.members[added].endpoint();
    let deadline = Instant::now() + Duration::from_secs(20);
    while endpoints() != Some(2.0) {
        assert!(
            Instant::now() < deadline,
            "the new member was not taken up; log:\n{}",
            s.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(s.log_text().contains(&added_endpoint), "{}", s.log_text());

    cluster.shrink(0);
    let client = EtcdClient::connect(std::slice::from_ref(&added_endpoint));
    client.put("/skydns/test/skydns/svc/b", r#"{"host":"10.9.0.2"}"#);
    client.delete("/skydns/test/skydns/svc/a");
    wait_for(&s, "svc.skydns.test.", &["10.9.0.2"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while endpoints() != Some(1.0) {
        assert!(
            Instant::now() < deadline,
            "the removed member was not dropped; log:\n{}",
            s.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    client.put("/skydns/test/skydns/svc/c", r#"{"host":"10.9.0.3"}"#);
    wait_for(&s, "svc.skydns.test.", &["10.9.0.2", "10.9.0.3"]);
}
