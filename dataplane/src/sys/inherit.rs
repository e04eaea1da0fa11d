//! Listening sockets handed to this process when it starts instead of bound by it: by a service
//! manager (systemd socket activation: `LISTEN_PID`, `LISTEN_FDS`, descriptors from 3 on), or by
//! the skyline this one replaces in an in-place upgrade ([`UPGRADE_FDS`]). The sockets then
//! outlive the process: queries queue in them instead of being refused.

use socket2::{Socket, Type};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, RawFd};

/// The variable through which a skyline hands its listening sockets to the skyline replacing
/// it: their descriptor numbers, comma-separated, UDP sockets and TCP listeners of every
/// address in any order.
pub const UPGRADE_FDS: &str = "SKYLINE_UPGRADE_FDS";

/// The variable through which a skyline hands its HTTP listener to the skyline replacing it.
pub const UPGRADE_HTTP_FD: &str = "SKYLINE_UPGRADE_HTTP_FD";

/// The variable through which a skyline hands its AF_XDP attachment to the skyline replacing
/// it: `key=value` words separated by spaces, descriptors by number (`sys/xdp/handover.rs`).
pub const UPGRADE_XDP: &str = "SKYLINE_UPGRADE_XDP";

/// The first descriptor of the handed-over sockets, as the socket activation protocol fixes it.
const FIRST_FD: RawFd = 3;
/// More than any real unit passes; a larger count is a broken environment, not sockets.
const MAX_FDS: RawFd = 1024;

/// One address's sockets as the workers need them: the UDP socket and the TCP listener.
#[derive(Debug)]
pub struct ListenPair {
    /// The address both are bound to.
    pub addr: SocketAddr,
    /// Its UDP socket.
    pub udp: std::net::UdpSocket,
    /// Its TCP listener.
    pub tcp: std::net::TcpListener,
}

/// Why the handed-over sockets cannot be served on.
#[derive(Debug, thiserror::Error)]
pub enum InheritError {
    /// `LISTEN_FDS` or `LISTEN_PID` is not a number.
    #[error("{name}={value:?} is not a valid count or process ID")]
    Variable {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
    /// No socket was handed over (no `LISTEN_FDS`, or `LISTEN_PID` names another process).
    #[error("no sockets were passed (LISTEN_FDS unset, zero, or LISTEN_PID not this process)")]
    None,
    /// A descriptor is not a socket skyline can serve on.
    #[error("descriptor {fd}: {reason}")]
    Unusable {
        /// The descriptor.
        fd: RawFd,
        /// What is wrong with it.
        reason: String,
    },
    /// An address has a UDP socket and no TCP listener, or the other way round (or, handed over
    /// by a replaced skyline, more of one than of the other).
    #[error("{addr}: a {have} socket was passed without its {missing} counterpart; pass both")]
    Unpaired {
        /// The address.
        addr: SocketAddr,
        /// The kind passed.
        have: &'static str,
        /// The kind missing.
        missing: &'static str,
    },
}

/// Takes the sockets a service manager passed: every descriptor from 3 on that `LISTEN_FDS`
/// counts, when `LISTEN_PID` names this process. Each must be an IPv4 or IPv6 UDP socket or a
/// listening TCP socket, bound; they are paired by address, in whatever order they came. The
/// variables are removed, so that a process started from this one does not take them too, and
/// each socket is made close-on-exec and non-blocking.
///
/// Call once, before any other code may open descriptors 3 and up.
pub fn take_listen_fds() -> Result<Vec<ListenPair>, InheritError> {
    let pid = variable("LISTEN_PID")?;
    let count = variable("LISTEN_FDS")?;
    std::env::remove_var("LISTEN_PID");
    std::env::remove_var("LISTEN_FDS");
    std::env::remove_var("LISTEN_FDNAMES");
    let (Some(pid), Some(count)) = (pid, count) else {
        return Err(InheritError::None);
    };
    if pid != std::process::id() as u64 || count == 0 {
        return Err(InheritError::None);
    }
    if count > MAX_FDS as u64 {
        return Err(InheritError::Variable {
            name: "LISTEN_FDS",
            value: count.to_string(),
        });
    }
    // SAFETY (of `adopt`): the service manager opened descriptors 3 to 3 + LISTEN_FDS - 1 for
    // this process (LISTEN_PID is this process), and nothing in it has taken them: this runs
    // once, at start, and removed the variables above.
    pair_up((FIRST_FD..FIRST_FD + count as RawFd).collect(), true)
}

/// Takes the sockets a replaced skyline handed over through [`UPGRADE_FDS`], which is removed;
/// `Ok(None)` when it is unset. Several sockets may share an address (one per worker of the
/// process that bound them): each comes back as its own pair.
pub fn take_upgrade_fds() -> Result<Option<Vec<ListenPair>>, InheritError> {
    let Ok(value) = std::env::var(UPGRADE_FDS) else {
        return Ok(None);
    };
    std::env::remove_var(UPGRADE_FDS);
    let fds: Result<Vec<RawFd>, _> = value.split(',').map(|fd| fd.trim().parse::<RawFd>()).collect();
    let fds = match fds {
        Ok(fds) if !fds.is_empty() && fds.iter().all(|&fd| fd > 2) => fds,
        _ => {
            return Err(InheritError::Variable {
                name: UPGRADE_FDS,
                value,
            })
        }
    };
    // SAFETY (of `adopt`): the skyline this one replaces left exactly these descriptors open
    // across its exec of this process and named them in the variable, removed above; nothing in
    // this process has taken them, since this runs once, at start.
    pair_up(fds, false).map(Some)
}

/// Takes the HTTP listener a replaced skyline handed over through [`UPGRADE_HTTP_FD`], which is
/// removed; `Ok(None)` when it is unset.
pub fn take_upgrade_http_fd() -> Result<Option<std::net::TcpListener>, InheritError> {
    let Ok(value) = std::env::var(UPGRADE_HTTP_FD) else {
        return Ok(None);
    };
    std::env::remove_var(UPGRADE_HTTP_FD);
    let fd = match value.trim().parse::<RawFd>() {
        Ok(fd) if fd > 2 => fd,
        _ => {
            return Err(InheritError::Variable {
                name: UPGRADE_HTTP_FD,
                value,
            })
        }
    };
    // SAFETY: the skyline this one replaces left this descriptor open across its exec of this
    // process and named it in the variable, removed above; nothing in this process has taken it,
    // since this runs once, at start. The `Socket` becomes its only owner.
    let socket = unsafe { Socket::from_raw_fd(fd) };
    let unusable = |reason: String| InheritError::Unusable { fd, reason };
    if !socket
        .is_listener()
        .map_err(|e| unusable(format!("not a socket ({e})")))?
    {
        return Err(unusable("the HTTP socket is not listening".to_owned()));
    }
    socket
        .set_cloexec(true)
        .and_then(|()| socket.set_nonblocking(true))
        .map_err(|e| unusable(e.to_string()))?;
    Ok(Some(socket.into()))
}

/// Adopts each descriptor as a socket and pairs UDP sockets with TCP listeners by address:
/// `single` allows one pair per address (socket activation), otherwise there may be several.
fn pair_up(fds: Vec<RawFd>, single: bool) -> Result<Vec<ListenPair>, InheritError> {
    type Found = (Vec<std::net::UdpSocket>, Vec<std::net::TcpListener>);
    let mut by_addr: BTreeMap<SocketAddr, Found> = BTreeMap::new();
    for fd in fds {
        // SAFETY: each caller states why its descriptors are open, owned by nothing else in this
        // process, and handed to this function once; the `Socket` becomes their only owner.
        let socket = unsafe { Socket::from_raw_fd(fd) };
        let unusable = |reason: String| InheritError::Unusable { fd, reason };
        let kind = socket.r#type().map_err(|e| unusable(format!("not a socket ({e})")))?;
        let addr = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .ok_or_else(|| unusable("not bound to an IP address".to_owned()))?;
        socket
            .set_cloexec(true)
            .and_then(|()| socket.set_nonblocking(true))
            .map_err(|e| unusable(e.to_string()))?;
        let entry = by_addr.entry(addr).or_default();
        if kind == Type::DGRAM {
            if single && !entry.0.is_empty() {
                return Err(unusable(format!("a second UDP socket for {addr}")));
            }
            entry.0.push(socket.into());
        } else if kind == Type::STREAM {
            if !socket.is_listener().map_err(|e| unusable(e.to_string()))? {
                return Err(unusable("a TCP socket that is not listening".to_owned()));
            }
            if single && !entry.1.is_empty() {
                return Err(unusable(format!("a second TCP listener for {addr}")));
            }
            entry.1.push(socket.into());
        } else {
            return Err(unusable("neither a datagram nor a stream socket".to_owned()));
        }
    }
    let mut pairs = Vec::new();
    for (addr, (udp, tcp)) in by_addr {
        if udp.len() != tcp.len() {
            let (have, missing) = if udp.len() > tcp.len() {
                ("UDP", "TCP")
            } else {
                ("TCP", "UDP")
            };
            return Err(InheritError::Unpaired { addr, have, missing });
        }
        pairs.extend(udp.into_iter().zip(tcp).map(|(udp, tcp)| ListenPair { addr, udp, tcp }));
    }
    Ok(pairs)
}

/// Makes a socket inheritable across `exec` (or not again), for handing it to a new process.
pub fn set_inheritable(socket: std::os::fd::BorrowedFd<'_>, inheritable: bool) -> std::io::Result<()> {
    socket2::SockRef::from(&socket).set_cloexec(!inheritable)
}

/// A numeric environment variable, `None` when unset.
fn variable(name: &'static str) -> Result<Option<u64>, InheritError> {
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| InheritError::Variable { name, value }),
        Err(_) => Ok(None),
    }
}
