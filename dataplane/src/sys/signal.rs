//! Sending a signal to another process. The server itself sends none, and only asks whether
//! the process a PID file names still exists; the workspace's tests send them (they ask a
//! running skyline to reload, pause and resume an upstream), and the project keeps `unsafe`
//! code in this module only, so the one system call they need lives here rather than in each
//! test, or behind the `kill` program, which a minimal system may not have.

use std::fmt;
use std::io;

/// The signals [`send_signal`] sends: the few a process is asked to reload, pause, resume or
/// stop with. An enum rather than a raw number, so that a caller cannot send signal 0 or a
/// real-time signal by mistake, and each name maps to the platform's own number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// SIGHUP: skyline reloads its records file.
    Hangup,
    /// SIGSTOP: the process stops running until [`Signal::Continue`]; it cannot catch or
    /// ignore this, so it keeps its sockets open and answers nothing.
    Stop,
    /// SIGCONT: a stopped process runs again.
    Continue,
    /// SIGTERM: the process is asked to exit.
    Terminate,
    /// SIGKILL: the process ends at once; it cannot catch this.
    Kill,
    /// SIGUSR2: skyline upgrades in place.
    User2,
}

impl Signal {
    /// The platform's number for this signal.
    pub fn number(self) -> libc::c_int {
        match self {
            Signal::Hangup => libc::SIGHUP,
            Signal::Stop => libc::SIGSTOP,
            Signal::Continue => libc::SIGCONT,
            Signal::Terminate => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
            Signal::User2 => libc::SIGUSR2,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Hangup => "SIGHUP",
            Signal::Stop => "SIGSTOP",
            Signal::Continue => "SIGCONT",
            Signal::Terminate => "SIGTERM",
            Signal::Kill => "SIGKILL",
            Signal::User2 => "SIGUSR2",
        })
    }
}

/// Sends `signal` to the process `pid` (as `kill(2)` does; the caller's own PID is allowed).
///
/// Fails with the system's error when there is no such process (`ESRCH`) or the caller may not
/// signal it (`EPERM`), and with [`io::ErrorKind::InvalidInput`] for PID 0 and PIDs beyond
/// `i32::MAX`: to `kill(2)` those mean a process group or every process the caller may signal,
/// never one process.
pub fn send_signal(pid: u32, signal: Signal) -> io::Result<()> {
    let target = match libc::pid_t::try_from(pid) {
        Ok(target) if target > 0 => target,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{pid} is not the ID of one process"),
            ))
        }
    };
    // SAFETY: `kill` takes plain integers and touches no memory of this process; `target` is
    // positive, so it names one process and never a group or every process.
    if unsafe { libc::kill(target, signal.number()) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a process with ID `pid` exists (as `kill(2)` with signal 0 tells): for a PID file,
/// whose process may have ended without removing it. A process this one may not signal
/// exists all the same. PID 0 and PIDs beyond `i32::MAX` name no one process: `false`.
pub fn process_exists(pid: u32) -> bool {
    let Ok(target) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if target <= 0 {
        return false;
    }
    // SAFETY: `kill` takes plain integers and touches no memory of this process; `target` is
    // positive, so it names one process, and signal 0 only checks that it may be signalled.
    if unsafe { libc::kill(target, 0) } == 0 {
        return true;
    }
    io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// Set in the environment of the child process the tests below signal.
    const CHILD_ROLE: &str = "SKYLINE_SIGNAL_TEST_CHILD";

    /// Not a test of its own: run by [`Target`] in a copy of this test binary, it waits until
    /// its standard input closes, which gives the tests a process to signal that needs no
    /// program from outside the build. Run as an ordinary test it returns at once.
    #[test]
    fn signal_test_child() {
        if std::env::var_os(CHILD_ROLE).is_some() {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        }
    }

    /// A copy of this test binary running only [`signal_test_child`], waiting on its stdin;
    /// killed on drop, so that a failed test leaves no stopped process behind.
    struct Target(Child);

    impl Target {
        fn start() -> Target {
            let child = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "sys::signal::tests::signal_test_child", "--test-threads=1"])
                .env(CHILD_ROLE, "1")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            Target(child)
        }

        fn pid(&self) -> u32 {
            self.0.id()
        }

        /// How the process ended.
        fn wait(&mut self) -> std::process::ExitStatus {
            self.0.wait().unwrap()
        }
    }

    impl Drop for Target {
        fn drop(&mut self) {
            // Reported, not unwrapped: a panic here, while a failed test unwinds, would abort
            // the whole test binary.
            let pid = self.0.id();
            if let Err(e) = self.0.kill() {
                eprintln!("killing the signal test's child {pid} failed: {e}");
            }
            if let Err(e) = self.0.wait() {
                eprintln!("reaping the signal test's child {pid} failed: {e}");
            }
        }
    }

    /// The state letter of `/proc/PID/stat` (`T` when stopped), polled until `want` says yes.
    #[cfg(target_os = "linux")]
    fn wait_for_state(pid: u32, want: impl Fn(char) -> bool) -> char {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            // The command name in parentheses may hold spaces; the state follows it.
            let state = stat[stat.rfind(')').unwrap() + 1..]
                .trim_start()
                .chars()
                .next()
                .unwrap();
            if want(state) || Instant::now() >= deadline {
                return state;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_is_stopped_and_continued() {
        let mut child = Target::start();
        let pid = child.pid();
        send_signal(pid, Signal::Stop).unwrap();
        assert_eq!(wait_for_state(pid, |s| s == 'T'), 'T', "stopped by SIGSTOP");
        send_signal(pid, Signal::Continue).unwrap();
        assert_ne!(wait_for_state(pid, |s| s != 'T'), 'T', "running again after SIGCONT");
        send_signal(pid, Signal::Kill).unwrap();
        assert_eq!(child.wait().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn each_signal_reaches_the_child_as_itself() {
        for signal in [Signal::Hangup, Signal::Terminate, Signal::Kill] {
            let mut child = Target::start();
            send_signal(child.pid(), signal).unwrap();
            let status = child.wait();
            assert_eq!(status.signal(), Some(signal.number()), "{signal} ended the child");
        }
    }

    #[test]
    fn no_such_process_is_an_error() {
        // Beyond any PID the kernel hands out (Linux stops at 2^22).
        let err = send_signal(i32::MAX as u32, Signal::Continue).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH), "{err}");
    }

    #[test]
    fn process_groups_are_not_addressed() {
        for pid in [0, u32::MAX, i32::MAX as u32 + 1] {
            let err = send_signal(pid, Signal::Continue).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "pid {pid}");
        }
    }

    #[test]
    fn a_process_exists_until_it_is_reaped() {
        assert!(process_exists(std::process::id()));
        let mut child = Target::start();
        let pid = child.pid();
        assert!(process_exists(pid));
        send_signal(pid, Signal::Kill).unwrap();
        child.wait();
        assert!(!process_exists(pid), "a reaped child is gone");
        for pid in [0, u32::MAX, i32::MAX as u32] {
            assert!(!process_exists(pid), "pid {pid}");
        }
    }

    #[test]
    fn the_own_process_can_be_signalled() {
        // SIGCONT to a running process changes nothing, and its default action is to continue.
        send_signal(std::process::id(), Signal::Continue).unwrap();
    }
}
