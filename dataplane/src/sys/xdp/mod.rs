//! XDP: a small BPF program on a network interface that hands DNS queries to AF_XDP sockets
//! before the kernel's network stack sees them, and leaves every other packet to the kernel.
//!
//! skyline loads and attaches the program itself, with the `bpf(2)` system call and
//! instructions written in Rust (`bpf.rs`, `program.rs`), so that building it needs neither a C
//! compiler nor LLVM nor libbpf. The program is attached as a BPF link, which the kernel
//! detaches when its last descriptor closes: when [`Program`] is dropped or the process ends in
//! any way, SIGKILL included, no program is left behind steering packets to sockets that are
//! gone. `interface.rs` reads what the sockets need to know about the interface.
//!
//! `socket.rs` owns one AF_XDP socket per receive queue, its UMEM and its rings; `ring.rs` is
//! the shared-memory ring protocol they speak with the kernel. `handover.rs` is what an
//! in-place upgrade passes to the new process so that it takes the sockets over.

mod bpf;
mod handover;
mod interface;
mod program;
mod ring;
mod socket;

pub use handover::{encode, take_handover, HandedQueue, Handover, HandoverError, QueueFds, UPGRADE_XDP};
pub use interface::Interface;
pub use program::{Mode, Program, UnknownMode};
pub use socket::{kernel_counts, Counts, KernelCounts, Local, SocketConfig, SocketError, XdpSocket};

use std::io;
use std::net::SocketAddr;

/// Why XDP could not be set up: each variant names the cause for the operator.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// The process lacks the capabilities XDP needs.
    #[error("{what} was refused: XDP needs CAP_NET_ADMIN and CAP_BPF (or CAP_SYS_ADMIN)")]
    NoPermission {
        /// The step that was refused.
        what: &'static str,
    },
    /// No interface has this name (in this process's network namespace).
    #[error("no network interface is named {name:?}")]
    UnknownInterface {
        /// The name asked for.
        name: String,
    },
    /// The interface's driver cannot run XDP in this mode; generic mode works on any interface.
    #[error("{iface} does not support XDP in {mode} mode")]
    ModeUnsupported {
        /// The interface.
        iface: String,
        /// The mode asked for.
        mode: Mode,
    },
    /// Another XDP program is attached to the interface (or one in the other mode), which the
    /// kernel will not replace with this one.
    #[error(
        "{iface} already has an XDP program attached ({source}); another skyline may be running, \
         or `ip link set dev {iface} xdp off` removes a stale one"
    )]
    Busy {
        /// The interface.
        iface: String,
        /// The kernel's refusal.
        source: io::Error,
    },
    /// No interface holds the address.
    #[error("no network interface has the address {addr}")]
    NotLocal {
        /// The address.
        addr: std::net::IpAddr,
    },
    /// The address cannot be steered to: the program matches one unicast address and port.
    #[error("cannot steer packets to {addr}: {reason}")]
    BadAddress {
        /// The address.
        addr: SocketAddr,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A receive queue the interface does not have.
    #[error("{iface} has {queues} receive queues; there is no queue {queue}")]
    NoSuchQueue {
        /// The interface.
        iface: String,
        /// The queue asked for.
        queue: u32,
        /// How many it has.
        queues: u32,
    },
    /// The verifier rejected the program.
    #[error("the kernel rejected the XDP program:\n{log}")]
    Load {
        /// The verifier's log.
        log: String,
    },
    /// Any other refusal by the system.
    #[error("{what}: {source}")]
    Os {
        /// The step that failed.
        what: &'static str,
        /// The system's error.
        source: io::Error,
    },
}
