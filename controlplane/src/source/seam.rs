//! The one seam every source of DNS data plugs into: what the process asks of a source to start
//! it, to serve it and to report on it. `src/main.rs` makes a list of [`Source`]s from the
//! settings and then starts and serves them alike; the HTTP endpoints read a list of their
//! [`SourceReport`]s and name none. A new source is a module that implements the two traits,
//! and its entry where the list is made.
//!
//! A source's life has two steps, because the settings of the process depend on the data of
//! one of them: a SkyDNS source's `/<prefix>/config` is layered under the operator's settings
//! before anything is built. So every source [`Source::start`]s first (the records file loads,
//! etcd reads its settings), the process resolves its settings, and then every source
//! [`Source::serve`]s with them, in the list's order: a source that composes its zones over
//! another's snapshot comes after it.

use super::records_file::FileError;
use super::stats::SourceStats;
use crate::skydns::ConfigPatch;
use crate::state::StateHealth;
use futures::future::BoxFuture;
use skyline_dataplane::snapshot::skydns::Config;
use std::fmt::{self, Display, Formatter};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A source of DNS data, as the process starts and runs it: it reads its backend, builds
/// snapshots and publishes them into the cell it was made with.
pub trait Source: Send {
    /// What `/ready` and `/metrics` read of this source, shared with it while it runs.
    fn report(&self) -> Arc<dyn SourceReport>;

    /// What the source does once before the process resolves its settings and serves, on the
    /// thread that starts the process: what must stop the start when it fails, and what the
    /// settings depend on. Returns the settings object the source's data carries (a SkyDNS
    /// source's `/<prefix>/config`), which the operator's settings override. By default
    /// nothing, and no settings.
    fn start(&mut self) -> BoxFuture<'_, Result<Option<ConfigPatch>, StartError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Publishes what the source serves until its first complete read, if it has not
    /// published yet (its zones answer SERVFAIL, never a denial from data not yet read), and
    /// returns the future that follows the source and publishes its changes, forever: spawn it
    /// on the control plane's runtime. `settings` are the SkyDNS settings resolved at start,
    /// for a source that builds SkyDNS zones with them.
    fn serve(self: Box<Self>, settings: &Config) -> BoxFuture<'static, ()>;
}

/// Why a source cannot start: the process stops with this one line. A source of this module
/// has its variant here; one outside it (the hosts file) gives its own typed error as
/// [`StartError::Source`], so that the seam knows no source above it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The records file cannot be read or is not a records file.
    #[error("records file {path}: {source}")]
    RecordsFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: FileError,
    },
    /// A source outside this module cannot start; its error says which and why.
    #[error(transparent)]
    Source(Box<dyn std::error::Error + Send + Sync>),
}

/// What the HTTP endpoints read of one source: atomics the source writes as it runs, read with
/// atomic loads only, so that a scrape or a probe never waits on the source nor slows it. The
/// endpoints report every source the same way (its readiness, its loads, its persisted
/// snapshot) and add the families only it has.
pub trait SourceReport: Send + Sync + fmt::Debug {
    /// The source's name: the `source` label of its metrics and the name `/ready` gives it
    /// when it serves persisted data.
    fn name(&self) -> &'static str;

    /// `Ok` once the source serves a complete read of its data, or data persisted by an
    /// earlier process; otherwise what `/ready` says is awaited, naming the source as an
    /// operator knows it (`etcd (no complete read yet)`). Once ready, a source stays ready
    /// when its backend is lost: its last data keeps serving.
    fn ready(&self) -> Result<(), &'static str>;

    /// The load counters of a source that counts its loads (`skyline_source_records` and the
    /// families beside it). By default none.
    fn loads(&self) -> Option<&SourceStats> {
        None
    }

    /// The persisted snapshot of a source that can keep one (`--state-dir`): whether it serves
    /// persisted data, stale, and how its writes go. By default none.
    fn persisted(&self) -> Option<&StateHealth> {
        None
    }

    /// The metric families only this source has, read now (`now` measures ages). Their names
    /// carry the source's own (`skyline_etcd_*`), so that no other source writes them. By
    /// default none.
    fn families(&self, _now: SystemTime) -> Vec<Family> {
        Vec::new()
    }

    /// The histograms only this source has, read now. By default none.
    fn histograms(&self) -> Vec<HistogramFamily> {
        Vec::new()
    }
}

/// A histogram family of a source's own: durations in seconds, one series per value of its
/// one label.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramFamily {
    /// The family's name.
    pub name: &'static str,
    /// The `# HELP` text, as [`Family::help`].
    pub help: &'static str,
    /// The label that tells the series apart.
    pub label: &'static str,
    /// The buckets' upper bounds, in seconds, without `+Inf`.
    pub bounds: &'static [f64],
    /// Each series: its label's value, its observations per bucket (not cumulative; one more
    /// than `bounds`, the last `+Inf`), and their sum in seconds.
    pub series: Vec<(&'static str, Vec<u64>, f64)>,
}

/// One metric family of a source's own, with its one sample, as `/metrics` writes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Family {
    /// The family's name, `skyline_<source>_*`.
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// The `# HELP` text: one line, no backslash (the two things the format would need
    /// escaped).
    pub help: &'static str,
    /// The sample.
    pub value: Value,
}

impl Family {
    /// A counter: a count since the process started; its name ends in `_total`.
    pub fn counter(name: &'static str, help: &'static str, value: impl Into<Value>) -> Family {
        Family {
            name,
            kind: Kind::Counter,
            help,
            value: value.into(),
        }
    }

    /// A gauge: a value now.
    pub fn gauge(name: &'static str, help: &'static str, value: impl Into<Value>) -> Family {
        Family {
            name,
            kind: Kind::Gauge,
            help,
            value: value.into(),
        }
    }
}

/// The Prometheus type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows, from the process's start.
    Counter,
    /// Goes up and down.
    Gauge,
}

/// A sample's value, written as the text format takes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A count or a flag (0 or 1).
    Unsigned(u64),
    /// A signed number, such as an etcd revision.
    Signed(i64),
    /// A duration, written in seconds to the millisecond, as Prometheus takes time values.
    Seconds(Duration),
}

impl From<u64> for Value {
    fn from(value: u64) -> Value {
        Value::Unsigned(value)
    }
}

impl From<i64> for Value {
    fn from(value: i64) -> Value {
        Value::Signed(value)
    }
}

impl From<bool> for Value {
    fn from(value: bool) -> Value {
        Value::Unsigned(u64::from(value))
    }
}

impl From<Duration> for Value {
    fn from(value: Duration) -> Value {
        Value::Seconds(value)
    }
}

impl Display for Value {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Value::Unsigned(value) => write!(f, "{value}"),
            Value::Signed(value) => write!(f, "{value}"),
            Value::Seconds(d) => write!(f, "{}.{:03}", d.as_secs(), d.subsec_millis()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_keep_milliseconds() {
        assert_eq!(Value::from(Duration::from_millis(61_007)).to_string(), "61.007");
        assert_eq!(Value::from(Duration::ZERO).to_string(), "0.000");
    }

    #[test]
    fn numbers_and_flags_are_written_as_integers() {
        assert_eq!(Value::from(42_u64).to_string(), "42");
        assert_eq!(Value::from(-3_i64).to_string(), "-3");
        assert_eq!(Value::from(true).to_string(), "1");
    }
}
