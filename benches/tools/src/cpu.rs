//! CPU time of a process from `/proc/PID/stat`: the same figure the harness reads for the
//! servers, so client and server costs per query are measured alike.

use std::time::Duration;

/// Clock ticks per second of `/proc` times (`USER_HZ`), fixed at 100 by the Linux ABI on the
/// architectures this runs on.
pub const TICKS_PER_SECOND: u64 = 100;

/// User plus system time from the text of a `/proc/PID/stat` file. The command name (field 2)
/// may hold spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state (3), ppid, pgrp, session, tty_nr, tpgid, flags, minflt, cminflt,
    // majflt, cmajflt, utime (14), stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let ticks = utime + stime;
    Some(Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND))
}

/// CPU time this process has used so far, or `None` where `/proc` is not available.
pub fn own() -> Option<Duration> {
    parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_system_ticks_are_added() {
        let stat = "42 (a) b) R 1 42 42 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_stat(stat), Some(Duration::from_secs(3)));
    }

    #[test]
    fn a_truncated_line_reads_as_none() {
        assert_eq!(parse_stat("42 (x) R 1 2"), None);
        assert_eq!(parse_stat("no name"), None);
    }

    #[test]
    fn this_process_has_a_cpu_time() {
        if cfg!(target_os = "linux") {
            assert!(own().is_some());
        }
    }
}
