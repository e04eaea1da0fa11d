//! End-to-end tests of the HTTP endpoints: the real binary started with `--http-addr`, asked over
//! plain TCP sockets with hand-written HTTP/1.1 requests (an HTTP implementation independent of
//! the server's), its `/metrics` parsed as Prometheus text, and DNS asked alongside to show that
//! nothing an HTTP client does reaches the answers.

mod common;

use common::{eventually, free_port, metric_sum, Skyline, HTTP_ANY_PORT};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::RecordType;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RECORDS: &str = r#"{
  "/skydns/local/skydns/web": {"host": "10.0.0.1"},
  "/skydns/local/skydns/api": {"host": "10.0.0.2", "port": 8080},
  "/skydns/local/skydns/bad": {"host": "10.0.0.300"}
}"#;

/// A response as read off the wire.
#[derive(Debug)]
struct HttpResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl HttpResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `raw` on a new connection and reads the response until the server closes.
fn exchange(addr: SocketAddr, raw: &[u8]) -> HttpResponse {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.write_all(raw).unwrap();
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).unwrap();
    parse_response(&bytes)
}

fn parse_response(bytes: &[u8]) -> HttpResponse {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of headers in {text:?}"));
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let mut parts = status_line.splitn(3, ' ');
    assert_eq!(parts.next(), Some("HTTP/1.1"), "{status_line}");
    let status = parts.next().unwrap().parse().unwrap();
    let headers = lines
        .map(|line| {
            let (name, value) = line.split_once(':').unwrap();
            (name.to_owned(), value.trim().to_owned())
        })
        .collect();
    HttpResponse {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn request(addr: SocketAddr, method: &str, path: &str) -> HttpResponse {
    let raw = format!("{method} {path} HTTP/1.1\r\nHost: skyline\r\nConnection: close\r\n\r\n");
    exchange(addr, raw.as_bytes())
}

fn get(addr: SocketAddr, path: &str) -> HttpResponse {
    request(addr, "GET", path)
}

/// Reads `/metrics` and parses it as the Prometheus text format: every sample follows the
/// `# TYPE` of its family, every value is a number. Keys are series as written, labels included.
fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let response = get(addr, "/metrics");
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let mut family = String::new();
    let mut samples = BTreeMap::new();
    for line in response.body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            family = name.to_owned();
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        let name = series.split('{').next().unwrap_or_default();
        let part = name.strip_prefix(family.as_str());
        assert!(
            part.is_some_and(|p| ["", "_bucket", "_sum", "_count"].contains(&p)),
            "{line}"
        );
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line:?}"));
        assert!(samples.insert(series.to_owned(), value).is_none(), "{series} twice");
    }
    samples
}

/// The sum of the samples of `pattern`'s metric that carry every label `pattern` names
/// (`name{a="b"}` sums over the other labels, as a PromQL `sum` does).
fn total(samples: &BTreeMap<String, f64>, pattern: &str) -> f64 {
    let (name, wanted) = pattern.split_once('{').unwrap_or((pattern, ""));
    let wanted: Vec<&str> = wanted
        .trim_end_matches('}')
        .split(',')
        .filter(|l| !l.is_empty())
        .collect();
    let matching: Vec<f64> = samples
        .iter()
        .filter_map(|(series, n)| {
            let (metric, labels) = series.split_once('{').unwrap_or((series, ""));
            let labels: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
            (metric == name && wanted.iter().all(|w| labels.contains(w))).then_some(*n)
        })
        .collect();
    assert!(!matching.is_empty(), "no sample of {pattern}");
    matching.iter().sum()
}

fn value(samples: &BTreeMap<String, f64>, series: &str) -> f64 {
    *samples
        .get(series)
        .unwrap_or_else(|| panic!("{series} not among {:?}", samples.keys().collect::<Vec<_>>()))
}

/// Asks DNS over UDP and TCP and checks each answer comes quickly: what an HTTP client must
/// never change.
fn dns_answers_promptly(skyline: &Skyline) {
    for _ in 0..5 {
        let started = Instant::now();
        let udp = skyline.udp("web.skydns.local.", RecordType::A);
        let tcp = skyline.tcp("web.skydns.local.", RecordType::A);
        assert_eq!(udp.response_code(), ResponseCode::NoError);
        assert_eq!(tcp.answers().len(), 1);
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
    }
}

#[test]
fn health_is_ok_and_ready_once_the_records_file_is_loaded() {
    let skyline = Skyline::start(RECORDS, &HTTP_ANY_PORT, &[]);
    let http = skyline.http_addr();
    let health = get(http, "/health");
    assert_eq!((health.status, health.body.as_str()), (200, "OK"));
    let ready = get(http, "/ready");
    assert_eq!((ready.status, ready.body.as_str()), (200, "OK"));
    let samples = scrape(http);
    assert_eq!(value(&samples, "skyline_source_ready{source=\"records_file\"}"), 1.0);
    assert_eq!(value(&samples, "skyline_source_records{source=\"records_file\"}"), 2.0);
    assert_eq!(
        value(&samples, "skyline_source_records_rejected{source=\"records_file\"}"),
        1.0
    );
    assert!(value(&samples, "skyline_snapshot_generation") >= 1.0);
}

#[test]
fn ready_is_503_naming_etcd_while_etcd_cannot_be_reached() {
    let machines = format!("http://127.0.0.1:{}", free_port());
    let mut args = vec!["--machines", machines.as_str()];
    args.extend(HTTP_ANY_PORT);
    let skyline = Skyline::start_with(&args, &[]);
    let http = skyline.http_addr();
    assert_eq!(get(http, "/health").status, 200);
    let ready = get(http, "/ready");
    assert_eq!(ready.status, 503);
    assert_eq!(ready.body, "not ready: etcd (no complete read yet)\n");
    eventually(Duration::from_secs(10), "etcd retries are counted", || {
        value(&scrape(http), "skyline_etcd_retries_total") >= 1.0
    });
    let samples = scrape(http);
    assert_eq!(value(&samples, "skyline_source_ready{source=\"etcd\"}"), 0.0);
    assert_eq!(value(&samples, "skyline_etcd_watching"), 0.0);
    assert_eq!(value(&samples, "skyline_etcd_revision"), 0.0);
    assert!(!samples.contains_key("skyline_etcd_last_contact_age_seconds"));
}

#[test]
fn metrics_count_the_queries_sent() {
    let skyline = Skyline::start(RECORDS, &HTTP_ANY_PORT, &[]);
    let http = skyline.http_addr();
    let before = scrape(http);
    let before_text = get(http, "/metrics").body;
    for _ in 0..7 {
        assert_eq!(
            skyline.udp("web.skydns.local.", RecordType::A).response_code(),
            ResponseCode::NoError
        );
    }
    for _ in 0..4 {
        assert_eq!(
            skyline.udp("nope.skydns.local.", RecordType::A).response_code(),
            ResponseCode::NXDomain
        );
    }
    for _ in 0..3 {
        assert_eq!(
            skyline.tcp("api.skydns.local.", RecordType::A).response_code(),
            ResponseCode::NoError
        );
    }
    assert_eq!(
        skyline.udp("example.com.", RecordType::A).response_code(),
        ResponseCode::Refused
    );
    // (metric, labels each sample summed must have, count since `before`)
    let expected: [(&str, &[&str], f64); 17] = [
        ("coredns_dns_requests_total", &["proto=\"udp\""], 12.0),
        ("coredns_dns_requests_total", &["proto=\"tcp\""], 3.0),
        ("coredns_dns_requests_total", &["type=\"A\"", "family=\"1\""], 15.0),
        ("coredns_dns_responses_total", &["rcode=\"NOERROR\""], 10.0),
        ("coredns_dns_responses_total", &["rcode=\"NXDOMAIN\""], 4.0),
        ("coredns_dns_responses_total", &["rcode=\"REFUSED\""], 1.0),
        ("coredns_dns_responses_total", &["rcode=\"SERVFAIL\""], 0.0),
        ("skyline_tcp_connections_total", &[], 3.0),
        ("coredns_cache_hits_total", &[], 0.0),
        ("coredns_cache_requests_total", &[], 0.0),
        ("coredns_dns_request_duration_seconds_count", &["zone=\".\""], 15.0),
        ("coredns_dns_request_duration_seconds_bucket", &["le=\"+Inf\""], 15.0),
        ("coredns_dns_request_size_bytes_count", &["proto=\"udp\""], 12.0),
        (
            "coredns_dns_request_size_bytes_bucket",
            &["proto=\"udp\"", "le=\"100\""],
            12.0,
        ),
        ("coredns_dns_request_size_bytes_count", &["proto=\"tcp\""], 3.0),
        ("coredns_dns_response_size_bytes_count", &["proto=\"udp\""], 12.0),
        ("coredns_dns_response_size_bytes_count", &["proto=\"tcp\""], 3.0),
    ];
    // The workers count before they send, so the counts are there by the time the replies are;
    // the scrape is retried only in case the stores reach this reader a moment late.
    let count = |text: &str, metric: &str, filter: &[&str]| {
        metric_sum(text, metric, filter).unwrap_or_else(|| panic!("no {metric} with {filter:?}"))
    };
    let reached = |after: &str| {
        expected
            .iter()
            .all(|(metric, filter, n)| count(after, metric, filter) - count(&before_text, metric, filter) == *n)
    };
    eventually(Duration::from_secs(2), "the counters reach what was sent", || {
        reached(&get(http, "/metrics").body)
    });
    let after_text = get(http, "/metrics").body;
    for (metric, filter, n) in expected {
        assert_eq!(
            count(&after_text, metric, filter) - count(&before_text, metric, filter),
            n,
            "{metric} {filter:?}"
        );
    }
    assert!(
        !after_text.contains("coredns_forward_requests_total"),
        "no upstream, no forwarder series"
    );
    let after = scrape(http);
    assert_eq!(
        value(&after, "skyline_snapshot_generation"),
        value(&before, "skyline_snapshot_generation")
    );
    // Answers from the snapshot take microseconds, not a second.
    let fast = count(
        &after_text,
        "coredns_dns_request_duration_seconds_bucket",
        &["le=\"1.31072\""],
    ) - count(
        &before_text,
        "coredns_dns_request_duration_seconds_bucket",
        &["le=\"1.31072\""],
    );
    assert_eq!(fast, 15.0);
    for series in [
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(value(&after, series) > 0.0, "{series}");
    }
    assert_eq!(
        value(
            &after,
            &format!(
                "coredns_build_info{{version=\"{}\",revision=\"\",goversion=\"\"}}",
                env!("CARGO_PKG_VERSION")
            )
        ),
        1.0
    );
}

#[test]
fn other_paths_are_404_and_other_methods_405() {
    let skyline = Skyline::start(RECORDS, &HTTP_ANY_PORT, &[]);
    let http = skyline.http_addr();
    for path in ["/", "/nope", "/metrics/extra", "/HEALTH"] {
        assert_eq!(get(http, path).status, 404, "{path}");
    }
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let response = request(http, method, "/metrics");
        assert_eq!(response.status, 405, "{method}");
        assert_eq!(response.header("allow"), Some("GET, HEAD"));
    }
    let head = request(http, "HEAD", "/health");
    assert_eq!((head.status, head.body.as_str()), (200, ""));
    assert_eq!(get(http, "/ready?full=1").status, 200, "a query string is ignored");
}

#[test]
fn oversized_headers_get_431() {
    let skyline = Skyline::start(RECORDS, &HTTP_ANY_PORT, &[]);
    let http = skyline.http_addr();
    let raw = format!(
        "GET /health HTTP/1.1\r\nHost: skyline\r\nX-Padding: {}\r\n\r\n",
        "a".repeat(12 * 1024)
    );
    assert_eq!(exchange(http, raw.as_bytes()).status, 431);
    assert_eq!(get(http, "/health").status, 200);
}

#[test]
fn garbage_gets_400_and_dns_still_answers() {
    let skyline = Skyline::start(RECORDS, &HTTP_ANY_PORT, &[]);
    let http = skyline.http_addr();
    let garbage: Vec<u8> = (0..2048u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut stream = TcpStream::connect(http).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The server may close before all of it is written; what it answers is what matters.
    let _ = stream.write_all(&garbage);
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    if !reply.is_empty() {
        assert_eq!(parse_response(&reply).status, 400);
    }
    dns_answers_promptly(&skyline);
    assert_eq!(get(http, "/health").status, 200);
}

#[test]
fn a_client_stalling_in_its_headers_is_cut_off_and_dns_still_answers() {
    let skyline = Skyline::start(RECORDS, &HTTP_ANY_PORT, &[]);
    let http = skyline.http_addr();
    let mut slow = TcpStream::connect(http).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: sky").unwrap();
    let started = Instant::now();
    dns_answers_promptly(&skyline);
    assert_eq!(get(http, "/health").status, 200, "others are served meanwhile");
    // Cut off at the header timeout (5 s), well before a client could finish at this pace.
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    match slow.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
    }
    let waited = started.elapsed();
    assert!(
        waited > Duration::from_secs(4) && waited < Duration::from_secs(8),
        "closed after {waited:?}"
    );
    assert!(
        rest.is_empty() || parse_response(&rest).status == 408,
        "{}",
        String::from_utf8_lossy(&rest)
    );
    dns_answers_promptly(&skyline);
}

#[test]
fn connections_past_the_cap_are_closed_at_once_and_dns_still_answers() {
    let skyline = Skyline::start(RECORDS, &HTTP_ANY_PORT, &[]);
    let http = skyline.http_addr();
    let held: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(http).unwrap()).collect();
    let mut extra = TcpStream::connect(http).unwrap();
    extra.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let started = Instant::now();
    let mut byte = [0u8; 1];
    match extra.read(&mut byte) {
        Ok(n) => assert_eq!(n, 0, "closed without a response"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
    }
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    dns_answers_promptly(&skyline);
    drop(held);
    eventually(Duration::from_secs(3), "slots come back as clients leave", || {
        TcpStream::connect(http)
            .and_then(|mut s| {
                s.set_read_timeout(Some(Duration::from_secs(1)))?;
                s.write_all(b"GET /health HTTP/1.1\r\nHost: skyline\r\n\r\n")?;
                let mut reply = Vec::new();
                s.read_to_end(&mut reply)?;
                Ok(reply.starts_with(b"HTTP/1.1 200"))
            })
            .unwrap_or(false)
    });
}

#[test]
fn a_port_already_taken_is_a_start_error() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records.json");
    std::fs::write(&records, RECORDS).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args([
            "--addr",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--no-pin",
            "--http-addr",
            &addr,
        ])
        .arg("--records")
        .arg(&records)
        .env("NO_COLOR", "1")
        .env("SKYLINE_RESOLV_CONF", "none")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("skyline: cannot serve HTTP on {addr}")),
        "{stderr}"
    );
}

/// Sends a query for each of `names` at once from one socket (IDs counting from 0) and
/// returns the replies that arrive until none has come for half a second, with their sizes.
fn flood(skyline: &Skyline, names: &[String]) -> Vec<(Message, usize)> {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    for (id, name) in names.iter().enumerate() {
        let mut query = common::query(name, RecordType::A, Some(1232));
        query.set_id(id as u16);
        socket.send_to(&query.to_vec().unwrap(), skyline.addr).unwrap();
    }
    let mut replies = Vec::new();
    let mut buf = [0u8; 1500];
    while let Ok(n) = socket.recv(&mut buf) {
        replies.push((Message::from_vec(&buf[..n]).expect("a DNS message"), n));
        assert!(replies.len() <= names.len(), "more replies than queries");
    }
    replies
}

/// Floods `skyline` (limiting at 5 a second, every second limited reply slipped) with queries
/// for `names`, whose replies have rcode `rcode` (`label` in `/metrics`), and checks that what `/metrics` counts is what
/// the client received: every reply it got, whole or slipped, is a response of its rcode, of
/// the size it had, with a duration; the dropped ones are none of these.
fn slipped_replies_are_counted_as_received(skyline: &Skyline, names: &[String], rcode: ResponseCode, label: &str) {
    let http = skyline.http_addr();
    let before = scrape(http);
    let replies = flood(skyline, names);
    let slipped: Vec<&(Message, usize)> = replies.iter().filter(|(m, _)| m.truncated()).collect();
    let whole = replies.len() - slipped.len();
    let dropped = names.len() - replies.len();
    assert!(
        whole > 0 && !slipped.is_empty() && dropped > 0,
        "the flood is partly answered, partly slipped, partly dropped: {whole} / {} / {dropped}",
        slipped.len()
    );
    for (reply, _) in &slipped {
        assert_eq!(reply.response_code(), rcode);
        assert!(reply.answers().is_empty(), "a slipped reply has no records: {reply:?}");
    }
    let bytes: usize = replies.iter().map(|(_, len)| len).sum();
    let expected = [
        (
            "coredns_dns_requests_total{proto=\"udp\"}".to_owned(),
            names.len() as f64,
        ),
        (
            format!("coredns_dns_responses_total{{rcode=\"{label}\"}}"),
            replies.len() as f64,
        ),
        (
            "coredns_dns_response_size_bytes_count{proto=\"udp\"}".to_owned(),
            replies.len() as f64,
        ),
        (
            "coredns_dns_response_size_bytes_sum{proto=\"udp\"}".to_owned(),
            bytes as f64,
        ),
        (
            "coredns_dns_request_duration_seconds_count".to_owned(),
            replies.len() as f64,
        ),
        (
            "skyline_rrl_limited_total{action=\"slipped\"}".to_owned(),
            slipped.len() as f64,
        ),
        (
            "skyline_rrl_limited_total{action=\"dropped\"}".to_owned(),
            dropped as f64,
        ),
    ];
    let reached = |after: &BTreeMap<String, f64>| {
        expected
            .iter()
            .all(|(series, n)| total(after, series) - total(&before, series) == *n)
    };
    // The scrape is retried only in case the workers' stores reach this reader a moment late;
    // a count that stays off fails below, naming its series.
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut after = scrape(http);
    while !reached(&after) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        after = scrape(http);
    }
    for (series, n) in &expected {
        assert_eq!(total(&after, series) - total(&before, series), *n, "{series}");
    }
    let responses = |samples: &BTreeMap<String, f64>| -> f64 {
        samples
            .iter()
            .filter(|(series, _)| series.starts_with("coredns_dns_responses_total{"))
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!(
        responses(&after) - responses(&before) - whole as f64,
        slipped.len() as f64,
        "every slipped reply the client received, and only those, counted beyond the whole ones"
    );
}

#[test]
fn replies_that_rate_limiting_slips_count_as_responses_of_the_size_sent() {
    let mut args = vec!["--rrl-rate", "5", "--rrl-slip", "2"];
    args.extend(HTTP_ANY_PORT);
    let skyline = Skyline::start(RECORDS, &args, &[]);
    let names = vec!["web.skydns.local.".to_owned(); 60];
    slipped_replies_are_counted_as_received(&skyline, &names, ResponseCode::NoError, "NOERROR");
}

/// A UDP upstream on 127.0.0.1 answering every query NXDOMAIN with no records (so no zone),
/// until `stop`.
fn nxdomain_upstream(stop: Arc<AtomicBool>) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let addr = socket.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = socket.recv_from(&mut buf) {
                let query = Message::from_vec(&buf[..n]).unwrap();
                let mut reply = Message::new();
                reply
                    .set_id(query.id())
                    .set_message_type(MessageType::Response)
                    .set_recursion_desired(true)
                    .set_recursion_available(true)
                    .set_response_code(ResponseCode::NXDomain)
                    .add_queries(query.queries().to_vec());
                socket.send_to(&reply.to_vec().unwrap(), from).unwrap();
            }
        }
    });
    (addr, thread)
}

#[test]
fn replies_that_waited_for_an_upstream_and_slip_count_as_responses_of_the_size_sent() {
    let stop = Arc::new(AtomicBool::new(false));
    let (upstream, thread) = nxdomain_upstream(Arc::clone(&stop));
    let upstream = upstream.to_string();
    let mut args = vec!["--rrl-rate", "5", "--rrl-slip", "2", "--nameservers", &upstream];
    args.extend(HTTP_ANY_PORT);
    let skyline = Skyline::start(RECORDS, &args, &[]);
    // Names no cache holds, each answered once the upstream has: one NXDOMAIN class for the
    // client's network, since the upstream names no zone.
    let names: Vec<String> = (0..60).map(|i| format!("n{i}.flood.example.")).collect();
    slipped_replies_are_counted_as_received(&skyline, &names, ResponseCode::NXDomain, "NXDOMAIN");
    let forwarded = total(&scrape(skyline.http_addr()), "coredns_forward_requests_total");
    assert!(
        forwarded >= names.len() as f64,
        "every query went upstream: {forwarded}"
    );
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
}
