//! The standard `process_*` metrics of Prometheus client libraries, and the build's version,
//! read from `/proc/self` when scraped: what dashboards and alerts for any exporter expect.

use std::fmt::{self, Display, Formatter};

/// Clock ticks per second of the CPU times in `/proc/<pid>/stat` (`USER_HZ`, 100 on every Linux
/// architecture's user-space ABI).
const TICKS_PER_SECOND: f64 = 100.0;

/// The process, read now; a field the system does not give is left out of the exposition.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Process {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<u64>,
    virtual_bytes: Option<u64>,
    open_fds: Option<u64>,
    max_fds: Option<u64>,
    start_time_seconds: Option<f64>,
}

impl Process {
    /// Reads `/proc/self`; everywhere else, nothing.
    pub fn read() -> Process {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        let boot = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        // The fields after the command name, which is in parentheses and may hold anything.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
        let kilobytes = |key: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(key))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
                .map(|kb| kb * 1024)
        };
        let boot_time = boot
            .lines()
            .find_map(|line| line.strip_prefix("btime "))
            .and_then(|t| t.trim().parse::<u64>().ok());
        Process {
            cpu_seconds: field(14)
                .zip(field(15))
                .map(|(user, system)| (user + system) as f64 / TICKS_PER_SECOND),
            resident_bytes: kilobytes("VmRSS:"),
            virtual_bytes: kilobytes("VmSize:"),
            open_fds: std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64),
            max_fds: limits
                .lines()
                .find_map(|line| line.strip_prefix("Max open files"))
                .and_then(|rest| rest.split_whitespace().next()?.parse().ok()),
            start_time_seconds: boot_time
                .zip(field(22))
                .map(|(boot, ticks)| boot as f64 + ticks as f64 / TICKS_PER_SECOND),
        }
    }
}

/// The process's families and `coredns_build_info`, in the text format.
impl Display for Process {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut family = |name: &str, kind: &str, help: &str, value: Option<String>| -> fmt::Result {
            match value {
                Some(value) => write!(f, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"),
                None => Ok(()),
            }
        };
        family(
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            self.cpu_seconds.map(|v| v.to_string()),
        )?;
        family(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            self.resident_bytes.map(|v| v.to_string()),
        )?;
        family(
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            self.virtual_bytes.map(|v| v.to_string()),
        )?;
        family(
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            self.open_fds.map(|v| v.to_string()),
        )?;
        family(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            self.max_fds.map(|v| v.to_string()),
        )?;
        family(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            self.start_time_seconds.map(|v| v.to_string()),
        )?;
        write!(
            f,
            "# HELP coredns_build_info The version this server was built from.\n# TYPE coredns_build_info gauge\ncoredns_build_info{{version=\"{}\",revision=\"\",goversion=\"\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_from_proc() {
        let p = Process::read();
        assert!(p.resident_bytes.is_some_and(|b| b > 1 << 20), "{p:?}");
        assert!(p.virtual_bytes >= p.resident_bytes);
        assert!(
            p.open_fds.is_some_and(|n| n >= 3) && p.max_fds.is_some_and(|n| n >= 64),
            "{p:?}"
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = p.start_time_seconds.unwrap();
        assert!(
            started <= now + 1.0 && started > now - 86_400.0 * 365.0,
            "{started} vs {now}"
        );
        assert!(p.cpu_seconds.is_some_and(|s| s >= 0.0));
        let text = p.to_string();
        assert!(text.contains("\nprocess_resident_memory_bytes "), "{text}");
        assert!(text.contains("coredns_build_info{version=\""), "{text}");
    }
}
