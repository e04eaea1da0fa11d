//! The source's copy of everything under `/<prefix>/`: typed records by key, which of them hang
//! on a lease, which values were skipped, and the settings object. Each etcd put or delete
//! changes one entry; a full read fills a fresh copy that replaces this one whole.

use super::health::SourceHealth;
use super::lease::{fold, LeaseTtls};
use super::records::Records;
use crate::skydns::{parse_value, ConfigError, ConfigPatch, RecordError, SkippedViews};
use crate::state::etcd::EtcdData;
use skyline_dataplane::snapshot::skydns::{self, Entry, KeyKind, KeyPath, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Longest `text` one TXT record can carry: its RDATA holds at most 65535 bytes, and every
/// 255-byte string costs a length octet. Longer values are skipped here, once, rather than on
/// every snapshot build.
const MAX_TEXT_LEN: usize = 65535 / 256 * 255;

/// Longest name in wire form (RFC 1035 §2.3.4).
const MAX_NAME_LEN: usize = 255;

/// Longest label (RFC 1035 §2.3.4).
const MAX_LABEL_LEN: usize = 63;

/// A key and value as etcd holds them, from a range read or a watch event.
#[derive(Debug, Clone, Copy)]
pub(super) struct Put<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// The lease the key is attached to; 0 for none.
    pub lease: i64,
    /// The revision of the key's last change.
    pub mod_revision: i64,
}

/// Why a value under the prefix is not served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(super) enum ValueError {
    /// etcd keys are bytes; SkyDNS keys are names, so text.
    #[error("the key is not UTF-8")]
    KeyNotUtf8,
    /// The key cannot be turned into a DNS name.
    #[error("the key names no DNS name: {0}")]
    Key(&'static str),
    /// The value is not a valid record.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// Parts of the value's view map are left out; the rest serves.
    #[error(transparent)]
    Views(#[from] SkippedViews),
    /// The text does not fit one TXT record.
    #[error("field \"text\" holds {len} bytes; one TXT record holds at most {MAX_TEXT_LEN}")]
    TextTooLong {
        /// Its length.
        len: usize,
    },
    /// The key's path cannot be read as the snapshot builder reads it.
    #[error("the key names no DNS name: {0}")]
    Path(#[from] skydns::KeyError),
    /// The value cannot serve as the snapshot builder interprets it.
    #[error(transparent)]
    Value(#[from] skydns::ValueError),
    /// The settings object is invalid; the previous settings stay in force.
    #[error("invalid settings, the previous ones stay in force: {0}")]
    Config(#[from] ConfigError),
}

/// What one change touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Changed {
    /// Nothing served changed.
    Nothing,
    /// A record (or its lease).
    Record,
    /// The settings object.
    Config,
}

/// A leased key: its lease and the TTL its record asks for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Leased {
    lease: i64,
    ttl: u32,
}

/// Everything under `/<prefix>/`, as typed as the source keeps it.
#[derive(Debug)]
pub(super) struct State {
    /// `/<prefix>/`: every key read starts with it.
    below: String,
    /// `<prefix>`.
    path_prefix: String,
    /// `/<prefix>/config`.
    config_key: String,
    /// Valid records; leased ones carry their folded TTL (see [`State::fold_leases`]).
    pub records: Records,
    /// Keys attached to a lease.
    leased: BTreeMap<String, Leased>,
    /// Keys whose current value is skipped, with that value's revision: each is logged once.
    rejected: BTreeMap<String, i64>,
    /// The skipped values of the copy this one replaces, already logged: a resync does not log
    /// them again. Emptied once the full read is done.
    logged_before: BTreeMap<String, i64>,
    /// The settings object, when there is a valid one.
    pub config: Option<ConfigPatch>,
    /// That settings object as etcd holds it, for the persisted snapshot.
    pub config_value: Option<Vec<u8>>,
    /// Every change up to this revision is included.
    pub revision: i64,
    /// The cluster the data was read from.
    pub cluster: u64,
}

impl State {
    /// An empty copy of `/<path_prefix>/`. `logged_before` are the skipped values already logged
    /// (see [`State::rejected`]), so that a resync does not log them again.
    pub(super) fn new(path_prefix: &str, logged_before: BTreeMap<String, i64>) -> State {
        State {
            below: format!("/{path_prefix}/"),
            path_prefix: path_prefix.to_owned(),
            config_key: format!("/{path_prefix}/config"),
            records: Records::new(path_prefix),
            leased: BTreeMap::new(),
            rejected: BTreeMap::new(),
            logged_before,
            config: None,
            config_value: None,
            revision: 0,
            cluster: 0,
        }
    }

    /// A copy of `/<path_prefix>/` made from persisted data: each value goes through
    /// [`State::put`] as if etcd had sent it, so that a file never serves what etcd could not.
    pub(super) fn restored(path_prefix: &str, data: &EtcdData, health: &SourceHealth) -> State {
        let mut state = State::new(path_prefix, BTreeMap::new());
        let config_key = state.config_key.clone();
        let config = data
            .config
            .as_ref()
            .map(|config| (config_key.as_str(), config.as_str()));
        let records = data.records.iter().map(|(key, value)| (key.as_str(), value.get()));
        for (key, value) in config.into_iter().chain(records) {
            let put = Put {
                key: key.as_bytes(),
                value: value.as_bytes(),
                lease: 0,
                mod_revision: data.revision,
            };
            state.put(put, health);
        }
        state.revision = data.revision;
        state.cluster = data.cluster;
        state.read_complete();
        state
    }

    /// The key of the settings object.
    pub(super) fn config_key(&self) -> &str {
        &self.config_key
    }

    /// The skipped values with their revisions, for the fresh copy of a resync.
    pub(super) fn rejected(&self) -> BTreeMap<String, i64> {
        self.rejected.clone()
    }

    /// Ends a full read: sorts the records it put (see [`Records::settle`]); skipped values of
    /// the replaced copy that this one did not meet again are gone from etcd.
    pub(super) fn read_complete(&mut self) {
        self.records.settle();
        self.logged_before.clear();
    }

    /// Values currently skipped.
    pub(super) fn rejected_count(&self) -> usize {
        self.rejected.len()
    }

    /// Applies a put. An invalid value is skipped (logged and counted the first time it is
    /// seen) and takes the key's previous record with it: the key no longer holds that.
    pub(super) fn put(&mut self, put: Put<'_>, health: &SourceHealth) -> Changed {
        self.revision = self.revision.max(put.mod_revision);
        let Ok(key) = std::str::from_utf8(put.key) else {
            self.reject(
                &String::from_utf8_lossy(put.key),
                put.mod_revision,
                ValueError::KeyNotUtf8,
                health,
            );
            return Changed::Nothing;
        };
        if key == self.config_key {
            return match ConfigPatch::parse(put.value) {
                Ok(patch) => {
                    self.rejected.remove(key);
                    self.config_value = Some(put.value.to_vec());
                    if self.config.as_ref() == Some(&patch) {
                        return Changed::Nothing;
                    }
                    self.config = Some(patch);
                    Changed::Config
                }
                Err(e) => {
                    self.reject(key, put.mod_revision, e.into(), health);
                    Changed::Nothing
                }
            };
        }
        match self.record(key, put.value) {
            Ok((entry, skipped)) => {
                if skipped.0.is_empty() {
                    self.rejected.remove(key);
                } else {
                    self.reject(key, put.mod_revision, skipped.into(), health);
                }
                let leased = (put.lease != 0).then_some(Leased {
                    lease: put.lease,
                    ttl: entry.ttl(),
                });
                let lease_changed = match leased {
                    Some(l) => self.leased.insert(key.to_owned(), l) != Some(l),
                    None => self.leased.remove(key).is_some(),
                };
                if self.records.upsert(key, entry) || lease_changed {
                    Changed::Record
                } else {
                    Changed::Nothing
                }
            }
            Err(e) => {
                self.reject(key, put.mod_revision, e, health);
                self.leased.remove(key);
                if self.records.remove(key) {
                    Changed::Record
                } else {
                    Changed::Nothing
                }
            }
        }
    }

    /// Applies a delete.
    pub(super) fn delete(&mut self, key: &[u8], mod_revision: i64) -> Changed {
        self.revision = self.revision.max(mod_revision);
        let key = String::from_utf8_lossy(key);
        self.rejected.remove(key.as_ref());
        if key == self.config_key {
            self.config_value = None;
            return if self.config.take().is_some() {
                Changed::Config
            } else {
                Changed::Nothing
            };
        }
        self.leased.remove(key.as_ref());
        if self.records.remove(&key) {
            Changed::Record
        } else {
            Changed::Nothing
        }
    }

    /// The distinct leases records hang on.
    pub(super) fn leases(&self) -> BTreeSet<i64> {
        self.leased.values().map(|l| l.lease).collect()
    }

    /// Whether any record hangs on a lease (its TTL then counts down).
    pub(super) fn has_leases(&self) -> bool {
        !self.leased.is_empty()
    }

    /// Sets the TTL of every leased record from its lease's remaining TTL at `now`; true when
    /// any changed.
    pub(super) fn fold_leases(&mut self, ttls: &LeaseTtls, now: Instant) -> bool {
        let mut changed = false;
        for (key, leased) in &self.leased {
            let ttl = fold(leased.ttl, ttls.remaining(leased.lease, now));
            changed |= self.records.set_ttl(key, ttl);
        }
        changed
    }

    /// The typed record of a value at `key`, with the parts of its view map left out, or why
    /// there is none. The value of a `.wildcards` key is not read.
    fn record(&self, key: &str, value: &[u8]) -> Result<(Entry, SkippedViews), ValueError> {
        let path = key
            .strip_prefix(self.below.as_str())
            .ok_or(ValueError::Key("the key is not below the path prefix"))?;
        check_key(path).map_err(ValueError::Key)?;
        let at =
            KeyPath::parse(key, &self.path_prefix)?.ok_or(ValueError::Key("the key is not below the path prefix"))?;
        if at.kind() == KeyKind::Wildcards {
            return Ok((Entry::of(&at, &Value::Marker)?, SkippedViews::default()));
        }
        let decoded = parse_value(value)?;
        if let Value::Record(service) = &decoded.value {
            if service.text.len() > MAX_TEXT_LEN {
                return Err(ValueError::TextTooLong {
                    len: service.text.len(),
                });
            }
        }
        Ok((Entry::of(&at, &decoded.value)?, SkippedViews(decoded.skipped)))
    }

    fn reject(&mut self, key: &str, mod_revision: i64, error: ValueError, health: &SourceHealth) {
        let logged =
            self.rejected.get(key) == Some(&mod_revision) || self.logged_before.get(key) == Some(&mod_revision);
        if !logged {
            tracing::warn!(%key, %error, revision = mod_revision, "etcd value skipped");
            health.rejected();
        }
        self.rejected.insert(key.to_owned(), mod_revision);
    }
}

/// Checks the part of a key after `/<prefix>/`: SkyDNS splits a name into labels and joins them
/// with `/` (docs/skydns-semantics.md, "Keys and names"), so each component must be a label and all
/// of them a name.
fn check_key(path: &str) -> Result<(), &'static str> {
    let mut wire_len = 1;
    let mut components = path.split('/').peekable();
    while let Some(component) = components.next() {
        if component.is_empty() {
            return Err("an empty path component (two slashes in a row, or a trailing slash)");
        }
        let special = [".self", ".wildcards"]
            .iter()
            .any(|s| component.eq_ignore_ascii_case(s));
        if component.contains('.') && !(special && components.peek().is_none()) {
            return Err("a path component holds a dot, which no name query can reach");
        }
        if component.len() > MAX_LABEL_LEN {
            return Err("a path component is longer than a DNS label (63 bytes)");
        }
        wire_len += 1 + component.len();
    }
    if wire_len > MAX_NAME_LEN {
        return Err("the name is longer than 255 bytes");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn put<'a>(key: &'a str, value: &'a str, lease: i64, rev: i64) -> Put<'a> {
        Put {
            key: key.as_bytes(),
            value: value.as_bytes(),
            lease,
            mod_revision: rev,
        }
    }

    #[test]
    fn puts_and_deletes_change_one_record_each() {
        let health = SourceHealth::default();
        let mut s = State::new("skydns", BTreeMap::new());
        s.read_complete();
        assert_eq!(
            s.put(put("/skydns/test/a", r#"{"host":"10.0.0.1"}"#, 0, 5), &health),
            Changed::Record
        );
        assert_eq!(
            s.put(put("/skydns/test/a", r#"{"host":"10.0.0.1"}"#, 0, 6), &health),
            Changed::Nothing
        );
        assert_eq!(
            s.put(put("/skydns/test/b", r#"{"host":"10.0.0.2"}"#, 0, 7), &health),
            Changed::Record
        );
        assert_eq!(s.delete(b"/skydns/test/a", 8), Changed::Record);
        assert_eq!(s.delete(b"/skydns/test/a", 9), Changed::Nothing);
        assert_eq!(s.records.len(), 1);
        assert_eq!(s.revision, 9);
    }

    #[test]
    fn a_bad_value_is_skipped_logged_once_and_replaces_the_good_one() {
        let health = SourceHealth::default();
        let mut s = State::new("skydns", BTreeMap::new());
        s.put(put("/skydns/test/a", r#"{"host":"10.0.0.1"}"#, 0, 1), &health);
        for (key, value) in [
            ("/skydns/test/a", "not json"),
            ("/skydns/test/b", r#"{"port":"80"}"#),
            ("/skydns/test/c", r#"{"host":"10.0.0.300"}"#),
            ("/skydns/test/d.e", r#"{"host":"10.0.0.4"}"#),
            ("/skydns/test//f", r#"{"host":"10.0.0.5"}"#),
        ] {
            s.put(put(key, value, 0, 2), &health);
        }
        s.put(put("/skydns/test/b", r#"{"port":"80"}"#, 0, 2), &health);
        assert_eq!(s.records.len(), 0, "the bad value at a took the good one's place");
        assert_eq!(s.rejected_count(), 5);
        assert_eq!(
            health.rejections(),
            5,
            "the repeated put of b at the same revision was not counted"
        );
        let mut resync = State::new("skydns", s.rejected());
        resync.put(put("/skydns/test/b", r#"{"port":"80"}"#, 0, 2), &health);
        assert_eq!(health.rejections(), 5, "a resync does not report it again");
        resync.put(put("/skydns/test/c", r#"{"host":"10.0.0.300"}"#, 0, 2), &health);
        resync.read_complete();
        assert_eq!(resync.rejected_count(), 2, "b and c still skipped; the others are gone");
        resync.put(put("/skydns/test/b", r#"{"port":80}"#, 0, 3), &health);
        assert_eq!(resync.rejected_count(), 1);
        assert_eq!(resync.records.len(), 1);
        assert_eq!(health.rejections(), 5);
    }

    #[test]
    fn the_settings_object_is_read_and_a_bad_one_keeps_the_last_good() {
        let health = SourceHealth::default();
        let mut s = State::new("skydns", BTreeMap::new());
        assert_eq!(
            s.put(put("/skydns/config", r#"{"ttl":30}"#, 0, 1), &health),
            Changed::Config
        );
        assert_eq!(
            s.put(put("/skydns/config", r#"{"ttl":"x"}"#, 0, 2), &health),
            Changed::Nothing
        );
        assert_eq!(s.config.as_ref().unwrap().ttl, Some(30));
        assert_eq!(s.records.len(), 0);
        assert_eq!(s.delete(b"/skydns/config", 3), Changed::Config);
        assert_eq!(s.config, None);
    }

    #[test]
    fn leased_records_answer_with_the_remaining_lease() {
        let health = SourceHealth::default();
        let mut s = State::new("skydns", BTreeMap::new());
        s.read_complete();
        s.put(put("/skydns/test/a", r#"{"host":"10.0.0.1"}"#, 7, 1), &health);
        s.put(put("/skydns/test/b", r#"{"host":"10.0.0.2","ttl":60}"#, 7, 1), &health);
        s.put(put("/skydns/test/c", r#"{"host":"10.0.0.3","ttl":2}"#, 7, 1), &health);
        s.put(put("/skydns/test/d", r#"{"host":"10.0.0.4"}"#, 0, 1), &health);
        assert_eq!(s.leases().into_iter().collect::<Vec<_>>(), [7]);
        let t0 = Instant::now();
        let mut ttls = LeaseTtls::default();
        ttls.record(7, 5, 5, t0);
        assert!(s.fold_leases(&ttls, t0));
        let ttl = |s: &State, k: &str| {
            let run = s.records.with_prefix("/skydns/test/");
            run.iter().find(|(key, _)| key == k).unwrap().1.ttl()
        };
        assert_eq!(
            [
                ttl(&s, "/skydns/test/a"),
                ttl(&s, "/skydns/test/b"),
                ttl(&s, "/skydns/test/c"),
                ttl(&s, "/skydns/test/d")
            ],
            [5, 5, 2, 0]
        );
        assert!(!s.fold_leases(&ttls, t0));
        assert!(s.fold_leases(&ttls, t0 + Duration::from_secs(2)));
        assert_eq!(ttl(&s, "/skydns/test/a"), 3);
        s.put(put("/skydns/test/a", r#"{"host":"10.0.0.1"}"#, 0, 2), &health);
        assert_eq!(ttl(&s, "/skydns/test/a"), 0, "no longer leased");
        s.delete(b"/skydns/test/b", 3);
        s.delete(b"/skydns/test/c", 3);
        assert!(!s.has_leases());
    }

    #[test]
    fn a_copy_restored_from_persisted_data_holds_what_was_written() {
        use crate::state::etcd::{decode, encode};
        let health = SourceHealth::default();
        let mut s = State::new("skydns", BTreeMap::new());
        s.put(put("/skydns/config", r#"{"domain":"skydns.test."}"#, 0, 1), &health);
        s.put(
            put("/skydns/test/Web/a", r#"{"host":"10.0.0.1","port":80}"#, 0, 2),
            &health,
        );
        s.put(
            put("/skydns/test/b", r#"{"host":"web.example.org.","ttl":60}"#, 9, 3),
            &health,
        );
        s.read_complete();
        let config = s.config_value.as_deref();
        let bytes = encode("skydns", s.revision, 5, config, &s.records.shared()).unwrap();
        let restored = State::restored("skydns", &decode(&bytes).unwrap(), &health);
        assert_eq!(restored.records.shared(), s.records.shared());
        assert_eq!(restored.config, s.config);
        assert_eq!((restored.revision, restored.cluster), (3, 5));
        assert!(!restored.has_leases(), "no lease is known while etcd is out of reach");
        assert_eq!(health.rejections(), 0);
    }

    #[test]
    fn keys_must_make_names() {
        assert!(check_key("local/skydns/web").is_ok());
        assert!(check_key("").is_err());
        assert!(check_key("a//b").is_err());
        assert!(check_key("a/").is_err());
        assert!(check_key("a/b.c").is_err());
        assert!(check_key(&"x".repeat(64)).is_err());
        assert!(check_key(&vec!["abcdefgh"; 30].join("/")).is_err());
        assert!(check_key(&vec!["abcdefgh"; 28].join("/")).is_ok());
        assert!(check_key("a/.self").is_ok() && check_key("a/.Wildcards").is_ok());
        assert!(check_key("a/.self/b").is_err() && check_key("a/.other").is_err());
    }

    #[test]
    fn view_maps_self_keys_and_markers_are_kept_and_bad_views_counted_once() {
        let health = SourceHealth::default();
        let mut s = State::new("skydns", BTreeMap::new());
        s.read_complete();
        let views = r#"{"default": [{"host": "10.0.0.1"}], "10.0/8": [], "10.0.0.0/8": [{"host": "x..y"}]}"#;
        assert_eq!(s.put(put("/skydns/test/web", views, 0, 1), &health), Changed::Record);
        assert_eq!(s.put(put("/skydns/test/web", views, 0, 1), &health), Changed::Nothing);
        assert_eq!(health.rejections(), 1, "one value, parts of it left out, counted once");
        assert_eq!(s.rejected_count(), 1);
        assert_eq!(
            s.put(put("/skydns/test/dir/.wildcards", "not a record", 0, 2), &health),
            Changed::Record
        );
        assert_eq!(
            s.put(put("/skydns/test/dir/.self", r#"{"host": "10.0.0.2"}"#, 0, 3), &health),
            Changed::Record
        );
        assert_eq!(s.records.len(), 3);
        assert_eq!(health.rejections(), 1);
        let fixed = r#"{"default": [{"host": "10.0.0.1"}]}"#;
        s.put(put("/skydns/test/web", fixed, 0, 4), &health);
        assert_eq!(s.rejected_count(), 0);
    }
}
