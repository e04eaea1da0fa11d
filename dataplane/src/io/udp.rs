//! The kernel UDP path: a non-blocking socket, one batched syscall per direction.

use super::{Datagrams, PacketIo, SendReport};
use crate::sys;
use mio::net::UdpSocket;
use mio::{Interest, Registry, Token};
use socket2::SockRef;
use std::io;

/// How many times a batch whose send found the socket buffer full is retried before the rest
/// is dropped. A full send buffer drains at wire speed; waiting longer would hold up every
/// other client of the worker for the sake of a few replies the clients will retry anyway.
const SEND_RETRIES: u32 = 3;

/// Size of each receive slot. Queries are far smaller; a larger datagram is cut to this size
/// and answered FORMERR at worst.
const QUERY_SLOT_LEN: usize = 4096;
/// Size of each reply slot. UDP replies never exceed the advertised 1232 bytes (the answer
/// path truncates to the client's size); the slot leaves room above that so the limit stays
/// the answer path's to enforce.
const REPLY_SLOT_LEN: usize = 4096;

/// A kernel UDP socket used through `recvmmsg`/`sendmmsg` (or their per-datagram fallback).
#[derive(Debug)]
pub struct KernelUdp {
    socket: UdpSocket,
    received: sys::Headers,
    sending: sys::Headers,
}

impl KernelUdp {
    /// Wraps a bound socket; it is switched to non-blocking mode.
    pub fn new(socket: std::net::UdpSocket) -> io::Result<KernelUdp> {
        socket.set_nonblocking(true)?;
        Ok(KernelUdp {
            socket: UdpSocket::from_std(socket),
            received: sys::Headers::default(),
            sending: sys::Headers::default(),
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.socket.local_addr()
    }
}

impl PacketIo for KernelUdp {
    fn query_batch(&mut self) -> Datagrams {
        Datagrams::new(QUERY_SLOT_LEN)
    }

    fn reply_batch(&mut self) -> Datagrams {
        Datagrams::new(REPLY_SLOT_LEN)
    }

    fn recv(&mut self, batch: &mut Datagrams) -> io::Result<usize> {
        let KernelUdp { socket, received, .. } = self;
        let n = socket.try_io(|| sys::recv_batch(SockRef::from(&*socket), batch.recv_slots(), received))?;
        batch.set_received(n);
        Ok(n)
    }

    fn retire(&mut self) -> io::Result<()> {
        sys::retire_udp(SockRef::from(&self.socket))
    }

    fn send(&mut self, batch: &mut Datagrams) -> SendReport {
        let KernelUdp { socket, sending, .. } = self;
        let mut report = SendReport::default();
        let mut retries = 0;
        while report.sent + report.dropped < batch.len() {
            let from = report.sent + report.dropped;
            match socket.try_io(|| sys::send_batch(SockRef::from(&*socket), batch.send_slots(from), sending)) {
                Ok(n) if n > 0 => report.sent += n,
                Ok(_) => {
                    if retries == SEND_RETRIES {
                        report.full = batch.len() - report.sent - report.dropped;
                        report.dropped += report.full;
                        break;
                    }
                    retries += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if retries == SEND_RETRIES {
                        report.full = batch.len() - report.sent - report.dropped;
                        report.dropped += report.full;
                        report.error = Some(e);
                        break;
                    }
                    retries += 1;
                    std::thread::yield_now();
                }
                Err(e) => {
                    // The first datagram of the rest could not be sent (unreachable peer, bad
                    // address): skip it and go on with the others.
                    report.dropped += 1;
                    report.error = Some(e);
                }
            }
        }
        batch.clear();
        report
    }
}

impl mio::event::Source for KernelUdp {
    fn register(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        self.socket.register(registry, token, interests)
    }

    fn reregister(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        self.socket.reregister(registry, token, interests)
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        self.socket.deregister(registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddr};
    use std::time::{Duration, Instant};

    #[test]
    fn a_batch_is_received_and_echoed() {
        let server = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = server.local_addr().unwrap();
        let mut io = KernelUdp::new(server).unwrap();
        let client = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        for i in 0..10u8 {
            client.send_to(&[i; 5], addr).unwrap();
        }

        let mut rx = Datagrams::new(512);
        let mut tx = Datagrams::new(512);
        let mut seen = 0;
        let deadline = Instant::now() + Duration::from_secs(2);
        while seen < 10 && Instant::now() < deadline {
            match io.recv(&mut rx) {
                Ok(n) => {
                    tx.clear();
                    for i in 0..n {
                        let (payload, peer) = rx.get(i).unwrap();
                        assert_eq!(peer.addr(), client.local_addr().unwrap());
                        tx.push_with(peer, |out| {
                            out[..payload.len()].copy_from_slice(payload);
                            Some(payload.len())
                        });
                    }
                    let report = io.send(&mut tx);
                    assert_eq!((report.sent, report.dropped), (n, 0));
                    seen += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(seen, 10);
        let mut buf = [0u8; 16];
        for _ in 0..10 {
            let (n, from) = client.recv_from(&mut buf).unwrap();
            assert_eq!((n, from), (5, addr));
        }
        assert_eq!(io.recv(&mut rx).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_datagram_to_an_impossible_peer_is_dropped_and_the_rest_sent() {
        let server = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut io = KernelUdp::new(server).unwrap();
        let client = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut tx = Datagrams::new(16);
        // Port 0 is not a valid destination; the kernel refuses that datagram alone.
        tx.push_with(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into(), |_| Some(4));
        tx.push_with(&client.local_addr().unwrap().into(), |_| Some(4));
        let report = io.send(&mut tx);
        assert_eq!((report.sent, report.dropped, report.full), (1, 1, 0));
        assert!(report.error.is_some());
        let mut buf = [0u8; 16];
        assert_eq!(client.recv_from(&mut buf).unwrap().0, 4);
    }
}
