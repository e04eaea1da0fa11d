//! End-to-end tests of the observation flags on the real binary: the top talkers read from
//! `/metrics` after queries of a known distribution, the query log on stderr with its rate
//! limit, and `--check-config` naming the settings in force.

mod common;

use common::{eventually, http_get, metric_value, Skyline, HTTP_ANY_PORT};
use hickory_proto::rr::RecordType;
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

const RECORDS: &str = r#"{
  "/skydns/local/skydns/web": {"host": "10.0.0.1"},
  "/skydns/local/skydns/api": {"host": "10.0.0.2"},
  "/skydns/local/skydns/db": {"host": "10.0.0.3"}
}"#;

fn metrics(skyline: &Skyline) -> String {
    let (status, body) = http_get(skyline.http_addr(), "/metrics").expect("/metrics answers");
    assert_eq!(status, 200);
    body
}

#[test]
fn the_top_talkers_reach_the_metrics_endpoint_with_fixed_cardinality() {
    let mut args = vec!["--top-talkers", "--top-talkers-k", "2"];
    args.extend(HTTP_ANY_PORT);
    let skyline = Skyline::start(RECORDS, &args, &[]);
    // Clients 127.0.0.2..4 ask 12, 7 and 3 times; web. 13 times, api. 6, db. 3.
    let plan: [(u8, &[(&str, usize)]); 3] = [
        (2, &[("web.skydns.local.", 9), ("api.skydns.local.", 3)]),
        (3, &[("web.skydns.local.", 4), ("api.skydns.local.", 3)]),
        (4, &[("db.skydns.local.", 3)]),
    ];
    for (last, names) in plan {
        for (name, n) in names {
            for _ in 0..*n {
                skyline.udp_from(Ipv4Addr::new(127, 0, 0, last), name, RecordType::A);
            }
        }
    }
    let top_client = r#"skyline_top_clients{rank="1",client="127.0.0.2"}"#;
    eventually(Duration::from_secs(10), "the top talkers are published", || {
        metric_value(&metrics(&skyline), top_client) == Some(12.0)
            && metric_value(
                &metrics(&skyline),
                r#"skyline_top_clients{rank="2",client="127.0.0.3"}"#,
            ) == Some(7.0)
    });
    let text = metrics(&skyline);
    assert_eq!(
        metric_value(&text, r#"skyline_top_names{rank="1",name="web.skydns.local."}"#),
        Some(13.0),
        "{text}"
    );
    assert_eq!(
        metric_value(&text, r#"skyline_top_names{rank="2",name="api.skydns.local."}"#),
        Some(6.0)
    );
    for family in ["skyline_top_clients{", "skyline_top_names{"] {
        assert_eq!(
            text.lines().filter(|l| l.starts_with(family)).count(),
            2,
            "K = 2:\n{text}"
        );
    }
}

#[test]
fn without_the_flags_nothing_is_observed_and_the_counters_stay_at_zero() {
    let skyline = Skyline::start(RECORDS, &HTTP_ANY_PORT, &[]);
    skyline.udp("web.skydns.local.", RecordType::A);
    let text = metrics(&skyline);
    assert!(!text.contains("skyline_top_"), "{text}");
    assert_eq!(metric_value(&text, "skyline_dnstap_sent_total"), Some(0.0));
    assert_eq!(metric_value(&text, "skyline_dnstap_dropped_total"), Some(0.0));
    assert_eq!(metric_value(&text, "skyline_query_log_lines_total"), Some(0.0));
}

#[test]
fn the_query_log_goes_to_stderr_within_its_rate_and_counts_the_rest() {
    let mut args = vec!["--query-log", "--query-log-rate", "3"];
    args.extend(HTTP_ANY_PORT);
    let skyline = Skyline::start(RECORDS, &args, &[]);
    for _ in 0..10 {
        skyline.udp("web.skydns.local.", RecordType::A);
    }
    eventually(Duration::from_secs(10), "every query logged or suppressed", || {
        let text = metrics(&skyline);
        let lines = metric_value(&text, "skyline_query_log_lines_total").unwrap_or(0.0);
        let suppressed = metric_value(&text, "skyline_query_log_suppressed_total").unwrap_or(0.0);
        lines + suppressed >= 10.0
    });
    let text = metrics(&skyline);
    let lines = metric_value(&text, "skyline_query_log_lines_total").unwrap();
    assert!(
        (3.0..=6.0).contains(&lines),
        "3 a second, over one or two seconds: {lines}"
    );
    let logged = skyline.log_count(" proto=udp name=web.skydns.local. type=A rcode=NOERROR duration_us=");
    assert_eq!(logged as f64, lines);
}

#[test]
fn check_config_names_the_observation_settings() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("skyline.toml");
    std::fs::write(
        &config,
        "[observe]\ndnstap = \"dnstap.sock\"\ndnstap_identity = \"node-1\"\ndnstap_sample = 10\n\
         query_log = \"-\"\ntop_talkers = true\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .arg("--config")
        .arg(&config)
        .arg("--check-config")
        .env("SKYLINE_RESOLV_CONF", "none")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let socket = dir.path().join("dnstap.sock");
    assert!(
        text.contains(&format!("\n[observe]\ndnstap = \"{}\"\n", socket.display())),
        "{text}"
    );
    for line in [
        "dnstap_identity = \"node-1\"",
        "dnstap_sample = 10",
        "query_log = \"-\"",
        "top_talkers = true",
        "top_talkers_k = 10",
    ] {
        assert!(text.contains(&format!("\n{line}\n")), "{line:?} not in:\n{text}");
    }

    let bad = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["--check-config", "--dnstap", "/x", "--dnstap-sample", "0"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("observe.dnstap_sample"));
}
