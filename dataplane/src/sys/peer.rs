//! A datagram's peer, kept in the kernel's socket address layout.

use std::fmt;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// The address a datagram came from or goes to, in the layout the kernel reads and writes.
///
/// A reply goes back to where its query came from: the receive writes the address straight
/// into a `Peer` and the send hands the same bytes back, where converting it to a `SocketAddr`
/// and back cost every query about forty instructions. It is converted only where an address
/// is looked at: the access list, a forwarded client, a log line.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Peer {
    name: RawSocketAddr,
    /// Bytes of `name` that hold the address.
    len: libc::socklen_t,
    /// The peer's link-layer (Ethernet) address, where a packet path that writes its own
    /// frames learnt it: a reply goes back to the station its query came from. Zero for
    /// kernel sockets, whose replies the kernel addresses.
    link: [u8; 6],
}

/// Either kind of socket address. Every byte is always initialised: a value starts as a
/// zeroed IPv6 address, and writing the IPv4 member leaves the rest as it was.
#[derive(Clone, Copy)]
#[repr(C)]
union RawSocketAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

/// Room for a peer's address, which a receive tells the kernel: it writes the address at the
/// start of the `Peer` (`repr(C)`, the address first). Only the batched system calls of
/// `linux.rs` hand the kernel a `Peer` to fill or read, hence the allowance elsewhere.
#[cfg_attr(any(not(target_os = "linux"), skyline_portable_io), allow(dead_code))]
pub(super) const NAME_ROOM: libc::socklen_t = mem::size_of::<RawSocketAddr>() as libc::socklen_t;

impl Peer {
    /// The address as a `SocketAddr`. An address of an unexpected family or length, which a
    /// UDP socket never reports, reads as the unspecified IPv4 address.
    pub fn addr(&self) -> SocketAddr {
        match self.family() {
            Some(Family::V4) => {
                // SAFETY: every byte of the union is initialised (see `RawSocketAddr`), and
                // any bytes are a valid `sockaddr_in`.
                let sin = unsafe { self.name.v4 };
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port)))
            }
            Some(Family::V6) => {
                // SAFETY: as above, for a `sockaddr_in6`.
                let sin6 = unsafe { self.name.v6 };
                SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                ))
            }
            None => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        }
    }

    /// The address's IP as the socket address holds it, its bytes in network order read as a
    /// native integer, and whether it is IPv4 (an IPv4-mapped IPv6 address counts as IPv4,
    /// the four bytes of its IPv4 address): what a table keyed by client network needs, masked
    /// by masks in the same order, without a byte swap or an `IpAddr` made and canonicalised
    /// on every reply. The family alone decides: a UDP socket always reports an address of its
    /// family's full length, and every byte is initialised whatever the length.
    #[inline(always)]
    pub fn ip_raw(&self) -> (u128, bool) {
        // SAFETY: the family field sits at the start of both members and is always initialised.
        if libc::c_int::from(unsafe { self.name.v4.sin_family }) == libc::AF_INET {
            // SAFETY: as in `addr`.
            return (u128::from(unsafe { self.name.v4 }.sin_addr.s_addr), true);
        }
        // SAFETY: as in `addr`.
        let bytes = unsafe { self.name.v6 }.sin6_addr.s6_addr;
        match bytes.split_last_chunk::<4>() {
            Some((&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], &v4)) => (u128::from(u32::from_ne_bytes(v4)), true),
            _ => (u128::from_ne_bytes(bytes), false),
        }
    }

    /// The address's IP, for the access list every query is checked against.
    #[inline]
    pub fn ip(&self) -> IpAddr {
        match self.family() {
            // SAFETY: as in `addr`.
            Some(Family::V4) => IpAddr::V4(Ipv4Addr::from(u32::from_be(unsafe { self.name.v4 }.sin_addr.s_addr))),
            // SAFETY: as in `addr`.
            Some(Family::V6) => IpAddr::V6(Ipv6Addr::from(unsafe { self.name.v6 }.sin6_addr.s6_addr)),
            None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }

    #[inline]
    fn family(&self) -> Option<Family> {
        // SAFETY: the family field sits at the start of both members and is always initialised.
        let family = libc::c_int::from(unsafe { self.name.v4.sin_family });
        let len = self.len as usize;
        if family == libc::AF_INET && len >= mem::size_of::<libc::sockaddr_in>() {
            Some(Family::V4)
        } else if family == libc::AF_INET6 && len >= mem::size_of::<libc::sockaddr_in6>() {
            Some(Family::V6)
        } else {
            None
        }
    }

    /// The address for a send to read, and its length.
    #[cfg_attr(any(not(target_os = "linux"), skyline_portable_io), allow(dead_code))]
    pub(super) fn name(&self) -> (*mut libc::c_void, libc::socklen_t) {
        // The kernel only reads through a send's address pointer; it is mutable because
        // `msghdr` serves both directions.
        ((&raw const self.name).cast_mut().cast(), self.len)
    }

    /// The peer's link-layer address (see the field).
    #[inline(always)]
    pub fn link(&self) -> [u8; 6] {
        self.link
    }

    /// The peer `addr` reached at link-layer address `link`.
    pub fn with_link(addr: SocketAddr, link: [u8; 6]) -> Peer {
        Peer {
            link,
            ..Peer::from(addr)
        }
    }

    /// Records the length of the address a receive wrote.
    #[cfg_attr(any(not(target_os = "linux"), skyline_portable_io), allow(dead_code))]
    pub(super) fn set_len(&mut self, len: libc::socklen_t) {
        self.len = len.min(NAME_ROOM);
    }
}

#[derive(Clone, Copy)]
enum Family {
    V4,
    V6,
}

impl From<SocketAddr> for Peer {
    fn from(addr: SocketAddr) -> Peer {
        // SAFETY: `sockaddr_in6` is a plain C struct for which all-zero bytes are a valid value.
        let zeroed: libc::sockaddr_in6 = unsafe { mem::zeroed() };
        let mut name = RawSocketAddr { v6: zeroed };
        let len = match addr {
            SocketAddr::V4(a) => {
                name.v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*a.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                name.v6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                mem::size_of::<libc::sockaddr_in6>()
            }
        };
        Peer {
            name,
            len: len as libc::socklen_t,
            link: [0; 6],
        }
    }
}

impl Default for Peer {
    fn default() -> Peer {
        Peer::from(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
    }
}

impl PartialEq for Peer {
    fn eq(&self, other: &Peer) -> bool {
        self.addr() == other.addr()
    }
}

impl Eq for Peer {}

impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.addr(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_convert_both_ways() {
        for addr in [
            "127.0.0.1:53",
            "10.1.2.3:65535",
            "0.0.0.0:0",
            "[::1]:5353",
            "[fe80::1%7]:53",
            "[::ffff:10.0.0.1]:1",
        ] {
            let addr: SocketAddr = addr.parse().unwrap();
            let peer = Peer::from(addr);
            assert_eq!(peer.addr(), addr);
            assert_eq!(peer.ip(), addr.ip());
        }
    }

    #[test]
    fn a_length_too_short_for_its_family_reads_as_unspecified() {
        let mut peer = Peer::from("[::1]:53".parse::<SocketAddr>().unwrap());
        peer.set_len(16);
        assert_eq!(peer.addr(), SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
        assert_eq!(peer.ip(), IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        peer.set_len(0);
        assert_eq!(peer.addr(), SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
    }
}
