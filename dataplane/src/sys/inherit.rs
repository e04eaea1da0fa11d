//! Listening sockets handed to this process when it starts, by a service manager (systemd
//! socket activation: `LISTEN_PID`, `LISTEN_FDS`, descriptors from 3 on), instead of bound by
//! it. The sockets then outlive the process: a restart queues queries instead of refusing them.

use socket2::{Socket, Type};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, RawFd};

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
    /// An address has a UDP socket and no TCP listener, or the other way round.
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
    let mut by_addr: BTreeMap<SocketAddr, (Option<std::net::UdpSocket>, Option<std::net::TcpListener>)> =
        BTreeMap::new();
    for fd in FIRST_FD..FIRST_FD + count as RawFd {
        // SAFETY: the service manager opened descriptors 3 to 3 + LISTEN_FDS - 1 for this process
        // (LISTEN_PID is this process), and nothing in it has taken them: this function runs once,
        // at start, and removed the variables above. The `Socket` becomes their only owner.
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
            if entry.0.replace(socket.into()).is_some() {
                return Err(unusable(format!("a second UDP socket for {addr}")));
            }
        } else if kind == Type::STREAM {
            if !socket.is_listener().map_err(|e| unusable(e.to_string()))? {
                return Err(unusable("a TCP socket that is not listening".to_owned()));
            }
            if entry.1.replace(socket.into()).is_some() {
                return Err(unusable(format!("a second TCP listener for {addr}")));
            }
        } else {
            return Err(unusable("neither a datagram nor a stream socket".to_owned()));
        }
    }
    by_addr
        .into_iter()
        .map(|(addr, pair)| match pair {
            (Some(udp), Some(tcp)) => Ok(ListenPair { addr, udp, tcp }),
            (Some(_), None) => Err(InheritError::Unpaired {
                addr,
                have: "UDP",
                missing: "TCP",
            }),
            (None, _) => Err(InheritError::Unpaired {
                addr,
                have: "TCP",
                missing: "UDP",
            }),
        })
        .collect()
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
