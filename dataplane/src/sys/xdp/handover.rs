//! What one skyline hands the skyline replacing it in an in-place upgrade so that AF_XDP goes
//! on without a gap: the BPF link that keeps the program attached, the XSKMAP, and for every
//! receive queue its AF_XDP socket, the memory file of its UMEM and the read end of a pipe
//! whose write end the old process closes once it no longer touches the socket's rings.
//!
//! The sockets themselves change hands, not only their map entries: the kernel binds one
//! UMEM to a receive queue, so a second socket on the queue is refused (`EBUSY`) unless it
//! shares the first one's fill and completion rings, which two processes cannot produce into
//! at once. The new process maps the same UMEM (a memory file, not anonymous memory) and the
//! same rings, and waits for the pipe to close before it reads them; meanwhile the kernel goes
//! on putting queries into the receive ring, where the new process finds them.

use super::{Interface, Mode};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

pub use crate::sys::UPGRADE_XDP;

/// One receive queue's part of a handover.
#[derive(Debug)]
pub struct HandedQueue {
    /// The receive queue the socket is bound to.
    pub queue: u32,
    /// The AF_XDP socket.
    pub socket: OwnedFd,
    /// The memory file of its UMEM.
    pub umem: OwnedFd,
    /// The read end of the pipe the old process closes once it has let go of the rings.
    pub released: OwnedFd,
}

/// An AF_XDP attachment handed over by the process this one replaces.
#[derive(Debug)]
pub struct Handover {
    /// The interface's name, as the old process was given it.
    pub iface: String,
    /// Its index.
    pub ifindex: u32,
    /// The mode the program is attached in.
    pub mode: Mode,
    /// The address and port the program steers.
    pub addr: SocketAddr,
    /// The BPF link: the program stays attached while any process holds it.
    pub link: OwnedFd,
    /// The XSKMAP.
    pub map: OwnedFd,
    /// How many of each UMEM's frames receive queries; `None` from a skyline that split them in
    /// halves and did not say so.
    pub receive_frames: Option<u32>,
    /// Every queue served, in order.
    pub queues: Vec<HandedQueue>,
}

/// The descriptors of one queue to hand over, borrowed from the process that owns them.
#[derive(Debug, Clone, Copy)]
pub struct QueueFds<'a> {
    /// The receive queue.
    pub queue: u32,
    /// The AF_XDP socket.
    pub socket: BorrowedFd<'a>,
    /// The memory file of its UMEM.
    pub umem: BorrowedFd<'a>,
    /// The read end of its release pipe.
    pub released: BorrowedFd<'a>,
}

/// Why a handed-over attachment cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    /// The variable is not what a skyline writes.
    #[error("{UPGRADE_XDP}={value:?} is not an AF_XDP handover: {reason}")]
    Malformed {
        /// The variable's value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Writes the variable's value for the attachment on `iface` in `mode` steering `addr`, whose
/// link, map and queues' descriptors the new process inherits under the same numbers, and whose
/// UMEMs have `receive_frames` frames each for queries.
pub fn encode(
    iface: &Interface,
    mode: Mode,
    addr: SocketAddr,
    link: BorrowedFd<'_>,
    map: BorrowedFd<'_>,
    receive_frames: u32,
    queues: &[QueueFds<'_>],
) -> String {
    let mut words = vec![
        format!("iface={}", iface.name),
        format!("ifindex={}", iface.index),
        format!("mode={mode}"),
        format!("addr={addr}"),
        format!("link={}", link.as_raw_fd()),
        format!("map={}", map.as_raw_fd()),
        format!("receive={receive_frames}"),
    ];
    for q in queues {
        words.push(format!(
            "queue={}/{}/{}/{}",
            q.queue,
            q.socket.as_raw_fd(),
            q.umem.as_raw_fd(),
            q.released.as_raw_fd()
        ));
    }
    words.join(" ")
}

/// Takes the attachment a replaced skyline handed over through [`UPGRADE_XDP`], which is
/// removed; `Ok(None)` when it is unset. Call once, at start, before other threads exist.
pub fn take_handover() -> Result<Option<Handover>, HandoverError> {
    let Ok(value) = std::env::var(UPGRADE_XDP) else {
        return Ok(None);
    };
    std::env::remove_var(UPGRADE_XDP);
    let malformed = |reason| HandoverError::Malformed {
        value: value.clone(),
        reason,
    };
    let (mut iface, mut ifindex, mut mode, mut addr, mut link, mut map) = (None, None, None, None, None, None);
    let mut receive_frames = None;
    let mut queues = Vec::new();
    for word in value.split_whitespace() {
        let (key, val) = word.split_once('=').ok_or_else(|| malformed("a word without '='"))?;
        match key {
            "iface" => iface = Some(val.to_owned()),
            "ifindex" => ifindex = Some(val.parse().map_err(|_| malformed("ifindex is not a number"))?),
            "mode" => mode = Some(val.parse::<Mode>().map_err(|_| malformed("unknown mode"))?),
            "addr" => addr = Some(val.parse().map_err(|_| malformed("addr is not an address and port"))?),
            "link" => link = Some(descriptor(val).ok_or_else(|| malformed("link is not a descriptor"))?),
            "map" => map = Some(descriptor(val).ok_or_else(|| malformed("map is not a descriptor"))?),
            "receive" => receive_frames = Some(val.parse().map_err(|_| malformed("receive is not a number"))?),
            "queue" => {
                let parts: Vec<&str> = val.split('/').collect();
                let [queue, socket, umem, released] = parts[..] else {
                    return Err(malformed("a queue is queue/socket/umem/pipe"));
                };
                let fds = [socket, umem, released].map(descriptor);
                let [Some(socket), Some(umem), Some(released)] = fds else {
                    return Err(malformed("a queue's descriptor is not one"));
                };
                let queue = queue.parse().map_err(|_| malformed("a queue is not a number"))?;
                queues.push((queue, socket, umem, released));
            }
            _ => return Err(malformed("an unknown key")),
        }
    }
    let (Some(iface), Some(ifindex), Some(mode), Some(addr), Some(link), Some(map)) =
        (iface, ifindex, mode, addr, link, map)
    else {
        return Err(malformed("a key is missing"));
    };
    if queues.is_empty() {
        return Err(malformed("no queue"));
    }
    // SAFETY (of every `adopt` below): the skyline this one replaces left exactly these
    // descriptors open across its exec of this process and named them in the variable,
    // removed above; nothing in this process has taken them, since this runs once, at start,
    // and each number is taken once (checked by `adopt`).
    let mut taken = Vec::new();
    let mut adopt = |fd: RawFd| -> Result<OwnedFd, HandoverError> {
        if taken.contains(&fd) {
            return Err(malformed("a descriptor named twice"));
        }
        taken.push(fd);
        // SAFETY: see above.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let link = adopt(link)?;
    let map = adopt(map)?;
    let mut handed = Vec::with_capacity(queues.len());
    for (queue, socket, umem, released) in queues {
        handed.push(HandedQueue {
            queue,
            socket: adopt(socket)?,
            umem: adopt(umem)?,
            released: adopt(released)?,
        });
    }
    for fd in [&link, &map]
        .into_iter()
        .chain(handed.iter().flat_map(|q| [&q.socket, &q.umem, &q.released]))
    {
        socket2::SockRef::from(fd)
            .set_cloexec(true)
            .map_err(|_| malformed("a descriptor is not open"))?;
    }
    Ok(Some(Handover {
        iface,
        ifindex,
        mode,
        addr,
        link,
        map,
        receive_frames,
        queues: handed,
    }))
}

/// A descriptor number above the standard three.
fn descriptor(text: &str) -> Option<RawFd> {
    text.parse().ok().filter(|&fd| fd > 2)
}
