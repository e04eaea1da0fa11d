//! The records the source holds, in key order: a map from etcd key to typed record, stored as a
//! sorted vector because the snapshot builder reads exactly that, a slice of `(key, record)`.
//! A change finds its entry by binary search and touches only it; a build borrows the whole
//! table through an `Arc` without copying a record. The keys changed since the last build are
//! kept, so that the next snapshot compiles only what they reach.

use skyline_dataplane::snapshot::skydns::Service;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Records by etcd key, sorted by key bytes (etcd's own order, so a range read arrives sorted).
#[derive(Debug, Clone)]
pub(super) struct Records(Arc<Vec<(String, Service)>>, Changes);

/// What changed since the last build took the table.
#[derive(Debug, Clone)]
enum Changes {
    /// The table is new: no build has seen any of it.
    All,
    /// These keys were put, changed or deleted.
    Keys(BTreeSet<String>),
}

impl Default for Records {
    fn default() -> Records {
        Records(Arc::default(), Changes::All)
    }
}

impl Records {
    /// The table as the snapshot builder takes it, shared with the build.
    pub(super) fn shared(&self) -> Arc<Vec<(String, Service)>> {
        Arc::clone(&self.0)
    }

    /// The keys changed since the last call, for a build that starts from the previous one's
    /// snapshot; `None` when the table is new and must be built whole.
    pub(super) fn take_changes(&mut self) -> Option<Vec<String>> {
        match std::mem::replace(&mut self.1, Changes::Keys(BTreeSet::new())) {
            Changes::All => None,
            Changes::Keys(keys) => Some(keys.into_iter().collect()),
        }
    }

    fn touched(&mut self, key: &str) {
        if let Changes::Keys(keys) = &mut self.1 {
            keys.insert(key.to_owned());
        }
    }

    /// Number of records.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// Sets the record at `key`; true when that changed anything.
    pub(super) fn upsert(&mut self, key: &str, service: Service) -> bool {
        match self.find(key) {
            Ok(i) if self.0[i].1 == service => false,
            Ok(i) => {
                self.entries()[i].1 = service;
                self.touched(key);
                true
            }
            Err(i) => {
                self.entries().insert(i, (key.to_owned(), service));
                self.touched(key);
                true
            }
        }
    }

    /// Removes the record at `key`; true when there was one.
    pub(super) fn remove(&mut self, key: &str) -> bool {
        match self.find(key) {
            Ok(i) => {
                self.entries().remove(i);
                self.touched(key);
                true
            }
            Err(_) => false,
        }
    }

    /// Sets the TTL the record at `key` answers with; true when it changed.
    pub(super) fn set_ttl(&mut self, key: &str, ttl: u32) -> bool {
        match self.find(key) {
            Ok(i) if self.0[i].1.ttl != ttl => {
                self.entries()[i].1.ttl = ttl;
                self.touched(key);
                true
            }
            _ => false,
        }
    }

    /// The records whose key starts with `prefix`.
    pub(super) fn with_prefix(&self, prefix: &str) -> &[(String, Service)] {
        let start = self.0.partition_point(|(k, _)| k.as_str() < prefix);
        let len = self.0[start..].partition_point(|(k, _)| k.starts_with(prefix));
        &self.0[start..start + len]
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The vector, to change in place. The source never changes the table while a build holds
    /// it (changes wait for the build), so this never has to copy it.
    fn entries(&mut self) -> &mut Vec<(String, Service)> {
        Arc::make_mut(&mut self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str) -> Service {
        Service {
            host: h.into(),
            ..Service::default()
        }
    }

    fn keys(r: &Records) -> Vec<&str> {
        r.0.iter().map(|(k, _)| k.as_str()).collect()
    }

    fn table(keys: &[&str]) -> Records {
        let mut r = Records::default();
        for k in keys {
            r.upsert(k, Service::default());
        }
        r
    }

    #[test]
    fn changes_keep_key_order_and_report_whether_anything_changed() {
        let mut r = Records::default();
        assert!(r.upsert("/skydns/b", host("10.0.0.2")));
        assert!(r.upsert("/skydns/a", host("10.0.0.1")));
        assert!(r.upsert("/skydns/b", host("10.0.0.3")));
        assert_eq!(keys(&r), ["/skydns/a", "/skydns/b"]);
        assert_eq!(r.0[1].1.host, "10.0.0.3");
        assert!(r.upsert("/skydns/ab", host("10.0.0.4")));
        assert!(!r.upsert("/skydns/ab", host("10.0.0.4")));
        assert!(r.upsert("/skydns/ab", host("10.0.0.5")));
        assert_eq!(keys(&r), ["/skydns/a", "/skydns/ab", "/skydns/b"]);
        assert!(r.remove("/skydns/a"));
        assert!(!r.remove("/skydns/a"));
        assert!(r.set_ttl("/skydns/b", 5));
        assert!(!r.set_ttl("/skydns/b", 5));
        assert!(!r.set_ttl("/skydns/zz", 5));
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn a_new_table_is_built_whole_then_only_changed_keys_are_reported() {
        let mut r = table(&["/skydns/a", "/skydns/b"]);
        assert_eq!(r.take_changes(), None);
        assert_eq!(r.take_changes(), Some(vec![]));
        r.upsert("/skydns/b", host("10.0.0.1"));
        r.upsert("/skydns/b", host("10.0.0.1"));
        r.remove("/skydns/a");
        r.remove("/skydns/zz");
        r.upsert("/skydns/c", Service::default());
        r.set_ttl("/skydns/c", 9);
        assert_eq!(
            r.take_changes(),
            Some(vec![
                "/skydns/a".to_owned(),
                "/skydns/b".to_owned(),
                "/skydns/c".to_owned()
            ])
        );
        assert_eq!(r.take_changes(), Some(vec![]));
    }

    #[test]
    fn a_prefix_selects_one_contiguous_run() {
        let r = table(&["/skydns/a/x", "/skydns/a/y", "/skydns/a0", "/skydns/b", "/skydns/a"]);
        let run: Vec<_> = r.with_prefix("/skydns/a/").iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(run, ["/skydns/a/x", "/skydns/a/y"]);
        assert!(r.with_prefix("/skydns/c/").is_empty());
    }

    #[test]
    fn a_build_holding_the_table_keeps_its_version() {
        let mut r = Records::default();
        r.upsert("/skydns/a", host("10.0.0.1"));
        let held = r.shared();
        r.upsert("/skydns/a", host("10.0.0.2"));
        assert_eq!(held[0].1.host, "10.0.0.1");
        assert_eq!(r.0[0].1.host, "10.0.0.2");
    }
}
