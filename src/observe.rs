//! What the workers let others see of the queries, dnstap, the query log and the top talkers:
//! the resolution of the `[observe]` table (declared in [`crate::settings`]) into the data
//! plane's [`ObserveConfig`]. Everything is off unless asked for, and fixed at start.

use crate::flag_value::STDERR;
use crate::settings::Observe;
use skyline_dataplane::observe::{DnstapConfig, ObserveConfig, QueryLogConfig, QueryLogTarget, TopConfig};

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

/// Resolves the settings, checking the sampling rates and the top-K size.
pub fn observe_config(observe: &Observe) -> Result<ObserveConfig, ObserveError> {
    let sample = |n: u32, name: &'static str| match n {
        0 => Err(ObserveError::ZeroSample(name)),
        n => Ok(n),
    };
    let dnstap = match &observe.dnstap {
        Some(socket) => Some(DnstapConfig {
            socket: socket.clone(),
            identity: observe.dnstap_identity.clone().unwrap_or_else(host_name),
            version: observe
                .dnstap_version
                .clone()
                .unwrap_or_else(|| format!("skyline {}", env!("CARGO_PKG_VERSION"))),
            sample: sample(observe.dnstap_sample, "dnstap_sample")?,
        }),
        None => None,
    };
    let query_log = observe.query_log.clone().map(|path| QueryLogConfig {
        target: if path.as_os_str() == STDERR {
            QueryLogTarget::Stderr
        } else {
            QueryLogTarget::File(path)
        },
        rate: observe.query_log_rate,
    });
    let top_talkers = if observe.top_talkers {
        let k = observe.top_talkers_k;
        if !(1..=MAX_TOP_K).contains(&k) {
            return Err(ObserveError::TopK(k));
        }
        Some(TopConfig {
            k,
            sample: sample(observe.top_talkers_sample, "top_talkers_sample")?,
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
/// The host name, as dnstap and `chaos` name this server by default.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{ObserveArgs, ObserveFile};
    use std::path::{Path, PathBuf};

    fn resolve(args: &ObserveArgs, file: Option<&ObserveFile>) -> Result<ObserveConfig, ObserveError> {
        observe_config(&Observe::merge(args, file, Path::new("/etc"), &mut Vec::new()))
    }

    #[test]
    fn everything_is_off_by_default() {
        let c = resolve(&ObserveArgs::default(), None).unwrap();
        assert!(!c.is_enabled());
    }

    #[test]
    fn flags_beat_the_file_and_the_file_beats_the_defaults() {
        let file = crate::settings::parse_group(
            "dnstap = \"/run/dnstap.sock\"\ndnstap_identity = \"a\"\ndnstap_sample = 4\n\
             query_log = \"-\"\ntop_talkers = true\ntop_talkers_k = 5\n",
            ObserveFile::take,
        )
        .unwrap();
        let c = resolve(&ObserveArgs::default(), Some(&file)).unwrap();
        let d = c.dnstap.clone().unwrap();
        assert_eq!((d.identity.as_str(), d.sample), ("a", 4));
        assert_eq!(d.socket, PathBuf::from("/run/dnstap.sock"));
        assert_eq!(c.query_log.clone().unwrap().target, QueryLogTarget::Stderr);
        let declared = Observe::merge(&ObserveArgs::default(), None, Path::new(""), &mut Vec::new());
        assert_eq!(c.query_log.unwrap().rate, declared.query_log_rate);
        assert_eq!(c.top_talkers, Some(TopConfig { k: 5, sample: 1 }));
        let args = ObserveArgs {
            dnstap_sample: Some(2),
            query_log: Some(PathBuf::from("/tmp/q.log")),
            top_talkers_k: Some(3),
            ..ObserveArgs::default()
        };
        let c = resolve(&args, Some(&file)).unwrap();
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
        assert_eq!(resolve(&args, None), Err(ObserveError::ZeroSample("dnstap_sample")));
        let args = ObserveArgs {
            top_talkers: Some(true),
            top_talkers_k: Some(0),
            ..ObserveArgs::default()
        };
        assert_eq!(resolve(&args, None), Err(ObserveError::TopK(0)));
        assert!(crate::settings::parse_group("dnstapp = \"/x\"", ObserveFile::take).is_err());
    }
}
