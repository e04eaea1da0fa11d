//! `/metrics`: the [`Report`] in the Prometheus text exposition format, version 0.0.4.
//!
//! Where a CoreDNS metric means the same thing, its name and labels are CoreDNS's, so that
//! dashboards and alerts written for CoreDNS keep working: `server` names the listen addresses
//! as CoreDNS writes a server (`dns://ADDR`), `zone` (`zones` for the cache) is `.`, since
//! skyline answers every name from one server; the forwarder's series are per upstream (`to`).
//! Everything else is named `skyline_*`. Every counter counts since the process started.
use super::report::{Loads, Persisted, Reloads, Report, Status};
use crate::source::{Family, HistogramFamily, Kind};
use skyline_dataplane::io::QueueTotals;
use skyline_dataplane::observe::topk::TopTalkers;
use skyline_dataplane::stats::{
    AddressFamily, CacheKind, Histogram, Totals, UpstreamTotals, DURATION_BOUNDS, DURATION_SLOTS, OTHER_TYPE,
    QUESTION_TYPES, RCODE_NAMES, SIZE_BOUNDS, SIZE_SLOTS,
};
use skyline_dataplane::Transport;
use std::fmt::{self, Display, Formatter};

/// The `Content-Type` of the exposition.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A report written out as Prometheus text; `to_string()` gives the response body.
pub(crate) struct Metrics<'a>(pub(crate) &'a Report);

impl Display for Metrics<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        dns(f, &self.0.dns, &self.0.server)?;
        upstreams(f, &self.0.upstreams)?;
        xdp(f, &self.0.xdp)?;
        if let Some(top) = &self.0.top_talkers {
            top_talkers(f, top)?;
        }
        reloads(f, &self.0.reloads)?;
        sources(f, self.0)
    }
}

/// The data plane's counters, the listen addresses as the `server` label names them.
/// Destructured without `..`, so that a counter added to [`Totals`] does not compile until it
/// is exported here.
fn dns(f: &mut Formatter<'_>, totals: &Totals, server: &str) -> fmt::Result {
    use Kind::{Counter, Gauge};
    let Totals {
        requests,
        udp_batches,
        replies_noerror,
        replies_nxdomain,
        replies_servfail,
        replies_formerr,
        replies_notimp,
        replies_refused,
        replies_badvers,
        replies_badcookie,
        replies_other,
        truncated,
        dropped_too_short,
        dropped_response,
        ignored_records,
        trailing_bytes,
        autopath_success,
        udp_send_failures,
        udp_send_buffer_full,
        udp_receive_errors,
        tcp_accepted,
        tcp_refused_full,
        tcp_refused_per_client,
        tcp_evicted,
        tcp_io_timeouts,
        tcp_idle_timeouts,
        cache_hits,
        cache_stale_answers,
        cache_misses,
        cache_refreshes,
        cache_prefetches,
        cache_inserts,
        cache_evictions,
        cache_entries,
        cache_bytes,
        upstream_queries,
        upstream_tcp_retries,
        upstream_conn_opened,
        upstream_conn_reused,
        upstream_resent,
        upstream_timeouts,
        upstream_errors,
        upstream_bad_answers,
        upstream_mismatched_id,
        upstream_mismatched_question,
        upstream_probes,
        upstreams_marked_down,
        upstreams_all_down,
        forward_merged,
        forward_busy,
        forward_client_limited,
        recursion_refused,
        forward_failures,
        stub_loops_dropped,
        dnstap_sent,
        dnstap_dropped,
        query_log_lines,
        query_log_suppressed,
        rrl_dropped,
        rrl_slipped,
        request_duration,
        request_size,
        response_size,
    } = *totals;

    let zone = format!("server=\"{server}\",zone=\".\"");
    header(
        f,
        "coredns_dns_requests_total",
        Counter,
        "DNS messages received, by transport, client address family (1: IPv4, 2: IPv6) and question type (other: a type CoreDNS does not name, or no readable question).",
    )?;
    for family in [AddressFamily::V4, AddressFamily::V6] {
        for (proto, transport) in [("udp", Transport::Udp), ("tcp", Transport::Tcp)] {
            let types = QUESTION_TYPES.iter().map(|&(_, name)| name).chain([OTHER_TYPE]);
            for (slot, qtype) in types.enumerate() {
                writeln!(
                    f,
                    "coredns_dns_requests_total{{{zone},proto=\"{proto}\",family=\"{}\",type=\"{qtype}\"}} {}",
                    family.label(),
                    requests.get(family, transport, slot)
                )?;
            }
        }
    }
    let seconds = |nanos: u64| nanos as f64 / 1e9;
    let durations: Vec<String> = DURATION_BOUNDS.iter().map(|&b| seconds(b).to_string()).collect();
    let sizes: Vec<String> = SIZE_BOUNDS.iter().map(ToString::to_string).collect();
    histogram(
        f,
        "coredns_dns_request_duration_seconds",
        "Time from a query's arrival to its reply's send.",
        &durations,
        &[(zone.clone(), &request_duration)],
        seconds,
    )?;
    let bytes = |sum: u64| sum as f64;
    let by_proto = |sizes: &[Histogram<SIZE_SLOTS>; 2]| {
        [
            (format!("{zone},proto=\"udp\""), sizes[0]),
            (format!("{zone},proto=\"tcp\""), sizes[1]),
        ]
    };
    let [udp, tcp] = by_proto(&request_size);
    histogram(
        f,
        "coredns_dns_request_size_bytes",
        "Sizes of the DNS queries received, by transport.",
        &sizes,
        &[(udp.0, &udp.1), (tcp.0, &tcp.1)],
        bytes,
    )?;
    let [udp, tcp] = by_proto(&response_size);
    histogram(
        f,
        "coredns_dns_response_size_bytes",
        "Sizes of the DNS responses sent, by transport.",
        &sizes,
        &[(udp.0, &udp.1), (tcp.0, &tcp.1)],
        bytes,
    )?;
    // CoreDNS names an unknown rcode by its number; skyline does not keep those apart.
    header(
        f,
        "coredns_dns_responses_total",
        Counter,
        "DNS responses sent, by rcode (OTHER: any rcode not named); replies rate limiting slipped (sent truncated) included.",
    )?;
    for (rcode, value) in [
        ("NOERROR", replies_noerror),
        ("NXDOMAIN", replies_nxdomain),
        ("SERVFAIL", replies_servfail),
        ("FORMERR", replies_formerr),
        ("NOTIMP", replies_notimp),
        ("REFUSED", replies_refused),
        ("BADVERS", replies_badvers),
        ("BADCOOKIE", replies_badcookie),
        ("OTHER", replies_other),
    ] {
        writeln!(f, "coredns_dns_responses_total{{{zone},rcode=\"{rcode}\"}} {value}")?;
    }
    single(
        f,
        "coredns_panics_total",
        Counter,
        "Panics recovered from: none ever, since a panic ends the process (it is built to abort); a restart is what shows one.",
        0,
    )?;
    header(
        f,
        "coredns_autopath_success_total",
        Counter,
        "Questions of pods answered with a name further down their search list (autopath).",
    )?;
    writeln!(
        f,
        "coredns_autopath_success_total{{server=\"{server}\"}} {autopath_success}"
    )?;
    single(
        f,
        "skyline_dns_truncated_responses_total",
        Counter,
        "UDP responses sent with TC=1 because the answer did not fit the client's size.",
        truncated,
    )?;
    labelled(
        f,
        "skyline_dns_dropped_total",
        Counter,
        "DNS messages dropped unanswered: shorter than a header, or responses (QR=1).",
        "reason",
        &[("too_short", dropped_too_short), ("response", dropped_response)],
    )?;
    single(
        f,
        "skyline_dns_ignored_records_total",
        Counter,
        "Queries that carried answer or authority records, which were ignored.",
        ignored_records,
    )?;
    single(
        f,
        "skyline_dns_trailing_bytes_total",
        Counter,
        "Queries followed by trailing bytes, which were ignored.",
        trailing_bytes,
    )?;
    single(
        f,
        "skyline_udp_receive_batches_total",
        Counter,
        "Receive calls that returned datagrams; requests over batches is the mean batch size.",
        udp_batches,
    )?;
    labelled(
        f,
        "skyline_udp_send_failures_total",
        Counter,
        "UDP responses dropped unsent: the socket's send buffer stayed full past the retries \
         (buffer_full), or the kernel refused the datagram for its peer (refused).",
        "reason",
        &[
            ("buffer_full", udp_send_buffer_full),
            ("refused", udp_send_failures.saturating_sub(udp_send_buffer_full)),
        ],
    )?;
    single(
        f,
        "skyline_udp_receive_errors_total",
        Counter,
        "Failed UDP receive calls other than nothing waiting.",
        udp_receive_errors,
    )?;
    single(
        f,
        "skyline_tcp_connections_total",
        Counter,
        "DNS over TCP connections accepted and served.",
        tcp_accepted,
    )?;
    labelled(
        f,
        "skyline_tcp_connections_refused_total",
        Counter,
        "DNS over TCP connections closed at once: the worker, or the client, at its cap.",
        "reason",
        &[
            ("worker_full", tcp_refused_full),
            ("client_full", tcp_refused_per_client),
        ],
    )?;
    labelled(
        f,
        "skyline_tcp_connections_timed_out_total",
        Counter,
        "DNS over TCP connections closed by the server: a stalled message or reply (io), idleness past \
         the idle timeout (idle), or the idlest one when a new connection needed its slot (evicted).",
        "reason",
        &[
            ("io", tcp_io_timeouts),
            ("idle", tcp_idle_timeouts),
            ("evicted", tcp_evicted),
        ],
    )?;

    let zones = format!("server=\"{server}\",zones=\".\"");
    let kinds = [CacheKind::Success, CacheKind::Denial];
    header(
        f,
        "coredns_cache_entries",
        Gauge,
        "Entries in the cache now, all workers together, by what they hold (success: records; denial: NXDOMAIN or NODATA).",
    )?;
    for kind in kinds {
        writeln!(
            f,
            "coredns_cache_entries{{{zones},type=\"{}\"}} {}",
            kind.label(),
            cache_entries[kind as usize]
        )?;
    }
    header(
        f,
        "coredns_cache_requests_total",
        Counter,
        "Queries for names outside the zones looked up in the cache: hits and misses.",
    )?;
    writeln!(
        f,
        "coredns_cache_requests_total{{{zones}}} {}",
        cache_hits.iter().sum::<u64>() + cache_misses
    )?;
    header(
        f,
        "coredns_cache_hits_total",
        Counter,
        "Queries for names outside the zones answered from the cache, stale answers included, by what the answer says (success: records; denial: NXDOMAIN, NODATA or another failure).",
    )?;
    for kind in kinds {
        writeln!(
            f,
            "coredns_cache_hits_total{{{zones},type=\"{}\"}} {}",
            kind.label(),
            cache_hits[kind as usize]
        )?;
    }
    for (name, help, value) in [
        (
            "coredns_cache_misses_total",
            "Queries for names outside the zones the cache could not answer, hence forwarded.",
            cache_misses,
        ),
        (
            "coredns_cache_prefetch_total",
            "Popular entries fetched again before they expired.",
            cache_prefetches,
        ),
        (
            "coredns_cache_served_stale_total",
            "Answers served past their TTL because upstreams failed (RFC 8767).",
            cache_stale_answers,
        ),
        (
            "coredns_cache_evictions_total",
            "Cache entries evicted to keep the cache within its memory bound.",
            cache_evictions,
        ),
    ] {
        header(f, name, Counter, help)?;
        writeln!(f, "{name}{{{zones}}} {value}")?;
    }
    single(
        f,
        "skyline_cache_bytes",
        Gauge,
        "Bytes the cache holds now against its memory bound, all workers together.",
        cache_bytes,
    )?;
    single(
        f,
        "skyline_cache_inserts_total",
        Counter,
        "Upstream answers stored in the cache.",
        cache_inserts,
    )?;
    single(
        f,
        "skyline_cache_refreshes_total",
        Counter,
        "Background refreshes started: prefetches of popular entries, rechecks of stale ones.",
        cache_refreshes,
    )?;

    single(
        f,
        "coredns_forward_max_concurrent_rejects_total",
        Counter,
        "Questions refused at once because too many were in flight upstream.",
        forward_busy,
    )?;
    single(
        f,
        "coredns_forward_healthcheck_broken_total",
        Counter,
        "Health probes sent while every upstream of their route was down: grows for as long as a route has no upstream left.",
        upstreams_all_down,
    )?;
    single(
        f,
        "skyline_forward_queries_sent_total",
        Counter,
        "Queries that left for upstreams: each try, each TCP retry, each health probe.",
        upstream_queries,
    )?;
    labelled(
        f,
        "skyline_rrl_limited_total",
        Counter,
        "UDP replies over the response rate limit: dropped, or slipped (sent truncated).",
        "action",
        &[("dropped", rrl_dropped), ("slipped", rrl_slipped)],
    )?;
    single(
        f,
        "skyline_forward_client_limited_total",
        Counter,
        "Questions refused at once because their client had its share of those in flight.",
        forward_client_limited,
    )?;
    single(
        f,
        "skyline_recursion_refused_total",
        Counter,
        "Questions for names outside the zones refused (EDE 18) to clients outside the recursion ACL.",
        recursion_refused,
    )?;
    single(
        f,
        "skyline_forward_tcp_retries_total",
        Counter,
        "Truncated upstream answers asked again over TCP.",
        upstream_tcp_retries,
    )?;
    labelled(
        f,
        "skyline_forward_connections_opened_total",
        Counter,
        "Persistent upstream connections opened (force_tcp, tls), by protocol.",
        "proto",
        &[("tcp", upstream_conn_opened[0]), ("tls", upstream_conn_opened[1])],
    )?;
    labelled(
        f,
        "skyline_forward_connections_reused_total",
        Counter,
        "Upstream queries sent on a persistent connection already open, by protocol.",
        "proto",
        &[("tcp", upstream_conn_reused[0]), ("tls", upstream_conn_reused[1])],
    )?;
    single(
        f,
        "skyline_forward_resent_total",
        Counter,
        "Upstream queries sent again because their upstream closed the connection after answering on it.",
        upstream_resent,
    )?;
    single(
        f,
        "skyline_forward_timeouts_total",
        Counter,
        "Upstream tries that timed out.",
        upstream_timeouts,
    )?;
    single(
        f,
        "skyline_forward_errors_total",
        Counter,
        "Upstream tries that failed outright (refused, reset, socket errors).",
        upstream_errors,
    )?;
    single(
        f,
        "skyline_forward_bad_answers_total",
        Counter,
        "Upstream answers with a failure rcode or unreadable records.",
        upstream_bad_answers,
    )?;
    labelled(
        f,
        "skyline_forward_mismatched_total",
        Counter,
        "Datagrams on upstream sockets dropped because their ID or question did not match.",
        "reason",
        &[
            ("id", upstream_mismatched_id),
            ("question", upstream_mismatched_question),
        ],
    )?;
    single(
        f,
        "skyline_forward_probes_total",
        Counter,
        "Health probes sent to upstreams marked down, and health checks of sets configured with them.",
        upstream_probes,
    )?;
    single(
        f,
        "skyline_forward_upstreams_marked_down_total",
        Counter,
        "Times an upstream was marked down after repeated failures.",
        upstreams_marked_down,
    )?;
    single(
        f,
        "skyline_forward_merged_total",
        Counter,
        "Questions merged into an identical one already in flight.",
        forward_merged,
    )?;
    single(
        f,
        "skyline_forward_failures_total",
        Counter,
        "Forwarded questions answered SERVFAIL because no upstream answered usably.",
        forward_failures,
    )?;
    single(
        f,
        "skyline_forward_stub_loops_dropped_total",
        Counter,
        "Stub zone queries dropped because they carried the SkyDNS loop guard.",
        stub_loops_dropped,
    )?;
    single(
        f,
        "skyline_dnstap_sent_total",
        Counter,
        "dnstap messages written to the Frame Streams reader.",
        dnstap_sent,
    )?;
    single(
        f,
        "skyline_dnstap_dropped_total",
        Counter,
        "dnstap messages lost: a worker's queue was full, or the reader was absent or failed.",
        dnstap_dropped,
    )?;
    single(
        f,
        "skyline_query_log_lines_total",
        Counter,
        "Query log lines written.",
        query_log_lines,
    )?;
    single(
        f,
        "skyline_query_log_suppressed_total",
        Counter,
        "Query log lines left out: past the rate limit, or their queue was full.",
        query_log_suppressed,
    )
}

/// The forwarder's series per upstream (`to`), under CoreDNS's current names (its `proxy`
/// plugin's, `proxy_name="forward"`) and under the names of CoreDNS before 1.11, which the
/// CoreDNS alerts in wide use still query; both are read from the same counters. Nothing at
/// all without forwarding.
fn upstreams(f: &mut Formatter<'_>, upstreams: &[UpstreamTotals]) -> fmt::Result {
    use Kind::Counter;
    if upstreams.is_empty() {
        return Ok(());
    }
    let seconds = |nanos: u64| nanos as f64 / 1e9;
    let durations: Vec<String> = DURATION_BOUNDS.iter().map(|&b| seconds(b).to_string()).collect();
    let answered = |prefix: &str| -> Vec<(String, &Histogram<DURATION_SLOTS>)> {
        upstreams
            .iter()
            .flat_map(|u| {
                u.answers
                    .iter()
                    .zip(RCODE_NAMES)
                    .filter(|(h, _)| h.count() > 0)
                    .map(move |(h, rcode)| (format!("{prefix}to=\"{}\",rcode=\"{rcode}\"", u.addr), h))
            })
            .collect()
    };
    histogram(
        f,
        "coredns_proxy_request_duration_seconds",
        "Time from a query's send to an upstream to its answer, per upstream and rcode of the answer.",
        &durations,
        &answered("proxy_name=\"forward\","),
        seconds,
    )?;
    header(
        f,
        "coredns_proxy_healthcheck_failures_total",
        Counter,
        "Failures held against an upstream's health: tries that timed out, were refused or reset, health probes included.",
    )?;
    for u in upstreams {
        writeln!(
            f,
            "coredns_proxy_healthcheck_failures_total{{proxy_name=\"forward\",to=\"{}\"}} {}",
            u.addr, u.failures
        )?;
    }
    histogram(
        f,
        "coredns_forward_request_duration_seconds",
        "As coredns_proxy_request_duration_seconds, under the name CoreDNS used before 1.11.",
        &durations,
        &answered(""),
        seconds,
    )?;
    header(
        f,
        "coredns_forward_requests_total",
        Counter,
        "Queries sent to each upstream: each try, each TCP retry, each health probe (the name CoreDNS used before 1.11).",
    )?;
    for u in upstreams {
        writeln!(f, "coredns_forward_requests_total{{to=\"{}\"}} {}", u.addr, u.sent)?;
    }
    header(
        f,
        "coredns_forward_responses_total",
        Counter,
        "Answers of each upstream by rcode (the name CoreDNS used before 1.11).",
    )?;
    for u in upstreams {
        for (h, rcode) in u.answers.iter().zip(RCODE_NAMES).filter(|(h, _)| h.count() > 0) {
            writeln!(
                f,
                "coredns_forward_responses_total{{to=\"{}\",rcode=\"{rcode}\"}} {}",
                u.addr,
                h.count()
            )?;
        }
    }
    header(
        f,
        "coredns_forward_healthcheck_failures_total",
        Counter,
        "As coredns_proxy_healthcheck_failures_total, under the name CoreDNS used before 1.11.",
    )?;
    for u in upstreams {
        writeln!(
            f,
            "coredns_forward_healthcheck_failures_total{{to=\"{}\"}} {}",
            u.addr, u.failures
        )?;
    }
    header(
        f,
        "skyline_forward_loop_detected",
        Kind::Gauge,
        "1 for an upstream that handed this server's loop probe back to it: forwarding there loops, and it is no longer forwarded to.",
    )?;
    for u in upstreams {
        writeln!(
            f,
            "skyline_forward_loop_detected{{to=\"{}\"}} {}",
            u.addr,
            u.loops.min(1)
        )?;
    }
    Ok(())
}

/// The top talkers: at most K series per family, ranked, whatever the traffic, so that the
/// cardinality is fixed. A label value is escaped as the text format asks (names may hold any
/// byte, printed as `\DDD` escapes by the data plane; a backslash is escaped again here).
fn top_talkers(f: &mut Formatter<'_>, top: &TopTalkers) -> fmt::Result {
    header(
        f,
        "skyline_top_clients",
        Kind::Gauge,
        "Estimated recent queries of the heaviest client addresses (space-saving sketch, halved every minute).",
    )?;
    for (rank, row) in top.clients.iter().enumerate() {
        writeln!(
            f,
            "skyline_top_clients{{rank=\"{}\",client=\"{}\"}} {}",
            rank + 1,
            row.key,
            row.count
        )?;
    }
    header(
        f,
        "skyline_top_names",
        Kind::Gauge,
        "Estimated recent queries of the most asked names (space-saving sketch, halved every minute).",
    )?;
    for (rank, row) in top.names.iter().enumerate() {
        writeln!(
            f,
            "skyline_top_names{{rank=\"{}\",name=\"{}\"}} {}",
            rank + 1,
            escape_label(&row.key),
            row.count
        )?;
    }
    Ok(())
}

/// A label value in the text format: backslash, double quote and line feed escaped.
fn escape_label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The AF_XDP receive queues (`--xdp`), one series per queue in each family; nothing at all
/// without them. Destructured without `..`, so that a counter added to [`QueueTotals`] does
/// not compile until it is exported here.
fn xdp(f: &mut Formatter<'_>, queues: &[QueueTotals]) -> fmt::Result {
    use Kind::{Counter, Gauge};
    if queues.is_empty() {
        return Ok(());
    }
    let mut packets = Vec::new();
    let mut dropped = Vec::new();
    let mut fill_ring_empty = Vec::new();
    let mut invalid = Vec::new();
    let mut zero_copies = Vec::new();
    for totals in queues {
        let QueueTotals {
            queue,
            zero_copy,
            received,
            sent,
            sent_by_kernel,
            dropped_malformed,
            dropped_tx_full,
            dropped_kernel_send,
            kernel_rx_dropped,
            kernel_rx_ring_full,
            kernel_fill_ring_empty,
            kernel_invalid_descs,
        } = *totals;
        packets.extend([
            (queue, Some(("direction", "received")), received),
            (queue, Some(("direction", "sent")), sent),
            (queue, Some(("direction", "sent_by_kernel")), sent_by_kernel),
        ]);
        dropped.extend([
            (queue, Some(("reason", "malformed")), dropped_malformed),
            (queue, Some(("reason", "tx_ring_full")), dropped_tx_full),
            (queue, Some(("reason", "kernel_send")), dropped_kernel_send),
            (queue, Some(("reason", "kernel_rx")), kernel_rx_dropped),
            (queue, Some(("reason", "rx_ring_full")), kernel_rx_ring_full),
        ]);
        fill_ring_empty.push((queue, None, kernel_fill_ring_empty));
        invalid.push((queue, None, kernel_invalid_descs));
        zero_copies.push((queue, None, u64::from(zero_copy)));
    }
    per_queue(
        f,
        "skyline_xdp_packets_total",
        Counter,
        "UDP DNS messages on the AF_XDP path, by queue: queries received, replies sent through the \
         socket, and replies larger than the MTU sent through the kernel's UDP socket instead.",
        &packets,
    )?;
    per_queue(
        f,
        "skyline_xdp_dropped_total",
        Counter,
        "Packets dropped on the AF_XDP path, by queue: frames steered that were not UDP to the served \
         address (malformed), replies with no transmit-ring slot (tx_ring_full), large replies the \
         kernel's UDP socket refused (kernel_send); and by the kernel, for want of a fill-ring frame \
         or too large for one (kernel_rx), or for want of a receive-ring slot (rx_ring_full).",
        &dropped,
    )?;
    per_queue(
        f,
        "skyline_xdp_fill_ring_empty_total",
        Counter,
        "Times the kernel found the queue's fill ring empty when a packet came.",
        &fill_ring_empty,
    )?;
    per_queue(
        f,
        "skyline_xdp_invalid_descriptors_total",
        Counter,
        "Invalid descriptors the kernel found on the queue's receive and transmit rings.",
        &invalid,
    )?;
    per_queue(
        f,
        "skyline_xdp_zero_copy",
        Gauge,
        "1 when the driver moves the queue's frames without copying them (zero-copy), 0 in copy mode.",
        &zero_copies,
    )
}

/// One sample of a per-queue family: the queue, a second label and its value if the family has
/// one, and the sample's value.
type QueueSample<'a> = (u32, Option<(&'a str, &'a str)>, u64);

/// A family with one sample per receive queue, or per queue and value of a second label.
fn per_queue(f: &mut Formatter<'_>, name: &str, kind: Kind, help: &str, samples: &[QueueSample<'_>]) -> fmt::Result {
    header(f, name, kind, help)?;
    for (queue, label, value) in samples {
        match label {
            Some((label, label_value)) => writeln!(f, "{name}{{queue=\"{queue}\",{label}=\"{label_value}\"}} {value}")?,
            None => writeln!(f, "{name}{{queue=\"{queue}\"}} {value}")?,
        }
    }
    Ok(())
}

/// The SIGHUP reloads of the configuration; the failure count under CoreDNS's name.
fn reloads(f: &mut Formatter<'_>, reloads: &Reloads) -> fmt::Result {
    use Kind::{Counter, Gauge};
    single(
        f,
        "coredns_reload_failed_total",
        Counter,
        "Reloads whose configuration was invalid; the settings in force stayed.",
        reloads.rejected,
    )?;
    labelled(
        f,
        "skyline_reloads_total",
        Counter,
        "Configuration reloads (SIGHUP), by result.",
        "result",
        &[("applied", reloads.applied), ("rejected", reloads.rejected)],
    )?;
    single(
        f,
        "skyline_reload_last_success_timestamp_seconds",
        Gauge,
        "When the settings in force were put in force (start or reload), in Unix seconds.",
        reloads.last_applied,
    )?;
    single(
        f,
        "skyline_reload_restart_pending",
        Gauge,
        "1 when the configuration file changes a setting that only a restart applies.",
        u64::from(reloads.restart_pending),
    )
}

/// The served snapshot and every configured source. A family every source may have holds the
/// samples of all of them, one per `source` label, in the sources' order; then come the
/// families only one source has, each source's in turn.
fn sources(f: &mut Formatter<'_>, report: &Report) -> fmt::Result {
    use Kind::{Counter, Gauge};
    single(
        f,
        "skyline_snapshot_generation",
        Gauge,
        "Generation of the snapshot being served; grows with every publication.",
        report.generation,
    )?;
    let ready: Vec<(&str, u64)> = report
        .sources
        .iter()
        .map(|source| (source.name, u64::from(source.ready.is_ok())))
        .collect();
    labelled(
        f,
        "skyline_source_ready",
        Gauge,
        "1 when the source serves a complete read of its data (what /ready checks), else 0.",
        "source",
        &ready,
    )?;
    let loads: Vec<(&str, Loads)> = report
        .sources
        .iter()
        .filter_map(|source| Some((source.name, source.loads?)))
        .collect();
    let each = |field: fn(&Loads) -> u64| -> Vec<(&str, u64)> {
        loads.iter().map(|(source, l)| (*source, field(l))).collect()
    };
    labelled(
        f,
        "skyline_source_records",
        Gauge,
        "Records in the snapshot the source last published.",
        "source",
        &each(|l| l.records),
    )?;
    labelled(
        f,
        "skyline_source_records_rejected",
        Gauge,
        "Records skipped as invalid in the source's last publication, each logged.",
        "source",
        &each(|l| l.rejected),
    )?;
    labelled(
        f,
        "skyline_source_loads_total",
        Counter,
        "Snapshots the source published, the first one included.",
        "source",
        &each(|l| l.loads),
    )?;
    labelled(
        f,
        "skyline_source_load_failures_total",
        Counter,
        "Loads that failed and kept the previous snapshot.",
        "source",
        &each(|l| l.failures),
    )?;
    labelled(
        f,
        "skyline_source_generation",
        Gauge,
        "Generation of the snapshot the source last published.",
        "source",
        &each(|l| l.generation),
    )?;
    persisted(f, &report.sources)?;
    for family in report.sources.iter().flat_map(|source| &source.families) {
        single(f, family.name, family.kind, family.help, family.value)?;
    }
    for family in report.sources.iter().flat_map(|source| &source.histograms) {
        source_histogram(f, family)?;
    }
    Ok(())
}

/// A source's histogram family, its buckets cumulative up to `+Inf`.
fn source_histogram(f: &mut Formatter<'_>, family: &HistogramFamily) -> fmt::Result {
    let HistogramFamily {
        name,
        help,
        label,
        bounds,
        series,
    } = family;
    writeln!(f, "# HELP {name} {help}")?;
    writeln!(f, "# TYPE {name} histogram")?;
    for (value, counts, sum) in series {
        let mut cumulative = 0;
        let bounds = bounds.iter().map(ToString::to_string).chain(["+Inf".to_owned()]);
        for (bound, count) in bounds.zip(counts) {
            cumulative += count;
            writeln!(f, "{name}_bucket{{{label}=\"{value}\",le=\"{bound}\"}} {cumulative}")?;
        }
        writeln!(f, "{name}_sum{{{label}=\"{value}\"}} {sum}")?;
        writeln!(f, "{name}_count{{{label}=\"{value}\"}} {cumulative}")?;
    }
    Ok(())
}

/// The persisted snapshots: which source serves stale data, and how the writes go (only with
/// a state directory).
fn persisted(f: &mut Formatter<'_>, sources: &[Status]) -> fmt::Result {
    use Kind::{Counter, Gauge};
    let state: Vec<(&str, Persisted)> = sources
        .iter()
        .filter_map(|source| Some((source.name, source.persisted?)))
        .collect();
    let each = |value: fn(&Persisted) -> Option<u64>| -> Vec<(&str, u64)> {
        state
            .iter()
            .filter_map(|(source, p)| Some((*source, value(p)?)))
            .collect()
    };
    labelled(
        f,
        "skyline_source_stale",
        Gauge,
        "1 while the source serves data persisted by an earlier process (--state-dir), not its own.",
        "source",
        &each(|p| Some(u64::from(p.stale_since.is_some()))),
    )?;
    labelled(
        f,
        "skyline_source_persisted_age_seconds",
        Gauge,
        "While stale: seconds since the persisted data being served was current.",
        "source",
        &each(|p| p.stale_age.map(|age| age.as_secs())),
    )?;
    let persisting = |value: fn(&Persisted) -> Option<u64>| -> Vec<(&str, u64)> {
        state
            .iter()
            .filter(|(_, p)| p.persisting)
            .filter_map(|(source, p)| Some((*source, value(p)?)))
            .collect()
    };
    labelled(
        f,
        "skyline_state_writes_total",
        Counter,
        "Persisted snapshots written to the state directory.",
        "source",
        &persisting(|p| Some(p.writes)),
    )?;
    labelled(
        f,
        "skyline_state_write_failures_total",
        Counter,
        "Persisted snapshots that could not be written; the previous file stays.",
        "source",
        &persisting(|p| Some(p.write_failures)),
    )?;
    labelled(
        f,
        "skyline_state_last_write_timestamp_seconds",
        Gauge,
        "When the data in the last persisted snapshot written was current, in Unix seconds.",
        "source",
        &persisting(|p| p.last_write.map(unix_seconds)),
    )
}

fn unix_seconds(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The `# HELP` and `# TYPE` lines of a family. Help texts are literals without a backslash or
/// a line break, the two characters the format would need escaped.
fn header(f: &mut Formatter<'_>, name: &str, kind: Kind, help: &str) -> fmt::Result {
    let kind = match kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
    };
    writeln!(f, "# HELP {name} {help}")?;
    writeln!(f, "# TYPE {name} {kind}")
}

/// Families of a program's own other than the DNS server (kube2etcd), one sample each, in the
/// same text format.
#[derive(Debug)]
pub struct Families<'a>(pub &'a [Family]);

impl Display for Families<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for family in self.0 {
            single(f, family.name, family.kind, family.help, family.value)?;
        }
        Ok(())
    }
}

/// A family of one unlabelled sample.
fn single(f: &mut Formatter<'_>, name: &str, kind: Kind, help: &str, value: impl Display) -> fmt::Result {
    header(f, name, kind, help)?;
    writeln!(f, "{name} {value}")
}

/// A family with one sample per value of `label`; nothing at all when there is no sample. Label
/// values are literals that need no escaping.
fn labelled(
    f: &mut Formatter<'_>,
    name: &str,
    kind: Kind,
    help: &str,
    label: &str,
    samples: &[(&str, u64)],
) -> fmt::Result {
    if samples.is_empty() {
        return Ok(());
    }
    header(f, name, kind, help)?;
    for (value_of_label, value) in samples {
        writeln!(f, "{name}{{{label}=\"{value_of_label}\"}} {value}")?;
    }
    Ok(())
}

/// A histogram family: one series per `(labels, histogram)`, `labels` written out as
/// `a="x",b="y"` (unlabelled when empty), its buckets cumulative up to `+Inf`, its sum
/// converted by `sum`.
fn histogram<const S: usize>(
    f: &mut Formatter<'_>,
    name: &str,
    help: &str,
    bounds: &[String],
    series: &[(String, &Histogram<S>)],
    sum: impl Fn(u64) -> f64,
) -> fmt::Result {
    writeln!(f, "# HELP {name} {help}")?;
    writeln!(f, "# TYPE {name} histogram")?;
    for (labels, h) in series {
        let label = if labels.is_empty() {
            String::new()
        } else {
            format!("{labels},")
        };
        let mut cumulative = 0;
        for (bound, count) in bounds.iter().zip(&h.counts) {
            cumulative += count;
            writeln!(f, "{name}_bucket{{{label}le=\"{bound}\"}} {cumulative}")?;
        }
        writeln!(f, "{name}_bucket{{{label}le=\"+Inf\"}} {}", h.count())?;
        let label = label.trim_end_matches(',');
        let braces = if label.is_empty() {
            String::new()
        } else {
            format!("{{{label}}}")
        };
        writeln!(f, "{name}_sum{braces} {}", sum(h.sum))?;
        writeln!(f, "{name}_count{braces} {}", h.count())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Family;
    use skyline_dataplane::stats::Requests;
    use std::collections::{BTreeMap, HashSet};
    use std::time::Duration;

    /// Parses the text format strictly enough to catch what a Prometheus scraper rejects: every
    /// sample belongs to a family declared just before it by `# HELP` and `# TYPE`, no family
    /// appears twice, names and labels are well formed, values are numbers. Returns each
    /// sample, keyed by its name and labels as written.
    fn parse(text: &str) -> BTreeMap<String, f64> {
        fn valid_name(name: &str) -> bool {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        }
        assert!(text.ends_with('\n'), "the exposition ends with a line break");
        let mut families = HashSet::new();
        let mut current: Option<(String, String)> = None;
        let mut samples = BTreeMap::new();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').expect("HELP has a name and a text");
                assert!(valid_name(name), "{line}");
                assert!(!help.is_empty(), "{line}");
                assert!(families.insert(name.to_owned()), "family {name} declared twice");
                let typed = lines.next().expect("TYPE follows HELP");
                let kind = typed
                    .strip_prefix(&format!("# TYPE {name} "))
                    .unwrap_or_else(|| panic!("TYPE of {name} follows its HELP: {typed}"));
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{typed}");
                current = Some((name.to_owned(), kind.to_owned()));
                assert!(
                    lines.peek().is_some_and(|next| !next.starts_with('#')),
                    "family {name} has a sample"
                );
                continue;
            }
            assert!(!line.starts_with('#'), "unexpected comment {line}");
            let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
            let name = series.split('{').next().unwrap();
            let (family, kind) = current.as_ref().expect("a sample follows its family's TYPE");
            if kind == "histogram" {
                let part = name.strip_prefix(family.as_str()).unwrap_or_default();
                assert!(
                    ["_bucket", "_sum", "_count"].contains(&part),
                    "sample {line} outside its family"
                );
            } else {
                assert_eq!(name, family, "sample {line} outside its family");
            }
            if kind == "counter" {
                assert!(name.ends_with("_total"), "counter {name} ends in _total");
            }
            let name = series.split('{').next().unwrap();
            if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
                let inner = labels
                    .strip_prefix('{')
                    .and_then(|l| l.strip_suffix('}'))
                    .expect("labels in braces");
                for pair in inner.split(',') {
                    let (label, quoted) = pair.split_once('=').expect("label=value");
                    assert!(valid_name(label), "{line}");
                    assert!(
                        quoted.len() >= 2 && quoted.starts_with('"') && quoted.ends_with('"'),
                        "{line}"
                    );
                }
            }
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}: value is a number"));
            assert!(samples.insert(series.to_owned(), value).is_none(), "{series} twice");
        }
        samples
    }

    fn source(name: &'static str, ready: bool) -> Status {
        Status {
            name,
            ready: if ready { Ok(()) } else { Err("waiting") },
            loads: None,
            persisted: None,
            families: Vec::new(),
            histograms: Vec::new(),
        }
    }

    fn full_report() -> Report {
        let etcd = Status {
            loads: Some(Loads {
                records: 30,
                rejected: 1,
                loads: 4,
                failures: 0,
                generation: 12,
            }),
            persisted: Some(Persisted {
                persisting: true,
                stale_since: Some(std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
                stale_age: Some(Duration::from_millis(90_500)),
                writes: 0,
                write_failures: 1,
                last_write: None,
            }),
            families: vec![
                Family::gauge("skyline_etcd_revision", "The revision.", 88_i64),
                Family::gauge(
                    "skyline_etcd_last_contact_age_seconds",
                    "An age.",
                    Duration::from_millis(1500),
                ),
            ],
            ..source("etcd", true)
        };
        let kubernetes = Status {
            persisted: Some(Persisted {
                persisting: false,
                stale_since: None,
                stale_age: None,
                writes: 0,
                write_failures: 0,
                last_write: None,
            }),
            families: vec![Family::counter("skyline_kubernetes_lists_total", "Lists.", 3_u64)],
            histograms: vec![HistogramFamily {
                name: "coredns_kubernetes_dns_programming_duration_seconds",
                help: "Programming.",
                label: "service_kind",
                bounds: &[0.001, 0.002],
                series: vec![
                    ("cluster_ip", vec![1, 0, 2], 7.5),
                    ("headless_with_selector", vec![0, 0, 0], 0.0),
                ],
            }],
            ..source("kubernetes", false)
        };
        let mut requests = Requests::default();
        requests.add(AddressFamily::V4, Transport::Udp, 1, 9);
        requests.add(AddressFamily::V6, Transport::Udp, 99, 1);
        requests.add(AddressFamily::V4, Transport::Tcp, 33, 2);
        let mut upstream = UpstreamTotals::new("192.0.2.53:53".parse().unwrap());
        upstream.sent = 6;
        upstream.failures = 1;
        upstream.answers[0].counts[3] = 4;
        upstream.answers[0].sum = 300_000;
        upstream.answers[2].counts[20] = 1;
        upstream.answers[2].sum = 6_000_000_000;
        Report {
            draining: false,
            reloads: Reloads {
                applied: 2,
                rejected: 1,
                last_applied: 1_700_000_000,
                restart_pending: true,
            },
            dns: Totals {
                requests,
                replies_noerror: 7,
                replies_nxdomain: 3,
                replies_other: 1,
                cache_hits: [4, 2],
                cache_misses: 5,
                cache_prefetches: 3,
                upstream_queries: 6,
                upstreams_all_down: 2,
                forward_busy: 1,
                cache_entries: [9, 1],
                ..Totals::default()
            },
            upstreams: vec![upstream],
            server: "dns://127.0.0.1:53".to_owned(),
            top_talkers: None,
            xdp: Vec::new(),
            generation: 12,
            sources: vec![etcd, kubernetes],
        }
    }

    #[test]
    fn top_talkers_are_ranked_with_escaped_names() {
        use skyline_dataplane::observe::topk::Counted;
        let report = Report {
            top_talkers: Some(TopTalkers {
                clients: vec![Counted {
                    key: "10.0.0.1".parse().unwrap(),
                    count: 7,
                    error: 0,
                }],
                names: vec![
                    Counted {
                        key: "a.example.".to_owned(),
                        count: 5,
                        error: 0,
                    },
                    Counted {
                        key: "b\\034.example.".to_owned(),
                        count: 2,
                        error: 1,
                    },
                ],
            }),
            ..full_report()
        };
        let samples = parse(&Metrics(&report).to_string());
        assert_eq!(samples[r#"skyline_top_clients{rank="1",client="10.0.0.1"}"#], 7.0);
        assert_eq!(samples[r#"skyline_top_names{rank="1",name="a.example."}"#], 5.0);
        assert_eq!(samples[r#"skyline_top_names{rank="2",name="b\\034.example."}"#], 2.0);
        assert!(!Metrics(&full_report()).to_string().contains("skyline_top_"));
    }

    #[test]
    fn xdp_queues_are_labelled_by_queue_and_absent_without_xdp() {
        let queue = |queue, zero_copy| QueueTotals {
            queue,
            zero_copy,
            received: 100 + u64::from(queue),
            sent: 90,
            sent_by_kernel: 3,
            dropped_malformed: 4,
            dropped_tx_full: 5,
            dropped_kernel_send: 6,
            kernel_rx_dropped: 7,
            kernel_rx_ring_full: 8,
            kernel_fill_ring_empty: 9,
            kernel_invalid_descs: 10,
        };
        let report = Report {
            xdp: vec![queue(0, false), queue(1, true)],
            ..full_report()
        };
        let samples = parse(&Metrics(&report).to_string());
        let expected = [
            (r#"skyline_xdp_packets_total{queue="0",direction="received"}"#, 100.0),
            (r#"skyline_xdp_packets_total{queue="1",direction="received"}"#, 101.0),
            (r#"skyline_xdp_packets_total{queue="1",direction="sent"}"#, 90.0),
            (
                r#"skyline_xdp_packets_total{queue="0",direction="sent_by_kernel"}"#,
                3.0,
            ),
            (r#"skyline_xdp_dropped_total{queue="0",reason="malformed"}"#, 4.0),
            (r#"skyline_xdp_dropped_total{queue="0",reason="tx_ring_full"}"#, 5.0),
            (r#"skyline_xdp_dropped_total{queue="1",reason="kernel_send"}"#, 6.0),
            (r#"skyline_xdp_dropped_total{queue="1",reason="kernel_rx"}"#, 7.0),
            (r#"skyline_xdp_dropped_total{queue="0",reason="rx_ring_full"}"#, 8.0),
            (r#"skyline_xdp_fill_ring_empty_total{queue="1"}"#, 9.0),
            (r#"skyline_xdp_invalid_descriptors_total{queue="0"}"#, 10.0),
            (r#"skyline_xdp_zero_copy{queue="0"}"#, 0.0),
            (r#"skyline_xdp_zero_copy{queue="1"}"#, 1.0),
        ];
        for (series, value) in expected {
            assert_eq!(samples.get(series), Some(&value), "{series}");
        }
        assert_eq!(samples.keys().filter(|k| k.starts_with("skyline_xdp_")).count(), 2 * 11);
        assert!(!Metrics(&full_report()).to_string().contains("skyline_xdp_"));
    }

    #[test]
    fn reloads_are_counted_by_result() {
        let samples = parse(&Metrics(&full_report()).to_string());
        assert_eq!(samples["coredns_reload_failed_total"], 1.0);
        assert_eq!(samples[r#"skyline_reloads_total{result="applied"}"#], 2.0);
        assert_eq!(samples[r#"skyline_reloads_total{result="rejected"}"#], 1.0);
        assert_eq!(
            samples["skyline_reload_last_success_timestamp_seconds"],
            1_700_000_000.0
        );
        assert_eq!(samples["skyline_reload_restart_pending"], 1.0);
    }

    const ZONE: &str = r#"server="dns://127.0.0.1:53",zone=".""#;
    const ZONES: &str = r#"server="dns://127.0.0.1:53",zones=".""#;

    #[test]
    fn dns_counters_use_coredns_names_and_labels() {
        let samples = parse(&Metrics(&full_report()).to_string());
        let requests = |labels: &str| format!("coredns_dns_requests_total{{{ZONE},{labels}}}");
        let expected = [
            (requests(r#"proto="udp",family="1",type="A""#), 9.0),
            (requests(r#"proto="udp",family="2",type="other""#), 1.0),
            (requests(r#"proto="tcp",family="1",type="SRV""#), 2.0),
            (requests(r#"proto="tcp",family="2",type="HTTPS""#), 0.0),
            (format!(r#"coredns_dns_responses_total{{{ZONE},rcode="NOERROR"}}"#), 7.0),
            (
                format!(r#"coredns_dns_responses_total{{{ZONE},rcode="NXDOMAIN"}}"#),
                3.0,
            ),
            (
                format!(r#"coredns_dns_responses_total{{{ZONE},rcode="SERVFAIL"}}"#),
                0.0,
            ),
            (format!(r#"coredns_dns_responses_total{{{ZONE},rcode="OTHER"}}"#), 1.0),
            (format!(r#"coredns_cache_hits_total{{{ZONES},type="success"}}"#), 4.0),
            (format!(r#"coredns_cache_hits_total{{{ZONES},type="denial"}}"#), 2.0),
            (format!(r#"coredns_cache_requests_total{{{ZONES}}}"#), 11.0),
            (format!(r#"coredns_cache_misses_total{{{ZONES}}}"#), 5.0),
            (format!(r#"coredns_cache_prefetch_total{{{ZONES}}}"#), 3.0),
            (format!(r#"coredns_cache_entries{{{ZONES},type="success"}}"#), 9.0),
            (format!(r#"coredns_cache_entries{{{ZONES},type="denial"}}"#), 1.0),
            ("coredns_forward_max_concurrent_rejects_total".to_owned(), 1.0),
            ("coredns_forward_healthcheck_broken_total".to_owned(), 2.0),
            ("coredns_panics_total".to_owned(), 0.0),
            ("skyline_forward_queries_sent_total".to_owned(), 6.0),
        ];
        for (series, value) in expected {
            assert_eq!(samples.get(&series), Some(&value), "{series}");
        }
        let types = samples
            .keys()
            .filter(|k| k.starts_with("coredns_dns_requests_total{"))
            .count();
        assert_eq!(
            types,
            2 * 2 * (QUESTION_TYPES.len() + 1),
            "every family, transport and type"
        );
    }

    #[test]
    fn upstreams_have_coredns_current_and_earlier_series_per_address() {
        let samples = parse(&Metrics(&full_report()).to_string());
        let to = r#"to="192.0.2.53:53""#;
        let expected = [
            (
                format!(r#"coredns_proxy_request_duration_seconds_count{{proxy_name="forward",{to},rcode="NOERROR"}}"#),
                4.0,
            ),
            (
                format!(r#"coredns_proxy_request_duration_seconds_sum{{proxy_name="forward",{to},rcode="NOERROR"}}"#),
                0.0003,
            ),
            (
                format!(
                    r#"coredns_proxy_request_duration_seconds_bucket{{proxy_name="forward",{to},rcode="SERVFAIL",le="+Inf"}}"#
                ),
                1.0,
            ),
            (
                format!(r#"coredns_proxy_healthcheck_failures_total{{proxy_name="forward",{to}}}"#),
                1.0,
            ),
            (
                format!(r#"coredns_forward_request_duration_seconds_count{{{to},rcode="NOERROR"}}"#),
                4.0,
            ),
            (format!(r#"coredns_forward_requests_total{{{to}}}"#), 6.0),
            (
                format!(r#"coredns_forward_responses_total{{{to},rcode="NOERROR"}}"#),
                4.0,
            ),
            (
                format!(r#"coredns_forward_responses_total{{{to},rcode="SERVFAIL"}}"#),
                1.0,
            ),
            (format!(r#"coredns_forward_healthcheck_failures_total{{{to}}}"#), 1.0),
            (format!(r#"skyline_forward_loop_detected{{{to}}}"#), 0.0),
        ];
        for (series, value) in expected {
            assert_eq!(samples.get(&series), Some(&value), "{series}");
        }
        assert!(
            !samples
                .keys()
                .any(|k| k.contains(r#"rcode="NXDOMAIN""#) && k.contains("forward")),
            "an rcode no upstream answered has no series"
        );
        let without = Report {
            upstreams: Vec::new(),
            ..full_report()
        };
        let text = Metrics(&without).to_string();
        assert!(!text.contains("coredns_proxy_") && !text.contains("coredns_forward_requests_total"));
    }

    #[test]
    fn a_sources_histograms_are_cumulative_per_label_value() {
        let samples = parse(&Metrics(&full_report()).to_string());
        let name = "coredns_kubernetes_dns_programming_duration_seconds";
        let expected = [
            (format!(r#"{name}_bucket{{service_kind="cluster_ip",le="0.001"}}"#), 1.0),
            (format!(r#"{name}_bucket{{service_kind="cluster_ip",le="0.002"}}"#), 1.0),
            (format!(r#"{name}_bucket{{service_kind="cluster_ip",le="+Inf"}}"#), 3.0),
            (format!(r#"{name}_sum{{service_kind="cluster_ip"}}"#), 7.5),
            (format!(r#"{name}_count{{service_kind="cluster_ip"}}"#), 3.0),
            (format!(r#"{name}_count{{service_kind="headless_with_selector"}}"#), 0.0),
        ];
        for (series, value) in expected {
            assert_eq!(samples.get(&series), Some(&value), "{series}");
        }
    }

    #[test]
    fn udp_send_failures_are_split_by_reason() {
        let mut report = full_report();
        report.dns.udp_send_failures = 5;
        report.dns.udp_send_buffer_full = 3;
        let samples = parse(&Metrics(&report).to_string());
        assert_eq!(samples[r#"skyline_udp_send_failures_total{reason="buffer_full"}"#], 3.0);
        assert_eq!(samples[r#"skyline_udp_send_failures_total{reason="refused"}"#], 2.0);
    }

    #[test]
    fn histograms_are_cumulative_with_coredns_names_and_buckets() {
        let mut report = full_report();
        let durations = &mut report.dns.request_duration;
        durations.counts[0] = 5;
        durations.counts[2] = 3;
        durations.sum = 90_000;
        report.dns.response_size[1].counts[6] = 2;
        report.dns.response_size[1].sum = 1500;
        let samples = parse(&Metrics(&report).to_string());
        let expected = [
            ("coredns_dns_request_duration_seconds_bucket{Z,le=\"0.00001\"}", 5.0),
            ("coredns_dns_request_duration_seconds_bucket{Z,le=\"0.00002\"}", 5.0),
            ("coredns_dns_request_duration_seconds_bucket{Z,le=\"0.00004\"}", 8.0),
            ("coredns_dns_request_duration_seconds_bucket{Z,le=\"+Inf\"}", 8.0),
            ("coredns_dns_request_duration_seconds_sum{Z}", 0.00009),
            ("coredns_dns_request_duration_seconds_count{Z}", 8.0),
            (
                "coredns_dns_response_size_bytes_bucket{Z,proto=\"tcp\",le=\"511\"}",
                0.0,
            ),
            (
                "coredns_dns_response_size_bytes_bucket{Z,proto=\"tcp\",le=\"1023\"}",
                2.0,
            ),
            ("coredns_dns_response_size_bytes_sum{Z,proto=\"tcp\"}", 1500.0),
            ("coredns_dns_response_size_bytes_count{Z,proto=\"udp\"}", 0.0),
            (
                "coredns_dns_request_size_bytes_bucket{Z,proto=\"udp\",le=\"64000\"}",
                0.0,
            ),
        ];
        for (series, value) in expected {
            let series = series.replace('Z', ZONE);
            assert_eq!(samples.get(&series), Some(&value), "{series}");
        }
    }

    #[test]
    fn source_state_is_reported_per_configured_source() {
        let samples = parse(&Metrics(&full_report()).to_string());
        let expected = [
            ("skyline_snapshot_generation", 12.0),
            ("skyline_source_ready{source=\"etcd\"}", 1.0),
            ("skyline_source_ready{source=\"kubernetes\"}", 0.0),
            ("skyline_source_records{source=\"etcd\"}", 30.0),
            ("skyline_source_loads_total{source=\"etcd\"}", 4.0),
            ("skyline_etcd_revision", 88.0),
            ("skyline_etcd_last_contact_age_seconds", 1.5),
            ("skyline_kubernetes_lists_total", 3.0),
        ];
        for (series, value) in expected {
            assert_eq!(samples.get(series), Some(&value), "{series}");
        }
        assert!(!samples.keys().any(|k| k.contains("records_file")));
        assert!(!samples
            .keys()
            .any(|k| k.contains("skyline_source_records{source=\"kubernetes\"}")));
    }

    #[test]
    fn every_family_appears_once_with_the_samples_of_every_source() {
        let text = Metrics(&full_report()).to_string();
        parse(&text);
        let ready: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("skyline_source_ready"))
            .collect();
        assert_eq!(
            ready,
            [
                "skyline_source_ready{source=\"etcd\"} 1",
                "skyline_source_ready{source=\"kubernetes\"} 0"
            ]
        );
        let at = |name: &str| text.find(&format!("# HELP {name} ")).unwrap();
        assert!(at("skyline_state_write_failures_total") < at("skyline_etcd_revision"));
        assert!(at("skyline_etcd_last_contact_age_seconds") < at("skyline_kubernetes_lists_total"));
        assert!(text.contains("# TYPE skyline_kubernetes_lists_total counter\nskyline_kubernetes_lists_total 3\n"));
    }

    #[test]
    fn persisted_snapshots_say_which_source_is_stale_and_how_writes_go() {
        let samples = parse(&Metrics(&full_report()).to_string());
        let expected = [
            ("skyline_source_stale{source=\"etcd\"}", 1.0),
            ("skyline_source_stale{source=\"kubernetes\"}", 0.0),
            ("skyline_source_persisted_age_seconds{source=\"etcd\"}", 90.0),
            ("skyline_state_writes_total{source=\"etcd\"}", 0.0),
            ("skyline_state_write_failures_total{source=\"etcd\"}", 1.0),
        ];
        for (series, value) in expected {
            assert_eq!(samples.get(series), Some(&value), "{series}");
        }
        for absent in [
            "skyline_source_persisted_age_seconds{source=\"kubernetes\"}",
            "skyline_state_writes_total{source=\"kubernetes\"}",
            "skyline_state_last_write_timestamp_seconds{source=\"etcd\"}",
        ] {
            assert!(!samples.contains_key(absent), "{absent}");
        }
    }

    #[test]
    fn an_unconfigured_source_has_no_series() {
        let report = Report {
            sources: vec![Status {
                loads: Some(Loads {
                    records: 5,
                    loads: 1,
                    generation: 1,
                    ..Loads::default()
                }),
                ..source("records_file", true)
            }],
            ..Report::default()
        };
        let samples = parse(&Metrics(&report).to_string());
        assert_eq!(samples.get("skyline_source_ready{source=\"records_file\"}"), Some(&1.0));
        assert_eq!(
            samples.get("skyline_source_records{source=\"records_file\"}"),
            Some(&5.0)
        );
        assert!(!samples.keys().any(|k| k.contains("etcd") || k.contains("kubernetes")));
        assert!(!samples.keys().any(|k| k.starts_with("skyline_source_stale")));
    }

    #[test]
    fn no_source_at_all_still_renders_valid_text() {
        let samples = parse(&Metrics(&Report::default()).to_string());
        let a_over_udp = r#"coredns_dns_requests_total{server="",zone=".",proto="udp",family="1",type="A"}"#;
        assert_eq!(samples.get(a_over_udp), Some(&0.0));
        assert!(!samples.keys().any(|k| k.starts_with("skyline_source_")));
    }
}
