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
        .sources
        .iter()
        .filter_map(|source| Some((source.name, source.persisted?.stale_since?)))
        .collect();
    (!stale.is_empty()).then_some(Stale(stale))
}

/// Ready when every configured source is (the records file has been loaded, etcd has been read
/// completely once, every Kubernetes watch has listed once), in the sources' order. No source
/// at all (an empty zone) is ready. A draining process is not, whatever its sources.
pub(crate) fn check(report: &Report) -> Result<(), NotReady> {
    let mut waiting = Vec::new();
    if report.draining {
        waiting.push("draining (shutting down)");
    }
    waiting.extend(report.sources.iter().filter_map(|source| source.ready.err()));
    if waiting.is_empty() {
        Ok(())
    } else {
        Err(NotReady(waiting))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::report::{Persisted, Status};
    use std::time::{Duration, UNIX_EPOCH};

    fn source(name: &'static str, ready: Result<(), &'static str>) -> Status {
        Status {
            name,
            ready,
            loads: None,
            persisted: None,
            families: Vec::new(),
            histograms: Vec::new(),
        }
    }

    #[test]
    fn no_source_at_all_is_ready() {
        assert_eq!(check(&Report::default()), Ok(()));
    }

    #[test]
    fn every_source_waited_for_is_named_in_order() {
        let mut report = Report {
            sources: vec![
                source("etcd", Err("etcd (no complete read yet)")),
                source("kubernetes", Err("kubernetes (not every watch has listed yet)")),
            ],
            ..Report::default()
        };
        let error = check(&report).unwrap_err().to_string();
        assert_eq!(
            error,
            "not ready: etcd (no complete read yet); kubernetes (not every watch has listed yet)"
        );
        report.sources[0].ready = Ok(());
        assert_eq!(
            check(&report).unwrap_err().to_string(),
            "not ready: kubernetes (not every watch has listed yet)"
        );
        report.sources[1].ready = Ok(());
        assert_eq!(check(&report), Ok(()));
    }

    #[test]
    fn a_draining_process_is_not_ready() {
        let report = Report {
            draining: true,
            sources: vec![source("records_file", Err("records file (not loaded yet)"))],
            ..Report::default()
        };
        assert_eq!(
            check(&report).unwrap_err().to_string(),
            "not ready: draining (shutting down); records file (not loaded yet)"
        );
    }

    #[test]
    fn a_source_serving_persisted_data_is_ready_and_named_stale() {
        let persisted = |stale_since| Persisted {
            persisting: true,
            stale_since,
            stale_age: None,
            writes: 0,
            write_failures: 0,
            last_write: None,
        };
        let since = UNIX_EPOCH + Duration::from_secs(1_714_564_800);
        let mut etcd = source("etcd", Ok(()));
        etcd.persisted = Some(persisted(Some(since)));
        let mut report = Report {
            sources: vec![source("records_file", Ok(())), etcd],
            ..Report::default()
        };
        assert_eq!(check(&report), Ok(()));
        assert_eq!(
            stale(&report).unwrap().to_string(),
            "OK; etcd: serving persisted data from 2024-05-01T12:00:00Z, stale"
        );
        let mut kubernetes = source("kubernetes", Ok(()));
        kubernetes.persisted = Some(persisted(None));
        report.sources[1].persisted = Some(persisted(None));
        report.sources.push(kubernetes);
        assert_eq!(stale(&report), None);
    }
}
