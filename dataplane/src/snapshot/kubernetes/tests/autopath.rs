//! docs/kubernetes.md, "Autopath": a pod's question under its namespace's domain answered with
//! the first name of its search list that exists, read back by hickory-proto.

use super::*;
use hickory_proto::rr::Record;

/// The pod asking, in `testns`.
const POD: &str = "10.1.0.5";

/// [`cluster`] with the asking pod, a pod of `other` and the service `svc2.other`.
fn searching_cluster() -> Cluster {
    let mut c = cluster();
    c.pods
        .insert(ObjectKey::new("testns", "client"), Pod { address: ip(POD) });
    c.pods.insert(
        ObjectKey::new("other", "elsewhere"),
        Pod {
            address: ip("10.1.0.6"),
        },
    );
    c.services.insert(
        ObjectKey::new("other", "svc2"),
        Service {
            kind: ServiceKind::ClusterIp(vec![ip("10.0.0.22")].into()),
            ports: vec![port("http", 80)].into(),
        },
    );
    c
}

/// Verified pods with autopath on, the host's search list `search`.
fn config(search: &[&str]) -> Config {
    Config {
        pods: PodMode::Verified,
        autopath: Some(search.iter().map(|d| Name::from_dotted(d).unwrap()).collect()),
        ..Config::default()
    }
}

/// The cluster zones with autopath on and the SkyDNS domain `skydns.test.`, holding
/// `web.skydns.test. A 192.0.2.1`, which the host's search list names.
fn searching() -> Snapshot {
    let domain = Name::from_dotted("skydns.test.").unwrap();
    let skydns_config = skydns::Config {
        hostmaster: domain.prepend("hostmaster").unwrap(),
        domain,
        ..skydns::Config::default()
    };
    let records = vec![(
        "/skydns/test/skydns/web".to_owned(),
        skydns::Service {
            host: "192.0.2.1".into(),
            ..skydns::Service::default()
        },
    )];
    let base = skydns::build(&skydns_config, &records, 1, UNIX_EPOCH);
    compose(
        &base,
        snapshot_with(&config(&["skydns.test."]), &searching_cluster()),
        9,
    )
}

/// Asks `name` `rtype` of `snap` from `client`; the reply and whether it was a search's answer.
fn ask_from(snap: &Snapshot, client: &str, name: &str, rtype: RecordType) -> (Message, bool) {
    let mut query = Message::new();
    query
        .set_id(9)
        .add_query(Query::query(HName::from_ascii(name).unwrap(), rtype));
    let mut out = vec![0; 65535];
    let ctx = Context::new(Transport::Udp).with_client(ip(client));
    let Outcome::Reply(reply) = answer(&query.to_vec().unwrap(), snap, &ctx, &mut out) else {
        panic!("no reply to {name} {rtype}");
    };
    (Message::from_vec(&out[..reply.len()]).unwrap(), reply.searched())
}

fn lines(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| format!("{} {} {} {}", r.name(), r.ttl(), r.record_type(), r.data().unwrap()))
        .collect()
}

/// Asks `name` `rtype` from the pod: the reply must be a search's NOERROR answer to the name
/// asked; its answer section.
fn searched(snap: &Snapshot, name: &str, rtype: RecordType) -> Vec<String> {
    let (reply, searched) = ask_from(snap, POD, name, rtype);
    assert_eq!(reply.response_code(), ResponseCode::NoError, "{name}");
    assert!(searched, "{name}: counted as a search's answer");
    assert_eq!(reply.queries()[0].name().to_ascii(), name, "the question as asked");
    lines(reply.answers())
}

#[test]
fn a_service_asked_under_the_pods_namespace_answers_as_the_bare_name() {
    let asked = "svc1.testns.svc.cluster.local.testns.svc.cluster.local.";
    assert_eq!(
        searched(&searching(), asked, RecordType::A),
        [
            format!("{asked} 5 CNAME svc1.testns.svc.cluster.local."),
            "svc1.testns.svc.cluster.local. 5 A 10.0.0.1".to_owned(),
        ]
    );
}

#[test]
fn a_service_of_another_namespace_answers_through_svc_of_the_zone() {
    let asked = "svc2.other.testns.svc.cluster.local.";
    assert_eq!(
        searched(&searching(), asked, RecordType::A),
        [
            format!("{asked} 5 CNAME svc2.other.svc.cluster.local."),
            "svc2.other.svc.cluster.local. 5 A 10.0.0.22".to_owned(),
        ]
    );
}

#[test]
fn the_hosts_search_domains_come_after_the_clusters_own() {
    let asked = "web.testns.svc.cluster.local.";
    assert_eq!(
        searched(&searching(), asked, RecordType::A),
        [
            format!("{asked} 3600 CNAME web.skydns.test."),
            "web.skydns.test. 3600 A 192.0.2.1".to_owned(),
        ]
    );
}

#[test]
fn srv_targets_and_glue_keep_naming_the_name_found() {
    let asked = "_http._tcp.svc1.testns.svc.cluster.local.testns.svc.cluster.local.";
    let (reply, _) = ask_from(&searching(), POD, asked, RecordType::SRV);
    assert_eq!(
        lines(reply.answers()),
        [
            format!("{asked} 5 CNAME _http._tcp.svc1.testns.svc.cluster.local."),
            "_http._tcp.svc1.testns.svc.cluster.local. 5 SRV 0 100 80 svc1.testns.svc.cluster.local.".to_owned(),
        ]
    );
    assert_eq!(
        lines(reply.additionals()),
        ["svc1.testns.svc.cluster.local. 5 A 10.0.0.1"]
    );
}

#[test]
fn a_name_found_without_records_of_the_type_is_its_nodata_without_a_cname() {
    let asked = "svc1.testns.svc.cluster.local.testns.svc.cluster.local.";
    let (reply, searched) = ask_from(&searching(), POD, asked, RecordType::TXT);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(searched && reply.answers().is_empty());
    assert_eq!(lines(reply.name_servers()).len(), 1, "the SOA");
    assert_eq!(reply.name_servers()[0].name().to_ascii(), "cluster.local.");
}

#[test]
fn without_a_name_found_the_question_is_denied_as_asked() {
    let asked = "nothing.here.testns.svc.cluster.local.";
    let (reply, searched) = ask_from(&searching(), POD, asked, RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    assert!(!searched && reply.authoritative() && reply.answers().is_empty());
    assert_eq!(reply.name_servers().len(), 1, "the SOA");
}

#[test]
fn a_client_that_is_no_pod_gets_the_denial() {
    let asked = "svc1.testns.svc.cluster.local.testns.svc.cluster.local.";
    let (reply, searched) = ask_from(&searching(), "10.1.0.99", asked, RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
    assert!(!searched);
}

#[test]
fn only_names_under_the_clients_own_namespace_are_searched() {
    let asked = "svc1.testns.svc.cluster.local.other.svc.cluster.local.";
    let (reply, _) = ask_from(&searching(), POD, asked, RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain, "a testns pod");
    let (reply, _) = ask_from(&searching(), "10.1.0.6", asked, RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NoError, "an other pod");
    let (reply, _) = ask_from(&searching(), POD, "xtestns.svc.cluster.local.", RecordType::A);
    assert_eq!(
        reply.response_code(),
        ResponseCode::NXDomain,
        "a label ending in the namespace"
    );
}

#[test]
fn without_autopath_the_same_question_is_denied() {
    let plain = Config {
        pods: PodMode::Verified,
        ..Config::default()
    };
    let snap = snapshot_with(&plain, &searching_cluster());
    assert!(snap.autopath.is_none());
    let (reply, _) = ask_from(
        &snap,
        POD,
        "svc1.testns.svc.cluster.local.testns.svc.cluster.local.",
        RecordType::A,
    );
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
}

#[test]
fn a_pod_that_comes_or_goes_is_searched_for_or_not_after_an_update() {
    let config = config(&[]);
    let base = Snapshot::default();
    let mut cluster = searching_cluster();
    cluster.pods.remove(&ObjectKey::new("testns", "client"));
    let built = compose(&base, snapshot_with(&config, &cluster), 1);
    let asked = "svc1.testns.svc.cluster.local.testns.svc.cluster.local.";
    assert_eq!(
        ask_from(&built, POD, asked, RecordType::A).0.response_code(),
        ResponseCode::NXDomain
    );
    let mut changes = Changes::default();
    let key = ObjectKey::new("testns", "client");
    changes.pod(&key, None);
    cluster.pods.insert(key, Pod { address: ip(POD) });
    changes.settle(&cluster);
    let served = Served {
        snapshot: &built,
        base: &base,
    };
    let updated = update(&config, &cluster, &changes, &base, served, 2, UNIX_EPOCH).expect("an update");
    assert_eq!(
        ask_from(&updated, POD, asked, RecordType::A).0.response_code(),
        ResponseCode::NoError
    );
}
