//! The source's copy of the cluster, kept by watch events, and what happens to it on a re-list.
//!
//! A re-list (the first list, or one after a watch expired with 410 Gone) does not build a second
//! copy beside the first: the objects held so far move aside as *unconfirmed*, each listed object
//! takes its place (and drops its unconfirmed twin), and when the list is complete whatever is
//! still unconfirmed was deleted meanwhile and is dropped. At every moment each object is held
//! once. Snapshots are not built while a re-list is under way (see [`Mirror::is_settled`]), since
//! the objects not yet listed again are then missing from the live tables.
//!
//! Only the first list of a kind changes everything. A re-list notes what differs from what was
//! held, object by object as watch events do, and the deletions it finds when it ends: the
//! build after it updates the served snapshot where those changes reach, rather than building
//! a second snapshot of the whole cluster beside the first. A Namespace that comes or goes
//! changes the names of everything in it, no more.

use skyline_dataplane::snapshot::kubernetes::{
    Changes, Cluster, EndpointSlice, Names, ObjectKey, Objects, Pod, Service,
};
use std::collections::HashMap;
use std::hash::BuildHasher;

/// The kinds of objects watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Namespaces.
    Namespace,
    /// Services.
    Service,
    /// EndpointSlices.
    EndpointSlice,
    /// Pods.
    Pod,
}

impl Kind {
    /// Every kind, in `Kind::index` order.
    pub const ALL: [Kind; 4] = [Kind::Namespace, Kind::Service, Kind::EndpointSlice, Kind::Pod];

    fn index(self) -> usize {
        self as usize
    }
}

/// Starts a re-list of `live`: its entries become unconfirmed (joining any left from an
/// interrupted re-list).
fn begin<T: Default + IntoIterator + Extend<T::Item>>(live: &mut T, unconfirmed: &mut Option<T>) {
    let held = std::mem::take(live);
    match unconfirmed {
        Some(earlier) => earlier.extend(held),
        None => *unconfirmed = Some(held),
    }
}

/// The cluster as watched, with per-kind list state.
#[derive(Debug, Default)]
pub struct Mirror {
    /// The objects, as the builder reads them.
    pub cluster: Cluster,
    /// What changed since the last build.
    changes: Changes,
    listed: [bool; 4],
    namespaces: Option<Names>,
    services: Option<Objects<Service>>,
    slices: Option<Objects<EndpointSlice>>,
    pods: Option<Objects<Pod>>,
}

impl Mirror {
    /// A list of `kind` starts: what is held becomes unconfirmed. The first list of a kind
    /// changes everything.
    pub fn begin_list(&mut self, kind: Kind) {
        self.changes.full |= !self.is_listed(kind);
        let c = &mut self.cluster;
        match kind {
            Kind::Namespace => begin(&mut c.namespaces, &mut self.namespaces),
            Kind::Service => begin(&mut c.services, &mut self.services),
            Kind::EndpointSlice => begin(&mut c.slices, &mut self.slices),
            Kind::Pod => begin(&mut c.pods, &mut self.pods),
        }
    }

    /// A list of `kind` is complete: what was not listed again is gone, a change like a
    /// deletion seen by a watch.
    pub fn end_list(&mut self, kind: Kind) {
        let (cluster, changes) = (&self.cluster, &mut self.changes);
        match kind {
            Kind::Namespace => {
                for name in self.namespaces.take().into_iter().flatten() {
                    changes.namespace(cluster, &name, true);
                }
            }
            Kind::Service => {
                for (key, old) in self.services.take().into_iter().flatten() {
                    changes.service(cluster, &key, Some(&old));
                }
            }
            Kind::EndpointSlice => {
                for (key, old) in self.slices.take().into_iter().flatten() {
                    changes.slice(cluster, &key, Some(&old));
                }
            }
            Kind::Pod => {
                for (key, old) in self.pods.take().into_iter().flatten() {
                    changes.pod(&key, Some(&old));
                }
            }
        }
        self.listed[kind.index()] = true;
    }

    /// Whether `kind` has been listed completely at least once.
    pub fn is_listed(&self, kind: Kind) -> bool {
        self.listed[kind.index()]
    }

    /// Whether no re-list is under way, so that the live tables hold every object.
    pub fn is_settled(&self) -> bool {
        self.namespaces.is_none() && self.services.is_none() && self.slices.is_none() && self.pods.is_none()
    }

    /// A Namespace exists (listed or added). Returns whether that is news.
    pub fn put_namespace(&mut self, name: Box<str>) -> bool {
        let confirmed = self
            .namespaces
            .as_mut()
            .is_some_and(|unconfirmed| unconfirmed.remove(&name));
        let added = self.cluster.namespaces.insert(name.clone()) && !confirmed;
        if added {
            self.changes.namespace(&self.cluster, &name, false);
        }
        added
    }

    /// A Namespace is gone. Returns whether it was there.
    pub fn remove_namespace(&mut self, name: &str) -> bool {
        let unconfirmed = self
            .namespaces
            .as_mut()
            .is_some_and(|unconfirmed| unconfirmed.remove(name));
        let removed = self.cluster.namespaces.remove(name) || unconfirmed;
        if removed {
            self.changes.namespace(&self.cluster, name, true);
        }
        removed
    }

    /// A Service is listed, added or changed; `None` means it cannot answer any more. Returns
    /// whether anything DNS reads changed.
    pub fn put_service(&mut self, key: ObjectKey, service: Option<Service>) -> bool {
        let old = put(&mut self.cluster.services, &mut self.services, key.clone(), service);
        let new = self.cluster.services.get(&key);
        if old.as_ref() == new {
            return false;
        }
        self.changes.service(&self.cluster, &key, old.as_ref());
        true
    }

    /// An EndpointSlice is listed, added or changed; `None` means DNS does not read it. Returns
    /// whether anything DNS reads changed.
    pub fn put_slice(&mut self, key: ObjectKey, slice: Option<EndpointSlice>) -> bool {
        let old = put(&mut self.cluster.slices, &mut self.slices, key.clone(), slice);
        let new = self.cluster.slices.get(&key);
        if old.as_ref() == new {
            return false;
        }
        self.changes.slice(&self.cluster, &key, old.as_ref());
        true
    }

    /// A Pod is listed, added or changed; `None` means it does not answer (terminating, over).
    /// Returns whether its address changed.
    pub fn put_pod(&mut self, key: ObjectKey, pod: Option<Pod>) -> bool {
        let old = put(&mut self.cluster.pods, &mut self.pods, key.clone(), pod);
        let changed = old.as_ref() != self.cluster.pods.get(&key);
        if changed {
            self.changes.pod(&key, old.as_ref());
        }
        changed
    }

    /// An object of `kind` is gone. Returns whether DNS held it.
    pub fn remove(&mut self, kind: Kind, key: &ObjectKey) -> bool {
        match kind {
            Kind::Namespace => self.remove_namespace(&key.name),
            Kind::Service => self.put_service(key.clone(), None),
            Kind::EndpointSlice => self.put_slice(key.clone(), None),
            Kind::Pod => self.put_pod(key.clone(), None),
        }
    }

    /// What changed since the last call, for the next build; call it only while settled.
    pub fn take_changes(&mut self) -> Changes {
        let mut changes = std::mem::take(&mut self.changes);
        changes.settle(&self.cluster);
        changes
    }
}

/// Stores `value` under `key` (removes it when `None`) and returns what was held before,
/// confirmed or not.
fn put<V, S: BuildHasher + Default>(
    live: &mut HashMap<ObjectKey, V, S>,
    unconfirmed: &mut Option<HashMap<ObjectKey, V, S>>,
    key: ObjectKey,
    value: Option<V>,
) -> Option<V> {
    let earlier = unconfirmed.as_mut().and_then(|u| u.remove(&key));
    let held = match value {
        Some(value) => live.insert(key, value),
        None => live.remove(&key),
    };
    held.or(earlier)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skyline_dataplane::snapshot::kubernetes::{Endpoint, ServiceKind};

    fn service() -> Option<Service> {
        Some(Service {
            kind: ServiceKind::Headless,
            ports: Box::new([]),
        })
    }

    #[test]
    fn a_relist_replaces_the_objects_without_copying_them() {
        let mut m = Mirror::default();
        m.begin_list(Kind::Service);
        m.put_service(ObjectKey::new("ns", "a"), service());
        m.put_service(ObjectKey::new("ns", "b"), service());
        m.end_list(Kind::Service);
        assert!(m.is_listed(Kind::Service) && m.is_settled());

        m.begin_list(Kind::Service);
        assert!(!m.is_settled());
        assert!(m.cluster.services.is_empty(), "held objects moved aside, not copied");
        m.put_service(ObjectKey::new("ns", "b"), service());
        m.put_service(ObjectKey::new("ns", "c"), service());
        assert_eq!(m.services.as_ref().map(HashMap::len), Some(1), "only a is unconfirmed");
        m.end_list(Kind::Service);
        let mut names: Vec<&str> = m.cluster.services.keys().map(|k| &*k.name).collect();
        names.sort_unstable();
        assert_eq!(names, ["b", "c"], "a was deleted while the watch was away");
        assert!(m.is_settled());
    }

    #[test]
    fn an_interrupted_relist_keeps_everything_unconfirmed() {
        let mut m = Mirror::default();
        m.begin_list(Kind::Namespace);
        m.put_namespace("one".into());
        m.put_namespace("two".into());
        m.end_list(Kind::Namespace);
        m.begin_list(Kind::Namespace);
        m.put_namespace("one".into());
        m.begin_list(Kind::Namespace);
        m.put_namespace("two".into());
        m.end_list(Kind::Namespace);
        let mut names: Vec<&str> = m.cluster.namespaces.iter().map(|n| &**n).collect();
        names.sort_unstable();
        assert_eq!(names, ["two"]);
    }

    #[test]
    fn deletions_reach_both_tables() {
        let mut m = Mirror::default();
        m.begin_list(Kind::Service);
        m.put_service(ObjectKey::new("ns", "a"), service());
        m.end_list(Kind::Service);
        m.begin_list(Kind::Service);
        m.remove(Kind::Service, &ObjectKey::new("ns", "a"));
        m.end_list(Kind::Service);
        assert!(m.cluster.services.is_empty());
    }

    fn slice_of(service: &str, addresses: &[&str]) -> Option<EndpointSlice> {
        Some(EndpointSlice {
            service: service.into(),
            ports: Box::new([]),
            endpoints: addresses
                .iter()
                .map(|address| Endpoint {
                    address: address.parse().unwrap(),
                    hostname: None,
                    pod: None,
                })
                .collect(),
        })
    }

    fn cluster_ip(address: &str) -> Option<Service> {
        Some(Service {
            kind: ServiceKind::ClusterIp(vec![address.parse().unwrap()].into()),
            ports: Box::new([]),
        })
    }

    fn listed(m: &mut Mirror, kind: Kind, put: impl FnOnce(&mut Mirror)) {
        m.begin_list(kind);
        put(m);
        m.end_list(kind);
    }

    fn sorted(changes: &Changes) -> (Vec<String>, Vec<String>) {
        let mut services: Vec<String> = changes
            .services
            .iter()
            .map(|k| format!("{}/{}", k.namespace, k.name))
            .collect();
        let mut addresses: Vec<String> = changes.addresses.iter().map(ToString::to_string).collect();
        services.sort();
        addresses.sort();
        (services, addresses)
    }

    #[test]
    fn a_relist_changes_what_differs_and_what_it_no_longer_finds() {
        let mut m = Mirror::default();
        listed(&mut m, Kind::Namespace, |m| {
            m.put_namespace("ns".into());
        });
        listed(&mut m, Kind::Service, |m| {
            for (name, address) in [("same", "10.96.0.1"), ("moved", "10.96.0.2"), ("gone", "10.96.0.3")] {
                m.put_service(ObjectKey::new("ns", name), cluster_ip(address));
            }
        });
        listed(&mut m, Kind::EndpointSlice, |m| {
            m.put_slice(ObjectKey::new("ns", "same-a"), slice_of("same", &["10.1.0.1"]));
            m.put_slice(ObjectKey::new("ns", "moved-a"), slice_of("moved", &["10.1.0.2"]));
            m.put_slice(ObjectKey::new("ns", "gone-a"), slice_of("gone", &["10.1.0.3"]));
        });
        assert!(m.take_changes().full, "the first lists change everything");

        listed(&mut m, Kind::Namespace, |m| {
            assert!(!m.put_namespace("ns".into()), "a namespace listed again is no news");
        });
        // Both lists run at once and the slices' ends first: `moved`'s slice is seen while its
        // service is not listed again yet, and the change must still reach its cluster IP.
        listed(&mut m, Kind::Service, |m| {
            listed(m, Kind::EndpointSlice, |m| {
                assert!(!m.put_slice(ObjectKey::new("ns", "same-a"), slice_of("same", &["10.1.0.1"])));
                assert!(m.put_slice(ObjectKey::new("ns", "moved-a"), slice_of("moved", &["10.1.0.9"])));
            });
            assert!(!m.put_service(ObjectKey::new("ns", "same"), cluster_ip("10.96.0.1")));
            assert!(!m.put_service(ObjectKey::new("ns", "moved"), cluster_ip("10.96.0.2")));
        });
        assert!(m.is_settled());
        let changes = m.take_changes();
        assert!(!changes.full, "a re-list is not a change of everything");
        assert_eq!(
            sorted(&changes),
            (
                vec!["ns/gone".to_owned(), "ns/moved".to_owned()],
                ["10.1.0.2", "10.1.0.3", "10.1.0.9", "10.96.0.2", "10.96.0.3"]
                    .map(str::to_owned)
                    .to_vec()
            )
        );
        assert!(changes.before.services.contains_key(&ObjectKey::new("ns", "gone")));
        assert!(changes.before.slices.contains_key(&ObjectKey::new("ns", "gone-a")));

        listed(&mut m, Kind::Namespace, |_| {});
        let changes = m.take_changes();
        assert!(!changes.full, "a namespace gone changes what is in it");
        assert_eq!(changes.namespaces.get("ns"), Some(&true), "it existed");
        assert_eq!(sorted(&changes).0, ["ns/moved", "ns/same"]);
    }

    #[test]
    fn a_namespace_gone_while_its_services_list_again_takes_them_along() {
        let mut m = Mirror::default();
        listed(&mut m, Kind::Namespace, |m| {
            m.put_namespace("ns".into());
            m.put_namespace("other".into());
        });
        listed(&mut m, Kind::Service, |m| {
            m.put_service(ObjectKey::new("ns", "web"), cluster_ip("10.96.0.1"));
            m.put_service(ObjectKey::new("other", "db"), cluster_ip("10.96.0.2"));
        });
        listed(&mut m, Kind::EndpointSlice, |m| {
            m.put_slice(ObjectKey::new("ns", "web-a"), slice_of("web", &["10.1.0.1"]));
        });
        m.take_changes();
        // The Services list again; before they are back, the Namespace list ends without `ns`.
        listed(&mut m, Kind::Service, |m| {
            listed(m, Kind::Namespace, |m| {
                m.put_namespace("other".into());
            });
            assert!(!m.put_service(ObjectKey::new("ns", "web"), cluster_ip("10.96.0.1")));
            assert!(!m.put_service(ObjectKey::new("other", "db"), cluster_ip("10.96.0.2")));
        });
        let changes = m.take_changes();
        assert!(!changes.full);
        assert_eq!(
            sorted(&changes),
            (
                vec!["ns/web".to_owned()],
                vec!["10.1.0.1".to_owned(), "10.96.0.1".to_owned()]
            ),
            "the gone namespace's service and its addresses, seen once every list ended"
        );
    }

    #[test]
    fn changes_name_the_services_and_addresses_they_reach() {
        let mut m = Mirror::default();
        m.begin_list(Kind::EndpointSlice);
        m.end_list(Kind::EndpointSlice);
        assert!(m.take_changes().full, "a list changes everything");
        let key = ObjectKey::new("ns", "web-abc");
        assert!(m.put_slice(key.clone(), slice_of("web", &["10.0.0.1"])));
        assert!(
            !m.put_slice(key.clone(), slice_of("web", &["10.0.0.1"])),
            "no news, no change"
        );
        assert!(m.put_slice(key.clone(), slice_of("web", &["10.0.0.2"])));
        let changes = m.take_changes();
        assert!(!changes.full);
        assert!(changes.services.contains(&ObjectKey::new("ns", "web")));
        let mut addresses: Vec<String> = changes.addresses.iter().map(ToString::to_string).collect();
        addresses.sort();
        assert_eq!(addresses, ["10.0.0.1", "10.0.0.2"]);
        assert!(m.put_service(ObjectKey::new("ns", "web"), service()));
        let changes = m.take_changes();
        assert!(
            changes.addresses.iter().any(|a| a.to_string() == "10.0.0.2"),
            "its endpoints' PTRs"
        );
    }
}
