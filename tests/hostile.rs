//! Hostile input against the real binary over real sockets: every row of docs/robustness.md
//! ("Messages") as a test over UDP and one over TCP (`<row>::udp`, `<row>::tcp`), then the abuse a
//! server on a network meets: stalled and trickled TCP, more connections than the caps, idle
//! connections, 64 KiB messages, and a flood of garbage while legitimate queries keep being
//! answered.
//!
//! Replies are read byte by byte where the flags matter and parsed with hickory-proto otherwise.
//! Every test starts its own server, which is killed when the test ends.

mod common;

use common::{tcp_closed, tcp_connect_from, tcp_recv, tcp_send, udp_raw, Skyline};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{RData, RecordType};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

const A: u16 = 1;
const NS: u16 = 2;
const TXT: u16 = 16;
const SRV: u16 = 33;
const OPT: u16 = 41;
const IXFR: u16 = 251;
const AXFR: u16 = 252;
const ANY: u16 = 255;
const CH: u16 = 3;
const COOKIE: (u16, &[u8]) = (10, &[1, 2, 3, 4, 5, 6, 7, 8]);
const KEEPALIVE: (u16, &[u8]) = (11, &[]);

/// How long a UDP test waits for a reply before it calls the message dropped.
const SILENCE: Duration = Duration::from_millis(400);
/// How long any reply may take on an idle loopback server.
const REPLY_WAIT: Duration = Duration::from_secs(3);
/// The server's TCP timeouts (`TcpConfig::default`): the tests allow slack above them.
const IO_TIMEOUT: Duration = Duration::from_secs(1);
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// The per-address cap the cap test sets, and the server's connection cap per worker
/// (`TcpConfig::default`); the harness runs 2 workers.
const PER_CLIENT_CAP: usize = 16;
const TOTAL_CAP: usize = 1024;
const WORKERS: usize = 2;

/// The zone `skydns.test.`: a name with two addresses, 40 addresses (too many for 512 bytes,
/// fine for 1232), SRV records whose glue does not fit 512 bytes, a TXT directory too large for
/// any message, one whose 65520-byte TXT RRset fits a message only without its question, and an
/// NS for the apex.
fn records() -> String {
    let mut r = serde_json::json!({
        "/skydns/config": {"domain": "skydns.test.", "ttl": 3600, "min_ttl": 60},
        "/skydns/test/skydns/dns/ns/ns1": {"host": "10.0.9.1"},
        "/skydns/test/skydns/web/w1": {"host": "10.0.0.1", "port": 80},
        "/skydns/test/skydns/web/w2": {"host": "10.0.0.2", "port": 80},
        "/skydns/test/skydns/svc/a": {"host": "t1.skydns.test.", "port": 80},
        "/skydns/test/skydns/svc/b": {"host": "t2.skydns.test.", "port": 80},
        "/skydns/test/skydns/overflow/o1": {"text": "x".repeat(40_000)},
        "/skydns/test/skydns/overflow/o2": {"text": "y".repeat(40_000)},
        "/skydns/test/skydns/wall/w1": {"text": "v".repeat(32_620)},
        "/skydns/test/skydns/wall/w2": {"text": "w".repeat(32_620)},
    });
    for i in 0..40 {
        r[format!("/skydns/test/skydns/big/h{i:02}")] = serde_json::json!({"host": format!("10.1.0.{i}")});
    }
    for t in 1..=2 {
        for i in 0..30 {
            r[format!("/skydns/test/skydns/t{t}/h{i:02}")] = serde_json::json!({"host": format!("10.2.{t}.{i}")});
        }
    }
    r.to_string()
}

/// A server that forwards nothing (`--no-rec`): names outside the zone are REFUSED, and no
/// query ever leaves the loopback interface.
fn server() -> Skyline {
    Skyline::start(&records(), &["--no-rec"], &[])
}

/// A server that forwards to `upstream`, a loopback socket that never answers, giving up after
/// the default 1500 ms; with `acl`, only those clients may use forwarding.
fn forwarding_server(upstream: &UdpSocket, acl: Option<&str>) -> Skyline {
    let upstream = upstream.local_addr().unwrap().to_string();
    let mut args = vec!["--nameservers", &upstream];
    if let Some(acl) = acl {
        args.extend(["--recursion-acl", acl]);
    }
    Skyline::start(&records(), &args, &[])
}

/// A query written byte by byte, so that any malformation can be expressed.
#[derive(Clone)]
struct Raw {
    id: u16,
    flags: u16,
    counts: [u16; 4],
    body: Vec<u8>,
}

impl Raw {
    /// A standard query with RD set for `qname` (spelled as given) and `qtype`, class IN.
    fn query(qname: &str, qtype: u16) -> Raw {
        Raw::empty().question(qname, qtype, 1)
    }

    fn empty() -> Raw {
        Raw {
            id: 0x5a5a,
            flags: 0x0100,
            counts: [0; 4],
            body: Vec::new(),
        }
    }

    fn question(mut self, qname: &str, qtype: u16, qclass: u16) -> Raw {
        for label in qname.trim_end_matches('.').split('.').filter(|l| !l.is_empty()) {
            self.body.push(label.len() as u8);
            self.body.extend_from_slice(label.as_bytes());
        }
        self.body.push(0);
        self.body.extend_from_slice(&qtype.to_be_bytes());
        self.body.extend_from_slice(&qclass.to_be_bytes());
        self.counts[0] += 1;
        self
    }

    fn opt(mut self, udp_size: u16, version: u8, options: &[(u16, &[u8])]) -> Raw {
        let rdata: Vec<u8> = options
            .iter()
            .flat_map(|(code, data)| [&code.to_be_bytes()[..], &(data.len() as u16).to_be_bytes(), data].concat())
            .collect();
        self.body.push(0);
        self.body.extend_from_slice(&OPT.to_be_bytes());
        self.body.extend_from_slice(&udp_size.to_be_bytes());
        self.body.extend_from_slice(&[0, version, 0, 0]);
        self.body.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        self.body.extend_from_slice(&rdata);
        self.counts[3] += 1;
        self
    }

    fn flags(mut self, flags: u16) -> Raw {
        self.flags = flags;
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut m = Vec::with_capacity(12 + self.body.len());
        m.extend_from_slice(&self.id.to_be_bytes());
        m.extend_from_slice(&self.flags.to_be_bytes());
        for c in self.counts {
            m.extend_from_slice(&c.to_be_bytes());
        }
        m.extend_from_slice(&self.body);
        m
    }
}

/// The transport a row is exercised over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Udp,
    Tcp,
}

/// A reply as raw bytes, with the header fields the rows check.
struct Reply(Vec<u8>);

impl Reply {
    fn flags(&self) -> u16 {
        u16::from_be_bytes([self.0[2], self.0[3]])
    }

    fn rcode(&self) -> u16 {
        self.flags() & 0x000F
    }

    fn id(&self) -> u16 {
        u16::from_be_bytes([self.0[0], self.0[1]])
    }

    fn count(&self, section: usize) -> u16 {
        u16::from_be_bytes([self.0[4 + 2 * section], self.0[5 + 2 * section]])
    }

    /// The reply parsed by hickory-proto.
    fn parsed(&self) -> Message {
        Message::from_vec(&self.0).expect("hickory parses the reply")
    }

    fn has_opt(&self) -> bool {
        self.parsed().extensions().is_some()
    }
}

/// A message that must get no reply, followed (over TCP on the same connection) by this query,
/// which must: the proof that the server dropped the message rather than died or stalled.
fn sentinel() -> Raw {
    Raw {
        id: 0x7e57,
        ..Raw::query("w1.web.skydns.test.", A)
    }
}

impl Via {
    /// Sends one message and returns its reply; `None` when the server sent none within
    /// [`SILENCE`] (over TCP: after the sentinel's reply).
    fn ask(self, s: &Skyline, message: &[u8]) -> Option<Reply> {
        self.ask_within(s, message, SILENCE)
    }

    fn ask_within(self, s: &Skyline, message: &[u8], wait: Duration) -> Option<Reply> {
        match self {
            Via::Udp => {
                let reply = udp_raw(s.addr, message, wait);
                let alive = udp_raw(s.addr, &sentinel().bytes(), REPLY_WAIT).expect("the server still answers");
                assert_eq!(Reply(alive).id(), sentinel().id);
                reply.map(Reply)
            }
            Via::Tcp => {
                // Replies may come out of order (RFC 7766 §6.2.1.1): read until the sentinel's
                // has come, then give the message's a moment more.
                let mut conn = tcp_connect_from(Ipv4Addr::LOCALHOST, s.addr, REPLY_WAIT).unwrap();
                tcp_send(&mut conn, message).unwrap();
                tcp_send(&mut conn, &sentinel().bytes()).unwrap();
                let mut reply = None;
                let mut sentinel_seen = false;
                while reply.is_none() || !sentinel_seen {
                    let Some(frame) = tcp_recv(&mut conn) else {
                        assert!(sentinel_seen, "the sentinel is answered on the connection");
                        break;
                    };
                    let frame = Reply(frame);
                    if frame.id() == sentinel().id && !sentinel_seen {
                        sentinel_seen = true;
                        conn.set_read_timeout(Some(wait)).unwrap();
                    } else {
                        assert!(reply.is_none(), "one reply per message");
                        reply = Some(frame);
                    }
                }
                reply
            }
        }
    }

    /// Sends one message that must be answered.
    fn reply(self, s: &Skyline, message: &[u8]) -> Reply {
        self.ask_within(s, message, REPLY_WAIT).expect("a reply")
    }
}

/// One test per transport for a row of docs/robustness.md ("Messages"): `<row>::udp` and
/// `<row>::tcp`, each with a fresh server.
macro_rules! row {
    ($(#[$doc:meta])* fn $name:ident($via:ident) $body:block) => {
        $(#[$doc])*
        mod $name {
            use super::*;

            fn check($via: Via) $body

            #[test]
            fn udp() {
                check(Via::Udp)
            }

            #[test]
            fn tcp() {
                check(Via::Tcp)
            }
        }
    };
}

row! {
    /// RFC 9619: a query without a question is FORMERR; no OPT came, so none goes back.
    fn qdcount_zero_without_edns_is_formerr(via) {
        let s = server();
        let reply = via.reply(&s, &Raw::empty().bytes());
        assert_eq!(reply.rcode(), 1);
        assert!(!reply.has_opt());
    }
}

row! {
    /// RFC 7873 §5.4: a query with only a COOKIE option asks for a server cookie; NOERROR, no
    /// question, and the client cookie comes back with a server cookie.
    fn qdcount_zero_with_only_a_cookie_learns_a_server_cookie(via) {
        let s = server();
        let reply = via.reply(&s, &Raw::empty().opt(1232, 0, &[COOKIE]).bytes());
        assert_eq!(reply.rcode(), 0);
        let parsed = reply.parsed();
        assert!(parsed.queries().is_empty() && parsed.answers().is_empty());
        let edns = parsed.extensions().as_ref().expect("an OPT");
        match edns.option(EdnsCode::Cookie) {
            Some(EdnsOption::Unknown(10, data)) => {
                assert_eq!(data.len(), 24);
                assert_eq!(&data[..8], COOKIE.1);
            }
            other => panic!("no COOKIE option: {other:?}"),
        }
    }
}

row! {
    fn qdcount_zero_with_opt_is_formerr_with_opt(via) {
        let s = server();
        let reply = via.reply(&s, &Raw::empty().opt(1232, 0, &[]).bytes());
        assert_eq!(reply.rcode(), 1);
        assert_eq!(reply.parsed().extensions().as_ref().unwrap().max_payload(), 1232);
    }
}

row! {
    fn two_questions_are_formerr(via) {
        let s = server();
        let q = Raw::query("w1.web.skydns.test.", A).question("big.skydns.test.", A, 1);
        assert_eq!(via.reply(&s, &q.bytes()).rcode(), 1);
    }
}

row! {
    /// RFC 8906: NOTIMP with RD, AA, TC, RA, Z, AD, CD all clear, the question copied.
    fn unknown_opcodes_are_notimp_with_every_flag_but_qr_cleared(via) {
        let s = server();
        for opcode in [1u16, 2, 3, 4, 5, 6, 15] {
            let q = Raw::query("w1.web.skydns.test.", A).flags((opcode << 11) | 0x07F0);
            let reply = via.reply(&s, &q.bytes());
            assert_eq!(reply.flags(), 0x8000 | (opcode << 11) | 4, "opcode {opcode}");
            assert_eq!(reply.count(0), 1, "question copied");
            assert_eq!(&reply.0[12..], &q.bytes()[12..]);
        }
    }
}

row! {
    /// A response sent to a server is never answered (no reflection loops).
    fn responses_are_dropped(via) {
        let s = server();
        let q = Raw::query("w1.web.skydns.test.", A).flags(0x8100);
        assert!(via.ask(&s, &q.bytes()).is_none());
    }
}

row! {
    fn header_only_is_formerr(via) {
        let s = server();
        let mut q = Raw::empty();
        q.counts[0] = 1;
        assert_eq!(via.reply(&s, &q.bytes()).rcode(), 1);
    }
}

row! {
    fn truncated_question_is_formerr(via) {
        let s = server();
        let mut bytes = Raw::query("w1.web.skydns.test.", A).bytes();
        bytes.truncate(bytes.len() - 3);
        assert_eq!(via.reply(&s, &bytes).rcode(), 1);
    }
}

row! {
    fn compression_loop_is_formerr(via) {
        let s = server();
        let mut q = Raw::empty();
        q.counts[0] = 1;
        q.body = vec![1, b'a', 0xC0, 12, 0, 1, 0, 1];
        assert_eq!(via.reply(&s, &q.bytes()).rcode(), 1);
    }
}

row! {
    /// Pointer hops are bounded by pointing strictly backwards: a forward pointer is refused.
    fn forward_compression_pointer_is_formerr(via) {
        let s = server();
        let mut q = Raw::empty();
        q.counts[0] = 1;
        q.body = vec![0xC0, 18, 0, 1, 0, 1, 1, b'a', 0];
        assert_eq!(via.reply(&s, &q.bytes()).rcode(), 1);
    }
}

row! {
    fn label_over_63_is_formerr(via) {
        let s = server();
        let mut q = Raw::empty();
        q.counts[0] = 1;
        q.body.push(64);
        q.body.extend([b'a'; 64]);
        q.body.extend([0, 0, 1, 0, 1]);
        assert_eq!(via.reply(&s, &q.bytes()).rcode(), 1);
    }
}

row! {
    fn name_over_255_is_formerr(via) {
        let s = server();
        let label = "a".repeat(63);
        let q = Raw::query(&format!("{label}.{label}.{label}.{label}."), A);
        assert_eq!(via.reply(&s, &q.bytes()).rcode(), 1);
    }
}

row! {
    /// Fewer than 12 bytes is not a DNS message: dropped, whatever its length.
    fn runts_are_dropped(via) {
        let s = server();
        let query = Raw::query("w1.web.skydns.test.", A).bytes();
        for len in [0, 1, 2, 11] {
            assert!(via.ask(&s, &query[..len]).is_none(), "{len} bytes");
        }
    }
}

row! {
    /// Garbage with QR set is dropped; garbage whose header parses is FORMERR (or, where the
    /// bytes happen to spell a query, answered); either way the server keeps serving.
    fn garbage_is_dropped_or_formerr(via) {
        let s = server();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for i in 0..20 {
            let len = 12 + (i * 37) % 300;
            let mut bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            bytes[0] = 0x11;
            bytes[2] |= 0x80;
            assert!(via.ask(&s, &bytes).is_none(), "QR set: dropped");
            bytes[2] &= 0x07;
            bytes[4..6].copy_from_slice(&1u16.to_be_bytes());
            let reply = via.reply(&s, &bytes);
            assert_eq!(reply.id(), 0x11 << 8 | u16::from(bytes[1]));
        }
    }
}

row! {
    /// RFC 6891 §6.1.3: BADVERS (16: 1 in the header, 1 in the OPT's extended rcode) with an
    /// OPT of version 0.
    fn edns_version_above_zero_is_badvers_with_version_zero_opt(via) {
        let s = server();
        let reply = via.reply(&s, &Raw::query("w1.web.skydns.test.", A).opt(1232, 1, &[]).bytes());
        let parsed = reply.parsed();
        assert_eq!(u16::from(parsed.response_code()), 16);
        assert_eq!(parsed.extensions().as_ref().unwrap().version(), 0);
        assert!(parsed.answers().is_empty());
    }
}

row! {
    fn two_opt_records_are_formerr_with_opt(via) {
        let s = server();
        let q = Raw::query("w1.web.skydns.test.", A).opt(1232, 0, &[]).opt(1232, 0, &[]);
        let reply = via.reply(&s, &q.bytes());
        assert_eq!(reply.rcode(), 1);
        assert!(reply.has_opt());
    }
}

row! {
    fn opt_outside_additional_is_formerr(via) {
        let s = server();
        let mut q = Raw::query("w1.web.skydns.test.", A).opt(1232, 0, &[]);
        q.counts[3] = 0;
        q.counts[1] = 1;
        let reply = via.reply(&s, &q.bytes());
        assert_eq!(reply.rcode(), 1);
        assert!(!reply.has_opt(), "the misplaced OPT did not parse as the query's OPT");
    }
}

row! {
    fn opt_rdlen_overrun_is_formerr(via) {
        let s = server();
        let mut bytes = Raw::query("w1.web.skydns.test.", A).opt(1232, 0, &[COOKIE]).bytes();
        let n = bytes.len();
        bytes[n - 13] = 40;
        let reply = via.reply(&s, &bytes);
        assert_eq!(reply.rcode(), 1);
    }
}

row! {
    fn unknown_edns_options_are_ignored_and_opt_echoed(via) {
        let s = server();
        let q = Raw::query("w1.web.skydns.test.", A).opt(1232, 0, &[(65001, b"xyz")]);
        let parsed = via.reply(&s, &q.bytes()).parsed();
        assert_eq!(parsed.response_code(), ResponseCode::NoError);
        assert_eq!(parsed.answers().len(), 1);
        assert!(parsed.extensions().is_some());
    }
}

row! {
    /// An EDNS size under 512 counts as 512 over UDP; TCP is never limited by it.
    fn edns_udp_size_below_512_counts_as_512(via) {
        let s = server();
        let reply = via.reply(&s, &Raw::query("big.skydns.test.", A).opt(100, 0, &[]).bytes());
        match via {
            Via::Udp => {
                assert!(reply.0.len() <= 512);
                assert!(reply.parsed().truncated());
            }
            Via::Tcp => assert_eq!(reply.parsed().answers().len(), 40),
        }
    }
}

row! {
    /// RFC 2181 §9: glue that does not fit is left out without TC; TCP carries all of it.
    fn additional_records_that_do_not_fit_are_dropped_without_tc(via) {
        let s = server();
        let parsed = via.reply(&s, &Raw::query("svc.skydns.test.", SRV).bytes()).parsed();
        assert!(!parsed.truncated());
        assert_eq!(parsed.answers().len(), 2);
        match via {
            Via::Udp => assert!(parsed.additionals().len() < 60),
            Via::Tcp => assert_eq!(parsed.additionals().len(), 60),
        }
    }
}

row! {
    /// An answer RRset that does not fit is left out whole, with TC; TCP carries all of it.
    fn answer_rrset_that_does_not_fit_is_left_out_whole_with_tc(via) {
        let s = server();
        let parsed = via.reply(&s, &Raw::query("big.skydns.test.", A).bytes()).parsed();
        match via {
            Via::Udp => {
                assert!(parsed.truncated());
                assert!(parsed.answers().is_empty(), "no partial RRset");
            }
            Via::Tcp => {
                assert!(!parsed.truncated());
                assert_eq!(parsed.answers().len(), 40);
            }
        }
    }
}

row! {
    fn tc_and_z_in_a_query_are_ignored_and_z_cleared(via) {
        let s = server();
        let reply = via.reply(&s, &Raw::query("w1.web.skydns.test.", A).flags(0x0100 | 0x0200 | 0x0040).bytes());
        assert_eq!(reply.flags() & 0x0240, 0, "neither TC nor Z in the reply");
        assert_eq!(reply.parsed().answers().len(), 1);
    }
}

row! {
    /// RD is copied, AA set for authoritative data, RA clear: no recursion is offered.
    fn rd_is_copied_aa_set_and_ra_clear(via) {
        let s = server();
        let reply = via.reply(&s, &Raw::query("w1.web.skydns.test.", A).bytes());
        assert_eq!(reply.flags() & 0x0580, 0x0500, "RD and AA set, RA clear");
        let reply = via.reply(&s, &Raw::query("w1.web.skydns.test.", A).flags(0).bytes());
        assert_eq!(reply.flags() & 0x0100, 0, "RD clear when it was clear");
    }
}

row! {
    /// RA only where recursion is offered: set for a client that may use forwarding, on
    /// authoritative answers too.
    fn ra_is_set_where_recursion_is_offered(via) {
        let upstream = UdpSocket::bind("127.0.0.1:0").unwrap();
        let s = forwarding_server(&upstream, None);
        let reply = via.reply(&s, &Raw::query("w1.web.skydns.test.", A).bytes());
        assert_eq!(reply.flags() & 0x0580, 0x0580, "RD, AA and RA set");
    }
}

row! {
    /// RFC 4035 §3.1.6, RFC 6840: authoritative answers clear AD and CD.
    fn ad_and_cd_are_cleared_in_authoritative_answers(via) {
        let s = server();
        let reply = via.reply(&s, &Raw::query("w1.web.skydns.test.", A).flags(0x0130).bytes());
        assert_eq!(reply.flags() & 0x0030, 0);
    }
}

row! {
    /// RFC 8482: ANY gets one synthesised HINFO, not every RRset.
    fn qtype_any_gets_a_minimal_answer(via) {
        let s = server();
        let parsed = via.reply(&s, &Raw::query("w1.web.skydns.test.", ANY).bytes()).parsed();
        assert_eq!(parsed.answers().len(), 1);
        assert!(matches!(parsed.answers()[0].data(), Some(RData::HINFO(_))));
    }
}

row! {
    /// RFC 5936: AXFR is TCP-only, so NOTIMP over UDP; over TCP it is REFUSED while transfers
    /// are off.
    fn axfr_is_notimp_over_udp_and_refused_over_tcp(via) {
        let s = server();
        let expected = if via == Via::Udp { 4 } else { 5 };
        assert_eq!(via.reply(&s, &Raw::query("skydns.test.", AXFR).bytes()).rcode(), expected);
    }
}

row! {
    fn ixfr_is_notimp_over_udp_and_refused_over_tcp(via) {
        let s = server();
        let expected = if via == Via::Udp { 4 } else { 5 };
        assert_eq!(via.reply(&s, &Raw::query("skydns.test.", IXFR).bytes()).rcode(), expected);
    }
}

row! {
    fn qtype_opt_is_formerr(via) {
        let s = server();
        assert_eq!(via.reply(&s, &Raw::query("w1.web.skydns.test.", OPT).bytes()).rcode(), 1);
    }
}

row! {
    /// RFC 6895: skyline answers NOTIMP to the meta types it does not implement, and qtype 0.
    fn meta_qtypes_and_qtype_zero_are_notimp(via) {
        let s = server();
        for qtype in [0, 128, 249, 250, 253, 254] {
            assert_eq!(via.reply(&s, &Raw::query("w1.web.skydns.test.", qtype).bytes()).rcode(), 4, "qtype {qtype}");
        }
    }
}

row! {
    /// RFC 3597: an unknown type at an existing name is NODATA, with the SOA for caching.
    fn unknown_qtype_for_an_existing_name_is_nodata_with_soa(via) {
        let s = server();
        let parsed = via.reply(&s, &Raw::query("w1.web.skydns.test.", 65280).bytes()).parsed();
        assert_eq!(parsed.response_code(), ResponseCode::NoError);
        assert!(parsed.answers().is_empty() && parsed.authoritative());
        assert_eq!(parsed.name_servers()[0].record_type(), RecordType::SOA);
    }
}

row! {
    /// CHAOS identity is not configured in the binary, so it is refused.
    fn chaos_identity_is_refused_when_not_configured(via) {
        let s = server();
        for name in ["version.bind.", "id.server.", "hostname.bind.", "version.server."] {
            let q = Raw::empty().question(name, TXT, CH);
            assert_eq!(via.reply(&s, &q.bytes()).rcode(), 5, "{name}");
        }
    }
}

row! {
    /// Class NONE (RFC 2136), ANY and unassigned classes are refused.
    fn unknown_classes_are_refused(via) {
        let s = server();
        for qclass in [254, 255, 4, 2, 65280] {
            let q = Raw::empty().question("w1.web.skydns.test.", A, qclass);
            assert_eq!(via.reply(&s, &q.bytes()).rcode(), 5, "class {qclass}");
        }
    }
}

row! {
    fn names_outside_every_zone_are_refused(via) {
        let s = server();
        let reply = via.reply(&s, &Raw::query("example.org.", A).bytes());
        assert_eq!(reply.rcode(), 5);
        assert_eq!(reply.flags() & 0x0400, 0, "not authoritative");
    }
}

row! {
    /// Forwarding enabled, but not for this client (outside the recursion ACL): REFUSED.
    fn names_outside_every_zone_are_refused_to_clients_not_offered_recursion(via) {
        let upstream = UdpSocket::bind("127.0.0.1:0").unwrap();
        let s = forwarding_server(&upstream, Some("10.0.0.0/8"));
        let reply = via.reply(&s, &Raw::query("example.org.", A).bytes());
        assert_eq!(reply.rcode(), 5);
        assert_eq!(reply.flags() & 0x0080, 0, "no RA for this client");
    }
}

row! {
    /// RFC 8914: a name never cached, every upstream down: SERVFAIL with an Extended DNS Error,
    /// never silence, never later than the forwarding timeout (1500 ms); once the upstream is
    /// known to be down (after a few failures in a row), at once.
    fn names_outside_the_zone_get_a_timely_servfail_with_ede_while_upstreams_are_down(via) {
        let upstream = UdpSocket::bind("127.0.0.1:0").unwrap();
        let s = forwarding_server(&upstream, None);
        let timeout_bound = Duration::from_millis(1500) + Duration::from_millis(700);
        let known_down_bound = Duration::from_millis(100);
        let mut last = Duration::MAX;
        for i in 0..6 {
            let q = Raw::query(&format!("n{i}.example.org."), A).opt(1232, 0, &[]);
            let start = Instant::now();
            let reply = via.reply(&s, &q.bytes());
            last = start.elapsed();
            assert!(last < timeout_bound, "answered after {last:?}");
            assert_eq!(reply.rcode(), 2, "SERVFAIL");
            let parsed = reply.parsed();
            let edns = parsed.extensions().as_ref().expect("OPT");
            assert!(
                edns.options().as_ref().keys().any(|code| u16::from(*code) == 15),
                "an Extended DNS Error option"
            );
        }
        assert!(last < known_down_bound, "still waiting {last:?} for a known-down upstream");
    }
}

row! {
    fn answer_and_authority_records_in_a_query_are_ignored(via) {
        let s = server();
        let mut q = Raw::query("w1.web.skydns.test.", A);
        q.body.extend_from_slice(&[0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4]);
        q.body.extend_from_slice(&[0, 0, 2, 0, 1, 0, 0, 0, 0, 0, 1, 0]);
        q.counts[1] = 1;
        q.counts[2] = 1;
        let parsed = via.reply(&s, &q.bytes()).parsed();
        assert_eq!(parsed.response_code(), ResponseCode::NoError);
        assert_eq!(parsed.answers().len(), 1);
    }
}

row! {
    fn trailing_bytes_are_ignored(via) {
        let s = server();
        let mut bytes = Raw::query("w1.web.skydns.test.", A).bytes();
        bytes.extend_from_slice(b"trailing junk");
        let parsed = via.reply(&s, &bytes).parsed();
        assert_eq!(parsed.response_code(), ResponseCode::NoError);
        assert_eq!(parsed.answers().len(), 1);
    }
}

row! {
    /// 0x20 resolvers compare the echoed question byte for byte.
    fn mixed_case_question_is_echoed_byte_exact_and_owners_keep_its_case(via) {
        let s = server();
        let bytes = Raw::query("w1.WeB.SkyDNS.TeSt.", A).bytes();
        let reply = via.reply(&s, &bytes);
        assert_eq!(&reply.0[12..bytes.len()], &bytes[12..]);
        assert_eq!(reply.parsed().answers()[0].name().to_ascii(), "w1.WeB.SkyDNS.TeSt.");
    }
}

row! {
    /// RFC 6891 §7: whatever the outcome, a query whose OPT parsed gets an OPT back.
    fn every_reply_to_a_query_with_opt_carries_opt(via) {
        let s = server();
        let queries = [
            Raw::query("w1.web.skydns.test.", A),
            Raw::query("nope.skydns.test.", A),
            Raw::query("w1.web.skydns.test.", TXT),
            Raw::query("example.org.", A),
            Raw::query("w1.web.skydns.test.", OPT),
            Raw::query("skydns.test.", AXFR),
            Raw::query("w1.web.skydns.test.", 250),
            Raw::query("w1.web.skydns.test.", A).question("x.skydns.test.", A, 1),
            Raw::empty().question("version.bind.", TXT, CH),
            Raw::query("big.skydns.test.", A),
            Raw::query("skydns.test.", NS),
        ];
        for q in queries {
            let reply = via.reply(&s, &q.opt(1232, 0, &[]).bytes());
            assert!(reply.has_opt(), "rcode {}", reply.rcode());
        }
        let badvers = via.reply(&s, &Raw::query("w1.web.skydns.test.", A).opt(1232, 3, &[]).bytes());
        assert!(badvers.has_opt());
    }
}

// TCP (RFC 7766, RFC 7828) and abuse.

fn connect(s: &Skyline) -> TcpStream {
    tcp_connect_from(Ipv4Addr::LOCALHOST, s.addr, REPLY_WAIT).unwrap()
}

/// An A query for `w1.web.skydns.test.` with the given ID.
fn query_with_id(id: u16) -> Vec<u8> {
    Raw {
        id,
        ..Raw::query("w1.web.skydns.test.", A)
    }
    .bytes()
}

/// Asserts that a legitimate UDP query gets its correct answer.
fn udp_still_answers(s: &Skyline) {
    let reply = udp_raw(s.addr, &query_with_id(0x0dd5), REPLY_WAIT).expect("UDP still answers");
    let parsed = Message::from_vec(&reply).unwrap();
    assert_eq!(parsed.id(), 0x0dd5);
    assert_eq!(parsed.answers()[0].data().unwrap().to_string(), "10.0.0.1");
}

/// Waits until the peer closes `conn` and returns how long that took, or `None` after `limit`.
fn time_to_close(conn: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    conn.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    while start.elapsed() < limit {
        if tcp_closed(conn) {
            return Some(start.elapsed());
        }
    }
    None
}

#[test]
fn tcp_pipelined_queries_each_get_a_reply_with_their_id() {
    let s = server();
    let mut conn = connect(&s);
    let ids: Vec<u16> = (1..=50).collect();
    let mut burst = Vec::new();
    for &id in &ids {
        let q = query_with_id(id);
        burst.extend_from_slice(&(q.len() as u16).to_be_bytes());
        burst.extend_from_slice(&q);
    }
    conn.write_all(&burst).unwrap();
    let mut seen: Vec<u16> = (0..ids.len())
        .map(|_| Reply(tcp_recv(&mut conn).expect("a reply per query")).id())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, ids);
}

#[test]
fn tcp_partial_length_prefix_is_closed_within_the_io_timeout() {
    let s = server();
    let mut conn = connect(&s);
    conn.write_all(&[0]).unwrap();
    let closed = time_to_close(&mut conn, IO_TIMEOUT * 4).expect("the stalled connection is closed");
    assert!(
        closed >= IO_TIMEOUT / 2,
        "closed after {closed:?}, not before the timeout"
    );
    udp_still_answers(&s);
}

#[test]
fn tcp_partial_message_is_closed_within_the_io_timeout() {
    let s = server();
    let mut conn = connect(&s);
    let q = query_with_id(9);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q[..q.len() / 2]);
    conn.write_all(&framed).unwrap();
    assert!(time_to_close(&mut conn, IO_TIMEOUT * 4).is_some());
}

#[test]
fn tcp_query_trickled_byte_by_byte_within_the_io_timeout_is_answered() {
    let s = server();
    let mut conn = connect(&s);
    conn.set_nodelay(true).unwrap();
    let q = query_with_id(0x7777);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    let pause = IO_TIMEOUT / (2 * framed.len() as u32);
    for byte in &framed {
        conn.write_all(std::slice::from_ref(byte)).unwrap();
        std::thread::sleep(pause);
    }
    assert_eq!(Reply(tcp_recv(&mut conn).expect("answered")).id(), 0x7777);
}

#[test]
fn tcp_query_trickled_slower_than_the_io_timeout_is_cut_off() {
    let s = server();
    let mut conn = connect(&s);
    conn.set_nodelay(true).unwrap();
    let q = query_with_id(0x7778);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    let start = Instant::now();
    let mut cut_off = false;
    for byte in &framed {
        if conn.write_all(std::slice::from_ref(byte)).is_err() {
            cut_off = true;
            break;
        }
        std::thread::sleep(IO_TIMEOUT / 4);
        if start.elapsed() > IO_TIMEOUT * 4 {
            break;
        }
    }
    assert!(
        cut_off || time_to_close(&mut conn, IO_TIMEOUT).is_some(),
        "a slow-loris message is not waited for"
    );
    assert!(start.elapsed() < IO_TIMEOUT * 5);
    udp_still_answers(&s);
}

#[test]
fn tcp_idle_connection_is_closed_after_the_idle_timeout() {
    let s = server();
    let mut idle = connect(&s);
    let mut busy = connect(&s);
    tcp_send(&mut idle, &query_with_id(1)).unwrap();
    assert!(tcp_recv(&mut idle).is_some());
    let start = Instant::now();
    let mut closed = None;
    while start.elapsed() < IDLE_TIMEOUT + Duration::from_secs(3) && closed.is_none() {
        tcp_send(&mut busy, &query_with_id(2)).unwrap();
        assert!(tcp_recv(&mut busy).is_some(), "a connection in use stays open");
        if time_to_close(&mut idle, Duration::from_millis(500)).is_some() {
            closed = Some(start.elapsed());
        }
    }
    let closed = closed.expect("the idle connection was closed");
    assert!(
        closed >= IDLE_TIMEOUT - Duration::from_secs(1),
        "closed after {closed:?}, before the idle timeout"
    );
}

/// Opens `n` connections from `from`; the kernel completes each, whatever the server does next.
fn open(s: &Skyline, from: Ipv4Addr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| tcp_connect_from(from, s.addr, REPLY_WAIT).expect("the kernel accepts the connection"))
        .collect()
}

/// Gives the server a moment, then sorts connections into those it kept open and the number it
/// closed.
fn sort_out(conns: Vec<TcpStream>) -> (Vec<TcpStream>, usize) {
    std::thread::sleep(Duration::from_millis(300));
    let mut kept = Vec::new();
    let mut closed = 0;
    for mut conn in conns {
        conn.set_nonblocking(true).unwrap();
        if tcp_closed(&mut conn) {
            closed += 1;
        } else {
            conn.set_nonblocking(false).unwrap();
            kept.push(conn);
        }
    }
    (kept, closed)
}

#[test]
fn tcp_hundreds_of_connections_from_one_address_are_all_answered() {
    let s = server();
    let mut conns = open(&s, Ipv4Addr::LOCALHOST, 256);
    for (id, conn) in conns.iter_mut().enumerate() {
        tcp_send(conn, &query_with_id(id as u16)).unwrap();
    }
    for (id, conn) in conns.iter_mut().enumerate() {
        let reply = tcp_recv(conn).unwrap_or_else(|| panic!("connection {id} got no answer"));
        assert_eq!(Reply(reply).id(), id as u16);
    }
    udp_still_answers(&s);
}

#[test]
fn tcp_connections_past_the_per_client_cap_are_closed_and_other_clients_still_served() {
    let cap = PER_CLIENT_CAP.to_string();
    let s = Skyline::start(&records(), &["--no-rec", "--tcp-max-per-client", &cap], &[]);
    let attempts = PER_CLIENT_CAP * WORKERS + 24;
    let (mut kept, closed) = sort_out(open(&s, Ipv4Addr::LOCALHOST, attempts));
    assert!(kept.len() <= PER_CLIENT_CAP * WORKERS, "{} kept", kept.len());
    assert!(closed >= attempts - PER_CLIENT_CAP * WORKERS);
    tcp_send(&mut kept[0], &query_with_id(3)).unwrap();
    assert_eq!(Reply(tcp_recv(&mut kept[0]).expect("kept ones are served")).id(), 3);
    let mut other = tcp_connect_from(Ipv4Addr::new(127, 0, 0, 2), s.addr, REPLY_WAIT).unwrap();
    tcp_send(&mut other, &query_with_id(4)).unwrap();
    assert_eq!(Reply(tcp_recv(&mut other).expect("another client is served")).id(), 4);
    udp_still_answers(&s);
}

#[test]
fn tcp_connections_past_the_total_cap_make_the_idlest_give_way_to_a_new_client() {
    let s = server();
    let total = TOTAL_CAP * WORKERS;
    let clients = total / (PER_CLIENT_CAP * WORKERS) + 8;
    let conns = (0..clients)
        .flat_map(|c| open(&s, Ipv4Addr::new(127, 1, 0, c as u8 + 1), PER_CLIENT_CAP * WORKERS))
        .collect();
    let (kept, closed) = sort_out(conns);
    assert!(
        kept.len() <= total,
        "{} connections kept over a cap of {total}",
        kept.len()
    );
    assert!(closed > 0, "the idlest connections were closed");
    udp_still_answers(&s);
    let start = Instant::now();
    let mut newcomer = tcp_connect_from(Ipv4Addr::new(127, 0, 0, 3), s.addr, REPLY_WAIT).unwrap();
    tcp_send(&mut newcomer, &query_with_id(5)).unwrap();
    let reply = tcp_recv(&mut newcomer).expect("with slots scarce, an idle connection gives way to a new client");
    assert_eq!(Reply(reply).id(), 5);
    assert!(start.elapsed() < IO_TIMEOUT, "let in at once, not after a timeout");
}

#[test]
fn tcp_client_that_never_reads_does_not_block_udp_or_other_connections() {
    let s = server();
    let mut hog = connect(&s);
    let q = Raw::query("big.skydns.test.", A).bytes();
    let mut burst = Vec::new();
    for _ in 0..2000 {
        burst.extend_from_slice(&(q.len() as u16).to_be_bytes());
        burst.extend_from_slice(&q);
    }
    hog.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = hog.write_all(&burst);
    let start = Instant::now();
    udp_still_answers(&s);
    let mut other = connect(&s);
    tcp_send(&mut other, &query_with_id(6)).unwrap();
    assert_eq!(
        Reply(tcp_recv(&mut other).expect("another connection is served")).id(),
        6
    );
    assert!(start.elapsed() < Duration::from_secs(1));
}

#[test]
fn tcp_message_of_65535_bytes_is_answered() {
    let s = server();
    let base = Raw::query("w1.web.skydns.test.", A).opt(1232, 0, &[]).bytes();
    let padding = vec![0u8; 65535 - base.len() - 4];
    let q = Raw::query("w1.web.skydns.test.", A).opt(1232, 0, &[(12, &padding)]);
    let bytes = q.bytes();
    assert_eq!(bytes.len(), 65535);
    let mut conn = connect(&s);
    tcp_send(&mut conn, &bytes).unwrap();
    let parsed = Reply(tcp_recv(&mut conn).expect("answered")).parsed();
    assert_eq!(parsed.answers().len(), 1);
    assert!(parsed.extensions().is_some());
}

#[test]
fn answer_too_large_for_any_message_is_servfail_over_tcp_and_tc_over_udp() {
    let s = server();
    let q = Raw::query("overflow.skydns.test.", TXT).bytes();
    let tcp = Via::Tcp.reply(&s, &q);
    assert_eq!(tcp.rcode(), 2);
    assert_eq!(tcp.count(1), 0);
    let udp = Via::Udp.reply(&s, &q);
    assert!(udp.parsed().truncated());
}

#[test]
fn answer_that_fits_a_message_only_without_its_question_is_servfail_over_tcp() {
    let s = server();
    let q = Raw::query("wall.skydns.test.", TXT).bytes();
    let tcp = Via::Tcp.reply(&s, &q);
    assert_eq!(
        tcp.rcode(),
        2,
        "SERVFAIL, not TC: TCP has no larger transport to retry on"
    );
    assert_eq!(tcp.flags() & 0x0200, 0);
    assert_eq!(tcp.count(1), 0);
    let leaf = Via::Tcp.reply(&s, &Raw::query("w1.wall.skydns.test.", TXT).bytes());
    assert_eq!(leaf.count(1), 1, "one of the two records fits");
}

#[test]
fn udp_datagram_of_64_kib_gets_a_bounded_reply_and_service_continues() {
    let s = server();
    let base = Raw::query("w1.web.skydns.test.", A).opt(1232, 0, &[]).bytes();
    let padding = vec![0u8; 65507 - base.len() - 4];
    let bytes = Raw::query("w1.web.skydns.test.", A)
        .opt(1232, 0, &[(12, &padding)])
        .bytes();
    if let Some(reply) = udp_raw(s.addr, &bytes, SILENCE) {
        assert!(reply.len() <= 1232);
        let parsed = Message::from_vec(&reply).unwrap();
        assert!(matches!(
            parsed.response_code(),
            ResponseCode::FormErr | ResponseCode::NoError
        ));
    }
    udp_still_answers(&s);
}

#[test]
fn tcp_keepalive_is_advertised_over_tcp_when_asked_and_never_over_udp() {
    let s = server();
    let q = Raw::query("w1.web.skydns.test.", A).opt(1232, 0, &[KEEPALIVE]).bytes();
    let tcp = Via::Tcp.reply(&s, &q).0;
    assert_eq!(&tcp[tcp.len() - 6..], &[0, 11, 0, 2, 0, 100], "10 s in units of 100 ms");
    let udp = Via::Udp.reply(&s, &q).0;
    assert_eq!(&udp[udp.len() - 2..], &[0, 0], "no options over UDP");
    let plain = Via::Tcp
        .reply(&s, &Raw::query("w1.web.skydns.test.", A).opt(1232, 0, &[]).bytes())
        .0;
    assert_eq!(&plain[plain.len() - 2..], &[0, 0], "not advertised unless asked");
}

/// Datagrams of the flood, in turn: runts, responses, malformed headers, and well-formed
/// queries for names outside the zone.
fn garbage(i: usize) -> Vec<u8> {
    let mut q = Raw::query("w1.web.skydns.test.", A).bytes();
    match i % 4 {
        0 => q.truncate(i % 12),
        1 => q[2] |= 0x80,
        2 => {
            let n = q.len();
            q[n - 5] = 0xC0;
            q[n - 4] = 0xFF;
        }
        _ => q = Raw::query("flood.example.org.", A).bytes(),
    }
    q
}

#[test]
fn garbage_flood_leaves_legitimate_queries_answered_within_the_latency_bound() {
    const FLOOD_DATAGRAMS: usize = 200_000;
    const FLOOD_TIME: Duration = Duration::from_secs(5);
    const LATENCY_BOUND: Duration = Duration::from_millis(500);
    let s = server();
    let target: SocketAddr = s.addr;
    let flood = std::thread::spawn(move || {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let start = Instant::now();
        let mut sent = 0;
        while sent < FLOOD_DATAGRAMS && start.elapsed() < FLOOD_TIME {
            if sock.send_to(&garbage(sent), target).is_ok() {
                sent += 1;
            }
        }
        sent
    });
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(LATENCY_BOUND)).unwrap();
    let mut buf = vec![0u8; 2048];
    let mut answered = 0;
    let mut late = 0;
    let mut worst = Duration::ZERO;
    let mut id = 0u16;
    let start = Instant::now();
    while start.elapsed() < FLOOD_TIME - Duration::from_millis(500) {
        id = id.wrapping_add(1);
        let sent_at = Instant::now();
        sock.send_to(&query_with_id(id), target).unwrap();
        let reply = loop {
            match sock.recv_from(&mut buf) {
                Ok((n, _)) if Reply(buf[..n].to_vec()).id() == id => break Some(buf[..n].to_vec()),
                Ok(_) => continue,
                Err(_) => break None,
            }
        };
        match reply {
            Some(bytes) => {
                let parsed = Message::from_vec(&bytes).unwrap();
                assert_eq!(parsed.answers()[0].data().unwrap().to_string(), "10.0.0.1");
                answered += 1;
                worst = worst.max(sent_at.elapsed());
            }
            None => late += 1,
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent = flood.join().unwrap();
    println!("flood: {sent} garbage datagrams; {answered} queries answered, {late} late, worst {worst:?}");
    assert!(answered > 0);
    assert!(
        late * 100 <= answered + late,
        "at most 1% of legitimate queries miss the {LATENCY_BOUND:?} bound: {late} of {}",
        answered + late
    );
    udp_still_answers(&s);
}
