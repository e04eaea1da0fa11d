//! Service-manager notifications (systemd's `sd_notify` protocol): one datagram of `KEY=value`
//! lines to the unix socket named by `NOTIFY_SOCKET`, so that a `Type=notify` unit knows when
//! skyline serves, reloads and stops. Without `NOTIFY_SOCKET` nothing is sent.

use std::os::unix::net::UnixDatagram;

/// The variable naming the socket where a process started by an in-place upgrade says that it
/// serves, to the process it replaces.
pub const UPGRADE_READY: &str = "SKYLINE_UPGRADE_READY";

/// Where notifications go, read once at start.
#[derive(Debug)]
pub struct Notifier {
    target: Option<String>,
    upgrade: Option<String>,
}

impl Notifier {
    /// The notifier of this process: `NOTIFY_SOCKET` (and [`UPGRADE_READY`]) are read and
    /// removed, so that no process started from this one notifies in its name by accident.
    pub fn from_environment() -> Notifier {
        let read = |name| std::env::var(name).ok().filter(|t: &String| !t.is_empty());
        let notifier = Notifier {
            target: read("NOTIFY_SOCKET"),
            upgrade: read(UPGRADE_READY),
        };
        std::env::remove_var("NOTIFY_SOCKET");
        std::env::remove_var(UPGRADE_READY);
        notifier
    }

    /// The service manager's socket, to hand to the process that replaces this one.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// Serving: every listener is open and the data loaded as far as a start waits for it. The
    /// process this one replaces, if any, is told too.
    pub fn ready(&self) {
        self.send("READY=1\nSTATUS=serving");
        if let Some(upgrade) = &self.upgrade {
            if let Err(e) = send_to(upgrade, "READY=1") {
                tracing::warn!(error = %e, "telling the replaced process that this one serves failed");
            }
        }
    }

    /// A new process now serves in this one's place: the service manager follows it.
    pub fn main_pid(&self, pid: u32) {
        self.send(&format!("MAINPID={pid}\nSTATUS=upgraded"));
    }

    /// A reload has begun; [`Notifier::ready`] ends it.
    pub fn reloading(&self) {
        let now = skyline_dataplane::sys::monotonic_usec();
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={now}\nSTATUS=reloading"));
    }

    /// Draining before the exit.
    pub fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=draining");
    }

    fn send(&self, state: &str) {
        let Some(target) = &self.target else {
            return;
        };
        if let Err(e) = send_to(target, state) {
            tracing::warn!(error = %e, socket = %target, "notifying the service manager failed");
        }
    }
}

/// One datagram to a path, or to an abstract socket when the name starts with `@`.
fn send_to(target: &str, state: &str) -> std::io::Result<()> {
    let socket = UnixDatagram::unbound()?;
    match target.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
            socket.send_to_addr(state.as_bytes(), &addr)?;
        }
        None => {
            socket.send_to(state.as_bytes(), target)?;
        }
    }
    Ok(())
}
