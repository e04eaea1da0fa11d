//! The records the source holds: typed entries in the order the snapshot builder reads them
//! (by key path, see [`Entry::cmp_order`]), each behind an `Arc` that the snapshots' indexes
//! share, so that a record's key and strings exist once however many snapshots hold it.
//! A change finds its entry by binary search and touches only it; a build borrows the whole
//! table through an `Arc` without copying a record. A full read arrives in etcd's order, by key
//! bytes, which is not the order of paths (`web-1/…` sorts before `web/…` there, after it here):
//! a fresh table takes the read as it comes and is sorted once at its end. The keys changed since the last build are
//! kept, so that the next snapshot compiles only what they reach.

use skyline_dataplane::snapshot::skydns::{Entry, KeyPath};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Records in key-path order, below `/<prefix>/`.
#[derive(Debug, Clone)]
pub(super) struct Records {
    entries: Arc<Vec<Arc<Entry>>>,
    changes: Changes,
    /// The key prefix the entries' paths are relative to.
    prefix: String,
    /// A full read is filling the table: entries are appended as they come, sorted by
    /// [`Records::settle`].
    filling: bool,
}

/// What changed since the last build took the table.
#[derive(Debug, Clone)]
enum Changes {
    /// The table is new: no build has seen any of it.
    All,
    /// These keys were put, changed or deleted.
    Keys(BTreeSet<String>),
}

impl Records {
    /// An empty table of the records below `/<prefix>/`.
    pub(super) fn new(prefix: &str) -> Records {
        Records {
            entries: Arc::default(),
            changes: Changes::All,
            prefix: prefix.to_owned(),
            filling: true,
        }
    }

    /// Ends the fill of a full read: sorts the table, the last record of a key repeated in the
    /// read winning. Inserting each record of the read at its place instead would move every
    /// record after it, the square of the table in the worst case.
    pub(super) fn settle(&mut self) {
        if !std::mem::replace(&mut self.filling, false) {
            return;
        }
        let entries = self.entries();
        entries.sort_by(|a, b| a.cmp_order(b));
        let mut kept: Vec<Arc<Entry>> = Vec::with_capacity(entries.len());
        for entry in entries.drain(..) {
            match kept.last_mut() {
                Some(last) if last.cmp_order(&entry).is_eq() => *last = entry,
                _ => kept.push(entry),
            }
        }
        *entries = kept;
    }

    /// The table as the snapshot builder takes it, shared with the build.
    pub(super) fn shared(&self) -> Arc<Vec<Arc<Entry>>> {
        Arc::clone(&self.entries)
    }

    /// The keys changed since the last call, for a build that starts from the previous one's
    /// snapshot; `None` when the table is new and must be built whole.
    pub(super) fn take_changes(&mut self) -> Option<Vec<String>> {
        match std::mem::replace(&mut self.changes, Changes::Keys(BTreeSet::new())) {
            Changes::All => None,
            Changes::Keys(keys) => Some(keys.into_iter().collect()),
        }
    }

    fn touched(&mut self, key: &str) {
        if let Changes::Keys(keys) = &mut self.changes {
            keys.insert(key.to_owned());
        }
    }

    /// Number of records.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Sets the record at `key` (the key `entry` was made for); true when that changed anything.
    pub(super) fn upsert(&mut self, key: &str, entry: Entry) -> bool {
        if self.filling {
            self.entries().push(Arc::new(entry));
            return true;
        }
        match self.entries.binary_search_by(|e| e.cmp_order(&entry)) {
            Ok(i) if *self.entries[i] == entry => false,
            Ok(i) => {
                self.entries()[i] = Arc::new(entry);
                self.touched(key);
                true
            }
            Err(i) => {
                self.entries().insert(i, Arc::new(entry));
                self.touched(key);
                true
            }
        }
    }

    /// Removes the record at `key`; true when there was one.
    pub(super) fn remove(&mut self, key: &str) -> bool {
        match self.find(key) {
            Some(i) => {
                self.entries().remove(i);
                self.touched(key);
                true
            }
            None => false,
        }
    }

    /// Sets the TTL the record at `key` answers with; true when it changed. A record the
    /// current snapshot shares is copied, not changed under it.
    pub(super) fn set_ttl(&mut self, key: &str, ttl: u32) -> bool {
        match self.find(key) {
            Some(i) if self.entries[i].ttl() != ttl => {
                Arc::make_mut(&mut self.entries()[i]).set_ttl(ttl);
                self.touched(key);
                true
            }
            _ => false,
        }
    }

    /// The records whose key starts with `prefix` (which ends with a slash), with their keys,
    /// in key-path order; once the table is settled.
    pub(super) fn with_prefix(&self, prefix: &str) -> Vec<(String, &Entry)> {
        let Ok(Some(at)) = KeyPath::parse(prefix.trim_end_matches('/'), &self.prefix) else {
            return Vec::new();
        };
        let start = self.entries.partition_point(|e| e.cmp_key(&at).is_lt());
        self.entries[start..]
            .iter()
            .take_while(|e| e.path().starts_with(at.path()))
            .map(|e| (e.key(&self.prefix), &**e))
            .filter(|(key, _)| key.starts_with(prefix))
            .collect()
    }

    fn find(&self, key: &str) -> Option<usize> {
        let at = KeyPath::parse(key, &self.prefix).ok()??;
        match self.filling {
            // Only a value skipped in the read removes during the fill: rare enough to scan.
            true => self.entries.iter().rposition(|e| e.cmp_key(&at).is_eq()),
            false => self.entries.binary_search_by(|e| e.cmp_key(&at)).ok(),
        }
    }

    /// The vector, to change in place. The source never changes the table while a build holds
    /// it (changes wait for the build), but the served snapshot's index shares it: the first
    /// change after a build copies the table of pointers (8 bytes a record), not the records.
    fn entries(&mut self) -> &mut Vec<Arc<Entry>> {
        Arc::make_mut(&mut self.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skyline_dataplane::snapshot::skydns::Service;

    fn entry(key: &str, host: &str) -> Entry {
        let service = Service {
            host: host.into(),
            ..Service::default()
        };
        Entry::new(&KeyPath::parse(key, "skydns").unwrap().unwrap(), &service).unwrap()
    }

    fn upsert(r: &mut Records, key: &str, host: &str) -> bool {
        r.upsert(key, entry(key, host))
    }

    fn keys(r: &Records) -> Vec<String> {
        r.entries.iter().map(|e| e.key("skydns")).collect()
    }

    fn table(keys: &[&str]) -> Records {
        let mut r = Records::new("skydns");
        for k in keys {
            upsert(&mut r, k, "");
        }
        r.settle();
        r
    }

    fn settled() -> Records {
        let mut r = Records::new("skydns");
        r.settle();
        r
    }

    #[test]
    fn a_read_out_of_path_order_is_sorted_once_and_the_last_put_of_a_key_wins() {
        let mut r = Records::new("skydns");
        for (key, host) in [
            ("/skydns/web-1/a", "10.0.0.1"),
            ("/skydns/web/b", "10.0.0.2"),
            ("/skydns/web/a", "10.0.0.3"),
            ("/skydns/web/b", "10.0.0.4"),
            ("/skydns/bad", "10.0.0.5"),
        ] {
            assert!(upsert(&mut r, key, host));
        }
        assert!(r.remove("/skydns/bad"));
        r.settle();
        assert_eq!(keys(&r), ["/skydns/web/a", "/skydns/web/b", "/skydns/web-1/a"]);
        assert_eq!(host(&r, 1), "V4(10.0.0.4)");
        assert!(!upsert(&mut r, "/skydns/web/a", "10.0.0.3"));
        assert_eq!(r.take_changes(), None, "a filled table is built whole");
    }

    fn host(r: &Records, i: usize) -> String {
        format!("{:?}", r.entries[i].host())
    }

    #[test]
    fn changes_keep_key_order_and_report_whether_anything_changed() {
        let mut r = settled();
        assert!(upsert(&mut r, "/skydns/b", "10.0.0.2"));
        assert!(upsert(&mut r, "/skydns/a", "10.0.0.1"));
        assert!(upsert(&mut r, "/skydns/b", "10.0.0.3"));
        assert_eq!(keys(&r), ["/skydns/a", "/skydns/b"]);
        assert_eq!(host(&r, 1), "V4(10.0.0.3)");
        assert!(upsert(&mut r, "/skydns/ab", "10.0.0.4"));
        assert!(!upsert(&mut r, "/skydns/ab", "10.0.0.4"));
        assert!(upsert(&mut r, "/skydns/ab", "10.0.0.5"));
        assert!(upsert(&mut r, "/skydns/B", "10.0.0.6"));
        assert_eq!(keys(&r), ["/skydns/a", "/skydns/ab", "/skydns/B", "/skydns/b"]);
        assert!(r.remove("/skydns/a"));
        assert!(!r.remove("/skydns/a"));
        assert!(r.remove("/skydns/B"));
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
        upsert(&mut r, "/skydns/b", "10.0.0.1");
        upsert(&mut r, "/skydns/b", "10.0.0.1");
        r.remove("/skydns/a");
        r.remove("/skydns/zz");
        upsert(&mut r, "/skydns/c", "");
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
    fn a_prefix_selects_the_keys_that_start_with_it() {
        let r = table(&[
            "/skydns/a/x",
            "/skydns/a/y",
            "/skydns/a0",
            "/skydns/b",
            "/skydns/a",
            "/skydns/A/z",
            "/skydns/a/Y/w",
        ]);
        let run: Vec<_> = r.with_prefix("/skydns/a/").into_iter().map(|(k, _)| k).collect();
        assert_eq!(run, ["/skydns/a/x", "/skydns/a/y", "/skydns/a/Y/w"]);
        assert!(r.with_prefix("/skydns/c/").is_empty());
    }

    #[test]
    fn a_build_holding_the_table_keeps_its_version() {
        let mut r = settled();
        upsert(&mut r, "/skydns/a", "10.0.0.1");
        let held = r.shared();
        upsert(&mut r, "/skydns/a", "10.0.0.2");
        r.set_ttl("/skydns/a", 7);
        assert_eq!(format!("{:?}", held[0].host()), "V4(10.0.0.1)");
        assert_eq!(host(&r, 0), "V4(10.0.0.2)");
        let shared = r.shared();
        r.set_ttl("/skydns/a", 8);
        assert_eq!(
            (shared[0].ttl(), r.entries[0].ttl()),
            (7, 8),
            "a shared record is copied"
        );
    }
}
