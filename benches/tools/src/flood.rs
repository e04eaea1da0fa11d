//! An open-loop flood: queries sent as fast as the sockets take them (or at a set rate) from
//! one or many source addresses, never waiting for a reply: what a host forging its source
//! addresses sends. The replies that come back to those addresses are counted, which is what a
//! reflection attack would have delivered to its victim.

use crate::pace::Pace;
use crate::query::Query;
use skyline_dataplane::io::{Datagrams, KernelUdp, PacketIo, Peer};
use skyline_dataplane::sys::BATCH_SIZE;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// What to send.
#[derive(Debug, Clone)]
pub struct FloodConfig {
    /// The server flooded.
    pub server: SocketAddr,
    /// How long to send for.
    pub duration: Duration,
    /// The source addresses, one socket each, used in turn.
    pub sources: Vec<IpAddr>,
    /// Queries a second; `None`: as fast as the kernel takes them.
    pub rate: Option<f64>,
    /// Queries per send call (at most [`BATCH_SIZE`]).
    pub batch: usize,
}

/// What a flood did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FloodReport {
    /// Queries the kernel took.
    pub sent: u64,
    /// Replies that came back to the sources.
    pub replies: u64,
    /// Of those, replies with TC set (a rate limiter's slips among them).
    pub truncated: u64,
    /// Bytes of those replies.
    pub reply_bytes: u64,
    /// How long it sent.
    pub elapsed: Duration,
}

impl FloodReport {
    /// Queries sent per second.
    pub fn qps(&self) -> f64 {
        self.sent as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The `count` source addresses of a flood from many networks: 127.100.0.1, 127.100.1.1, …,
/// one per /24 of the loopback range, so that a limiter keyed on /24 sees `count` clients.
pub fn spread_sources(count: usize) -> Vec<IpAddr> {
    (0..count.clamp(1, 150 * 256))
        .map(|i| IpAddr::from([127, 100 + (i / 256) as u8, (i % 256) as u8, 1]))
        .collect()
}

/// Floods `config.server` with `queries` (in turn, IDs counting up) and counts what comes
/// back.
pub fn flood(config: &FloodConfig, queries: &[Query]) -> io::Result<FloodReport> {
    if queries.is_empty() || config.sources.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no queries or no sources"));
    }
    let mut sockets = config
        .sources
        .iter()
        .map(|&source| crate::load::client_socket(config.server, Some(source)))
        .collect::<io::Result<Vec<KernelUdp>>>()?;
    let longest = queries.iter().map(|q| q.message.len()).max().unwrap_or(0);
    let mut sends = Datagrams::new(longest);
    let mut replies = Datagrams::new(4096);
    let server = Peer::from(config.server);
    let batch = config.batch.clamp(1, BATCH_SIZE);
    let origin = Instant::now();
    let mut pace = config.rate.map(|rate| Pace::new(rate, batch, 0));
    let mut report = FloodReport::default();
    let (mut next, mut turn) = (0usize, 0usize);
    loop {
        let now = origin.elapsed();
        if now >= config.duration {
            report.elapsed = now;
            break;
        }
        let n = match &mut pace {
            Some(pace) => pace.take(now.as_nanos() as u64, batch),
            None => batch,
        };
        if n > 0 {
            sends.clear();
            for _ in 0..n {
                let message = &queries[next % queries.len()].message;
                let id = (next as u16).to_be_bytes();
                sends.push_with(&server, |out| {
                    out[..message.len()].copy_from_slice(message);
                    out[..2].copy_from_slice(&id);
                    Some(message.len())
                });
                next += 1;
            }
            // Each socket is read right after it sends: what came back since its last turn.
            let count = sockets.len();
            let socket = &mut sockets[turn % count];
            report.sent += socket.send(&mut sends).sent as u64;
            drain(socket, &mut replies, &mut report)?;
            turn += 1;
        } else {
            for socket in &mut sockets {
                drain(socket, &mut replies, &mut report)?;
            }
        }
    }
    // Replies still on their way.
    let settle = Instant::now() + Duration::from_millis(200);
    while Instant::now() < settle {
        for socket in &mut sockets {
            drain(socket, &mut replies, &mut report)?;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(report)
}

/// Reads and counts every reply waiting on `socket`.
fn drain(socket: &mut KernelUdp, replies: &mut Datagrams, report: &mut FloodReport) -> io::Result<()> {
    loop {
        match socket.recv(replies) {
            Ok(_) => {
                for i in 0..replies.len() {
                    if let Some((reply, _)) = replies.get(i) {
                        report.replies += 1;
                        report.reply_bytes += reply.len() as u64;
                        if reply.get(2).is_some_and(|flags| flags & 0x02 != 0) {
                            report.truncated += 1;
                        }
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused) => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{build, QueryOptions};

    #[test]
    fn spread_sources_fall_in_different_networks() {
        let sources = spread_sources(600);
        assert_eq!(sources.len(), 600);
        assert_eq!(sources[0], IpAddr::from([127, 100, 0, 1]));
        assert_eq!(sources[257], IpAddr::from([127, 101, 1, 1]));
        let mut networks: Vec<[u8; 3]> = sources
            .iter()
            .map(|ip| match ip {
                IpAddr::V4(v4) => [v4.octets()[0], v4.octets()[1], v4.octets()[2]],
                IpAddr::V6(_) => unreachable!("IPv4 sources"),
            })
            .collect();
        networks.dedup();
        assert_eq!(networks.len(), 600);
    }

    #[test]
    fn a_flood_counts_what_it_sent_and_the_replies_that_came_back() {
        let echo = std::net::UdpSocket::bind(("127.0.0.1", 0)).unwrap();
        echo.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let server = echo.local_addr().unwrap();
        let answer = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            let mut echoed = 0;
            while let Ok((n, from)) = echo.recv_from(&mut buf) {
                buf[2] |= 0x80;
                echo.send_to(&buf[..n], from).unwrap();
                echoed += 1;
            }
            echoed
        });
        let query = build("example.", 1, QueryOptions::default()).unwrap();
        let config = FloodConfig {
            server,
            duration: Duration::from_millis(100),
            sources: vec![IpAddr::from([127, 0, 0, 1])],
            rate: Some(1000.0),
            batch: 4,
        };
        let report = flood(&config, &[query]).unwrap();
        let echoed = answer.join().unwrap();
        assert!(report.sent > 50 && report.sent <= 110, "{report:?}");
        assert_eq!(report.replies, echoed, "{report:?}");
        assert_eq!(report.truncated, 0);
    }
}
