//! The persisted snapshot (`--state-dir`): the last complete data of the etcd and Kubernetes
//! sources, kept on disk so that a skyline started while its source is unreachable answers from
//! it, marked stale, instead of SERVFAIL until the source answers.
//!
//! - **What is written.** One file per source in the state directory, `etcd.state` and
//!   `kubernetes.state` (`format.rs`): a magic string, a format version, a SHA-256 checksum, then
//!   a header naming the source, its identity (etcd's endpoints and path prefix; the API server
//!   and the cluster zones) and when the data was current, then the data as JSON (`etcd.rs`,
//!   `kubernetes.rs`). Only complete data is written: after a full read or list and the watch
//!   events applied since, never what a start read back from the file.
//! - **When.** A change marks the data dirty; the source hands it to a write on the blocking
//!   pool at most every [`WRITE_INTERVAL`] (longer when a write takes long), and writes it again
//!   every [`REFRESH`] while it follows its source, so that the file's time says until when the
//!   data was known current even when nothing changes (`persist.rs`).
//! - **How.** Into a temporary file in the same directory, synced, renamed over the old one,
//!   and the directory synced (`file.rs`): a crash leaves the old file or the new one, never a
//!   mix.
//! - **Reading back.** Only when the source cannot be reached at start. A file that is missing,
//!   corrupt, of another format version, written for another cluster or prefix, or older than
//!   the maximum age (`--state-max-age`, [`DEFAULT_MAX_AGE`]) is ignored with one log line
//!   saying which and why; the zones then answer SERVFAIL as without a state directory. Data
//!   read back is served as stale ([`StateHealth`]: `/ready` says so, and a metric) until the
//!   source's own data replaces it.

pub(crate) mod etcd;
mod file;
mod format;
mod health;
pub(crate) mod kubernetes;
mod persist;

pub use format::StateError;
pub use health::StateHealth;
pub(crate) use persist::{due, Persist};

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How old a persisted snapshot may be and still be served: older data would more likely
/// mislead clients than help them. The file is rewritten every [`REFRESH`] while its source is
/// followed, so its age is how long the source has been out of reach, give or take that.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// The shortest time between two writes of one source's file: a burst of changes costs one
/// write, and a change reaches the file within about this long.
pub const WRITE_INTERVAL: Duration = Duration::from_secs(5);

/// How often the file is written again while its source is followed and nothing changed, so
/// that its time stays close to when the data was last known current.
pub const REFRESH: Duration = Duration::from_secs(600);

/// Where the persisted snapshots live and how old one may be when read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    dir: PathBuf,
    max_age: Duration,
}

impl StateDir {
    /// Snapshots in `dir` (the caller makes sure it exists), served at start when no older than
    /// `max_age`.
    pub fn new(dir: impl Into<PathBuf>, max_age: Duration) -> StateDir {
        StateDir {
            dir: dir.into(),
            max_age,
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The oldest a snapshot may be when read back.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// The file of `source`, which holds data of `identity`.
    pub(crate) fn file(&self, source: Source, identity: String) -> file::StateFile {
        file::StateFile::new(self.dir.join(source.file_name()), source, identity, self.max_age)
    }
}

/// The sources whose data is persisted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    Etcd,
    Kubernetes,
}

impl Source {
    /// The name in headers, logs and metric labels.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Source::Etcd => "etcd",
            Source::Kubernetes => "kubernetes",
        }
    }

    fn file_name(self) -> &'static str {
        match self {
            Source::Etcd => "etcd.state",
            Source::Kubernetes => "kubernetes.state",
        }
    }
}

/// `at` as an RFC 3339 time in UTC to the second (`2024-05-01T12:00:00Z`), as logs and `/ready`
/// show when persisted data was current.
pub fn rfc3339(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// `d` in its two largest units, a zero second one left out (`3d4h`, `1d`, `2h5m`, `40s`), for
/// log lines and errors.
pub(crate) fn human(d: Duration) -> String {
    let s = d.as_secs();
    let (big, big_unit, small, small_unit) = match s {
        0..60 => return format!("{s}s"),
        60..3600 => (s / 60, "m", s % 60, "s"),
        3600..86_400 => (s / 3600, "h", s % 3600 / 60, "m"),
        _ => (s / 86_400, "d", s % 86_400 / 3600, "h"),
    };
    match small {
        0 => format!("{big}{big_unit}"),
        _ => format!("{big}{big_unit}{small}{small_unit}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_714_564_800 + 3_723)),
            "2024-05-01T13:02:03Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(4_107_542_399)),
            "2100-02-28T23:59:59Z"
        );
    }

    #[test]
    fn durations_read_in_their_largest_units() {
        assert_eq!(human(Duration::from_secs(40)), "40s");
        assert_eq!(human(Duration::from_secs(125)), "2m5s");
        assert_eq!(human(Duration::from_secs(7_500)), "2h5m");
        assert_eq!(human(Duration::from_secs(3 * 86_400 + 4 * 3600 + 59)), "3d4h");
        assert_eq!(human(Duration::from_secs(86_400)), "1d");
    }
}
