//! The query log: one line per answered query, for when dnstap is more than a deployment wants.
//!
//! ```text
//! client=127.0.0.1:40112 proto=udp name=www.skydns.local. type=A rcode=NOERROR duration_us=18
//! ```
//!
//! Lines are formatted on the worker, rate-limited across all workers to a number per second
//! (the excess is counted as suppressed), and written by their own thread ([`super::sink`]), so
//! that neither a slow disk nor a flood of queries slows answering.

use super::sink::Output;
use super::topk::Presentation;
use crate::answer::Transport;
use crate::wire::types::{rcode, rtype};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Lines per second at most, all workers together; one window per second of the process.
#[derive(Debug)]
pub(crate) struct RateLimit {
    per_second: u64,
    start: Instant,
    window: AtomicU64,
    used: AtomicU64,
}

impl RateLimit {
    pub(crate) fn new(per_second: u64) -> RateLimit {
        RateLimit {
            per_second,
            start: Instant::now(),
            window: AtomicU64::new(0),
            used: AtomicU64::new(0),
        }
    }

    /// Whether one more line may be written at `now`.
    pub(crate) fn allow(&self, now: Instant) -> bool {
        let second = now.saturating_duration_since(self.start).as_secs();
        let window = self.window.load(Ordering::Relaxed);
        if second > window
            && self
                .window
                .compare_exchange(window, second, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.used.store(0, Ordering::Relaxed);
        }
        self.used.fetch_add(1, Ordering::Relaxed) < self.per_second
    }
}

/// Appends the line of a reply to `client`, sent `took` after its query arrived, to `out`;
/// `None` (and nothing appended) when the reply has no readable question.
pub(crate) fn line(
    reply: &[u8],
    client: SocketAddr,
    transport: Transport,
    took: Duration,
    out: &mut Vec<u8>,
) -> Option<()> {
    let (name, qtype) = super::question(reply)?;
    let code = u16::from(*reply.get(3)? & 0x0f);
    let proto = match transport {
        Transport::Udp => "udp",
        Transport::Tcp => "tcp",
    };
    let _ = writeln!(
        out,
        "client={client} proto={proto} name={} type={} rcode={} duration_us={}",
        Presentation(name),
        TypeName(qtype),
        RcodeName(code),
        took.as_micros()
    );
    Some(())
}

struct TypeName(u16);

impl std::fmt::Display for TypeName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match rtype::mnemonic(self.0) {
            Some(name) => f.write_str(name),
            None => write!(f, "TYPE{}", self.0),
        }
    }
}

struct RcodeName(u16);

impl std::fmt::Display for RcodeName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.0 {
            rcode::NOERROR => "NOERROR",
            rcode::FORMERR => "FORMERR",
            rcode::SERVFAIL => "SERVFAIL",
            rcode::NXDOMAIN => "NXDOMAIN",
            rcode::NOTIMP => "NOTIMP",
            rcode::REFUSED => "REFUSED",
            other => return write!(f, "RCODE{other}"),
        };
        f.write_str(name)
    }
}

/// Where query-log lines go: stderr or a file opened for appending.
pub(crate) struct LineWriter(pub(crate) Box<dyn Write + Send>);

impl Output for LineWriter {
    fn write(&mut self, records: &[Vec<u8>]) -> io::Result<()> {
        for line in records {
            self.0.write_all(line)?;
        }
        self.0.flush()
    }

    fn close(&mut self) {
        let _ = self.0.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_client_name_type_rcode_and_duration() {
        // A reply: ID, flags with rcode 3, one question www.example. AAAA IN.
        let reply = b"\x12\x34\x81\x83\x00\x01\x00\x00\x00\x00\x00\x00\x03WWW\x07example\x00\x00\x1c\x00\x01";
        let mut out = Vec::new();
        line(
            reply,
            "192.0.2.7:5300".parse().unwrap(),
            Transport::Tcp,
            Duration::from_micros(42),
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "client=192.0.2.7:5300 proto=tcp name=www.example. type=AAAA rcode=NXDOMAIN duration_us=42\n"
        );
    }

    #[test]
    fn the_rate_limit_lets_through_its_number_per_second() {
        let limit = RateLimit::new(3);
        let now = Instant::now();
        let allowed = (0..10).filter(|_| limit.allow(now)).count();
        assert_eq!(allowed, 3);
        assert!(
            limit.allow(now + Duration::from_millis(1100)),
            "a new second, a new allowance"
        );
    }
}
