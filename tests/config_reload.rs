//! SIGHUP re-reads the `--config` file on the real binary: settings that can change live (the
//! hostmaster, the upstreams, the cache) are in force at once while clients query without pause,
//! with no failed query and no readiness flap; an invalid file keeps what is in force and is
//! counted; a setting only a restart applies is named in the log; DNS Cookie secrets rotate.

mod common;
mod upstream;

use common::{a_of, http_get, metric_value, query, udp_query, Skyline, HTTP_ANY_PORT};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{RData, RecordType};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use upstream::{Script, Scripted, GOOD};

const RECORDS: &str = r#"{"/skydns/config": {"domain": "skydns.test."},
    "/skydns/test/skydns/web": {"host": "10.0.0.1"}}"#;

/// Writes the configuration file into the server's directory.
fn write_config(dir: &std::path::Path, text: &str) -> PathBuf {
    let path = dir.join("skyline.toml");
    let aside = dir.join("skyline.toml.tmp");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, &path).unwrap();
    path
}

fn settings(hostmaster: &str, upstream: SocketAddr, extra: &str) -> String {
    format!("hostmaster = \"{hostmaster}\"\nnameservers = [\"{upstream}\"]\n{extra}\n[cache]\nsize = \"4MiB\"\n")
}

/// Starts skyline on a configuration file written in a directory of the test's own.
fn start(text: &str) -> (Skyline, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), text);
    let mut args = vec!["--config", config.to_str().unwrap()];
    args.extend(HTTP_ANY_PORT);
    let server = Skyline::start(RECORDS, &args, &[]);
    (server, dir, config)
}

/// The SOA RNAME served for the zone.
fn hostmaster(server: &Skyline) -> String {
    let reply = server.udp("skydns.test.", RecordType::SOA);
    match reply.answers().first().and_then(|r| r.data()) {
        Some(RData::SOA(soa)) => soa.rname().to_ascii(),
        other => panic!("SOA expected, got {other:?}"),
    }
}

fn metrics(server: &Skyline) -> String {
    let (status, body) = http_get(server.http_addr(), "/metrics").expect("/metrics answers");
    assert_eq!(status, 200);
    body
}

/// Clients that query without pause (authoritative names and names to forward) and poll
/// `/ready`, counting every query that fails and every `/ready` that is not 200.
struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    not_ready: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(server: &Skyline) -> Load {
        let (addr, http) = (server.addr, server.http_addr());
        let stop = Arc::new(AtomicBool::new(false));
        let (sent, failed, not_ready): (Arc<AtomicU64>, Arc<AtomicU64>, Arc<AtomicU64>) = Default::default();
        let mut threads = Vec::new();
        for client in 0..2u32 {
            let (stop, sent, failed) = (Arc::clone(&stop), Arc::clone(&sent), Arc::clone(&failed));
            threads.push(std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let name = if n.is_multiple_of(4) {
                        format!("q{client}-{n}.example.org.")
                    } else {
                        "web.skydns.test.".to_owned()
                    };
                    let reply = udp_query(addr, &query(&name, RecordType::A, Some(1232)));
                    sent.fetch_add(1, Ordering::Relaxed);
                    if reply.response_code() != ResponseCode::NoError || reply.answers().is_empty() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        let (halt, flaps) = (Arc::clone(&stop), Arc::clone(&not_ready));
        threads.push(std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                if http_get(http, "/ready").map(|(status, _)| status) != Some(200) {
                    flaps.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }));
        Load {
            stop,
            sent,
            failed,
            not_ready,
            threads,
        }
    }

    /// Stops the clients; (queries sent, failed, `/ready` not 200).
    fn finish(self) -> (u64, u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            thread.join().unwrap();
        }
        (
            self.sent.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.not_ready.load(Ordering::Relaxed),
        )
    }
}

#[test]
fn a_valid_file_is_applied_under_load_without_a_failed_query() {
    let first = Scripted::start(Script::Address {
        ttl: 300,
        delay: Duration::ZERO,
    });
    let second = Scripted::start(Script::Address {
        ttl: 300,
        delay: Duration::ZERO,
    });
    let (server, dir, _) = start(&settings("ops.example.", first.addr, ""));
    assert_eq!(hostmaster(&server), "ops.example.");
    assert_eq!(a_of(&server.udp("before.example.org.", RecordType::A)), [GOOD]);
    assert_eq!(first.count("before.example.org."), 1);

    let load = Load::start(&server);
    std::thread::sleep(Duration::from_millis(300));
    write_config(dir.path(), &settings("dns-admin.example.", second.addr, ""));
    server.hup();
    common::eventually(Duration::from_secs(5), "the new hostmaster is served", || {
        hostmaster(&server) == "dns-admin.example."
    });
    std::thread::sleep(Duration::from_millis(300));
    let (sent, failed, not_ready) = load.finish();
    assert!(sent > 100, "the clients kept querying ({sent})");
    assert_eq!(failed, 0, "of {sent} queries across the reload");
    assert_eq!(not_ready, 0, "/ready stays 200 across a reload");

    assert_eq!(a_of(&server.udp("after.example.org.", RecordType::A)), [GOOD]);
    assert_eq!(second.count("after.example.org."), 1, "the new upstream is asked");
    assert_eq!(first.count("after.example.org."), 0, "the old one no longer");
    let body = metrics(&server);
    assert_eq!(
        metric_value(&body, r#"skyline_reloads_total{result="applied"}"#),
        Some(1.0)
    );
    assert_eq!(metric_value(&body, "coredns_reload_failed_total"), Some(0.0));
    assert_eq!(metric_value(&body, "skyline_reload_restart_pending"), Some(0.0));
    assert_eq!(server.log_count("changed settings apply only at restart"), 0);
}

#[test]
fn an_invalid_file_keeps_the_settings_in_force_and_is_counted() {
    let upstream = Scripted::start(Script::Address {
        ttl: 300,
        delay: Duration::ZERO,
    });
    let (server, dir, _) = start(&settings("ops.example.", upstream.addr, ""));
    let load = Load::start(&server);
    for broken in [
        "hostmaster = \"ops.example.\"\nno_such_key = 1\n".to_owned(),
        settings("not a name..", upstream.addr, ""),
        "hostmaster = [\n".to_owned(),
    ] {
        let rejected = server.log_count("configuration not reloaded");
        write_config(dir.path(), &broken);
        server.hup();
        common::eventually(Duration::from_secs(5), "the invalid file is reported", || {
            server.log_count("configuration not reloaded") > rejected
        });
        assert_eq!(hostmaster(&server), "ops.example.");
    }
    let (sent, failed, not_ready) = load.finish();
    assert_eq!(failed, 0, "of {sent} queries across invalid reloads");
    assert_eq!(not_ready, 0, "an invalid reload does not flap readiness");
    assert_eq!(a_of(&server.udp("still.example.org.", RecordType::A)), [GOOD]);
    let body = metrics(&server);
    assert_eq!(metric_value(&body, "coredns_reload_failed_total"), Some(3.0));
    assert_eq!(
        metric_value(&body, r#"skyline_reloads_total{result="rejected"}"#),
        Some(3.0)
    );
    assert_eq!(
        metric_value(&body, r#"skyline_reloads_total{result="applied"}"#),
        Some(0.0)
    );

    write_config(dir.path(), &settings("fixed.example.", upstream.addr, ""));
    server.hup();
    common::eventually(
        Duration::from_secs(5),
        "a valid file after invalid ones applies",
        || hostmaster(&server) == "fixed.example.",
    );
}

#[test]
fn a_setting_only_a_restart_applies_is_named_and_left_as_it_is() {
    let upstream = Scripted::start(Script::Address {
        ttl: 300,
        delay: Duration::ZERO,
    });
    let (server, dir, _) = start(&settings("ops.example.", upstream.addr, ""));
    write_config(
        dir.path(),
        &settings(
            "next.example.",
            upstream.addr,
            "tcp_max_connections = 7\ndrain = \"1s\"",
        ),
    );
    server.hup();
    common::eventually(Duration::from_secs(5), "the restart-only settings are named", || {
        server.log_count("changed settings apply only at restart") == 1
    });
    let line = server
        .log_text()
        .lines()
        .find(|l| l.contains("changed settings apply only at restart"))
        .unwrap()
        .to_owned();
    assert!(line.contains("drain") && line.contains("tcp_max_connections"), "{line}");
    assert!(!line.contains("hostmaster"), "{line}");
    common::eventually(Duration::from_secs(5), "the live setting still applies", || {
        hostmaster(&server) == "next.example."
    });
    assert_eq!(
        metric_value(&metrics(&server), "skyline_reload_restart_pending"),
        Some(1.0)
    );
}

/// A query for `web.skydns.test.` A with a COOKIE option of `cookie`.
fn cookie_query(cookie: &[u8]) -> Vec<u8> {
    let mut m = vec![0x4b, 0x1d, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
    m.extend_from_slice(b"\x03web\x06skydns\x04test\x00\x00\x01\x00\x01");
    m.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0]);
    m.extend_from_slice(&(4 + cookie.len() as u16).to_be_bytes());
    m.extend_from_slice(&[0, 10]);
    m.extend_from_slice(&(cookie.len() as u16).to_be_bytes());
    m.extend_from_slice(cookie);
    m
}

/// The reply to `cookie_query(cookie)`, and the COOKIE option it carries.
fn ask_with_cookie(server: &Skyline, cookie: &[u8]) -> (ResponseCode, Vec<u8>) {
    let raw = common::udp_raw(server.addr, &cookie_query(cookie), Duration::from_secs(2)).expect("a reply");
    let reply = Message::from_vec(&raw).expect("hickory parses the reply");
    let cookie = match reply.extensions().as_ref().and_then(|e| e.option(EdnsCode::Cookie)) {
        Some(EdnsOption::Unknown(10, data)) => data.clone(),
        other => panic!("no COOKIE option: {other:?}"),
    };
    (reply.response_code(), cookie)
}

#[test]
fn cookie_secrets_rotate_on_sighup_the_previous_one_still_accepted() {
    const A: &str = "000102030405060708090a0b0c0d0e0f";
    const B: &str = "101112131415161718191a1b1c1d1e1f";
    const C: &str = "202122232425262728292a2b2c2d2e2f";
    let cookies = |current: &str, previous: &str| {
        format!("[cookies]\nsecret = \"{current}\"\nsecret_previous = \"{previous}\"\n")
    };
    let (server, dir, _) = start(&format!("[cookies]\nsecret = \"{A}\"\n"));
    let (code, learnt) = ask_with_cookie(&server, b"rotation");
    assert_eq!((code, learnt.len()), (ResponseCode::NoError, 24));
    assert_eq!(
        ask_with_cookie(&server, &learnt),
        (ResponseCode::NoError, learnt.clone())
    );

    write_config(dir.path(), &cookies(B, A));
    server.hup();
    common::eventually(
        Duration::from_secs(5),
        "a cookie of the previous secret is accepted and renewed",
        || {
            let (code, renewed) = ask_with_cookie(&server, &learnt);
            code == ResponseCode::NoError && renewed != learnt
        },
    );
    let (_, renewed) = ask_with_cookie(&server, &learnt);

    write_config(dir.path(), &cookies(C, B));
    server.hup();
    common::eventually(
        Duration::from_secs(5),
        "a cookie of a secret no longer configured gets BADCOOKIE",
        || ask_with_cookie(&server, &learnt).0 == ResponseCode::BADCOOKIE,
    );
    assert_eq!(ask_with_cookie(&server, &renewed).0, ResponseCode::NoError);
}

#[test]
fn a_sighup_that_meets_a_broken_records_file_is_counted_as_rejected() {
    let (server, _dir, _) = start(&settings("ops.example.", "127.0.0.1:9".parse().unwrap(), ""));
    assert_eq!(a_of(&server.udp("web.skydns.test.", RecordType::A)).len(), 1);
    for broken in [r#"{"/skydns/test/skydns/web": "#, r#"["not", "an", "object"]"#] {
        let rejected = server.log_count("configuration not reloaded");
        server.rewrite(broken);
        server.hup();
        common::eventually(Duration::from_secs(5), "the broken records file is reported", || {
            server.log_count("configuration not reloaded") > rejected
        });
    }
    let line = server
        .log_text()
        .lines()
        .find(|l| l.contains("configuration not reloaded"))
        .unwrap()
        .to_owned();
    assert!(line.contains("records.json"), "the log names the file: {line}");
    let body = metrics(&server);
    assert_eq!(metric_value(&body, "coredns_reload_failed_total"), Some(2.0));
    assert_eq!(
        metric_value(&body, r#"skyline_reloads_total{result="rejected"}"#),
        Some(2.0)
    );
    assert_eq!(
        metric_value(&body, r#"skyline_reloads_total{result="applied"}"#),
        Some(0.0)
    );
    let reply = server.udp("web.skydns.test.", RecordType::A);
    assert_eq!(
        reply.response_code(),
        ResponseCode::NoError,
        "the records in force stay"
    );
    assert_eq!(a_of(&reply).len(), 1);
}
