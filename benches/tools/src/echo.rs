//! The ceiling: a responder that receives a batch, flips each datagram's QR bit and sends the
//! batch back — the data plane's packet path with no DNS work at all. What a server achieves
//! is quoted as a fraction of what this achieves on the same machine in the same run.

use mio::{Events, Interest, Poll, Token};
use skyline_dataplane::io::{Datagrams, KernelUdp, PacketIo};
use skyline_dataplane::sys;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

/// Slot size for queries and replies: the same as a skyline worker's, so the ceiling moves
/// the same amount of buffer memory per batch.
const SLOT_LEN: usize = 4096;

/// The responder's socket, bound like a skyline worker's (SO_REUSEPORT, large buffers).
#[derive(Debug)]
pub struct Echo {
    io: KernelUdp,
    poll: Poll,
}

impl Echo {
    /// Binds to `addr` (port 0 picks a free port).
    pub fn bind(addr: SocketAddr) -> io::Result<Echo> {
        let mut io = KernelUdp::new(sys::udp_socket(addr)?)?;
        let poll = Poll::new()?;
        poll.registry().register(&mut io, Token(0), Interest::READABLE)?;
        Ok(Echo { io, poll })
    }

    /// The address bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Answers until `until` (forever with `None`); returns the number of datagrams echoed.
    pub fn serve(&mut self, until: Option<Instant>) -> io::Result<u64> {
        let mut received = Datagrams::new(SLOT_LEN);
        let mut replies = Datagrams::new(SLOT_LEN);
        let mut events = Events::with_capacity(4);
        let mut echoed = 0;
        loop {
            match self.io.recv(&mut received) {
                Ok(_) => {
                    replies.clear();
                    for i in 0..received.len() {
                        let Some((query, peer)) = received.get(i) else {
                            break;
                        };
                        replies.push_with(peer, |out| {
                            out[..query.len()].copy_from_slice(query);
                            if let Some(flags) = out.get_mut(2) {
                                *flags |= 0x80;
                            }
                            Some(query.len())
                        });
                    }
                    echoed += self.io.send(&mut replies).sent as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let timeout = match until {
                        Some(end) => {
                            let now = Instant::now();
                            if now >= end {
                                return Ok(echoed);
                            }
                            Some(end - now)
                        }
                        None => None,
                    };
                    match self.poll.poll(&mut events, timeout) {
                        Err(e) if e.kind() != io::ErrorKind::Interrupted => return Err(e),
                        _ => {}
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{run, Config};
    use crate::query::{build, QueryOptions};
    use std::net::Ipv4Addr;
    use std::time::Duration;

    #[test]
    fn every_query_sent_once_comes_back_answered() {
        let mut echo = Echo::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let addr = echo.local_addr().unwrap();
        let server = std::thread::spawn(move || echo.serve(Some(Instant::now() + Duration::from_millis(500))));
        let queries: Vec<_> = (0..2_000)
            .map(|i| build(&format!("h{i}.svc.skydns.local"), 1, QueryOptions::default()).unwrap())
            .collect();
        let config = Config {
            server: addr,
            duration: Duration::from_secs(1),
            window: 100,
            batch: 16,
            rate: None,
            timeout: Duration::from_secs(1),
            sockets: 2,
            once: true,
            spin: false,
            seed: 5,
            source: None,
        };
        let report = run(&config, &queries).unwrap();
        assert_eq!((report.sent, report.answered, report.lost), (2_000, 2_000, 0));
        assert_eq!(report.rcodes[0], 2_000);
        assert_eq!(report.latency.count(), 2_000);
        assert!(server.join().unwrap().unwrap() >= 2_000);
    }
}
