//! `/metrics` against what CoreDNS's public dashboards and alerts query: the binary answers
//! UDP, TCP, forwarded and cached queries (a scripted upstream on 127.0.0.1 answers, a second
//! one stays silent), then its exposition is read with `prometheus-parse`, a parser other than
//! skyline's own, and every query in [`DASHBOARD_QUERIES`] must find its metric with the labels
//! it groups or filters by, and the counts the queries above produced.

mod common;
mod upstream;

use common::{query, tcp_query, udp_query, Skyline, HTTP_ANY_PORT};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use prometheus_parse::{Sample, Scrape, Value};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;
use upstream::{Script, Scripted, GOOD};

const RECORDS: &str = r#"{"/skydns/local/skydns/web": {"host": "10.9.0.1", "port": 80}}"#;

/// The queries of CoreDNS's Grafana dashboard and of the CoreDNS alerts in wide use (the
/// coredns-mixin rules that kube-prometheus ships), each with the metric it reads and the
/// labels it groups or filters by. A metric missing, or a label missing from its samples,
/// leaves a panel empty or an alert that can never fire.
const DASHBOARD_QUERIES: [(&str, &str, &[&str]); 21] = [
    (
        "sum(rate(coredns_dns_requests_total[5m])) by (type)",
        "coredns_dns_requests_total",
        &["type"],
    ),
    (
        "sum(rate(coredns_dns_requests_total[5m])) by (proto)",
        "coredns_dns_requests_total",
        &["proto"],
    ),
    (
        "sum(rate(coredns_dns_requests_total[5m])) by (family)",
        "coredns_dns_requests_total",
        &["family"],
    ),
    (
        "sum(rate(coredns_dns_requests_total[5m])) by (server, zone)",
        "coredns_dns_requests_total",
        &["server", "zone"],
    ),
    (
        "sum(rate(coredns_dns_responses_total[5m])) by (rcode)",
        "coredns_dns_responses_total",
        &["rcode"],
    ),
    (
        "histogram_quantile(0.99, sum(rate(coredns_dns_request_duration_seconds_bucket[5m])) by (le, server, zone))",
        "coredns_dns_request_duration_seconds",
        &["server", "zone"],
    ),
    (
        "histogram_quantile(0.99, sum(rate(coredns_dns_request_size_bytes_bucket[5m])) by (le, proto))",
        "coredns_dns_request_size_bytes",
        &["proto"],
    ),
    (
        "histogram_quantile(0.99, sum(rate(coredns_dns_response_size_bytes_bucket[5m])) by (le, proto))",
        "coredns_dns_response_size_bytes",
        &["proto"],
    ),
    (
        "sum(rate(coredns_cache_hits_total[5m])) by (type)",
        "coredns_cache_hits_total",
        &["type"],
    ),
    (
        "sum(rate(coredns_cache_misses_total[5m]))",
        "coredns_cache_misses_total",
        &[],
    ),
    (
        "sum(rate(coredns_cache_requests_total[5m]))",
        "coredns_cache_requests_total",
        &[],
    ),
    ("sum(coredns_cache_entries) by (type)", "coredns_cache_entries", &["type"]),
    (
        "sum(rate(coredns_cache_prefetch_total[5m]))",
        "coredns_cache_prefetch_total",
        &[],
    ),
    (
        "histogram_quantile(0.99, sum(rate(coredns_proxy_request_duration_seconds_bucket{proxy_name=\"forward\"}[5m])) by (to, le))",
        "coredns_proxy_request_duration_seconds",
        &["proxy_name", "to", "rcode"],
    ),
    (
        "sum(rate(coredns_proxy_healthcheck_failures_total[5m])) by (to)",
        "coredns_proxy_healthcheck_failures_total",
        &["proxy_name", "to"],
    ),
    // coredns-mixin: CoreDNSForwardLatencyHigh.
    (
        "histogram_quantile(0.99, sum(rate(coredns_forward_request_duration_seconds_bucket[5m])) without (pod, instance, rcode))",
        "coredns_forward_request_duration_seconds",
        &["to", "rcode"],
    ),
    // coredns-mixin: CoreDNSForwardErrorsHigh.
    (
        "sum without (pod, instance, rcode) (rate(coredns_forward_responses_total{rcode=\"SERVFAIL\"}[5m]))",
        "coredns_forward_responses_total",
        &["to", "rcode"],
    ),
    // coredns-mixin: CoreDNSForwardHealthcheckFailureCount.
    (
        "sum without (pod, instance) (rate(coredns_forward_healthcheck_failures_total[5m])) > 0",
        "coredns_forward_healthcheck_failures_total",
        &["to"],
    ),
    // coredns-mixin: CoreDNSForwardHealthcheckBrokenCount.
    (
        "sum without (pod, instance) (rate(coredns_forward_healthcheck_broken_total[5m])) > 0",
        "coredns_forward_healthcheck_broken_total",
        &[],
    ),
    (
        "sum(rate(coredns_forward_requests_total[5m])) by (to)",
        "coredns_forward_requests_total",
        &["to"],
    ),
    ("sum(rate(coredns_panics_total[5m]))", "coredns_panics_total", &[]),
];

/// The scrape's samples, each histogram under its family's name (its `_sum` and `_count`
/// apart, under theirs).
fn scrape(s: &Skyline) -> Vec<Sample> {
    let (status, body) = common::http_get(s.http_addr(), "/metrics").expect("/metrics answers");
    assert_eq!(status, 200);
    let lines = body.lines().map(|l| Ok(l.to_owned()));
    let Scrape { samples, .. } = Scrape::parse(lines).expect("the exposition parses");
    samples
}

/// The value of a counter, gauge or `_count`/`_sum` sample; a histogram's `+Inf` bucket.
fn value(sample: &Sample) -> f64 {
    match &sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        Value::Histogram(buckets) => {
            buckets
                .iter()
                .find(|b| b.less_than.is_infinite())
                .expect("a histogram has a +Inf bucket")
                .count
        }
        Value::Summary(_) => panic!("{}: skyline exports no summary", sample.metric),
    }
}

/// `sum(metric{filter}) by (label)`, as PromQL computes it over one scrape.
fn sum_by(samples: &[Sample], metric: &str, filter: &[(&str, &str)], label: &str) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for sample in samples.iter().filter(|s| s.metric == metric) {
        if filter.iter().all(|(k, v)| sample.labels.get(k) == Some(*v)) {
            let key = sample.labels.get(label).unwrap_or_default().to_owned();
            *sums.entry(key).or_insert(0.0) += value(sample);
        }
    }
    sums
}

fn total(samples: &[Sample], metric: &str, filter: &[(&str, &str)]) -> f64 {
    sum_by(samples, metric, filter, "").values().sum()
}

#[test]
fn coredns_dashboards_and_alerts_find_their_metrics_and_labels() {
    let good = Scripted::start(Script::Address {
        ttl: 300,
        delay: Duration::ZERO,
    });
    // Bound and never read: every try sent to it times out.
    let silent = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let nameservers = format!("{silent_addr},{}", good.addr);
    // The silent upstream first, for every question: no rotation.
    let mut args = vec!["--nameservers", nameservers.as_str(), "--ns-rotate=false"];
    args.extend(HTTP_ANY_PORT);
    let s = Skyline::start(RECORDS, &args, &[]);

    // Authoritative answers: 3 A and 1 SRV over UDP, 2 AAAA (NODATA) over TCP, 1 NXDOMAIN.
    for _ in 0..3 {
        let reply = udp_query(s.addr, &query("web.skydns.local.", RecordType::A, Some(1232)));
        assert_eq!(reply.response_code(), ResponseCode::NoError);
        assert_eq!(reply.answers().len(), 1);
    }
    let srv = udp_query(s.addr, &query("web.skydns.local.", RecordType::SRV, Some(1232)));
    assert!(!srv.answers().is_empty());
    for _ in 0..2 {
        let reply = tcp_query(s.addr, &query("web.skydns.local.", RecordType::AAAA, None));
        assert_eq!(
            (reply.response_code(), reply.answers().len()),
            (ResponseCode::NoError, 0)
        );
    }
    let missing = udp_query(s.addr, &query("gone.skydns.local.", RecordType::A, Some(1232)));
    assert_eq!(missing.response_code(), ResponseCode::NXDomain);
    // Forwarded (a miss: the silent upstream is tried first, then the good one), then cached.
    // One client socket: the kernel keeps its flow on one worker, whose cache has the answer.
    let client = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let ask = |name: &str| {
        let q = query(name, RecordType::A, Some(1232));
        client.send_to(&q.to_vec().unwrap(), s.addr).unwrap();
        let mut buf = [0u8; 1500];
        let (n, _) = client.recv_from(&mut buf).expect("an answer within 5 s");
        Message::from_vec(&buf[..n]).unwrap()
    };
    assert_eq!(common::a_of(&ask("www.example.test.")), [GOOD]);
    assert_eq!(common::a_of(&ask("www.example.test.")), [GOOD]);

    // A worker stores a reply's counts just after sending it: the scrape is retried for a
    // moment, until every one of the nine requests has its duration.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let mut samples = scrape(&s);
    while total(&samples, "coredns_dns_request_duration_seconds", &[]) < 9.0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        samples = scrape(&s);
    }
    for (promql, metric, labels) in DASHBOARD_QUERIES {
        let series: Vec<&Sample> = samples.iter().filter(|x| x.metric == metric).collect();
        assert!(!series.is_empty(), "{promql}: no {metric} in /metrics");
        for label in labels {
            assert!(
                series
                    .iter()
                    .all(|x| x.labels.get(label).is_some_and(|v| !v.is_empty())),
                "{promql}: a {metric} series has no {label} label"
            );
        }
    }

    let requests = "coredns_dns_requests_total";
    let by_type = sum_by(&samples, requests, &[], "type");
    assert_eq!(
        (by_type["A"], by_type["AAAA"], by_type["SRV"]),
        (6.0, 2.0, 1.0),
        "{by_type:?}"
    );
    assert_eq!(by_type["other"], 0.0);
    let by_proto = sum_by(&samples, requests, &[], "proto");
    assert_eq!((by_proto["udp"], by_proto["tcp"]), (7.0, 2.0));
    let by_family = sum_by(&samples, requests, &[], "family");
    assert_eq!(
        (by_family["1"], by_family["2"]),
        (9.0, 0.0),
        "clients on 127.0.0.1 are IPv4"
    );
    let server = format!("dns://{}", s.addr);
    let by_server = sum_by(&samples, requests, &[("zone", ".")], "server");
    assert_eq!(by_server.get(&server), Some(&9.0), "{by_server:?}");

    let by_rcode = sum_by(&samples, "coredns_dns_responses_total", &[], "rcode");
    assert_eq!((by_rcode["NOERROR"], by_rcode["NXDOMAIN"]), (8.0, 1.0));
    assert_eq!(
        by_rcode["SERVFAIL"], 0.0,
        "CoreDNSErrorsHigh's numerator exists and is 0"
    );
    let duration = sum_by(
        &samples,
        "coredns_dns_request_duration_seconds",
        &[("zone", ".")],
        "server",
    );
    assert_eq!(duration.get(&server), Some(&9.0));

    let hits = sum_by(&samples, "coredns_cache_hits_total", &[], "type");
    assert_eq!((hits["success"], hits["denial"]), (1.0, 0.0));
    assert_eq!(total(&samples, "coredns_cache_misses_total", &[]), 1.0);
    assert_eq!(total(&samples, "coredns_cache_requests_total", &[]), 2.0);
    let entries = sum_by(&samples, "coredns_cache_entries", &[], "type");
    assert_eq!((entries["success"], entries["denial"]), (1.0, 0.0));

    let good_to = good.addr.to_string();
    let silent_to = silent_addr.to_string();
    let forward = [("proxy_name", "forward"), ("to", good_to.as_str())];
    let answered = sum_by(&samples, "coredns_proxy_request_duration_seconds", &forward, "rcode");
    assert_eq!(answered.get("NOERROR"), Some(&1.0), "{answered:?}");
    let responses = sum_by(&samples, "coredns_forward_responses_total", &[], "to");
    assert_eq!(responses.get(&good_to), Some(&1.0));
    assert_eq!(responses.get(&silent_to), None, "the silent upstream answered nothing");
    let sent = sum_by(&samples, "coredns_forward_requests_total", &[], "to");
    assert_eq!((sent.get(&silent_to), sent.get(&good_to)), (Some(&1.0), Some(&1.0)));
    let failures = sum_by(&samples, "coredns_proxy_healthcheck_failures_total", &[], "to");
    assert_eq!(failures.get(&silent_to), Some(&1.0), "its try timed out: {failures:?}");
    assert_eq!(failures.get(&good_to), Some(&0.0));
    let old_failures = sum_by(&samples, "coredns_forward_healthcheck_failures_total", &[], "to");
    assert_eq!(old_failures, failures, "the pre-1.11 name reads the same counters");
    assert_eq!(total(&samples, "coredns_forward_healthcheck_broken_total", &[]), 0.0);
    assert_eq!(total(&samples, "coredns_panics_total", &[]), 0.0);
}
