//! The names kept in the tables answer byte for byte as the nodes they stand for would: every
//! such name of clusters built under several configurations, asked every type over UDP and
//! TCP, in its own spelling and in capitals, against a snapshot holding it as a node.

use super::*;
use crate::snapshot::test_replies::assert_same_replies;

/// [`cluster`] with endpoint names the tables cannot hold, or only just: a service whose long
/// hostnames have four ports (the most the tables take, their SRV answer too long for UDP
/// without EDNS) and one whose slice has five.
pub(super) fn crowded() -> Cluster {
    let mut c = cluster();
    let ports = |n: u16| -> Box<[ServicePort]> { (0..n).map(|i| port(&format!("p{i}"), 9000 + i)).collect() };
    for (service, count) in [("four", 4), ("five", 5)] {
        c.services.insert(
            ObjectKey::new("testns", service),
            Service {
                kind: ServiceKind::Headless,
                ports: ports(count),
            },
        );
        let host = format!("{}-{service}", "h".repeat(50));
        c.slices.insert(
            ObjectKey::new("testns", &format!("{service}-a")),
            EndpointSlice {
                service: service.into(),
                ports: ports(count),
                endpoints: vec![endpoint(&format!("172.1.0.{count}"), Some(&host), None)].into(),
            },
        );
    }
    c.pods.insert(
        ObjectKey::new("testns", "web-1"),
        Pod {
            address: ip("10.1.0.5"),
        },
    );
    c
}

pub(super) fn configs() -> Vec<Config> {
    let zones = ["cluster.local.", "other.test.", "in-addr.arpa.", "ip6.arpa."];
    vec![
        Config::default(),
        Config {
            openshift_names: true,
            endpoint_pod_names: true,
            pods: PodMode::Verified,
            ..Config::default()
        },
        Config {
            zones: zones.iter().map(|z| Name::from_dotted(z).unwrap()).collect(),
            ttl: 30,
            fallthrough: Some(vec![Name::from_dotted("in-addr.arpa.").unwrap()]),
            ..Config::default()
        },
    ]
}

pub(super) use crate::snapshot::test_replies::reply;

#[test]
fn names_in_the_tables_answer_as_their_nodes_would() {
    let types = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::SRV,
        RecordType::PTR,
        RecordType::TXT,
        RecordType::CNAME,
        RecordType::ANY,
    ];
    for config in configs() {
        let s = snapshot_with(&config, &crowded());
        let mut as_nodes = snapshot_with(&config, &crowded());
        let hosts = std::mem::take(&mut as_nodes.hosts);
        for (name, node) in hosts.nodes() {
            as_nodes.nodes.insert(name, node);
        }
        assert!(s.hosts.len() > 10, "{config:?}");
        assert_eq!(s.nodes.len() + s.hosts.len(), as_nodes.nodes.len(), "{config:?}");
        let names: Vec<String> = s.hosts.nodes().map(|(name, _)| name.to_string()).collect();
        assert_same_replies(&s, &as_nodes, &names, &types, &format!("{config:?}"));
    }
}

#[test]
fn the_tables_take_single_addresses_with_few_ports_and_single_ptrs() {
    let s = snapshot_with(&Config::default(), &crowded());
    let held = |name: &str| {
        s.host(&LowerName::from_wire(Name::from_dotted(name).unwrap().wire()).unwrap())
            .is_some()
    };
    let host = |service: &str| format!("{}-{service}.{service}.testns.svc.cluster.local.", "h".repeat(50));
    assert!(held(&host("four")), "four ports fit");
    assert!(!held(&host("five")), "five ports are a node");
    assert!(s.nodes.contains_key(&Name::from_dotted(&host("five")).unwrap()));
    assert!(held("172-0-0-10.svc1.testns.svc.cluster.local."));
    assert!(held("10.0.0.172.in-addr.arpa."), "an endpoint's PTR");
    assert!(held("1.0.0.10.in-addr.arpa."), "a cluster IP's PTR");
    assert!(
        !held("pet-0.hdls.testns.svc.cluster.local."),
        "two addresses are a node"
    );
    assert!(!held("svc1.testns.svc.cluster.local."), "service names are nodes");
    assert_eq!(
        srv_with_glue(&s, &host("four")).0.len(),
        4,
        "one SRV record per distinct port"
    );
}
