//! `/ready`: whether every configured source serves complete data. A load balancer or a
//! Kubernetes readiness probe keeps clients away while the zones would answer SERVFAIL (etcd or
//! the API server not read yet); once ready, losing a backend does not flip it back, since the
//! last data keeps serving. From the first moment of a drain (SIGTERM) it says not ready.

use super::report::Report;
use std::fmt;

/// The sources that are not ready, in a fixed order, each with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotReady(Vec<&'static str>);

impl fmt::Display for NotReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not ready: {}", self.0.join("; "))
    }
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
    use crate::http::report::{Etcd, Kubernetes, Loads};

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
