//! End-to-end: the real binary serving SkyDNS records from a real etcd v3 (`--machines`), queried
//! over DNS with hickory-proto. Each test states one behaviour of the etcd source: sync, live
//! changes, leases, settings, bad values, and every etcd fault (killed, restarted, compacted,
//! unreachable, not yet started), each bounded in time by polling with deadlines.

mod common;
mod etcd_harness;

use common::{eventually, Skyline};
use etcd_harness::{
    addresses, etcd_available, free_port, set, start_skyline, wait_for, wait_for_rcode, Etcd, EtcdClient, Pki, Proxy,
    VISIBLE,
};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use std::time::{Duration, Instant};

const CONFIG: &str = r#"{"domain":"skydns.test.","ttl":120,"min_ttl":30}"#;

#[test]
fn the_initial_sync_serves_what_etcd_holds_with_its_settings() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    client.put("/skydns/test/skydns/web/a", r#"{"host":"10.0.0.1","port":80}"#);
    client.put("/skydns/test/skydns/web/b", r#"{"host":"10.0.0.2","port":8080}"#);
    client.put("/skydns/test/skydns/txt", r#"{"text":"hello"}"#);
    let s = start_skyline(&etcd.endpoint());
    wait_for(&s, "web.skydns.test.", &["10.0.0.1", "10.0.0.2"]);
    let reply = s.udp("a.web.skydns.test.", RecordType::A);
    assert!(reply.authoritative());
    assert_eq!(reply.answers()[0].ttl(), 120, "ttl from /skydns/config");
    let srv = s.udp("web.skydns.test.", RecordType::SRV);
    assert_eq!(srv.answers().len(), 2);
    let txt = s.udp("txt.skydns.test.", RecordType::TXT);
    assert_eq!(txt.answers()[0].data().unwrap().to_string(), "hello");
    assert_eq!(
        s.udp("missing.skydns.test.", RecordType::A).response_code(),
        ResponseCode::NXDomain
    );
}

#[test]
fn a_prefix_of_many_pages_is_read_whole_at_one_revision() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    // Three pages of the range read and a part of a fourth, 12 directories of 1,001 records.
    let pairs: Vec<(String, String)> = (0..12_012u32)
        .map(|i| {
            let key = format!("/skydns/test/skydns/d{:02}/r{:04}", i / 1001, i % 1001);
            (
                key,
                format!(r#"{{"host":"10.{}.{}.{}"}}"#, i >> 16, (i >> 8) & 0xFF, i & 0xFF),
            )
        })
        .collect();
    client.put_all(&pairs);
    let s = start_skyline(&etcd.endpoint());
    for i in [0u32, 4_999, 5_000, 5_001, 10_000, 12_011] {
        let name = format!("r{:04}.d{:02}.skydns.test.", i % 1001, i / 1001);
        let address = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 0xFF, i & 0xFF);
        wait_for(&s, &name, &[address.as_str()]);
    }
    let reply = s.tcp("d11.skydns.test.", RecordType::A);
    assert_eq!(reply.answers().len(), 1001, "every record of the last directory");
}

#[test]
fn a_directory_of_thousands_of_records_follows_a_change_below_it_after_a_catch_up() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    // More records than an update compiles a name with at once (LARGE, 4,096).
    let mut pairs: Vec<(String, String)> = (0..5_000u32)
        .map(|i| {
            let key = format!("/skydns/test/skydns/big/r{i:04}");
            (
                key,
                format!(r#"{{"host":"10.{}.{}.{}"}}"#, i >> 16, (i >> 8) & 0xFF, i & 0xFF),
            )
        })
        .collect();
    pairs.push(("/skydns/test/skydns/big/note".into(), r#"{"text":"v1"}"#.into()));
    client.put_all(&pairs);
    let s = start_skyline(&etcd.endpoint());
    let text = |name: &str| {
        let reply = s.tcp(name, RecordType::TXT);
        let texts: Vec<String> = reply
            .answers()
            .iter()
            .filter_map(|r| r.data().map(|d| d.to_string()))
            .collect();
        texts
    };
    eventually(VISIBLE, "the first sync", || text("big.skydns.test.") == ["v1"]);
    client.put("/skydns/test/skydns/big/note", r#"{"text":"v2"}"#);
    client.put("/skydns/test/skydns/big/r0007", r#"{"host":"10.255.0.7"}"#);
    wait_for(&s, "r0007.big.skydns.test.", &["10.255.0.7"]);
    eventually(VISIBLE, "the directory's catch-up", || {
        text("big.skydns.test.") == ["v2"]
    });
    eventually(VISIBLE, "the domain's catch-up", || text("skydns.test.") == ["v2"]);
    assert_eq!(text("note.big.skydns.test."), ["v2"]);
}

#[test]
fn puts_updates_and_deletes_show_in_answers() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    let s = start_skyline(&etcd.endpoint());
    wait_for_rcode(&s, "new.skydns.test.", ResponseCode::NXDomain);
    client.put("/skydns/test/skydns/new", r#"{"host":"10.1.0.1"}"#);
    wait_for(&s, "new.skydns.test.", &["10.1.0.1"]);
    client.put("/skydns/test/skydns/new", r#"{"host":"10.1.0.2"}"#);
    wait_for(&s, "new.skydns.test.", &["10.1.0.2"]);
    client.delete("/skydns/test/skydns/new");
    wait_for_rcode(&s, "new.skydns.test.", ResponseCode::NXDomain);
}

#[test]
fn a_leased_record_answers_at_most_its_remaining_lease_and_goes_with_it() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    let s = start_skyline(&etcd.endpoint());
    wait_for_rcode(&s, "leased.skydns.test.", ResponseCode::NXDomain);
    let granted = Instant::now();
    client.put_leased("/skydns/test/skydns/leased", r#"{"host":"10.2.0.1","ttl":60}"#, 3);
    wait_for(&s, "leased.skydns.test.", &["10.2.0.1"]);
    let first = s.udp("leased.skydns.test.", RecordType::A).answers()[0].ttl();
    assert!((1..=3).contains(&first), "TTL {first} is min(60, lease of 3 s)");
    wait_for_rcode(&s, "leased.skydns.test.", ResponseCode::NXDomain);
    assert!(
        granted.elapsed() >= Duration::from_secs(2),
        "gone only when the lease expired, after {:?}",
        granted.elapsed()
    );
}

#[test]
fn bad_values_are_skipped_once_and_their_neighbours_still_serve() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    client.put("/skydns/test/skydns/mixed/good", r#"{"host":"10.3.0.1"}"#);
    client.put("/skydns/test/skydns/mixed/notjson", "not json at all");
    client.put("/skydns/test/skydns/mixed/types", r#"{"host":"10.3.0.2","port":"80"}"#);
    let s = start_skyline(&etcd.endpoint());
    wait_for(&s, "mixed.skydns.test.", &["10.3.0.1"]);
    client.put("/skydns/test/skydns/mixed/badip", r#"{"host":"10.3.0.300"}"#);
    client.put("/skydns/test/skydns/mixed/later", r#"{"host":"10.3.0.4"}"#);
    wait_for(&s, "mixed.skydns.test.", &["10.3.0.1", "10.3.0.4"]);
    for bad in ["notjson", "types", "badip"] {
        assert_eq!(
            s.udp(&format!("{bad}.mixed.skydns.test."), RecordType::A)
                .response_code(),
            ResponseCode::NXDomain,
            "{bad}"
        );
        assert_eq!(
            s.log_count(&format!("key=/skydns/test/skydns/mixed/{bad} ")),
            1,
            "{bad} logged once:\n{}",
            s.log_text()
        );
    }
}

#[test]
fn etcd_killed_leaves_answers_unchanged_and_its_restart_brings_later_changes() {
    if !etcd_available() {
        return;
    }
    let mut etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    client.put("/skydns/test/skydns/svc/a", r#"{"host":"10.4.0.1"}"#);
    let s = start_skyline(&etcd.endpoint());
    wait_for(&s, "svc.skydns.test.", &["10.4.0.1"]);
    drop(client);
    etcd.kill();
    let frozen = Instant::now() + Duration::from_secs(2);
    while Instant::now() < frozen {
        let reply = s.udp("a.svc.skydns.test.", RecordType::A);
        assert_eq!(reply.response_code(), ResponseCode::NoError);
        assert_eq!(addresses(&reply), set(&["10.4.0.1"]));
        assert_eq!(
            s.udp("missing.skydns.test.", RecordType::A).response_code(),
            ResponseCode::NXDomain
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    etcd.restart();
    etcd.wait_healthy();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/test/skydns/svc/b", r#"{"host":"10.4.0.2"}"#);
    wait_for(&s, "svc.skydns.test.", &["10.4.0.1", "10.4.0.2"]);
}

#[test]
fn a_compacted_watch_revision_forces_a_full_resync() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let proxy = Proxy::start(etcd.client_port);
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    client.put("/skydns/test/skydns/gen/a", r#"{"host":"10.5.0.1"}"#);
    client.put("/skydns/test/skydns/gen/b", r#"{"host":"10.5.0.2"}"#);
    let s = start_skyline(&proxy.endpoint());
    wait_for(&s, "gen.skydns.test.", &["10.5.0.1", "10.5.0.2"]);
    proxy.cut();
    client.put("/skydns/test/skydns/gen/c", r#"{"host":"10.5.0.3"}"#);
    client.delete("/skydns/test/skydns/gen/a");
    client.put("/skydns/test/skydns/gen/b", r#"{"host":"10.5.0.22"}"#);
    client.compact(client.revision());
    wait_for(&s, "gen.skydns.test.", &["10.5.0.1", "10.5.0.2"]);
    proxy.restore();
    wait_for(&s, "gen.skydns.test.", &["10.5.0.22", "10.5.0.3"]);
    assert!(
        s.log_count("is compacted") >= 1,
        "the resync came from compaction:\n{}",
        s.log_text()
    );
    assert_eq!(s.log_count("etcd prefix /skydns/ read"), 2, "{}", s.log_text());
}

#[test]
fn started_before_etcd_it_answers_servfail_then_serves_once_synced() {
    if !etcd_available() {
        return;
    }
    let port = free_port();
    let s = start_skyline(&format!("http://127.0.0.1:{port}"));
    for name in ["web.skydns.local.", "missing.skydns.local.", "skydns.local."] {
        assert_eq!(
            s.udp(name, RecordType::A).response_code(),
            ResponseCode::ServFail,
            "{name}: never NXDOMAIN before the first sync"
        );
    }
    let etcd = Etcd::start_on(port);
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/local/skydns/web", r#"{"host":"10.6.0.1"}"#);
    wait_for(&s, "web.skydns.local.", &["10.6.0.1"]);
    assert_eq!(
        s.udp("missing.skydns.local.", RecordType::A).response_code(),
        ResponseCode::NXDomain
    );
}

#[test]
fn settings_in_etcd_apply_live_and_restart_only_ones_are_reported() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    client.put("/skydns/test/skydns/web", r#"{"host":"10.7.0.1"}"#);
    client.put("/skydns/test/other/web", r#"{"host":"10.7.0.2"}"#);
    let s = start_skyline(&etcd.endpoint());
    wait_for(&s, "web.skydns.test.", &["10.7.0.1"]);
    client.put("/skydns/config", r#"{"domain":"skydns.test.","ttl":45}"#);
    eventually(VISIBLE, "ttl 45 from /skydns/config", || {
        s.udp("web.skydns.test.", RecordType::A)
            .answers()
            .first()
            .is_some_and(|r| r.ttl() == 45)
    });
    client.put(
        "/skydns/config",
        r#"{"domain":"other.test.","dns_addr":"127.0.0.1:1","ndot":5}"#,
    );
    wait_for(&s, "web.other.test.", &["10.7.0.2"]);
    assert_eq!(
        s.udp("web.skydns.test.", RecordType::A).response_code(),
        ResponseCode::Refused,
        "the old domain is no longer served"
    );
    eventually(VISIBLE, "ndot reported as needing a restart", || {
        s.log_count("apply only at restart") == 1
    });
    let report = s.log_text();
    assert!(
        report
            .lines()
            .any(|l| l.contains("apply only at restart") && l.ends_with(" settings=ndot")),
        "--addr wins over dns_addr: {report}"
    );
}

#[test]
fn stub_zone_records_are_read_into_the_stub_list() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    let s = start_skyline(&etcd.endpoint());
    wait_for_rcode(&s, "skydns.test.", ResponseCode::NoError);
    client.put(
        "/skydns/test/skydns/dns/stub/com/example/ns1",
        r#"{"host":"172.16.1.1","port":54}"#,
    );
    eventually(VISIBLE, "the stub zone is logged", || {
        s.log_count("example.com. → 172.16.1.1:54") == 1
    });
}

#[test]
fn username_and_password_from_the_environment_authenticate() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    EtcdClient::connect(&[etcd.endpoint()]).enable_auth("rootpw");
    let client = EtcdClient::connect_as(&[etcd.endpoint()], "root", "rootpw");
    client.put("/skydns/config", CONFIG);
    client.put("/skydns/test/skydns/auth", r#"{"host":"10.8.0.1"}"#);
    let s = Skyline::start_with(
        &["--no-rec"],
        &[
            ("ETCD_MACHINES", &etcd.endpoint()),
            ("ETCD_USERNAME", "root"),
            ("ETCD_PASSWORD", "rootpw"),
        ],
    );
    wait_for(&s, "auth.skydns.test.", &["10.8.0.1"]);
    client.put("/skydns/test/skydns/auth", r#"{"host":"10.8.0.2"}"#);
    wait_for(&s, "auth.skydns.test.", &["10.8.0.2"]);
    assert!(!s.log_text().contains("rootpw"), "the password is never logged");
}

#[test]
fn tls_with_client_certificates_connects_to_an_https_only_etcd() {
    if !etcd_available() {
        return;
    }
    let pki = Pki::generate();
    let etcd = Etcd::start_tls(&pki);
    let client = EtcdClient::connect_tls(&[etcd.endpoint()], &pki);
    client.put("/skydns/config", CONFIG);
    client.put("/skydns/test/skydns/tls", r#"{"host":"10.10.0.1"}"#);
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let s = Skyline::start_with(
        &[
            "--machines",
            &etcd.endpoint(),
            "--no-rec",
            "--tls-pem",
            &path(&pki.client_cert),
            "--tls-key",
            &path(&pki.client_key),
        ],
        &[("ETCD_CACERT", &path(&pki.ca))],
    );
    wait_for(&s, "tls.skydns.test.", &["10.10.0.1"]);
    client.put("/skydns/test/skydns/tls", r#"{"host":"10.10.0.2"}"#);
    wait_for(&s, "tls.skydns.test.", &["10.10.0.2"]);
}

/// Waits until `name` answers A with exactly `expected` to a client at `from`.
fn wait_for_from(s: &Skyline, from: std::net::Ipv4Addr, name: &str, expected: &[&str]) {
    eventually(VISIBLE, &format!("{name} A from {from} → {expected:?}"), || {
        let reply = s.udp_from(from, name, RecordType::A);
        reply.response_code() == ResponseCode::NoError && addresses(&reply) == set(expected)
    });
    let tcp = s.tcp_from(from, name, RecordType::A);
    assert_eq!(addresses(&tcp), set(expected), "{name} A from {from} over TCP");
}

#[test]
fn view_maps_changed_in_etcd_answer_each_client_from_its_list() {
    if !etcd_available() {
        return;
    }
    let (alone, neighbour, stranger) = (
        std::net::Ipv4Addr::new(127, 0, 0, 2),
        std::net::Ipv4Addr::new(127, 0, 0, 3),
        std::net::Ipv4Addr::new(127, 0, 0, 5),
    );
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    client.put(
        "/skydns/test/skydns/web",
        r#"{"default": [{"host": "10.9.0.1"}], "127.0.0.0/30": [{"host": "10.3.0.1"}],
            "127.0.0.2/32": [{"host": "10.2.0.1"}]}"#,
    );
    client.put("/skydns/test/skydns/dir/plain", r#"{"host": "10.0.0.1"}"#);
    let s = start_skyline(&etcd.endpoint());
    wait_for_from(&s, alone, "web.skydns.test.", &["10.2.0.1"]);
    wait_for_from(&s, neighbour, "web.skydns.test.", &["10.3.0.1"]);
    wait_for_from(&s, stranger, "web.skydns.test.", &["10.9.0.1"]);
    // A list changed, a prefix added, a view map put beside plain records.
    client.put(
        "/skydns/test/skydns/web",
        r#"{"default": [{"host": "10.9.0.2"}], "127.0.0.0/30": [{"host": "10.3.0.1"}],
            "127.0.0.2/32": [{"host": "10.2.0.2"}], "127.0.0.4/30": [{"host": "10.4.0.1"}]}"#,
    );
    client.put(
        "/skydns/test/skydns/dir/viewed",
        r#"{"127.0.0.2/32": [{"host": "10.0.0.2"}], "default": []}"#,
    );
    wait_for_from(&s, alone, "web.skydns.test.", &["10.2.0.2"]);
    wait_for_from(&s, stranger, "web.skydns.test.", &["10.4.0.1"]);
    wait_for_from(&s, neighbour, "web.skydns.test.", &["10.3.0.1"]);
    wait_for_from(&s, alone, "dir.skydns.test.", &["10.0.0.1", "10.0.0.2"]);
    wait_for_from(&s, neighbour, "dir.skydns.test.", &["10.0.0.1"]);
    // A CNAME into the view map is compiled again when the map changes.
    client.put("/skydns/test/skydns/alias", r#"{"host": "web.skydns.test."}"#);
    wait_for_from(&s, alone, "alias.skydns.test.", &["10.2.0.2"]);
    client.put("/skydns/test/skydns/web", r#"{"127.0.0.2/32": [{"host": "10.2.0.3"}]}"#);
    wait_for_from(&s, alone, "alias.skydns.test.", &["10.2.0.3"]);
    wait_for_from(&s, stranger, "alias.skydns.test.", &["10.2.0.3"]);
    // Back to a plain record: no client's answer depends on its address any more.
    client.put("/skydns/test/skydns/web", r#"{"host": "10.1.0.1"}"#);
    wait_for_from(&s, alone, "web.skydns.test.", &["10.1.0.1"]);
    wait_for_from(&s, stranger, "alias.skydns.test.", &["10.1.0.1"]);
}

#[test]
fn self_keys_and_wildcards_markers_change_live_in_etcd() {
    if !etcd_available() {
        return;
    }
    let etcd = Etcd::start();
    let client = EtcdClient::connect(&[etcd.endpoint()]);
    client.put("/skydns/config", CONFIG);
    client.put("/skydns/test/skydns/dir/a", r#"{"host": "10.0.0.1"}"#);
    client.put("/skydns/test/skydns/dir/b", r#"{"host": "10.0.0.2"}"#);
    let s = Skyline::start_with(&["--machines", &etcd.endpoint(), "--no-rec", "--wildcards-marker"], &[]);
    wait_for(&s, "a.dir.skydns.test.", &["10.0.0.1"]);
    wait_for_rcode(&s, "dir.skydns.test.", ResponseCode::NXDomain);
    client.put("/skydns/test/skydns/dir/.wildcards", "marked");
    wait_for(&s, "dir.skydns.test.", &["10.0.0.1", "10.0.0.2"]);
    wait_for(&s, "*.dir.skydns.test.", &["10.0.0.1", "10.0.0.2"]);
    client.put("/skydns/test/skydns/dir/.self", r#"{"host": "10.0.0.9"}"#);
    wait_for(&s, "dir.skydns.test.", &["10.0.0.9"]);
    client.delete("/skydns/test/skydns/dir/.self");
    wait_for(&s, "dir.skydns.test.", &["10.0.0.1", "10.0.0.2"]);
    client.delete("/skydns/test/skydns/dir/.wildcards");
    wait_for_rcode(&s, "dir.skydns.test.", ResponseCode::NXDomain);
    wait_for_rcode(&s, "*.dir.skydns.test.", ResponseCode::NXDomain);
    wait_for(&s, "b.dir.skydns.test.", &["10.0.0.2"]);
}
