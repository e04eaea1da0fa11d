//! End-to-end: the real binary serving a SkyDNS records file, queried over UDP and TCP with
//! hickory-proto and `dig`. Each test states one SkyDNS behaviour (docs/skydns-semantics.md).

mod common;

use common::{dig, query, tool, udp_query, Skyline};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, Record, RecordType};
use std::collections::BTreeSet;

fn records() -> String {
    let mut r = serde_json::json!({
        "/skydns/config": {"domain": "skydns.test.", "ttl": 3600, "min_ttl": 60},
        "/skydns/test/skydns/a/web1": {"host": "10.0.0.1", "port": 80},
        "/skydns/test/skydns/a/web2": {"host": "10.0.0.2", "port": 8080, "weight": 50},
        "/skydns/test/skydns/v6/x": {"host": "2001:db8::1"},
        "/skydns/test/skydns/txt/t": {"Text": "hello world"},
        "/skydns/test/skydns/mx/m1": {"host": "mail.skydns.test.", "mail": true, "priority": 20},
        "/skydns/test/skydns/mail": {"HOST": "10.0.1.1"},
        "/skydns/test/skydns/chain/c1": {"host": "c2.chain.skydns.test."},
        "/skydns/test/skydns/chain/c2": {"host": "c3.chain.skydns.test."},
        "/skydns/test/skydns/chain/c3": {"host": "10.0.2.1", "ttl": 30},
        "/skydns/test/skydns/region1/development/server1": {"host": "10.0.4.1"},
        "/skydns/test/skydns/region1/development/server2": {"host": "10.0.4.2"},
        "/skydns/test/skydns/region1/production/server1": {"host": "10.0.4.3"},
        "/skydns/test/skydns/region1/production/server2": {"host": "10.0.4.4"},
        "/skydns/test/skydns/grp/g1": {"host": "10.0.3.1", "group": "g1"},
        "/skydns/test/skydns/grp/sub/g2": {"host": "10.0.3.2", "group": "g2"},
        "/skydns/test/skydns/grp/sub/free": {"host": "10.0.3.3"},
        "/skydns/test/skydns/dns/ns/ns1": {"host": "10.0.9.1"},
        "/skydns/test/skydns/bad/one": "not json at all",
        "/skydns/test/skydns/bad/two": {"host": "10.0.5.2"},
        "/skydns/arpa/in-addr/10/0/0/1": {"host": "web1.a.skydns.test."}
    });
    for i in 0..40 {
        r[format!("/skydns/test/skydns/big/h{i:02}")] = serde_json::json!({"host": format!("10.1.0.{i}")});
    }
    r.to_string()
}

/// A fresh server per test: the process is killed when the test's `Skyline` drops.
fn server() -> Skyline {
    Skyline::start(&records(), &[], &[])
}

fn data(records: &[Record]) -> BTreeSet<String> {
    records.iter().map(|r| r.data().unwrap().to_string()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_query_on_a_leaf_answers_its_address_authoritatively() {
    let s = server();
    let reply = s.udp("web1.a.skydns.test.", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.authoritative());
    assert_eq!(data(reply.answers()), set(&["10.0.0.1"]));
    assert_eq!(reply.answers()[0].ttl(), 3600);
}

#[test]
fn a_query_on_a_directory_answers_every_record_below_it() {
    let s = server();
    let reply = s.udp("a.skydns.test.", RecordType::A);
    assert_eq!(data(reply.answers()), set(&["10.0.0.1", "10.0.0.2"]));
}

#[test]
fn aaaa_answers_ipv6_hosts_and_a_on_them_is_nodata() {
    let s = server();
    let reply = s.udp("x.v6.skydns.test.", RecordType::AAAA);
    assert_eq!(data(reply.answers()), set(&["2001:db8::1"]));
    let reply = s.udp("x.v6.skydns.test.", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NoError);
    assert!(reply.answers().is_empty());
    assert_eq!(reply.name_servers()[0].record_type(), RecordType::SOA);
}

#[test]
fn srv_answers_carry_normalised_weights_and_address_glue() {
    let s = server();
    let reply = s.udp("a.skydns.test.", RecordType::SRV);
    let mut srvs: Vec<(u16, u16, u16, String)> = reply
        .answers()
        .iter()
        .map(|r| match r.data().unwrap() {
            RData::SRV(s) => (s.priority(), s.weight(), s.port(), s.target().to_ascii()),
            other => panic!("SRV expected, got {other:?}"),
        })
        .collect();
    srvs.sort();
    assert_eq!(
        srvs,
        vec![
            (10, 33, 8080, "web2.a.skydns.test.".into()),
            (10, 66, 80, "web1.a.skydns.test.".into())
        ]
    );
    let glue: BTreeSet<(String, String)> = reply
        .additionals()
        .iter()
        .filter(|r| r.record_type() == RecordType::A)
        .map(|r| (r.name().to_ascii(), r.data().unwrap().to_string()))
        .collect();
    assert!(glue.contains(&("web1.a.skydns.test.".into(), "10.0.0.1".into())));
    assert!(glue.contains(&("web2.a.skydns.test.".into(), "10.0.0.2".into())));
}

#[test]
fn txt_answers_the_text_field_with_case_insensitive_field_names() {
    let s = server();
    let reply = s.udp("t.txt.skydns.test.", RecordType::TXT);
    let RData::TXT(txt) = reply.answers()[0].data().unwrap() else {
        panic!("TXT expected")
    };
    assert_eq!(txt.txt_data()[0].as_ref(), b"hello world");
}

#[test]
fn mx_answers_mail_records_with_glue_for_in_domain_exchanges() {
    let s = server();
    let reply = s.udp("m1.mx.skydns.test.", RecordType::MX);
    let RData::MX(mx) = reply.answers()[0].data().unwrap() else {
        panic!("MX expected")
    };
    assert_eq!(
        (mx.preference(), mx.exchange().to_ascii()),
        (20, "mail.skydns.test.".to_string())
    );
    assert_eq!(data(reply.additionals()), set(&["10.0.1.1"]));
    let reply = s.udp("web1.a.skydns.test.", RecordType::MX);
    assert!(reply.answers().is_empty(), "only mail:true records answer MX");
}

#[test]
fn a_name_pointing_to_a_name_answers_the_end_of_the_chain_at_its_own_name() {
    let s = server();
    let reply = s.udp("c1.chain.skydns.test.", RecordType::A);
    let rendered: Vec<(String, RecordType, u32, String)> = reply
        .answers()
        .iter()
        .map(|r| {
            (
                r.name().to_ascii(),
                r.record_type(),
                r.ttl(),
                r.data().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        rendered,
        vec![("c1.chain.skydns.test.".into(), RecordType::A, 30, "10.0.2.1".into())],
        "the smallest TTL along the chain"
    );
    let cname = s.udp("c1.chain.skydns.test.", RecordType::CNAME);
    assert!(cname.answers().is_empty(), "no name is an alias: {cname:?}");
    assert_eq!(cname.name_servers()[0].record_type(), RecordType::SOA);
}

#[test]
fn cname_chains_are_followed_inside_the_domain_with_cname_chains() {
    for s in [
        Skyline::start(&records(), &["--cname-chains"], &[]),
        Skyline::start(&records(), &[], &[("SKYDNS_CNAME_CHAINS", "true")]),
    ] {
        let reply = s.udp("c1.chain.skydns.test.", RecordType::A);
        let rendered: Vec<(String, RecordType, String)> = reply
            .answers()
            .iter()
            .map(|r| (r.name().to_ascii(), r.record_type(), r.data().unwrap().to_string()))
            .collect();
        assert_eq!(
            rendered,
            vec![
                (
                    "c1.chain.skydns.test.".into(),
                    RecordType::CNAME,
                    "c2.chain.skydns.test.".into()
                ),
                (
                    "c2.chain.skydns.test.".into(),
                    RecordType::CNAME,
                    "c3.chain.skydns.test.".into()
                ),
                ("c3.chain.skydns.test.".into(), RecordType::A, "10.0.2.1".into()),
            ]
        );
        assert!(
            reply.answers().iter().all(|r| r.ttl() == 30),
            "several answers share the smallest TTL"
        );
        let cname = s.udp("c1.chain.skydns.test.", RecordType::CNAME);
        assert_eq!(data(cname.answers()), set(&["c2.chain.skydns.test."]));
    }
}

#[test]
fn missing_names_are_nxdomain_and_missing_types_nodata_both_with_soa() {
    let s = server();
    let nx = s.udp("nope.skydns.test.", RecordType::A);
    assert_eq!(nx.response_code(), ResponseCode::NXDomain);
    assert!(nx.authoritative());
    assert_eq!(nx.name_servers()[0].record_type(), RecordType::SOA);
    assert_eq!(nx.name_servers()[0].ttl(), 60);
    let nodata = s.udp("web1.a.skydns.test.", RecordType::TXT);
    assert_eq!(nodata.response_code(), ResponseCode::NoError);
    assert!(nodata.answers().is_empty() && nodata.authoritative());
    assert_eq!(nodata.name_servers()[0].record_type(), RecordType::SOA);
}

#[test]
fn wildcard_labels_match_any_label_at_their_position() {
    let s = server();
    let reply = s.udp("*.region1.skydns.test.", RecordType::A);
    assert_eq!(
        data(reply.answers()),
        set(&["10.0.4.1", "10.0.4.2", "10.0.4.3", "10.0.4.4"])
    );
    assert_eq!(reply.answers()[0].name().to_ascii(), "*.region1.skydns.test.");
    let reply = s.udp("production.any.skydns.test.", RecordType::A);
    assert_eq!(data(reply.answers()), set(&["10.0.4.3", "10.0.4.4"]));
    let reply = s.udp("*.nowhere.skydns.test.", RecordType::A);
    assert_eq!(reply.response_code(), ResponseCode::NXDomain);
}

#[test]
fn groups_keep_the_shallowest_group_and_ungrouped_records() {
    let s = server();
    let reply = s.udp("grp.skydns.test.", RecordType::A);
    assert_eq!(data(reply.answers()), set(&["10.0.3.1", "10.0.3.3"]));
}

#[test]
fn ptr_answers_come_from_the_arpa_tree() {
    let s = server();
    let reply = s.udp("1.0.0.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(data(reply.answers()), set(&["web1.a.skydns.test."]));
}

#[test]
fn apex_answers_soa_and_ns_with_glue() {
    let s = server();
    let soa = s.udp("skydns.test.", RecordType::SOA);
    let RData::SOA(soa) = soa.answers()[0].data().unwrap() else {
        panic!("SOA expected")
    };
    assert_eq!(soa.mname().to_ascii(), "ns.dns.skydns.test.");
    assert_eq!(soa.rname().to_ascii(), "hostmaster.skydns.test.");
    assert_eq!(soa.minimum(), 60);
    let ns = s.udp("skydns.test.", RecordType::NS);
    assert_eq!(data(ns.answers()), set(&["ns1.ns.dns.skydns.test."]));
    assert_eq!(data(ns.additionals()), set(&["10.0.9.1"]));
}

#[test]
fn a_bad_record_is_skipped_and_its_neighbours_still_serve() {
    let s = server();
    let reply = s.udp("bad.skydns.test.", RecordType::A);
    assert_eq!(data(reply.answers()), set(&["10.0.5.2"]));
}

#[test]
fn truncated_udp_answers_are_complete_over_tcp() {
    let s = server();
    let udp = s.udp_plain("big.skydns.test.", RecordType::A);
    assert!(udp.truncated());
    let tcp = s.tcp("big.skydns.test.", RecordType::A);
    assert!(!tcp.truncated());
    assert_eq!(tcp.answers().len(), 40);
}

#[test]
fn edns_is_echoed_with_1232_advertised() {
    let s = server();
    let reply = s.udp("web1.a.skydns.test.", RecordType::A);
    assert_eq!(reply.extensions().as_ref().expect("OPT echoed").max_payload(), 1232);
    let plain = s.udp_plain("web1.a.skydns.test.", RecordType::A);
    assert!(plain.extensions().is_none());
}

#[test]
fn mixed_case_names_are_echoed_and_owners_keep_the_case() {
    let s = server();
    let q = query("WeB1.A.SkyDNS.TeSt.", RecordType::A, None);
    let reply = udp_query(s.addr, &q);
    assert_eq!(reply.queries()[0].name().to_ascii(), "WeB1.A.SkyDNS.TeSt.");
    assert_eq!(reply.answers()[0].name().to_ascii(), "WeB1.A.SkyDNS.TeSt.");
}

#[test]
fn names_outside_the_domain_are_refused() {
    let s = server();
    assert_eq!(
        s.udp("example.org.", RecordType::A).response_code(),
        ResponseCode::Refused
    );
}

#[test]
fn dig_reads_the_same_answers() {
    if !tool("dig", "dnsutils") {
        return;
    }
    let s = server();
    assert_eq!(dig(s.addr, &["+short", "web1.a.skydns.test", "A"]), vec!["10.0.0.1"]);
    let srv = dig(s.addr, &["+short", "web1.a.skydns.test", "SRV"]);
    assert_eq!(srv, vec!["10 100 80 web1.a.skydns.test."]);
    let tcp = dig(s.addr, &["+tcp", "+short", "big.skydns.test", "A"]);
    assert_eq!(tcp.len(), 40);
}

/// A name whose records hold an address and a name answers both addresses, never a CNAME; a name
/// pointing outside the domain that nothing completes (this server forwards nothing) is NODATA
/// with the SOA, over UDP and TCP.
#[test]
fn a_name_of_addresses_and_names_answers_every_address_and_an_incomplete_one_is_nodata() {
    let mut data_ = serde_json::from_str::<serde_json::Value>(&records()).unwrap();
    data_["/skydns/test/skydns/mixed/ip"] = serde_json::json!({"host": "10.0.6.1"});
    data_["/skydns/test/skydns/mixed/name"] = serde_json::json!({"host": "c1.chain.skydns.test."});
    data_["/skydns/test/skydns/mixed/out"] = serde_json::json!({"host": "www.example.org."});
    data_["/skydns/test/skydns/out"] = serde_json::json!({"host": "www.example.org."});
    data_["/skydns/test/skydns/via"] = serde_json::json!({"host": "out.skydns.test."});
    let s = Skyline::start(&data_.to_string(), &[], &[]);
    for reply in [
        s.udp("mixed.skydns.test.", RecordType::A),
        s.tcp("mixed.skydns.test.", RecordType::A),
    ] {
        assert_eq!(reply.response_code(), ResponseCode::NoError);
        assert_eq!(data(reply.answers()), set(&["10.0.6.1", "10.0.2.1"]), "{reply:?}");
        assert!(reply
            .answers()
            .iter()
            .all(|r| r.record_type() == RecordType::A && r.name().to_ascii() == "mixed.skydns.test."));
    }
    for name in ["out.skydns.test.", "via.skydns.test."] {
        for reply in [s.udp(name, RecordType::A), s.tcp(name, RecordType::AAAA)] {
            assert_eq!(reply.response_code(), ResponseCode::NoError, "{name}");
            assert!(reply.answers().is_empty(), "{name}: {reply:?}");
            assert!(
                reply.name_servers().iter().any(|r| r.record_type() == RecordType::SOA),
                "{name}: NODATA with the SOA"
            );
        }
    }
}

/// Clients of the views tests: 127.0.0.2 has a list of its own, 127.0.0.3 shares one with
/// 127.0.0.0/30, 127.0.0.5 matches no prefix.
const ALONE: std::net::Ipv4Addr = std::net::Ipv4Addr::new(127, 0, 0, 2);
const NEIGHBOUR: std::net::Ipv4Addr = std::net::Ipv4Addr::new(127, 0, 0, 3);
const STRANGER: std::net::Ipv4Addr = std::net::Ipv4Addr::new(127, 0, 0, 5);

fn views_records() -> String {
    serde_json::json!({
        "/skydns/config": {"domain": "skydns.test.", "ttl": 3600, "min_ttl": 60},
        "/skydns/test/skydns/web": {
            "default": [{"host": "10.9.0.1"}],
            "127.0.0.0/30": [{"host": "10.3.0.1"}, {"host": "10.3.0.2"}],
            "127.0.0.2/32": [{"host": "10.2.0.1"}],
            "2001:db8::/32": [{"host": "10.6.0.1"}],
            "127.0.0.0/99": [{"host": "10.99.0.1"}]
        },
        "/skydns/test/skydns/union": {
            "127.0.0.2/32": [{"host": "10.2.1.1"}],
            "127.0.0.3/32": [{"host": "10.2.1.2"}, {"host": "10.2.1.1"}]
        },
        "/skydns/test/skydns/dir/plain": {"host": "10.0.0.1"},
        "/skydns/test/skydns/dir/viewed": {
            "default": [{"host": "10.0.0.9"}],
            "127.0.0.2/31": [{"host": "10.0.0.2"}, {"host": "10.0.0.1"}]
        },
        "/skydns/test/skydns/svc": {
            "default": [{"host": "10.5.0.1", "port": 80, "text": "outside"}],
            "127.0.0.2/32": [{"host": "10.5.0.2", "port": 8080, "text": "inside"}]
        },
        "/skydns/test/skydns/alias": {"host": "web.skydns.test."},
        "/skydns/arpa/in-addr/10/0/0/1": {
            "default": [{"host": "public.skydns.test."}],
            "127.0.0.2/32": [{"host": "private.skydns.test."}]
        }
    })
    .to_string()
}

/// Asks `name` from `client` over UDP and over TCP and returns the data of the answer records,
/// sorted, after checking both transports agree.
fn from(s: &Skyline, client: std::net::Ipv4Addr, name: &str, rtype: RecordType) -> BTreeSet<String> {
    let udp = s.udp_from(client, name, rtype);
    let tcp = s.tcp_from(client, name, rtype);
    assert_eq!(
        udp.response_code(),
        ResponseCode::NoError,
        "{name} {rtype} from {client}"
    );
    assert_eq!(
        data(udp.answers()),
        data(tcp.answers()),
        "{name} {rtype} from {client}: UDP and TCP"
    );
    data(udp.answers())
}

#[test]
fn views_answer_each_client_from_the_list_of_its_longest_prefix() {
    let s = Skyline::start(&views_records(), &common::HTTP_ANY_PORT, &[]);
    assert_eq!(from(&s, ALONE, "web.skydns.test.", RecordType::A), set(&["10.2.0.1"]));
    assert_eq!(
        from(&s, NEIGHBOUR, "web.skydns.test.", RecordType::A),
        set(&["10.3.0.1", "10.3.0.2"])
    );
    assert_eq!(
        from(&s, STRANGER, "web.skydns.test.", RecordType::A),
        set(&["10.9.0.1"])
    );
    assert_eq!(
        from(&s, STRANGER, "union.skydns.test.", RecordType::A),
        set(&["10.2.1.1", "10.2.1.2"]),
        "without a default, the union of every list"
    );
    assert_eq!(from(&s, ALONE, "union.skydns.test.", RecordType::A), set(&["10.2.1.1"]));
    assert!(
        s.log_text().contains("127.0.0.0/99"),
        "the malformed prefix is logged: {}",
        s.log_text()
    );
    let (_, metrics) = common::http_get(s.http_addr(), "/metrics").unwrap();
    assert_eq!(
        common::metric_value(&metrics, "skyline_source_records_rejected{source=\"records_file\"}"),
        Some(1.0),
        "the malformed prefix is counted"
    );
}

#[test]
fn a_directory_answers_the_union_of_its_records_and_names_pointing_into_views_follow_them() {
    let s = Skyline::start(&views_records(), &[], &[]);
    assert_eq!(
        from(&s, NEIGHBOUR, "dir.skydns.test.", RecordType::A),
        set(&["10.0.0.1", "10.0.0.2"])
    );
    assert_eq!(
        from(&s, STRANGER, "dir.skydns.test.", RecordType::A),
        set(&["10.0.0.1", "10.0.0.9"])
    );
    let reply = s.udp_from(NEIGHBOUR, "dir.skydns.test.", RecordType::A);
    assert_eq!(reply.answers().len(), 2, "10.0.0.1 once: {reply:?}");
    assert_eq!(from(&s, ALONE, "alias.skydns.test.", RecordType::A), set(&["10.2.0.1"]));
    assert_eq!(
        from(&s, STRANGER, "alias.skydns.test.", RecordType::A),
        set(&["10.9.0.1"])
    );
}

#[test]
fn srv_txt_and_ptr_come_from_the_clients_list() {
    let s = Skyline::start(&views_records(), &[], &[]);
    assert_eq!(
        from(&s, ALONE, "svc.skydns.test.", RecordType::SRV),
        set(&["10 100 8080 svc.skydns.test."])
    );
    assert_eq!(
        from(&s, STRANGER, "svc.skydns.test.", RecordType::SRV),
        set(&["10 100 80 svc.skydns.test."])
    );
    let glue = s.tcp_from(ALONE, "svc.skydns.test.", RecordType::SRV);
    assert_eq!(data(glue.additionals()), set(&["10.5.0.2"]));
    assert_eq!(from(&s, ALONE, "svc.skydns.test.", RecordType::TXT), set(&["inside"]));
    assert_eq!(
        from(&s, NEIGHBOUR, "svc.skydns.test.", RecordType::TXT),
        set(&["outside"])
    );
    assert_eq!(
        from(&s, ALONE, "1.0.0.10.in-addr.arpa.", RecordType::PTR),
        set(&["private.skydns.test."])
    );
    assert_eq!(
        from(&s, NEIGHBOUR, "1.0.0.10.in-addr.arpa.", RecordType::PTR),
        set(&["public.skydns.test."])
    );
}

#[test]
fn views_follow_the_records_file_as_it_changes() {
    let s = Skyline::start(&views_records(), &[], &[]);
    assert_eq!(from(&s, ALONE, "web.skydns.test.", RecordType::A), set(&["10.2.0.1"]));
    let mut changed: serde_json::Value = serde_json::from_str(&views_records()).unwrap();
    changed["/skydns/test/skydns/web"]["127.0.0.2/32"] = serde_json::json!([{"host": "10.2.0.7"}]);
    changed["/skydns/test/skydns/plain"] = serde_json::json!({"default": [{"host": "10.8.0.1"}]});
    s.rewrite(&changed.to_string());
    common::eventually(
        std::time::Duration::from_secs(10),
        "the new list answers 127.0.0.2",
        || data(s.udp_from(ALONE, "web.skydns.test.", RecordType::A).answers()) == set(&["10.2.0.7"]),
    );
    assert_eq!(
        from(&s, NEIGHBOUR, "web.skydns.test.", RecordType::A),
        set(&["10.3.0.1", "10.3.0.2"])
    );
    assert_eq!(
        from(&s, STRANGER, "plain.skydns.test.", RecordType::A),
        set(&["10.8.0.1"])
    );
}

fn marker_records() -> String {
    serde_json::json!({
        "/skydns/config": {"domain": "skydns.test."},
        "/skydns/test/skydns/marked/.wildcards": "",
        "/skydns/test/skydns/marked/a": {"host": "10.0.0.1"},
        "/skydns/test/skydns/marked/b": {"host": "10.0.0.2"},
        "/skydns/test/skydns/plain/a": {"host": "10.0.1.1"},
        "/skydns/test/skydns/plain/b": {"host": "10.0.1.2"},
        "/skydns/test/skydns/dir/.self": {"host": "10.0.2.9"},
        "/skydns/test/skydns/dir/a": {"host": "10.0.2.1"},
        "/skydns/test/skydns/dir/b": {"host": "10.0.2.2"}
    })
    .to_string()
}

#[test]
fn a_directory_with_a_self_key_answers_that_record_alone() {
    let s = Skyline::start(&marker_records(), &[], &[]);
    for reply in [
        s.udp("dir.skydns.test.", RecordType::A),
        s.tcp("dir.skydns.test.", RecordType::A),
    ] {
        assert_eq!(data(reply.answers()), set(&["10.0.2.9"]), "{reply:?}");
    }
    assert_eq!(
        data(s.udp("a.dir.skydns.test.", RecordType::A).answers()),
        set(&["10.0.2.1"])
    );
    for name in ["\\.wildcards.marked.skydns.test.", "\\.self.dir.skydns.test."] {
        assert_eq!(
            s.udp(name, RecordType::A).response_code(),
            ResponseCode::NXDomain,
            "{name}: .self and .wildcards keys are no names"
        );
    }
}

#[test]
fn wildcards_keys_decide_which_directories_answer_under_the_flag() {
    let without = Skyline::start(&marker_records(), &[], &[]);
    let with = Skyline::start(&marker_records(), &["--wildcards-marker"], &[]);
    for name in ["marked.skydns.test.", "*.marked.skydns.test."] {
        for s in [&without, &with] {
            let reply = s.udp(name, RecordType::A);
            assert_eq!(
                data(reply.answers()),
                set(&["10.0.0.1", "10.0.0.2"]),
                "{name}: {reply:?}"
            );
        }
    }
    for name in ["plain.skydns.test.", "any.plain.skydns.test."] {
        assert_eq!(
            data(without.udp(name, RecordType::A).answers()),
            set(&["10.0.1.1", "10.0.1.2"]),
            "{name} without the flag"
        );
        for reply in [with.udp(name, RecordType::A), with.tcp(name, RecordType::A)] {
            assert_eq!(reply.response_code(), ResponseCode::NXDomain, "{name} under the flag");
            assert!(reply.authoritative());
        }
    }
    assert_eq!(
        data(with.udp("a.plain.skydns.test.", RecordType::A).answers()),
        set(&["10.0.1.1"])
    );
    assert_eq!(
        with.udp("dir.skydns.test.", RecordType::A).response_code(),
        ResponseCode::NXDomain,
        "the marker is looked at before .self"
    );
    assert_eq!(
        data(without.udp("skydns.test.", RecordType::A).answers()).len(),
        7,
        "a marker is never a record"
    );
}

/// docs/skydns-semantics.md, "Reverse names": a reverse key holding a view map answers PTR to
/// the clients whose list is one record; a client no prefix holds, in a map without `default`,
/// gets every list, several records, which are no answer: NXDOMAIN, without forwarding.
#[test]
fn a_reverse_view_map_answers_one_record_and_passes_on_several() {
    let records = serde_json::json!({
        "/skydns/config": {"domain": "skydns.test."},
        "/skydns/arpa/in-addr/10/0/0/7": {
            "127.0.0.2/32": [{"host": "alone.skydns.test."}],
            "127.0.0.3/32": [{"host": "neighbour.skydns.test."}]
        }
    })
    .to_string();
    let s = Skyline::start(&records, &[], &[]);
    let name = "7.0.0.10.in-addr.arpa.";
    assert_eq!(from(&s, ALONE, name, RecordType::PTR), set(&["alone.skydns.test."]));
    assert_eq!(
        from(&s, NEIGHBOUR, name, RecordType::PTR),
        set(&["neighbour.skydns.test."])
    );
    for reply in [
        s.udp_from(STRANGER, name, RecordType::PTR),
        s.tcp_from(STRANGER, name, RecordType::PTR),
    ] {
        assert_eq!(reply.response_code(), ResponseCode::NXDomain, "{reply:?}");
        assert!(reply.answers().is_empty() && !reply.authoritative(), "{reply:?}");
    }
    if tool("dig", "bind9-dnsutils") {
        let mut args = vec!["-b", "127.0.0.5", "+noall", "+comments", name, "PTR"];
        let said = dig(s.addr, &args).join("\n");
        assert!(said.contains("status: NXDOMAIN"), "{said}");
        args[1] = "127.0.0.2";
        args[3] = "+answer";
        let said = dig(s.addr, &args).join("\n");
        assert!(said.contains("PTR\talone.skydns.test."), "{said}");
    }
}

/// docs/skydns-semantics.md, "`.self` and `.wildcards`": under `--wildcards-marker` the marker
/// is looked at first, so a directory holding `.self` but no `.wildcards` does not exist, and one
/// holding both answers with its `.self` record.
#[test]
fn under_the_marker_flag_a_self_key_needs_a_wildcards_key() {
    let records = serde_json::json!({
        "/skydns/config": {"domain": "skydns.test."},
        "/skydns/test/skydns/bare/.self": {"host": "10.0.3.9"},
        "/skydns/test/skydns/bare/a": {"host": "10.0.3.1"},
        "/skydns/test/skydns/marked/.wildcards": "",
        "/skydns/test/skydns/marked/.self": {"host": "10.0.4.9"},
        "/skydns/test/skydns/marked/a": {"host": "10.0.4.1"}
    })
    .to_string();
    let with = Skyline::start(&records, &["--wildcards-marker"], &[]);
    for name in ["bare.skydns.test.", "*.bare.skydns.test."] {
        for reply in [with.udp(name, RecordType::A), with.tcp(name, RecordType::A)] {
            assert_eq!(reply.response_code(), ResponseCode::NXDomain, "{name}: {reply:?}");
            assert!(reply.authoritative());
        }
    }
    assert_eq!(
        data(with.udp("a.bare.skydns.test.", RecordType::A).answers()),
        set(&["10.0.3.1"])
    );
    assert_eq!(
        data(with.udp("marked.skydns.test.", RecordType::A).answers()),
        set(&["10.0.4.9"])
    );
    let without = Skyline::start(&records, &[], &[]);
    assert_eq!(
        data(without.udp("bare.skydns.test.", RecordType::A).answers()),
        set(&["10.0.3.9"]),
        "without the flag .self answers"
    );
    if tool("dig", "bind9-dnsutils") {
        let said = dig(with.addr, &["+noall", "+comments", "bare.skydns.test.", "A"]).join("\n");
        assert!(said.contains("status: NXDOMAIN"), "{said}");
    }
}
