//! Service-manager notifications (systemd's `sd_notify` protocol): one datagram of `KEY=value`
//! lines to the unix socket named by `NOTIFY_SOCKET`, so that a `Type=notify` unit knows when
//! skyline serves, reloads and stops. Without `NOTIFY_SOCKET` nothing is sent.

use std::os::unix::net::UnixDatagram;

/// Where notifications go, read once at start.
#[derive(Debug)]
pub struct Notifier {
    target: Option<String>,
}

impl Notifier {
    /// The notifier of this process: `NOTIFY_SOCKET` is read and removed, so that no process
    /// started from this one notifies in its name.
    pub fn from_environment() -> Notifier {
        let target = std::env::var("NOTIFY_SOCKET").ok().filter(|t| !t.is_empty());
        std::env::remove_var("NOTIFY_SOCKET");
        Notifier { target }
    }

    /// Serving: every listener is open and the data loaded as far as a start waits for it.
    pub fn ready(&self) {
        self.send("READY=1\nSTATUS=serving");
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
