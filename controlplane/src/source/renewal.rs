//! Signatures renewed without a change (docs/dnssec.md, "Cost"): a build re-signs the whole
//! domain once its oldest signature has less than 4 days of its 7 left, and each SkyDNS source
//! starts such a build when that time comes, even if nothing changed. The Kubernetes source
//! needs none of its own: it composes its zones over the SkyDNS snapshot again whenever that
//! one is replaced.

use skyline_dataplane::snapshot::Snapshot;
use std::time::{Duration, SystemTime};

/// Longest a source sleeps before it looks at the time again: a wall clock set forward (after
/// a suspend, by an operator) is noticed within this, so the renewal is at most this late.
pub const RECHECK: Duration = Duration::from_secs(3600);

/// How long after `now` a source sleeps before it looks again whether `snapshot`'s signatures
/// are due; zero when they are, and the source is to build. `None` for a snapshot that holds no
/// signature.
pub fn wait(snapshot: &Snapshot, now: SystemTime) -> Option<Duration> {
    snapshot.dnssec.as_ref().map(|signed| signed.due_in(now).min(RECHECK))
}

/// Sleeps for `wait`; never completes for `None`.
pub async fn sleep(wait: Option<Duration>) {
    match wait {
        Some(wait) => tokio::time::sleep(wait).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skyline_dataplane::dnssec::{Dnssec, SigningKey, DEFAULT_CACHE};
    use skyline_dataplane::signer::{build_entries, update};
    use skyline_dataplane::snapshot::skydns::{typed, Config, Service};
    use skyline_dataplane::wire::Name;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::UNIX_EPOCH;

    const DAY: Duration = Duration::from_secs(86_400);

    /// The settings of a domain signed with the test key of `skydns.test.`, and one record.
    fn domain() -> (Config, Arc<Vec<Arc<skyline_dataplane::snapshot::skydns::Entry>>>) {
        let domain = Name::from_dotted("skydns.test.").unwrap();
        let keybase = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dataplane/src/dnssec/testdata/rsa");
        let config = Config {
            dnssec: Some(Dnssec {
                key: Arc::new(SigningKey::load(&keybase, &domain).unwrap()),
                cache: DEFAULT_CACHE,
            }),
            domain,
            ..Config::default()
        };
        let web = Service {
            host: "10.0.0.1".into(),
            ..Service::default()
        };
        let (entries, _) = typed(&config, &[("/skydns/test/skydns/web".to_owned(), web)]);
        (config, Arc::new(entries))
    }

    /// The snapshot of [`domain`], signed at `now`.
    fn signed(now: SystemTime) -> Snapshot {
        let (config, entries) = domain();
        build_entries(&config, &entries, 1, now)
    }

    #[test]
    fn a_source_builds_again_once_the_oldest_signature_has_less_than_four_days_left() {
        let made = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let snapshot = signed(made);
        assert_eq!(wait(&snapshot, made), Some(RECHECK));
        assert_eq!(wait(&snapshot, made + 2 * DAY), Some(RECHECK));
        let due = made + 3 * DAY + Duration::from_secs(1);
        assert_eq!(
            wait(&snapshot, due - Duration::from_secs(60)),
            Some(Duration::from_secs(60))
        );
        assert_eq!(wait(&snapshot, due), Some(Duration::ZERO));
        assert_eq!(wait(&snapshot, made + 10 * DAY), Some(Duration::ZERO));
        let renewed = signed(due);
        assert_eq!(wait(&renewed, due), Some(RECHECK));
    }

    /// What the etcd source builds when the renewal is due and nothing changed: an update
    /// without a changed key, which signs the whole domain again.
    #[test]
    fn a_build_without_a_change_renews_due_signatures_only() {
        let (config, entries) = domain();
        let made = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let snapshot = build_entries(&config, &entries, 1, made);
        let early = update(&snapshot, &config, &entries, &[], &[], 2, made + DAY)
            .unwrap()
            .snapshot;
        assert_eq!(wait(&early, made + 3 * DAY), Some(Duration::from_secs(1)));
        let due = made + 3 * DAY + Duration::from_secs(1);
        let renewed = update(&snapshot, &config, &entries, &[], &[], 2, due).unwrap().snapshot;
        assert_eq!(wait(&renewed, due), Some(RECHECK));
        assert_eq!(
            renewed.dnssec.as_ref().unwrap().due_in(due),
            Duration::from_secs(3 * 86_400 + 1)
        );
    }

    #[test]
    fn an_unsigned_snapshot_is_never_built_for_renewal() {
        assert_eq!(wait(&Snapshot::default(), SystemTime::now()), None);
    }
}
