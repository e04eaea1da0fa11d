//! The steering program: which packets go to the AF_XDP sockets, and its attachment.

use super::bpf::{self, Asm, Insn, LoadError, R0, R1, R2, R3, R4, R5};
use super::{Interface, XdpError};
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::str::FromStr;

/// `XDP_PASS`: the packet goes on to the kernel's network stack.
const XDP_PASS: i32 = 2;
/// `bpf_redirect_map`: sends the packet to the map entry's target. The low bits of its flags
/// are the action when the map has no entry for the key.
const HELPER_REDIRECT_MAP: i32 = 51;
/// `XDP_FLAGS_SKB_MODE`.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`.
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Offsets in `struct xdp_md`, the program's context.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

/// Ethernet header: destination, source, EtherType.
const ETH_LEN: i16 = 14;
const ETH_TYPE: i16 = 12;
/// An IPv4 header without options (IHL 5).
const IPV4_LEN: i16 = 20;
/// The fixed IPv6 header.
const IPV6_LEN: i16 = 40;
const UDP_LEN: i16 = 8;
/// The UDP destination port, from the start of the UDP header.
const UDP_DEST: i16 = 2;
const PROTO_UDP: i32 = 17;

/// Where the program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Native mode where the driver has it, generic mode where it does not.
    Auto,
    /// In the driver, before the kernel allocates a socket buffer: the fast path, and the one
    /// AF_XDP's zero-copy mode needs.
    Native,
    /// After the kernel has built a socket buffer: works on every interface, at about the cost
    /// of the ordinary receive path.
    Generic,
}

impl Mode {
    fn flags(self) -> u32 {
        match self {
            Mode::Native => XDP_FLAGS_DRV_MODE,
            Mode::Generic => XDP_FLAGS_SKB_MODE,
            // Never attached as such: [`Program::attach`] tries the two modes in turn.
            Mode::Auto => 0,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Auto => "auto",
            Mode::Native => "native",
            Mode::Generic => "generic",
        })
    }
}

/// A mode name other than `auto`, `native` or `generic`.
#[derive(Debug, thiserror::Error)]
#[error("unknown XDP mode {0:?}: expected auto, native or generic")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Mode, UnknownMode> {
        match s {
            "auto" => Ok(Mode::Auto),
            "native" => Ok(Mode::Native),
            "generic" => Ok(Mode::Generic),
            _ => Err(UnknownMode(s.to_owned())),
        }
    }
}

/// The steering program, attached to an interface for as long as this value lives.
#[derive(Debug)]
pub struct Program {
    /// The BPF link: closing its last descriptor detaches the program, which is why it is
    /// held, and handed to the process replacing this one in an upgrade.
    link: OwnedFd,
    /// The XSKMAP: receive queue to AF_XDP socket.
    map: OwnedFd,
    mode: Mode,
    iface: String,
    queues: u32,
}

impl Program {
    /// Loads the steering program for UDP to `addr` (IPv4 or IPv6 address of the interface, and
    /// its port) with an XSKMAP of `queues` entries, and attaches it to `iface` as a BPF link.
    /// Auto tries native (driver) mode, then generic (skb) mode.
    ///
    /// Until [`Program::steer`] fills a queue's entry, that queue's packets go to the kernel as
    /// if no program were attached, so attaching before the sockets exist loses nothing.
    pub fn attach(iface: &Interface, mode: Mode, addr: SocketAddr) -> Result<Program, XdpError> {
        check_address(addr)?;
        let queues = iface.queues.max(1);
        let map = bpf::map_create(bpf::MAP_TYPE_XSKMAP, queues, "skyline_xsks")
            .map_err(|e| os_error(e, "creating the XSKMAP", iface))?;
        let prog = load(addr, map.as_fd(), XDP_PASS)?;
        let (link, mode) = match mode {
            Mode::Auto => match link(iface, prog.as_fd(), Mode::Native) {
                Err(XdpError::ModeUnsupported { .. }) => link(iface, prog.as_fd(), Mode::Generic),
                other => other,
            },
            mode => link(iface, prog.as_fd(), mode),
        }?;
        Ok(Program {
            link,
            map,
            mode,
            iface: iface.name.clone(),
            queues,
        })
    }

    /// Takes over the attachment a replaced process handed over: its link, which keeps the
    /// program attached, and its XSKMAP. The program stays as it was loaded, steering the same
    /// address to the same sockets, which change hands with it.
    pub fn adopt(iface: &Interface, mode: Mode, link: OwnedFd, map: OwnedFd) -> Program {
        Program {
            link,
            map,
            mode,
            iface: iface.name.clone(),
            queues: iface.queues.max(1),
        }
    }

    /// The link and the XSKMAP, for handing the attachment to the process replacing this one.
    pub fn descriptors(&self) -> (BorrowedFd<'_>, BorrowedFd<'_>) {
        (self.link.as_fd(), self.map.as_fd())
    }

    /// The mode actually attached (Native or Generic).
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Steers receive queue `queue`'s matching packets to the AF_XDP socket `xsk` (map update
    /// of the XSKMAP: key queue, value the socket fd).
    ///
    /// The socket must be bound to this interface and queue: the kernel delivers to it only
    /// packets of the queue it is bound to, and drops the rest.
    pub fn steer(&self, queue: u32, xsk: BorrowedFd<'_>) -> Result<(), XdpError> {
        if queue >= self.queues {
            return Err(XdpError::NoSuchQueue {
                iface: self.iface.clone(),
                queue,
                queues: self.queues,
            });
        }
        let fd = u32::try_from(xsk.as_raw_fd()).expect("a valid descriptor is not negative");
        bpf::map_update(self.map.as_fd(), queue, fd).map_err(|source| match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => XdpError::NoPermission {
                what: "putting the AF_XDP socket into the XSKMAP",
            },
            _ => XdpError::Os {
                what: "putting the AF_XDP socket into the XSKMAP (is it a bound AF_XDP socket?)",
                source,
            },
        })
    }
}

/// Refuses what one compare in the program cannot stand for: any address of a family (the
/// program matches one), group addresses, and port 0.
fn check_address(addr: SocketAddr) -> Result<(), XdpError> {
    let reason = match addr.ip() {
        _ if addr.port() == 0 => Some("port 0 receives nothing"),
        ip if ip.is_unspecified() => Some("the program matches one address of the interface, not any"),
        ip if ip.is_multicast() => Some("a multicast address is not an address of the interface"),
        IpAddr::V4(ip) if ip.is_broadcast() => Some("the broadcast address is not an address of the interface"),
        IpAddr::V6(ip) if ip.to_ipv4_mapped().is_some() => {
            Some("an IPv4-mapped IPv6 address never appears in a packet; give the IPv4 address")
        }
        _ => None,
    };
    match reason {
        Some(reason) => Err(XdpError::BadAddress { addr, reason }),
        None => Ok(()),
    }
}

/// Loads the program for `addr` with `map` as its XSKMAP; `otherwise` is what it does with a
/// matching packet whose queue has no socket (the kernel's own action in the attached program).
fn load(addr: SocketAddr, map: BorrowedFd<'_>, otherwise: i32) -> Result<OwnedFd, XdpError> {
    bpf::prog_load_xdp(&steering(addr, map.as_raw_fd(), otherwise), "skyline_dns").map_err(|e| match e {
        LoadError::NoPermission => XdpError::NoPermission {
            what: "loading the XDP program",
        },
        LoadError::Rejected(log) => XdpError::Load { log },
    })
}

/// Attaches `prog` to `iface` in `mode` (native or generic) as a link.
fn link(iface: &Interface, prog: BorrowedFd<'_>, mode: Mode) -> Result<(OwnedFd, Mode), XdpError> {
    match bpf::link_create_xdp(prog, iface.index, mode.flags()) {
        Ok(link) => Ok((link, mode)),
        // The kernel says EINVAL, not ENODEV, for an index no interface has (any more).
        Err(source) if source.raw_os_error() == Some(libc::EINVAL) && !iface.exists() => {
            Err(XdpError::UnknownInterface {
                name: iface.name.clone(),
            })
        }
        Err(source) => Err(match source.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) if mode == Mode::Native => XdpError::ModeUnsupported {
                iface: iface.name.clone(),
                mode,
            },
            Some(libc::EBUSY) | Some(libc::EEXIST) => XdpError::Busy {
                iface: iface.name.clone(),
                source,
            },
            _ => os_error(source, "attaching the XDP program", iface),
        }),
    }
}

/// The error for a refused step, typed where the errno says why.
fn os_error(source: io::Error, what: &'static str, iface: &Interface) -> XdpError {
    match source.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => XdpError::NoPermission { what },
        Some(libc::ENODEV) => XdpError::UnknownInterface {
            name: iface.name.clone(),
        },
        _ => XdpError::Os { what, source },
    }
}

/// A 16-bit field in network order as a half-word load reads it on this machine.
fn net16(value: u16) -> i32 {
    i32::from(u16::from_ne_bytes(value.to_be_bytes()))
}

/// Four bytes of an address as a word load reads them on this machine.
fn net32(bytes: [u8; 4]) -> i32 {
    i32::from_ne_bytes(bytes)
}

/// The instructions: UDP to `addr` in an untagged Ethernet frame goes to the receive queue's
/// AF_XDP socket (or meets `otherwise` when the queue has none); everything else, the kernel.
///
/// Checked, in order, each failing check passing the packet on: the frame holds every header
/// up to UDP's; EtherType IPv4 or IPv6 (the family of `addr` only; a VLAN tag fails here);
/// for IPv4, version 4 with no options, protocol UDP, not a fragment (neither more-fragments
/// nor an offset: a later fragment holds no UDP header, and the kernel reassembles them), and
/// the destination address; for IPv6, version 6, UDP as the first next header (extension
/// headers are left to the kernel) and the destination address; then the destination port.
fn steering(addr: SocketAddr, map: std::os::fd::RawFd, otherwise: i32) -> Vec<Insn> {
    let mut asm = Asm::new();
    let pass = asm.label();
    asm.push(&[
        Insn::ldx_w(R2, R1, MD_DATA),
        Insn::ldx_w(R3, R1, MD_DATA_END),
        Insn::mov64_reg(R4, R2),
    ]);
    let udp = match addr.ip() {
        IpAddr::V4(ip) => {
            let udp = ETH_LEN + IPV4_LEN;
            asm.push(&[Insn::add64_imm(R4, (udp + UDP_LEN).into())]);
            asm.jump(Insn::jgt_reg(R4, R3, 0), pass);
            asm.push(&[Insn::ldx_h(R5, R2, ETH_TYPE)]);
            asm.jump(Insn::jne32_imm(R5, net16(0x0800), 0), pass);
            // Version 4, header length 5 words.
            asm.push(&[Insn::ldx_b(R5, R2, ETH_LEN)]);
            asm.jump(Insn::jne32_imm(R5, 0x45, 0), pass);
            asm.push(&[Insn::ldx_b(R5, R2, ETH_LEN + 9)]);
            asm.jump(Insn::jne32_imm(R5, PROTO_UDP, 0), pass);
            // Flags and fragment offset, less the don't-fragment bit.
            asm.push(&[Insn::ldx_h(R5, R2, ETH_LEN + 6), Insn::and32_imm(R5, net16(0x3fff))]);
            asm.jump(Insn::jne32_imm(R5, 0, 0), pass);
            asm.push(&[Insn::ldx_w(R5, R2, ETH_LEN + 16)]);
            asm.jump(Insn::jne32_imm(R5, net32(ip.octets()), 0), pass);
            udp
        }
        IpAddr::V6(ip) => {
            let udp = ETH_LEN + IPV6_LEN;
            asm.push(&[Insn::add64_imm(R4, (udp + UDP_LEN).into())]);
            asm.jump(Insn::jgt_reg(R4, R3, 0), pass);
            asm.push(&[Insn::ldx_h(R5, R2, ETH_TYPE)]);
            asm.jump(Insn::jne32_imm(R5, net16(0x86dd), 0), pass);
            asm.push(&[Insn::ldx_b(R5, R2, ETH_LEN), Insn::and32_imm(R5, 0xf0)]);
            asm.jump(Insn::jne32_imm(R5, 0x60, 0), pass);
            asm.push(&[Insn::ldx_b(R5, R2, ETH_LEN + 6)]);
            asm.jump(Insn::jne32_imm(R5, PROTO_UDP, 0), pass);
            for (i, word) in ip.octets().chunks_exact(4).enumerate() {
                let word = [word[0], word[1], word[2], word[3]];
                asm.push(&[Insn::ldx_w(R5, R2, ETH_LEN + 24 + 4 * i as i16)]);
                asm.jump(Insn::jne32_imm(R5, net32(word), 0), pass);
            }
            udp
        }
    };
    asm.push(&[Insn::ldx_h(R5, R2, udp + UDP_DEST)]);
    asm.jump(Insn::jne32_imm(R5, net16(addr.port()), 0), pass);
    // bpf_redirect_map(&xskmap, ctx->rx_queue_index, otherwise)
    asm.push(&[Insn::ldx_w(R2, R1, MD_RX_QUEUE_INDEX)]);
    asm.push(&Insn::ld_map_fd(R1, map));
    asm.push(&[
        Insn::mov64_imm(R3, otherwise),
        Insn::call(HELPER_REDIRECT_MAP),
        Insn::exit(),
    ]);
    asm.bind(pass);
    asm.push(&[Insn::mov64_imm(R0, XDP_PASS), Insn::exit()]);
    asm.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// `XDP_DROP`: what the test programs return for a matching packet, since their map holds
    /// no socket; telling it apart from `XDP_PASS` shows which packets the program steers.
    const XDP_DROP: i32 = 1;

    #[test]
    fn modes_parse_and_print() {
        for mode in [Mode::Auto, Mode::Native, Mode::Generic] {
            assert_eq!(mode.to_string().parse::<Mode>().unwrap(), mode);
        }
        assert!("drv".parse::<Mode>().unwrap_err().to_string().contains("drv"));
    }

    #[test]
    fn addresses_that_cannot_be_matched_are_refused() {
        for addr in [
            "0.0.0.0:53",
            "[::]:53",
            "192.0.2.1:0",
            "224.0.0.251:53",
            "255.255.255.255:53",
            "[ff02::fb]:53",
            "[::ffff:192.0.2.1]:53",
        ] {
            let addr: SocketAddr = addr.parse().unwrap();
            assert!(
                matches!(check_address(addr), Err(XdpError::BadAddress { .. })),
                "{addr}"
            );
        }
        check_address("192.0.2.1:53".parse().unwrap()).unwrap();
        check_address("[fd00:53::1]:5353".parse().unwrap()).unwrap();
    }

    #[test]
    fn every_jump_lands_inside_the_program() {
        for addr in ["192.0.2.1:53", "[fd00:53::1]:53"] {
            let insns = steering(addr.parse().unwrap(), 3, XDP_PASS);
            for (i, insn) in insns.iter().enumerate() {
                let bytes = insn.to_bytes();
                let off = i16::from_ne_bytes([bytes[2], bytes[3]]);
                let class = bytes[0] & 7;
                if (class == 5 || class == 6) && bytes[0] & 0xf0 != 0x80 && bytes[0] & 0xf0 != 0x90 {
                    let target = i as isize + 1 + off as isize;
                    assert!(
                        off > 0 && (target as usize) < insns.len(),
                        "{addr}: insn {i} jumps to {target}"
                    );
                }
            }
            assert_eq!(insns.last().unwrap().to_bytes()[0], 0x95, "{addr}: ends with exit");
        }
    }

    /// A frame with the given EtherType and payload.
    fn ether(ether_type: u16, payload: &[u8]) -> Vec<u8> {
        let mut frame = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        frame.extend_from_slice(&ether_type.to_be_bytes());
        frame.extend_from_slice(payload);
        frame
    }

    fn udp(dest: u16) -> Vec<u8> {
        let mut udp = vec![0xc0, 0x01];
        udp.extend_from_slice(&dest.to_be_bytes());
        udp.extend_from_slice(&[0, 20, 0, 0]);
        udp.extend_from_slice(&[0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        udp
    }

    /// An IPv4 packet from 192.0.2.2 to `dest`; `edit` changes the header before the payload.
    fn ipv4(dest: Ipv4Addr, proto: u8, payload: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let len = (20 + payload.len()) as u16;
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&len.to_be_bytes());
        ip.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0, 192, 0, 2, 2]);
        ip.extend_from_slice(&dest.octets());
        edit(&mut ip);
        ip.extend_from_slice(payload);
        ip
    }

    fn ipv6(dest: Ipv6Addr, next: u8, payload: &[u8]) -> Vec<u8> {
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[next, 64]);
        ip.extend_from_slice(&"fd00:53::2".parse::<Ipv6Addr>().unwrap().octets());
        ip.extend_from_slice(&dest.octets());
        ip.extend_from_slice(payload);
        ip
    }

    /// The steering program for `addr`, loaded with an empty map so that a steered packet is
    /// dropped; `None` (the test skipped) where this process may not load programs and the
    /// run is not CI (`CI=true`), which must load them.
    fn loaded(addr: &str) -> Option<(OwnedFd, OwnedFd)> {
        let map = match bpf::map_create(bpf::MAP_TYPE_XSKMAP, 2, "skyline_test") {
            Ok(map) => map,
            Err(e) if e.raw_os_error() == Some(libc::EPERM) && std::env::var("CI").as_deref() != Ok("true") => {
                eprintln!("skipped: this process may not create BPF maps ({e}); run as root");
                return None;
            }
            Err(e) => panic!("creating the XSKMAP: {e}"),
        };
        let prog = load(addr.parse().unwrap(), map.as_fd(), XDP_DROP).unwrap();
        Some((prog, map))
    }

    fn run(prog: &OwnedFd, frame: &[u8]) -> i32 {
        bpf::test_run(prog.as_fd(), frame).unwrap() as i32
    }

    #[test]
    fn ipv4_queries_to_the_address_and_port_alone_are_steered() {
        let Some((prog, _map)) = loaded("192.0.2.1:53") else {
            return;
        };
        let me: Ipv4Addr = "192.0.2.1".parse().unwrap();
        let query = ether(0x0800, &ipv4(me, 17, &udp(53), |_| ()));
        assert_eq!(run(&prog, &query), XDP_DROP, "a query is steered");
        let df = ether(0x0800, &ipv4(me, 17, &udp(53), |ip| ip[6] = 0x40));
        assert_eq!(run(&prog, &df), XDP_DROP, "don't-fragment is not a fragment");
        let cases: [(&str, Vec<u8>); 10] = [
            ("another port", ether(0x0800, &ipv4(me, 17, &udp(54), |_| ()))),
            (
                "another address",
                ether(0x0800, &ipv4("192.0.2.9".parse().unwrap(), 17, &udp(53), |_| ())),
            ),
            ("TCP", ether(0x0800, &ipv4(me, 6, &udp(53), |_| ()))),
            ("ICMP", ether(0x0800, &ipv4(me, 1, &[8, 0, 0, 0, 0, 1, 0, 1], |_| ()))),
            (
                "more fragments",
                ether(0x0800, &ipv4(me, 17, &udp(53), |ip| ip[6] = 0x20)),
            ),
            (
                "a later fragment",
                ether(0x0800, &ipv4(me, 17, &udp(53), |ip| ip[7] = 0x10)),
            ),
            ("IP options", ether(0x0800, &ipv4(me, 17, &udp(53), |ip| ip[0] = 0x46))),
            (
                "ARP",
                ether(
                    0x0806,
                    &[
                        0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 2, 192, 0, 2, 2, 0, 0, 0, 0, 0, 0, 192, 0, 2, 1, 0, 0,
                        0, 0, 0, 0, 0, 0, 0, 0,
                    ],
                ),
            ),
            ("a VLAN tag", {
                let mut tagged = vec![0, 5, 8, 0];
                tagged.extend_from_slice(&ipv4(me, 17, &udp(53), |_| ()));
                ether(0x8100, &tagged)
            }),
            (
                "IPv6 to the port",
                ether(0x86dd, &ipv6("fd00:53::1".parse().unwrap(), 17, &udp(53))),
            ),
        ];
        for (what, frame) in cases {
            assert_eq!(run(&prog, &frame), XDP_PASS, "{what} passes");
        }
        // Cut short anywhere before the UDP header's end: the bounds check passes it.
        for len in 14..query.len().min(14 + 20 + 8) {
            assert_eq!(run(&prog, &query[..len]), XDP_PASS, "{len} bytes pass");
        }
    }

    #[test]
    fn ipv6_queries_to_the_address_and_port_alone_are_steered() {
        let Some((prog, _map)) = loaded("[fd00:53::1]:53") else {
            return;
        };
        let me: Ipv6Addr = "fd00:53::1".parse().unwrap();
        let query = ether(0x86dd, &ipv6(me, 17, &udp(53)));
        assert_eq!(run(&prog, &query), XDP_DROP, "a query is steered");
        let mut version4 = query.clone();
        version4[14] = 0x40;
        let cases: [(&str, Vec<u8>); 7] = [
            ("another port", ether(0x86dd, &ipv6(me, 17, &udp(5353)))),
            (
                "another address, last word",
                ether(0x86dd, &ipv6("fd00:53::2".parse().unwrap(), 17, &udp(53))),
            ),
            (
                "another address, first word",
                ether(0x86dd, &ipv6("fd01:53::1".parse().unwrap(), 17, &udp(53))),
            ),
            ("a hop-by-hop header first", ether(0x86dd, &ipv6(me, 0, &udp(53)))),
            ("ICMPv6", ether(0x86dd, &ipv6(me, 58, &[128, 0, 0, 0, 0, 1, 0, 1]))),
            ("a version other than 6", version4),
            (
                "IPv4 to the port",
                ether(0x0800, &ipv4("192.0.2.1".parse().unwrap(), 17, &udp(53), |_| ())),
            ),
        ];
        for (what, frame) in cases {
            assert_eq!(run(&prog, &frame), XDP_PASS, "{what} passes");
        }
        for len in 14..14 + 40 + 8 {
            assert_eq!(run(&prog, &query[..len]), XDP_PASS, "{len} bytes pass");
        }
    }

    #[test]
    fn the_attached_program_passes_steered_packets_of_queues_without_a_socket() {
        let Some((_, map)) = loaded("192.0.2.1:53") else { return };
        let prog = load("192.0.2.1:53".parse().unwrap(), map.as_fd(), XDP_PASS).unwrap();
        let query = ether(0x0800, &ipv4("192.0.2.1".parse().unwrap(), 17, &udp(53), |_| ()));
        assert_eq!(run(&prog, &query), XDP_PASS);
    }
}
