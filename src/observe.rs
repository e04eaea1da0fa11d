//! Settings of what the workers let others see of the queries: dnstap, the query log and the
//! top talkers (the `[observe]` table), and their resolution into the data plane's
//! [`ObserveConfig`]. Everything is off unless asked for, and fixed at start.
//!
//! | TOML key | flag | default |
//! |---|---|---|
//! | `observe.dnstap` | `--dnstap PATH` | none: no dnstap |
//! | `observe.dnstap_identity` | `--dnstap-identity` | the host name |
//! | `observe.dnstap_version` | `--dnstap-version` | `skyline <version>` |
//! | `observe.dnstap_sample` | `--dnstap-sample N` | 1: every query |
//! | `observe.query_log` | `--query-log [FILE]` (`-` or no value: stderr) | none: no query log |
//! | `observe.query_log_rate` | `--query-log-rate N` | 1000 lines per second |
//! | `observe.top_talkers` | `--top-talkers` | false |
//! | `observe.top_talkers_k` | `--top-talkers-k K` | 10 |
//! | `observe.top_talkers_sample` | `--top-talkers-sample N` | 1: every query |

use clap::Args;
use serde::Deserialize;
use skyline_dataplane::observe::{DnstapConfig, ObserveConfig, QueryLogConfig, QueryLogTarget, TopConfig};
use std::path::PathBuf;

/// Query-log lines per second when not set.
pub const DEFAULT_QUERY_LOG_RATE: u32 = 1000;
/// Top talkers exported per family when not set.
pub const DEFAULT_TOP_K: usize = 10;
/// The most top talkers that may be exported per family: the exported series stay few.
pub const MAX_TOP_K: usize = 1000;

/// Why an observation setting is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ObserveError {
    /// A sampling rate of 0.
    #[error("{0}: must be at least 1 (1 in N queries)")]
    ZeroSample(&'static str),
    /// A top-K size out of range.
    #[error("top_talkers_k: {0} is not between 1 and {MAX_TOP_K}")]
    TopK(usize),
}

/// The command-line options of dnstap, the query log and the top talkers.
#[derive(Debug, Clone, Default, Args)]
pub struct ObserveArgs {
    /// Stream dnstap messages (client and forwarder queries and responses) over Frame Streams
    /// to the unix socket PATH; the reader may come and go
    #[arg(long, value_name = "PATH")]
    pub dnstap: Option<PathBuf>,

    /// dnstap identity of this server [default: the host name]
    #[arg(long, value_name = "TEXT")]
    pub dnstap_identity: Option<String>,

    /// dnstap version string [default: skyline and its version]
    #[arg(long, value_name = "TEXT")]
    pub dnstap_version: Option<String>,

    /// Send one query in N (with its response) to dnstap [default: 1]
    #[arg(long, value_name = "N")]
    pub dnstap_sample: Option<u32>,

    /// Write one line per answered query to FILE, or to stderr with `-` or no value
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "-")]
    pub query_log: Option<PathBuf>,

    /// Query-log lines per second at most, all workers together; the rest are counted as
    /// suppressed [default: 1000]
    #[arg(long, value_name = "N")]
    pub query_log_rate: Option<u32>,

    /// Count the heaviest client addresses and query names, exported on /metrics
    #[arg(long)]
    pub top_talkers: bool,

    /// Top talkers exported per family [default: 10]
    #[arg(long, value_name = "K")]
    pub top_talkers_k: Option<usize>,

    /// Count one query in N for the top talkers [default: 1]
    #[arg(long, value_name = "N")]
    pub top_talkers_sample: Option<u32>,
}

/// The `[observe]` table of the TOML file.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ObserveFile {
    /// `--dnstap`.
    pub dnstap: Option<PathBuf>,
    /// `--dnstap-identity`.
    pub dnstap_identity: Option<String>,
    /// `--dnstap-version`.
    pub dnstap_version: Option<String>,
    /// `--dnstap-sample`.
    pub dnstap_sample: Option<u32>,
    /// `--query-log`: a file, or `-` for stderr.
    pub query_log: Option<PathBuf>,
    /// `--query-log-rate`.
    pub query_log_rate: Option<u32>,
    /// `--top-talkers`.
    pub top_talkers: Option<bool>,
    /// `--top-talkers-k`.
    pub top_talkers_k: Option<usize>,
    /// `--top-talkers-sample`.
    pub top_talkers_sample: Option<u32>,
}

/// Resolves the settings, flags over the file over the defaults.
pub fn observe_config(args: &ObserveArgs, file: Option<&ObserveFile>) -> Result<ObserveConfig, ObserveError> {
    let empty = ObserveFile::default();
    let file = file.unwrap_or(&empty);
    let sample = |flag: Option<u32>, key: Option<u32>, name: &'static str| match flag.or(key).unwrap_or(1) {
        0 => Err(ObserveError::ZeroSample(name)),
        n => Ok(n),
    };
    let dnstap = match args.dnstap.clone().or_else(|| file.dnstap.clone()) {
        Some(socket) => Some(DnstapConfig {
            socket,
            identity: args
                .dnstap_identity
                .clone()
                .or_else(|| file.dnstap_identity.clone())
                .unwrap_or_else(host_name),
            version: args
                .dnstap_version
                .clone()
                .or_else(|| file.dnstap_version.clone())
                .unwrap_or_else(|| format!("skyline {}", env!("CARGO_PKG_VERSION"))),
            sample: sample(args.dnstap_sample, file.dnstap_sample, "dnstap_sample")?,
        }),
        None => None,
    };
    let query_log = args
        .query_log
        .clone()
        .or_else(|| file.query_log.clone())
        .map(|path| QueryLogConfig {
            target: if path.as_os_str() == "-" {
                QueryLogTarget::Stderr
            } else {
                QueryLogTarget::File(path)
            },
            rate: args
                .query_log_rate
                .or(file.query_log_rate)
                .unwrap_or(DEFAULT_QUERY_LOG_RATE),
        });
    let top_talkers = if args.top_talkers || file.top_talkers.unwrap_or(false) {
        let k = args.top_talkers_k.or(file.top_talkers_k).unwrap_or(DEFAULT_TOP_K);
        if !(1..=MAX_TOP_K).contains(&k) {
            return Err(ObserveError::TopK(k));
        }
        Some(TopConfig {
            k,
            sample: sample(args.top_talkers_sample, file.top_talkers_sample, "top_talkers_sample")?,
        })
    } else {
        None
    };
    Ok(ObserveConfig {
        dnstap,
        query_log,
        top_talkers,
    })
}

/// The host name, which tells apart the dnstap streams of several servers; empty when unknown.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

/// The settings as `--check-config` prints them.
pub fn describe(config: &ObserveConfig) -> Vec<(&'static str, String)> {
    let mut lines = Vec::new();
    match &config.dnstap {
        Some(d) => {
            lines.push(("observe.dnstap", d.socket.display().to_string()));
            lines.push(("observe.dnstap_identity", d.identity.clone()));
            lines.push(("observe.dnstap_version", d.version.clone()));
            lines.push(("observe.dnstap_sample", d.sample.to_string()));
        }
        None => lines.push(("observe.dnstap", "off".to_owned())),
    }
    match &config.query_log {
        Some(q) => {
            let target = match &q.target {
                QueryLogTarget::Stderr => "stderr".to_owned(),
                QueryLogTarget::File(path) => path.display().to_string(),
            };
            lines.push(("observe.query_log", target));
            lines.push(("observe.query_log_rate", q.rate.to_string()));
        }
        None => lines.push(("observe.query_log", "off".to_owned())),
    }
    match &config.top_talkers {
        Some(t) => {
            lines.push(("observe.top_talkers_k", t.k.to_string()));
            lines.push(("observe.top_talkers_sample", t.sample.to_string()));
        }
        None => lines.push(("observe.top_talkers", "off".to_owned())),
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_is_off_by_default() {
        let c = observe_config(&ObserveArgs::default(), None).unwrap();
        assert!(!c.is_enabled());
    }

    #[test]
    fn flags_beat_the_file_and_the_file_beats_the_defaults() {
        let file: ObserveFile = toml::from_str(
            "dnstap = \"/run/dnstap.sock\"\ndnstap_identity = \"a\"\ndnstap_sample = 4\n\
             query_log = \"-\"\ntop_talkers = true\ntop_talkers_k = 5\n",
        )
        .unwrap();
        let c = observe_config(&ObserveArgs::default(), Some(&file)).unwrap();
        let d = c.dnstap.clone().unwrap();
        assert_eq!((d.identity.as_str(), d.sample), ("a", 4));
        assert_eq!(d.socket, PathBuf::from("/run/dnstap.sock"));
        assert_eq!(c.query_log.clone().unwrap().target, QueryLogTarget::Stderr);
        assert_eq!(c.query_log.unwrap().rate, DEFAULT_QUERY_LOG_RATE);
        assert_eq!(c.top_talkers, Some(TopConfig { k: 5, sample: 1 }));
        let args = ObserveArgs {
            dnstap_sample: Some(2),
            query_log: Some(PathBuf::from("/tmp/q.log")),
            top_talkers_k: Some(3),
            ..ObserveArgs::default()
        };
        let c = observe_config(&args, Some(&file)).unwrap();
        assert_eq!(c.dnstap.unwrap().sample, 2);
        assert_eq!(
            c.query_log.unwrap().target,
            QueryLogTarget::File(PathBuf::from("/tmp/q.log"))
        );
        assert_eq!(c.top_talkers.unwrap().k, 3);
    }

    #[test]
    fn bad_values_are_named() {
        let args = ObserveArgs {
            dnstap: Some(PathBuf::from("/x")),
            dnstap_sample: Some(0),
            ..ObserveArgs::default()
        };
        assert_eq!(
            observe_config(&args, None),
            Err(ObserveError::ZeroSample("dnstap_sample"))
        );
        let args = ObserveArgs {
            top_talkers: true,
            top_talkers_k: Some(0),
            ..ObserveArgs::default()
        };
        assert_eq!(observe_config(&args, None), Err(ObserveError::TopK(0)));
        assert!(toml::from_str::<ObserveFile>("dnstapp = \"/x\"").is_err());
    }
}
