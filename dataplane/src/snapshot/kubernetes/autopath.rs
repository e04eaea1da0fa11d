//! What the search of CoreDNS's `autopath @kubernetes` needs from the cluster
//! (docs/kubernetes.md, "Autopath"): the namespace of the pod behind each client address, the
//! cluster's forward zones and the host's search domains. A pod's resolv.conf lists
//! `<ns>.svc.<zone>`, `svc.<zone>`, `<zone>` and the host's domains, and with `ndots:5` asks
//! each in turn for every name outside the cluster; knowing the client's namespace, the server
//! walks the same list at the first question and answers it with what the last would give.

use super::config::{Config, PodMode};
use super::model::Cluster;
use crate::wire::Name;
use foldhash::fast::RandomState;
use std::collections::HashMap;
use std::net::IpAddr;

/// The pods by address and the search list's parts; in a snapshot only when autopath is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Autopath {
    /// The namespace of the pod with each address, as one wire label (length byte first), so
    /// that a query's name is compared with `<ns>.svc.<zone>` without building that name.
    pods: HashMap<IpAddr, Box<[u8]>, RandomState>,
    /// The forward zones the search applies in.
    zones: Box<[Name]>,
    /// The host's search domains, tried after the cluster's own.
    search: Box<[Name]>,
}

impl Autopath {
    /// The search tables of `cluster` under `config`; `None` unless autopath is on with verified
    /// pods, the only mode in which the pods, and so the clients' namespaces, are known.
    pub fn new(config: &Config, cluster: &Cluster) -> Option<Autopath> {
        let search = config.autopath.as_ref()?;
        if config.pods != PodMode::Verified {
            return None;
        }
        let mut pods: HashMap<IpAddr, Box<[u8]>, RandomState> = HashMap::default();
        // Pods sharing an address (host-network pods share their node's) resolve to the first
        // namespace in order, so that the answer does not depend on the order of a hash map.
        for (key, pod) in &cluster.pods {
            let Ok(label) = u8::try_from(key.namespace.len()) else {
                continue;
            };
            if key.namespace.is_empty() || label > 63 {
                continue;
            }
            let wire: Box<[u8]> = [&[label][..], key.namespace.as_bytes()].concat().into();
            pods.entry(pod.address)
                .and_modify(|kept| {
                    if wire[1..] < kept[1..] {
                        kept.clone_from(&wire);
                    }
                })
                .or_insert(wire);
        }
        Some(Autopath {
            pods,
            zones: config.forward_zones().cloned().collect(),
            search: search.clone().into(),
        })
    }

    /// The namespace of the pod at `client`, as a wire label.
    #[inline]
    pub fn namespace(&self, client: IpAddr) -> Option<&[u8]> {
        self.pods.get(&client).map(|label| &**label)
    }

    /// Whether the search applies to names of the zone `apex`: a cluster forward zone.
    #[inline]
    pub fn serves(&self, apex: &Name) -> bool {
        self.zones.contains(apex)
    }

    /// The host's search domains, in the order they are tried.
    pub fn search(&self) -> &[Name] {
        &self.search
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::kubernetes::{ObjectKey, Pod};
    use std::net::Ipv4Addr;

    fn cluster(pods: &[(&str, &str, [u8; 4])]) -> Cluster {
        let mut cluster = Cluster::default();
        for &(ns, name, address) in pods {
            cluster.pods.insert(
                ObjectKey::new(ns, name),
                Pod {
                    address: IpAddr::V4(Ipv4Addr::from(address)),
                },
            );
        }
        cluster
    }

    fn config(pods: PodMode, autopath: Option<Vec<Name>>) -> Config {
        Config {
            pods,
            autopath,
            ..Config::default()
        }
    }

    #[test]
    fn autopath_needs_both_the_setting_and_verified_pods() {
        let cluster = cluster(&[("testns", "web", [10, 0, 0, 1])]);
        assert!(Autopath::new(&config(PodMode::Verified, None), &cluster).is_none());
        assert!(Autopath::new(&config(PodMode::Insecure, Some(Vec::new())), &cluster).is_none());
        assert!(Autopath::new(&config(PodMode::Verified, Some(Vec::new())), &cluster).is_some());
    }

    #[test]
    fn a_client_is_known_by_its_pod_address_and_only_that() {
        let cluster = cluster(&[("testns", "web", [10, 0, 0, 1])]);
        let autopath = Autopath::new(&config(PodMode::Verified, Some(Vec::new())), &cluster).unwrap();
        assert_eq!(autopath.namespace([10, 0, 0, 1].into()), Some(&b"\x06testns"[..]));
        assert_eq!(autopath.namespace([10, 0, 0, 2].into()), None);
    }

    #[test]
    fn pods_sharing_an_address_give_the_first_namespace_in_order() {
        let cluster = cluster(&[("zeta", "a", [10, 0, 0, 9]), ("alpha", "b", [10, 0, 0, 9])]);
        let autopath = Autopath::new(&config(PodMode::Verified, Some(Vec::new())), &cluster).unwrap();
        assert_eq!(autopath.namespace([10, 0, 0, 9].into()), Some(&b"\x05alpha"[..]));
    }

    #[test]
    fn the_search_applies_in_the_forward_zones_only() {
        let autopath = Autopath::new(&config(PodMode::Verified, Some(Vec::new())), &Cluster::default()).unwrap();
        assert!(autopath.serves(&Name::from_dotted("cluster.local.").unwrap()));
        assert!(!autopath.serves(&Name::from_dotted("in-addr.arpa.").unwrap()));
    }
}
