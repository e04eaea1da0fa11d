//! In-place upgrade (SIGUSR2): this process starts the binary at the path it was started from,
//! with the same arguments and environment, and hands it every listening socket (UDP, TCP, and
//! the HTTP listener) as open descriptors, so that no socket ever closes and no datagram queued
//! in one is lost. With `--xdp` it hands over the AF_XDP attachment too: the program's link and
//! map, and each queue's socket with its UMEM, which the new process reads once this one has
//! let go of them (`docs/xdp.md`). The new process says it serves through a notification socket of its own
//! ([`UPGRADE_READY`]); only then does this one drain and exit. A new process that exits, or
//! says nothing within [`READY_WAIT`], is stopped, and this one keeps serving.
//!
//! The PID file (`--pid-file`) names the serving process: each writes it once it serves, and a
//! process removes it on exit only while it still names that process. A start refuses a PID
//! file that names another running process, unless that process is the one upgrading to it.

use crate::notify::UPGRADE_READY;
use skyline_dataplane::sys::{self, UPGRADE_FDS, UPGRADE_HTTP_FD, UPGRADE_XDP};
use skyline_dataplane::worker::Server;
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;
use tokio::net::UnixDatagram;

/// How long a new process may take to say it serves before the upgrade is given up.
pub const READY_WAIT: Duration = Duration::from_secs(15);
/// How often the new process is looked at while it starts.
const POLL: Duration = Duration::from_millis(50);

/// Why an upgrade did not happen; the old process keeps serving in every case.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The notification socket or the new process could not be set up.
    #[error("cannot start {path}: {source}")]
    Start {
        /// The binary.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The new process exited before it served.
    #[error("the new process exited before serving ({status}); its log says why")]
    Exited {
        /// How it exited.
        status: ExitStatus,
    },
    /// The new process did not say it serves in time; it was stopped.
    #[error("the new process did not serve within {} ms; it was stopped", .0.as_millis())]
    NotReady(Duration),
}

/// What starting this process again takes: the binary's path and the arguments.
#[derive(Debug, Clone)]
pub struct Restart {
    exe: PathBuf,
    args: Vec<OsString>,
}

impl Restart {
    /// This process's binary (resolved now, so that a binary replaced at the same path later is
    /// the one started) and its arguments.
    pub fn of_this_process() -> std::io::Result<Restart> {
        Ok(Restart {
            exe: std::env::current_exe()?,
            args: std::env::args_os().skip(1).collect(),
        })
    }

    /// The binary an upgrade starts.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// Starts the new process with the sockets of `server` (and `http`), waits until it serves
    /// and returns its PID. `notify_socket` is the service manager's, passed on to it.
    pub async fn upgrade(
        &self,
        server: &Server,
        http: Option<&OwnedFd>,
        notify_socket: Option<&str>,
    ) -> Result<u32, UpgradeError> {
        let start = |source| UpgradeError::Start {
            path: self.exe.clone(),
            source,
        };
        let ready_path = std::env::temp_dir().join(format!("skyline-upgrade-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&ready_path);
        let ready = UnixDatagram::bind(&ready_path).map_err(start)?;
        let result = self
            .start_and_wait(server, http, notify_socket, &ready, &ready_path)
            .await;
        let _ = std::fs::remove_file(&ready_path);
        result
    }

    async fn start_and_wait(
        &self,
        server: &Server,
        http: Option<&OwnedFd>,
        notify_socket: Option<&str>,
        ready: &UnixDatagram,
        ready_path: &Path,
    ) -> Result<u32, UpgradeError> {
        let start = |source| UpgradeError::Start {
            path: self.exe.clone(),
            source,
        };
        let mut command = Command::new(&self.exe);
        command.args(&self.args).env(UPGRADE_READY, ready_path);
        match notify_socket {
            Some(socket) => command.env("NOTIFY_SOCKET", socket),
            None => command.env_remove("NOTIFY_SOCKET"),
        };
        command.env_remove(UPGRADE_XDP);
        let spawned = inheriting(server, http, |fds, http_fd, xdp| {
            command.env(UPGRADE_FDS, fds);
            if let Some(fd) = http_fd {
                command.env(UPGRADE_HTTP_FD, fd.to_string());
            }
            if let Some(xdp) = xdp {
                command.env(UPGRADE_XDP, xdp);
            }
            command.spawn()
        });
        let mut child = spawned.map_err(start)?;
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        let mut buf = [0u8; 512];
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(UpgradeError::Exited { status });
            }
            if tokio::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(UpgradeError::NotReady(READY_WAIT));
            }
            if let Ok(Ok(n)) = tokio::time::timeout(POLL, ready.recv(&mut buf)).await {
                if String::from_utf8_lossy(&buf[..n]).lines().any(|line| line == "READY=1") {
                    return Ok(child.id());
                }
            }
        }
    }
}

/// Runs `spawn` with every listening socket inheritable (their descriptors, comma-separated,
/// the HTTP listener's, and the AF_XDP attachment's as [`UPGRADE_XDP`] says them), and makes
/// them close-on-exec again afterwards whatever happened.
fn inheriting<T>(
    server: &Server,
    http: Option<&OwnedFd>,
    spawn: impl FnOnce(String, Option<i32>, Option<String>) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let result = (|| {
        let fds = server.set_handover_inheritable(true)?;
        if let Some(http) = http {
            sys::set_inheritable(http.as_fd(), true)?;
        }
        let xdp = server.set_xdp_handover_inheritable(true)?;
        let list = fds.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        spawn(list, http.map(|fd| fd.as_raw_fd()), xdp)
    })();
    if let Err(e) = server.set_handover_inheritable(false) {
        tracing::warn!(error = %e, "making the listening sockets close-on-exec again failed");
    }
    if let Err(e) = server.set_xdp_handover_inheritable(false) {
        tracing::warn!(error = %e, "making the AF_XDP descriptors close-on-exec again failed");
    }
    if let Some(http) = http {
        let _ = sys::set_inheritable(http.as_fd(), false);
    }
    result
}

/// Why the PID file cannot be this process's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PidFileError {
    /// The file names another process that is running: most likely a skyline serving with the
    /// same configuration, which a second one would share the port with or take the file from.
    #[error(
        "PID file {path} names process {pid}, which is running: another skyline serves with this \
         PID file (if that process is not skyline, remove the file)"
    )]
    Held {
        /// The file.
        path: PathBuf,
        /// The process it names.
        pid: u32,
    },
    /// The file cannot be read or written.
    #[error("PID file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Checks, before anything is bound, that the PID file at `path` names no other running
/// process, and leaves the file as it is: it is written once this process serves
/// ([`write_pid_file`]). A file naming a process that no longer exists (it was killed, or the
/// machine restarted) is stale and will be replaced, as is one that does not hold a PID.
/// `upgrading_from` is the process an in-place upgrade started this one from, which still
/// serves and names itself in the file until this one takes over.
pub fn claim_pid_file(path: &Path, upgrading_from: Option<u32>) -> Result<(), PidFileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(PidFileError::Io {
                path: path.to_owned(),
                source,
            })
        }
    };
    let Ok(pid) = text.trim().parse::<u32>() else {
        tracing::warn!(path = %path.display(), "the PID file holds no PID; it will be replaced");
        return Ok(());
    };
    // The own PID: a container's skyline is PID 1 again after a restart.
    if pid == std::process::id() || Some(pid) == upgrading_from {
        return Ok(());
    }
    if sys::process_exists(pid) {
        return Err(PidFileError::Held {
            path: path.to_owned(),
            pid,
        });
    }
    tracing::info!(path = %path.display(), pid, "the PID file names a process that is gone; it will be replaced");
    Ok(())
}

/// Writes this process's PID to `path`, atomically (a file beside it, renamed over it).
pub fn write_pid_file(path: &Path) -> Result<(), PidFileError> {
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!(".{}", std::process::id()));
    std::fs::write(&aside, format!("{}\n", std::process::id()))
        .and_then(|()| std::fs::rename(&aside, path))
        .map_err(|source| PidFileError::Io {
            path: path.to_owned(),
            source,
        })
}

/// Removes the PID file when it still names this process (a new process rewrote it otherwise).
pub fn remove_pid_file(path: &Path) {
    let ours = std::fs::read_to_string(path).is_ok_and(|text| text.trim() == std::process::id().to_string());
    if ours {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(error = %e, path = %path.display(), "removing the PID file failed");
        }
    }
}
