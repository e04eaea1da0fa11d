//! What the steering program and the AF_XDP sockets need to know about a network interface.

use super::XdpError;
use std::ffi::{CStr, CString};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

/// A network interface as XDP sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Its name.
    pub name: String,
    /// Its index, by which the kernel attaches programs and binds sockets.
    pub index: u32,
    /// Its Ethernet address: the source of the frames sent from it.
    pub mac: [u8; 6],
    /// Its MTU: the largest IP packet a frame carries.
    pub mtu: u32,
    /// Its receive queues: one AF_XDP socket per queue receives all of the interface's packets.
    pub queues: u32,
}

impl Interface {
    /// The interface named `name` in this process's network namespace.
    ///
    /// Reads the address, MTU and queues from `/sys/class/net`, which shows the namespace that
    /// sysfs was mounted in: run in a namespace as `ip netns exec` does, which mounts it anew.
    pub fn by_name(name: &str) -> Result<Interface, XdpError> {
        let unknown = || XdpError::UnknownInterface { name: name.to_owned() };
        // The kernel's limit (IFNAMSIZ less the NUL); a `/` would leave the sysfs directory.
        if name.is_empty() || name.len() > 15 || name.contains('/') || name == "." || name == ".." {
            return Err(unknown());
        }
        let c_name = CString::new(name).map_err(|_| unknown())?;
        // SAFETY: `c_name` is a NUL-terminated string that lives across the call, which only
        // reads it.
        let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
        if index == 0 {
            let err = io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::ENODEV) | Some(libc::ENXIO) => unknown(),
                _ => XdpError::Os {
                    what: "looking up the interface's index",
                    source: err,
                },
            });
        }
        let dir = PathBuf::from("/sys/class/net").join(name);
        let read = |file: &str, what: &'static str| {
            std::fs::read_to_string(dir.join(file))
                .map(|s| s.trim().to_owned())
                .map_err(|source| match source.kind() {
                    io::ErrorKind::NotFound => unknown(),
                    _ => XdpError::Os { what, source },
                })
        };
        let mac = parse_mac(&read("address", "reading the interface's address")?).ok_or(XdpError::Os {
            what: "reading the interface's address",
            source: io::Error::new(io::ErrorKind::InvalidData, "not an Ethernet interface"),
        })?;
        let mtu = read("mtu", "reading the interface's MTU")?
            .parse()
            .map_err(|_| XdpError::Os {
                what: "reading the interface's MTU",
                source: io::Error::new(io::ErrorKind::InvalidData, "not a number"),
            })?;
        let queues = count_rx_queues(&dir.join("queues")).map_err(|source| XdpError::Os {
            what: "counting the interface's receive queues",
            source,
        })?;
        Ok(Interface {
            name: name.to_owned(),
            index,
            mac,
            mtu,
            queues,
        })
    }

    /// The interface that holds the address `addr`: where the queries to it arrive, so where
    /// the steering program for it belongs.
    pub fn holding(addr: IpAddr) -> Result<Interface, XdpError> {
        let name = Addresses::get()?
            .find(|&(_, held)| held == addr)
            .map(|(name, _)| name)
            .ok_or(XdpError::NotLocal { addr })?;
        Interface::by_name(&name)
    }

    /// Whether an interface still has this one's index: it may have gone since it was looked
    /// up, which the kernel reports as an invalid argument rather than a missing device.
    pub fn exists(&self) -> bool {
        let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
        // SAFETY: `name` is IF_NAMESIZE bytes, as much as `if_indextoname` writes, and lives
        // across the call.
        !unsafe { libc::if_indextoname(self.index, name.as_mut_ptr()) }.is_null()
    }
}

/// The interfaces' addresses as `getifaddrs` lists them, freed on drop.
struct Addresses {
    head: *mut libc::ifaddrs,
    next: *mut libc::ifaddrs,
}

impl Addresses {
    fn get() -> Result<Addresses, XdpError> {
        let mut head = std::ptr::null_mut();
        // SAFETY: `head` is a valid place for the list's address, which `getifaddrs` allocates
        // and `Drop` frees.
        if unsafe { libc::getifaddrs(&mut head) } == -1 {
            return Err(XdpError::Os {
                what: "listing the interfaces' addresses",
                source: io::Error::last_os_error(),
            });
        }
        Ok(Addresses { head, next: head })
    }
}

impl Iterator for Addresses {
    /// An interface's name and one of its IP addresses.
    type Item = (String, IpAddr);

    fn next(&mut self) -> Option<(String, IpAddr)> {
        while !self.next.is_null() {
            // SAFETY: `next` is null or an entry of the list `getifaddrs` returned, which
            // lives until `Drop`; each entry's name is a NUL-terminated string, and its address
            // is null or a `sockaddr` whose family says which larger struct it is.
            unsafe {
                let entry = &*self.next;
                self.next = entry.ifa_next;
                if entry.ifa_addr.is_null() {
                    continue;
                }
                let addr = match i32::from((*entry.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(entry.ifa_addr as *const libc::sockaddr_in);
                        IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                        IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr))
                    }
                    _ => continue,
                };
                let name = CStr::from_ptr(entry.ifa_name).to_string_lossy().into_owned();
                return Some((name, addr));
            }
        }
        None
    }
}

impl Drop for Addresses {
    fn drop(&mut self) {
        // SAFETY: `head` came from `getifaddrs` and is freed once, here.
        unsafe { libc::freeifaddrs(self.head) }
    }
}

/// `aa:bb:cc:dd:ee:ff` as six bytes; `None` for any other length, as a non-Ethernet address.
fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0; 6];
    let mut parts = text.split(':');
    for byte in &mut mac {
        let part = parts.next()?;
        if part.len() != 2 {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// The `rx-N` entries of a `queues` directory; at least one, since every interface receives.
fn count_rx_queues(dir: &std::path::Path) -> io::Result<u32> {
    let mut count = 0u32;
    for entry in std::fs::read_dir(dir)? {
        if entry?.file_name().to_string_lossy().starts_with("rx-") {
            count += 1;
        }
    }
    Ok(count.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethernet_addresses_parse() {
        assert_eq!(parse_mac("02:00:5e:10:00:ff"), Some([2, 0, 0x5e, 0x10, 0, 0xff]));
        assert_eq!(parse_mac("00:00:00:00:00:00"), Some([0; 6]));
        assert_eq!(parse_mac("02:00:5e:10:00"), None);
        assert_eq!(parse_mac("02:00:5e:10:00:ff:01"), None);
        assert_eq!(parse_mac("2:00:5e:10:00:ff"), None);
        assert_eq!(parse_mac("zz:00:5e:10:00:ff"), None);
    }

    #[test]
    fn loopback_is_found() {
        let lo = Interface::by_name("lo").unwrap();
        assert_eq!(lo.index, 1);
        assert_eq!(lo.mac, [0; 6]);
        assert!(lo.mtu >= 1280, "{lo:?}");
        assert!(lo.queues >= 1, "{lo:?}");
    }

    #[test]
    fn the_loopback_addresses_are_held_by_loopback() {
        assert_eq!(Interface::holding(Ipv4Addr::LOCALHOST.into()).unwrap().name, "lo");
        let unheld: IpAddr = "192.0.2.254".parse().unwrap();
        assert!(matches!(Interface::holding(unheld), Err(XdpError::NotLocal { addr }) if addr == unheld));
    }

    #[test]
    fn unknown_names_are_unknown_interfaces() {
        for name in ["skyline-nosuch", "", "a/b", "..", "a\0b", "a-name-longer-than-ifnamsiz"] {
            match Interface::by_name(name) {
                Err(XdpError::UnknownInterface { name: got }) => assert_eq!(got, name),
                other => panic!("{name:?}: {other:?}"),
            }
        }
    }
}
