//! `/ready`: whether every configured source serves complete data. A load balancer or a
//! Kubernetes readiness probe keeps clients away while the zones would answer SERVFAIL (etcd or
//! the API server not read yet); once ready, losing a backend does not flip it back, since the
//! last data keeps serving. From the first moment of a drain (SIGTERM) it says not ready.
//!
//! A source serving the data persisted by an earlier process (`--state-dir`, started while the
//! source was out of reach) is ready: answering from that data beats SERVFAIL. The text then
//! names it, with when the data was current, until the source's own data replaces it.

use super::report::Report;
use crate::state::rfc3339;
use std::fmt;
use std::time::SystemTime;

/// The sources that are not ready, in a fixed order, each with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotReady(Vec<&'static str>);

impl fmt::Display for NotReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not ready: {}", self.0.join("; "))
    }
}

/// The sources that serve persisted data rather than their own, each with when it was current.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stale(Vec<(&'static str, SystemTime)>);

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OK")?;
        for (source, since) in &self.0 {
            write!(f, "; {source}: serving persisted data from {}, stale", rfc3339(*since))?;
        }
        Ok(())
    }
}

/// The sources serving persisted data, if any: what a ready `/ready` says instead of `OK`.
pub(crate) fn stale(report: &Report) -> Option<Stale> {
    let stale: Vec<_> = report
        .state
        .iter()
        .filter_map(|p| Some((p.source, p.stale_since?)))
        .collect();
    (!stale.is_empty()).then_some(Stale(stale))
}

/// Ready when every configured source is: the records file has been loaded, etcd has been read
/// completely once, every Kubernetes watch has listed once. No source at all (an empty zone) is
/// ready. A draining process is not, whatever its sources.
pub(crate) fn check(report: &Report) -> Result<(), NotReady> {
    let mut waiting = Vec::new();
    if report.draining {
        waiting.push("draining (shutting down)");
    }
    if report.records_file.is_some_and(|file| file.loads == 0) {
        waiting.push("records file (not loaded yet)");
    }
    if report.etcd.is_some_and(|etcd| !etcd.ready) {
        waiting.push("etcd (no complete read yet)");
    }
    if report.kubernetes.is_some_and(|kubernetes| !kubernetes.ready) {
        waiting.push("kubernetes (not every watch has listed yet)");
    }
    if waiting.is_empty() {
        Ok(())
    } else {
        Err(NotReady(waiting))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::report::{Etcd, Kubernetes, Loads, Persisted};
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn no_source_at_all_is_ready() {
        assert_eq!(check(&Report::default()), Ok(()));
    }

    #[test]
    fn a_loaded_records_file_is_ready() {
        let mut report = Report {
            records_file: Some(Loads::default()),
            ..Report::default()
        };
        assert!(check(&report).is_err());
        report.records_file = Some(Loads {
            loads: 1,
            ..Loads::default()
        });
        assert_eq!(check(&report), Ok(()));
    }

    #[test]
    fn etcd_and_kubernetes_wait_for_their_first_complete_read() {
        let mut report = Report {
            etcd: Some(Etcd::default()),
            kubernetes: Some(Kubernetes::default()),
            ..Report::default()
        };
        let error = check(&report).unwrap_err().to_string();
        assert_eq!(
            error,
            "not ready: etcd (no complete read yet); kubernetes (not every watch has listed yet)"
        );
        report.etcd = Some(Etcd {
            ready: true,
            ..Etcd::default()
        });
        assert_eq!(
            check(&report).unwrap_err().to_string(),
            "not ready: kubernetes (not every watch has listed yet)"
        );
        report.kubernetes = Some(Kubernetes {
            ready: true,
            ..Kubernetes::default()
        });
        assert_eq!(check(&report), Ok(()));
    }

    #[test]
    fn a_draining_process_is_not_ready() {
        let report = Report {
            draining: true,
            ..Report::default()
        };
        assert_eq!(
            check(&report).unwrap_err().to_string(),
            "not ready: draining (shutting down)"
        );
    }

    #[test]
    fn a_source_serving_persisted_data_is_ready_and_named_stale() {
        let persisted = |source, stale_since| Persisted {
            source,
            persisting: true,
            stale_since,
            stale_age: None,
            writes: 0,
            write_failures: 0,
            last_write: None,
        };
        let since = UNIX_EPOCH + Duration::from_secs(1_714_564_800);
        let mut report = Report {
            etcd: Some(Etcd {
                ready: true,
                ..Etcd::default()
            }),
            state: vec![persisted("etcd", Some(since))],
            ..Report::default()
        };
        assert_eq!(check(&report), Ok(()));
        assert_eq!(
            stale(&report).unwrap().to_string(),
            "OK; etcd: serving persisted data from 2024-05-01T12:00:00Z, stale"
        );
        report.state = vec![persisted("etcd", None), persisted("kubernetes", None)];
        assert_eq!(stale(&report), None);
    }

    #[test]
    fn losing_etcd_after_the_first_read_stays_ready() {
        let report = Report {
            etcd: Some(Etcd {
                ready: true,
                watching: false,
                retries: 7,
                ..Etcd::default()
            }),
            ..Report::default()
        };
        assert_eq!(check(&report), Ok(()));
    }
}
