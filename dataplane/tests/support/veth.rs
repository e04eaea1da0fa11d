//! Two network namespaces joined by a veth pair with two queues each way, private addresses on
//! both ends, for the tests of the AF_XDP path (`dataplane/tests/xdp_program.rs` and the
//! workspace's `tests/xdp.rs` include this file). Everything is deleted on drop, whatever the
//! test's outcome; nothing reaches beyond the two namespaces.

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

/// The server's end of the veth pair, in the server namespace.
pub const IFACE: &str = "vs";
/// The client's end, in the client namespace.
pub const PEER: &str = "vc";
pub const SERVER_V4: &str = "192.0.2.1";
pub const SERVER_V6: &str = "fd00:53::1";
pub const CLIENT_V4: &str = "192.0.2.2";
pub const CLIENT_V6: &str = "fd00:53::2";

/// Runs `ip` with `args`, failing the test with its message when it fails.
pub fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("running ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The namespace pair; `server` and `client` are the namespaces' names.
pub struct VethPair {
    pub server: String,
    pub client: String,
}

impl VethPair {
    /// The pair for test `tag` of the binary whose namespaces start with `prefix`, both ends
    /// with `mtu`. Below 1280 bytes the ends have no IPv6 address (RFC 8200's minimum).
    pub fn new(prefix: &str, tag: &str, mtu: u32) -> VethPair {
        let id = std::process::id();
        let pair = VethPair {
            server: format!("{prefix}-{id}-{tag}-s"),
            client: format!("{prefix}-{id}-{tag}-c"),
        };
        // Made before the namespaces exist, so that a failure on the way still removes them.
        ip(&["netns", "add", &pair.server]);
        ip(&["netns", "add", &pair.client]);
        let queues = ["numrxqueues", "2", "numtxqueues", "2"];
        let mut add = vec!["-n", &pair.server, "link", "add", IFACE];
        add.extend(queues);
        add.extend(["type", "veth", "peer", "name", PEER, "netns", &pair.client]);
        add.extend(queues);
        ip(&add);
        let mtu_text = mtu.to_string();
        for (ns, dev, v4, v6) in [
            (&pair.server, IFACE, SERVER_V4, SERVER_V6),
            (&pair.client, PEER, CLIENT_V4, CLIENT_V6),
        ] {
            ip(&["-n", ns, "link", "set", dev, "mtu", &mtu_text]);
            ip(&["-n", ns, "addr", "add", &format!("{v4}/24"), "dev", dev]);
            if mtu >= 1280 {
                ip(&["-n", ns, "addr", "add", &format!("{v6}/64"), "dev", dev, "nodad"]);
            }
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        pair
    }

    /// `ip link show` of the server's end.
    pub fn link(&self) -> String {
        ip(&["-n", &self.server, "link", "show", "dev", IFACE])
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Reported, not unwrapped: a panic while a failed test unwinds would abort the binary.
        for ns in [&self.server, &self.client] {
            match Command::new("ip").args(["netns", "delete", ns]).output() {
                Ok(out) if out.status.success() => {}
                Ok(out) => eprintln!("deleting namespace {ns}: {}", String::from_utf8_lossy(&out.stderr)),
                Err(e) => eprintln!("deleting namespace {ns}: {e}"),
            }
        }
    }
}

/// The Internet checksum of `data`.
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Sends ICMP echo requests to `addr` over a raw socket until the reply comes, for `patience`
/// at most: no `ping` program is needed.
pub fn ping(addr: IpAddr, patience: Duration) {
    let (domain, protocol, request, reply) = match addr {
        IpAddr::V4(_) => (Domain::IPV4, Protocol::ICMPV4, 8, 0),
        IpAddr::V6(_) => (Domain::IPV6, Protocol::ICMPV6, 128, 129),
    };
    let mut socket = Socket::new(domain, Type::RAW, Some(protocol)).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let id = (std::process::id() as u16).to_be_bytes();
    let mut echo = vec![request, 0, 0, 0, id[0], id[1], 0, 1];
    echo.extend_from_slice(b"skyline");
    // ICMPv6's checksum covers a pseudo-header; the kernel fills it in for raw ICMPv6 sockets.
    if addr.is_ipv4() {
        let sum = checksum(&echo).to_be_bytes();
        echo[2..4].copy_from_slice(&sum);
    }
    let target = SockAddr::from(SocketAddr::new(addr, 0));
    let deadline = Instant::now() + patience;
    while Instant::now() < deadline {
        socket.send_to(&echo, &target).unwrap();
        let mut buf = [0; 1500];
        while let Ok(len) = socket.read(&mut buf) {
            // Raw IPv4 sockets see the IP header; raw IPv6 sockets only the ICMPv6 message.
            let icmp = if addr.is_ipv4() {
                &buf[usize::from(buf[0] & 0x0f) * 4..len]
            } else {
                &buf[..len]
            };
            if icmp.len() >= 8 && icmp[0] == reply && icmp[4..6] == id {
                return;
            }
        }
    }
    panic!("no echo reply from {addr}");
}
